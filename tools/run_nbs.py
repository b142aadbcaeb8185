"""Execute notebooks in place so their stored outputs (tables, figures) are the ones the docs and README show.
Cells flagged with a test flag (`#| slow`, `#| gpu`, `#| notest`) and `#| eval: false` cells are skipped, as in
nbdev_test, unless named in --flags. Usage: python tools/run_nbs.py [--flags "slow gpu"] nbs/02_engine.count.ipynb ..."""
import argparse, os, re, sys
from pathlib import Path
from execnb.nbio import read_nb, write_nb
from execnb.shell import CaptureShell
from fastcore.xtras import working_directory

def _directives(src):
    return {m.group(1): m.group(2).strip() for m in re.finditer(r'^\s*#\|\s*([\w-]+:?)(.*)$', src, re.M)}

def run(fn, flags=('notest', 'slow', 'gpu')):
    "Run notebook `fn` top to bottom, skipping flagged cells, and save the outputs into it"
    fn = Path(fn).resolve()
    nb = read_nb(fn)
    def skip(cell):
        if cell.cell_type != 'code': return True
        if 'nbdev_export' + '(' in cell.source: return True
        d = _directives(cell.source)
        if d.get('eval:', '').lower() == 'false': return True
        return bool(set(flags) & set(d))
    os.environ['IN_TEST'] = '1'
    sh = CaptureShell(fn, mpl_format='png')        # stored figures at 1x (retina doubles every notebook's size)
    with working_directory(fn.parent): sh.run_all(nb, exc_stop=True, preproc=skip)
    write_nb(nb, fn)

if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--flags', default='', help='test flags to run anyway')
    ap.add_argument('nbs', nargs='+')
    a = ap.parse_args()
    skip = tuple(f for f in ('notest', 'slow', 'gpu') if f not in a.flags.split())
    for f in a.nbs:
        print(f'running {f}', file=sys.stderr); run(f, skip)
