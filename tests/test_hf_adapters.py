"""Real modules in: PyTorch's own attention layers and transformers' blocks (tiny random configs, never the hub),
counted as they are or through `adapters.adapt`, at two sizes, with the laws the adapter states checked."""
import pytest, torch
from torch import nn
from conslaw_nb.engine.count import count_laws
from conslaw_nb.engine import check_laws
from conslaw_nb.hf.adapters import adapt, init_generic, STRUCTURES
from conslaw_nb.hf import NotStated
from conslaw_nb.zoo import module_zoo
from conslaw_nb.discovery.found import law_blocks, adapt_found, tiny_transformer, TINY_CONFIGS

transformers = pytest.importorskip('transformers')

def seqs(T, d): return lambda n, g: torch.randn(n, T, d, generator=g, dtype=torch.float64)

class SelfAttention(nn.Module):
    "the only wrapper nn.MultiheadAttention needs: x as query, key and value"
    def __init__(self, a): super().__init__(); self.a = a
    def forward(self, x): return self.a(x, x, x, need_weights=False)[0]

def test_torch_multihead_attention_as_it_is():
    torch.manual_seed(0)
    c = count_laws(SelfAttention(nn.MultiheadAttention(4, 2, bias=False, batch_first=True)), None, seqs(3, 4))
    assert (c.status, c.n_laws) == ('ok', 2*(3 + 3))      # H (dk(dk+1)/2 + dv(dv+1)/2), dk = dv = 2

@pytest.mark.parametrize('norm_first', [False, True])
def test_torch_encoder_layer_as_it_is(norm_first):
    torch.manual_seed(0)
    enc = nn.TransformerEncoderLayer(4, 2, 8, dropout=0., batch_first=True, norm_first=norm_first)
    c = count_laws(enc, None, seqs(3, 4))
    assert c.status == 'ok', c.reason
    with pytest.raises(ValueError, match='forward-mode derivative'):     # torch's own flash kernel: a clear error, not a raw one
        count_laws(enc, None, seqs(3, 4), options=dict(exact=False))

ZOO = {s: module_zoo(s) for s in (1, 2)}

@pytest.mark.parametrize('size', [1, 2])
@pytest.mark.parametrize('name', list(ZOO[1]))
def test_every_module_counts_and_checks(name, size):
    m, kw = ZOO[size][name]
    before = {n: p.detach().clone() for n, p in m.named_parameters()}
    a = adapt(m, **kw)
    c = a.checked.count                                 # adapt counted before stating (and raises on any disagreement)
    assert c.status == 'ok', (name, c.reason)
    assert c.n_laws == a.n_laws, (name, c)
    assert check_laws(a.laws, a.f, a.params, a.inputs).max_rel < 1e-10
    assert all(torch.equal(p, before[n]) for n, p in m.named_parameters())   # adapting never changes the module

def test_two_sizes_differ():
    "size 2 is another configuration, not the same block twice: more parameters, or other heads"
    key = lambda m: (sum(p.numel() for p in m.parameters()), str(adapt(m, check=False).meta))
    for name in ZOO[1]: assert key(ZOO[1][name][0]) != key(ZOO[2][name][0]), name

def test_gqa_is_not_repeated_heads():
    "GQA laws are group sums: Hkv of them, not H; the count says so"
    a = adapt(ZOO[2]['LlamaAttention (GQA)'][0])
    assert (a.meta['heads'], a.meta['kv_heads']) == (4, 2)
    assert a.laws(a.params)['VO'].shape[0] == 2

def test_raw_moe_block_gets_a_clear_error():
    "transformers' expert loop calls .item(): the engine names the fix instead of a raw vmap error"
    m, _ = ZOO[1]['MixtralSparseMoeBlock']
    m.experts.config._experts_implementation = None
    f = lambda p, x: torch.func.functional_call(m, p, (x[None, None],)).reshape(-1)
    with pytest.raises(ValueError, match='adapt'):
        count_laws(f, {n: p.detach() for n, p in m.named_parameters()}, lambda n, g: torch.randn(n, 3, generator=g, dtype=torch.float64))
    assert m.experts.config._experts_implementation is None    # adapt's switch is temporary
    adapt(m); assert m.experts.config._experts_implementation is None

