"""Property tests: over random sizes and seeds, the engine's count equals the theory formula the library states, and the
stated laws pass `check_laws`. Families from the engine page (linear, ReLU, products) live here; the paper's families
(FFN, SwiGLU, MHA, PE, RoPE, MoE) are driven through `conslaw_nb.theorems`'s builders."""
import torch
from hypothesis import given, settings, strategies as st
from conslaw_nb.engine.core import random_params
from conslaw_nb.engine.count import count_laws
from conslaw_nb.engine import check_laws, laws_rank
from conftest import tally

def gauss(n_in): return lambda n, g: torch.randn(n, n_in, generator=g, dtype=torch.float64)

def linear2(p, x): return p['U'] @ (p['V'].T @ x)
def relu2(p, x): return p['U'] @ torch.relu(p['V'].T @ x)

@settings(max_examples=60)
@given(n=st.integers(1, 5), r=st.integers(1, 4), m=st.integers(1, 5), seed=st.integers(0, 10**6))
def test_two_layer_linear(n, r, m, seed):
    "U Vᵀ x with inner width r ≤ min(n, m): r(r+1)/2 laws, and UᵀU − VᵀV passes check_laws"
    r = min(r, n, m)
    p = random_params({'U': (m, r), 'V': (n, r)}, torch.Generator().manual_seed(seed))
    c = count_laws(linear2, p, gauss(n), seed=seed)
    assert (c.status, c.n_laws) == ('ok', r*(r+1)//2), c
    h = lambda q: q['U'].T@q['U'] - q['V'].T@q['V']
    assert check_laws(h, linear2, p, gauss(n), seed=seed).max_rel < 1e-10
    assert laws_rank(h, p).rank == r*(r+1)//2
    tally('linear2')

@settings(max_examples=60)
@given(n=st.integers(3, 6), r=st.integers(1, 6), m=st.integers(1, 4), seed=st.integers(0, 10**6))
def test_two_layer_relu(n, r, m, seed):
    "ReLU net with r hidden units and n ≥ 3 inputs: r laws ‖U[:, j]‖² − ‖V[:, j]‖²"
    p = random_params({'U': (m, r), 'V': (n, r)}, torch.Generator().manual_seed(seed))
    c = count_laws(relu2, p, gauss(n), seed=seed, options=dict(patience=256))
    assert (c.status, c.n_laws) == ('ok', r), c
    h = lambda q: (q['U']**2).sum(0) - (q['V']**2).sum(0)
    assert check_laws(h, relu2, p, gauss(n), seed=seed).max_rel < 1e-10
    tally('relu2')

@settings(max_examples=30)
@given(n_par=st.integers(2, 5), seed=st.integers(0, 10**6))
def test_product(n_par, seed):
    "f = (θ1 ⋯ θn) x has n − 1 laws θi² − θj²"
    p = random_params({'t': (n_par,)}, torch.Generator().manual_seed(seed))
    c = count_laws(lambda q, x: q['t'].prod()*x, p, gauss(1), seed=seed)
    assert (c.status, c.n_laws) == ('ok', n_par - 1), c
    tally('product')

# ---- the paper's families, each posed as its page poses it (the registry's builders) at random sizes -----------------
import conslaw_nb.paper.ffn as ffn, conslaw_nb.paper.attention as attention, conslaw_nb.paper.moe as moe
def _count(pb, seed):
    p = pb.point(seed)
    return p, count_laws(pb.f, p, pb.sample_inputs, seed=seed)

@settings(max_examples=30)
@given(d=st.integers(2, 4), d1=st.integers(1, 5), act=st.sampled_from(['gelu', 'silu']), seed=st.integers(0, 10**6))
def test_ffn(d, d1, act, seed):
    pb = ffn.ffn_problem(d, d1, act)
    _, c = _count(pb, seed)
    assert (c.status, c.n_laws) == ('ok', pb.stated) and pb.stated == ffn.ffn_theory(d, d1, act), c
    tally('ffn')

@settings(max_examples=30)
@given(d=st.integers(2, 4), d1=st.integers(1, 5), seed=st.integers(0, 10**6))
def test_swiglu(d, d1, seed):
    pb = ffn.swiglu_problem(d, d1)
    p, c = _count(pb, seed)
    assert (c.status, c.n_laws) == ('ok', ffn.swiglu_theory(d, d1)), c
    assert check_laws(pb.laws, pb.f, p, pb.sample_inputs, seed=seed).max_rel < 1e-10
    tally('swiglu')

@settings(max_examples=36)
@given(H=st.integers(1, 2), d=st.integers(2, 4), dk=st.integers(1, 2), dv=st.integers(1, 2), T=st.integers(2, 3),
       kind=st.sampled_from(['plain', 'pe', 'rope']), seed=st.integers(0, 10**6))
def test_attention(H, d, dk, dv, T, kind, seed):
    if kind == 'rope': dk = 2
    pb = attention.mha_problem(H, d, dk, dv, T, pe='sinusoidal' if kind == 'pe' else None, rope=kind == 'rope')
    p, c = _count(pb, seed)
    theory = attention.rope_theory(H, dk, dv) if kind == 'rope' else attention.mha_theory(H, dk, dv)
    assert (c.status, c.n_laws) == ('ok', theory), (kind, c)
    assert check_laws(pb.laws, pb.f, p, pb.sample_inputs, seed=seed, n_samples=16).max_rel < 1e-10
    tally(f'attention-{kind}')

@settings(max_examples=36)
@given(d=st.integers(2, 3), d1=st.integers(1, 2), E=st.integers(2, 4), k=st.integers(0, 4),
       gate=st.sampled_from(['softmax', 'sigmoid']), seed=st.integers(0, 10**6))
def test_moe(d, d1, E, k, gate, seed):
    "Dense (k = 0 here means dense) and top-k; d = 2 routers are checked with the exact selection sets"
    k = None if k == 0 or k > E else k
    if k is not None and d != 2: d = 2
    p, c = _count(moe.moe_problem(d, d1, E, k, gate), seed)
    formula = moe.moe_measured_theory(d, d1, E, k=k, gate=gate, W=p['W'] if d == 2 else None)
    assert (c.status, c.n_laws) == ('ok', formula), (k, gate, c)
    tally(f'moe-{gate}')

# ---- piecewise models: every activation region or top-k selection covered, or an honest 'ambiguous' ----------------
# Two inputs make thin sectors common (a region of 0.1% of the Gaussian mass is no rarity among 12 sectors); the old
# stopping rule (analytic saturation only) gave a wrong 'ok' on 23 of 300 such cases. The assertion is the issue's: no
# wrong 'ok', whatever the share of honest 'ambiguous' answers (tallied).

@settings(max_examples=300)
@given(n=st.integers(2, 3), r=st.integers(1, 6), m=st.integers(1, 3), seed=st.integers(0, 10**6))
def test_relu_regions_covered(n, r, m, seed):
    "Two-layer ReLU nets, 2-3 inputs: the default count is r (one rescaling per hidden unit) or 'ambiguous', never a wrong 'ok'"
    p = random_params({'U': (m, r), 'V': (n, r)}, torch.Generator().manual_seed(seed))
    c = count_laws(relu2, p, gauss(n), seed=seed)
    assert c.piecewise == ('relu',), c.piecewise
    assert c.status == 'ambiguous' or c.n_laws == r, (n, r, m, seed, c)
    tally('relu-regions ' + c.status)

@settings(max_examples=100)
@given(d=st.integers(1, 2), d1=st.integers(1, 2), E=st.integers(2, 5), k=st.integers(1, 4),
       gate=st.sampled_from(['softmax', 'sigmoid']), seed=st.integers(0, 10**6))
def test_topk_regions_covered(d, d1, E, k, gate, seed):
    "Top-k MoE with d <= 2 (selection sets known exactly): the count is the exact formula at this router, or 'ambiguous'"
    import conslaw_nb.paper.moe as moe
    k = min(k, E - 1)
    pb = moe.moe_problem(d, d1, E, k, gate)
    p = pb.point(seed)
    c = count_laws(pb.f, p, pb.sample_inputs, seed=seed)
    assert 'topk' in c.piecewise or 'argmax' in c.piecewise, c.piecewise
    truth = moe.moe_measured_theory(d, d1, E, k, gate, W=p['W'])
    assert c.status == 'ambiguous' or c.n_laws == truth, (d, d1, E, k, gate, seed, truth, c)
    tally('topk-regions ' + c.status)
