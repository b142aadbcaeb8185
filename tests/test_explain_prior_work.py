"""Prior work, reproduced (issue 39, item 4; page nbs/explain/prior_work.ipynb). Each test checks the library against an
independent truth: a published formula (r(r+1)/2, r, 2, dk(dk+1)/2 + dv(dv+1)/2), the dimension of symmetric matrices of
bounded rank, or a closed form of training with weight decay (e^(−2λt), (1 − τλ)^(2k) plus the τ² sum), computed here by
hand with plain GD loops, never the library's own answer."""
import math
import pytest
import torch
from conslaw_nb.engine.core import random_params, gaussian_inputs
from conslaw_nb.engine.count import count_laws
import conslaw_nb.paper.attention as catt, conslaw_nb.paper.moe as cmoe
def linear2(p, x): return p['U'] @ (p['V'].T @ x)
def relu2(p, x): return p['U'] @ torch.relu(p['V'].T @ x)
def relu3(p, x): return p['W3'] @ torch.relu(p['W2'] @ torch.relu(p['W1'] @ x))
def seeded(s): return torch.Generator().manual_seed(s)
def count(f, shapes, xs, seed=0):
    c = count_laws(f, random_params(shapes, seeded(seed)), xs, seed=seed)
    assert c.status == 'ok', c
    return c.n_laws


@pytest.mark.parametrize('n,r,m', [(3, 2, 4), (4, 3, 5), (2, 3, 4), (1, 2, 1)])
def test_linear_two_layer_r_r1_over_2(n, r, m):
    "Marcotte, Gribonval & Peyré 2023: a two-layer linear n–r–m network has r(r+1)/2 laws (here r ≤ n + m)"
    assert count(linear2, {'U': (m, r), 'V': (n, r)}, gaussian_inputs(n)) == r*(r + 1)//2


@pytest.mark.parametrize('n,r,m', [(1, 3, 1), (1, 4, 2), (2, 5, 2)])
def test_linear_two_layer_past_n_plus_m(n, r, m):
    "r > n + m: UᵀU − VᵀV has rank ≤ k = n + m, so only r·k − k(k−1)/2 of its entries are independent, not r(r+1)/2"
    k = n + m
    got = count(linear2, {'U': (m, r), 'V': (n, r)}, gaussian_inputs(n))
    assert got == r*k - k*(k - 1)//2 and got < r*(r + 1)//2


@pytest.mark.parametrize('n,r,m', [(3, 2, 4), (4, 5, 2), (2, 6, 3)])
def test_relu_two_layer_r(n, r, m):
    "Marcotte, Gribonval & Peyré 2023: a two-layer ReLU n–r–m network has r laws, one per neuron"
    assert count(relu2, {'U': (m, r), 'V': (n, r)}, gaussian_inputs(n)) == r


def test_x1x2x3_two_laws():
    assert count(lambda p, x: p['t'].prod()*x, {'t': (3,)}, gaussian_inputs(1)) == 2


def test_attention_head_and_skip_connection():
    "Marcotte et al. 2025: one head has dk(dk+1)/2 + dv(dv+1)/2 laws; x + f(x) has the laws of f"
    d, dk, dv = 4, 3, 2
    shapes = {'Q': (1, d, dk), 'K': (1, d, dk), 'V': (1, d, dv), 'O': (1, d, dv)}
    n_head = count(catt.mha, shapes, gaussian_inputs(3, d))
    assert n_head == dk*(dk + 1)//2 + dv*(dv + 1)//2
    assert count(lambda p, X: X + catt.mha(p, X), shapes, gaussian_inputs(3, d)) == n_head
    assert count(lambda p, x: x + relu2(p, x), {'U': (3, 4), 'V': (3, 4)}, gaussian_inputs(3)) == 4


