"""The census against numbers that do not come from it: the theorem's counts at Llama-3-8B's and GPT-2's sizes, the engine on
plain-torch forwards written here, and a whole causal LM counted here at a depth the census never fitted."""
import json, math, subprocess, sys, zipfile
from pathlib import Path
import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call

transformers = pytest.importorskip('transformers')
transformers.logging.set_verbosity_error()
from conslaw_nb.survey.published import census, whole_law   # noqa: E402
from conslaw_nb.survey.families import published, sizes_of, load_config, CONFIGS   # noqa: E402
from conslaw_nb.engine.count import count_laws   # noqa: E402
from conslaw_nb.engine.core import random_params   # noqa: E402
from conslaw_nb.survey.atlas import atlas_count   # noqa: E402
# one worker runs this module (pytest-xdist builds a fixture once per worker, and it is costly here), its costly fixture
# session-scoped: a worker runs other modules' tests between this module's, which tore a module-scoped one down (built twice)
pytestmark = pytest.mark.xdist_group('survey_published')

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope='session')
def llama():
    return census(published()['llama-3-8b'], name='Llama-3-8B')


def test_llama_3_8b_rows(llama):
    "H_kv·(d_k/2 + d_v(d_v+1)/2) = 8·(64 + 8256) per attention layer, one law per hidden unit of the MLP"
    att, mlp = llama.rows
    assert (att.block, att.n_laws, att.layers, att.source) == ('attention', 8*(128//2 + 128*129//2), 32, 'formula') == ('attention', 66560, 32, 'formula')
    assert (mlp.block, mlp.n_laws, mlp.layers) == ('MLP', 14336, 32)
    assert att.law.provenance == mlp.law.provenance == 'stated'
    assert att.law.domain.contains(**llama.sizes) and att.law.domain.inequalities      # a boundary was found, and 8B is inside it
    assert llama.n_laws == 32*(66560 + 14336)
    assert att.status == mlp.status == 'ok' and att.to_dict()['status'] == 'ok'   # the shared vocabulary (hf.adapters.STATUSES)
    assert att.D == 4096*4096*2 + 2*4096*1024 and llama.D == 8030261248 - 128256*4096   # AutoModel: no LM head


def _gpt2_attention(H, dk):
    "GPT-2's causal self-attention in plain torch: fused qkv (d, 3d) with bias, output (d, d) with bias"
    d = H*dk
    def f(p, X):                                            # X (T, d)
        T = X.shape[0]
        q, k, v = (X @ p['Wqkv'] + p['bqkv']).split(d, -1)
        q, k, v = (t.reshape(T, H, dk).transpose(0, 1) for t in (q, k, v))
        s = q @ k.transpose(-1, -2)/math.sqrt(dk) + torch.full((T, T), float('-inf'), dtype=X.dtype).triu(1)
        return ((s.softmax(-1) @ v).transpose(0, 1).reshape(T, d) @ p['Wo'] + p['bo']).reshape(-1)
    shapes = {'Wqkv': (d, 3*d), 'bqkv': (3*d,), 'Wo': (d, d), 'bo': (d,)}
    return f, shapes, lambda n, g: torch.randn(n, 4, d, generator=g, dtype=torch.float64)


def test_gpt2_rows_and_a_held_out_twin():
    "GPT-2 small: 12·(2080 + 64 + 2080) = 50,688 per attention, 0 per MLP; the formula equals the engine on a plain forward at (H, d_k) = (2, 5)"
    c = census(published()['gpt2'])
    att, mlp = c.rows
    assert (att.n_laws, mlp.n_laws) == (12*(64*65//2 + 64 + 64*65//2), 0) == (50688, 0)
    fit = att.law.fit
    assert fit.verdict == 'confirmed' and (2, 5) not in {tuple(r['sizes'].values()) for r in fit.rows}    # held out of every fit
    f, shapes, inputs = _gpt2_attention(2, 5)
    n = count_laws(f, random_params(shapes, torch.Generator().manual_seed(3)), inputs, seed=3)
    assert n.status == 'ok' and n.n_laws == fit.predict(H=2, d_k=5) == 70


def test_whole_model_held_out(llama):
    """The whole-model formula (fitted at L = 1, 2) equals the engine on a Llama causal LM of 4 layers and width 8 counted here (at width 4
    the engine's rank decision at that depth is ambiguous), and the cross-block term is 2d per layer + d"""
    w = whole_law('llama', load_config(published()['llama-3-8b'])[1])
    assert w.fit.verdict in ('confirmed', 'undecided') and not [r for r in w.fit.rows if r['match'] is False]
    L_, d = __import__('sympy').symbols('L d', positive=True, integer=True)
    assert __import__('sympy').simplify(w.cross - (2*L_*d + d)) == 0
    cfg = transformers.LlamaConfig(hidden_size=8, num_attention_heads=2, num_key_value_heads=1, head_dim=2, intermediate_size=3,
                                   num_hidden_layers=4, vocab_size=12, tie_word_embeddings=False, bos_token_id=None, eos_token_id=None,
                                   pad_token_id=None)
    m = transformers.LlamaForCausalLM(cfg).double().eval()
    P = {n: p.detach().clone() for n, p in m.named_parameters()}
    def f(p, x):                                            # one-hot tokens (T, V) through the embedding matrix
        e = x @ p['model.embed_tokens.weight']
        return functional_call(m, p, (), {'inputs_embeds': e[None], 'use_cache': False}).logits[0].reshape(-1)
    inputs = lambda n, g: F.one_hot(torch.randint(12, (n, 3), generator=g), 12).double()
    c = count_laws(f, random_params({k: tuple(v.shape) for k, v in P.items()}, torch.Generator().manual_seed(5)), inputs, seed=5)
    assert c.status == 'ok' and c.n_laws == w.fit.predict(L=4, d=8) == 4*(1*2*4//2 + 3) + 2*4*8 + 8   # per layer: attention H_kv·d_k(d_k+2)/2 = 4, MLP d_ff = 3
    # at Llama-3-8B: 32 layers of the theorem's blocks (66,560 + 14,336) and 2d gain laws, plus the final norm's d
    assert w.value(llama.sizes).n_laws == 32*(66560 + 14336 + 2*4096) + 4096 == 2854912


def test_mla_boundary_right_or_refused():
    "(H, r, dk, d) = (1, 5, 1, 2) is outside the MLA formula's domain: the engine's 16, never the formula's 17"
    a = atlas_count('mla', {'H': 1, 'r': 5, 'dk': 1, 'd': 2})
    assert a.source == 'engine' and a.count == 16


def test_deepseek_group_limited_moe_formula():
    """DeepSeek-V3's MoE (routing limited to 4 of 8 groups): a formula from twins that route over 2 groups, whose value at a twin no fit,
    domain or grouping check used equals the engine's count and one law per expert unit, (E + S)·d_e; inside its domain at the config"""
    from conslaw_nb.survey.published import block_groups, block_law, _twin_model
    from conslaw_nb.survey.families import sizes_of
    mt, cfg, _ = load_config(published()['deepseek-v3'])
    g = block_groups(mt, cfg)[-1]
    l = block_law(mt, cfg, g)
    assert g.cls == 'DeepseekV3MoE' and l.expr is not None and l.fit.verdict == 'confirmed', l.reason
    assert "config's own grouping (8 groups, 4 chosen)" in l.reason
    s = dict(d=9, d_e=1, E=8, k=3, S=2)
    assert s not in [r['sizes'] for r in l.fit.rows + l.domain.rows]
    f, shapes, inputs = _twin_model(mt, cfg, g, s, {})
    n = count_laws(f, random_params(shapes, torch.Generator().manual_seed(5)), inputs, seed=5)
    assert n.status == 'ok' and n.n_laws == l.fit.predict(**s) == (8 + 2)*1
    real = {k: sizes_of(mt, cfg)[k] for k in l.names}
    assert l.domain.contains(**real) and l.fit.predict(**real) == (256 + 1)*2048 == 526336


@pytest.mark.parametrize('bad, says', [
    ({'model_type': 'mamba2', 'hidden_size': 8}, 'law_blocks'),
    ({'model_type': 'mamba2'}, 'adapt_found'),
    ({'model_type': 'llama', 'hidden_size': 4096, 'num_attention_heads': 32}, "'intermediate_size'"),
    ({'model_type': 'gpt2', 'n_embd': 100, 'n_head': 12, 'n_layer': 1, 'vocab_size': 5}, 'not a multiple'),
    ({'hidden_size': 8}, 'model_type'),
    ('/no/such/config.json', 'does not exist'),
])
def test_bad_inputs(bad, says):
    with pytest.raises(ValueError, match=None) as e: census(bad)
    assert says in str(e.value)


def test_cli_errors_are_one_line(tmp_path):
    from conslaw_nb.cli import main
    assert main(['census', '--model-type', 'mamba2']) == 2
    assert main(['census', '--published', 'gpt5']) == 2
    p = tmp_path/'c.json'; p.write_text('{not json')
    assert main(['census', str(p)]) == 2


def test_published_configs_ship_with_the_package(tmp_path):
    "Every published config parses, names its model_type, and is inside the wheel that `pip install .` installs"
    names = set(published())
    assert {'llama-3-8b', 'llama-3-70b', 'mistral-7b', 'mixtral-8x7b', 'qwen2.5-7b', 'qwen3-30b-a3b', 'gemma-2-9b', 'gemma-3-12b',
            'phi-3-mini', 'gpt2', 'gpt2-xl', 'bert-base', 'vit-b-16', 'olmo-2-7b', 'deepseek-v3'} <= names
    for n, p in published().items(): sizes_of(*load_config(p)[:2])
    r = subprocess.run([sys.executable, '-m', 'pip', 'wheel', str(ROOT), '--no-deps', '--no-build-isolation', '-w', str(tmp_path), '-q'],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    whl = next(tmp_path.glob('conslaw_nb-*.whl'))
    inside = {Path(n).name for n in zipfile.ZipFile(whl).namelist() if '/configs/' in n}
    assert inside == {p.name for p in CONFIGS.glob('*.json')}


def _bert_attention(H, dk):
    "BERT's self-attention + output in plain torch: q, k, v, o with biases, then LayerNorm(x + o(...)) with its gain and bias"
    d = H*dk
    def f(p, X):                                            # X (T, d), no mask
        T = X.shape[0]
        q, k, v = ((X @ p[n] + p['b' + n]).reshape(T, H, dk).transpose(0, 1) for n in 'qkv')
        a = ((q @ k.transpose(-1, -2)/math.sqrt(dk)).softmax(-1) @ v).transpose(0, 1).reshape(T, d)
        return F.layer_norm(X + a @ p['o'] + p['bo'], (d,), p['g'], p['be'], 1e-12).reshape(-1)
    shapes = {'q': (d, d), 'k': (d, d), 'v': (d, d), 'bq': (d,), 'bk': (d,), 'bv': (d,), 'o': (d, d), 'bo': (d,), 'g': (d,), 'be': (d,)}
    return f, shapes, lambda n, g: torch.randn(n, 4, d, generator=g, dtype=torch.float64)


def test_bert_rows_and_a_held_out_twin():
    """BERT-base: the GPT-2-like attention count H·d_k(d_k+2) plus d + 1 (LayerNorm ignores a shift of its input: the column sums of the
    output projection and the sum of its bias), and d_ff + 1 for the MLP; the formula equals the engine on a plain forward at (1, 6)"""
    c = census(published()['bert-base'])
    att, mlp = c.rows
    assert (att.n_laws, mlp.n_laws) == (12*64*66 + 768 + 1, 3072 + 1) == (51457, 3073)
    assert att.source == mlp.source == 'formula' and att.law.fit.verdict == 'confirmed'
    assert not mlp.law.domain.contains(d=2, d_ff=3)                 # a LayerNorm over 2 entries is degenerate: outside the domain
    f, shapes, inputs = _bert_attention(1, 6)
    n = count_laws(f, random_params(shapes, torch.Generator().manual_seed(3)), inputs, seed=3)
    assert n.status == 'ok' and n.n_laws == att.law.fit.predict(H=1, d_k=6) == 6*8 + 6 + 1


def test_deepseek_mla_formula_at_a_new_twin():
    "DeepSeek-V3's MLA gets a formula in its 7 sizes with a domain; it equals the engine's count at a twin no fit or check used"
    from conslaw_nb.survey.published import block_groups, block_law, _twin_model
    mt, cfg, _ = load_config(published()['deepseek-v3'])
    g = block_groups(mt, cfg)[0]
    l = block_law(mt, cfg, g)
    assert g.cls == 'DeepseekV3Attention' and l.expr is not None and l.domain.inequalities is not None and l.fit.verdict == 'confirmed'
    s = dict(H=3, d_nope=1, d_v=3, r_q=5, r_kv=4, d_rope=2, d=7)
    assert s not in [r['sizes'] for r in l.fit.rows + l.domain.rows]
    f, shapes, inputs = _twin_model(mt, cfg, g, s, {})
    n = count_laws(f, random_params(shapes, torch.Generator().manual_seed(4)), inputs, seed=4)
    assert n.status == 'ok' and n.n_laws == l.fit.predict(**s)


def test_check_builds_each_stated_block_at_its_own_sizes(llama):
    "census(check=True): each stated block is built at the config's sizes (here a narrow Llama: the rule is the same at 8B) and its"
    " laws checked there; without check nothing is claimed"
    c = census(published()['llama-3-8b'], hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=2,
               head_dim=64, check=True)
    for r in c.rows:
        k = r.checked
        assert k.status == 'ok' and k.how.startswith('checked at its own sizes') and k.laws is not None and k.laws < 1e-12, (r.block, str(k))
        assert f'D = {r.D:,}' in k.how and 'its stated count' in str(k)                # the twin's count beside the stated one
    assert all(r.checked is None for r in llama.rows)
    assert 'checked at its own sizes' in c.markdown() and c.to_dict()['rows'][0]['checked']['laws'] == c.rows[0].checked.laws


def test_formula_cache_round_trip(llama, tmp_path, monkeypatch):
    "A later census of the same family reads the formulas an earlier one established (one file per package version) and gives the"
    " same rows, saying where it read them"
    import conslaw_nb.survey.published as CE
    for k, l in list(CE.FORMULAS.items()): CE._remember(k, l, tmp_path)       # what the fixture's census writes with a cache
    monkeypatch.setattr(CE, 'FORMULAS', {})
    c = census(published()['llama-3-8b'], cache=tmp_path)
    assert [(r.n_laws, str(r.law.expr), str(r.law.domain), r.law.provenance) for r in c.rows] == \
           [(r.n_laws, str(r.law.expr), str(r.law.domain), r.law.provenance) for r in llama.rows]
    assert all(str(CE.formula_cache(tmp_path)) in r.law.reason for r in c.rows)


def test_own_grouping_refuses_a_formula_the_config_grouping_misses():
    "The check at DeepSeek-V3's own grouping (8 groups, 4 chosen) can fail: a formula one off the engine's 17 there gets no number"
    import sympy as sp
    from conslaw_nb.survey.published import block_groups, BlockLaw, _own_grouping
    mt, cfg, _ = load_config(published()['deepseek-v3'])
    g = block_groups(mt, cfg)[-1]
    E, S, d_e = sp.symbols('E S d_e', positive=True, integer=True)
    out = _own_grouping(mt, cfg, g, BlockLaw(mt, g.cls, g.layer_kind, ('d', 'd_e', 'E', 'k', 'S'), d_e*(E + S) + 1, None, 'inferred', '', []))
    assert (out.expr, out.provenance) == (None, 'none') and 'counts 17 (ok), the formula 18' in out.reason, out.reason
