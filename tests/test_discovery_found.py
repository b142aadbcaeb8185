"""law_blocks on families it was never tuned on (issue 37): each block's count against an independent count, the engine on a
forward of that block written here in plain torch (or the module called by hand, in the layout written here), never against
the library's own answer. One-layer float64 models from configs (nothing downloaded)."""
import math, warnings
import pytest, torch
import torch.nn.functional as F
from torch.func import functional_call
from conslaw_nb.engine.count import count_laws
from conslaw_nb.engine import check_laws
from conslaw_nb.engine.core import law_tol
from conslaw_nb.discovery.found import law_blocks, tiny_transformer, transformer_blocks

transformers = pytest.importorskip('transformers')
warnings.filterwarnings('ignore', message='law_blocks')

def gauss(*shape): return lambda n, g: torch.randn(n, *shape, generator=g, dtype=torch.float64)
def params(m): return {k: v.detach().double().clone() for k, v in m.named_parameters()}
def count(f, P, inputs):
    c = count_laws(f, P, inputs, progress=False)
    assert c.status == 'ok', c.reason
    return c.n_laws

def heads(X, H): return X.unflatten(-1, (H, -1)).transpose(0, 1)            # (T, H·dh) -> (H, T, dh)
def attend(q, k, v, scale=1., causal=False):
    s = q @ k.mT*scale
    if causal: s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float('-inf'))
    return (s.softmax(-1) @ v).transpose(0, 1).flatten(1)                  # (T, H·dh)
def lin(P, n, x): return x @ P[n + '.weight'].T + (P[n + '.bias'] if n + '.bias' in P else 0)

T, d, H = 4, 4, 2
@pytest.fixture(scope='module')
def bart():
    m = tiny_transformer('bart', d_model=d, encoder_layers=1, decoder_layers=1, encoder_attention_heads=H, decoder_attention_heads=H,
                         encoder_ffn_dim=3, decoder_ffn_dim=3, max_position_embeddings=16)
    return m, dict(law_blocks(m))

def test_bart_cross_attention_memory_is_an_input(bart):
    "The encoder memory is drawn fresh with the hidden states: the count is the block's, and its laws hold with fresh memory"
    m, B = bart
    a = B['decoder.layers.0.encoder_attn']
    blk = m.decoder.layers[0].encoder_attn
    dh = d//H
    def f(P, x):                                           # x = (decoder states (T, d), encoder memory (S, d)) flattened
        h, mem = x[:T*d].view(T, d), x[T*d:].view(T, d)
        q, k, v = heads(lin(P, 'q_proj', h)*dh**-.5, H), heads(lin(P, 'k_proj', mem), H), heads(lin(P, 'v_proj', mem), H)
        return lin(P, 'out_proj', attend(q, k, v)).reshape(-1)
    P = params(blk)
    with torch.no_grad():                                  # the plain forward is the block's own (one example, fresh memory)
        x = torch.randn(2*T*d, dtype=torch.float64)
        y = blk.double()(x[:T*d].view(1, T, d), key_value_states=x[T*d:].view(1, T, d))[0][0]
    torch.testing.assert_close(f(P, x).view(T, d), y)
    assert a.n_laws == count(f, P, gauss(2*T*d))
    assert check_laws(a.laws, f, a.params, gauss(2*T*d)).max_rel <= law_tol()
    frozen = lambda P, x: f(P, torch.cat([x.reshape(-1), torch.linspace(-1, 1, T*d, dtype=torch.float64)]))
    assert count(frozen, P, gauss(T, d)) > a.n_laws       # a frozen memory would have counted more laws than the block has

def test_bart_and_opt_loose_mlps(bart):
    "fc1/fc2 sitting loose in the layer: read as one MLP (GELU: no laws; OPT's ReLU: one per hidden unit, Thm of ReLU nets)"
    m, B = bart
    P = params(m.encoder.layers[0].fc1) | {'2.' + k: v for k, v in params(m.encoder.layers[0].fc2).items()}
    P = {('0.' + k if not k.startswith('2.') else k): v for k, v in P.items()}
    f = lambda P, x: lin(P, '2', F.gelu(lin(P, '0', x)))
    assert B['encoder.layers.0'].n_laws == count(f, P, gauss(d)) == 0
    opt = tiny_transformer('opt', hidden_size=d, num_attention_heads=H, ffn_dim=3, word_embed_proj_dim=d, max_position_embeddings=16)
    a = dict(law_blocks(opt))['decoder.layers.0']
    L = opt.decoder.layers[0]
    P = {'0.' + k: v for k, v in params(L.fc1).items()} | {'2.' + k: v for k, v in params(L.fc2).items()}
    f = lambda P, x: lin(P, '2', torch.relu(lin(P, '0', x)))
    assert a.n_laws == count(f, P, gauss(d)) == 3

