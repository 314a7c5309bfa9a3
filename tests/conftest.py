"""Shared test helpers: an independent QP reference and a KKT checker."""

import warnings

import numpy as np
import pytest


def qp_reference(Q, p, y, upper, delta=0.0):
    """Solve min 1/2 a'Qa + p'a, y'a = delta, 0 <= a <= upper with Clarabel (via qpsolvers)."""
    qpsolvers = pytest.importorskip("qpsolvers")
    n = Q.shape[0]
    P = 0.5 * (Q + Q.T) + 1e-12 * np.eye(n)
    upper = np.broadcast_to(np.asarray(upper, dtype=float), (n,))
    ub = None if not np.isfinite(upper).any() else np.where(np.isfinite(upper), upper, 1e20)
    import scipy.sparse as sp

    A = sp.csc_matrix(y.reshape(1, -1).astype(float))
    b = np.array([float(delta)])
    a = None
    for solver, opts in (
        ("clarabel", dict(tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)),
        ("clarabel", dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)),
        ("cvxopt", dict(abstol=1e-11, reltol=1e-11, feastol=1e-11)),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            Pm = sp.csc_matrix(P) if solver == "clarabel" else P
            a = qpsolvers.solve_qp(
                Pm, p, A=A if solver == "clarabel" else A.toarray(), b=b, lb=np.zeros(n), ub=ub, solver=solver, **opts
            )
        if a is not None:
            break
    assert a is not None, "the reference QP solver failed"
    return a, float(0.5 * a @ Q @ a + p @ a)


def kkt_violation(Q, p, y, upper, alpha):
    """Maximal KKT violation max_{I_up} -y G - min_{I_low} -y G (LIBSVM's measure)."""
    G = Q @ alpha + p
    up = ((y > 0) & (alpha < upper)) | ((y < 0) & (alpha > 0))
    low = ((y > 0) & (alpha > 0)) | ((y < 0) & (alpha < upper))
    return float(np.max(-y[up] * G[up]) - np.min(-y[low] * G[low]))


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def seed_liblinear(seed=1):
    """LIBLINEAR shuffles with the C library's unseeded rand(): its result depends on every LIBLINEAR call
    made before in the process, so on which tests ran first.  Seeding rand() makes each call the same
    whatever ran before (Linux: liblinear's rand is the process's libc one)."""
    import ctypes

    try:
        ctypes.CDLL(None).srand(seed)
    except (OSError, AttributeError):  # pragma: no cover - no libc symbols: run unseeded
        pass
