"""The engine split (issue 38, item 1), and its house (issue 51): what moved to rows, regions, solvers and checks lives there
and only there (no module but a face re-exports a name; the engine's face gathers what users call); what uses the count (the problem and its verdict, the sympy checks,
the flow) and the linear head have their own modules, which pde does not hold; `count_laws` takes at most 10 parameters, its knobs in one options
object per method; one name per solver, everywhere; no private name crosses between the engine's modules; no engine module passes 700 lines or 8 positional parameters
a function; and the saturation loop is one function, used by the dense path and by the paths past it alike."""
import ast, inspect
from pathlib import Path
from unittest import mock
import pytest, torch
import conslaw_nb.engine.count as pde, conslaw_nb.engine.rows as rows, conslaw_nb.engine.regions as regions, conslaw_nb.engine.solvers as solvers, conslaw_nb.engine.checks as checks, conslaw_nb.engine.problem as problem, conslaw_nb.engine.symbolic as symbolic, conslaw_nb.engine.flow as flow
from conslaw_nb.engine.core import gaussian_inputs

ROOT = Path(__file__).resolve().parents[1]
ENGINE = ('engine/count', 'engine/rows', 'engine/regions', 'engine/solvers', 'engine/checks', 'engine/problem', 'engine/symbolic',
          'engine/flow', 'bench/cases', 'bench/run')
MOVED = {rows: ['jacobian_rows', 'bracket_terms', 'bracket_scale', 'bracket_rows', 'bracket_fd_error', 'LOSSES', 'output_projector',
                'output_basis'],
         regions: ['piecewise_ops', 'good_turing', 'Regions'],
         solvers: ['Span', 'JACOBI_MAX', 'SHIFT_INVERT_SIGMA', 'SHIFT_INVERT_SETTLE', 'LU_SETTLE', 'LU_STEPS', 'Ambiguous', 'NULL_SOLVERS',
                   'null_space'],
         checks: ['law_gradients', 'LawCheck', 'law_norms', 'check_laws', 'laws_rank', 'n_args', 'check_law_args']}

@pytest.mark.parametrize('mod', list(MOVED), ids=lambda m: m.__name__.split('.')[-1])
def test_what_moved_lives_in_its_page_alone(mod):
    for name in MOVED[mod]:
        assert getattr(mod, name).__module__ == mod.__name__ if hasattr(getattr(mod, name), '__module__') else True, name
        assert name not in pde.__all__, f"the count re-exports {name}: import it from {mod.__name__}"

def test_the_engine_face_gathers_what_users_call():
    import conslaw_nb.engine as E
    assert E.count_laws is pde.count_laws and E.check_laws is checks.check_laws and E.LawCount is pde.LawCount

MOVED_OUT = {rows: ['linear_head'], problem: ['Problem', 'Completeness', 'completeness'], symbolic: ['sym_orthogonality', 'sym_is_law'],
             flow: ['gradient_flow', 'gradient_descent']}

@pytest.mark.parametrize('mod', list(MOVED_OUT), ids=lambda m: m.__name__.split('.')[-1])
def test_what_uses_the_count_has_its_own_module(mod):
    "The problem and its verdict, the sympy checks and the flow live in their own modules (after pde), not in pde"
    for name in MOVED_OUT[mod]:
        assert name in mod.__all__ and getattr(mod, name).__module__ == mod.__name__, f"{name} is not defined in {mod.__name__}"
        assert not hasattr(pde, name), f"pde still holds {name}"

def test_one_concept_per_module_docstring():
    "pde's opening names the count alone: no problem, verdict, sympy or flow in it"
    doc = pde.__doc__
    assert 'count_laws' in doc and not any(w in doc for w in ('Problem', 'completeness', 'sympy', 'gradient_flow'))

def test_engine_modules_small_with_few_positional_parameters():
    for m in ENGINE:
        src = (ROOT/'conslaw_nb'/f'{m}.py').read_text()
        assert src.count('\n') <= 700, f"conslaw_nb/{m}.py has {src.count(chr(10))} lines"
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = len(node.args.posonlyargs) + len(node.args.args)
                assert n <= 8, f"{m}.{node.name} takes {n} positional parameters"
    assert len([p for p in inspect.signature(pde._Count).parameters.values() if p.kind == p.POSITIONAL_OR_KEYWORD]) <= 8

def _linear2(p, x): return p['U'] @ (p['V'].T @ x)

@pytest.mark.parametrize('method', ['dense', 'gram', 'lu'])
def test_one_saturation_loop_for_every_path(method):
    "Drawn inputs and fixed ones, the dense path and the paths past it: all stop by `pde._saturate`"
    for inputs in (gaussian_inputs(3), torch.randn(40, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)):
        with mock.patch.object(pde, '_saturate', wraps=pde._saturate) as sat:
            c = pde.count_laws(_linear2, {'U': (4, 2), 'V': (3, 2)}, inputs, method=method, progress=False)
        assert sat.call_count == 1 and (c.status, c.n_laws) == ('ok', 3), (method, c)

