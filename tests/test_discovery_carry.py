"""Laws carried from twins to a block's own width (`discovery.carry_found`, the path `law_blocks` and the monitor take for a
block past count_max_D with no stated theory). The truths are independent of the twins: counts from the symmetries, written
here, and the laws' own conservation along a few gradient steps."""
import warnings
import pytest
import torch
from conslaw_nb.engine.core import law_tol
from conslaw_nb.discovery.found import tiny_transformer, law_blocks, carry_found, block_call

warnings.filterwarnings('ignore', message='.*eos_token_id.*|.*pad_token_id.*')


def test_phi3_fused_layout_carried():
    "Phi-3's fused qkv_proj and gate_up_proj: the GQA RoPE count H_kv·(d_k/2 + d_k(d_k+1)/2) and one law per hidden unit"
    Hkv, G, dk, dff = 2, 2, 6, 40
    m = tiny_transformer('phi3', hidden_size=G*Hkv*dk, num_attention_heads=G*Hkv, num_key_value_heads=Hkv, intermediate_size=dff)
    B = law_blocks(m, count_max_D=300)
    assert not B.skipped
    att, mlp = (a for _, a in B)
    assert (att.meta['theory'], mlp.meta['theory']) == ('carried', 'carried')
    # RoPE leaves each key/value group one law per rotation pair (Q's and K's pair norms), and the Gram of V's rows against the
    # output columns of the G query heads that read them
    assert att.n_laws == Hkv*(dk//2 + dk*(dk + 1)//2)
    assert mlp.n_laws == dff                                    # SwiGLU: ‖up row‖² − ‖down column‖² per unit (up: gate_up_proj's second half)
    assert att.checked.laws <= law_tol() and mlp.checked.laws <= law_tol()
    v = att.laws(att.params)
    assert sum(t.numel() for t in v.values()) == att.n_laws


def test_carried_laws_move_with_training_only_at_second_order():
    "One SGD step of size τ on a float64 BERT layer: the carried laws move by O(τ²), the parameters' norms by O(τ)"
    m = tiny_transformer('bert', hidden_size=32, num_attention_heads=2, intermediate_size=64).eval()
    B = law_blocks(m, count_max_D=2048)
    assert [a.meta['theory'] for _, a in B] == ['carried', 'carried']
    ids = torch.randint(16, (2, 4), generator=torch.Generator().manual_seed(0))
    loss = m(input_ids=ids).last_hidden_state.pow(2).sum()
    grads = torch.autograd.grad(loss, list(m.parameters()), allow_unused=True)   # the pooler is not used
    named = dict(m.named_parameters())
    g = dict(zip(named, grads))
    for path, a in B:
        P0 = {n: named[f'{path}.{n}'].detach() for n in a.params}
        G0 = {n: g[f'{path}.{n}'] for n in a.params}
        h0 = a.laws(P0)
        def move(tau):                              # each family's largest change, relative to its largest law
            h1 = a.laws({n: P0[n] - tau*G0[n] for n in P0})
            return {k: ((h1[k] - h0[k]).abs().max()/h0[k].abs().max()).item() for k in h0}
        big, small = move(1e-3), move(1e-4)
        for k in h0:                                # second order: τ/10 moves it 100 times less (30: rounding headroom);
            assert small[k] <= big[k]/30 + 1e-13, (path, k, big[k], small[k])   # a linear law does not move at all


def test_carry_refuses_what_it_cannot_read():
    m = tiny_transformer('bert', hidden_size=8, num_attention_heads=2, intermediate_size=4)
    blk = m.encoder.layer[0].attention
    with pytest.raises(ValueError, match='attention and MLP'):
        carry_found(m, 'encoder.layer.0.attention', blk, 'mixer', block_call(m, 'encoder.layer.0.attention', blk, 'attention'))
