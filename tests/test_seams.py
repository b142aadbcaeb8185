"""Public seams: a module of conslaw_nb uses another module's public names only. A name with one leading underscore is
that module's own business (dunders such as `__version__` are public), so importing it from another module, or reading it
off an imported module (`ffn._x`), ties the two together where a reader of either cannot see it."""
import ast
from pathlib import Path
import pytest

PKG = Path(__file__).resolve().parents[1]/'conslaw_nb'
MODULES = sorted(p for p in PKG.rglob('*.py') if p.name != '_modidx.py')
NAMES = {p.stem for p in MODULES}

def _private(name:str)->bool: return name.startswith('_') and not (name.startswith('__') and name.endswith('__'))

def _source_module(node:ast.ImportFrom):
    "The conslaw_nb module an import reads from ('' for the package itself), or None for an import from elsewhere"
    mod = node.module or ''
    if node.level: return mod.split('.')[-1] if mod else ''       # `from ..engine.core import x`: the module core
    if node.level == 0 and (mod == 'conslaw_nb' or mod.startswith('conslaw_nb.')): return mod.split('.')[-1] if '.' in mod else ''
    return None

def reach_ins(path:Path)->list:
    "'line: what' for every private name of another module that `path` imports or reads off an imported module"
    me, tree, out, mods = path.stem, ast.parse(path.read_text()), [], set()
    for node in ast.walk(tree):                                     # imports anywhere: top level and inside functions
        if isinstance(node, ast.ImportFrom) and (src := _source_module(node)) is not None:
            for a in node.names:
                if src == '' and a.name in NAMES:                   # `from . import ffn`: a module, read below
                    if a.name != me: mods.add(a.asname or a.name)
                    continue
                if src != me and _private(a.name): out.append(f"{node.lineno}: from {'.' * node.level}{node.module or ''} import {a.name}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split('.')
                if parts[0] == 'conslaw_nb' and len(parts) > 1 and a.asname and parts[1] != me: mods.add(a.asname)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in mods and _private(node.attr):
            out.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return out

def test_the_walk_finds_reach_ins(tmp_path):
    "The checker itself: relative, absolute, nested and attribute reach-ins are found; public names, dunders and own names are not"
    p = tmp_path/'demo.py'
    p.write_text("from .core import a, _b, __version__\nfrom conslaw_nb.engine.count import _c\nfrom . import ffn\nimport conslaw_nb.engine.rank as R\n"
                 "from .demo import _own\ndef f():\n    from conslaw_nb.experiments.data import _d\n    return ffn._e, R._f, ffn.g, R.__name__\n")
    assert [s.split(': ')[1] for s in reach_ins(p)] == ['from .core import _b', 'from conslaw_nb.engine.count import _c',
                                                        'from conslaw_nb.experiments.data import _d', 'ffn._e', 'R._f']

@pytest.mark.parametrize('path', MODULES, ids=[p.stem for p in MODULES])
def test_no_private_import_across_modules(path):
    found = reach_ins(path)
    assert not found, (f"conslaw_nb/{path.name} uses private names of other modules: {found}; make the name public in the "
                       "module that defines it (with a docstring, and docments for 3+ parameters) and import that")


def positional(path:Path)->list:
    "'name: n' for every function of `path` taking more than 8 positional parameters (self and cls not counted)"
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args.posonlyargs + node.args.args
            n = len(a) - (1 if a and a[0].arg in ('self', 'cls') else 0)
            if n > 8: out.append(f"{node.name}: {n}")
    return out

def test_the_count_of_positional_parameters(tmp_path):
    p = tmp_path/'m.py'
    p.write_text("def f(a, b, c, d, e, g, h, i, j): pass\ndef k(self, a, b, c, d, e, g, h, i, *, j): pass\n")
    assert positional(p) == ['f: 9']

@pytest.mark.parametrize('path', MODULES, ids=[p.name for p in MODULES])
def test_no_function_takes_more_than_eight_positional_parameters(path):
    "Past eight, a call reads as a row of values: the rest are keyword-only"
    assert not positional(path), f"{path.name}: {positional(path)}"
