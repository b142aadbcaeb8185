"""The monitor where people train (issue 41): every block of tiny transformers models watched, found laws included; GD drift
orders in τ; no NaN; bfloat16 laws equal a float64 evaluation; the Trainer callback; the README snippet."""
import copy, math, re, warnings
from pathlib import Path
import pytest
import torch

transformers = pytest.importorskip('transformers')
from conslaw_nb.discovery.found import tiny_transformer, transformer_blocks
from conslaw_nb.monitor import ConservationMonitor, ROUNDING

FAMILIES = ['gpt2', 'phi3', 'bert', 'vit', 'olmo2', 'cohere', 'gpt_neox', 'deepseek_v3', 'llama']
TAU, STEPS = 1e-3, 10   # chosen before measuring: τ·STEPS·‖g‖ small against the weights (asymptotic regime), not tuned per model

def _batch(m, mt):
    g = torch.Generator().manual_seed(0)
    x = (dict(pixel_values=torch.randn(2, 1, 4, 4, generator=g, dtype=torch.float64)) if mt == 'vit'
         else dict(input_ids=torch.randint(0, 16, (2, 6), generator=g)))
    y = torch.randn(m(**x).last_hidden_state.shape, generator=g, dtype=torch.float64)
    return x, y

def _gd(m, mon, x, y, tau):
    "STEPS of plain GD from θ0 (the monitor's), the last step's records by (kind, block)"
    opt = torch.optim.SGD(m.parameters(), lr=tau)
    for _ in range(STEPS):
        opt.zero_grad(); (m(**x).last_hidden_state - y).pow(2).mean().backward(); opt.step(); mon.update(opt)
    return {(r['kind'], r['block']): r for r in mon.history if r['step'] == mon.step}

def _orders(mt, patch_cohere=False, layers=1, tau=None):
    tau = tau or TAU
    m = tiny_transformer(mt, num_hidden_layers=layers); m.config._experts_implementation = 'eager'   # float64 experts (grouped_mm has none)
    with warnings.catch_warnings(): warnings.simplefilter('ignore'); mon = ConservationMonitor(m)
    state0, x, y, res = copy.deepcopy(m.state_dict()), *_batch(m, mt), {}
    for t in (tau, tau / 2):
        m.load_state_dict(state0); mon.step, mon.history = 0, []
        res[t] = _gd(m, mon, x, y, t)
    return m, mon, res

def _order(a, b): return math.log2(a['drift'] / b['drift'])

# Two layers: at τ = 1e-3 the first-order drift of a control can be small enough for the second-order term to cancel part
# of it: llama's layer-0 ‖Q_i‖² measured order 0.49 at τ = 1e-3, 0.80 at 1e-4, 0.99 at 1e-5 (the limit the claim speaks of).
TAU2 = 1e-5

@pytest.mark.parametrize('mt, layers, tau', [(mt, 1, TAU) for mt in FAMILIES] + [(mt, 2, TAU2) for mt in ('llama', 'phi3', 'gpt2')])
def test_every_block_watched_laws_tau2_controls_tau_no_nan(mt, layers, tau):
    m, mon, res = _orders(mt, layers=layers, tau=tau)
    assert len({n for n, _ in mon.blocks}) == 2*layers
    blocks, _ = transformer_blocks(m)
    assert {p for p, _, _ in blocks} == {n for n, _ in mon.blocks}                # every attention and MLP/MoE block
    watched = {n for _, n in mon.h0}
    assert watched | set(mon.unwatched) == {n for n, _ in mon.blocks} and not watched & set(mon.unwatched)   # ... each has a record,
    if mon.unwatched:                                                              # or has no law (GPT-2's, ViT's GELU MLPs):
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            every = ConservationMonitor(m, controls='all')
        assert {n for _, n in every.h0} == {n for n, _ in mon.blocks}              # watched on request, controls only
        assert not any(every.is_law[k] for k in every.h0 if k[1] in mon.unwatched)
    for recs in res.values():
        for r in recs.values():
            assert all(math.isfinite(v) for v in r.values() if isinstance(v, float)), r
    for key, a in res[tau].items():
        b = res[tau / 2][key]
        if mt == 'cohere' and key[0].startswith('found1:'): continue   # float32 LayerNorm inside: see the next test
        if mon.is_law[key]:
            assert a['status'] == b['status'] == 'rounding' or _order(a, b) >= 1.7, (key, a['drift'], b['drift'], a['floor'])
        elif a['status'] == 'measured':
            assert 0.5 <= _order(a, b) <= 1.5, (key, _order(a, b))                # the controls move at first order

