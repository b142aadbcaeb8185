"""The command line never ends in a traceback or a wrong success (issue 18): a catalogue of bad invocations of
`conslaw verify`, `demo`, `train`, `sweep` and `atlas`. Each must exit non-zero with one line on stderr that names the argument
and the fix (argparse's usage block may come before it), print nothing on stdout, write nothing, and be refused before
any data is loaded, model built or engine run. Most run in this process through `cli.main`; a few run the installed
`conslaw` script, to show that no traceback reaches the user."""
import json, os, re, subprocess, sys
from pathlib import Path
import pytest
import torch
import conslaw_nb.cli as cli, conslaw_nb.experiments.sweeps as sweeps, conslaw_nb.experiments.training as training
import conslaw_nb.theorems as theorems, conslaw_nb.survey.atlas as atlas
CONSLAW = str(Path(sys.executable).with_name('conslaw'))
ENV = {**os.environ, 'OMP_NUM_THREADS': '1'}
SETUP = {'afile': 'not a folder', 'notjson.json': '{"model_type": "llama",', 'nomodel.json': '{"hidden_size": 16}',
         'llama.json': '{"model_type": "llama", "hidden_size": 16}'}   # files each case finds in its temporary folder
CUDA_99 = 'cuda:99'   # absent (no CUDA here), or beyond the devices of a CUDA machine: refused either way

