"""The checks a session with a GPU runs in one go (never run on a GPU yet; each decoder count stops after --limit-s):
the CUDA paths of `check_laws` and `count_laws` against the CPU's answers, then the Llama-style decoder layer of the
model-width work counted on the GPU at d = 16 (dense and LU side by side), 32 and 64 ('auto'), and 128 by 'auto' (the
matrix-free path there) and by the Gram path (its float32 D × D matrix, 123 GiB, is the only one that fits one H200),
each count in its own process under a time limit. Every step's result is added to the JSON file as soon as it is known
(written atomically), so a run cut short keeps what it measured. A report, not a test: it never fails on a missed target.
Usage: python tools/gpu_check.py [--device cuda] [--out gpu_check.json] [--limit-s 180] [--quick]"""
import argparse, json, subprocess, sys, time
from pathlib import Path
import torch
import conslaw_nb.bench.cases as bench
from conslaw_nb.engine.core import save_json
from conslaw_nb.engine.count import check_laws
from conslaw_nb.theorems import verify

def decoder_row(d:int, device:str, methods)->dict:
    "The decoder layer at width d counted on `device` by each of `methods`: `bench.case_count_row`, with D and the GPU's peak"
    return bench.case_count_row(bench.decoder_layer_name(d), bench.decoder_layer_case(d), methods, device=device)

def checks(device:str, quick:bool)->list:
    "The model-width checks (and transformers' Llama modules) on `device` and on the CPU: same verdicts, seconds on `device`"
    rows = []
    for name, make in (bench.QUICK_WIDTH_CHECKS if quick else bench.WIDTH_CHECKS) + bench.module_checks(quick):
        pb = make(); p = pb.point(0)
        run = lambda dev: check_laws(pb.laws, pb.f, p, pb.sample_inputs, method='matrix_free', device=dev)
        run(device)                                                            # warm-up: kernels, cuBLAS handles
        c, t = bench.timed(lambda: run(device), device)
        rows.append(dict(case=name, device_s=t, device_max_rel=c.max_rel, cpu_max_rel=run('cpu').max_rel, laws=c.n_laws))
    return rows

def registry(device:str, quick:bool)->list:
    "`conslaw verify`'s rows on `device`: the dense path on the GPU, every architecture's verdict"
    keep = ('arch', 'n_params', 'stated', 'formula', 'n_laws', 'verdict', 'status', 'seconds')
    return [{k: getattr(r, k) for k in keep} for r in verify(['swiglu', 'mha-rope'] if quick else None, device=device)]

def in_process(d:int, device:str, methods, limit_s:float)->dict:
    "`decoder_row` in a fresh process, stopped after `limit_s` seconds (the widest count may run past any sensible limit)"
    cmd = [sys.executable, __file__, '--device', device, '--width', str(d), '--methods', ','.join(methods)]
    t = time.perf_counter()
    try: out = subprocess.run(cmd, capture_output=True, text=True, timeout=limit_s)
    except subprocess.TimeoutExpired: return dict(case=f'decoder layer d={d}', stopped_after_s=limit_s, methods=list(methods))
    if out.returncode: return dict(case=f'decoder layer d={d}', error=out.stderr.strip().splitlines()[-1:], seconds=time.perf_counter() - t)
    return json.loads(out.stdout.strip().splitlines()[-1])

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--device', default='cuda', help="the accelerator ('cuda', 'cuda:1'); 'cpu' runs the same steps on the CPU")
    ap.add_argument('--out', default='gpu_check.json', help='the JSON file the results go to (default %(default)s)')
    ap.add_argument('--limit-s', type=float, default=180., help='seconds each decoder count may take (default %(default)s)')
    ap.add_argument('--quick', action='store_true', help='the smallest cases only: a smoke run (d = 8 and 16)')
    ap.add_argument('--width', type=int, help=argparse.SUPPRESS)       # one decoder width, in the child process
    ap.add_argument('--methods', help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.device != 'cpu' and not torch.cuda.is_available(): ap.error(f"--device {a.device}: no CUDA device here (pass --device cpu to try the steps)")
    if a.width is not None:                                            # the child: one row, as JSON on its last line
        print(json.dumps(decoder_row(a.width, a.device, a.methods.split(',')), default=float)); return
    if a.limit_s <= 0: ap.error(f'--limit-s {a.limit_s}: pass a positive number of seconds')
    out = Path(a.out)
    if not out.parent.exists(): ap.error(f'--out {a.out}: folder {str(out.parent)!r} does not exist')
    doc = dict(machine=bench.machine(a.device), started=time.strftime('%Y-%m-%d %H:%M:%S'))
    def step(key, fn):                                                 # a step that breaks is recorded, and the next runs
        t = time.perf_counter()
        try: doc[key] = fn()
        except Exception as e: doc[key] = dict(error=f'{type(e).__name__}: {e}'[:500])
        doc.setdefault('step_s', {})[key] = time.perf_counter() - t
        save_json(doc, out); print(f'{key}: {doc["step_s"][key]:.1f} s', flush=True)
    step('checks', lambda: checks(a.device, a.quick))
    step('registry', lambda: registry(a.device, a.quick))
    counts = ((8, ('dense', 'lu')), (16, ('dense', 'lu'))) if a.quick else \
             ((16, ('dense', 'lu')), (32, ('auto',)), (64, ('auto',)), (128, ('auto',)), (128, ('gram',)))
    for d, methods in counts:
        key = f"decoder_{d}_{'_'.join(methods)}"
        step(key, lambda: in_process(d, a.device, methods, a.limit_s))
        print('  ', json.dumps({k: v for k, v in doc[key].items() if not k.endswith('_dims')}, default=float), flush=True)

if __name__ == '__main__': main()