def test_rope_one_law_per_pair_from_the_commutant():
    "The rotations' commutant has dimension 2 per pair ({I, J}), 1 of them symmetric: dk/2 + dv(dv+1)/2 laws per head"
    d, dk, dv = 4, 4, 2
    shapes = {'Q': (1, d, dk), 'K': (1, d, dk), 'V': (1, d, dv), 'O': (1, d, dv)}
    assert count(lambda p, X: catt.mha(p, X, rope=True), shapes, gaussian_inputs(3, d)) == dk//2 + dv*(dv + 1)//2
    w = [10000.**(-2*j/dk) for j in range(dk//2)]                   # the frequencies, by hand
    M = torch.block_diag(*[wj*torch.tensor([[0., -1.], [1., 0.]], dtype=torch.float64) for wj in w])
    L = torch.stack([E@M - M@E for E in torch.eye(dk*dk, dtype=torch.float64).reshape(-1, dk, dk)]).flatten(1)
    assert dk*dk - int(torch.linalg.matrix_rank(L)) == dk


def _gd(loss, p, tau, steps, lam=0.):
    "Plain GD with coupled weight decay, θ ← θ − τ(∇L + λθ), written out; returns every state and every step's gradient"
    p = {k: v.clone().requires_grad_() for k, v in p.items()}; states, grads = [], []
    for _ in range(steps):
        g = torch.autograd.grad(loss(p), list(p.values()))
        states.append({k: v.detach().clone() for k, v in p.items()}); grads.append(dict(zip(p, g)))
        with torch.no_grad():
            for (k, v), gk in zip(p.items(), g): v -= tau*(gk + lam*v)
    states.append({k: v.detach().clone() for k, v in p.items()})
    return states, grads


def _regression(n_in, n_out, seed=0, n=32):
    g = seeded(seed)
    return torch.randn(n, n_in, generator=g, dtype=torch.float64), torch.randn(n, n_out, generator=g, dtype=torch.float64)


def test_du_layers_balanced_along_gd():
    "Du, Hu & Lee 2018: ‖W_{l+1}‖² − ‖W_l‖² is conserved by the flow: GD's drift halves with τ while ‖W_1‖² moves O(1)"
    X, Y = _regression(4, 3)
    p0 = random_params({'W1': (3, 4), 'W2': (2, 3), 'W3': (3, 2)}, seeded(0))
    loss = lambda p: ((torch.relu(torch.relu(X @ p['W1'].T) @ p['W2'].T) @ p['W3'].T - Y)**2).sum(1).mean()/2
    bal = lambda p: torch.stack([(p['W2']**2).sum() - (p['W1']**2).sum(), (p['W3']**2).sum() - (p['W2']**2).sum()])
    drift = {}
    for tau in (0.02, 0.01):
        st, _ = _gd(loss, p0, tau, round(2./tau))
        drift[tau] = float((bal(st[-1]) - bal(p0)).abs().max())
        moved = abs(float((st[-1]['W1']**2).sum() - (p0['W1']**2).sum()))
    assert moved > 100*drift[0.01] and 1.8 < drift[0.02]/drift[0.01] < 2.2, (drift, moved)


def test_dead_neuron_adds_its_weights_as_laws():
    "A second-layer neuron with all-negative incoming weights is dead on every input: its 3 + 3 weights become laws"
    p = random_params({'W1': (3, 4), 'W2': (2, 3), 'W3': (3, 2)}, seeded(2))
    assert (p['W2'] < 0).all(1).tolist() == [True, False]
    assert count_laws(relu3, p, gaussian_inputs(4)).n_laws == (3 + 2) - 1 + 3 + 3


def test_kunin_rescale_law_under_weight_decay():
    "h(θ_k) = (1−τλ)^(2k) h(θ_0) + R_k exactly, R_{k+1} = (1−τλ)² R_k + τ² h(g_k); the gap to e^(−2λt) h(0) is O(τ)"
    lam, T = 0.05, 4.
    X, Y = _regression(3, 2)
    p0 = random_params({'U': (2, 4), 'V': (3, 4)}, seeded(0))
    loss = lambda p: ((torch.relu(X @ p['V']) @ p['U'].T - Y)**2).sum(1).mean()/2
    h = lambda p: (p['U']**2).sum(0) - (p['V']**2).sum(0)
    gap = {}
    for tau in (0.02, 0.01):
        K = round(T/tau); st, gs = _gd(loss, p0, tau, K, lam)
        R = torch.zeros(4, dtype=torch.float64)
        for g in gs: R = (1 - tau*lam)**2*R + tau**2*h(g)
        h0, hK = h(p0), h(st[-1])
        assert float((hK - (1 - tau*lam)**(2*K)*h0 - R).abs().max()) < 1e-12*float(h0.abs().max())
        gap[tau] = float((hK - math.exp(-2*lam*T)*h0).abs().max())
    assert 1.8 < gap[0.02]/gap[0.01] < 2.2 and gap[0.01] > 1e-8, gap


def test_kunin_translation_law_under_weight_decay():
    "The softmax router's column sum (a translation law) follows (1 − τλ)^k exactly under GD with weight decay"
    lam, tau, K = 0.05, 0.01, 300
    X, Y = _regression(3, 3, seed=3)
    p0 = random_params(cmoe.moe_shapes(3, 2, 3), seeded(3))
    st, _ = _gd(lambda p: ((cmoe.moe(p, X) - Y)**2).sum(1).mean()/2, p0, tau, K, lam)
    s0, sK = p0['W'].sum(0), st[-1]['W'].sum(0)
    assert float((sK - (1 - tau*lam)**K*s0).abs().max()) < 1e-12*float(s0.abs().max())
    assert float((st[-1]['W'] - (1 - tau*lam)**K*p0['W']).abs().max()) > 1e-3     # the router itself moved
