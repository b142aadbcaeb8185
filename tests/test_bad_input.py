"""A catalogue of bad inputs for the public functions: each raises a ValueError (or TypeError) that names the problem,
before heavy work. The command line's bad invocations (this file's former CLI list among them) are in
tests/test_cli.py: one line on stderr, a non-zero exit, no traceback."""
import pytest
import torch
from torch import nn
from conslaw_nb.engine.core import random_params
from conslaw_nb.engine.count import count_laws
from conslaw_nb.engine import check_laws, laws_rank
import conslaw_nb.paper.ffn as ffn, conslaw_nb.paper.attention as attention, conslaw_nb.paper.moe as moe, conslaw_nb.theorems as verify, conslaw_nb.paper.blocks as blocks
f64 = dict(dtype=torch.float64)
nan = float('nan')
def gauss(*s): return lambda n, g: torch.randn(n, *s, generator=g, **f64)
def linear2(p, x): return p['U'] @ (p['V'].T @ x)

ENGINE = [
    ('nan params', lambda: count_laws(linear2, {'U': torch.full((2, 2), nan), 'V': torch.ones(2, 2)}, gauss(2)), 'non-finite'),
    ('inf params', lambda: check_laws(lambda p: p['U'].sum(), linear2, {'U': torch.full((2, 2), float('inf')), 'V': torch.ones(2, 2)}, gauss(2)), 'non-finite'),
    ('shape mismatch', lambda: count_laws(linear2, {'U': (4, 2), 'V': (3, 2)}, gauss(5)), 'failed on one sample'),
    ('no inputs', lambda: count_laws(linear2, {'U': (4, 2), 'V': (3, 2)}, None), 'sample_inputs'),
    ('empty inputs', lambda: count_laws(linear2, {'U': (4, 2), 'V': (3, 2)}, torch.zeros(0, 3, **f64)), 'empty'),
    ('sampler returns wrong n', lambda: count_laws(linear2, {'U': (4, 2), 'V': (3, 2)}, lambda n, g: torch.randn(1, 3)), 'returned 1 inputs'),
    ('nan inputs', lambda: count_laws(linear2, {'U': (4, 2), 'V': (3, 2)}, lambda n, g: torch.full((n, 3), nan)), 'non-finite'),
    ('too few fixed inputs', lambda: count_laws(linear2, {'U': (4, 2), 'V': (3, 2)}, torch.randn(2, 3, **f64)), 'do not saturate'),
    ('plain f without params', lambda: count_laws(linear2, None, gauss(3)), 'params'),
    ('not a model', lambda: count_laws(42, {'U': (2, 2)}, gauss(2)), 'callable'),
    ('empty params', lambda: laws_rank(lambda p: p, {}), 'non-empty'),
    ('laws not tensors', lambda: check_laws(lambda p: 'x', linear2, {'U': (4, 2), 'V': (3, 2)}, gauss(3)), 'must return a tensor'),
    ('laws left out', lambda: check_laws(linear2, {'U': (4, 2), 'V': (3, 2)}, gauss(3)), 'check_laws(h, f, params, sample_inputs)'),
    ('module laws left out', lambda: check_laws(nn.Linear(3, 2), None, gauss(3)), 'the laws `h` are left out'),
    ('dropout in training mode', lambda: count_laws(nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.1), nn.Linear(4, 2)), None, gauss(3)), 'call model.eval()'),
    ('attention dropout in training mode', lambda: count_laws(nn.TransformerEncoderLayer(4, 2, 8, batch_first=True), None, gauss(3, 4)), 'call model.eval()'),
    ('cuda missing', lambda: count_laws(linear2, {'U': (4, 2), 'V': (3, 2)}, gauss(3), device='cuda:99' if torch.cuda.is_available() else 'cuda'), "device='cuda"),
    ('unknown device', lambda: check_laws(lambda p: p['U'].sum(), linear2, {'U': (4, 2), 'V': (3, 2)}, gauss(3), device='tpu'), "device='tpu'"),
    ('meta module', lambda: count_laws(nn.Linear(3, 2, device='meta'), None, gauss(3)), "model.to_empty(device='cpu') then init"),
    ('meta params', lambda: count_laws(linear2, {'U': torch.empty(4, 2, device='meta'), 'V': (3, 2)}, gauss(3)), 'meta device hold no values'),
]
FFN = [
    ('ffn A/B mismatch', lambda: ffn.ffn({'A': torch.ones(3, 4, **f64), 'B': torch.ones(5, 3, **f64)}, torch.ones(3, **f64)), 'A'),
    ('ffn unknown act', lambda: ffn.ffn({'A': torch.ones(3, 4, **f64), 'B': torch.ones(4, 3, **f64)}, torch.ones(3, **f64), act='tanh'), 'act'),
    ('swiglu wrong x', lambda: ffn.swiglu(random_params({'A': (3, 4), 'B': (4, 3), 'C': (4, 3)}), torch.ones(5, **f64)), 'x'),
    ('swiglu d1 = 0', lambda: blocks.SwiGLU(3, 0), 'd1'),
    ('swiglu nan', lambda: ffn.swiglu_laws({'A': torch.full((3, 4), nan), 'C': torch.ones(4, 3)}), 'finite'),
    ('swiglu_laws on a Linear', lambda: ffn.swiglu_laws(nn.Linear(3, 3)), 'gate_proj'),
]
def _hf_attn(d):
    m = nn.Module()
    for n in ('q_proj', 'k_proj', 'v_proj', 'o_proj'): setattr(m, n, nn.Linear(d, d, bias=False))
    return m