def test_cohere_linear_laws_drift_at_float32_rounding_of_its_layernorm():
    """Cohere's q/k LayerNorm computes in float32 even in a float64 model: its shift laws (linear) drift at first order in τ from that
    rounding; computed in float64 the same laws sit at float64 rounding"""
    _, mon, res = _orders('cohere')
    lin = [k for k in res[TAU] if k[0].startswith('found1:')]
    assert lin and max(_order(res[TAU][k], res[TAU / 2][k]) for k in lin) < 1.3             # first order: rounding of g, not τ²
    assert max(res[TAU][k]['drift'] for k in lin) > 1e-13
    from transformers.models.cohere import modeling_cohere as mc
    def f64(self, x):
        mu = x.mean(-1, keepdim=True); v = (x - mu).pow(2).mean(-1, keepdim=True)
        return self.weight * (x - mu) * torch.rsqrt(v + self.variance_epsilon)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mc.CohereLayerNorm, 'forward', f64)
        _, mon, res = _orders('cohere')
    assert max(res[TAU][k]['drift'] for k in lin) < 1e-14

@pytest.mark.parametrize('mt', ['llama', 'gpt2'])
def test_bfloat16_laws_equal_float64_evaluation(mt):
    m = tiny_transformer(mt).to(torch.bfloat16)
    with warnings.catch_warnings(): warnings.simplefilter('ignore'); mon = ConservationMonitor(m)
    P64 = {n: p.detach().double() for n, p in m.named_parameters()}
    h, h64 = mon.laws(), mon.laws(P64)
    for k in h:
        assert h[k].dtype == torch.float64
        assert (h[k] - h64[k]).abs().max() <= 1e-12 * mon.scale0[k].abs().max(), k

@pytest.mark.parametrize('mt, dtype', [('gpt2', torch.float32), ('llama', torch.float32), ('phi3', torch.float32),
                                       ('deepseek_v3', torch.float32), ('llama', torch.bfloat16)])
def test_float32_precision_within_its_bound(mt, dtype):
    """precision='float32': every value within float32_error(n) of its matched scale of the exact float64 evaluation, entry by
    entry; the bound is on the floor; θ0's values exact. Found laws (Phi-3's fused attention, DeepSeek's MLA) and blocks whose
    laws need float64 weights form no float32 product: n = 0, they stay exact"""
    from conslaw_nb.hf.readers import float32_error
    m = tiny_transformer(mt).to(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        mon, mon32 = ConservationMonitor(m), ConservationMonitor(m, precision='float32')
    P64 = {n: p.detach().double() for n, p in m.named_parameters()}
    h64, h32 = mon.laws(P64), mon32.laws()
    assert any(mon32._longest.values()) == (mt in ('gpt2', 'llama')), mon32._longest   # float32 products where the stated readers form them
    for k in h64:
        err, bound = (h32[k] - h64[k]).abs(), float32_error(mon32._longest[k[1]]) * mon.scale0[k]
        assert h32[k].dtype == torch.float64 and bool((err <= bound).all()), (k, (err - bound).max())
        assert torch.equal(mon32.h0[k], mon.h0[k]), k          # θ0's values exact either way
    for r, r32 in zip(mon.measure(), mon32.measure()):
        g = float32_error(mon32._longest[r['block']])             # the bound joins the floor (a law's floor also reads its control's drift)
        assert abs(r32['floor'] - g - r['floor']) <= ROUNDING * torch.finfo(dtype).eps * g + 1e-15 * r['floor'], (r, r32)

def _tiny_lm(dropout=0.1):
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                                         num_attention_heads=2, num_key_value_heads=1, attention_dropout=dropout))

