"Experiments: readers on small files of the real formats, the monitor's exact drift, sweep resume, fits and the CLI."
import copy, json, math, pickle, sys
from pathlib import Path
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import conslaw_nb.monitor as monitor, conslaw_nb.experiments.training as training, conslaw_nb.experiments.analysis as analysis, conslaw_nb.experiments.sweeps as sweeps, conslaw_nb.cli as cli
from conslaw_nb.experiments.data import read_wikitext, read_idx, write_idx, read_cifar10, fashion_mnist, WIKITEXT_FILES
from conslaw_nb.experiments.models import build_model

TINY = dict(d_model=8, d_ff=8, n_head=2)

def test_readers_on_small_files(tmp_path):
    for f, t in zip(WIKITEXT_FILES.values(), [" = A = \n\n the cat sat . \n", " the dog \n", " cat \n"]):
        (tmp_path/f).write_text(t, encoding='utf-8')
    c = read_wikitext(tmp_path)
    assert [c.vocab[i] for i in c.valid] == ['the', '<unk>', '<eos>']
    rng = np.random.default_rng(0)
    fm = tmp_path/'fm'; fm.mkdir()
    for n, a in [('train-images-idx3', rng.integers(0, 256, (3, 28, 28))), ('train-labels-idx1', np.array([0, 1, 9])),
                 ('t10k-images-idx3', rng.integers(0, 256, (2, 28, 28))), ('t10k-labels-idx1', np.array([3, 4]))]:
        write_idx(fm/f'{n}-ubyte.gz', a)
    d = fashion_mnist(fm)
    assert d.x_train.shape == (3, 1, 28, 28) and d.y_train.tolist() == [0, 1, 9] and float(d.x_train.max()) <= 1
    cf = tmp_path/'cifar'; cf.mkdir()
    for f in [f'data_batch_{i}' for i in range(1, 6)] + ['test_batch']:
        with open(cf/f, 'wb') as fh: pickle.dump({b'data': rng.integers(0, 256, (2, 3072), dtype=np.uint8), b'labels': [5, 6]}, fh)
    with open(cf/'batches.meta', 'wb') as fh: pickle.dump({b'label_names': [b'airplane'] * 10}, fh)
    x = read_cifar10(cf)
    assert x.x_train.shape == (10, 3, 32, 32) and x.classes[0] == 'airplane'
    with pytest.raises(FileNotFoundError, match='cifar-10-batches-py'): read_cifar10(tmp_path)

@pytest.mark.parametrize('preset,over', [('ptb-tiny-moe', {}), ('ptb-tiny-moe', dict(n_kv_head=1)), ('fashion-tiny', {})],
                         ids=['lm-moe', 'lm-moe-gqa', 'vit'])
def test_one_step_drift_is_tau2_h_of_grad(preset, over):
    torch.manual_seed(0)
    m = build_model(preset, **TINY, **over).double()
    mon = monitor.ConservationMonitor(m)
    kinds = {k for k, _ in mon.h0}
    assert {'qk', 'vo', 'swiglu'} <= kinds
    if preset == 'ptb-tiny-moe':
        x = torch.randint(0, 10000, (3, 6)); y = torch.randint(0, 10000, (3, 6))
    else:
        x = torch.rand(3, 1, 28, 28, dtype=torch.float64); y = torch.tensor([0, 1, 2])
    loss = F.cross_entropy(m(x).flatten(0, -2), y.flatten())
    names = [n for n, _ in m.named_parameters()]
    g = dict(zip(names, torch.autograd.grad(loss, list(m.parameters()))))
    tau = 0.3
    with torch.no_grad():
        for n, p in m.named_parameters(): p -= tau * g[n]
    h1, hg = mon.laws(), mon.laws(g)
    for key in mon.h0:
        d = h1[key] - mon.h0[key]
        if key[0] in ('qk', 'vo', 'swiglu'):
            assert (d - tau**2 * hg[key]).norm() <= 1e-7 * d.norm(), key
        if key[0] == 'gate': assert d.abs().max() < 1e-13

