"""No lost data: a `conslaw sweep` killed mid-run (SIGTERM or SIGKILL) and run again ends with every run exactly once,
and its records equal those of an uninterrupted sweep. Output files are written atomically (no partial CSV is ever
visible), a corrupt run file is reported clearly, and run names cannot escape the output folder."""
import csv, os, signal, subprocess, sys, time
from pathlib import Path
import pytest
# one worker runs this module (pytest-xdist builds a fixture once per worker, and it is costly here), its costly fixture
# session-scoped: a worker runs other modules' tests between this module's, which tore a module-scoped one down (built twice)
pytestmark = pytest.mark.xdist_group('experiments_sweeps')

CONSLAW = str(Path(sys.executable).with_name('conslaw'))
ARGS = ['sweep', '--task', 'ptb', '--lrs', '0.001,0.01,0.1', '--seeds', '0,1', '--steps', '12',
        '--set', 'd_model=8', 'd_ff=16', '--quiet']
ENV = {**os.environ, 'OMP_NUM_THREADS': '1'}

def sweep(out, **kw): return subprocess.run([CONSLAW, *ARGS, '--out', str(out)], capture_output=True, text=True, env=ENV, timeout=600, **kw)

def rows(path):
    with open(path, newline='') as f: return list(csv.DictReader(f))

@pytest.fixture(scope='session')
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp('ref')
    r = sweep(out); assert r.returncode == 0, r.stderr
    return out

def kill_midway(out, sig):
    "Start a sweep and send `sig` once some, but not all, runs have finished; return how many had finished"
    p = subprocess.Popen([CONSLAW, *ARGS, '--out', str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    t0 = time.time()
    while time.time() - t0 < 300:
        done = list((out/'runs').glob('*.csv')) if (out/'runs').exists() else []
        if len(done) >= 2: break
        if p.poll() is not None: break
        time.sleep(0.05)
    p.send_signal(sig); p.wait(timeout=60)
    return len(list((out/'runs').glob('*.csv')))

# SIGKILL (nothing can run on the way out) by default; SIGTERM's handler path too with --slow (25 s each: the 12-minute run)
@pytest.mark.parametrize('sig', [pytest.param(signal.SIGTERM, marks=pytest.mark.slow), signal.SIGKILL], ids=['SIGTERM', 'SIGKILL'])
def test_killed_sweep_resumes(tmp_path, reference, sig):
    n_ref = len(list((reference/'runs').glob('*.csv')))
    finished = kill_midway(tmp_path, sig)
    assert 0 < finished < n_ref, f"kill landed at {finished}/{n_ref} runs: the test did not interrupt mid-sweep"
    assert not [p for p in (tmp_path/'runs').iterdir() if p.name.startswith('.')], 'a partial temporary file was left behind'
    before = {p.name: p.read_bytes() for p in (tmp_path/'runs').glob('*.csv')}
    r = sweep(tmp_path); assert r.returncode == 0, r.stderr
    runs = sorted(p.name for p in (tmp_path/'runs').glob('*.csv'))
    assert runs == sorted(p.name for p in (reference/'runs').glob('*.csv'))             # every run, exactly once
    for name, data in before.items(): assert (tmp_path/'runs'/name).read_bytes() == data  # finished runs were not redone
    got, ref = rows(tmp_path/'records.csv'), rows(reference/'records.csv')
    key = lambda r: (r['run'], r['step'], r['kind'], r['block'], r['layer'])
    assert len(got) == len(ref) and len({key(r) for r in got}) == len(got)                   # no duplicated records
    assert got == ref                                                                      # same results as uninterrupted

def test_corrupt_run_file_is_reported(tmp_path, reference):
    (tmp_path/'runs').mkdir()
    victim = sorted((reference/'runs').glob('*.csv'))[0]
    (tmp_path/'runs'/victim.name).write_text('run,step\nnot,a number\n')
    r = sweep(tmp_path)
    assert r.returncode != 0 and 'Traceback' not in r.stderr and r.stderr.strip(), r.stderr

def test_unwritable_output_folder():
    "A folder nobody can create (not even root: /proc refuses new entries): one-line error, no traceback"
    r = sweep(Path('/proc/conslaw-sweep-out'))
    assert r.returncode != 0 and 'Traceback' not in r.stderr and r.stderr.strip(), r.stderr

def test_output_file_as_folder(tmp_path):
    "--out naming an existing file: one-line error, no traceback"
    f = tmp_path/'afile'; f.write_text('x')
    r = sweep(f)
    assert r.returncode != 0 and 'Traceback' not in r.stderr and r.stderr.strip()

def test_run_names_cannot_escape_the_output_folder(tmp_path):
    "Run files are named from validated fields only: a task or optimiser that looks like a path is refused before any run"
    import conslaw_nb.experiments.sweeps as sweeps
    with pytest.raises(ValueError, match='task'): sweeps.sweep('../../escape', tmp_path/'o', progress=False)
    with pytest.raises(ValueError, match='optim'):
        sweeps.sweep('ptb', tmp_path/'o', progress=False, lrs=(1e-3,), seeds=(0,), steps=2, extra=(('../gd', 'const'),))
    assert not list(tmp_path.parent.rglob('escape*')) and not list(tmp_path.rglob('*.csv'))
