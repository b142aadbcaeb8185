"""Every block once (issue 38, item 2): one RoPE pairing by default, one attention kernel (`core.sdpa_ref`, run by
`blocks.attention`), one causal mask (`core.causal_mask`), one gated MLP (`blocks.gated_mlp`) and one decoder layer
(`blocks.residual_layer` / `blocks.transformer_layer`) and one RMSNorm (`core.rms_norm_ref`). The kernels are imported from their one place, and the atlas, the
benchmark, the models and the decoder page are checked to run them rather than copies."""
import ast, inspect, json
from pathlib import Path
import pytest
import torch
import conslaw_nb.engine.core as core, conslaw_nb.paper.blocks as blocks, conslaw_nb.paper.attention as attention, conslaw_nb.experiments.models as models, conslaw_nb.bench.cases as bench, conslaw_nb.survey.atlas as atlas, conslaw_nb.zoo as zoo
from conslaw_nb.engine.core import causal_mask, sdpa_ref, random_params
from conslaw_nb.paper.blocks import apply_rope, gated_mlp, swiglu_mlp, residual_layer, transformer_layer, transformer_layer_shapes

ROOT = Path(__file__).resolve().parents[1]
f64 = dict(dtype=torch.float64)
def gen(s=0): return torch.Generator().manual_seed(s)
def default(f, name): return inspect.signature(f).parameters[name].default


def test_one_rope_default():
    "Every function and module that rotates defaults to transformers' pairing"
    defaults = {'apply_rope': default(apply_rope, 'pairs'), 'blocks.attention': default(blocks.attention, 'rope_pairs'),
                'blocks.Attention': default(blocks.Attention.__init__, 'rope_pairs'), 'attention.mha': default(attention.mha, 'rope_pairs'),
                'attention.rope_laws': default(attention.rope_laws, 'pairs')}
    assert set(defaults.values()) == {'half'}, defaults


@pytest.mark.parametrize('H,Hkv,causal', [(2, 2, False), (4, 2, True)])
def test_mha_rope_is_blocks_attention_rope(H, Hkv, causal):
    "`mha(rope=True)` and `blocks.attention(rope=True)` are one function: the same weights in their two layouts give the same output"
    d, dk, dv, T = 6, 4, 3, 5
    p = random_params({'Q': (H, d, dk), 'K': (Hkv, d, dk), 'V': (Hkv, d, dv), 'O': (H, d, dv)}, gen(1))
    X = torch.randn(2, T, d, generator=gen(2), **f64)
    rows = lambda W: W.transpose(1, 2).reshape(-1, d)                  # (heads, d, dh) -> nn.Linear (heads·dh, d), by hand
    q_w, k_w, v_w, o_w = rows(p['Q']), rows(p['K']), rows(p['V']), p['O'].permute(1, 0, 2).reshape(d, H*dv)
    y = attention.mha(p, X, causal=causal, rope=True)
    torch.testing.assert_close(y, blocks.attention(X, q_w, k_w, v_w, o_w, H, Hkv, causal=causal, rope=True), rtol=0, atol=1e-13)
    m = blocks.Attention(d, H, Hkv, head_dim=dk, v_head_dim=dv, causal=causal, rope=True, **f64)
    with torch.no_grad():
        for n, w in zip('qkvo', (q_w, k_w, v_w, o_w)): getattr(m, n + '_proj').weight.copy_(w)
    torch.testing.assert_close(m(X), y, rtol=0, atol=1e-13)
    other = attention.mha(p, X, causal=causal, rope=True, rope_pairs='adjacent')   # the other pairing is a different function
    assert (other - y).abs().max() > 1e-4


