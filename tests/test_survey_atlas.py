"""The law atlas (issue 19): `infer_count_formula` fits the smallest exact formula and confirms it where it was not
fitted, refuses bad input before any count, and reports what it cannot decide; the atlas blocks build at every size
they are counted at; a quick row computes end to end, and `conslaw atlas` prints it."""
import contextlib, io, itertools, math
from types import SimpleNamespace
import pytest
import sympy as sp
import torch
import conslaw_nb.survey.atlas as A, conslaw_nb.survey.formulas as FM, conslaw_nb.cli as cli
from conslaw_nb.engine.count import count_laws
from conslaw_nb.paper.attention import mha
from conslaw_nb.engine.core import gaussian_inputs, random_params
from conslaw_nb.paper.ffn import swiglu

def sym(*names): return [sp.Symbol(n, positive=True, integer=True) for n in names]

def swiglu_build(d, d1): return swiglu, {'A': (d, d1), 'B': (d1, d), 'C': (d1, d)}, gaussian_inputs(d)

# ------------------------------------------------------------------ the exact fit, on counts given
a, b, c = sym('a', 'b', 'c')
POLYS = [a*(b*(b + 1)/2 + c*(c + 1)/2), b + a*c*(c + 1)/2, sp.Rational(3, 2)*a*b*(b + 1) - a + 4, a*b*c, c**2 + 2*b, sp.Integer(7)]

@pytest.mark.parametrize('poly', POLYS, ids=map(str, POLYS))
def test_fit_recovers_polynomials_exactly(poly):
    "Full-rank and fewest-terms paths both return the polynomial itself, rational coefficients and all"
    for grid in ([(1, 2), (1, 2, 3), (1, 2, 3)], [(1, 2, 3), (1, 2, 3), (1, 2, 3)]):
        pts = list(itertools.product(*grid))
        for drop in ([], pts[-2:]):                                   # with and without the largest points
            keep = [p for p in pts if p not in drop]
            fit = FM.fit_count_formula(keep, [int(poly.subs(dict(zip((a, b, c), p)))) for p in keep], 'abc')
            assert fit.expr is not None and sp.simplify(fit.expr - poly) == 0, (grid, drop, fit)
            assert fit.slack == len(keep) - fit.n_coef

def test_fit_says_no_rather_than_guess():
    assert FM.fit_count_formula([(n,) for n in range(1, 7)], [2**n for n in range(1, 7)], ['n']).expr is None
    assert FM.fit_count_formula([(n,) for n in range(1, 7)], [math.factorial(n) for n in range(1, 7)], ['n']).expr is None
    two = FM.fit_count_formula([(1, 1), (2, 2), (3, 3)], [2, 4, 6], ['a', 'b'])
    assert two.expr is None and '2 formulas of 1 terms' in two.reason
    capped = FM.fit_count_formula([(1,), (2,), (3,), (4,)], [1, 4, 9, 16], ['n'], max_degree=1)
    assert capped.expr is None and 'degree <= 1' in capped.reason

@pytest.mark.parametrize('args,msg', [
    (([(1,)], [1, 2], ['n']), 'same length'), (([], [], ['n']), 'non-empty'),
    (([(1, 2)], [1], ['n']), 'one value per name'), (([(1,)], [1], ['n'], -1), '`max_degree` must be an integer >= 0'),
    (([(1,), (2,)], [1, 2.5], ['n']), '`counts` must be integers'),
])
def test_fit_bad_input(args, msg):
    with pytest.raises(ValueError) as e: FM.fit_count_formula(*args)
    assert msg in str(e.value)

# ------------------------------------------------------------------ the verdicts, with the engine replaced by given counts
class HeavyWork(BaseException): "Raised where a bad call would have counted laws"

def fake_engine(monkeypatch, counts):
    "count_laws answers `counts(sizes-of-the-model, seed)` -> int or None (ambiguous); the model is a dict of its sizes"
    def count(f, params, si, seed=0, device=None, **kw):
        n = counts(f.sizes, seed)
        return SimpleNamespace(n_laws=n, status='ok' if n is not None else 'ambiguous', reason='' if n is not None else 'gap too small',
                               n_params=sum(v.numel() for v in params.values()), piecewise=(), gap=1e12, seconds=0.)
    monkeypatch.setattr(FM, 'count_laws', count)

