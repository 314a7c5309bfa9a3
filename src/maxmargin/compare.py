r"""Train several (formulation, solver) pairs on the same data and compare them.

This is what the notebook's experiments do (seed 002: ``runMaxMarginExperiment``
and ``runSVMExperiment`` report training error, test error and margin for each
classifier).  :func:`compare` fits each pair through :class:`maxmargin.SVC` and
returns one row per pair:

=============  ===============================================================
column         meaning
=============  ===============================================================
formulation    see :mod:`maxmargin.formulations`
solver         idem; solver options (e.g. ``step=pairwise``) follow in brackets
objective      the solver's objective: the dual minimum for l1 / hard / l2
               (primal solvers report ``-P(w, b)``, equal at the optimum),
               ``1/2 mu'H mu`` for l2-simplex, ``1/2 w.w + C #errors`` for
               zero-one -- comparable within a formulation, not across
margin         geometric margin by the formulation's formula (negative: some
               training point is on the wrong side)
n_sv           number of support vectors (points with y f(x) <= 1 for the
               primal-only subgradient and random-search)
train_err      training error
test_err       test error (when test data is given)
time_s         wall-clock seconds of the fit
n_iter         solver iterations
status         'ok', 'not converged (...)', 'not separable', 'refused (...)',
               'skipped (...)' or 'error (...)'
=============  ===============================================================

For multi-class data the objective is summed and the margin is the smallest
over the one-vs-one subproblems.

Command line (LIBSVM / svmlight files, ``.xz`` handled)::

    python -m maxmargin.compare --data ../shared/data/a9a.xz --test ../shared/data/a9a.t.xz \
        --n-train 5000 --n-features 123 --kernel linear --C 1
"""

from __future__ import annotations

import argparse
import lzma
import sys
import time
import warnings

import numpy as np

from . import formulations as F

#: every valid pair with its default options, plus the other Frank-Wolfe steps
DEFAULT_PAIRS = (
    ("l1", "smo"),
    ("l1", "qp"),
    ("l1", "primal-qp"),
    ("l1", "subgradient"),
    ("hard", "smo"),
    ("hard", "qp"),
    ("hard", "primal-qp"),
    ("l2", "smo"),
    ("l2", "qp"),
    ("l2", "primal-qp"),
    ("l2-simplex", "qp"),
    ("l2-simplex", "primal-qp"),
    ("l2-simplex", "frank-wolfe", {"step": "2/(t+2)"}),
    ("l2-simplex", "frank-wolfe", {"step": "line-search"}),
    ("l2-simplex", "frank-wolfe", {"step": "away"}),
    ("l2-simplex", "frank-wolfe", {"step": "pairwise"}),
    ("zero-one", "random-search"),
)

COLUMNS = (
    "formulation",
    "solver",
    "objective",
    "margin",
    "n_sv",
    "train_err",
    "test_err",
    "time_s",
    "n_iter",
    "status",
)


class _BinaryModel:
    """A minimal binary classifier over :func:`maxmargin.formulations.fit_binary`.

    Used for pairs with solver options when :class:`maxmargin.SVC` has no
    ``solver_options`` parameter (or is not available).
    """

    def __init__(
        self,
        formulation,
        solver,
        solver_options=None,
        C=1.0,
        kernel="rbf",
        gamma="scale",
        degree=3,
        coef0=0.0,
        sigma=None,
        tol=1e-3,
        max_iter=-1,
        **ignored,
    ):
        self.formulation, self.solver = formulation, solver
        self.solver_options = dict(solver_options or {})
        self.C, self.kernel, self.gamma, self.degree, self.coef0, self.sigma = C, kernel, gamma, degree, coef0, sigma
        self.tol, self.max_iter = tol, max_iter

    def fit(self, X, y):
        from .kernels import make_kernel

        self.classes_ = np.unique(y)
        if self.classes_.shape[0] != 2:
            raise ValueError("the fallback comparison model handles binary problems only")
        ypm = np.where(y == self.classes_[1], 1.0, -1.0)
        self._ypm = ypm
        self._kernel = make_kernel(self.kernel, self.gamma, self.degree, self.coef0, X=X, sigma=self.sigma)
        fit = F.fit_binary(
            X,
            ypm,
            self.C,
            self._kernel,
            self.formulation,
            self.solver,
            tol=self.tol,
            max_iter=self.max_iter,
            **self.solver_options,
        )
        self._fit = fit
        self._X = X
        self.objective_ = np.array([fit.objective])
        self.margin_ = np.array([fit.margin])
        self.n_iter_ = np.array([fit.n_iter])
        self.fit_status_ = 0 if fit.converged else 1
        if fit.alpha is not None:
            self.support_ = np.flatnonzero(fit.alpha > 0)
        else:
            self.support_ = np.asarray(fit.extra.get("support", []))
        return self

    def decision_function(self, X):
        fit = self._fit
        if fit.w is not None and self._kernel.name == "linear":
            return np.asarray(X @ fit.w).ravel() - fit.rho
        sv = np.flatnonzero(fit.alpha)
        return self._kernel(X, self._X[sv]) @ (fit.alpha[sv] * self._ypm[sv]) - fit.rho

    def predict(self, X):
        return np.where(self.decision_function(X) >= 0, self.classes_[1], self.classes_[0])


