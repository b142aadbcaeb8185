"""The engine: how many laws any model `f(params, x)` has, whether given functions are laws, and the rank decisions both
rest on. Its modules, lowest first: `core` (parameters, inputs, tolerances, exact evaluation), `rank` (a rank decision and its
gap), `rows` (Jacobian and bracket rows), `regions` (piecewise-linear models), `solvers` (null spaces), `checks` (laws against
a model), `count` (`count_laws`), `problem` (a problem and its verdict), `symbolic` (exact checks with sympy), `flow`
(gradient flow and descent), `scales` (the matched scale a drift is divided by)."""
from .rank import RankDecision, AmbiguousRankError, rank_decision
from .checks import LawSet, LawCheck, check_laws, laws_rank
from .count import LawCount, CountOptions, count_laws
from .problem import Problem, Completeness, completeness
from .flow import gradient_flow, gradient_descent

__all__ = ['count_laws', 'LawCount', 'CountOptions', 'check_laws', 'LawCheck', 'LawSet', 'laws_rank', 'rank_decision', 'RankDecision',
           'AmbiguousRankError', 'Problem', 'Completeness', 'completeness', 'gradient_flow', 'gradient_descent']