def test_kernels_imported_from_one_place():
    "The other modules hold the one definitions, not copies"
    assert blocks.causal_mask is core.causal_mask and blocks.sdpa_ref is core.sdpa_ref and atlas.causal_mask is core.causal_mask
    assert atlas.gated_mlp is blocks.gated_mlp and atlas.transformer_layer is blocks.transformer_layer
    assert models.residual_layer is blocks.residual_layer and attention.blocks is blocks and zoo.blocks is blocks
    assert bench.decoder_layer_case is zoo.decoder_layer_case
    for m in (blocks, attention, models, bench, zoo, atlas):            # no mask, softmax or norm written out again
        src = inspect.getsource(m)
        for copy in ('.tril(', '.triu(', '.softmax(', 'rsqrt('):
            assert copy not in src, (m.__name__, copy)
    assert 'blocks.transformer_layer(' in inspect.getsource(bench.decoder_layer_case)
    assert 'residual_layer(' in inspect.getsource(models.Block.forward)
    assert 'transformer_layer(' in inspect.getsource(atlas.decoder_layer)


def test_atlas_attention_runs_blocks_attention(monkeypatch):
    "ALiBi, the sliding window, q/k-norm and MLA all go through `blocks.attention`, which runs `core.sdpa_ref`"
    calls = []
    real_att, real_ref = blocks.attention, blocks.sdpa_ref
    monkeypatch.setattr(blocks, 'attention', lambda *a, **k: calls.append('attention') or real_att(*a, **k))
    monkeypatch.setattr(blocks, 'sdpa_ref', lambda *a, **k: calls.append('sdpa_ref') or real_ref(*a, **k))
    g = gen(3)
    pa = random_params({'Q': (2, 4, 2), 'K': (2, 4, 2), 'V': (2, 4, 2), 'O': (2, 4, 2)}, g)
    X = torch.randn(5, 4, generator=g, **f64)
    pq = {**pa, 'q_norm': torch.randn(2, generator=g, **f64), 'k_norm': torch.randn(2, generator=g, **f64)}
    pm = random_params({'Q': (2, 4, 2), 'Wc': (4, 3), 'Uk': (2, 3, 2), 'Uv': (2, 3, 2), 'O': (2, 4, 2)}, g)
    for run in (lambda: atlas.alibi_attention(pa, X, causal=True), lambda: atlas.window_attention(pa, X, 2),
                lambda: atlas.qk_norm_attention(pq, X), lambda: atlas.mla(pm, X)):
        calls.clear(); run(); assert calls == ['attention', 'sdpa_ref']
    torch.testing.assert_close(atlas.window_attention(pa, X, 2), attention.mha(pa, X, mask=causal_mask(5, window=2)), rtol=0, atol=0)


def test_one_causal_mask():
    "`causal_mask` is SDPA's mask; `sdpa_ref(is_causal=True)` builds it with `causal_mask`, and it is torch's own"
    torch.testing.assert_close(causal_mask(3, 4), torch.ones(3, 4, dtype=torch.bool).tril())
    q, k, v = torch.randn(3, 2, 5, 4, generator=gen(4), **f64)
    torch.testing.assert_close(sdpa_ref(q, k, v, is_causal=True), torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True))
    torch.testing.assert_close(sdpa_ref(q, k, v, attn_mask=causal_mask(5)), sdpa_ref(q, k, v, is_causal=True), rtol=0, atol=0)


def test_one_gated_mlp():
    "`atlas.glu` and `blocks.swiglu_mlp` are `blocks.gated_mlp`"
    g = gen(5)
    p = random_params({'A': (3, 4), 'B': (4, 3), 'C': (4, 3)}, g); x = torch.randn(6, 3, generator=g, **f64)
    for act in ('gelu', 'relu', 'silu'):
        torch.testing.assert_close(atlas.glu(p, x, act), gated_mlp(x, p['B'], p['C'], p['A'], act), rtol=0, atol=0)
    torch.testing.assert_close(swiglu_mlp(x, p['B'], p['C'], p['A']), gated_mlp(x, p['B'], p['C'], p['A']), rtol=0, atol=0)


