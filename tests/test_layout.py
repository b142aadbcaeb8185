"""The layout the notebooks promise: numbered in build order, imports running one way (a module or a notebook uses
only what comes before it), one definition of each public name, and export cells short enough to read beside their tests."""
import ast, json, re
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
NBS = sorted(p for p in (ROOT/'nbs').glob('[0-9][0-9]*.ipynb') if re.match(r'\d\d[a-z]?_', p.name))   # 03, then 03a, 03b (fastcore's manner)

def _module(nb):
    "The module a notebook exports to, or None"
    for c in json.loads(nb.read_text())['cells']:
        m = re.match(r'#\|\s*default_exp\s+(\S+)', ''.join(c['source']))
        if c['cell_type'] == 'code' and m: return m.group(1)

ORDER = {nb: i for i, nb in enumerate(NBS)}
MODULE_NB = {m: nb for nb in NBS if (m := _module(nb))}

def _resolve(name):
    "The modules a dotted name under conslaw_nb stands for: the module itself, or every module of a subpackage (its face)"
    parts = name.split('.')
    for k in range(len(parts), 0, -1):
        if '.'.join(parts[:k]) in MODULE_NB: return {'.'.join(parts[:k])}
    return {m for m in MODULE_NB if m.startswith(name + '.')}

def _imports(src, pkg=''):
    "conslaw_nb modules named by the imports of `src` (absolute as in notebooks, relative as in the modules of package `pkg`)"
    out = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ''
            if node.level:
                base = pkg.split('.') if pkg else []
                base = base[:len(base) - (node.level - 1)]
                full = '.'.join(base + ([mod] if mod else []))
                for a in node.names: out |= _resolve(f'{full}.{a.name}'.strip('.')) or _resolve(full)
            elif mod.startswith('conslaw_nb.'):
                for a in node.names: out |= _resolve(f'{mod[11:]}.{a.name}') or _resolve(mod[11:])
            elif mod == 'conslaw_nb': out |= set().union(*[_resolve(a.name) for a in node.names])
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith('conslaw_nb.'): out |= _resolve(a.name[11:])
    return out & set(MODULE_NB)

def _py(m): return ROOT/'conslaw_nb'/(m.replace('.', '/') + '.py')

def _code(nb):
    cells = json.loads(nb.read_text())['cells']
    src = [''.join(c['source']) for c in cells if c['cell_type'] == 'code']
    return [re.sub(r'^[%!].*$', '', s, flags=re.M) for s in src]   # IPython magics are not Python

def test_notebooks_numbered_and_listed():
    nums = [int(nb.name[:2]) for nb in NBS if nb.name[2] == '_']
    assert nums == list(range(len(nums))), f"notebooks are not numbered 00, 01, ... in build order: {[nb.name for nb in NBS]}"
    lettered = [nb.name for nb in NBS if nb.name[2] != '_']
    assert all(int(n[:2]) in nums for n in lettered), f"a lettered notebook (01a_...) follows no numbered one: {lettered}"
    side = (ROOT/'nbs'/'sidebar.yml').read_text()
    for nb in sorted((ROOT/'nbs').rglob('*.ipynb')):
        rel = str(nb.relative_to(ROOT/'nbs'))
        if not any(part.startswith(('.', '_')) for part in nb.relative_to(ROOT/'nbs').parts):
            assert f'- {rel}' in side, f"{rel} is not in nbs/sidebar.yml"

@pytest.mark.parametrize('nb', NBS, ids=[nb.name for nb in NBS])
def test_imports_run_one_way(nb):
    "A notebook (its exported code and its pages) uses only modules of notebooks before it"
    later = {m for m in set().union(*map(_imports, _code(nb))) if ORDER[MODULE_NB[m]] > ORDER[nb]}
    assert not later, f"{nb.name} imports {sorted(later)}, which come after it: move the code, or the notebook"

def test_modules_import_one_way():
    for m, nb in MODULE_NB.items():
        later = {x for x in _imports(_py(m).read_text(), m.rpartition('.')[0]) if ORDER[MODULE_NB[x]] >= ORDER[nb]}
        assert not later, f"conslaw_nb/{m}.py imports {sorted(later)}, which do not come before it"

def test_one_definition_of_each_public_name():
    seen = {}
    for m in MODULE_NB:
        body = ast.parse(_py(m).read_text()).body
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith('_'):
                seen.setdefault(node.name, []).append(m)
    twice = {n: ms for n, ms in seen.items() if len(ms) > 1}
    assert not twice, f"defined in more than one module: {twice}"

MAX_CELL = 70    # lines of an export cell, its `#| export` line included: STYLE.md's "seventy at most" for nbdev's own

def _export_cells(nb):
    "(source, the next code cell's source or None) of every export cell of `nb`"
    cells = [c for c in json.loads(nb.read_text())['cells'] if c['cell_type'] == 'code']
    for i, c in enumerate(cells):
        s = ''.join(c['source'])
        if re.match(r'#\|\s*exports?\b', s): yield s, ''.join(cells[i+1]['source']) if i + 1 < len(cells) else None