def test_monitor_on_a_model_in_training_mode_with_dropout():
    m = _tiny_lm().train()
    mon = ConservationMonitor(m)
    assert m.training and all(s.training for s in m.modules())     # the flags are restored
    assert {n for _, n in mon.h0} == {f'model.layers.{i}.{b}' for i in range(2) for b in ('self_attn', 'mlp')}

def test_trainer_callback_logs_the_families_for_5_steps(tmp_path):
    pytest.importorskip('accelerate')
    from conslaw_nb.monitor import ConservationCallback
    seen = []
    class Reporter:   # stands for a report_to logger, placed before the monitor's callback: attach puts ours first
        def __getattr__(self, n): return (lambda *a, **k: None)
        def on_log(self, args, state, control, logs=None, **kw): seen.append(dict(logs))
    data = [dict(input_ids=(ids := torch.randint(0, 32, (8,))), labels=ids) for _ in range(8)]
    args = transformers.TrainingArguments(str(tmp_path), max_steps=5, logging_steps=1, learning_rate=1e-3, report_to='none', use_cpu=True,
                                          save_strategy='no')
    trainer = transformers.Trainer(model=_tiny_lm(), args=args, train_dataset=data, callbacks=[Reporter()])
    ConservationCallback(every=1).attach(trainer).train()
    steps = [h for h in trainer.state.log_history if 'loss' in h]
    assert len(steps) == 5
    for logs in steps + seen[:5]:
        fams = {k.split('/')[1] for k in logs if k.startswith('conslaw/')}
        assert fams == {'rope_qk', 'mha_vo', 'swiglu'}, logs
        assert all(math.isfinite(v) for k, v in logs.items() if k.startswith('conslaw/'))

def test_readme_snippet_runs(tmp_path, monkeypatch):
    pytest.importorskip('accelerate')
    text = (Path(__file__).parents[1]/'README.md').read_text(encoding='utf-8')
    sec = text.split('## Watching the laws while you train', 1)[1]
    code = re.search(r'```python\n(.*?)```', sec, re.S).group(1)
    assert len(code.strip().splitlines()) <= 12
    monkeypatch.chdir(tmp_path)
    ns = {}
    exec(compile(code, 'README', 'exec'), ns)
    logs = [h for h in ns['trainer'].state.log_history if 'loss' in h]
    assert len(logs) == 5 and all(any(k.startswith('conslaw/') for k in h) for h in logs)

# ---- the Trainer's wrapped optimizer, read as a plain loop reads the torch optimizer inside it (issue 50)
TRAINER_RUNS = {  # TrainingArguments beyond the shared ones -> the torch optimizer a plain loop builds for the same run
    'sgd': (dict(optim='sgd', learning_rate=0.1), lambda g: torch.optim.SGD(g, lr=0.1)),
    'sgd_wd': (dict(optim='sgd', learning_rate=0.1, weight_decay=0.5), lambda g: torch.optim.SGD(g, lr=0.1)),
    'sgd_wd_small_step': (dict(optim='sgd', learning_rate=0.01, weight_decay=5.), lambda g: torch.optim.SGD(g, lr=0.01)),
    'momentum_wd': (dict(optim='sgd', optim_args='momentum=0.9', learning_rate=0.05, weight_decay=0.5),
                    lambda g: torch.optim.SGD(g, lr=0.05, momentum=0.9)),
    'adamw': (dict(optim='adamw_torch', learning_rate=1e-2), lambda g: torch.optim.AdamW(g, lr=1e-2)),
    'adamw_wd': (dict(optim='adamw_torch', learning_rate=1e-2, weight_decay=0.5), lambda g: torch.optim.AdamW(g, lr=1e-2)),
}

def _groups(model, wd):
    "The parameter groups the Trainer makes, written out here: no weight decay on biases and norm gains"
    decayed = lambda n: not any(s in n for s in ('bias', 'norm'))
    ps = list(model.named_parameters())
    return [dict(params=[p for n, p in ps if decayed(n)], weight_decay=wd), dict(params=[p for n, p in ps if not decayed(n)], weight_decay=0.)]

