"""`make reproduce`: Section 6 of the paper at its protocol (`conslaw_nb.experiments.sweeps.reproduce`), written to runs/reproduce/.

Resumable: a second call keeps every finished run and trains only the missing ones. Examples:
    python tools/reproduce.py                                   # the CPU protocol (about an hour on 2 cores)
    python tools/reproduce.py --protocol quick --out /tmp/q     # the same code path on tiny models, about a minute
    python tools/reproduce.py --protocol gpu --device cuda --data wikitext=/data/wikitext-103-raw cifar10=/data/cifar-10-batches-py
"""
import argparse, sys
from conslaw_nb.experiments.sweeps import reproduce, PROTOCOLS

def _data(items)->dict:
    out = {}
    for it in items or []:
        k, eq, v = it.partition('=')
        if not eq or not k or not v: raise ValueError(f"--data {it!r}: expected TASK=FOLDER, e.g. cifar10=/data/cifar-10-batches-py")
        out[k] = v
    return out

def _ci(c): return 'n/a' if c is None else f"[{c[0]:.3f}, {c[1]:.3f}]"

def main(argv=None)->int:
    p = argparse.ArgumentParser(prog='reproduce', description=__doc__.splitlines()[0])
    p.add_argument('--out', default='runs/reproduce', help='output folder (default runs/reproduce)')
    p.add_argument('--protocol', default='cpu', choices=list(PROTOCOLS), help="'cpu' (default), 'gpu' (the paper's sizes) or 'quick'")
    p.add_argument('--device', default='cpu', help="'cpu', 'cuda' or 'cuda:N'")
    p.add_argument('--tasks', default=None, help='comma-separated subset of the protocol\'s tasks')
    p.add_argument('--data', nargs='*', metavar='TASK=FOLDER', help='local dataset folders (wikitext, cifar10, fashion-mnist)')
    p.add_argument('--quiet', action='store_true', help='no progress bars')
    a = p.parse_args(argv)
    try:
        doc = reproduce(a.out, protocol=a.protocol, device=a.device, tasks=a.tasks.split(',') if a.tasks else None,
                        data=_data(a.data), progress=not a.quiet)
    except KeyboardInterrupt:
        print('reproduce: interrupted; run it again to resume', file=sys.stderr); return 130
    except (ValueError, TypeError, OSError, ImportError) as e:
        print(f"reproduce: error: {' '.join(str(e).split())}", file=sys.stderr); return 2
    for t, f in doc['tasks'].items():
        for o in ('gd', 'sgd'):
            x = f[o]
            print(f"{t} {o}: τ exponent {x['tau_exponent']:.3f} {_ci(x['tau_exponent_ci'])}, k exponent {x['k_exponent']:.3f} "
                  f"{_ci(x['k_exponent_ci'])} ({x['n_seeds']} seeds, {x['steps']} steps; {x['regime']['rule']})")
        for fam, b in (f['gd']['bound'] or {}).get('families', {}).items():
            print(f"  {fam}: measured / bound, median {b['ratio_median']:.1e}, max {b['ratio_max']:.1e}")
    print(f"wall time {doc['wall_time_s'] / 60:.1f} min; outputs in {a.out}: fit.json, summary.csv, timing.json, figures/, */records.csv")
    return 0

if __name__ == '__main__': sys.exit(main())