def test_xlnet_sequence_first():
    "XLNet's hidden states are (T, batch, d): the block is counted at the T the model uses, called here by hand in that layout"
    m = tiny_transformer('xlnet', d_model=d, n_layer=1, n_head=H, d_inner=3)
    a = dict(law_blocks(m))['layer.0.rel_attn']
    blk = m.layer[0].rel_attn
    r = m.relative_positional_encoding(T, T, bsz=1).double()
    f = lambda P, x: functional_call(blk, P, (x[:, None], None, None, None, r, None))[0][:, 0]
    assert (a.meta['T'], a.n_laws) == (T, count(f, params(blk), gauss(T, d)))
    assert a.n_laws == 28                                # the independent count at T = 4

def t5_norm(P, n, x): return x*torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)*P[n]

def test_t5_encoder_decoder():
    "T5Model: decoder inputs are given, every block is read; cross-attention (memory an input) and the FF checked by hand"
    m = tiny_transformer('t5', d_model=d, d_kv=2, num_heads=H, d_ff=3, num_layers=1, num_decoder_layers=1)
    B = law_blocks(m)
    assert not B.skipped, B.skipped
    assert [p for p, _ in B] == ['encoder.block.0.layer.0', 'encoder.block.0.layer.1', 'decoder.block.0.layer.0',
                                 'decoder.block.0.layer.1', 'decoder.block.0.layer.2']
    B = dict(B)
    cross = m.decoder.block[0].layer[1]
    def f(P, x):
        h, mem = x[:T*d].view(T, d), x[T*d:].view(T, d)
        n = t5_norm(P, 'layer_norm.weight', h)
        q, k, v = (heads(lin(P, f'EncDecAttention.{w}', z), H) for w, z in (('q', n), ('k', mem), ('v', mem)))
        return (h + lin(P, 'EncDecAttention.o', attend(q, k, v))).reshape(-1)
    assert B['decoder.block.0.layer.1'].n_laws == count(f, params(cross), gauss(2*T*d))
    ff = m.encoder.block[0].layer[1]
    g = lambda P, x: x + lin(P, 'DenseReluDense.wo', torch.relu(lin(P, 'DenseReluDense.wi', t5_norm(P, 'layer_norm.weight', x))))
    assert B['encoder.block.0.layer.1'].n_laws == count(g, params(ff), gauss(d))