ATTN = [
    ('heads do not divide d', lambda: attention.attention_params(_hf_attn(6), num_heads=4), 'divisible'),
    ('odd dk with rope', lambda: attention.mha(random_params({'Q': (1, 4, 3), 'K': (1, 4, 3), 'V': (1, 4, 2), 'O': (1, 4, 2)}), torch.ones(2, 4, **f64), rope=True), 'even'),
    ('T = 0', lambda: attention.mha(random_params({'Q': (1, 4, 2), 'K': (1, 4, 2), 'V': (1, 4, 2), 'O': (1, 4, 2)}), torch.ones(0, 4, **f64)), 'T = 0'),
    ('Q/K mismatch', lambda: attention.mha({'Q': torch.ones(1, 4, 2, **f64), 'K': torch.ones(1, 4, 3, **f64), 'V': torch.ones(1, 4, 2, **f64), 'O': torch.ones(1, 4, 2, **f64)}, torch.ones(2, 4, **f64)), 'K'),
    ('odd dk in rope_laws', lambda: attention.rope_laws(random_params({'Q': (1, 4, 3), 'K': (1, 4, 3), 'V': (1, 4, 2), 'O': (1, 4, 2)})), 'even'),
]
MOE = [
    ('k = 0', lambda: blocks.MoE(3, 2, 4, top_k=0), 'k'),
    ('k > E', lambda: blocks.MoE(3, 2, 4, top_k=5), 'k'),
    ('E = 0', lambda: blocks.MoE(3, 2, 0), 'E'),
    ('unknown gate', lambda: blocks.MoE(3, 2, 4, gate='relu'), 'gate'),
    ('router shape', lambda: moe.moe({'W': torch.ones(3, 2, **f64), 'A': torch.ones(4, 3, 2, **f64), 'B': torch.ones(4, 2, 3, **f64), 'C': torch.ones(4, 2, 3, **f64)}, torch.ones(3, **f64)), 'W'),
]
VERIFY = [
    ('unknown arch', lambda: verify.verify(['transformer']), 'unknown architecture'),
    ('size 0', lambda: verify.verify_arch('swiglu', size=0), 'size'),
    ('json folder missing', lambda: verify.save_rows([], '/nonexistent/dir/v.json'), 'does not exist'),
]

@pytest.mark.parametrize('name,call,match', ENGINE + FFN + ATTN + MOE + VERIFY, ids=[c[0] for c in ENGINE + FFN + ATTN + MOE + VERIFY])
def test_bad_input(name, call, match):
    with pytest.raises((ValueError, TypeError)) as e: call()
    assert match.lower() in str(e.value).lower(), f"{name}: message {str(e.value)!r} does not mention {match!r}"

def test_transformers_attention_called_directly():
    "A transformers attention block's forward needs positions and a mask: the error names the block and `adapt`, before any work"
    tf = pytest.importorskip('transformers')
    from transformers.models.llama.modeling_llama import LlamaAttention
    m = LlamaAttention(tf.LlamaConfig(hidden_size=8, num_attention_heads=4, num_key_value_heads=2), layer_idx=0)
    for call in (lambda: count_laws(m, None, gauss(4, 8)), lambda: check_laws(lambda p: p['q_proj.weight'].sum(), m, None, gauss(4, 8))):
        with pytest.raises(ValueError) as e: call()
        assert 'transformers block (LlamaAttention)' in str(e.value) and 'conslaw_nb.hf.adapters.adapt(module)' in str(e.value), str(e.value)
        assert 'position_embeddings' in str(e.value)