# (argv with {d} for the temporary folder, the argument the message must name, a word of the fix it must give)
VERIFY = [(['verify', '--arch', 'swiglu', *a, '--json', '{d}/v.json', '--figure', '{d}/v.png'], arg, fix) for a, arg, fix in [
    (['--device', 'no-such-device'], '--device', 'cpu'),
    (['--device', 'tpu'], '--device', 'cpu'),
    (['--device', CUDA_99], '--device', 'cpu'),
    (['--size', '0'], '--size', '>= 1'),
    (['--size', '-3'], '--size', '>= 1'),
    (['--size', '1.5'], '--size', 'int'),
    (['--seed', '-1'], '--seed', '>= 0'),
    (['--seed', 'abc'], '--seed', 'int'),
    (['--arch', 'transformer'], '--arch', 'choose from'),
]] + [
    (['verify', '--arch', 'swiglu', '--json', '{d}/afile/v.json'], '--json', 'folder'),
    (['verify', '--arch', 'swiglu', '--json', '{d}/missing/v.json'], '--json', 'create'),
    (['verify', '--arch', 'swiglu', '--figure', '{d}/missing/v.png'], '--figure', 'create'),
    (['verify', '--arch', 'swiglu', '--json', '{d}'], '--json', 'file'),
]
DEMO = [(['demo', '--no-experiment', *a], arg, fix) for a, arg, fix in [
    (['--device', 'tpu', '--out', '{d}/demo'], '--device', 'cpu'),
    (['--device', CUDA_99, '--out', '{d}/demo'], '--device', 'cpu'),
    (['--seed', '-1', '--out', '{d}/demo'], '--seed', '>= 0'),
    (['--out', '{d}/afile/demo'], '--out', 'folder'),
    (['--out', '{d}/afile'], '--out', 'folder'),
]]
TRAIN = [(['train', '--quiet', *a], arg, fix) for a, arg, fix in [
    (['--device', 'no-such-device'], '--device', 'cpu'),
    (['--device', 'tpu'], '--device', 'cpu'),
    (['--device', CUDA_99], '--device', 'cpu'),
    (['--steps', '0'], '--steps', '>= 1'),
    (['--steps', '-5'], '--steps', '>= 1'),
    (['--steps', '2.5'], '--steps', 'int'),
    (['--batch-size', '0'], '--batch-size', '>= 1'),
    (['--batch-size', 'many'], '--batch-size', 'int'),
    (['--seq-len', '0'], '--seq-len', '>= 1'),
    (['--seed', '-1'], '--seed', '>= 0'),
    (['--seed', '0.5'], '--seed', 'int'),
    (['--log-every', '-1'], '--log-every', '>= 0'),
    (['--lr', '0'], '--lr', '(0, inf)'),
    (['--lr', '-0.1'], '--lr', '(0, inf)'),
    (['--lr', 'nan'], '--lr', 'finite'),
    (['--lr', 'inf'], '--lr', 'finite'),
    (['--lr', 'fast'], '--lr', 'float'),
    (['--momentum', '1'], '--momentum', '[0, 1)'),
    (['--momentum', '-0.5'], '--momentum', '[0, 1)'),
    (['--weight-decay', '-1'], '--weight-decay', '[0, inf)'),
    (['--set', 'd_model'], '--set', 'FIELD=VALUE'),
    (['--set', '=3'], '--set', 'FIELD=VALUE'),
    (['--set', 'no_such_field=3'], 'no_such_field', 'fields:'),
    (['--set', 'd_model=abc'], 'd_model', 'integer'),
    (['--set', 'd_model=1e1'], 'd_model', 'integer'),
    (['--set', 'n_layer=true'], 'n_layer', 'integer'),
    (['--set', 'd_model=0'], 'd_model', '>= 1'),
    (['--set', 'n_head=3'], 'n_head', 'divide'),
    (['--set', 'n_kv_head=3'], 'n_kv_head', 'divide'),
    (['--set', 'top_k=9'], 'top_k', 'n_experts'),
    (['--set', 'rope_theta=-1'], 'rope_theta', '> 0'),
    (['--set', 'd_model=6', 'n_head=2'], 'head_dim', 'even'),
    (['--task', 'nope'], '--task', 'choose from'),
    (['--optim', 'lbfgs'], '--optim', 'choose from'),
    (['--dtype', 'float16'], '--dtype', 'choose from'),
    (['--model', 'gpt5'], '--model', 'choose one of'),
    (['--model', 'fashion-tiny'], '--model', 'language'),
    (['--task', 'digits', '--model', 'ptb-tiny'], '--model', 'vision'),
    (['--task', 'wikitext'], '--data', 'folder'),
    (['--task', 'wikitext', '--data', '{d}/no-such-folder'], '--data', 'folder'),
    (['--hf-config', '{d}/missing.json'], '--hf-config', 'no such file'),
    (['--hf-config', '{d}/notjson.json'], '--hf-config', 'JSON'),
    (['--hf-config', '{d}/nomodel.json'], '--hf-config', 'model_type'),
    (['--hf-config', '{d}/llama.json', '--model', 'ptb-tiny'], '--model', 'one of them'),
    (['--hf-config', '{d}/llama.json', '--task', 'digits'], '--hf-config', 'language task'),
    (['--out', '{d}/afile/out'], '--out', 'folder'),
    (['--out', '{d}/afile'], '--out', 'folder'),
]]
TRAIN = [(argv if '--out' in argv else [*argv, '--out', '{d}/out'], arg, fix) for argv, arg, fix in TRAIN]
SWEEP = [(['sweep', '--quiet', *a, *([] if '--out' in a else ['--out', '{d}/sweep'])], arg, fix) for a, arg, fix in [
    (['--lrs', '0.1,abc'], '--lrs', 'comma-separated'),
    (['--lrs', ''], '--lrs', 'comma-separated'),
    (['--lrs', '0.1,-1'], '--lr', '(0, inf)'),
    (['--lrs', '0.1,nan'], '--lr', 'finite'),
    (['--seeds', ''], '--seeds', 'comma-separated'),
    (['--seeds', '0,x'], '--seeds', 'comma-separated'),
    (['--seeds', '0,-1'], '--seed', '>= 0'),
    (['--steps', '0'], '--steps', '>= 1'),
    (['--k-fit', '0'], '--k-fit', '>= 1'),
    (['--k-fit', '7', '--steps', '30'], '--k-fit', 'pick one of'),
    (['--tk-max', '0'], '--tk-max', '(0, inf)'),
    (['--tk-max', 'nan'], '--tk-max', 'finite'),
    (['--device', 'tpu'], '--device', 'cpu'),
    (['--set', 'n_head=3'], 'n_head', 'divide'),
    (['--set', 'd_model'], '--set', 'FIELD=VALUE'),
    (['--task', 'digits', '--model', 'ptb-tiny'], '--model', 'vision'),
    (['--out', '{d}/afile/sweep'], '--out', 'folder'),
    (['--out', '{d}/afile'], '--out', 'folder'),
]]
ATLAS = [(['atlas', *a], arg, fix) for a, arg, fix in [
    (['--block', 'transformer'], '--block', 'choose from'),
    (['--block'], '--block', 'expected at least one'),
    (['--all', '--block', 'gqa'], '--block', 'not allowed with'),
    (['--seeds', '0'], '--seeds', '>= 1'),
    (['--seeds', 'two'], '--seeds', 'int'),
    (['--device', 'tpu'], '--device', 'cpu'),
    (['--device', CUDA_99], '--device', 'cpu'),
    (['--at', 'r=5'], '--at', 'exactly one --block'),
    (['--block', 'mla', '--at', 'r=0'], '--at', 'SIZE=N'),
    (['--block', 'mla', '--at', 'H=1', 'r=5'], '--at', 'each size of mla'),
    (['--block', 'mla', '--at', 'H=1', 'r=5', 'r=6', 'dk=1', 'd=2'], '--at', 'each size of mla once'),
    (['--block', 'mla', '--at', 'H=1', 'r=5', 'dk=1', 'd=2', '--max-params', '0'], '--max-params', '>= 1'),
]]
CATALOGUE = VERIFY + DEMO + TRAIN + SWEEP + ATLAS

