"""Corrected statements of issue 39 ("every sentence true where it speaks"), each tested against an independent truth.

1. Losses page: under a linear head with V >= 2 classes, cross-entropy adds min(d + 1, V + d1) laws to SwiGLU (d, d1), not
   d + 1 (the old sentence). The formula is derived on the page (exact reduction N_ce(V) = d + 1 + N_any(V - 1), plus the
   rank of H^T H - A A^T); here the engine's counts are compared with it, and the page's linear-algebra step (a Gram law
   whose gradient is a column-sum law's) and the shift laws are checked with plain torch.
2. Local-or-global page: the laws found beyond the paper's are not all local. Families the page's table calls global
   (pre-norm RMSNorm gain laws, GQA group laws, the cross-entropy shifts) hold at random points of scale 0.1 and 10,
   checked on plain-torch forwards written here, not on the library's models.
"""
import math
import pytest
import torch
import torch.nn.functional as F
from conslaw_nb.engine.core import random_params, gaussian_inputs
from conslaw_nb.engine.count import count_laws
import conslaw_nb.paper.ffn as cffn
TOL = torch.finfo(torch.float64).eps**0.5      # rounding left in an inner product of computed gradients (√ε)
FAIL = 1e-3                                    # a quantity that is not a law misses orthogonality by far more


def ce_excess_formula(d, d1, V): return min(d + 1, V + d1)       # the losses page's formula, V >= 2


def swiglu_head(p, x): return p['H'] @ cffn.swiglu(p, x) + p['c']


def head_counts(d, d1, V, seed=0):
    "The engine's counts under 'any' and 'ce' for SwiGLU (d, d1) under a head of V classes"
    p = random_params({'A': (d, d1), 'B': (d1, d), 'C': (d1, d), 'H': (V, d), 'c': (V,)}, torch.Generator().manual_seed(seed))
    c = {loss: count_laws(swiglu_head, p, gaussian_inputs(d), loss=loss) for loss in ('any', 'ce')}
    assert all(x.status == 'ok' for x in c.values()), c
    return c['any'].n_laws, c['ce'].n_laws


def test_ce_adds_fewer_than_d_plus_1_at_a_bottleneck():
    "The brief's case (d, d1, V) = (4, 1, 2): 10 laws under any loss, 13 under cross-entropy; the old sentence said +5"
    n_any, n_ce = head_counts(4, 1, 2)
    assert (n_any, n_ce) == (10, 13)
    assert n_ce - n_any != 4 + 1
    assert n_ce - n_any == ce_excess_formula(4, 1, 2)


@pytest.mark.parametrize('d,d1,V', [(3, 1, 2), (5, 1, 3), (4, 2, 2), (3, 2, 2), (2, 1, 3), (3, 3, 4)])
def test_ce_excess_formula(d, d1, V):
    "min(d + 1, V + d1) at bottlenecks (V + d1 <= d) and beside them, where it is d + 1"
    n_any, n_ce = head_counts(d, d1, V)
    assert n_ce - n_any == ce_excess_formula(d, d1, V)


def test_ce_reduction():
    "The page's exact reduction: N_ce(d, d1, V) = d + 1 + N_any(d, d1, V - 1), at a bottleneck"
    assert head_counts(4, 1, 3)[1] == 4 + 1 + head_counts(4, 1, 2)[0]


# plain-torch checks -------------------------------------------------------------------------------------------------------

def flat(p):
    names = list(p)
    theta = torch.cat([p[n].reshape(-1) for n in names])
    sizes, shapes = [p[n].numel() for n in names], [p[n].shape for n in names]
    return theta, lambda t: {n: c.reshape(s) for n, c, s in zip(names, t.split(sizes), shapes)}


def max_rel(f, h, p, X, P=None):
    "Largest |<grad h_j, grad f_k(x)>| / (|grad h_j| |grad f_k(x)|) over laws j, outputs k, inputs x (rows of f projected by P)"
    theta, unflat = flat(p)
    J = torch.func.jacrev(lambda t: torch.stack([f(unflat(t), x).reshape(-1) for x in X]))(theta)      # (N, K, D)
    if P is not None: J = torch.einsum('ij,njd->nid', P, J)
    J = J.reshape(-1, theta.numel())
    G = torch.func.jacrev(lambda t: h(unflat(t)).reshape(-1))(theta)                                  # (L, D)
    jn, gn = J.norm(dim=1), G.norm(dim=1)
    keep = jn > 0
    return float(((G @ J[keep].T).abs() / (gn[:, None] * jn[keep][None])).max())


def point(shapes, scale, seed):
    g = torch.Generator().manual_seed(seed)
    return {k: scale*torch.randn(s, generator=g, dtype=torch.float64)/math.sqrt(s[-1]) for k, s in shapes.items()}


def head_forward(p, x):                          # the SwiGLU block under a linear head, written out
    return p['H'] @ (p['A'] @ (F.silu(p['B'] @ x) * (p['C'] @ x))) + p['c']