def test_fit_recovers_exponents_of_synthetic_records():
    recs = []
    for seed, C in [(0, 1.0), (1, 3.0)]:
        for lr in (1e-3, 3e-3, 1e-2):
            for k in training.log_steps(20):
                recs.append(dict(run=f'r{lr}{seed}', task='t', optim='gd', schedule='const', lr=lr, weight_decay=0., seed=seed,
                                 step=k, tau_k=lr*k, sum_tau2=lr**2*k, loss=1., kind='swiglu', block='b', layer=0,
                                 eps=C*lr**2*k, eps_pred=C*lr**2*k, drift_err=1e-12, drift_abs=1e-16))
    fit = analysis.fit_exponents(recs, k_fit=10, tk_max=0.1)
    assert abs(fit.tau_exponent - 2) < 1e-9 and abs(fit.k_exponent - 1) < 1e-9
    assert fit.tau_fit.taus == [1e-3, 3e-3, 1e-2]
    with pytest.raises(ValueError, match='k_fit'): analysis.fit_exponents(recs, k_fit=8)

def test_sweep_resumes_without_losing_or_duplicating(tmp_path, monkeypatch):
    kw = dict(lrs=(1e-3, 1e-2), seeds=(0,), steps=10, extra=(('gd', 'decay'),), overrides=TINY, progress=False)
    real, calls = sweeps.train, []
    def flaky(cfg, progress=False):
        calls.append(cfg.name())
        if len(calls) == 2: raise KeyboardInterrupt  # interrupted during the second run
        return real(cfg, progress)
    monkeypatch.setattr(sweeps, 'train', flaky)
    with pytest.raises(KeyboardInterrupt): sweeps.sweep('ptb', tmp_path, **kw)
    done = sorted(p.name for p in (tmp_path/'runs').iterdir())
    assert done == ['ptb-gd-const-lr0.001-s0.csv']  # the interrupted run left no partial file behind
    monkeypatch.setattr(sweeps, 'train', real)
    fit = sweeps.sweep('ptb', tmp_path, **kw)
    grid = sweeps.sweep_configs('ptb', **{k: v for k, v in kw.items() if k != 'progress'})
    assert sorted(p.name for p in (tmp_path/'runs').iterdir()) == sorted(f'{c.name()}.csv' for c in grid)
    recs = training.read_records(tmp_path/'records.csv')
    keys = [(r['run'], r['step'], r['kind'], r['block']) for r in recs]
    assert len(keys) == len(set(keys)) and {r['run'] for r in recs} == {'ptb-gd-const-lr0.001-s0', 'ptb-gd-const-lr0.01-s0', 'ptb-gd-decay-lr0.001-s0'}
    saved = json.loads((tmp_path/'fit.json').read_text())
    assert {'tau_exponent', 'k_exponent', 'tau_fit', 'k_fit'} <= set(saved)
    assert abs(saved['tau_exponent'] - 2) < 0.1  # tiny τk: the bound's exponent
    assert saved['drift']['max_err_over_h0'] < 1e-13  # predicted = measured to rounding (relative to the law's size)
    for f in ['eps_vs_step', 'eps_vs_tau', 'drift_predicted_vs_measured']:
        assert (tmp_path/'figures'/f'{f}.png').stat().st_size > 1000

def test_cli_train_and_errors(tmp_path, capsys):
    assert cli.run_cli(['train', '--task', 'ptb', '--steps', '3', '--log-every', '1', '--set', 'd_model=8', 'd_ff=8',
                       '--out', str(tmp_path), '--quiet']) == 0
    recs = training.read_records(tmp_path/'runs'/'ptb-gd-const-lr0.1-s0.csv')
    assert sorted({r['step'] for r in recs}) == [1, 2, 3]
    assert 'swiglu' in capsys.readouterr().out
    with pytest.raises(ValueError, match='lr'): training.train(training.TrainConfig(lr=-1))
    with pytest.raises(ValueError, match='FIELD=VALUE'): cli._kv(['d_model'])