class HeavyWork(BaseException):
    "Raised where a bad invocation would load data, build a model or run the engine (not caught by `cli.main`)"

def _heavy(*a, **k): raise HeavyWork('heavy work started before the arguments were checked')

@pytest.fixture
def folder(tmp_path):
    "A temporary folder holding the `SETUP` files, and a check that nothing else appears in it"
    for name, text in SETUP.items(): (tmp_path/name).write_text(text)
    yield tmp_path
    assert sorted(os.listdir(tmp_path)) == sorted(SETUP), 'a bad invocation wrote output'
    assert all((tmp_path/n).read_text() == t for n, t in SETUP.items())

@pytest.fixture
def no_heavy_work(monkeypatch):
    "Data loading, model building, training, the engine's verification, the demo and the atlas all raise `HeavyWork`"
    for mod, name in [(training, '_dataset'), (training, 'model_for'), (training, 'train'), (sweeps, 'train'), (theorems, 'verify'),
                      (sweeps, 'demo_run'), (atlas, 'atlas'), (atlas, 'atlas_count')]:   # where each subcommand imports them from
        monkeypatch.setattr(mod, name, _heavy)

def fill(argv, d): return [a.replace('{d}', str(d)) for a in argv]

def message(err:str)->list:
    "The lines of stderr after argparse's usage block (the usage line and its indented continuation lines)"
    lines = err.strip().splitlines()
    if lines and lines[0].startswith('usage:'):
        lines = lines[1:]
        while lines and lines[0].startswith(' '): lines = lines[1:]
    return lines

def names(line:str, arg:str)->bool:
    "Does `line` name the argument `arg`, as a flag (--batch-size) or as its field (batch_size)?"
    return arg in line or arg.lstrip('-').replace('-', '_') in line

def check_refusal(rc, out, err, arg, fix):
    assert rc not in (0, None), f"exit {rc}: a wrong success"
    assert 'Traceback' not in err, err
    assert out == '', f"stdout of a refused invocation: {out!r}"
    lines = message(err)
    assert len(lines) == 1, f"not one line: {err!r}"
    assert names(lines[0], arg), f"{lines[0]!r} does not name {arg!r}"
    assert fix.lower() in lines[0].lower(), f"{lines[0]!r} does not give the fix {fix!r}"

def run_main(argv, capsys):
    try: rc = cli.main(argv)
    except SystemExit as e: rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err

def test_catalogue_size(): assert len(CATALOGUE) >= 20

@pytest.mark.parametrize('argv,arg,fix', CATALOGUE, ids=[' '.join(c[0]).replace('{d}', 'D') for c in CATALOGUE])
def test_bad_invocation(argv, arg, fix, folder, no_heavy_work, capsys):
    check_refusal(*run_main(fill(argv, folder), capsys), arg, fix)

