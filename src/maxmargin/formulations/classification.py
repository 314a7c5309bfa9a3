r"""The classification formulations: 'l1', 'hard', 'l2', 'l2-simplex', 'zero-one' (SVC's
``formulation``) and 'nu-svc' (NuSVC).  The mathematics is in :mod:`maxmargin.formulations`.
"""

from __future__ import annotations

import numpy as np

from ..problem import csvc_problem, nu_svc_problem
from .base import BinaryFit, Formulation, _is_linear, dual_scores, register
from .margins import (
    BIAS_RULES,
    _hard_scale,
    _hull_bound_below,
    _min_margin,
    _not_separable,
    bias_from_dual,
    geometric_margin,
    linearly_separable,
    margin_from_definition,
)


def _fit_from(sol, alpha, rho, w, extra, margin, name, coef):
    return BinaryFit.from_solution(sol, rho, name, coef, alpha=alpha, w=w, extra=extra, margin=margin)


class _Classification(Formulation):
    """What the C-SVC formulations share: the bias option, the primal route and its finish."""

    params = ("bias", "min_margin")
    default_bias = None

    def __init__(self, name, problems, default_bias):
        self.name = name
        self.problems = problems
        self.default_bias = default_bias

    def check_params(self, params, kind):
        rule = params.get("bias")
        if rule is not None and rule not in BIAS_RULES:
            raise ValueError(f"bias must be one of {BIAS_RULES} or None, got {rule!r}")
        if rule is not None and kind not in ("dual", "csvc-dual", "simplex"):
            raise ValueError(f"bias={rule!r} applies to the dual solvers; a primal solver finds b itself")
        if self.name == "l2-simplex" and rule not in (None, "simplex"):
            raise ValueError("formulation='l2-simplex' has its own bias b = -y'mu (seed 000, eq. 7): use bias=None")
        if self.name != "l2-simplex" and rule == "simplex":
            raise ValueError("bias='simplex' (b = -y'mu) belongs to formulation='l2-simplex'")

    # ------------------------------------------------------------------ primal
    def _build_primal(self, data):
        from ..solvers.primal import PrimalProblem

        return PrimalProblem(data.subset(), data.y, data.C, self.name)

    def _solve_primal(self, problem, spec, passed):
        from ..solvers import qp

        try:
            return spec.solve(problem, **passed)
        except qp.QPInfeasibleError as exc:
            if self.name == "hard":
                raise _not_separable("the primal QP (eq. 7) is infeasible") from exc
            raise

    def _finish_primal(self, problem, sol, data, params):
        y, C = data.y, data.C
        w = sol.w
        w_norm = float(np.sqrt(w @ w))
        decision = problem.scores(w, sol.intercept)
        if self.name == "hard":
            from ..kernels import LinearKernel

            gamma_min = _min_margin(problem.X, LinearKernel(), params.get("min_margin"))
            if w_norm > 1.0 / gamma_min:
                raise _not_separable(f"||w|| > 1/min_margin: margin < {gamma_min:.3g}")
        margin = geometric_margin(self.name, sol.alpha, y, C, w_norm, decision=decision)
        extra = dict(sol.extra)
        extra.update(margin=margin, w_norm=w_norm, bias_rule="primal", train_decision=decision)
        coef = None if sol.alpha is None else sol.alpha * y
        return _fit_from(sol, sol.alpha, sol.rho, w, extra, margin, self.name, coef)