def test_paper_dataset_tasks_from_local_files(tmp_path):
    "WikiText-103 and CIFAR-10 are not on these machines: train on small files of their real formats"
    rng = np.random.default_rng(0)
    words = [f'w{i}' for i in range(50)]
    for f in WIKITEXT_FILES.values():
        (tmp_path/f).write_text(' = Heading = \n\n' + ' '.join(rng.choice(words, 300)) + ' \n', encoding='utf-8')
    recs = training.train(training.TrainConfig(task='wikitext', data=str(tmp_path), steps=2, batch_size=2, seq_len=8, overrides=TINY))
    assert {'qk', 'vo', 'swiglu', 'gate'} <= {r['kind'] for r in recs}
    cf = tmp_path/'cifar'; cf.mkdir()
    for f in [f'data_batch_{i}' for i in range(1, 6)] + ['test_batch']:
        with open(cf/f, 'wb') as fh: pickle.dump({b'data': rng.integers(0, 256, (4, 3072), dtype=np.uint8), b'labels': [0, 1, 2, 3]}, fh)
    recs = training.train(training.TrainConfig(task='cifar10', data=str(cf), steps=2, batch_size=4, overrides=TINY))
    assert max(r['drift_abs'] for r in recs if r['kind'] in monitor.QUAD_KINDS) < 1e-14
    with pytest.raises(ValueError, match='data'): training.train(training.TrainConfig(task='wikitext', steps=1))

# ---------------------------------------------------------------- transformers models under the monitor
HF_SPECS = {  # tiny random configs, all with grouped-query attention (fewer key/value heads than query heads)
    'llama': dict(model_type='llama', hidden_size=16, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  intermediate_size=24, vocab_size=50),
    'qwen3': dict(model_type='qwen3', hidden_size=16, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  head_dim=8, intermediate_size=24, vocab_size=50),
    'qwen3_moe': dict(model_type='qwen3_moe', hidden_size=16, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      head_dim=8, intermediate_size=24, moe_intermediate_size=12, num_experts=4, num_experts_per_tok=2, vocab_size=50),
}
MLP_FAMILY = {'llama': 'swiglu', 'qwen3': 'swiglu', 'qwen3_moe': 'moe'}

def _hf_lm(spec):
    tf = pytest.importorskip('transformers')
    spec = dict(spec)
    config = tf.AutoConfig.for_model(spec.pop('model_type'), **spec)
    torch.manual_seed(0)
    # transformers' default expert kernel (grouped_mm) has no float64: the eager expert loop does
    return tf.AutoModelForCausalLM.from_config(config, attn_implementation='sdpa', experts_implementation='eager').double()

