"""The benchmark's pieces compute what they claim (correctness only, no timing asserts): the straightforward baseline and
the floor agree with the engine and the theory on tiny cases, the anchor rows check their counts, the summary judges
targets, `python -m conslaw_nb.bench.cli` (`make bench`) turns its command line into a `BenchConfig`, the other benchmarks
(`python -m conslaw_nb.bench.monitor`, `.found`, `.check`, `.carry`, `.census`) read and refuse theirs, the monitor's driver runs each
measurement in a fresh `python -m` process, and tools/gpu_check.py runs its steps (on the CPU here)."""
import json, os, subprocess, sys
from pathlib import Path
import pytest
import torch
from conslaw_nb.engine.count import count_laws
from conslaw_nb.paper.ffn import swiglu_problem
from conslaw_nb.paper.attention import mha_problem
from conslaw_nb.bench.cases import (baseline_count, floor_count, timed, taking_turns, turn_range, fit_exponent, power_fit)
from conslaw_nb.bench.anchors import linear_row, relu_row
from conslaw_nb.bench.run import judge, _width_count, BenchConfig, TARGETS
from conslaw_nb.bench.cli import bench_args
import conslaw_nb.bench.monitor as bench_monitor
from conslaw_nb.bench.found import found_args
from conslaw_nb.bench.check import check_args
from conslaw_nb.bench.carry import carry_args
from conslaw_nb.bench.census import census_bench_args, timed_process, config_of, CENSUS_TARGETS

ROOT = Path(__file__).resolve().parents[1]
TINY = {'swiglu': swiglu_problem(3, 5), 'mha': mha_problem(2, 4, 2, T=3), 'rope': mha_problem(2, 4, 2, T=3, rope=True)}

@pytest.mark.parametrize('name', TINY)
def test_baseline_agrees_with_engine(name):
    case = TINY[name]; p = case.point(1)
    c = count_laws(case.f, p, case.sample_inputs)
    n, dims = baseline_count(case.f, p, case.sample_inputs)
    assert n == c.n_laws == case.stated
    assert dims == c.dims_by_depth

def test_floor_is_the_span_count():
    for case in TINY.values():
        p = case.point()
        c = count_laws(case.f, p, case.sample_inputs)
        assert floor_count(case.f, p, case.sample_inputs) == c.n_params - c.dims_by_depth[0]
    assert floor_count(TINY['swiglu'].f, TINY['swiglu'].point(), TINY['swiglu'].sample_inputs) == TINY['swiglu'].stated

def test_anchor_rows_check_their_counts():
    lin = linear_row([4, 2, 3], 0)
    assert lin['ok'] and lin['engine'] == lin['known'] == lin['formula'] == 3
    assert linear_row([2, 3, 2], 1)['formula'] is None          # inner width above its neighbours: no closed formula
    relu = relu_row([3, 4, 2], 0)
    assert relu['ok'] and relu['engine'] == relu['known'] == 4

def test_judge_and_fit():
    assert judge(25, '>=', 20) == (True, None) and judge(5, '>=', 20) == (False, '×4.00 short')
    assert judge(90, '<', 60) == (False, '1.50× over') and judge(3, '<=', 3) == (True, None)
    assert set(TARGETS) == {'anchor_suites_seconds', 'monitor_overhead_pct', 'floor_ratio', 'width_check_seconds', 'width_check_GB',
                            'width_check_over_direct', 'width_count_minutes', 'width_count_GB'}
    assert abs(fit_exponent([10, 100], [1., 1e3]) - 3) < 1e-12
    rows = [dict(D=D, engine_s=D**2, floor_s=D**3) for D in (100, 1000, 2000)]
    fit = power_fit(rows)
    assert fit['fitted_on_D'] == [1000, 2000] and abs(fit['engine'] - 2) < 1e-9 and abs(fit['floor'] - 3) < 1e-9

def test_timed_returns_the_result():
    res, sec = timed(lambda: 41 + 1)
    assert res == 42 and sec >= 0
    res, sec, peak = timed(lambda: torch.zeros(3).sum().item(), memory=True)
    assert res == 0 and peak >= 0

def test_make_bench_reads_the_command_line(tmp_path):
    cfg = bench_args(['--quick', '--out', str(tmp_path/'b.json'), '--max-d', '12', '--threads', '2'])
    assert cfg == BenchConfig(quick=True, out=str(tmp_path/'b.json'), max_d=12, threads=2)
    assert (cfg.reps, cfg.budget_s, cfg.monitor_reps) == (1, 20., 5)
    assert bench_args([]) == BenchConfig()

