"The exact law-gradient norms without a VJP per law (`law_norms`), and the matrix-free check built on them"
import pytest, torch
from torch.func import jacrev
from conslaw_nb.engine.core import Flat, random_params, gaussian_inputs
from conslaw_nb.engine.checks import law_norms
from conslaw_nb.engine import check_laws
from conslaw_nb.engine.rows import linear_head
from conslaw_nb.engine.checks import LawVector
from conslaw_nb.paper.ffn import swiglu_problem
from conslaw_nb.paper.attention import mha_problem
from conslaw_nb.paper.moe import moe_problem

def _setup(h, params):
    p = {k: v.to(torch.float64) for k, v in params.items()}
    flat = Flat(p); th = flat.flatten(p); hv = LawVector(h, flat)
    return hv, th, flat, jacrev(hv)(th).norm(dim=1)

PROBLEMS = {'swiglu': lambda: swiglu_problem(5, 9), 'mha': lambda: mha_problem(2, 6, 3, 4, T=3),
            'rope': lambda: mha_problem(2, 6, 4, 4, T=3, rope=True), 'moe': lambda: moe_problem(3, 4, 3)}

@pytest.mark.parametrize('name', PROBLEMS)
def test_norms_exact_on_the_blocks(name):
    pb = PROBLEMS[name]()
    hv, th, flat, exact = _setup(pb.laws, pb.point(0))
    got = law_norms(hv, th, flat=flat)
    torch.testing.assert_close(got, exact, rtol=1e-12, atol=1e-13*float(exact.max()))

def test_norms_every_pass():
    "Per-unit laws (settled by the probes), overlapping ones (boxes), a scalar and a vector parameter, a constant law, duplicates"
    shapes = {'U': (4, 3), 'V': (5, 3), 's': (), 'b': (3,)}
    def h(p): return {'uv': p['U'].T @ p['U'] - p['V'].T @ p['V'],             # overlapping gradients
                      'unit': (p['U']**2).sum(0) * p['s'] + p['b'],            # a per-unit law touching the scalar and the bias
                      'const': torch.zeros(2, dtype=p['U'].dtype) * p['s'],    # gradient exactly 0
                      'dup': (p['V']**2).sum().repeat(2)}                       # two identical laws
    hv, th, flat, exact = _setup(h, random_params(shapes, torch.Generator().manual_seed(3)))
    got = law_norms(hv, th, flat=flat)
    torch.testing.assert_close(got, exact, rtol=1e-12, atol=1e-13*float(exact.max()))
    assert (got[exact == 0] == 0).all() and (exact == 0).sum() == 2

@pytest.mark.parametrize('budget', [2**12, 2**8, 2**7])
def test_norms_small_budget_stays_exact(budget):
    "Small budgets split the boxes into batches (2**12: 2, 2**8: 31) or leave a box past the budget to its own VJP (2**7: 24 of 36 laws)"
    pb = mha_problem(2, 6, 4, 4, T=3, rope=True)
    hv, th, flat, exact = _setup(pb.laws, pb.point(1))
    torch.testing.assert_close(law_norms(hv, th, budget=budget, flat=flat), exact, rtol=1e-12, atol=1e-13*float(exact.max()))

@pytest.mark.parametrize('name', ['swiglu', 'mha', 'rope', 'moe'])
def test_matrix_free_same_verdict_as_dense(name):
    "Laws pass both paths; a perturbed 'law' (a law plus a parameter's square norm) fails both"
    pb = PROBLEMS[name](); p = pb.point(0)
    first = next(iter(p))
    def flat_laws(q):
        out = pb.laws(q)
        return torch.cat([v.reshape(-1) for v in out.values()]) if isinstance(out, dict) else out.reshape(-1)
    def wrong(q): return flat_laws(q)[:3] + (q[first]**2).sum()
    for h, holds in ((pb.laws, True), (wrong, False)):
        d, m = (check_laws(h, pb.f, p, pb.sample_inputs, n_samples=16, method=mt) for mt in ('dense', 'matrix_free'))
        assert (d.max_rel < 1e-10) == (m.max_rel < 1e-10) == holds, (name, holds, d, m)
        assert m.n_rows == 8 and d.n_laws == m.n_laws

def test_matrix_free_under_cross_entropy():
    "A linear head's column sums and bias sum: laws under 'ce', not under 'any', on both paths"
    p = random_params({'W': (4, 3), 'b': (4,)}, torch.Generator().manual_seed(0))
    h = lambda q: torch.cat([q['W'].sum(0), q['b'].sum()[None]])
    for loss, holds in (('ce', True), ('any', False)):
        for mt in ('dense', 'matrix_free'):
            c = check_laws(h, linear_head, p, gaussian_inputs(3), loss=loss, method=mt)
            assert (c.max_rel < 1e-10) == holds, (loss, mt, c)

def test_matrix_free_refuses_ce_with_one_logit():
    p = random_params({'W': (1, 3), 'b': (1,)}, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="at least 2 outputs"):
        check_laws(lambda q: q['W'].sum(0), linear_head, p, gaussian_inputs(3), loss='ce', method='matrix_free')
