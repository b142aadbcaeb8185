"""Property tests: over random sizes and seeds, the engine's count equals the theory formula the library states, and the
stated laws pass `check_laws`. Families from the engine page (linear, ReLU, products) live here; the paper's families
(FFN, SwiGLU, MHA, PE, RoPE, MoE) are driven through `conslaw_nb.verify`'s builders."""
import math
import torch
from hypothesis import given, settings, strategies as st
from conslaw_nb.pde import count_laws, check_laws, laws_rank, random_params
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
    c = count_laws(relu2, p, gauss(n), seed=seed, patience=256)
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