# ------------------------------------------------------------------ issue 18, as a new user met it
def test_unknown_device_is_one_line_not_a_traceback(folder):
    r = subprocess.run([CONSLAW, 'verify', '--device', 'no-such-device'], capture_output=True, text=True, env=ENV, timeout=120,
                       cwd=folder)
    check_refusal(r.returncode, r.stdout, r.stderr, '--device', 'cpu')

def test_steps_zero_is_refused_not_replaced_by_the_default(folder):
    r = subprocess.run([CONSLAW, 'train', '--task', 'ptb', '--steps', '0', '--quiet', '--out', str(folder/'out')],
                       capture_output=True, text=True, env=ENV, timeout=300, cwd=folder)
    check_refusal(r.returncode, r.stdout, r.stderr, '--steps', '>= 1')

def test_set_values_are_typed():
    got = cli._kv(['rope_theta=1e4', 'n_layer=3', 'top_k=-2', 'a=true', 'b=False', 'pe=none', 'x=1.5', 'y=1e-3'])
    assert got == dict(rope_theta=10000.0, n_layer=3, top_k=-2, a=True, b=False, pe='none', x=1.5, y=1e-3)
    assert [type(got[k]) for k in ('rope_theta', 'n_layer', 'top_k', 'a', 'b', 'pe', 'x')] == [float, int, int, bool, bool, str, float]

def test_set_reaches_the_config_typed(folder, monkeypatch, capsys):
    "`--set rope_theta=1e4` trains with rope_theta = 10000.0 (a float), `--set n_layer=1` with the integer 1"
    seen = []
    monkeypatch.setattr(training, 'train', lambda cfg, progress: seen.append(cfg) or [])
    assert cli.main(['train', '--set', 'rope_theta=1e4', 'n_layer=1', '--quiet', '--out', str(folder/'out')]) == 0
    assert seen[0].overrides == dict(rope_theta=10000.0, n_layer=1) and type(seen[0].overrides['rope_theta']) is float

# ------------------------------------------------------------------ the installed script
SCRIPT = [   # the first seven moved here from tests/test_bad_input.py
    (['verify', '--arch', 'transformer'], '--arch', 'choose from'),
    (['verify', '--size', '0'], '--size', '>= 1'),
    (['verify', '--size', 'big'], '--size', 'integer'),
    (['verify', '--arch', 'swiglu', '--json', '/nonexistent/dir/v.json'], '--json', 'create'),
    (['verify', '--arch', 'swiglu', '--figure', '/nonexistent/dir/v.png'], '--figure', 'create'),
    (['verify', '--arch', 'swiglu', '--device', 'cuda:7' if not torch.cuda.is_available() else 'tpu'], '--device', 'cpu'),
    (['frobnicate'], 'frobnicate', 'choose from'),
    (['verify', '--arch', 'swiglu', '--device', 'tpu', '--json', '{d}/v.json'], '--device', 'cpu'),
    (['demo', '--device', CUDA_99, '--out', '{d}/demo'], '--device', 'cpu'),
    (['train', '--set', 'd_model=abc', '--out', '{d}/out'], 'd_model', 'integer'),
    (['sweep', '--lrs', '0.1,abc', '--out', '{d}/sweep'], '--lrs', 'comma-separated'),
    (['sweep', '--set', 'n_head=3', '--out', '{d}/sweep'], 'n_head', 'divide'),
    (['atlas', '--block', 'transformer'], '--block', 'choose from'),
]

@pytest.mark.parametrize('argv,arg,fix', SCRIPT, ids=[' '.join(c[0]).replace('{d}', 'D') for c in SCRIPT])
def test_script_bad_invocation(argv, arg, fix, folder):
    r = subprocess.run([CONSLAW, *fill(argv, folder)], capture_output=True, text=True, env=ENV, timeout=120, cwd=folder)
    check_refusal(r.returncode, r.stdout, r.stderr, arg, fix)

