"""count_laws(method='lobpcg'), method='gram' (the same solver preconditioned by the Cholesky factor of the Gram
matrix), method='shift-invert' (subspace iteration with the inverse of the float64 Gram matrix) and method='lu' (one LU
of the mixed rows themselves) against the dense path: the same counts, depth by depth, on the families whose null spaces the solver's block does not cover in one go
(D > 64), with brackets, under cross-entropy, and on fixed inputs; and the refusals they owe (piecewise models, bad
arguments), raised before any work."""
import pytest, torch
import torch.nn.functional as F
from conslaw_nb.engine.count import count_laws
from conslaw_nb.engine.rows import linear_head
from conslaw_nb.engine.core import random_params, gaussian_inputs
import conslaw_nb.paper.ffn as ffn, conslaw_nb.paper.attention as attention
CASES = {'swiglu 6x12': lambda: ffn.swiglu_problem(6, 12),                       # D = 216: span only
         'rope 1 head d=8': lambda: attention.mha_problem(1, 8, 4, 4, T=2, rope=True)}  # D = 128: brackets add 8

@pytest.mark.parametrize('method', ['lobpcg', 'gram', 'shift-invert', 'lu'])
@pytest.mark.parametrize('name', list(CASES))
def test_iterative_agrees_with_dense(name, method):
    pb = CASES[name](); p = pb.point(0)
    dense = count_laws(pb.f, p, pb.sample_inputs, method='dense')
    it = count_laws(pb.f, p, pb.sample_inputs, method=method, progress=False)
    assert it.method == method and it.status == 'ok', it
    assert it.solver['solver'] == method                                    # one name per solver, everywhere
    assert it.n_laws == dense.n_laws and it.dims_by_depth == dense.dims_by_depth, (it, dense)
    if method == 'lu': return                                                # one factorization, no iterations
    steps = it.solver['passes' if method == 'shift-invert' else 'iters']
    assert steps >= 1 and it.n_params > it.solver['block']                  # the solver really iterated on a subspace

@pytest.mark.parametrize('method', ['lobpcg', 'gram', 'shift-invert', 'lu'])
def test_iterative_cross_entropy_head(method):
    d, K = 20, 5                                         # D = 105 > the first block of 64
    shapes = {'W': (K, d), 'b': (K,)}
    for loss, want in (('any', 0), ('ce', d + 1)):
        c = count_laws(linear_head, shapes, gaussian_inputs(d), loss=loss, method=method, progress=False)
        assert (c.status, c.n_laws) == ('ok', want), (loss, c)

@pytest.mark.parametrize('method', ['lobpcg', 'gram', 'shift-invert', 'lu'])
def test_iterative_fixed_inputs(method):
    pb = CASES['rope 1 head d=8'](); p = pb.point(1)
    X = pb.sample_inputs(40, torch.Generator().manual_seed(3))
    it, dense = (count_laws(pb.f, p, X, method=m, progress=False) for m in (method, 'dense'))
    assert (it.status, it.n_laws, it.dims_by_depth) == ('ok', dense.n_laws, dense.dims_by_depth), (it, dense)
    few = count_laws(pb.f, p, X[:4], method=method, progress=False)      # 48 rows for D = 128: said, before any solve
    assert few.status == 'ambiguous' and 'too big for the iterative path' in few.reason, few

def test_iterative_refusals():
    relu = lambda p, x: p['A'] @ F.relu(p['B'] @ x)
    for m in ('lobpcg', 'gram', 'shift-invert', 'lu'):
        with pytest.raises(ValueError, match=f"method='{m}' needs an analytic model"):
            count_laws(relu, {'A': (2, 3), 'B': (3, 2)}, gaussian_inputs(2), method=m)
    pb = ffn.swiglu_problem(2, 3)
    for kw, msg in ((dict(method='lanczos'), 'method'), (dict(options=dict(max_iters=0)), 'max_iters'), (dict(options=dict(budget=-1)), 'budget'),
                    (dict(method='iterative'), "method='iterative' is now called 'lobpcg'")):
        with pytest.raises(ValueError, match=msg): count_laws(pb.f, pb.point(0), pb.sample_inputs, **kw)

def test_iterative_not_converged_is_ambiguous():
    pb = ffn.swiglu_problem(6, 12)
    c = count_laws(pb.f, pb.point(0), pb.sample_inputs, method='lobpcg', options=dict(max_iters=1), progress=False)
    assert c.status == 'ambiguous' and c.n_laws is None and 'did not converge' in c.reason, c