def test_law_blocks_on_causal_lms():
    cfg = dict(vocab_size=30, hidden_size=8, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=2)
    llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(**cfg, intermediate_size=6))
    qmoe = transformers.Qwen2MoeForCausalLM(transformers.Qwen2MoeConfig(**cfg, moe_intermediate_size=3, num_experts=4, num_experts_per_tok=2,
                                                                       shared_expert_intermediate_size=2, intermediate_size=6))
    fam = lambda m: [(n.split('.')[-1], a.family) for n, a in law_blocks(m)]
    assert fam(llama) == [('self_attn', 'attention'), ('mlp', 'swiglu')]*2
    assert fam(qmoe) == [('self_attn', 'attention'), ('mlp', 'moe')]*2
    a = dict(law_blocks(qmoe))['model.layers.0.mlp']
    assert a.meta['shared_d_ff'] == 2 and a.meta['norm_topk'] is False

def test_unsupported_and_uninitialised():
    with pytest.raises(ValueError, match='Supported'): adapt(nn.GRU(3, 4))
    with pytest.raises(ValueError, match='law_blocks'): adapt(transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=10, hidden_size=4, num_hidden_layers=1, num_attention_heads=2, intermediate_size=4)))
    blk = transformers.models.qwen3_moe.modeling_qwen3_moe.Qwen3MoeSparseMoeBlock(transformers.Qwen3MoeConfig(
        hidden_size=3, num_attention_heads=1, moe_intermediate_size=2, num_experts=4, num_experts_per_tok=2))
    with torch.no_grad(): blk.experts.gate_up_proj.normal_(); blk.experts.down_proj.normal_(); blk.gate.weight.zero_()
    with pytest.raises(ValueError, match='all zero'): adapt(blk)
    init_generic(blk)
    with torch.no_grad(): blk.experts.down_proj[0, 0, 0] = float('inf')
    with pytest.raises(ValueError, match='non-finite'): adapt(blk)

# ---- any transformers model, every answer checked -------------------------------------------------------------------

FAMILIES_37 = ('opt', 'bloom', 'albert', 'xlnet', 'bart', 't5', 'mamba')   # read against independent forwards in test_families.py

@pytest.mark.parametrize('model_type', [m for m in TINY_CONFIGS if m not in FAMILIES_37])
def test_law_blocks_every_family(model_type):
    "each layer's attention and MLP/MoE block found, the count 'ok' and = expected, the laws stated or found hold"
    B = law_blocks(tiny_transformer(model_type))
    assert B.skipped == [] and all(a.family in ('attention', 'mlp', 'swiglu', 'ffn', 'moe', 'mixer') for _, a in B), (B, B.skipped)
    assert B[0][1].family in ('attention', 'mixer') and len(B) == {'bart': 5, 't5': 5, 'mamba': 1}.get(model_type, 2), B
    for path, a in B:
        c = a.checked.count
        assert (c.status, c.n_laws) == ('ok', a.n_laws), (path, c)
        assert a.checked.laws <= 1e-8 and a.checked.forward <= 1e-10 and a.checked.status == 'ok', (path, a.checked)
        assert check_laws(a.laws, a.f, a.params, a.inputs, seed=99).max_rel <= 1e-8

def _attn(kind, cls, **kw):
    cfg = transformers.AutoConfig.for_model(kind, hidden_size=8, num_attention_heads=2, num_key_value_heads=1, vocab_size=16, **kw)
    mod = __import__(f"transformers.models.{kind.replace('_text', '')}.modeling_{kind.replace('_text', '')}", fromlist=[cls])
    return init_generic(getattr(mod, cls)(cfg, 0).double())