def sized_build(**s):
    f, shapes, si = swiglu_build(2, 2)
    g = lambda p, x: f(p, x)
    g.sizes = s
    return g, shapes, si

def test_verdicts(monkeypatch):
    sizes = {'a': [1, 2, 3], 'b': [1, 2, 3]}
    fake_engine(monkeypatch, lambda s, seed: s['a']*s['b'] + 1)
    cf = FM.infer_count_formula(sized_build, sizes, outside=[{'a': 5, 'b': 1}])
    assert (cf.verdict, sp.simplify(cf.expr - (a*b + 1))) == ('confirmed', 0) and cf.predict(a=7, b=7) == 50
    assert [r['role'] for r in cf.rows].count('held out') == 2 and cf.rows[-1]['role'] == 'outside'
    fake_engine(monkeypatch, lambda s, seed: s['a']*s['b'] + (s['a'] == 5))      # wrong only beyond the grid
    assert FM.infer_count_formula(sized_build, sizes, outside=[{'a': 5, 'b': 1}]).verdict == 'refuted'
    fake_engine(monkeypatch, lambda s, seed: s['a'] + seed*(s == {'a': 1, 'b': 2}))   # the seeds disagree at one point
    cf = FM.infer_count_formula(sized_build, sizes)
    assert cf.verdict == 'undecided' and 'a=1, b=2 (fit, disagree)' in cf.reason
    fake_engine(monkeypatch, lambda s, seed: None if s == {'a': 3, 'b': 3} else s['a'])  # a held-out point is ambiguous
    cf = FM.infer_count_formula(sized_build, sizes)
    assert cf.verdict == 'undecided' and 'held out, ambiguous' in cf.reason and cf.rows[-1]['match'] is None
    fake_engine(monkeypatch, lambda s, seed: 2**s['a'] + 3**s['b'])
    assert FM.infer_count_formula(sized_build, sizes, max_degree=1).verdict == 'no fit'

# ------------------------------------------------------------------ bad input, refused before any count
def flaky(d, d1):
    if d1 == 3: raise RuntimeError('no such width')
    return swiglu_build(d, d1)

BAD = [
    ({'d': [1, 2], 'd1': [1, 2, 3]}, {}, 'failed at d=1, d1=3: RuntimeError: no such width'),
    ([1, 2], {}, 'must be a dict'), ({}, {}, 'is empty'), ({'d': [1, 2], 'd1': 3}, {}, 'list of integers'),
    ({'d': [1, 2], 'd1': [1, 2.5]}, {}, 'integers >= 1'), ({'d': [1, 2], 'd1': [True, 2]}, {}, 'integers >= 1'),
    ({'d': [1, 2], 'd1': [2, 2]}, {}, 'repeats'), ({'d': [1, 2], 'd1': [2]}, {}, 'one value cannot show'),
    ({'d': [1, 2], 'width': [1, 2]}, {}, 'cannot take the sizes'), ({1: [1, 2]}, {}, 'not a parameter name'),
    ({'d': [1, 2], 'd1': [1, 2]}, {}, 'leaves 2 to fit, fewer than the 3'),
    ({'d': [1, 2], 'd1': [1, 2, 4]}, dict(holdout=6), 'leaves 0 to fit'),
    ({'d': [1, 2], 'd1': [1, 2]}, dict(holdout=0), 'nothing would confirm'),
    ({'d': [1, 2], 'd1': [1, 2, 4]}, dict(holdout=-1), '`holdout` must be an integer >= 0'),
    ({'d': [1, 2], 'd1': [1, 2, 4]}, dict(outside={'d': 1, 'd1': 5}), 'list of size dicts'),
    ({'d': [1, 2], 'd1': [1, 2, 4]}, dict(outside=[{'d': 1}]), 'exactly the sizes'),
    ({'d': [1, 2], 'd1': [1, 2, 4]}, dict(outside=[{'d': 1, 'd1': 0}]), 'd1 must be an integer >= 1'),
    ({'d': [1, 2], 'd1': [1, 2, 4]}, dict(outside=[{'d': 1, 'd1': 2}]), 'lies on the grid'),
    ({'d': [1, 2], 'd1': [1, 2, 4]}, dict(outside=[{'d': 1, 'd1': 3}]), 'failed at d=1, d1=3'),
    ({'d': [1, 2], 'd1': [1, 2, 4]}, dict(seeds=[0, 0]), 'repeats a seed'),
    ({'d': [1, 2], 'd1': [1, 2, 4]}, dict(seeds=[]), 'non-empty list'),
    ({'d': [1, 2], 'd1': [1, 2, 4]}, dict(seeds=[-1]), '`seeds entry` must be an integer >= 0'),
    ({'d': [1, 2], 'd1': [1, 2, 4]}, dict(count_kw={'nope': 1}), 'count_laws does not take'),
    ({'d': [1, 2], 'd1': [1, 2, 4]}, dict(max_degree=-1), '`max_degree` must be an integer >= 0'),
]

