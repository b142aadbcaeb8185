"""Rank honesty: where the decision is genuinely hard the engine says 'ambiguous' or raises; it never returns a wrong
count with status 'ok'. Also: the gap is always reported, the decision is scale invariant, and runs are deterministic."""
import math
import pytest
from hypothesis import given, settings, strategies as st
import torch
from conslaw_nb.engine.core import random_params
from conslaw_nb.engine.rank import rank_decision, AmbiguousRankError
from conslaw_nb.engine.count import count_laws
from conftest import tally

def gauss(n_in, dtype=torch.float64): return lambda n, g: torch.randn(n, n_in, generator=g, dtype=dtype)
def linear2(p, x): return p['U'] @ (p['V'].T @ x)

def honest(c, expected):
    "ok-and-right, or ambiguous with no count: never ok-and-wrong"
    assert c.gap > 0 and not math.isnan(c.gap)
    if c.status == 'ok': assert c.n_laws == expected, c
    else: assert c.status == 'ambiguous' and c.n_laws is None and c.reason, c

@pytest.mark.parametrize('seed', range(8))
def test_float32_never_wrong(seed):
    n, r, m = 4, 3, 4
    p = random_params({'U': (m, r), 'V': (n, r)}, torch.Generator().manual_seed(seed), dtype=torch.float32)
    c = count_laws(linear2, p, gauss(n, torch.float32), seed=seed, options=dict(dtype=torch.float32))
    honest(c, r*(r+1)//2); tally('float32')

@pytest.mark.parametrize('scale', [1e-6, 1e-3, 1e3, 1e6])
def test_weight_scale(scale):
    "Scaling every weight: the count is unchanged, or the engine refuses"
    n, r, m = 3, 2, 4
    p = {k: v*scale for k, v in random_params({'U': (m, r), 'V': (n, r)}, torch.Generator().manual_seed(0)).items()}
    honest(count_laws(linear2, p, gauss(n)), r*(r+1)//2); tally('scale')

@pytest.mark.parametrize('eps', [1e-4, 1e-8, 1e-12])
def test_nearly_degenerate(eps):
    "V with two nearly parallel columns: right or ambiguous"
    n, r, m = 3, 2, 4
    p = random_params({'U': (m, r), 'V': (n, r)}, torch.Generator().manual_seed(1))
    p['V'][:, 1] = p['V'][:, 0] + eps*torch.randn(n, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    honest(count_laws(linear2, p, gauss(n)), r*(r+1)//2); tally('degenerate')

def test_attention_saturated_softmax():
    "Huge query/key scales saturate the softmax: right or ambiguous"
    def att(p, X): return torch.softmax((X@p['Q'])@(X@p['K']).T, -1) @ X @ p['V'] @ p['O'].T
    for s in (1., 30., 300.):
        p = random_params({'Q': (4, 2), 'K': (4, 2), 'V': (4, 2), 'O': (4, 2)}, torch.Generator().manual_seed(0))
        p['Q'] = p['Q']*s
        honest(count_laws(att, p, lambda n, g: torch.randn(n, 3, 4, generator=g, dtype=torch.float64)), 6)
        tally('saturated')

def test_too_few_fixed_samples_raise():
    with pytest.raises(ValueError, match='do not saturate'):
        count_laws(linear2, {'U': (4, 2), 'V': (3, 2)}, torch.randn(2, 3, dtype=torch.float64))

def test_capped_samples_are_ambiguous_not_wrong():
    "A cap too small to saturate the span gives 'ambiguous' with a reason"
    c = count_laws(linear2, {'U': (5, 4), 'V': (5, 4)}, gauss(5), options=dict(n_samples=2, max_samples=3))
    assert c.status == 'ambiguous' and 'max_samples' in c.reason

def test_rank_decision_scale_invariant():
    s = torch.tensor([3., 1., .2, 1e-14, 1e-15], dtype=torch.float64)
    for k in (1e-200, 1e-8, 1., 1e8, 1e200):
        d = rank_decision(s*k, 5, 5)
        assert (d.rank, d.status) == (3, 'ok') and math.isclose(d.gap, rank_decision(s, 5, 5).gap, rel_tol=1e-9)

def test_ambiguous_int_raises():
    d = rank_decision(torch.logspace(0, -15, 16, dtype=torch.float64), 16, 16)
    with pytest.raises(AmbiguousRankError, match='gap'): int(d)

def test_deterministic():
    p = random_params({'U': (4, 3), 'V': (3, 3)}, torch.Generator().manual_seed(0))
    a, b = count_laws(linear2, p, gauss(3), seed=5), count_laws(linear2, p, gauss(3), seed=5)
    assert (a.n_laws, a.dims_by_depth, a.n_samples, a.gap) == (b.n_laws, b.dims_by_depth, b.n_samples, b.gap)

# Top-1 routing with the gate normalised over the kept expert (Mixtral, Qwen3-MoE): the gate is p/p = 1, the router gets no
# gradient and all E·d of its weights are conserved. Autograd computes that derivative as rounding noise shaped like a true
# router gradient; a bracket whose terms are all such noise must stay at rounding level (`pde.bracket_scale`), never
# become a direction. Truth at d = 4, E = 3, d_ff = 3: 12 router weights + 9 SwiGLU rescalings = 21.
TOP1 = dict(d=4, E=3, d_ff=3, laws=4*3 + 3*3)

def _top1_block(kind, init):
    from conslaw_nb.hf.adapters import adapt, init_generic
    c = TOP1
    if kind == 'mixtral':
        from transformers import MixtralConfig
        from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock
        m = MixtralSparseMoeBlock(MixtralConfig(hidden_size=c['d'], num_attention_heads=1, intermediate_size=c['d_ff'],
                                                num_local_experts=c['E'], num_experts_per_tok=1))
    else:
        from transformers import Qwen3MoeConfig
        from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock
        m = Qwen3MoeSparseMoeBlock(Qwen3MoeConfig(hidden_size=c['d'], num_attention_heads=1, moe_intermediate_size=c['d_ff'],
                                                  num_experts=c['E'], num_experts_per_tok=1, norm_topk_prob=True))
    return adapt(init_generic(m.double(), torch.Generator().manual_seed(init)), check=False)

@pytest.mark.parametrize('kind', ['mixtral', 'qwen3_moe'])
@settings(max_examples=12)
@given(init=st.integers(0, 2**20), seed=st.integers(0, 2**20))
def test_top1_router_noise_is_never_a_direction(kind, init, seed):
    "21 laws or 'ambiguous' at every point and seed: never a wrong 'ok'"
    pytest.importorskip('transformers')
    a = _top1_block(kind, init)
    assert a.n_laws == TOP1['laws']
    honest(count_laws(a.f, a.params, a.inputs, seed=seed), TOP1['laws']); tally('top-1 router')