def _trainer_and_plain(tmp_path, run, steps=4):
    "The callback's log lines under the Trainer, and a plain loop's `logs()` on the same run (same θ0, batch and optimizer)"
    from conslaw_nb.monitor import ConservationCallback
    kw, make = TRAINER_RUNS[run]
    m0 = _tiny_lm(dropout=0.).double()
    state0 = copy.deepcopy(m0.state_dict())
    g = torch.Generator().manual_seed(1)
    data = [dict(input_ids=(ids := torch.randint(0, 32, (8,), generator=g)), labels=ids) for _ in range(8)]
    args = transformers.TrainingArguments(str(tmp_path), max_steps=steps, logging_steps=1, per_device_train_batch_size=8,
                                          lr_scheduler_type='constant', max_grad_norm=0., report_to='none', use_cpu=True,
                                          save_strategy='no', **kw)
    cb = ConservationCallback(every=1)
    trainer = transformers.Trainer(model=m0, args=args, train_dataset=data, callbacks=[cb])
    trainer.train()
    got = [{k: v for k, v in h.items() if k.startswith('conslaw/')} for h in trainer.state.log_history if 'loss' in h]
    m = _tiny_lm(dropout=0.).double()
    m.load_state_dict(state0)
    m.train()
    opt = make(_groups(m, kw.get('weight_decay', 0.)))
    mon = ConservationMonitor(m, optimizer=opt)
    batch = dict(input_ids=torch.stack([d['input_ids'] for d in data]), labels=torch.stack([d['labels'] for d in data]))
    want = []
    for _ in range(steps):
        opt.zero_grad()
        m(**batch).loss.backward()
        opt.step()
        mon.update()
        want.append(mon.logs())
    return cb, got, mon, want

@pytest.mark.parametrize('run', list(TRAINER_RUNS))
def test_trainer_callback_numbers_equal_the_plain_loop(tmp_path, run):
    pytest.importorskip('accelerate')
    cb, got, mon, want = _trainer_and_plain(tmp_path, run)
    assert isinstance(cb, transformers.TrainerCallback)
    assert cb.monitor.optimizer.name == mon.optimizer.name and cb.monitor.optimizer.through == ('AcceleratedOptimizer',)
    assert len(got) == len(want) == 4
    for g, w in zip(got, want):
        assert set(g) == set(w)
        for k in g:
            if k.endswith('/at_floor'): assert g[k] == w[k], (k, g[k], w[k]); continue
            fl = k.rsplit('/', 1)[0] + '/at_floor'
            if k.endswith(('/law_drift', '/ratio')) and w[fl] == 1.: continue              # both at rounding: noise, not a number
            assert abs(g[k] - w[k]) <= 1e-6 * abs(w[k]) + 1e-13, (run, k, g[k], w[k])

def test_trainer_sgd_weight_decay_divided_out_laws_conserved(tmp_path):
    """SGD with λ·τ = 0.05 a step: the raw drift is the decay's; divided out, what is left is the τ² drift. At τ = 0.01 (λ = 5) it
    is a thousandth of the raw drift or less for every family; at τ = 0.1 (λ = 0.5, the same decay) VO's own τ² drift is about 3 %
    of its matched scale on this tiny model (weights of norm ~0.2, steps of ~0.03), so only RoPE QK and SwiGLU stay below"""
    pytest.importorskip('accelerate')
    for run, below in (('sgd_wd_small_step', {'rope_qk', 'mha_vo', 'swiglu'}), ('sgd_wd', {'rope_qk', 'swiglu'})):
        cb, got, mon, want = _trainer_and_plain(tmp_path, run)
        fams = cb.monitor.families()
        assert set(fams) == {'rope_qk', 'mha_vo', 'swiglu'}
        for f, t in fams.items():
            assert abs(t['decay'] - 0.95**8) < 1e-12, (f, t)                              # (1 − τλ)^(degree · steps)
            assert (t['drift_wd'] <= 1e-3 * t['drift']) == (f in below), (run, f, t)