def test_once_wrong_and_silent():
    "the cases adapt once answered wrong without a word: right now, or a clear refusal naming what does not fit"
    a = adapt(_attn('gemma3_text', 'Gemma3Attention', head_dim=4))           # q/k-norm gain 1 + w
    assert a.meta['qk_gain'] == '1 + w' and a.checked.count.n_laws == a.n_laws == 12
    a = adapt(_attn('cohere', 'CohereAttention'))                             # interleaved rotary pairs
    assert a.meta['pairs'] == 'adjacent' and a.checked.count.n_laws == a.n_laws
    for m, why in [(_attn('olmo2', 'Olmo2Attention'), 'whole projection'), (_attn('cohere', 'CohereAttention', use_qk_norm=True), 'per head'),
                   (_attn('stablelm', 'StableLmAttention', partial_rotary_factor=.5), 'partial rotary')]:
        with pytest.raises(NotStated, match=why): adapt(m)
        b = adapt_found(m)                                                   # the engine's count, laws named and checked
        assert b.checked.count.status == 'ok' and b.meta['found'] == b.n_laws
    relu = init_generic(transformers.models.llama.modeling_llama.LlamaMLP(transformers.LlamaConfig(
        hidden_size=4, num_attention_heads=2, intermediate_size=3, hidden_act='relu')).double())
    with pytest.raises(NotStated, match='engine counts 6'): adapt(relu)       # the gate row rescales too: 2·d_ff laws
    assert adapt_found(relu, kind='mlp').n_laws == 6

def test_adapt_refuses_a_forward_it_does_not_reproduce(monkeypatch):
    "check (a): a reader whose f is not the module's forward is refused, with the size of the difference"
    import conslaw_nb.hf.readers as R
    m = ZOO[1]['LlamaMLP'][0]
    orig = R.read_gated_mlp
    def wrong(*args):
        kw = orig(*args); f = kw['f']; kw['f'] = lambda p, x: 1.001*f(p, x); return kw
    monkeypatch.setattr(R, 'READERS', [(t, wrong if r is orig else r, w) for t, r, w in R.READERS])
    monkeypatch.setenv('CONSLAW_CACHE', 'off')          # a reader patched here is new code: what the structure cache holds
    monkeypatch.setattr(STRUCTURES, 'mem', {})          # (checked with the true reader) does not speak for it
    with pytest.raises(NotStated, match='not the module.s own forward'): adapt(m)

def test_adapt_bad_modules():
    m = init_generic(transformers.models.llama.modeling_llama.LlamaAttention(transformers.LlamaConfig(
        hidden_size=4, num_attention_heads=2, attention_dropout=0.1), 0).double()).train()
    with pytest.raises(ValueError, match=r'\.eval\(\)'): adapt(m)
    with torch.device('meta'): meta = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    with pytest.raises(ValueError, match='meta device'): adapt(meta)

def test_past_count_max_D_a_twin_is_counted():
    "a block too large to count states its count only once a twin of its configuration (smallest widths) confirms it"
    big = init_generic(transformers.models.llama.modeling_llama.LlamaAttention(transformers.LlamaConfig(
        hidden_size=64, num_attention_heads=8, num_key_value_heads=4), 0).double())
    a = adapt(big)
    assert a.checked.count is None and 'twin' in a.checked.how and a.checked.laws <= 1e-8, a.checked
    relu = init_generic(transformers.models.llama.modeling_llama.LlamaMLP(transformers.LlamaConfig(
        hidden_size=64, num_attention_heads=2, intermediate_size=128, hidden_act='relu')).double())
    with pytest.raises(NotStated, match='twin'): adapt(relu)

def test_law_blocks_lists_what_it_cannot_read():
    "A layer child that is no block it reads (a lone Linear added to a Llama layer) is listed with the reason and a warning"
    m = tiny_transformer('llama')
    m.layers[0].extra = init_generic(nn.Linear(4, 4).double())
    with pytest.warns(UserWarning, match='not read'): B = law_blocks(m)
    assert [p for p, _ in B] == ['layers.0.self_attn', 'layers.0.mlp'] and [p for p, _ in B.skipped] == ['layers.0.extra']
    assert 'neither' in B.skipped[0][1] and 'Lost: the laws of its 20 parameters' in B.skipped[0][1]
    gpt2 = init_generic(transformers.GPT2LMHeadModel(transformers.GPT2Config(n_embd=4, n_head=2, n_layer=2, vocab_size=16, n_positions=8)).double())
    with pytest.raises(ValueError, match=r'model\.eval\(\)'): law_blocks(gpt2)          # dropout in training mode: refused up front
    assert [p for p, _ in law_blocks(gpt2.eval())] == ['transformer.h.0.attn', 'transformer.h.0.mlp', 'transformer.h.1.attn', 'transformer.h.1.mlp']