@pytest.mark.parametrize('sizes,kw,msg', BAD, ids=[m for _, _, m in BAD])
def test_bad_input_before_any_count(sizes, kw, msg, monkeypatch):
    monkeypatch.setattr(FM, 'count_laws', lambda *a, **k: (_ for _ in ()).throw(HeavyWork('counted before checking')))
    with pytest.raises((ValueError, TypeError)) as e: FM.infer_count_formula(flaky, sizes, **kw)
    assert msg in str(e.value), str(e.value)

def test_bad_builds_named(monkeypatch):
    monkeypatch.setattr(FM, 'count_laws', lambda *a, **k: (_ for _ in ()).throw(HeavyWork('counted before checking')))
    g = {'d': [1, 2], 'd1': [1, 2, 3]}
    for build, msg in [(lambda d, d1: None, 'must return (f, shapes, sample_inputs)'), (3, '`build` must be a callable'),
                       (lambda d, d1: (swiglu, {'A': (d, d1)}, gaussian_inputs(d)), 'build(d=1, d1=1)` returns does not run'),
                       (lambda d, d1: swiglu_build(d, d1) if d1 < 3 else (swiglu, {'A': (d, 1)}, gaussian_inputs(d)), 'd=1, d1=3')]:
        with pytest.raises((ValueError, TypeError)) as e: FM.infer_count_formula(build, g)
        assert msg in str(e.value), str(e.value)

# ------------------------------------------------------------------ real counts, small
def test_swiglu_count_formula_is_d1():
    cf = FM.infer_count_formula(swiglu_build, {'d': [1, 2, 3], 'd1': [1, 2, 3]}, outside=[{'d': 2, 'd1': 5}])
    assert (cf.verdict, str(cf.expr)) == ('confirmed', 'd1') and all(r['match'] for r in cf.rows)

def test_blocks_build_everywhere_and_theories_parse():
    assert set(A.QUICK) <= set(A.ATLAS) and A.QUICK
    for n, blk in A.ATLAS.items():
        assert blk.name == n
        names = set(sym(*blk.sizes))
        assert set(blk.theory_expr.free_symbols) <= names, n
        grid = [dict(zip(blk.sizes, v)) for v in itertools.product(*blk.sizes.values())]
        assert blk.outside and not any(o in grid for o in blk.outside), n     # beyond the grid, where the fit never looked
        for s in [blk.small, *blk.outside, *grid]: FM.build_at(blk.build, s, None)

def test_models_match_references():
    g = torch.Generator().manual_seed(1)
    p = random_params({'Q': (2, 3, 2), 'K': (2, 3, 2), 'V': (2, 3, 2), 'O': (2, 3, 2)}, g)
    X = torch.randn(4, 3, generator=g, dtype=torch.float64)
    torch.testing.assert_close(A.window_attention(p, X, window=4), mha(p, X, causal=True))
    torch.testing.assert_close(A.alibi_attention(p, X, slopes=torch.zeros(2)), mha(p, X))
    pm = random_params({'Q': (2, 3, 2), 'Wc': (3, 2), 'Uk': (2, 2, 2), 'Uv': (2, 2, 2), 'O': (2, 3, 2)}, g)
    torch.testing.assert_close(A.mla(pm, X), mha({'Q': pm['Q'], 'K': pm['Wc'] @ pm['Uk'], 'V': pm['Wc'] @ pm['Uv'], 'O': pm['O']}, X))
    with pytest.raises(ValueError, match='`slopes` must have shape'): A.alibi_attention(p, X, slopes=torch.zeros(3))
    with pytest.raises(ValueError, match='`feature` must be one of'): A.linear_attention(p, X, 'softmax')
    pd = random_params(A.decoder_shapes(3, 1, 1, 1, 1), g)
    with pytest.raises(ValueError, match='`eps` must be a finite number'): A.decoder_layer(pd, X, eps=-1.)