def test_one_in_place_cholesky():
    "The Gram paths factor M + σI by one function (`solvers._chol_in_place`), shift-invert and the preconditioner alike"
    src = (ROOT/'conslaw_nb'/'engine'/'solvers.py').read_text()
    assert src.count('cholesky_ex(') == 1 and src.count('_chol_in_place(G.M') == 2


def test_count_laws_takes_at_most_ten_parameters():
    ps = inspect.signature(pde.count_laws).parameters
    assert len(ps) <= 10, list(ps)
    assert [n for n, p in ps.items() if p.kind == p.KEYWORD_ONLY] == ['method', 'loss', 'seed', 'options', 'progress', 'device']

def test_one_name_per_solver():
    "METHODS, OPTIONS, the solvers' registry, `LawCount.method` and `solver['solver']` all use one name for each solver"
    assert set(pde.METHODS) == {'auto', 'dense'} | set(solvers.NULL_SOLVERS) == set(pde.OPTIONS)
    assert set(solvers.NULL_SOLVERS) == {'gram', 'lobpcg', 'shift-invert', 'lu'}
    for m in ('gram', 'lobpcg', 'lu'):
        c = pde.count_laws(_linear2, {'U': (4, 2), 'V': (3, 2)}, gaussian_inputs(3), method=m, progress=False)
        assert (c.method, c.solver['solver'], c.n_laws) == (m, m, 3), c
    with pytest.raises(ValueError, match="method='iterative' is now called 'lobpcg'"):
        pde.count_laws(_linear2, {'U': (4, 2), 'V': (3, 2)}, gaussian_inputs(3), method='iterative')

def test_options_one_object_per_method():
    "A dict or the method's options object; an unknown key refused with the valid ones; a knob as a keyword is a TypeError"
    args = (_linear2, {'U': (4, 2), 'V': (3, 2)}, gaussian_inputs(3))
    c0 = pde.count_laws(*args, method='dense', options=dict(patience=40))
    assert pde.count_laws(*args, method='dense', options=pde.CountOptions(patience=40)).dims_by_depth == c0.dims_by_depth
    with pytest.raises(ValueError, match=r"`options` has \['frob'\], which method='dense' does not take: its options are \['n_samples'"):
        pde.count_laws(*args, method='dense', options={'frob': 1})
    with pytest.raises(ValueError, match=r"max_iters: an option of method=\['auto', 'gram', 'lobpcg'\]"):
        pde.count_laws(*args, method='lu', options={'max_iters': 5})
    with pytest.raises(TypeError, match="unexpected keyword argument 'patience'"): pde.count_laws(*args, method='dense', patience=40)
    with pytest.raises(TypeError, match="unexpected keyword argument 'frob'"): pde.count_laws(*args, frob=1)
    assert pde.count_laws(*args).n_samples == pde.count_laws(*args, options=pde.LobpcgOptions()).n_samples   # the defaults: today's

def test_no_private_name_crosses_the_engine():
    "The engine's modules and the benchmark's import no private name of another conslaw_nb module"
    for m in ENGINE:
        for node in ast.walk(ast.parse((ROOT/'conslaw_nb'/f'{m}.py').read_text())):
            if isinstance(node, ast.ImportFrom) and node.level >= 1 and node.module:
                bad = [a.name for a in node.names if a.name.startswith('_') and not a.name.startswith('__')]
                assert not bad, f"conslaw_nb/{m}.py imports {bad} from .{node.module}"

def test_no_module_of_the_package_passes_700_lines_or_8_positional_parameters():
    "The done-when of the layout issue, for every module (the generated index aside), not only the engine's"
    for p in sorted((ROOT/'conslaw_nb').rglob('*.py')):
        if p.name == '_modidx.py': continue
        src = p.read_text()
        assert src.count('\n') <= 700, f"conslaw_nb/{p.name} has {src.count(chr(10))} lines: split a concept into its own notebook"
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert len(node.args.posonlyargs) + len(node.args.args) <= 8, f"{p.name}: {node.name} takes more than 8 positional parameters"

def test_public_functions_of_three_or_more_parameters_have_docments():
    "Every public function with three parameters or more says what each is, in fastcore's docments (a comment beside it)"
    import importlib
    from fastcore.docments import docments
    missing = []
    for p in sorted((ROOT/'conslaw_nb').rglob('*.py')):
        if p.name.startswith('_'): continue
        mod = importlib.import_module('conslaw_nb.' + '.'.join(p.relative_to(ROOT/'conslaw_nb').with_suffix('').parts))
        for name in getattr(mod, '__all__', []):
            fn = getattr(mod, name, None)
            if not (inspect.isfunction(fn) and fn.__module__ == mod.__name__): continue
            ps = [q for q in inspect.signature(fn).parameters.values() if q.kind not in (q.VAR_POSITIONAL, q.VAR_KEYWORD)]
            if len(ps) < 3: continue
            d = docments(fn)
            missing += [f"{p.stem}.{name}({q.name})" for q in ps if not d.get(q.name)]
    assert not missing, "no docment for: " + ', '.join(missing)