def test_one_decoder_layer():
    "`models.Block`, `bench.decoder_layer_case` and `atlas.decoder_layer` compute `blocks.transformer_layer`"
    d, H, Hkv, dk, dff = 8, 4, 2, 2, 6
    p = random_params(transformer_layer_shapes(d, H, dk, dff, Hkv), gen(6))
    X = torch.randn(2, 5, d, generator=gen(7), **f64)
    y = transformer_layer(X, p, H, Hkv, causal=True, rope=True)
    case = bench.decoder_layer_case(d, H, Hkv, dff, T=5)
    assert case.shapes == transformer_layer_shapes(d, H, dk, dff, Hkv)
    torch.testing.assert_close(case.f(p, X), y, rtol=0, atol=0)
    blk = models.Block(d, H, dff, n_kv_head=Hkv, causal=True, rope=True).double()
    names = {'input_layernorm.weight': 'g1', 'post_attention_layernorm.weight': 'g2', 'mlp.gate_proj.weight': 'gate',
             'mlp.up_proj.weight': 'up', 'mlp.down_proj.weight': 'down', **{f'self_attn.{n}_proj.weight': n for n in 'qkvo'}}
    with torch.no_grad():
        for n, w in blk.named_parameters(): w.copy_(p[names[n]])
        torch.testing.assert_close(blk(X), y, rtol=0, atol=1e-13)
    for norm in ('rms', 'layer'):
        for order in ('pre', 'post'):
            pa = random_params(atlas.decoder_shapes(d, H, dk, dk, dff, norm), gen(8))
            pl = {**attention.linear_weights(pa), 'gate': pa['B'], 'up': pa['C'], 'down': pa['A'],
                  **{k: pa[k] for k in ('g1', 'g2', 'b1', 'b2') if k in pa}}
            torch.testing.assert_close(atlas.decoder_layer(pa, X[0], norm, order), transformer_layer(X[0], pl, H, norm=norm, order=order),
                                       rtol=0, atol=0)


def test_decoder_page_uses_the_one_layer():
    "The decoder page builds its layer with `blocks.transformer_layer` and writes no norm, attention or MLP of its own"
    cells = json.loads((ROOT/'nbs'/'explain'/'decoder.ipynb').read_text())['cells']
    src = '\n'.join(''.join(c['source']) for c in cells if c['cell_type'] == 'code')
    assert 'transformer_layer(' in src and 'transformer_layer_shapes(' in src
    for copy in ('def norm(', 'rsqrt', '.sqrt()', 'softmax', 'F.silu', 'def attention('): assert copy not in src, copy


# Issue 38, item 2 continued: one Gaussian initialiser, one MoE, the atlas on the one attention and RMSNorm, public seams.
KERNELS = {'causal_mask': 'core', 'sdpa_ref': 'core', 'gaussian_weight': 'core', '_draw': 'core', 'apply_rope': 'blocks',
           'rope_angles': 'blocks', 'rms_norm_ref': 'core', 'layer_norm_ref': 'core', 'rms_norm': None, '_heads': 'blocks', 'attention': 'blocks', 'gated_mlp': 'blocks',
           'swiglu_mlp': 'blocks', 'moe_gates': 'blocks', 'moe_mlp': 'blocks', 'residual_layer': 'blocks', 'transformer_layer': 'blocks',
           'check_pairs': 'blocks', '_init_linear': 'blocks', 'is_hf_mlp': 'ffn', '_merge': None, '_init_weight': None}   # None: gone


def test_each_kernel_defined_in_one_module():
    "A second definition of a kernel or helper (by its name, nested or not) anywhere in the package fails here"
    defs = {}
    for py in sorted((ROOT/'conslaw_nb').rglob('*.py')):
        for node in ast.walk(ast.parse(py.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)): defs.setdefault(node.name, set()).add(py.stem)
    for name, home in KERNELS.items():
        assert defs.get(name, set()) == ({home} if home else set()), (name, defs.get(name))


