r"""The formulations with one real-valued decision function besides classification:
'eps-svr' (SVR), 'nu-svr' (NuSVR) and 'one-class' (OneClassSVM), on the standard dual
(:mod:`maxmargin.problem`; the estimators' docstrings give the mathematics).

Their fits carry ``coef`` (:math:`\alpha - \alpha^*` for regression, :math:`\alpha` for
one-class) over the training rows and ``rho``: :math:`f(x) = \sum_i coef_iK(x_i, x) - \rho`.
"""

from __future__ import annotations

from ..problem import nu_svr_problem, one_class_problem, svr_problem
from .base import BinaryFit, Formulation, register


def _fit(sol, name, coef, rho, extra=None):
    return BinaryFit.from_solution(sol, rho, name, coef, extra=dict(sol.extra, **(extra or {})))


def _nu_offsets(problem, sol):
    """(rho, r) of a nu-variant solution: the solver's own, or from its gradient (QP)."""
    if "r" in sol.extra:
        return float(sol.rho), float(sol.extra["r"])
    from ..solvers.smo import compute_rho_nu

    return compute_rho_nu(problem.y, sol.grad, sol.alpha, problem.upper)


class EpsilonSVR(Formulation):
    r"""epsilon-SVR: ``2n`` variables :math:`(\alpha, \alpha^*)` sharing each point's kernel row."""

    name = "eps-svr"
    problems = ("dual",)
    params = ("epsilon",)

    def n_var(self, data):
        return 2 * data.n

    def build(self, kind, data, spec, params):
        return svr_problem(data.X, data.kernel, data.y, data.C, params.get("epsilon", 0.1), index=data.index)

    def finish(self, problem, sol, data, spec, params):
        m = data.n
        return _fit(sol, self.name, sol.alpha[:m] - sol.alpha[m:], sol.rho)


class NuRegression(Formulation):
    r"""nu-SVR: the tube half-width is found by the solver, :math:`\varepsilon = -r` (``extra['epsilon']``)."""

    name = "nu-svr"
    problems = ("nu-dual",)
    params = ("nu",)

    def n_var(self, data):
        return 2 * data.n

    def build(self, kind, data, spec, params):
        if "nu" not in params:
            raise ValueError("formulation 'nu-svr' needs the option nu")
        return nu_svr_problem(data.X, data.kernel, data.y, data.C, params["nu"], index=data.index)

    def finish(self, problem, sol, data, spec, params):
        m = data.n
        rho, r = _nu_offsets(problem, sol)
        return _fit(sol, self.name, sol.alpha[:m] - sol.alpha[m:], rho, {"r": r, "epsilon": -r})


class OneClass(Formulation):
    r"""One-class SVM: :math:`e^T\alpha = \nu\sum_iw_i`, :math:`0 \le \alpha_i \le w_i` (``C`` holds the weights)."""

    name = "one-class"
    problems = ("dual",)
    params = ("nu",)

    def build(self, kind, data, spec, params):
        if "nu" not in params:
            raise ValueError("formulation 'one-class' needs the option nu")
        return one_class_problem(data.X, data.kernel, params["nu"], data.C, index=data.index)

    def finish(self, problem, sol, data, spec, params):
        return _fit(sol, self.name, sol.alpha, sol.rho)


EPS_SVR = register(EpsilonSVR())
NU_SVR = register(NuRegression())
ONE_CLASS = register(OneClass())