def test_quick_row_and_cli(capsys):
    r = A.atlas_row('geglu')
    assert r.fit.verdict == 'confirmed' and r.theory_holds and r.laws_complete and r.domain_as_stated
    assert r.drift.law < r.drift.control and r.drift.law_ratio > 3 > r.drift.control_ratio
    table = A.format_atlas([r])
    assert 'geglu' in table and 'confirmed' in table and '‖A[:, i]‖² − ‖C[i, :]‖²' in table
    fig = A.plot_atlas([r], ncols=2); assert len(fig.axes) == 2
    with pytest.raises(ValueError, match="`block` must be one of"): A.atlas_row('transformer')
    with pytest.raises(ValueError, match="`block` must be one of"): A.atlas(['geglu', 'nope'])
    assert cli.main(['atlas', '--block', 'diag-ssm']) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith('block') and 'diag-ssm' in out and ' n ' in out and 'everywhere on the grid' in out

# ------------------------------------------------------------------ where a formula holds (issue 40 item 3)
def test_separation_recovers_known_inequalities():
    "Synthetic hits and misses: the search returns the inequalities that made them, and says so when none can"
    P = torch.tensor(list(itertools.product(range(1, 7), [1, 2, 3], [1, 2, 3]))).numpy()    # (a, b, c)
    inside = (P[:, 0] <= 2*P[:, 1]) & (P[:, 2] >= 2)
    ineq, alts, why = FM._separate(FM._candidates(('a', 'b', 'c'), P, inside, ~inside), ~inside, 3)
    assert (set(ineq), alts, why) == ({'a <= 2*b', 'c >= 2'}, [], '')
    odd = P[:, 0] % 2 == 1                                                    # parity is no inequality
    assert FM._separate(FM._candidates(('a', 'b', 'c'), P, odd, ~odd), ~odd, 2)[0] is None

def test_domain_with_given_counts(monkeypatch):
    "The engine replaced by a known rule (r(r+1)/2 while r <= n + m, one less past it): the domain is that inequality"
    fake_engine(monkeypatch, lambda s, seed: s['r']*(s['r'] + 1)//2 - (s['r'] > s['n'] + s['m']))
    def build(n, r, m):
        g, shapes, si = sized_build(); g.sizes = dict(n=n, r=r, m=m); return g, shapes, si
    dom = FM.formula_domain(build, 'r*(r + 1)/2', {'n': [1, 2, 3], 'r': [1, 2, 3, 4, 5, 6, 7], 'm': [1, 2]})
    assert (dom.inequalities, dom.alternatives) == (('r <= n + m',), [])
    c = dom.counterexample
    assert (c['sizes'], c['counts'], c['predicted']) == ({'n': 1, 'r': 3, 'm': 1}, [5, 5], 6)
    assert dom.contains(n=9, r=10, m=1) and not dom.contains(n=1, r=10, m=1) and dom.failing(n=1, r=3, m=1) == ['r <= n + m']
    with pytest.raises(ValueError, match=r"needs the sizes \['m'\]"): dom.contains(n=1, r=2)
    fake_engine(monkeypatch, lambda s, seed: s['r']*(s['r'] + 1)//2 + (s['r'] % 2 == 0 and s['r'] > 2))   # no inequality: say so
    dom = FM.formula_domain(build, 'r*(r + 1)/2', {'n': [1], 'r': [1, 2, 3, 4, 5, 6], 'm': [1]})
    assert dom.inequalities is None and 'no one or two inequalities' in dom.reason and str(dom) == 'unknown'

DOMAIN_BAD = [([], 'r', 'must be a dict'), ({'r': [1]}, 'r', 'has 1 point'), ({'r': [0, 1]}, 'r', 'integers >= 1'),
              ([{'r': [1, 2]}, {'n': [1]}], 'r', 'the same sizes'), ({'r': [1, 2]}, 'r*n', "sizes ['n']"),
              ({'r': [1, 2]}, 'r <=', 'does not parse'), ({'r': [1, 2]}, 3, 'must be a CountFormula'),
              ({'w': [1, 2], 'r': [1, 2]}, 'r', 'cannot take the sizes')]

@pytest.mark.parametrize('grid,formula,msg', DOMAIN_BAD, ids=[m for _, _, m in DOMAIN_BAD])
def test_domain_bad_input_before_any_count(grid, formula, msg, monkeypatch):
    monkeypatch.setattr(FM, 'count_laws', lambda *a, **k: (_ for _ in ()).throw(HeavyWork('counted before checking')))
    with pytest.raises((ValueError, TypeError)) as e: FM.formula_domain(lambda r: swiglu_build(1, r), formula, grid)
    assert msg in str(e.value), str(e.value)
    with pytest.raises(ValueError, match=r"add \['d1'\] to it"):
        FM.infer_count_formula(swiglu_build, {'d': [1, 2], 'd1': [1, 2, 3]}, domain={'d': [1, 2]})

def plain_mla(p, X):
    "Multi-head latent attention in plain torch, head by head: keys and values of every head read the latent X Wc"
    c, out = X @ p['Wc'], 0
    for h in range(p['Q'].shape[0]):
        q, k, v = X @ p['Q'][h], c @ p['Uk'][h], c @ p['Uv'][h]
        out = out + torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), -1) @ v @ p['O'][h].T
    return out