def test_modules_share_the_one_objects():
    "atlas, models, bench, ffn, moe and attention hold the one definitions themselves, imported from their one place"
    import conslaw_nb.paper.ffn as ffn, conslaw_nb.paper.moe as moe
    same = [(atlas.rms_norm_ref, core.rms_norm_ref), (atlas.mha, attention.mha), (atlas.gated_mlp, blocks.gated_mlp), (atlas.MoE, blocks.MoE),
            (atlas.transformer_layer, blocks.transformer_layer), (atlas.causal_mask, core.causal_mask), (moe.moe_mlp, blocks.moe_mlp),
            (moe.is_hf_mlp, ffn.is_hf_mlp), (moe.MOE_GATES, blocks.MOE_GATES), (attention.check_pairs, blocks.check_pairs),
            (blocks.gaussian_weight, core.gaussian_weight), (ffn.gaussian_weight, core.gaussian_weight), (ffn.swiglu_mlp, blocks.swiglu_mlp),
            (models.RMSNorm, blocks.RMSNorm), (models.Attention, blocks.Attention), (models.SwiGLU, blocks.SwiGLU), (models.MoE, blocks.MoE),
            (zoo.blocks, blocks)]
    for a, b in same: assert a is b, (a, b)
    for m in (atlas, moe, ffn, models):                               # no initialiser, head split or RMSNorm written out again
        src = inspect.getsource(m)
        for copy in ('F.rms_norm(', "einsum('...td,hdk", 'math.sqrt(fan', '/math.sqrt(', '/ math.sqrt('): assert copy not in src, (m.__name__, copy)
    assert 'randn(' not in inspect.getsource(blocks) + inspect.getsource(ffn) + inspect.getsource(moe) + inspect.getsource(models)


def test_one_gaussian_initialiser():
    "Every module's weights and `random_params` are `core.gaussian_weight` draws, in order, bit for bit"
    import conslaw_nb.paper.ffn as ffn
    gw = core.gaussian_weight
    def draws(*specs, seed=0, dtype=torch.float64, **kw):
        g = gen(seed); return [gw(s, g, fan, dtype, **kw) for s, fan in specs]
    def same(ws, ts): assert len(ws) == len(ts) and all(torch.equal(w, t) for w, t in zip(ws, ts)), [(w - t).abs().max() for w, t in zip(ws, ts)]
    same([p.detach() for p in blocks.SwiGLU(3, 5, generator=gen(0), **f64).parameters()], draws(((5, 3), 3), ((5, 3), 3), ((3, 5), 5)))
    same([p.detach() for p in blocks.Attention(4, 2, 1, head_dim=2, generator=gen(0), **f64).parameters()],
         draws(((4, 4), 4), ((2, 4), 4), ((2, 4), 4), ((4, 4), 4)))
    same([p.detach() for p in blocks.MoE(3, 2, 4, top_k=2, shared_d_ff=2, generator=gen(0), **f64).parameters()],
         draws(((4, 3), 3), ((4, 4, 3), 3), ((4, 3, 2), 2), ((2, 3), 3), ((2, 3), 3), ((3, 2), 2), ((1, 3), 3)))
    same([p.detach() for p in ffn.FFN(3, 4, generator=gen(0)).parameters()], draws(((3, 4), 4), ((4, 3), 3), dtype=torch.float32))
    same(list(random_params({'W': (4, 3), 'b': (3,), 'T': (2, 3, 5)}, gen(0)).values()),
         draws(((4, 3), 3), ((3,), None), ((2, 3, 5), 5), divide=False))
    torch.manual_seed(7); a = blocks.SwiGLU(3, 5).gate_proj.weight.detach()     # no generator: torch's global one, after nn.Linear's own init
    torch.manual_seed(7); torch.nn.Linear(3, 5, bias=False); same([a], [gw((5, 3), None, 3, torch.float32)])


