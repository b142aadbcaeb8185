"""`family_of` finds each model's size keys from its config alone (standard names, `attribute_map`, the shapes of the model built on
the meta device, probes): the keys a person once wrote down by hand for the 14 model types the census started with are the truth here."""
from pathlib import Path
import pytest

transformers = pytest.importorskip('transformers')
transformers.logging.set_verbosity_error()
from conslaw_nb.survey.families import published, load_config, family_of, sizes_of   # noqa: E402

# The hand-kept table the census used to read (`census.MODEL_TYPES`), kept only as the truth of this test
_LLAMA = dict(d='hidden_size', H='num_attention_heads', H_kv='num_key_value_heads', d_k='head_dim', d_ff='intermediate_size',
              L='num_hidden_layers', V='vocab_size')
_BERT = dict(d='hidden_size', H='num_attention_heads', d_ff='intermediate_size', L='num_hidden_layers')
OLD = {   # model_type -> (keys, head_dim)
    'llama': (_LLAMA, True), 'mistral': (_LLAMA, True), 'gemma2': (_LLAMA, True), 'gemma3_text': (_LLAMA, True), 'qwen3': (_LLAMA, True),
    'qwen2': (_LLAMA, False), 'phi3': (_LLAMA, False), 'olmo2': (_LLAMA, False),
    'mixtral': (_LLAMA | dict(E='num_local_experts', k='num_experts_per_tok'), True),
    'qwen3_moe': (_LLAMA | dict(E='num_experts', k='num_experts_per_tok', d_e='moe_intermediate_size'), True),
    'deepseek_v3': (dict(d='hidden_size', H='num_attention_heads', r_q='q_lora_rank', r_kv='kv_lora_rank', d_nope='qk_nope_head_dim',
                         d_rope='qk_rope_head_dim', d_v='v_head_dim', d_ff='intermediate_size', d_e='moe_intermediate_size',
                         E='n_routed_experts', k='num_experts_per_tok', S='n_shared_experts', L='num_hidden_layers', V='vocab_size'), True),
    'gpt2': (dict(d='n_embd', H='n_head', d_ff='n_inner', L='n_layer', V='vocab_size'), False),
    'bert': (_BERT | dict(V='vocab_size'), False), 'vit': (_BERT, False),
}
OLD_ROPE_FREE = {'gpt2', 'bert', 'vit'}
OLD_TWIN_FIXED = {'vit': dict(image_size=4, patch_size=2, num_channels=1), 'gpt2': dict(n_positions=8), 'bert': dict(max_position_embeddings=8)}


@pytest.mark.parametrize('name', sorted(published()))
def test_family_found_as_the_old_table(name):
    """Same keys and head_dim as the table: d_k is a key only where the attention reads the config's head size (the table also listed
    `head_dim` for Qwen2, Phi-3 and OLMo2, whose configs give none; DeepSeek-V3 has MLA's head parts instead). One difference, on
    purpose: Qwen3-30B-A3B's `intermediate_size` is the width of dense MLP layers that config does not have (every layer is MoE),
    so it shows in no parameter shape and is not used."""
    mt, cfg, _ = load_config(published()[name])
    fam, (keys, hd) = family_of(mt, cfg), OLD[mt]
    want = {s: k for s, k in keys.items() if s != 'd_k' or hd}
    if mt == 'qwen3_moe':
        want.pop('d_ff')
        assert 'shows in no parameter shape' in fam.how['d_ff']
    assert (fam.keys, fam.head_dim) == (want, hd), fam.how
    assert fam.rope == (mt not in OLD_ROPE_FREE)
    assert fam.fixed == OLD_TWIN_FIXED.get(mt, {})
    assert fam.whole == (mt not in ('vit',))           # a causal LM exists for every family here but ViT


def test_unknown_model_type_refused_by_name():
    with pytest.raises(ValueError, match="not one transformers .* knows"): load_config({'model_type': 'no_such_model'})


def test_sizes_of_new_families():
    "Sizes of configs the table never had, from their names alone (DistilBERT: dim, n_heads, hidden_dim)"
    s = sizes_of('distilbert', dict(dim=768, n_heads=12, hidden_dim=3072, n_layers=6, vocab_size=30522, max_position_embeddings=512))
    assert s == dict(d=768, H=12, d_ff=3072, L=6, V=30522, d_k=64)
    s = sizes_of('gemma', dict(hidden_size=3072, num_attention_heads=16, num_key_value_heads=16, head_dim=256, intermediate_size=24576,
                               num_hidden_layers=28, vocab_size=256000))
    assert (s['d_k'], s['G']) == (256, 1)


CONFIGS = Path(__file__).parent/'configs'   # configs written from the models' public sizes (sizes only)


def _rope_gqa(H_kv, d_k): return H_kv*(d_k//2 + d_k*(d_k + 1)//2)      # RoPE attention, grouped queries: per kv head d_k/2 + d_k(d_k+1)/2


def _plain(H, d_k): return H*(d_k*(d_k + 1)//2 + d_k + d_k*(d_k + 1)//2)  # softmax attention without RoPE (GPT-2's test): QᵀQ−KᵀK, k bias, VᵀV−OᵀO


@pytest.mark.parametrize('name, want', [
    ('gemma-7b', [_rope_gqa(16, 256), 24576]),                  # GeGLU MLP: one law per hidden unit
    ('starcoder2-7b', [_rope_gqa(4, 128), 0]),                  # GELU MLP, not gated: none
    # a minute or so each (twins counted and fitted, MoE routing and LayerNorm domains searched): run with --slow
    pytest.param('granite-3.0-1b-a400m', [_rope_gqa(8, 64), 32*512 + 1024], marks=pytest.mark.slow),   # MoE: per expert and unit, and d
    pytest.param('olmoe-1b-7b', [None, 64*1024 + 2048], marks=pytest.mark.slow),   # attention with q/k norms over all heads: no formula here
    pytest.param('roberta-base', [12*64*66 + 768 + 1, 3072 + 1], marks=pytest.mark.slow),   # BERT's post-LayerNorm blocks (see the bert test)
    pytest.param('distilbert-base', [_plain(12, 64), 0], marks=pytest.mark.slow),   # LayerNorms outside the blocks: GPT-2's count, GELU none
])
def test_new_families_against_independent_counts(name, want):
    "Families the old table never had, from configs written from their public sizes: per-block counts against formulas proved on the pages"
    from conslaw_nb.survey.published import census
    c = census(CONFIGS/f'{name}.json')
    assert len(c.rows) == len(want), c
    for r, w in zip(c.rows, want):
        if w is not None: assert r.n_laws == w, (name, r.block, r.n_laws, w, r.law.reason)
        assert r.n_laws is not None or r.note, r                 # a number, or a sentence saying why not