def mla_count(H, r, dk, d):
    "The engine's count on `plain_mla`, at two random points that must agree"
    shapes = {'Q': (H, d, dk), 'Wc': (d, r), 'Uk': (H, r, dk), 'Uv': (H, r, dk), 'O': (H, d, dk)}
    cs = {count_laws(plain_mla, random_params(shapes, torch.Generator().manual_seed(s)), gaussian_inputs(3, d), seed=s).n_laws
          for s in (0, 1)}
    assert len(cs) == 1 and None not in cs, cs
    return cs.pop()

def test_mla_domain_found_and_true():
    "The search finds MLA's latent boundary; a forward written here counts as the formula inside it and differently outside"
    formula = A.ATLAS['mla'].theory_expr
    dom = FM.formula_domain(A.ATLAS['mla'].build, formula, {'H': [1], 'r': [3, 4, 5], 'dk': [1], 'd': [1, 2]})
    assert dom.inequalities == ('r <= d + 2',), dom                  # H = dk = 1 here: d + 2*H*dk, as the atlas states
    assert A.ATLAS['mla'].domain == ('r <= d + 2*H*dk',)
    value = lambda **s: int(formula.subs(FM.size_symbols(s)))
    for s in [dict(H=1, r=4, dk=1, d=2), dict(H=2, r=6, dk=1, d=2)]:                       # inside
        assert A.atlas_count('mla', s).source == 'formula' and mla_count(**s) == value(**s) == A.atlas_count('mla', s).count
    for s, n in [(dict(H=1, r=5, dk=1, d=2), 16), (dict(H=2, r=7, dk=1, d=2), 31)]:       # outside: the case first
        c = A.atlas_count('mla', s)
        assert (c.source, c.broken, c.count) == ('engine', ['r <= d + 2*H*dk'], mla_count(**s)) and n == c.count != value(**s)

def test_cli_refuses_formula_outside_its_domain(capsys):
    assert cli.main(['atlas', '--block', 'mla', '--at', 'H=1', 'r=5', 'dk=1', 'd=2']) == 0
    out = capsys.readouterr().out
    assert "outside the formula's domain (r <= d + 2*H*dk fails)" in out and 'the engine counts 16 laws' in out and '17' not in out
    assert cli.main(['atlas', '--block', 'mla', '--at', 'H=1', 'r=4', 'dk=1', 'd=2']) == 0
    assert '12 laws, by the formula' in capsys.readouterr().out
    assert cli.main(['atlas', '--block', 'mla', '--at', 'H=1', 'r=5', 'dk=1', 'd=2', '--max-params', '10']) == 0
    out = capsys.readouterr().out
    assert 'too big to count here, no count' in out and '17' not in out and '16' not in out
    assert cli.main(['atlas', '--block', 'mla', '--at', 'H=1', 'r=5']) == 2
    assert '--at must give each size of mla once: H=N r=N dk=N d=N' in capsys.readouterr().err
    assert cli.main(['atlas', '--block', 'mla', 'gqa', '--at', 'H=1']) == 2
    assert '--at needs exactly one --block' in capsys.readouterr().err


def test_atlas_keeps_the_formula_names():
    "The count formulas live in `formulas` (19b_formulas); `atlas` re-exports the ones users import from it"
    for n in ('infer_count_formula', 'CountFormula', 'Domain'):
        assert getattr(A, n) is getattr(FM, n), n