def test_one_moe_forward():
    "`moe.moe` (the paper's notation) and `blocks.MoE` (transformers' layout) run the one `blocks.moe_mlp`: the same numbers"
    import conslaw_nb.paper.moe as moe
    m = blocks.MoE(3, 2, 4, top_k=2, generator=gen(9), **f64)
    p = {'W': m.gate.weight, 'A': m.experts.down_proj, 'B': m.experts.gate_up_proj[:, :2], 'C': m.experts.gate_up_proj[:, 2:]}
    x = torch.randn(5, 3, generator=gen(10), **f64)
    with torch.no_grad(): torch.testing.assert_close(moe.moe(p, x, k=2), m(x), rtol=0, atol=0)
    assert 'einsum' not in inspect.getsource(moe) and 'silu' not in inspect.getsource(moe)


def test_linear_attention_runs_blocks_attention(monkeypatch):
    "Linear attention is `blocks.attention` with its `kernel` hook; the q/k norm is `core.rms_norm_ref` (what `exact_ops` runs for F.rms_norm)"
    calls = []
    real_att, real_norm = blocks.attention, atlas.rms_norm_ref
    monkeypatch.setattr(blocks, 'attention', lambda *a, **k: calls.append(k.get('kernel') is not None) or real_att(*a, **k))
    monkeypatch.setattr(atlas, 'rms_norm_ref', lambda *a, **k: calls.append('rms_norm') or real_norm(*a, **k))
    g = gen(11)
    pa = random_params({'Q': (2, 4, 2), 'K': (2, 4, 2), 'V': (2, 4, 3), 'O': (2, 4, 3)}, g)
    X = torch.randn(5, 4, generator=g, **f64)
    heads = lambda W: torch.einsum('td,hdk->htk', X, W)                 # independent: the per-head layout written out
    for feat, phi in (('elu', lambda z: torch.nn.functional.elu(z) + 1), ('exp', torch.exp)):
        calls.clear(); y = atlas.linear_attention(pa, X, feat); assert calls == [True]
        a = phi(heads(pa['Q'])) @ phi(heads(pa['K'])).transpose(-1, -2)
        torch.testing.assert_close(y, torch.einsum('htv,hdv->td', (a / a.sum(-1, keepdim=True)) @ heads(pa['V']), pa['O']))
    pq = {**pa, 'V': pa['V'][..., :2], 'O': pa['O'][..., :2], 'q_norm': torch.randn(2, generator=g, **f64), 'k_norm': torch.randn(2, generator=g, **f64)}
    calls.clear(); atlas.qk_norm_attention(pq, X); assert calls == [False, 'rms_norm', 'rms_norm']
    with pytest.raises(ValueError, match='`kernel` replaces the softmax'): attention.mha(pa, X, causal=True, kernel=lambda q, k, v: v)


def test_one_rms_norm():
    "One RMSNorm kernel, `core.rms_norm_ref`: `blocks.normalize` and `blocks.RMSNorm` run it, and no other module computes x·rsqrt(mean(x²))"
    import re
    assert blocks.rms_norm_ref is core.rms_norm_ref and not hasattr(blocks, 'rms_norm')
    assert 'rms_norm_ref(' in inspect.getsource(blocks.normalize) and 'rms_norm_ref(' in inspect.getsource(blocks.RMSNorm.forward)
    for py in sorted((ROOT/'conslaw_nb').rglob('*.py')):
        if py.stem in ('core', '_modidx'): continue
        src = py.read_text()
        for pat in (r'torch\.rsqrt\(', r'\.pow\(2\)\.mean\(', r'\*\*\s*2\)\.mean\(.*sqrt', r'F\.rms_norm\('):
            assert not re.search(pat, src), (py.name, pat)
    x, g = torch.randn(3, 5, 8, generator=gen(12), **f64), torch.randn(8, generator=gen(13), **f64)
    m = blocks.RMSNorm(8, eps=1e-6, **f64)
    with torch.no_grad(): m.weight.copy_(g)
    for y in (blocks.normalize(x, g), m(x)): assert torch.equal(y, core.rms_norm_ref(x, 8, g, 1e-6))