def _make_model(formulation, solver, options, params):
    """SVC(formulation, solver, ...) when it can take the options, else the fallback model."""
    try:
        from . import SVC
    except ImportError:  # pragma: no cover - the estimator is not there
        SVC = None
    if SVC is not None:
        accepts = "solver_options" in SVC().get_params()
        if accepts:
            return SVC(formulation=formulation, solver=solver, solver_options=dict(options), **params)
        if not options:
            return SVC(formulation=formulation, solver=solver, **params)
    return _BinaryModel(formulation, solver, solver_options=options, **params)


def _label(solver, options):
    if not options:
        return solver
    return solver + "[" + ",".join(f"{k}={v}" for k, v in options.items()) + "]"


def compare(X, y, X_test=None, y_test=None, pairs=None, *, print_table=True, file=None, **params):
    """Fit each (formulation, solver[, options]) pair on ``X, y`` and tabulate the results.

    Parameters
    ----------
    X, y : training data (dense or CSR) and labels
    X_test, y_test : optional test data
    pairs : iterable of ``(formulation, solver)`` or ``(formulation, solver, options_dict)``;
        default :data:`DEFAULT_PAIRS`
    print_table : print the table (to ``file``, default stdout)
    params : passed to every :class:`maxmargin.SVC` (``C``, ``kernel``, ``gamma``,
        ``tol``, ``max_iter``, ...)

    Returns
    -------
    list of dict, one per pair, with the keys of :data:`COLUMNS`.
    """
    from .solvers.qp import QPTooLargeError

    rows = []
    kernel = params.get("kernel", "rbf")
    for pair in DEFAULT_PAIRS if pairs is None else pairs:
        formulation, solver = pair[0], pair[1]
        options = dict(pair[2]) if len(pair) > 2 and pair[2] else {}
        row = dict.fromkeys(COLUMNS, np.nan)
        row.update(formulation=formulation, solver=_label(solver, options), n_sv=-1, n_iter=-1)
        if solver in F.LINEAR_ONLY and kernel != "linear":
            row["status"] = "skipped (linear kernel only)"
            rows.append(row)
            continue
        try:
            F.check_pair(formulation, solver)
            model = _make_model(formulation, solver, options, params)
            t0 = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                model.fit(X, y)
            row["time_s"] = time.perf_counter() - t0
            row["objective"] = float(np.sum(model.objective_))
            row["margin"] = float(np.min(model.margin_))
            row["n_sv"] = int(len(model.support_))
            if row["n_sv"] == 0 and solver in ("subgradient", "random-search") and len(model.classes_) == 2:
                # no dual variables: count the points a dual solution would need, y f(x) <= 1
                ypm = np.where(y == model.classes_[1], 1.0, -1.0)
                row["n_sv"] = int(np.sum(ypm * model.decision_function(X) <= 1.0 + 1e-9))
            row["n_iter"] = int(np.sum(model.n_iter_))
            row["train_err"] = float(np.mean(model.predict(X) != y))
            if X_test is not None and y_test is not None:
                row["test_err"] = float(np.mean(model.predict(X_test) != y_test))
            conv = [str(w.message) for w in caught if "ConvergenceWarning" in type(w.message).__name__]
            row["status"] = "ok" if getattr(model, "fit_status_", 0) == 0 and not conv else "not converged"
        except F.NotSeparableError:
            row["status"] = "not separable"
        except QPTooLargeError as exc:
            row["status"] = f"refused (n={exc.n} > {exc.limit})"
        except Exception as exc:  # keep comparing the other pairs
            row["status"] = f"error ({type(exc).__name__}: {exc})"
        rows.append(row)
    if print_table:
        print(format_table(rows), file=file or sys.stdout)
    return rows


