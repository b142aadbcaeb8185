"""`make reproduce` (Section 6 at its protocol): the quick protocol end to end — fit.json's keys, the figures and CSVs, resuming
after an interruption without losing or repeating a run — and the refusals of the GPU protocol when its data or device is missing."""
import csv, json, os, subprocess, sys
from pathlib import Path
import pytest
import torch
import conslaw_nb.experiments.sweeps as sweeps, conslaw_nb.experiments.training as training
# one worker runs this module (pytest-xdist builds a fixture once per worker, and it is costly here), its costly fixture
# session-scoped: a worker runs other modules' tests between this module's, which tore a module-scoped one down (built twice)
pytestmark = pytest.mark.xdist_group('reproduce')
KEYS = ['tau_exponent', 'tau_exponent_ci', 'k_exponent', 'k_exponent_ci', 'n_seeds', 'steps', 'regime', 'bound']
TOOL = Path(__file__).resolve().parents[1]/'tools'/'reproduce.py'

def _runs(out): return sorted(p.relative_to(out).as_posix() for p in out.glob('*/runs/*.csv'))

@pytest.fixture(scope='session')
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp('reproduce')
    return out, sweeps.reproduce(out, protocol='quick', progress=False)

def test_fit_json_keys(quick):
    out, doc = quick
    saved = json.loads((out/'fit.json').read_text())
    assert all(k in saved for k in KEYS)
    for t, f in saved['tasks'].items():
        for o in ('gd', 'sgd'):
            assert all(k in f[o] for k in KEYS), (t, o)
            lo, hi = f[o]['tau_exponent_ci']; assert lo <= hi
            assert f[o]['n_seeds'] == 2 and f[o]['steps'] == 20 and 'τ·k' in f[o]['regime']['text']
    fams = saved['tasks']['ptb']['gd']['bound']['families']
    assert set(fams) == {'rope_qk', 'mha_vo', 'swiglu', 'experts'}
    assert set(saved['tasks']['fashion-mnist']['gd']['bound']['families']) == {'mha_qk', 'mha_vo', 'swiglu'}
    assert all(0 < b['ratio_median'] <= b['ratio_max'] <= 1 for b in fams.values())   # the bound holds: measured ≤ bound
    assert saved['llama']['eps_last'].keys() >= {'rope_qk', 'mha_vo', 'swiglu'}
    assert saved['wall_time_s'] > 0 and saved['protocol']['name'] == 'quick'

def test_figures_and_csvs(quick):
    out, doc = quick
    for t in ('ptb', 'fashion-mnist'):
        for f in ('eps_vs_step', 'eps_vs_tau', 'exponents', 'vs_bound', 'decay'):
            assert (out/'figures'/f'{t}_{f}.png').stat().st_size > 5000, (t, f)
        assert (out/t/'records.csv').exists() and (out/t/'fit_sgd.json').exists()
    assert (out/'figures'/'llama_vs_ours.png').stat().st_size > 5000
    with open(out/'summary.csv', newline='') as f: rows = list(csv.DictReader(f))
    assert {r['model'] for r in rows} == {'ours', 'llama'}
    pairs = {(r['optim'], r['schedule']) for r in rows if r['model'] == 'ours'}
    assert pairs == {('gd', 'const'), ('sgd', 'const'), ('gd', 'decay'), ('sgd', 'decay')}
    assert not [p for p in out.rglob('*') if p.name.startswith('.')], 'a temporary file was left behind'

def test_interrupted_reproduce_resumes(tmp_path, quick, monkeypatch):
    "Killed during its second group of runs: the finished runs stay, none is half-written, and a rerun ends with every run once"
    ref_out, ref = quick
    real, calls = sweeps.train_many, []
    def flaky(cfgs, progress=False):
        calls.append(len(cfgs))
        if len(calls) == 2: raise KeyboardInterrupt
        return real(cfgs, progress)
    monkeypatch.setattr(sweeps, 'train_many', flaky)
    with pytest.raises(KeyboardInterrupt): sweeps.reproduce(tmp_path, protocol='quick', progress=False)
    done = _runs(tmp_path)
    assert 0 < len(done) < len(_runs(ref_out)) and not [p for p in tmp_path.rglob('.*.tmp')]
    before = {p: (tmp_path/p).read_bytes() for p in done}
    monkeypatch.setattr(sweeps, 'train_many', real)
    doc = sweeps.reproduce(tmp_path, protocol='quick', progress=False)
    assert _runs(tmp_path) == _runs(ref_out)
    assert all((tmp_path/p).read_bytes() == b for p, b in before.items())       # finished runs were not redone
    assert doc['tau_exponent'] == pytest.approx(ref['tau_exponent'], rel=1e-9)
    assert len(json.loads((tmp_path/'timing.json').read_text())['invocations']) == 2

def test_gpu_protocol_refuses_missing_data_and_device(tmp_path):
    with pytest.raises(ValueError, match=r"data\['wikitext'\]"): sweeps.reproduce(tmp_path/'o', protocol='gpu', tasks=['wikitext'])
    with pytest.raises(ValueError, match='cifar-10-batches-py'):
        sweeps.reproduce(tmp_path/'o', protocol='gpu', tasks=['cifar10'], data={'cifar10': str(tmp_path/'none')})
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match='CUDA is not available'):
            sweeps.reproduce(tmp_path/'o', protocol='gpu', device='cuda', tasks=['ptb'])
    with pytest.raises(ValueError, match='protocol'): sweeps.reproduce(tmp_path/'o', protocol='paper')
    assert not (tmp_path/'o').exists()   # refused before anything was written

def test_tool_errors_are_one_line(tmp_path):
    env = {**os.environ, 'OMP_NUM_THREADS': '1'}
    for args in (['--protocol', 'gpu', '--tasks', 'cifar10'], ['--data', 'cifar10']):
        r = subprocess.run([sys.executable, str(TOOL), '--out', str(tmp_path/'o'), *args], capture_output=True, text=True, env=env,
                           timeout=300)
        assert r.returncode == 2 and 'Traceback' not in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
