"""`make bench`: how fast the law-counting engine runs, measured against a straightforward baseline, the anchors'
published timings, the cost floor of the method, and a training step. Prints a table and writes bench.json.
This is a benchmark, not a test: it never fails on a missed target, it says by how much it missed.
The benchmark itself is `conslaw_nb.bench.cases` (nbs/13_bench.cases.ipynb); this script only reads the command line.
Usage: python tools/bench.py [--device cpu|cuda] [--quick] [--out bench.json]"""
import argparse
from conslaw_nb.bench.run import BenchConfig, run_benchmark

def parse(argv=None)->BenchConfig:
    "The command line as a `BenchConfig`"
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--device', default=None, help="'cpu' (default) or an accelerator such as 'cuda'")
    ap.add_argument('--out', default=BenchConfig.out, help='where the results go (default %(default)s)')
    ap.add_argument('--quick', action='store_true', help='one repeat, small scaling budget (a smoke run)')
    ap.add_argument('--scaling-budget', type=float, default=None, help='seconds for the SwiGLU scaling series')
    ap.add_argument('--threads', type=int, default=BenchConfig.threads, help='torch intra-op threads (default 1: small '
                    'problems are overhead-bound, and on a shared machine extra threads mostly add noise)')
    ap.add_argument('--max-d', type=int, default=BenchConfig.max_d, help='largest SwiGLU width d tried (D = 6 d²; '
                    'd = 40 gives D = 9600)')
    a = ap.parse_args(argv)
    try: return BenchConfig(**vars(a))
    except ValueError as e: ap.error(str(e))

if __name__ == '__main__': run_benchmark(parse())