def format_table(rows):
    """The rows of :func:`compare` as a fixed-width text table."""
    head = ("formulation", "solver", "objective", "margin", "#SV", "train err", "test err", "time s", "iter", "status")
    lines = []
    for r in rows:

        def num(v, fmt):
            return "" if v is None or (isinstance(v, float) and np.isnan(v)) else format(v, fmt)

        lines.append(
            (
                r["formulation"],
                r["solver"],
                num(r["objective"], ".6g"),
                num(r["margin"], ".4g"),
                "" if r["n_sv"] is None or r["n_sv"] < 0 else str(r["n_sv"]),
                num(r["train_err"], ".4f"),
                num(r["test_err"], ".4f"),
                num(r["time_s"], ".2f"),
                "" if r["n_iter"] < 0 else str(r["n_iter"]),
                str(r["status"]),
            )
        )
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(head)]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths)), "  ".join("-" * w for w in widths)]
    for line in lines:
        out.append("  ".join(c.rjust(w) if 2 <= i <= 8 else c.ljust(w) for i, (c, w) in enumerate(zip(line, widths))))
    return "\n".join(out)


def load_svmlight(path, n_features=None, n_rows=None):
    """Load a LIBSVM/svmlight file (``.xz`` decompressed on the fly); the first ``n_rows`` rows."""
    from sklearn.datasets import load_svmlight_file

    opener = lzma.open if str(path).endswith(".xz") else open
    with opener(path, "rb") as fh:
        if n_rows is not None:
            import io

            data = b"".join(line for _, line in zip(range(n_rows), fh))
            fh = io.BytesIO(data)
        X, y = load_svmlight_file(fh, n_features=n_features)
    return X.tocsr(), y


def _parse_pairs(text):
    """'l1:smo,l2-simplex:frank-wolfe:step=away' -> [('l1', 'smo', {}), ...]."""
    pairs = []
    for item in text.split(","):
        parts = item.strip().split(":")
        if len(parts) < 2:
            raise argparse.ArgumentTypeError(f"a pair is formulation:solver[:key=value...], got {item!r}")
        opts = {}
        for kv in parts[2:]:
            k, _, v = kv.partition("=")
            try:
                v = int(v)
            except ValueError:
                try:
                    v = float(v)
                except ValueError:
                    pass
            opts[k] = v
        pairs.append((parts[0], parts[1], opts))
    return pairs


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="python -m maxmargin.compare",
        description="Train several (formulation, solver) pairs and print a comparison table.",
    )
    ap.add_argument("--data", required=True, help="training file (LIBSVM/svmlight, .xz allowed)")
    ap.add_argument("--test", help="test file (same format)")
    ap.add_argument("--n-train", type=int, default=None, help="use the first N training rows")
    ap.add_argument("--n-test", type=int, default=None, help="use the first N test rows")
    ap.add_argument("--n-features", type=int, default=None)
    ap.add_argument("--kernel", default="linear")
    ap.add_argument("--C", type=float, default=1.0)
    ap.add_argument("--gamma", default="scale")
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--max-iter", type=int, default=-1)
    ap.add_argument(
        "--pairs", type=_parse_pairs, default=None, help="comma-separated formulation:solver[:key=value] (default: all)"
    )
    args = ap.parse_args(argv)
    X, y = load_svmlight(args.data, args.n_features, args.n_train)
    Xt = yt = None
    if args.test:
        Xt, yt = load_svmlight(args.test, X.shape[1], args.n_test)
    gamma = args.gamma
    try:
        gamma = float(gamma)
    except ValueError:
        pass
    print(
        f"training: {X.shape[0]} x {X.shape[1]}"
        + (f", test: {Xt.shape[0]}" if Xt is not None else "")
        + f"; kernel={args.kernel}, C={args.C}, tol={args.tol}"
    )
    compare(
        X, y, Xt, yt, pairs=args.pairs, kernel=args.kernel, C=args.C, gamma=gamma, tol=args.tol, max_iter=args.max_iter
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
