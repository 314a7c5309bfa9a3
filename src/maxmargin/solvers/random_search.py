r"""Random search on the regularised 0/1 error (seed 002, eq. 11) -- a demonstration.

.. math::

    \min_{w, b} \tfrac12 w\cdot w + \sum_i C_i\,\chi\big(y_i(w\cdot x_i + b) < 0\big)

(eq. 11 with the ``1/2`` every other formulation here uses, so that ``C`` weighs
one error against the same regulariser).  The notebook minimises it with
``NMinimize[..., Method -> "RandomSearch"]`` and concludes: the optimisation is
"much harder (as the objective function has always sub-gradient 0)" and,
"without promoting any margin maximization", generalisation suffers.  This
module exists to show exactly that, next to the hinge-loss formulations; it is
not a classifier to use.

Why it has no margin: for any :math:`(w, b)` with :math:`w \ne 0`, shrinking
both by a factor :math:`s \in (0, 1)` keeps every sign, hence the error count,
and lowers :math:`\tfrac12 w\cdot w`; the infimum is :math:`C\cdot\#\text{errors}`
approached as :math:`w \to 0`, and nothing in the objective prefers a hyperplane
far from the points over one that grazes them.  The geometric margin of the
result, :math:`\min_i y_i f(x_i)/\|w\|` (the notebook's ``trainZeroOneError``),
is therefore whatever the search happened to find, and is often negative.

The search (a plain version of Mathematica's "RandomSearch": random starting
points, then local improvement):

1. ``n_candidates`` points :math:`(w, b)` drawn uniformly from the box
   :math:`[-s, s]^{d+1}`, :math:`s = 1/\max_i\|x_i\|` (so that :math:`w\cdot x`
   is of order one); the best ``n_starts`` are kept.
2. From each, ``n_local`` rounds of Gaussian perturbations of ``batch`` points,
   radius halved whenever a round brings no improvement; the best point wins.

Everything is vectorised: one round costs one product of the data with a
``(d + 1) x batch`` matrix.  Deterministic for a given ``random_state``.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from .base import Watch
from .primal import PrimalProblem, PrimalSolution

#: What this solver takes (read by :mod:`maxmargin.solvers.registry`): the kinds of problem,
#: the common options it reads (the others are ignored), its own options, and its traits.
PROBLEMS = ("zero-one",)
OPTIONS = ("callback", "callback_info", "time_limit", "verbose")
OWN_OPTIONS = ("n_candidates", "n_starts", "n_local", "batch", "random_state")
TRAITS = ()


def _objectives(problem, W, B):
    """Objective of eq. (11) (scaled) for the columns of W (d, m) and biases B (m,)."""
    S = np.asarray(problem.X @ W)  # (n, m)
    S += B[None, :]
    errors = problem.y[:, None] * S < 0
    return 0.5 * np.einsum("ij,ij->j", W, W) + problem.C @ errors, errors.sum(axis=0)


def solve(
    problem: PrimalProblem,
    *,
    n_candidates=2000,
    n_starts=5,
    n_local=200,
    batch=64,
    random_state=0,
    callback=None,
    time_limit=None,
    verbose=False,
    callback_info=None,
    **ignored,
):
    """Random search for eq. (11); see the module docstring.  Options of the
    other solvers (``tol``, ``max_iter``, ...) are accepted and ignored."""
    if problem.formulation != "zero-one":
        raise ValueError("the random-search solver is for formulation 'zero-one' only")
    t0 = time.perf_counter()
    watch = Watch(callback, callback_info, time_limit)
    rng = np.random.default_rng(random_state)
    X = problem.X
    n, d = X.shape
    if sp.issparse(X):
        norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    else:
        norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    s = 1.0 / max(float(norms.max(initial=0.0)), 1e-12)

    # 1. global random sampling in the box
    vals, W_all, B_all = [], [], []
    for start in range(0, n_candidates, batch):
        m = min(batch, n_candidates - start)
        W = rng.uniform(-s, s, size=(d, m))
        B = rng.uniform(-1.0, 1.0, size=m)
        v, _ = _objectives(problem, W, B)
        vals.append(v)
        W_all.append(W)
        B_all.append(B)
    vals = np.concatenate(vals)
    W_all = np.hstack(W_all)
    B_all = np.concatenate(B_all)
    starts = np.argsort(vals, kind="stable")[:n_starts]

    # 2. local improvement from the best starting points
    best = (np.inf, None, 0.0)
    n_eval = n_candidates
    status = "converged"
    for k in starts:
        w, b, v = W_all[:, k].copy(), float(B_all[k]), float(vals[k])
        radius = s
        for _ in range(n_local):
            W = w[:, None] + rng.normal(scale=radius, size=(d, batch))
            B = b + rng.normal(scale=1.0 if radius >= s else radius / s, size=batch)
            vv, _ = _objectives(problem, W, B)
            n_eval += batch
            j = int(np.argmin(vv))
            if vv[j] < v:
                w, b, v = W[:, j].copy(), float(B[j]), float(vv[j])
            else:
                radius *= 0.5
                if radius < 1e-8 * s:
                    break
        if v < best[0]:
            best = (v, w, b)
        why = watch.check(n_eval, best[0], 0.0)
        if why is not None:
            status = why
            break
    v, w, b = best
    scores = problem.y * (np.asarray(X @ w).ravel() + b)
    n_err = int(np.sum(scores < 0))
    if verbose:
        print(f"[random-search] objective {v:.6g}, {n_err} training errors, {n_eval} evaluations")
    return PrimalSolution(
        alpha=None,
        rho=-b,
        objective=float(v),
        n_iter=int(n_eval),
        violation=0.0,
        converged=status == "converged",
        grad=None,
        gap=None,
        status=status,
        extra={
            "primal_objective": float(v),
            "n_errors": n_err,
            "n_evaluations": int(n_eval),
            "support": np.flatnonzero(scores <= 1.0),
            "time": time.perf_counter() - t0,
        },
        w=w,
        intercept=b,
    )