def test_export_cells_short():
    "Export cells of at most 70 lines (one statement a line): split between definitions, or move a long function's separate step into a helper"
    long = [f'{nb.name}: {s.splitlines()[1][:60]} ({s.count(chr(10)) + 1} lines)' for nb in NBS for s, _ in _export_cells(nb)
            if s.count('\n') + 1 > MAX_CELL]
    assert not long, f"export cells over {MAX_CELL} lines: {long}"

def test_a_test_beneath_every_export_cell():
    "Every export cell is followed by a code cell that tests or shows it before the next export cell (fastcore's and nbdev's manner)"
    bare = [f'{nb.name}: {s.splitlines()[1][:60]}' for nb in NBS for s, nxt in _export_cells(nb)
            if nxt is None or re.match(r'#\|\s*exports?\b', nxt)]
    assert not bare, f"export cells with no test or example beneath them: {bare}"


def test_one_statement_a_line_in_the_library():
    "Statements are not joined by ';' in the library: a size rule is met by decomposing, never by compaction (a handful may stay)"
    import io, tokenize
    lib = ROOT/'conslaw_nb'
    n = {p.name: sum(1 for t in tokenize.generate_tokens(io.StringIO(p.read_text()).readline) if t.type == tokenize.OP and t.string == ';')
         for p in lib.rglob('*.py') if not p.name.startswith('_modidx')}
    assert sum(n.values()) <= 5, {k: v for k, v in n.items() if v}

CHECK_CALL = re.compile(r'\b(test_eq|test_close|test_fail|test_is|test_ne|expect_fail|ExceptionExpected|assert)\b')

def test_paper_chapters_read_as_lessons():
    "On the chapters of the paper, at most a third of the visible code cells check (the checks run hidden beneath the lessons)"
    for name in ('04_paper.ffn', '05_paper.attention', '06_paper.moe'):
        cells = [''.join(c['source']) for c in json.loads((ROOT/'nbs'/f'{name}.ipynb').read_text())['cells'] if c['cell_type'] == 'code']
        shown = [s for s in cells if not re.search(r'^#\|\s*(hide|export)', s, re.M)]
        checking = [s for s in shown if CHECK_CALL.search(s)]
        assert len(checking) <= len(shown) / 3, (name, len(checking), len(shown))


LAYERS = ('engine', 'paper', 'hf', 'zoo', 'theorems', 'discovery', 'experiments', 'monitor', 'bench', 'survey', 'cli')

def _room(m): return m.split('.')[0]

def test_subpackages_and_their_levels():
    "At least four subpackages, and the imports between the rooms of the house (subpackages, top modules) at most 10 levels deep"
    subs = {p.name for p in (ROOT/'conslaw_nb').iterdir() if p.is_dir() and (p/'__init__.py').exists()}
    assert len(subs) >= 4, subs
    edges = {r: set() for r in map(_room, MODULE_NB)}
    for m in MODULE_NB: edges[_room(m)] |= {_room(x) for x in _imports(_py(m).read_text(), m.rpartition('.')[0])} - {_room(m)}
    level = {}
    def depth(r, seen=()):
        assert r not in seen, f"import cycle between rooms: {seen + (r,)}"
        if r not in level: level[r] = 1 + max((depth(x, seen + (r,)) for x in edges[r]), default=0)
        return level[r]
    assert max(map(depth, edges)) <= 10, level

def test_only_faces_re_export():
    "A module's __all__ names only what it defines: gathering other modules' names is a face's work (a package's __init__)"
    for m in MODULE_NB:
        tree = ast.parse(_py(m).read_text())
        alls = [ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], 'id', '') == '__all__']
        defined = {t.id for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign)) for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                   for t in ([t] if isinstance(t, ast.Name) else getattr(t, 'elts', [])) if isinstance(t, ast.Name)}
        defined |= {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        foreign = set(alls[0] if alls else []) - defined
        assert not foreign, f"conslaw_nb/{m}: __all__ re-exports {sorted(foreign)}"

def test_front_door():
    "The nine entry points and the results users hold, from `conslaw_nb` itself, and an import that stays light"
    import subprocess, sys
    code = ("import sys, conslaw_nb; assert 'torch' not in sys.modules; from conslaw_nb import (count_laws, check_laws, find_laws, "
            "adapt, law_blocks, census, ConservationMonitor, ConservationCallback, verify); print(len(conslaw_nb.__all__))")
    n = int(subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout)
    assert 8 <= n <= 25, n

def test_caches_are_named_and_cleared():
    "The caches are public names of the modules that keep them, and one call forgets them all (no test reaches into a private one)"
    import conslaw_nb
    import conslaw_nb.survey.published as CE, conslaw_nb.survey.families as FA, conslaw_nb.hf.adapters as AD
    CE.FORMULAS['probe'], AD.COUNTED['probe'], FA.PROBED['probe'] = 1, 1, 1
    AD.STRUCTURES.mem['probe'] = {}
    conslaw_nb.clear_caches()
    assert 'probe' not in CE.FORMULAS and 'probe' not in AD.COUNTED and 'probe' not in AD.STRUCTURES.mem and 'probe' not in FA.PROBED
