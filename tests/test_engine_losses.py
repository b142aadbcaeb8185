"""Laws under a given loss (issue 15, item 1): a linear head with bias f = W x + b (K classes, d inputs) has no law under
`loss='any'` (or 'mse') and d + 1 under `loss='ce'` (the column sums of W and b.sum(), a common shift of the logits),
counted by the engine and found by `find_laws`; the laws found pass `check_laws` under 'ce' and fail it under 'any'."""
import pytest
import torch
from conslaw_nb.engine.core import random_params, law_tol
from conslaw_nb.engine.count import count_laws
from conslaw_nb.engine import check_laws
from conslaw_nb.engine.rows import LOSSES
from conslaw_nb.engine.rows import linear_head
from conslaw_nb.discovery.lawsearch import Ansatz, law_nullspace, loss_directions
from conslaw_nb.discovery.found import find_laws

SIZES = [(1, 2), (2, 3), (3, 2), (4, 5)]    # (d, K)
FAIL_REL = 0.1                             # a law that fails does so at O(1) relative inner product, far above law_tol


def head(d, K, seed=0):
    p = random_params({'W': (K, d), 'b': (K,)}, torch.Generator().manual_seed(seed))
    return p, (lambda n, g: torch.randn(n, d, generator=g, dtype=torch.float64))


def shift_laws(p): return {'W.sum(0)': p['W'].sum(0), 'b.sum()': p['b'].sum()[None]}


@pytest.mark.parametrize('d,K', SIZES)
def test_count_linear_head(d, K):
    p, xs = head(d, K)
    counts = {loss: count_laws(linear_head, p, xs, loss=loss) for loss in LOSSES}
    assert all(c.status == 'ok' for c in counts.values()), counts
    assert [counts[l].n_laws for l in LOSSES] == [0, 0, d + 1]


@pytest.mark.parametrize('d,K', SIZES)
def test_find_laws_linear_head(d, K):
    p, xs = head(d, K, seed=1)
    L_any, L_ce = find_laws(linear_head, p, xs), find_laws(linear_head, p, xs, loss='ce')
    assert (len(L_any), L_any.count.n_laws, L_any.status) == (0, 0, 'ok')
    assert (len(L_ce), L_ce.count.n_laws, L_ce.status) == (d + 1, d + 1, 'ok')
    col_sums = 'W.sum(0)' if d > 1 else 'W.sum()'         # one column: its sum is the sum of W
    assert {g.expr for g in L_ce.groups} == {col_sums, 'b.sum()'}
    got, want = L_ce(p), shift_laws(p)
    for e, w in [(col_sums, want['W.sum(0)']), ('b.sum()', want['b.sum()'])]:
        torch.testing.assert_close(got[e].reshape(-1), w.reshape(-1), rtol=1e-10, atol=1e-12)
    assert L_ce.law_check.max_rel < law_tol()
    assert check_laws(L_ce, linear_head, p, xs, loss='any').max_rel > FAIL_REL


@pytest.mark.parametrize('d,K', SIZES)
def test_check_shift_laws(d, K):
    p, xs = head(d, K, seed=2)
    assert check_laws(shift_laws, linear_head, p, xs, loss='ce').max_rel < law_tol()
    assert check_laws(shift_laws, linear_head, p, xs, loss='any').max_rel > FAIL_REL
    assert check_laws(shift_laws, linear_head, p, xs, loss='mse').max_rel > FAIL_REL


def test_nullspace_under_ce():
    "The law search's own null space: d + 1 linear laws under 'ce', none under 'any'"
    p, xs = head(2, 3)
    dims = [law_nullspace(linear_head, p, Ansatz(p, 'linear'), xs, loss=loss).basis.shape[0] for loss in LOSSES]
    assert dims == [0, 0, 3]
    U = loss_directions('ce', 5)
    torch.testing.assert_close(U @ U.T, torch.eye(4, dtype=torch.float64))
    torch.testing.assert_close(U.sum(1), torch.zeros(4, dtype=torch.float64), atol=1e-12, rtol=0)
    assert loss_directions('any', 5) is None and loss_directions('mse', 5) is None


def test_bad_loss():
    p, xs = head(2, 3)
    with pytest.raises(ValueError, match='`loss` must be one of'): find_laws(linear_head, p, xs, loss='xent')
    with pytest.raises(ValueError, match='`loss` must be one of'): find_laws(linear_head, p, xs, loss=None)
    with pytest.raises(ValueError, match='`count_kw` sets'): find_laws(linear_head, p, xs, count_kw={'loss': 'ce'})
    with pytest.raises(ValueError, match='`loss` must be one of'):
        law_nullspace(linear_head, p, Ansatz(p, 'linear'), xs, loss='CE')
    p1, xs1 = head(2, 1)
    with pytest.raises(ValueError, match='at least 2 outputs'): find_laws(linear_head, p1, xs1, loss='ce')