def test_auto_picks_by_size(monkeypatch):
    "'auto': dense up to _DENSE_MAX_D, then the LU path while its float64 D×D matrix fits (10·D² bytes free), then the matrix-free one"
    import conslaw_nb.engine.count as pde
    assert pde._count_method('auto', 100, [], None) == 'dense'
    assert pde._count_method('auto', pde._DENSE_MAX_D + 1, [], None) == 'lu'
    assert pde._count_method('auto', 10**6, [], None) == 'lobpcg'               # 8 TB: no D×D matrix fits
    assert pde._count_method('auto', 10**6, ['relu'], None) == 'dense'          # piecewise: only the dense path tracks regions
    D = 10_000
    for free, want in ((11*D*D, 'lu'), (9*D*D, 'lobpcg')):
        monkeypatch.setattr(pde, '_free_bytes', lambda device, free=free: free)
        assert pde._count_method('auto', D, [], None) == want, free

def test_gram_decides_on_singular_values_when_ritz_values_show_no_gap():
    "RoPE, 3 heads at d=24: the Gram's Ritz values fall smoothly to its rounding (they square σ); the rows' singular values show the gap"
    pb = attention.mha_problem(3, 24, 8, 8, T=4, rope=True)
    c = count_laws(pb.f, pb.point(0), pb.sample_inputs, method='gram', progress=False)
    assert (c.status, c.n_laws) == ('ok', 3*(8//2 + 8*9//2)), c          # H (dk/2 + dv(dv+1)/2), Thm 4.4

@pytest.mark.parametrize('name', ['mha 2x4 d=8', 'one head dk=d', 'swiglu 12x24'])
def test_auto_past_the_dense_floor_counts_by_lu(monkeypatch, name):
    "'auto' past _DENSE_MAX_D: the LU path, whatever the null space's size: D/4 (two heads), D/2 (one head with dk = d), 24 of 864"
    import conslaw_nb.engine.count as pde
    monkeypatch.setattr(pde, '_DENSE_MAX_D', 100)
    pb, want = {'mha 2x4 d=8': (attention.mha_problem(2, 8, 4, 4, T=4), 2*2*(4*5//2)),            # D = 256, Thm 4.3
                'one head dk=d': (attention.mha_problem(1, 8, 8, 8, T=4), 8*9//2 + 8*9//2),       # D = 256, null space of the span 128
                'swiglu 12x24': (ffn.swiglu_problem(12, 24), 24)}[name]                          # D = 864, one law per unit
    p = pb.point(0)
    c, dense = count_laws(pb.f, p, pb.sample_inputs, progress=False), count_laws(pb.f, p, pb.sample_inputs, method='dense')
    assert c.method == 'lu' and c.solver['solver'] == 'lu', c
    assert (c.status, c.n_laws, c.dims_by_depth) == ('ok', dense.n_laws, dense.dims_by_depth) and c.n_laws == want, (c, dense)

def test_dense_judges_an_ambiguous_first_batch_again_with_more_rows(monkeypatch):
    "RoPE, 2 heads of 8 at d=24: the first ceil(D/K)+4 inputs leave the span's smallest singular values near rounding"
    import conslaw_nb.engine.count as pde
    pb = attention.mha_problem(2, 24, 8, 8, T=4, rope=True); p = pb.point(0)   # D = 1536
    monkeypatch.setattr(pde, 'SPAN_RETRIES', 0)
    c = count_laws(pb.f, p, pb.sample_inputs, method='dense')
    assert c.status == 'ambiguous' and 'span W(θ): singular-value gap too small' in c.reason, c
    monkeypatch.setattr(pde, 'SPAN_RETRIES', 2)
    c = count_laws(pb.f, p, pb.sample_inputs, method='dense')
    assert (c.status, c.n_laws) == ('ok', 2*(8//2 + 8*9//2)) and c.gap >= pde.gap_tol(torch.float64), c   # Thm 4.4

@pytest.mark.parametrize('rel', [1e-6, 1e-4, 1e-3, 1e-2])
def test_shift_invert_reads_no_unsettled_cut(rel):
    "With the shift raised, a null vector the passes have not freed yet looks like a kept one: read once, attention (40 laws, Thm 4.3) gave 0 at 1e-4, 'ok'"
    from conslaw_nb.zoo import attention_width_case
    case = attention_width_case(2, 4, 8, 4)                                     # D = 256
    c = count_laws(case.f, case.point(), case.sample_inputs, method='shift-invert', options=dict(sigma=rel), progress=False)
    assert c.status in ('ok', 'ambiguous'), c
    if c.status == 'ok': assert c.n_laws == case.stated == 40, (rel, c)
    if rel == 1e-2: assert c.status == 'ambiguous' and 'not settled' in c.reason, c   # the shift swamps the spectrum: no answer

def _scaled_head(p, x):
    "Output 0 uses two weights and a scale (one rescaling law): its rows repeat a 2-dimensional span every other row"
    return torch.stack([p['b']*(p['a'] @ x[:2]), p['w2'] @ torch.tanh(p['W1'] @ x)])

def test_lu_rows_with_periodic_structure():
    "Rows in a periodic order (two outputs per input, one of them low-rank): the DFT alone would make early mixed rows dependent"
    p = random_params({'a': (2,), 'b': (), 'W1': (8, 6), 'w2': (8,)}, torch.Generator().manual_seed(0))
    dense = count_laws(_scaled_head, p, gaussian_inputs(6), method='dense')
    for seed in range(3):
        lu = count_laws(_scaled_head, p, gaussian_inputs(6), method='lu', seed=seed, progress=False)
        assert (lu.status, lu.n_laws, lu.dims_by_depth) == ('ok', dense.n_laws, dense.dims_by_depth) and dense.n_laws == 1, (lu, dense)

def test_lu_decoder_layer_agrees_with_dense():
    "A Llama-style decoder layer (RMSNorm, GQA with RoPE, SwiGLU) at d = 8, by the LU path and the dense one, depth by depth"
    from conslaw_nb.zoo import decoder_layer_case
    case = decoder_layer_case(8, 2, 1, 22); p = case.point()
    dense, lu = (count_laws(case.f, p, case.sample_inputs, method=m, progress=False) for m in ('dense', 'lu'))
    assert (lu.status, lu.n_laws, lu.dims_by_depth) == ('ok', dense.n_laws, dense.dims_by_depth) and lu.n_laws == case.stated, (lu, dense)
    assert lu.solver['null_after'] <= lu.solver['null_before'] and lu.solver['null_after'] < 1e-12, lu.solver   # the correction step

def test_lu_helpers():
    "`_tri_solve` on views of an LU's factors against LAPACK, all four cases; `_hartley_mix` orthonormal, odd size with a prime factor; `_smooth`"
    import conslaw_nb.engine.solvers as solvers
    g = torch.Generator().manual_seed(0); n = 300
    M = torch.randn(n, n, generator=g, dtype=torch.float64).mT; piv = torch.empty(n, dtype=torch.int32)
    torch.linalg.lu_factor_ex(M, out=(M, piv, torch.empty((), dtype=torch.int32)))
    B = torch.randn(250, 3, generator=g, dtype=torch.float64); T = M[:250, :250]
    for upper, trans, unit in ((True, False, False), (True, True, False), (False, False, True), (False, True, True)):
        A = (T.triu() if upper else T.tril(-1) + torch.eye(250, dtype=T.dtype))
        want = torch.linalg.solve((A.mT if trans else A), B)
        got = solvers._tri_solve(T, B, upper=upper, trans=trans, unit=unit, bs=64)
        assert torch.allclose(got, want, rtol=1e-9, atol=1e-9*want.abs().max()), (upper, trans, unit)
    n = 3*67; I = torch.eye(n, dtype=torch.float64)
    mix = (torch.randperm(n, generator=g), torch.where(torch.rand(n, generator=g) < .5, -1., 1.).double(), torch.randperm(n, generator=g))
    solvers._hartley_mix(I, mix, cols=50)
    assert torch.allclose(I.T @ I, torch.eye(n, dtype=torch.float64), atol=1e-12) and (I.abs() > 1e-6).float().mean() > 0.9
    assert (solvers._smooth(45312, 45440), solvers._smooth(2816, 2864), solvers._smooth(1021, 1022)) == (45360, 2835, 1022)

def test_complement_judges_rows_at_their_own_size():
    "Scaled rows far below 1 whose new parts fall from 1e-2 to 1e-7 of their size: all six new, as the dense path finds them unscaled"
    from conslaw_nb.engine.solvers import _Complement, Span
    D, c = 40, 10.**-torch.arange(2, 8, dtype=torch.float64)
    s = torch.full((D,), 1e-3, dtype=torch.float64); s[0] = 1.
    rows = torch.zeros(6, D, dtype=torch.float64); rows[:, 1] = (1 - c**2).sqrt(); rows[range(6), range(20, 26)] = c
    comp, dense = _Complement(torch.eye(D, dtype=torch.float64)[20:], D, s, torch.float64, None, []), Span(D, rows)
    dense.add(torch.eye(D, dtype=torch.float64)[:20])
    assert (comp.add_gradients(rows), dense.add(rows)) == (26, 26)
    assert comp.add_gradients(rows[:3] + rows[3:]) == 26                          # nothing new: the rank stays

def test_complement_deflates_then_rotates_once_half_is_taken():
    "New directions are deflated (Y) until they hold half of N, then N turns to the complement alone; the rank and the basis stay right"
    from conslaw_nb.engine.solvers import _Complement
    g = torch.Generator().manual_seed(0); D, k = 50, 20
    N = torch.linalg.qr(torch.randn(D, k, generator=g, dtype=torch.float64)).Q.T.contiguous()
    comp, seen = _Complement(N, D, torch.ones(D, dtype=torch.float64), torch.float64, None, []), []
    for m, want_Y in ((4, 4), (4, 8), (3, 0)):                                    # 11 of 20 taken: rotated, Y empty again
        rows = torch.randn(m, k, generator=g, dtype=torch.float64) @ N; seen.append(rows)
        assert comp.add_gradients(rows) == D - k + sum(len(r) for r in seen) and len(comp.Y) == want_Y
    assert comp.N.shape == (k - 11, D) and torch.allclose(comp.N @ comp.N.T, torch.eye(k - 11, dtype=torch.float64), atol=1e-12)
    assert (comp.N @ torch.cat(seen).T).abs().max() < 1e-12                      # the complement is orthogonal to every added row

@pytest.mark.parametrize('method', ['gram', 'lu'])
def test_quiet_run_counts_the_inputs_after_the_last_that_added(method):
    "Too few first inputs (n_samples): the first fresh batch still adds, early; its inputs after the last that added are a quiet run already"
    pb = ffn.swiglu_problem(6, 12); p = pb.point(0)                          # D = 216, K = 6: the span needs ~34 inputs
    n0, pat = 20, 30
    dense = count_laws(pb.f, p, pb.sample_inputs, method='dense')
    c = count_laws(pb.f, p, pb.sample_inputs, method=method, options=dict(n_samples=n0, patience=pat, budget=8*6*216), progress=False)  # one input a chunk
    assert (c.status, c.n_laws, c.dims_by_depth) == ('ok', dense.n_laws, dense.dims_by_depth), (c, dense)
    assert n0 + pat < c.n_samples < n0 + 2*pat, c.n_samples                  # a second batch, not a whole one

def _shifted(p, x):
    "Three scalars on three positions: u Σ_j softmax(w x + c)_j x_j. The shift c cancels in the softmax: its gradient is rounding"
    return (p['u'] * (torch.softmax(p['w']*x + p['c'], 0) @ x)).reshape(1)

@pytest.mark.parametrize('method', ['lobpcg', 'gram', 'shift-invert', 'lu'])
def test_a_column_of_rounding_is_no_direction(method):
    "Uncapped, the Jacobi scaling raised c's rounding to the signal's scale and the LU path counted 0 laws, 'ok'. None may: 1 law or no answer"
    c = count_laws(_shifted, {'w': (), 'c': (), 'u': ()}, gaussian_inputs(3), method=method, progress=False)
    assert c.status == 'ambiguous' or (c.status, c.n_laws) == ('ok', 1), c
    if method == 'lu': assert (c.status, c.n_laws) == ('ok', 1), c              # D = 3: the other paths' blocks do not fit

@pytest.mark.parametrize('size', [1, pytest.param(2, marks=pytest.mark.slow)])   # size 2: 35 s, run with --slow
def test_paths_agree_on_the_registry(size):
    """Every architecture `conslaw verify` knows (transformers' modules among them when installed): the paths past the dense
    floor give the dense count depth by depth, or all refuse a piecewise model; shift-invert alone may say that the null
    space is too big for its block (at most D/2). Before the Jacobi cap, nn.MultiheadAttention with biases got 20 for 24 by LU"""
    from conslaw_nb.theorems import ARCHS
    for name, arch in ARCHS.items():
        pb = arch.build(size); p = pb.point(0)
        dense, refused = count_laws(pb.f, p, pb.sample_inputs, method='dense'), set()
        assert dense.status == 'ok', (name, dense)
        for m in ('gram', 'shift-invert', 'lu', 'lobpcg'):
            try: c = count_laws(pb.f, p, pb.sample_inputs, method=m, progress=False)
            except ValueError as e:
                assert 'needs an analytic model' in str(e), (name, m, e); refused.add(m); continue
            if m == 'shift-invert' and c.status == 'ambiguous' and 'too big for' in c.reason: continue
            assert (c.status, c.n_laws, c.dims_by_depth) == ('ok', dense.n_laws, dense.dims_by_depth), (name, m, c, dense)
        assert refused in (set(), {'gram', 'shift-invert', 'lu', 'lobpcg'}), (name, refused)