@pytest.mark.parametrize('scale', [0.1, 10.])
def test_ce_shift_laws_hold_at_a_bottleneck(scale):
    "At (4, 1, 2) all d + 1 shifts are cross-entropy laws (rows projected on 1-perp), and not laws for every loss"
    d, d1, V = 4, 1, 2
    p = point({'A': (d, d1), 'B': (d1, d), 'C': (d1, d), 'H': (V, d), 'c': (V,)}, scale, 0)
    X = torch.randn(16, d, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    shifts = lambda q: torch.cat([q['H'].sum(0), q['c'].sum()[None]])
    P = torch.eye(V, dtype=torch.float64) - 1/V
    assert max_rel(head_forward, shifts, p, X, P) < TOL
    assert max_rel(head_forward, shifts, p, X) > FAIL


def test_gram_law_gradient_is_a_column_sum_gradient():
    "The page's step: with R the complement of A's columns and H's row differences, every a in R has a symmetric S with SA = 0, HS = 1a^T"
    d, d1, V = 5, 1, 2
    g = torch.Generator().manual_seed(3)
    H, A = torch.randn(V, d, generator=g, dtype=torch.float64), torch.randn(d, d1, generator=g, dtype=torch.float64)
    M = torch.cat([A, (H[1:] - H[:1]).T], 1)
    R = torch.linalg.svd(M.T, full_matrices=True).Vh[M.shape[1]:].T
    assert R.shape[1] == d + 1 - V - d1 == (d + 1) - ce_excess_formula(d, d1, V)
    v = R @ (R.T @ H[0])
    for a in R.T:
        S = (torch.outer(a, v) + torch.outer(v, a))/(v @ v) - (a @ v)*torch.outer(v, v)/(v @ v)**2
        assert torch.allclose(S, S.T)
        assert float((H @ S - torch.outer(torch.ones(V, dtype=H.dtype), a)).abs().max()) < 1e-12
        assert float((S @ A).abs().max()) < 1e-12


def rms(z, g, eps=1e-6): return g * z / torch.sqrt((z**2).mean(-1, keepdim=True) + eps)


def prenorm_layer(p, X):                         # x + attn(RMSNorm(x)), then + SwiGLU(RMSNorm(.)), one head
    Z = rms(X, p['g1'])
    Y = X + torch.softmax((Z @ p['Q']) @ (Z @ p['K']).T / math.sqrt(p['Q'].shape[1]), -1) @ (Z @ p['V']) @ p['O'].T
    Z = rms(Y, p['g2'])
    return Y + (F.silu(Z @ p['B'].T) * (Z @ p['C'].T)) @ p['A'].T


def gain_laws(p):
    return torch.cat([p['g1']**2 - (p['Q']**2).sum(1) - (p['K']**2).sum(1) - (p['V']**2).sum(1),
                      p['g2']**2 - (p['B']**2).sum(0) - (p['C']**2).sum(0)])


def gqa(p, X):                                   # two query heads sharing one key/value head
    k, v = X @ p['K'], X @ p['V']
    return sum(torch.softmax((X @ p['Q'][h]) @ k.T / math.sqrt(k.shape[1]), -1) @ v @ p['O'][h].T for h in range(2))


def gqa_laws(p):
    gram = lambda M: M.T @ M
    return torch.cat([(gram(p['Q'][0]) + gram(p['Q'][1]) - gram(p['K'])).reshape(-1),
                      (gram(p['V']) - gram(p['O'][0]) - gram(p['O'][1])).reshape(-1)])


d_, T_ = 4, 3
FAMILIES = {
    'pre-norm RMSNorm gains': (prenorm_layer, {'g1': (d_,), 'Q': (d_, 2), 'K': (d_, 2), 'V': (d_, 2), 'O': (d_, 2), 'g2': (d_,),
                                               'A': (d_, 3), 'B': (3, d_), 'C': (3, d_)}, gain_laws,
                               lambda p: p['g1']**2 - (p['Q']**2).sum(1)),          # not a law: the gain against Q alone
    'GQA group laws': (gqa, {'Q': (2, d_, 2), 'K': (d_, 2), 'V': (d_, 2), 'O': (2, d_, 2)}, gqa_laws,
                       lambda p: (p['Q'][0].T @ p['Q'][0] - p['K'].T @ p['K']).reshape(-1))}   # one query head of the group only


@pytest.mark.parametrize('scale', [0.1, 10.])
@pytest.mark.parametrize('family', list(FAMILIES))
def test_global_family_holds_at_far_random_points(family, scale):
    "Laws the old sentence called local hold at random points of scale 0.1 and 10; a near-miss quantity fails there"
    f, shapes, h, not_h = FAMILIES[family]
    X = torch.randn(12, T_, d_, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    for seed in (0, 1):
        p = point(shapes, scale, seed)
        assert max_rel(f, h, p, X) < TOL, (family, scale, seed)
        assert max_rel(f, not_h, p, X) > FAIL, (family, scale, seed)