@pytest.mark.skipif(torch.cuda.is_available(), reason='a CUDA device is present')
def test_make_bench_refuses_a_missing_cuda_device():
    with pytest.raises(SystemExit): bench_args(['--device', 'cuda'])
    with pytest.raises(ValueError, match='no CUDA device'): BenchConfig(device='cuda')

def test_each_benchmark_reads_and_refuses_its_command_line(capsys):
    "The defaults of the old scripts, and a bad value refused by argparse (exit status 2) before any work"
    a = bench_monitor.monitor_args([])
    assert (a.arch, a.layers, a.batch, a.seq, a.pairs, a.warmup, a.out) == ('gpt2', 12, 4, 128, 8, 2, 'bench_monitor.json')
    assert bench_monitor.monitor_args(['--arch', 'llama-1b']).layers == 22
    assert vars(found_args([])) == dict(widths=[8, 12, 16], reference_max_d=12, out='bench_found.json')
    assert vars(check_args([])) == dict(blocks='attention,mlp,moe', widths='full', old=False, max_gb=9., census=None)
    assert vars(carry_args([])) == dict(config=['phi-3-mini'], out='bench_carry.json')
    for parse, bad in [(bench_monitor.monitor_args, ['--pairs', '0']), (bench_monitor.monitor_args, ['--seq', '1']),
                       (found_args, ['--widths', 'x']), (check_args, ['--blocks', 'ffn']), (check_args, ['--census', 'nope']),
                       (carry_args, ['--config', 'nope'])]:
        with pytest.raises(SystemExit) as e: parse(bad)
        assert e.value.code == 2, bad
    assert 'ffn is none of attention, mlp, moe' in capsys.readouterr().err

def test_monitor_driver_runs_each_measurement_as_a_module(tmp_path, monkeypatch):
    "The driver starts `python -m conslaw_nb.bench.monitor ... --one` three times, sharing one cache, and gathers their results"
    runs = []
    def fake_run(cmd, env, check):
        runs.append((cmd, env['CONSLAW_CACHE'], env['OMP_NUM_THREADS']))
        out = cmd[cmd.index('--out', cmd.index('--one')) + 1]
        timing = dict(update_over_step=dict(median=.01, n=1), update=dict(median=.002), step=dict(median=.2))
        Path(out).write_text(json.dumps(dict(build=dict(seconds=1.5), timing=timing) if '--build-only' not in cmd else dict(build=dict(seconds=3.))))
    monkeypatch.setattr(bench_monitor.subprocess, 'run', fake_run)
    res = bench_monitor.monitor_benchmark(['--pairs', '1', '--threads', '2', '--cache', str(tmp_path/'c'), '--out', str(tmp_path/'m.json')])
    assert [c[:3] for c, _, _ in runs] == [[sys.executable, '-m', 'conslaw_nb.bench.monitor']] * 3
    assert all('--one' in c for c, _, _ in runs) and {(e, t) for _, e, t in runs} == {(str(tmp_path/'c'), '2')}
    assert list(res) == ['build, cache empty (cold)', 'built at initialization', 'built after 2 warm-up steps']
    assert json.loads((tmp_path/'m.json').read_text()) == res

@pytest.mark.parametrize('mod', ['cli', 'monitor', 'found', 'check', 'carry', 'census'])
def test_each_benchmark_runs_as_a_module(mod):
    "`python -m conslaw_nb.bench.<mod> --help`: the module's command line is its entry point"
    r = subprocess.run([sys.executable, '-m', f'conslaw_nb.bench.{mod}', '--help'], capture_output=True, text=True,
                       env={**os.environ, 'OMP_NUM_THREADS': '1'})
    assert r.returncode == 0 and f'python -m conslaw_nb.bench.{mod}' in r.stdout, r.stderr

def _gpu_check(*args):
    return subprocess.run([sys.executable, str(ROOT/'tools'/'gpu_check.py'), *args], capture_output=True, text=True,
                          env={**os.environ, 'OMP_NUM_THREADS': '1'})

