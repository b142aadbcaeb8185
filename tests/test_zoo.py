"""One zoo: every list of small architectures the library keeps (the verification rows, the modules `adapt` reads, the
benchmark's cases, the tiny transformers configs, the atlas's blocks) is a view of `zoo.ZOO`, and none is written anywhere else."""
import ast
from pathlib import Path
import pytest
import conslaw_nb.zoo as Z, conslaw_nb.theorems as V, conslaw_nb.bench.cases as B, conslaw_nb.survey.atlas as A, conslaw_nb.discovery.found as Di
from conslaw_nb.engine.problem import Problem

ROOT = Path(__file__).resolve().parents[1]
OLD = {'theorems': ['ARCHS'], 'bench/cases': ['SPEED_CASES', 'WIDTH_CHECKS', 'QUICK_WIDTH_CHECKS', 'DECODER_SHAPES'], 'survey/atlas': ['ATLAS'],
       'discovery/found': ['TINY_CONFIGS'], 'hf/adapters': ['module_zoo']}   # the registries each module kept before the zoo

def test_every_old_registry_is_a_view_of_the_zoo():
    arch = {n: e for n, e in Z.view('verify').items() if Z.HAS_TRANSFORMERS or 'transformers' not in e.tags}
    assert list(V.ARCHS) == list(arch) and all(V.ARCHS[n] is Z.ZOO[n] for n in V.ARCHS)
    assert list(A.ATLAS) == list(Z.view('atlas')) and all(A.ATLAS[n] is Z.ZOO[n] for n in A.ATLAS)
    assert Di.TINY_CONFIGS == {n: e.build() for n, e in Z.view('tiny-config').items()}
    for old, tag in ((B.SPEED_CASES, 'speed'), (B.WIDTH_CHECKS, 'width-check'), (B.QUICK_WIDTH_CHECKS, 'quick-width-check')):
        assert [n for n, _ in old] == list(Z.view(tag)) and all(make is Z.ZOO[n].build for n, make in old)
    assert getattr(B, 'DECODER_SHAPES', Z.DECODER_SHAPES) is Z.DECODER_SHAPES and list(Z.view('decoder')) == [Z.decoder_layer_name(d) for d in Z.DECODER_SHAPES]
    assert list(Z.module_zoo(1, transformers=False)) == [n for n, e in Z.view('module').items() if 'transformers' not in e.tags]

def _assigned(module:str)->dict:
    "name -> source of the value of each module-level assignment in conslaw_nb/`module`.py"
    src = (ROOT/'conslaw_nb'/f'{module}.py').read_text()
    out = {}
    for node in ast.parse(src).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                if isinstance(t, ast.Name): out[t.id] = ast.get_source_segment(src, node.value)
    return out

def test_no_registry_is_written_outside_the_zoo():
    "The old names are views (or imports) of the zoo; `register` is called by the zoo, and by the atlas for the blocks it defines"
    for module, names in OLD.items():
        a = _assigned(module)
        for n in names:
            assert n not in a or 'view(' in a[n], f"conslaw_nb/{module}.py writes its own {n}: make it a view of the zoo (`zoo.view(tag)`)"
    defs = {p.stem for p in (ROOT/'conslaw_nb').rglob('*.py') for node in ast.walk(ast.parse(p.read_text()))
            if isinstance(node, ast.FunctionDef) and node.name in ('module_zoo', 'decoder_layer_case')}
    assert defs == {'zoo'}, defs
    callers = {p.stem for p in (ROOT/'conslaw_nb').rglob('*.py') if p.stem != '_modidx'
               for node in ast.walk(ast.parse(p.read_text()))
               if isinstance(node, ast.Call) and getattr(node.func, 'id', getattr(node.func, 'attr', None)) == 'register'}
    assert callers <= {'zoo', 'atlas'}, callers

def test_entries():
    assert len(set(Z.ZOO)) == len(Z.ZOO)
    for n, e in Z.ZOO.items():
        assert e.name == n and e.kind in ('problem', 'module', 'config', 'sizes') and e.tags, n
    tags = {t for e in Z.ZOO.values() for t in e.tags}
    assert {t: len(Z.view(t)) for t in sorted(tags)} == {
        'atlas': 17, 'decoder': 5, 'module': 19, 'paper': 10, 'quick-width-check': 2, 'speed': 3, 'tiny-config': 21,
        'transformers': 43, 'verify': 20, 'width-check': 2}
    for tag in ('paper', 'speed', 'width-check', 'quick-width-check', 'decoder'):   # built without adapt: cheap
        for n, e in Z.view(tag).items():
            pb = e.build()
            assert isinstance(pb, Problem) and isinstance(pb.stated, int), n

def test_register_and_view():
    e = Z.Entry('test-toy', lambda s=1: None, tags=('test-only', 'paper'))
    try:
        assert Z.register(e) is e and Z.view('test-only') == {'test-toy': e}
        assert 'test-toy' in Z.view('paper') and 'test-toy' not in Z.view('paper', 'verify')
        Z.register(e); assert list(Z.ZOO).count('test-toy') == 1                  # registered again: replaced, not doubled
    finally: Z.ZOO.pop('test-toy', None)
    with pytest.raises(TypeError, match='needs'): Z.register(object())