def test_t5_encoder_and_albert_nested_layers():
    "T5EncoderModel's `layer` lists and ALBERT's shared layer groups are walked: no block lost"
    enc = tiny_transformer('t5', d_model=d, d_kv=2, num_heads=H, d_ff=3, num_layers=1)
    enc = transformers.T5EncoderModel(enc.config).double().eval()
    from conslaw_nb.hf.adapters import init_generic
    init_generic(enc)
    B = law_blocks(enc)
    assert [p for p, _ in B] == ['encoder.block.0.layer.0', 'encoder.block.0.layer.1'] and not B.skipped
    al = tiny_transformer('albert', hidden_size=d, num_attention_heads=H, intermediate_size=3, embedding_size=d, max_position_embeddings=16)
    B = law_blocks(al)
    assert not B.skipped, B.skipped
    B = dict(B)
    L = al.encoder.albert_layer_groups[0].albert_layers[0]
    def att(P, x):
        q, k, v = (heads(lin(P, n, x), H) for n in ('query', 'key', 'value'))
        return F.layer_norm(x + lin(P, 'dense', attend(q, k, v, (d//H)**-.5)), (d,), P['LayerNorm.weight'], P['LayerNorm.bias'],
                            L.attention.LayerNorm.eps)
    pre = 'encoder.albert_layer_groups.0.albert_layers.0'
    assert B[pre + '.attention'].n_laws == count(att, params(L.attention), gauss(T, d))
    P = {'0.' + k: v for k, v in params(L.ffn).items()} | {'2.' + k: v for k, v in params(L.ffn_output).items()}
    mlp = lambda P, x: lin(P, '2', L.activation(lin(P, '0', x)))
    assert B[pre].n_laws == count(mlp, P, gauss(d))

def test_bloom_mlp_custom_gelu():
    "BLOOM's MLP runs its GELU through a custom autograd.Function; under exact_ops it is differentiated through its forward"
    m = tiny_transformer('bloom', hidden_size=d, n_head=H, n_layer=1)
    B = law_blocks(m)
    assert not B.skipped, B.skipped
    mlp = m.h[0].mlp
    tanh_gelu = lambda z: z*.5*(1 + torch.tanh(0.79788456*z*(1 + 0.044715*z*z)))
    f = lambda P, x: lin(P, 'dense_4h_to_h', tanh_gelu(lin(P, 'dense_h_to_4h', x)))
    assert dict(B)['h.0.mlp'].n_laws == count(f, params(mlp), gauss(d))

def test_mamba_mixer():
    "Mamba's mixer is read as a sequence block; its count equals the mixer called here by hand on (1, T, d)"
    m = tiny_transformer('mamba', hidden_size=d, state_size=2, expand=2, conv_kernel=2, num_hidden_layers=1)
    a = dict(law_blocks(m))['layers.0.mixer']
    blk = m.layers[0].mixer
    f = lambda P, x: functional_call(blk, P, (x[None],))[0]
    assert a.family == 'mixer' and a.n_laws == count(f, params(blk), gauss(T, d))

def rope(x, base=10000.):
    "rotate_half RoPE on (H, T, dh)"
    dh = x.shape[-1]
    ang = torch.arange(x.shape[-2], dtype=torch.float64)[:, None]*base**(-torch.arange(0, dh, 2, dtype=torch.float64)/dh)
    cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
    return x*cos + torch.cat([-x[..., dh//2:], x[..., :dh//2]], -1)*sin

def test_olmo2_attention_norm_over_projection():
    "OLMo2's q/k RMSNorm over the whole projection: 24 laws at d = 8 (the issue's count), named by find_laws and holding"
    D8 = 8
    m = tiny_transformer('olmo2', hidden_size=D8, num_attention_heads=2, num_key_value_heads=2, intermediate_size=3)
    a = dict(law_blocks(m))['layers.0.self_attn']
    att = m.layers[0].self_attn
    eps = att.q_norm.variance_epsilon
    def f(P, x):
        nq = lambda z, w: z*torch.rsqrt(z.pow(2).mean(-1, keepdim=True) + eps)*P[w]
        q, k = rope(heads(nq(lin(P, 'q_proj', x), 'q_norm.weight'), 2)), rope(heads(nq(lin(P, 'k_proj', x), 'k_norm.weight'), 2))
        return lin(P, 'o_proj', attend(q, k, heads(lin(P, 'v_proj', x), 2), (D8//2)**-.5, causal=True))
    P = params(att)
    assert a.n_laws == count(f, P, gauss(T, D8)) == 24
    assert a.meta['found'] == 24 and check_laws(a.laws, f, a.params, gauss(T, D8)).max_rel <= law_tol()

def test_refusals_name_cause_loss_and_next_step():
    "A block law_blocks cannot read is listed with its class, the cause, what is lost and what to do"
    m = tiny_transformer('bart', d_model=d, encoder_layers=1, decoder_layers=1, encoder_attention_heads=H, decoder_attention_heads=H,
                         encoder_ffn_dim=3, decoder_ffn_dim=3, max_position_embeddings=16)
    B = law_blocks(m, count_max_D=20)                       # every block is past this D: read on twins, or refused saying why
    assert [p for p, _ in B] == ['encoder.layers.0.self_attn', 'encoder.layers.0', 'decoder.layers.0']   # carried from twins
    assert all(a.meta['theory'] == 'carried' for _, a in B)
    assert len(B.skipped) == 2                                # the decoder's attentions: their heads are decoder_attention_heads,
    for p, r in B.skipped:                                    # which the config's num_attention_heads (the encoder's) does not set
        assert 'heads' in r and 'Lost: the laws of its' in r and 'Next:' in r, (p, r)

def test_whisper_audio_features_and_cross_attention():
    "A Whisper-style model: example audio features and decoder ids; the decoder's cross-attention takes the encoder memory as input"
    m = tiny_transformer('whisper', d_model=d, encoder_layers=1, decoder_layers=1, encoder_attention_heads=H, decoder_attention_heads=H,
                         encoder_ffn_dim=3, decoder_ffn_dim=3, num_mel_bins=2, max_source_positions=T, max_target_positions=8)
    B = law_blocks(m)
    assert not B.skipped and len(B) == 5, (B, B.skipped)
    a = dict(B)['decoder.layers.0.encoder_attn']
    assert a.inputs(1, torch.Generator().manual_seed(0)).shape == (1, 2*T*d)   # decoder states and memory, drawn together

def test_gpt2_fused_attention_stated_and_counted():
    """GPT-2's fused c_attn read by adapt's stated theory: H·(dk(dk+1)/2 + dk + dv(dv+1)/2) laws, the engine's count of a plain
    causal forward written here, and the stated laws hold on it"""
    d12, H3 = 12, 3
    m = tiny_transformer('gpt2', n_embd=d12, n_head=H3)
    B = dict(law_blocks(m))
    a, mlp = B['h.0.attn'], B['h.0.mlp']
    assert a.meta.get('theory', 'stated') == 'stated' and mlp.meta.get('theory', 'stated') == 'stated' and mlp.n_laws == 0
    dk = d12//H3
    def f(P, x):
        qkv = x @ P['c_attn.weight'] + P['c_attn.bias']
        q, k, v = (heads(z, H3) for z in qkv.split(d12, -1))
        return attend(q, k, v, dk**-.5, causal=True) @ P['c_proj.weight'] + P['c_proj.bias']
    P = params(m.h[0].attn)
    assert a.n_laws == count(f, P, gauss(T, d12)) == H3*(dk*(dk + 1)//2 + dk + dk*(dk + 1)//2)
    assert check_laws(a.laws, f, a.params, gauss(T, d12)).max_rel <= law_tol()