class MarginDual(_Classification):
    r"""'l1', 'hard' and 'l2': the standard dual (eqs. 21, 17, 23) or their primal QPs."""

    def build(self, kind, data, spec, params):
        if kind not in ("dual", "csvc-dual"):
            return self._build_primal(data)
        X, y, C, kernel, index = data.X, data.y, data.C, data.kernel, data.index
        if self.name == "l1":
            return csvc_problem(X, kernel, y, C, index=index)
        if self.name == "l2":
            return csvc_problem(X, kernel, y, C, shift=1.0 / C, hard=True, index=index)
        if spec.has("iterative"):  # 'hard' for a decomposition solver: the box of "Separability"
            if _is_linear(kernel) and not linearly_separable(data.subset(), y):
                raise _not_separable("no (w, b) satisfies y_i (w . x_i + b) >= 1: the separability LP is infeasible")
            return csvc_problem(X, kernel, y, np.full(y.shape, self._bound(data, params)), index=index)
        return csvc_problem(X, kernel, y, C, hard=True, index=index)

    def _hard_limits(self, data, params):
        """(gamma_min, bound B = 1/gamma_min^2, R^2) of the hard margin on these rows
        (``params`` is this fit's own dict: computed once per fit)."""
        if "_hard_limits" not in params:
            sub = data.subset()
            gamma_min = _min_margin(sub, data.kernel, params.get("min_margin"))
            params["_hard_limits"] = (gamma_min, 1.0 / gamma_min**2, _hard_scale(sub, data.kernel))
        return params["_hard_limits"]

    def _bound(self, data, params):
        return self._hard_limits(data, params)[1]

    def solve(self, problem, spec, passed, data, params):
        if problem.__class__.__name__ == "PrimalProblem":
            return self._solve_primal(problem, spec, passed)
        if self.name == "hard" and spec.has("iterative"):
            gamma_min, bound, r2 = self._hard_limits(data, params)
            user_cb = passed.get("callback")
            params["_stopped_unbounded"] = False

            def guard(info):
                if info.get("objective", 0.0) < -0.5 * bound or _hull_bound_below(info, gamma_min, r2):
                    params["_stopped_unbounded"] = True
                    return False
                return None if user_cb is None else user_cb(info)

            passed = dict(passed, callback=guard)
            if passed.get("callback_info") is None:
                passed.pop("callback_info", None)
            return spec.solve(problem, **passed)
        if self.name == "hard" and spec.name == "qp":
            from ..solvers import qp

            try:
                return spec.solve(problem, **passed)
            except qp.QPUnboundedError as exc:
                raise _not_separable("the dual QP is unbounded") from exc
        return spec.solve(problem, **passed)

    def finish(self, problem, sol, data, spec, params):
        if problem.__class__.__name__ == "PrimalProblem":
            return self._finish_primal(problem, sol, data, params)
        y, C = data.y, data.C
        alpha = sol.alpha
        s = dual_scores(problem, alpha, sol.grad)
        rule = params.get("bias") or self.default_bias
        if rule == "libsvm" and spec.has("libsvm-rho"):
            rho = float(sol.rho)
        else:
            rho = bias_from_dual(rule, alpha, y, s, problem.upper, problem.shift)
        decision = s - rho
        w_norm = float(np.sqrt(max(float((alpha * y) @ s), 0.0)))
        if self.name == "hard":
            self._check_separable(alpha, y * decision, sol, spec, data, params)
        margin = geometric_margin(self.name, alpha, y, C, w_norm, decision=decision)
        extra = dict(sol.extra)
        extra.update(margin=margin, w_norm=w_norm, bias_rule=rule, train_decision=decision)
        xi = np.maximum(0.0, 1.0 - y * decision)
        if self.name == "l1":
            primal = 0.5 * w_norm**2 + float(C @ xi)
        elif self.name == "l2":
            primal = 0.5 * w_norm**2 + 0.5 * float(C @ (xi * xi))
        else:
            primal = 0.5 * w_norm**2
        extra["primal_objective"] = primal
        if self.name != "hard":
            extra["duality_gap"] = primal + float(sol.objective)
        coef = alpha * y
        w = data.linear_w(coef) if _is_linear(data.kernel) else None
        return _fit_from(sol, alpha, rho, w, extra, margin, self.name, coef)

    def _check_separable(self, alpha, funct, sol, spec, data, params):
        iterative = spec.has("iterative")
        if params.get("_stopped_unbounded"):
            gamma_min = self._hard_limits(data, params)[0]
            raise _not_separable(f"the solver's multipliers prove margin < min_margin = {gamma_min:.3g}")
        gamma_min, bound, _ = self._hard_limits(data, params)
        if iterative and np.any(alpha >= bound * (1 - 1e-9)):
            raise _not_separable(f"a multiplier reached its bound 1/min_margin^2: margin < {gamma_min:.3g}")
        if alpha.sum() > bound:
            raise _not_separable(f"sum(alpha) = ||w||^2 > 1/min_margin^2: margin < {gamma_min:.3g}")
        limit = 0.5 if iterative else 1.0 - 1e-4
        if sol.converged and funct.size and funct.min() < limit:
            raise _not_separable(f"after convergence a training point has y f(x) = {funct.min():.3g} < 1")