def test_gpu_check_runs_every_step(tmp_path):
    "tools/gpu_check.py --quick on the CPU: each step answers without an error, the checks hold, the counts meet the theory"
    r = _gpu_check('--device', 'cpu', '--quick', '--out', str(tmp_path/'g.json'))
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path/'g.json').read_text())
    assert set(doc['step_s']) == {'checks', 'registry', 'decoder_8_dense_lu', 'decoder_16_dense_lu'}
    assert [c['case'] for c in doc['checks']][:2] == ['SwiGLU d=64 d1=256', 'RoPE-MHA d=32 2x16 T=8']
    assert all(c['device_max_rel'] < 1e-8 and c['cpu_max_rel'] < 1e-8 for c in doc['checks']), doc['checks']
    assert [(v['arch'], v['verdict']) for v in doc['registry']] == [('swiglu', 'complete'), ('mha-rope', 'complete')]
    for k in ('decoder_8_dense_lu', 'decoder_16_dense_lu'):
        assert doc[k]['agree'] and doc[k]['lu_status'] == 'ok', doc[k]

@pytest.mark.skipif(torch.cuda.is_available(), reason='a CUDA device is present')
def test_gpu_check_refuses_a_missing_cuda_device(tmp_path):
    r = _gpu_check('--out', str(tmp_path/'g.json'))
    assert r.returncode == 2 and 'no CUDA device here' in r.stderr and not (tmp_path/'g.json').exists()

def test_taking_turns_calls_each_in_turn_and_keeps_every_time():
    calls = []
    (ra, ta, pa), (rb, tb, pb) = taking_turns([lambda: calls.append('a') or 1, lambda: calls.append('b') or 2], n=4)
    assert (ra, rb) == (1, 2) and calls == ['a', 'b']*4 and len(ta) == len(tb) == 4 and min(ta + tb + [pa, pb]) >= 0

def test_turn_range_gives_the_range_of_the_per_turn_ratios():
    assert turn_range(dict(turn_ratios=[1.1, 0.9, 1.25])) == '×0.90–×1.25' and turn_range(dict()) == 'n/a'

def test_width_count_target_reads_auto_and_misses_a_wrong_count():
    r = dict(d=64, D=24576, theory=128, methods=['gram', 'auto'], gram_s=300., gram_MB=3000., gram_laws=128, gram_status='ok',
             auto_s=180., auto_MB=5400., auto_laws=128, auto_status='ok', auto_method='lu')
    t = _width_count(r)
    assert t['width_count_minutes'][0] == 3. and 'auto -> lu' in t['width_count_minutes'][1] and 'gram: 5.0 min' in t['width_count_minutes'][1]
    for bad in (dict(auto_laws=127), dict(auto_status='ambiguous')):
        t = _width_count({**r, **bad})
        assert t['width_count_minutes'][0] == float('inf') and t['width_count_GB'][0] == float('inf')

def test_census_benchmark_reads_and_refuses_its_command_line(tmp_path):
    "`make bench-census`: its defaults (Llama-3-70B never seen, then Llama-3-8B), the targets of issue 52, a bad value refused before work"
    a = census_bench_args([])
    assert (a.new, a.seen, a.reps, a.workers, a.out) == ('llama-3-70b', 'llama-3-8b', 3, None, 'bench_census.json')
    assert CENSUS_TARGETS == {'help_process_s': ('<', 1.), 'new_family_process_s': ('<', 60.), 'seen_family_process_s': ('<', 10.),
                              'cached_call_s': ('<', .5), 'cached_process_s': ('<', 2.)}
    (tmp_path/'c.json').write_text('{"model_type": "llama"}')
    assert census_bench_args(['--new', str(tmp_path/'c.json')]).new == str(tmp_path/'c.json')      # a config.json path
    for bad in (['--reps', '0'], ['--workers', '0'], ['--new', 'gpt5'], ['--seen', str(tmp_path/'none.json')], ['--new', 'gpt2']):   # gpt2: not
        # the family of the default --seen (Llama-3-8B), whose census would count twins, not read the formulas --new cached
        with pytest.raises(SystemExit) as e: census_bench_args(bad)
        assert e.value.code == 2, bad
    assert config_of('mistral-7b') == ('mistral-7b', ROOT/'conslaw_nb'/'configs'/'mistral-7b.json')
    dt, out = timed_process([sys.executable, '-c', 'print(6*7)'])
    assert out == '42\n' and dt > 0
    with pytest.raises(RuntimeError, match='exit 3'): timed_process([sys.executable, '-c', 'raise SystemExit(3)'])
