r"""Which solver takes which problem: the solvers' own declarations, gathered.

Each solver module declares, next to its ``solve(problem, **options) -> Solution``,

``PROBLEMS``
    the kinds of problem it takes (:data:`PROBLEM_KINDS`);
``OPTIONS``
    the common options (:data:`COMMON_OPTIONS`) it reads; it is given only those;
``OWN_OPTIONS``
    options that mean something to it alone (``step`` for Frank-Wolfe, ...);
``TRAITS``
    ``'iterative'``: it stops at a tolerance and can be stopped by a callback (the
    hard margin bounds the box for it and watches its iterates);
    ``'libsvm-rho'``: its ``Solution.rho`` is LIBSVM's offset (the free-SV average);
    ``'gathered-rows'``: it reads the training rows fastest from one contiguous block (its
    kernel-row cache is keyed by data row, and a row over all of X is one BLAS product), so a
    strict subset of X's rows is gathered for it once (``X[rows]``, as LIBSVM does per
    one-vs-one pair); the others read the rows through the problem's ``index``;
    ``'linear-kernel'``: it takes a dual of the linear kernel only (the interior point, which works on
    the features themselves); ``'poly-kernel'``: with that, the polynomial kernel too (through its explicit
    features: the interior point).

A formulation (:mod:`maxmargin.formulations`) says which kinds of problem it can be
posed as; a (formulation, solver) pair is valid when they share a kind.  Nothing
else lists which solver goes with which formulation.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache

#: the kinds of problem a formulation builds and a solver takes
PROBLEM_KINDS = {
    "dual": "maxmargin.problem.DualProblem with one equality constraint y'a = delta "
    "(C-SVC 1-norm, hard and 2-norm margins, epsilon-SVR, one-class)",
    "csvc-dual": "the C-SVC dual as a DualProblem: one variable per data row, y'a = 0 (1-norm, hard, 2-norm)",
    "nu-dual": "maxmargin.problem.DualProblem with LIBSVM's two equality constraints (nu-SVC, nu-SVR)",
    "simplex": "maxmargin.solvers.frank_wolfe.SimplexProblem (the L2-SVM on the unit simplex, seed 000)",
    "primal-qp": "maxmargin.solvers.primal.PrimalProblem as a QP in (w, b, xi) (linear kernel)",
    "hinge": "maxmargin.solvers.primal.PrimalProblem as the unconstrained hinge-loss primal (linear kernel)",
    "zero-one": "maxmargin.solvers.primal.PrimalProblem with the 0/1 error (linear kernel)",
}
#: the traits a solver may declare (see the module docstring)
KNOWN_TRAITS = ("iterative", "libsvm-rho", "gathered-rows", "linear-kernel", "poly-kernel")
#: the kinds that live in the explicit feature space of the linear kernel
PRIMAL_KINDS = ("primal-qp", "hinge", "zero-one")
#: options every solver accepts (each reads those that mean something to it, per its OPTIONS)
COMMON_OPTIONS = (
    "tol",
    "max_iter",
    "shrinking",
    "cache_size",
    "callback",
    "callback_info",
    "time_limit",
    "verbose",
    "alpha0",
)
#: solver name -> module (in the order they are listed to users)
MODULES = {
    "smo": "smo",
    "batched": "batched",
    "divide": "divide",
    "ipm": "ipm",
    "qp": "qp",
    "frank-wolfe": "frank_wolfe",
    "primal-qp": "primal",
    "subgradient": "subgradient",
    "random-search": "random_search",
}


@dataclass(frozen=True)
class SolverSpec:
    """One solver's declaration (see the module docstring)."""

    name: str
    module: str
    problems: tuple
    options: tuple
    own_options: tuple
    traits: tuple

    @property
    def linear_only(self):
        """Whether it works in the explicit feature space of the linear kernel only."""
        return "linear-kernel" in self.traits or all(kind in PRIMAL_KINDS for kind in self.problems)

    def takes(self, kind):
        return kind in self.problems

    def has(self, trait):
        return trait in self.traits

    def solve(self, problem, **options):
        return importlib.import_module(f"maxmargin.solvers.{self.module}").solve(problem, **options)


@cache
def specs():
    """Every solver's :class:`SolverSpec`, by name."""
    out = {}
    for name, module in MODULES.items():
        mod = importlib.import_module(f"maxmargin.solvers.{module}")
        out[name] = SolverSpec(name, module, mod.PROBLEMS, mod.OPTIONS, mod.OWN_OPTIONS, mod.TRAITS)
    return out


def spec(name):
    """The :class:`SolverSpec` of solver ``name`` (KeyError for an unknown name)."""
    return specs()[name]


def split_options(solver, options, own_keys=()):
    """Split ``options`` into (those passed to ``solver``, those named in ``own_keys``).

    ``own_keys`` are the options the caller (a formulation) reads itself.  Common
    options the solver does not read are dropped; an option of another solver, or
    one nobody knows, raises ValueError naming it and what is accepted."""
    s = spec(solver)
    passed, mine = {}, {}
    for key, value in options.items():
        if key in own_keys:
            mine[key] = value
        elif key in s.own_options or key in s.options:
            passed[key] = value
        elif key in COMMON_OPTIONS:
            continue  # meaningless for this solver: ignored
        else:
            owners = [n for n, o in specs().items() if key in o.own_options]
            if owners:
                raise ValueError(
                    f"option {key!r} applies to solver {' / '.join(map(repr, owners))}, not to solver={solver!r}"
                )
            allowed = sorted(set(COMMON_OPTIONS) | set(own_keys) | set(s.own_options))
            raise ValueError(f"unknown option {key!r} for solver={solver!r}; accepted: {allowed}")
    return passed, mine