class SimplexL2(_Classification):
    r"""'l2-simplex': seed 000's L2-SVM over the unit simplex (eq. 22), bias :math:`b = -y^T\mu`."""

    def auto(self, n_var):
        return "frank-wolfe", {"step": "pairwise"}

    def build(self, kind, data, spec, params):
        if kind != "simplex":
            return self._build_primal(data)
        from ..solvers.frank_wolfe import SimplexProblem

        return SimplexProblem(data.subset(), data.kernel, data.y, data.C)

    def solve(self, problem, spec, passed, data, params):
        if problem.__class__.__name__ == "PrimalProblem":
            return self._solve_primal(problem, spec, passed)
        return spec.solve(problem, **passed)

    def finish(self, problem, sol, data, spec, params):
        if problem.__class__.__name__ == "PrimalProblem":
            return self._finish_primal(problem, sol, data, params)
        y, C = data.y, data.C
        mu = sol.alpha
        grad = sol.grad if sol.grad is not None else problem.h_times(mu, np.flatnonzero(mu))
        s = y * (grad - mu / problem.C) - float(y @ mu)
        rho = problem.rho(mu)
        decision = s - rho
        w_norm = float(np.sqrt(max(float((mu * y) @ s), 0.0)))
        margin = geometric_margin(self.name, mu, y, C, w_norm, decision=decision)
        extra = dict(sol.extra)
        extra.update(margin=margin, w_norm=w_norm, bias_rule="simplex", train_decision=decision)
        coef = mu * y
        w = data.linear_w(coef) if _is_linear(data.kernel) else None
        return _fit_from(sol, mu, rho, w, extra, margin, self.name, coef)


class ZeroOne(_Classification):
    r"""'zero-one': :math:`\min\tfrac12 w\cdot w + \sum_iC_i\chi(y_if(x_i) < 0)` (eq. 11) by random search."""

    def auto(self, n_var):
        return "random-search", {}

    def build(self, kind, data, spec, params):
        return self._build_primal(data)

    def solve(self, problem, spec, passed, data, params):
        return spec.solve(problem, **passed)

    def finish(self, problem, sol, data, spec, params):
        return self._finish_primal(problem, sol, data, params)


def nu_no_margin_message(problem, r, nu):
    """Why a nu-SVC problem has no margin (r <= 0, w = 0), and what can help."""
    y = problem.y
    text = (
        f"nu-SVC found no margin (r = {r:.3g}) for nu={nu!r}: the two classes' reduced convex hulls in "
        "feature space overlap, so w = 0 and the decision function would be constant"
    )
    n = y.shape[0]
    if n <= 4000 and problem.kernel.code != 4:
        w = np.asarray(problem.upper, dtype=np.float64)  # the sample (times class) weights
        c = np.where(y > 0, w / max(w[y > 0].sum(), 1e-300), -w / max(w[y < 0].sum(), 1e-300))
        X = problem.X[problem.index] if getattr(problem, "index", None) is not None else problem.X
        with np.errstate(all="ignore"):
            dist2 = float(c @ problem.kernel.mmv(X, X, c))
        scale = float(np.max(np.abs(problem.kernel.diag(X)), initial=0.0))
        if not dist2 > 1e-12 * max(scale, 1e-300):
            return (
                text + ". The two classes have the same mean in feature space (for example constant features "
                "or identical points with different labels), so no nu gives a margin: use C-SVC "
                "(SVC; --type c-svc), another kernel, or features that tell the classes apart"
            )
    return (
        text + ". A larger nu (up to the feasibility limit 2 min(n_a, n_b) / (n_a + n_b)) shrinks the hulls "
        "towards the class means; C-SVC (SVC; --type c-svc) fits such data with any C"
    )