@pytest.mark.parametrize('arch', list(HF_SPECS))
def test_monitor_on_transformers_models(arch):
    "One attention and one MLP/MoE block per layer, the adapter's laws, and laws drifting at second order in τ under GD"
    m = _hf_lm(HF_SPECS[arch])
    with torch.no_grad():   # q/k-norm gains start at 1, where Qwen3's pair laws are all 0 and Eq. 10 is undefined: move them off it
        g = torch.Generator().manual_seed(2)
        for n, p in m.named_parameters():
            if n.endswith(('q_norm.weight', 'k_norm.weight')): p.copy_(1 + .3 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    L = HF_SPECS[arch]['num_hidden_layers']
    mon = monitor.ConservationMonitor(m)
    fam = {name: a.family for name, a in mon.blocks}
    assert fam == {**{f'model.layers.{l}.self_attn': 'attention' for l in range(L)},
                   **{f'model.layers.{l}.mlp': MLP_FAMILY[arch] for l in range(L)}}
    want = {'attention': {'qk', 'vo', 'q_norm', 'v_norm'}, 'swiglu': {'swiglu', 'down_norm'}, 'moe': {'swiglu', 'gate', 'down_norm', 'router_norm'}}
    for name, f in fam.items(): assert {k for k, n in mon.h0 if n == name} == want[f], (name, f)
    # the monitor's values are the adapter's stated laws, read from the full parameter names
    P = dict(m.named_parameters())
    for name, a in mon.blocks:
        rel = {n: P[f'{name}.{n}'] for n in a.param_names}
        for k, v in (a.law_rows(rel) | a.controls(rel)).items(): assert torch.equal(mon.h0[(k, name)], v), (k, name)
    # 5 GD steps on random tokens at τ and τ/10 from the same point: the quadratic laws move at second order in τ (ratio
    # ~100), the first-order controls at first order (ratio ~10), the linear gate law not at all (float32 router rounding)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randint(0, 50, (4, 8), generator=g), torch.randint(0, 50, (4, 8), generator=g)
    eps = {}
    for tau in (1e-2, 1e-3):
        net = copy.deepcopy(m); mon = monitor.ConservationMonitor(net)
        for _ in range(5):
            loss = F.cross_entropy(net(x).logits.flatten(0, 1), y.flatten())
            grads = torch.autograd.grad(loss, list(net.parameters()))
            with torch.no_grad():
                for p, gr in zip(net.parameters(), grads): p -= tau * gr
        eps[tau] = mon.errors()
    ratio = {key: eps[1e-2][key] / eps[1e-3][key] for key in eps[1e-3]}
    for key, r in ratio.items():
        if key[0] in ('qk', 'vo', 'swiglu'): assert r > 50, (key, r, eps[1e-2][key])
        if key[0] in ('down_norm', 'router_norm'): assert r < 20, (key, r)   # (with q/k-norm, ‖Q_i‖² is nearly conserved: not checked)
        if key[0] == 'gate': assert eps[1e-2][key] < 1e-9, (key, eps[1e-2][key])

def test_cli_train_transformers_config(tmp_path, capsys, monkeypatch):
    pytest.importorskip('transformers')
    cfg = dict(model_type='llama', hidden_size=16, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, intermediate_size=32)
    (tmp_path/'tiny_llama.json').write_text(json.dumps(cfg))
    assert cli.run_cli(['train', '--task', 'ptb', '--hf-config', str(tmp_path/'tiny_llama.json'), '--steps', '3', '--batch-size', '4',
                       '--seq-len', '8', '--out', str(tmp_path), '--quiet']) == 0
    recs = training.read_records(tmp_path/'runs'/'ptb-gd-const-lr0.1-s0.csv')
    assert {'qk', 'vo', 'swiglu'} <= {r['kind'] for r in recs} and max(r['step'] for r in recs) == 3
    assert {r['block'] for r in recs} >= {'model.layers.0.self_attn', 'model.layers.1.mlp'}
    assert max(r['drift_abs'] for r in recs if r['kind'] in monitor.QUAD_KINDS) < 1e-12
    (tmp_path/'bad.json').write_text(json.dumps({'hidden_size': 16}))
    with pytest.raises(ValueError, match='model_type'): training.train(training.TrainConfig(hf_config=str(tmp_path/'bad.json'), steps=1))
    with pytest.raises(ValueError, match='language'):
        training.train(training.TrainConfig(task='digits', hf_config=str(tmp_path/'tiny_llama.json'), steps=1))
    monkeypatch.setitem(sys.modules, 'transformers', None)   # transformers not installed: a clear one-line error
    with pytest.raises(ImportError, match=r'pip install conslaw_nb\[hf\]'):
        training.train(training.TrainConfig(hf_config=str(tmp_path/'tiny_llama.json'), steps=1))
    from conslaw_nb.cli import main
    assert main(['train', '--hf-config', str(tmp_path/'tiny_llama.json'), '--steps', '1', '--quiet', '--out', str(tmp_path)]) == 2
    assert 'conslaw_nb[hf]' in capsys.readouterr().err


def test_monitor_on_qwen3_at_transformers_init_reports_no_garbage():
    """Qwen3's q/k-norm gains start at 1, so its gain-pair laws start at 0: Eq. 10 has no relative error there; the monitor divides
    them by their matched scale instead (finite, never 1e297) and counts them in `eq10_zero`"""
    import math
    transformers = pytest.importorskip('transformers')
    from conslaw_nb.monitor import ConservationMonitor
    cfg = transformers.Qwen3Config(vocab_size=20, hidden_size=8, intermediate_size=12, num_hidden_layers=1, num_attention_heads=2,
                                   num_key_value_heads=1, head_dim=4)
    torch.manual_seed(0)
    model = transformers.Qwen3ForCausalLM(cfg).double()
    mon = ConservationMonitor(model)
    with torch.no_grad():
        for p in model.parameters(): p.add_(1e-3*torch.randn_like(p))
    err = mon.errors()
    qk = [v for (kind, name), v in err.items() if kind == 'qk']
    assert qk and all(math.isfinite(v) and v < 1 for v in qk)
    assert all(v < 1 for (kind, name), v in err.items() if kind == 'vo')
    recs = mon.measure()
    assert [r['eq10_zero'] for r in recs if r['kind'] == 'qk'] == [2]                     # the two gain-pair laws of the one layer
    assert all(math.isfinite(v) for r in recs for v in r.values() if isinstance(v, float))

# ---------------------------------------------------------------- many runs at once, the bound, fit.json's keys
def test_train_many_matches_train_and_the_bound_holds():
    "Runs trained together (vmap) record what they record one by one; every quadratic law stays under its bound"
    kw = dict(steps=6, log_every=2, batch_size=3, seq_len=5, overrides=TINY)
    cfgs = [training.TrainConfig(lr=0.3, seed=0, **kw), training.TrainConfig(lr=0.05, seed=1, optim='sgd', schedule='decay', **kw)]
    many, one = training.train_many(cfgs), [training.train(c) for c in cfgs]
    for a_run, b_run in zip(many, one):
        assert [(r['step'], r['kind'], r['block']) for r in a_run] == [(r['step'], r['kind'], r['block']) for r in b_run]
        for a, b in zip(a_run, b_run):
            if a['kind'] == 'gate': continue   # its ε is float64 rounding itself
            for f in ('loss', 'eps', 'eps_pred', 'eps_bound', 'grad_sq_max'):
                assert a[f] == pytest.approx(b[f], rel=1e-8, nan_ok=True), (f, a['kind'], a['block'])
    q = [r for rs in one for r in rs if r['kind'] in monitor.QUAD_KINDS]
    assert q and all(r['eps'] <= r['eps_bound_block'] <= r['eps_bound'] for r in q)
    assert {r['family'] for rs in one for r in rs} >= {'rope_qk', 'mha_vo', 'swiglu', 'experts', 'moe_gate'}
    with pytest.raises(ValueError, match='steps'): training.train_many([cfgs[0], training.TrainConfig(steps=3)])
    with pytest.raises(ValueError, match='momentum'): training.train_many([training.TrainConfig(optim='momentum')])

def test_vocabulary_cap():
    cfg = training.TrainConfig(steps=2, batch_size=2, seq_len=4, vocab=100, overrides=TINY)
    assert training.model_for(cfg).cfg.vocab_size == 100
    assert {r['kind'] for r in training.train(cfg)} >= {'qk', 'vo', 'swiglu'}
    with pytest.raises(ValueError, match='vocab'): training.TrainConfig(task='digits', vocab=100).validate()
    with pytest.raises(ValueError, match='vocab'): training.TrainConfig(vocab=1).validate()

def test_sweep_command_writes_the_fit_keys(tmp_path):
    "`conslaw sweep` writes the keys `make reproduce` writes (a short version of `--seeds 0,1,2 --steps 100`)"
    import subprocess, os
    conslaw = str(Path(sys.executable).with_name('conslaw'))
    r = subprocess.run([conslaw, 'sweep', '--task', 'ptb', '--seeds', '0,1,2', '--steps', '12', '--lrs', '0.001,0.01', '--set', 'd_model=8',
                        'd_ff=8', '--out', str(tmp_path), '--quiet'], capture_output=True, text=True, timeout=600,
                       env={**os.environ, 'OMP_NUM_THREADS': '1'})
    assert r.returncode == 0, r.stderr
    saved = json.loads((tmp_path/'fit.json').read_text())
    assert {'tau_exponent', 'tau_exponent_ci', 'k_exponent', 'k_exponent_ci', 'n_seeds', 'steps', 'regime', 'bound'} <= set(saved)
    assert saved['n_seeds'] == 3 and saved['steps'] == 12 and len(saved['tau_exponent_ci']) == 2
    assert set(saved['bound']['families']) == {'rope_qk', 'mha_vo', 'swiglu', 'experts'}
