"""The engine split (issue 38, item 1): pde re-exports what moved to rows, regions, solvers and checks, so every
`from conslaw_nb.pde import NAME` of before still works; no engine module passes 700 lines or 8 positional parameters
a function; and the saturation loop is one function, used by the dense path and by the paths past it alike."""
import ast, inspect
from pathlib import Path
from unittest import mock
import pytest, torch
from conslaw_nb import pde, rows, regions, solvers, checks
from conslaw_nb.core import gaussian_inputs

ROOT = Path(__file__).resolve().parents[1]
ENGINE = ('pde', 'rows', 'regions', 'solvers', 'checks')
MOVED = {rows: ['jacobian_rows', 'bracket_terms', 'bracket_scale', 'bracket_rows', 'bracket_fd_error', 'LOSSES', 'output_projector',
                '_bracket_stack', '_output_basis', '_THETA_SCALE_FLOOR'],
         regions: ['piecewise_ops', 'good_turing', '_Regions', '_PiecewiseProbe', '_region_ids'],
         solvers: ['Span', 'JACOBI_MAX', 'SHIFT_INVERT_SIGMA', 'SHIFT_INVERT_SETTLE', 'LU_SETTLE', 'LU_STEPS', '_Ambiguous', '_Gram',
                   '_Complement', '_iterative_span', '_tri_solve', '_hartley_mix', '_random_mix', '_smooth', '_lu_perm'],
         checks: ['law_gradients', 'LawCheck', 'law_norms', 'check_laws', 'laws_rank', '_law_fn', '_n_args', '_check_law_fn',
                  '_check_model_arg', '_check_order', '_CHECK_BUDGET']}

@pytest.mark.parametrize('mod', list(MOVED), ids=lambda m: m.__name__.split('.')[-1])
def test_pde_reexports_what_moved(mod):
    for name in MOVED[mod]: assert getattr(pde, name) is getattr(mod, name), f"pde.{name} is not {mod.__name__}.{name}"

def test_old_public_names_still_star_exported():
    old = ['SPAN_RETRIES', 'LOSSES', 'METHODS', 'JACOBI_MAX', 'SHIFT_INVERT_SIGMA', 'SHIFT_INVERT_SETTLE', 'LU_SETTLE', 'LU_STEPS',
           'jacobian_rows', 'bracket_terms', 'bracket_scale', 'bracket_rows', 'Span', 'LawCount', 'bracket_fd_error', 'piecewise_ops',
           'good_turing', 'output_projector', 'count_laws', 'law_gradients', 'LawCheck', 'law_norms', 'check_laws', 'linear_head',
           'laws_rank', 'Completeness', 'completeness', 'Problem', 'sym_orthogonality', 'sym_is_law', 'gradient_flow', 'gradient_descent']
    assert set(old) <= set(pde.__all__), sorted(set(old) - set(pde.__all__))

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
    src = (ROOT/'conslaw_nb'/'solvers.py').read_text()
    assert src.count('cholesky_ex(') == 1 and src.count('_chol_in_place(G.M') == 2