def test_unexpected_error_is_one_line(folder, monkeypatch, capsys):
    "A failure nobody foresaw (here a RuntimeError inside training) is still one line, saying how to see the traceback"
    def boom(cfg, progress): raise RuntimeError('something broke\ninside torch')
    monkeypatch.setattr(training, 'train', boom)
    monkeypatch.delenv('CONSLAW_TRACEBACK', raising=False)
    rc, out, err = run_main(['train', '--quiet', '--out', str(folder/'out')], capsys)
    assert rc == 1 and 'Traceback' not in err and len(err.strip().splitlines()) == 1, err
    assert 'something broke' in err and 'CONSLAW_TRACEBACK=1' in err
    monkeypatch.setenv('CONSLAW_TRACEBACK', '1')
    with pytest.raises(RuntimeError, match='something broke'): cli.main(['train', '--quiet', '--out', str(folder/'out')])

# ------------------------------------------------------------------ issue 52, items 5 and 6: what a person reads, and how fast
ROOT = Path(__file__).resolve().parents[1]

def test_the_choices_kept_in_the_cli_equal_the_library():
    "The small tuples that keep `conslaw --help` free of torch are the library's own choices"
    import conslaw_nb.experiments.models as models
    assert (cli.ARCHS, cli.ATLAS_BLOCKS, cli.ATLAS_QUICK) == (tuple(theorems.ARCHS), tuple(atlas.ATLAS), tuple(atlas.QUICK))
    assert (cli.TASKS, cli.OPTIMS, cli.SCHEDULES, cli.DTYPES) == (tuple(sorted(training.TASKS)), tuple(training.OPTIMS),
                                                                 tuple(training.SCHEDULES), tuple(training.DTYPES))
    assert cli.PRESETS == tuple(sorted(models.PRESETS))
    assert cli.published_names() == sorted(p[:-5] for p in os.listdir(ROOT/'conslaw_nb'/'configs') if p.endswith('.json'))

@pytest.mark.parametrize('argv', [['--help'], ['census', '--help'], ['atlas', '--block', 'transformer']])
def test_help_and_argparse_refusals_import_no_torch(argv):
    code = ("import sys\nfrom conslaw_nb.cli import main\ntry: main(sys.argv[1:])\nexcept SystemExit: pass\n"
            "print('torch' in sys.modules, 'transformers' in sys.modules, file=sys.stderr)")
    r = subprocess.run([sys.executable, '-c', code, *argv], capture_output=True, text=True, env=ENV, timeout=120)
    assert r.stderr.strip().splitlines()[-1] == 'False False', r.stderr

def test_version_is_the_packages():
    "`conslaw --version` prints the version settings.ini declares"
    version = next(l.split('=')[1].strip() for l in (ROOT/'settings.ini').read_text().splitlines() if l.startswith('version'))
    r = subprocess.run([CONSLAW, '--version'], capture_output=True, text=True, env=ENV, timeout=120)
    assert (r.returncode, r.stdout.strip()) == (0, f'conslaw {version}'), r

@pytest.mark.parametrize('sub', ['verify', 'demo', 'train', 'sweep', 'atlas', 'census'])
def test_every_subcommand_describes_itself(sub):
    "`conslaw SUB --help` has a description line between its usage and its options, and `conslaw --help` one line for SUB"
    r = subprocess.run([CONSLAW, sub, '--help'], capture_output=True, text=True, env=ENV, timeout=120)
    blocks = r.stdout.split('\n\n')
    assert r.returncode == 0 and blocks[0].startswith('usage:') and not blocks[1].startswith(('options:', 'positional')), r.stdout
    assert len(blocks[1].split()) >= 4, blocks[1]
    top = subprocess.run([CONSLAW, '--help'], capture_output=True, text=True, env=ENV, timeout=120).stdout
    assert re.search(rf'^    {sub}\s+\S', top, re.M), top

def test_published_lists_its_names():
    "`conslaw census --help` names every config shipped in conslaw_nb/configs"
    r = subprocess.run([CONSLAW, 'census', '--help'], capture_output=True, text=True, env=ENV, timeout=120)
    text = ' '.join(r.stdout.split())
    missing = [p[:-5] for p in os.listdir(ROOT/'conslaw_nb'/'configs') if p.endswith('.json') and p[:-5] not in text]
    assert r.returncode == 0 and not missing, missing