class NuClassification(Formulation):
    r"""'nu-svc': LIBSVM's scaled nu-SVC (:func:`maxmargin.problem.nu_svc_problem`); the
    solution divided by the nu-solver's :math:`r` is the C-SVC solution with :math:`C = 1/r`."""

    name = "nu-svc"
    problems = ("nu-dual",)
    params = ("nu",)

    def build(self, kind, data, spec, params):
        if "nu" not in params:
            raise ValueError("formulation 'nu-svc' needs the option nu")
        return nu_svc_problem(data.X, data.kernel, data.y, params["nu"], data.C, index=data.index)

    def finish(self, problem, sol, data, spec, params, details=True):
        return self.rescale(problem, sol, params["nu"], spec, details=details, data=data)

    def rescale(self, problem, sol, nu, spec, details=True, data=None):
        """The C-SVC fit (:math:`\\alpha/r`, :math:`\\rho/r`) of a nu-SVC solution."""
        from ..solvers.smo import compute_rho_nu

        y = problem.y
        if "r" in sol.extra:
            rho_s, r = float(sol.rho), float(sol.extra["r"])
        else:  # a solver without LIBSVM's two offsets (the QP): from its gradient
            rho_s, r = compute_rho_nu(y, sol.grad, sol.alpha, problem.upper)
        if not r > 0:
            raise ValueError(nu_no_margin_message(problem, r, nu))
        alpha = sol.alpha / r
        rho = rho_s / r
        obj = sol.objective / r / r  # r * r may underflow for tiny kernel values
        fit = BinaryFit(
            alpha=alpha,
            rho=float(rho),
            objective=float(obj),
            n_iter=int(sol.n_iter),
            violation=float(sol.violation),
            converged=bool(sol.converged),
            status=sol.status,
            extra=dict(sol.extra, r=r),
            formulation="nu",
            solver=spec.name,
            coef=alpha * y,
        )
        if details:
            s_train = y * (sol.grad - problem.p) / r  # sum_j alpha_j y_j K_ij at the training rows
            decision = s_train - rho
            w_norm = float(np.sqrt(max(2.0 * obj, 0.0)))
            margin = margin_from_definition(w_norm, y, decision) if w_norm > 0 else np.inf
            if getattr(problem.kernel, "name", "") == "linear":
                fit.w = data.linear_w(alpha * y) if data is not None else None
            fit.margin = margin
            fit.extra.update(w_norm=w_norm, margin=margin, train_decision=decision)
        return fit


L1 = register(MarginDual("l1", ("dual", "csvc-dual", "primal-qp", "hinge"), "libsvm"))
HARD = register(MarginDual("hard", ("dual", "csvc-dual", "primal-qp"), "notebook"))
L2 = register(MarginDual("l2", ("dual", "csvc-dual", "primal-qp"), "notebook"))
L2_SIMPLEX = register(SimplexL2("l2-simplex", ("simplex", "primal-qp"), "simplex"))
ZERO_ONE = register(ZeroOne("zero-one", ("zero-one",), None))
NU_SVC = register(NuClassification())
#: the formulations of SVC's ``formulation`` parameter
CLASSIFIERS = ("l1", "hard", "l2", "l2-simplex", "zero-one")
#: their default offset rules
DEFAULT_BIAS = {f: REG.default_bias for f, REG in (("hard", HARD), ("l2", L2), ("l1", L1), ("l2-simplex", L2_SIMPLEX))}