TINY_GPT2 = dict(model_type='gpt2', n_embd=8, n_head=2, n_layer=1, n_positions=16, vocab_size=16)

def test_census_text_says_how_each_count_was_established_and_its_laws(tmp_path, capsys):
    """The text of `conslaw census` has, per block, one line saying how its count was established and its laws in words, the
    same as --json has; GPT-2's attention count is H·d_k·(d_k + 2) (q/k: a symmetric d_k×d_k matrix with the query bias, plus
    d_k key-bias entries; v/o: a symmetric d_v×d_v matrix, per head: H(d_k(d_k+1)/2 + d_k + d_k(d_k+1)/2)), its GELU MLP none"""
    (tmp_path/'tiny.json').write_text(json.dumps(TINY_GPT2))
    assert cli.main(['census', str(tmp_path/'tiny.json'), '--quiet', '--no-cache', '--json', str(tmp_path/'c.json')]) == 0
    out = capsys.readouterr().out
    rows = json.loads((tmp_path/'c.json').read_text())[0]['rows']
    H, dk = 2, 4
    assert [r['n_laws'] for r in rows] == [H*(dk*(dk + 1)//2 + dk + dk*(dk + 1)//2), 0]
    for r in rows:
        line = next(l for l in out.splitlines() if l.startswith(f"- **{r['block']}** ({r['cls']})"))
        assert r['provenance'] in line and r['how'] in line, line
        after = out.split(line, 1)[1].splitlines()[1:1 + len(r['laws'])]
        assert [l.strip()[2:] for l in after] == r['laws'], after

def test_census_from_the_cache_imports_no_torch_and_says_where_it_read(tmp_path):
    "A census asked again is read back from the cache, the same text, without importing torch; other options compute afresh"
    (tmp_path/'tiny.json').write_text(json.dumps(TINY_GPT2))
    argv = ['census', str(tmp_path/'tiny.json'), '--cache', str(tmp_path/'cache'), '--quiet']
    code = "import sys\nfrom conslaw_nb.cli import main\nrc = main(sys.argv[1:])\nprint('torch' in sys.modules, rc, file=sys.stderr)"
    run = lambda *a: subprocess.run([sys.executable, '-c', code, *argv, *a], capture_output=True, text=True, env=ENV, timeout=600)
    first, again, other = run(), run(), run('--max-params', '10')
    kept = 'kept by a census of this config with this version of the code'
    assert first.stderr.strip().splitlines()[-1] == 'True 0' and kept not in first.stdout, first.stderr
    assert again.stderr.strip().splitlines()[-1] == 'False 0', again.stderr
    assert again.stdout.startswith(first.stdout.rstrip()) and f"(read from {tmp_path/'cache'/'census'}" in again.stdout and kept in again.stdout
    assert other.stderr.strip().splitlines()[-1] == 'True 0' and kept not in other.stdout, other.stderr

def test_progress_bar_on_cold_work_only_and_on_stderr(tmp_path, capsys, monkeypatch):
    "A bar on stderr while twins are counted; none on stdout (--json mode included), none when every formula is already held"
    import conslaw_nb
    (tmp_path/'tiny.json').write_text(json.dumps(TINY_GPT2 | dict(n_embd=6, n_head=3)))
    conslaw_nb.clear_caches()
    monkeypatch.setattr(sys.stderr, 'isatty', lambda: True, raising=False)
    argv = ['census', str(tmp_path/'tiny.json'), '--no-cache', '--json', str(tmp_path/'c.json')]
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    assert 'census tiny' in err and 'twins' in err and '\r' in err, err
    assert 'census tiny' not in out and '\r' not in out
    assert cli.main(argv) == 0                    # the formulas held by this process: no cold work, no bar
    out, err = capsys.readouterr()
    assert 'census tiny' not in err and 'census tiny' not in out, err
    assert cli.main([*argv, '--quiet']) == 0 and 'census tiny' not in capsys.readouterr().err
