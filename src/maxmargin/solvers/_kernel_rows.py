"""Compiled kernel rows and the bounded row cache shared by the compiled solvers.

The training data reaches compiled code as plain arrays (:class:`KernelData`):
``X`` dense (n, d) or, for CSR input, ``data, indices, indptr``; ``sqn`` the
squared row norms (RBF); ``code`` and ``kp = (gamma, coef0, degree)`` name the
kernel (see :mod:`maxmargin.kernels`).  For a precomputed or callable kernel
``X`` is the Gram matrix itself.

The cache (:class:`RowCache`) keeps whole or partial kernel rows keyed by the
data row, least recently used first out.  A *partial* row holds the values for
the active variables of the solver at the time it was computed; it stays valid
while the active set only shrinks (``epoch`` is bumped when it grows).
"""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
import scipy.sparse as sp
from numba import njit

from ..kernels import PRECOMPUTED, RBF, exp_nonpos, row_norms_sq

KernelData = namedtuple("KernelData", "code kp X data indices indptr sqn sparse work")


def kernel_data(X, kernel):
    """Arrays for the compiled solvers from training data and a Kernel."""
    code = kernel.code
    empty_f = np.zeros(1)
    empty_i = np.zeros(1, dtype=np.int32)
    if code == PRECOMPUTED:
        if kernel.name == "callable":
            G = kernel(X, X)
        else:
            G = X.toarray() if sp.issparse(X) else X
        G = np.ascontiguousarray(G, dtype=np.float64)
        return KernelData(code, np.zeros(3), G, empty_f, empty_i, empty_i, empty_f, False, empty_f)
    kp = np.array(kernel.params, dtype=np.float64)
    sqn = row_norms_sq(X) if code == RBF else np.zeros(X.shape[0])
    sqn = np.ascontiguousarray(sqn, dtype=np.float64)
    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=np.float64)
        X.sort_indices()
        return KernelData(
            code,
            kp,
            np.zeros((1, 1)),
            np.ascontiguousarray(X.data),
            np.ascontiguousarray(X.indices, dtype=np.int32),
            np.ascontiguousarray(X.indptr, dtype=np.int64),
            sqn,
            True,
            np.zeros(X.shape[1]),
        )
    X = np.ascontiguousarray(X, dtype=np.float64)
    return KernelData(code, kp, X, empty_f, empty_i, empty_i, sqn, False, empty_f)


@njit(cache=True, inline="always")
def kvalue(code, kp, dot, sqa, sqb):
    """Kernel value from a dot product (and squared norms for RBF)."""
    if code == 0:
        return dot
    if code == 1:
        return (kp[0] * dot + kp[1]) ** kp[2]
    if code == 2:
        d = sqa + sqb - 2.0 * dot
        if d < 0.0:
            d = 0.0
        return math.exp(-kp[0] * d)
    return math.tanh(kp[0] * dot + kp[1])


@njit(cache=True, fastmath={"reassoc", "contract"})
def dot(a, b):
    """a @ b for 1-D arrays, summed in vector lanes (the strict left-to-right sum
    of a plain loop cannot vectorise: 4-8x slower for a few hundred features)."""
    s = 0.0
    for f in range(a.shape[0]):
        s += a[f] * b[f]
    return s


@njit(cache=True)
def dots_to_kernel(code, kp, buf, sqa, sqn, targets):
    """In place: dot products ``buf[k]`` (of x_i with x_targets[k]) -> kernel values."""
    m = buf.shape[0]
    if code == 0:
        return
    if code == 2:
        g = kp[0]
        for k in range(m):
            d = sqa + sqn[targets[k]] - 2.0 * buf[k]
            buf[k] = -g * max(d, 0.0)
        exp_nonpos(buf, np.empty(m))
        return
    for k in range(m):
        buf[k] = kvalue(code, kp, buf[k], 0.0, 0.0)


@njit(cache=True)
def compute_row(code, kp, X, data, indices, indptr, sqn, sparse, work, i, targets, m, out):
    """``out[t] = K(x_i, x_t)`` for ``t`` in ``targets[:m]`` (data-row indices)."""
    if code == 4:
        for k in range(m):
            t = targets[k]
            out[t] = X[i, t]
        return
    buf = np.empty(m)
    tg = targets[:m]
    if sparse:
        for q in range(indptr[i], indptr[i + 1]):
            work[indices[q]] = data[q]
        for k in range(m):
            t = tg[k]
            s = 0.0
            for q in range(indptr[t], indptr[t + 1]):
                s += work[indices[q]] * data[q]
            buf[k] = s
        for q in range(indptr[i], indptr[i + 1]):
            work[indices[q]] = 0.0
    elif m == X.shape[0] and X.shape[1] >= 8:
        buf[:] = np.dot(X, X[i])
    else:
        xi = X[i]
        for k in range(m):
            buf[k] = dot(xi, X[tg[k]])
    dots_to_kernel(code, kp, buf, sqn[i], sqn, tg)
    for k in range(m):
        out[tg[k]] = buf[k]


@njit(cache=True)
def kernel_diag(code, kp, X, data, indices, indptr, sqn, sparse, n):
    out = np.empty(n)
    for i in range(n):
        if code == 4:
            out[i] = X[i, i]
        elif code == 2:
            out[i] = 1.0
        elif sparse:
            s = 0.0
            for q in range(indptr[i], indptr[i + 1]):
                s += data[q] * data[q]
            out[i] = kvalue(code, kp, s, 0.0, 0.0)
        else:
            s = 0.0
            for f in range(X.shape[1]):
                s += X[i, f] * X[i, f]
            out[i] = kvalue(code, kp, s, 0.0, 0.0)
    return out


class RowCache:
    """State arrays of the LRU kernel-row cache (used by compiled code).

    ``n_slots`` rows of length ``n_data``; at least two, so that the two rows of
    one SMO step can both be held.
    """

    def __init__(self, n_data, cache_size_mb):
        row_bytes = 8 * max(n_data, 1)
        n_slots = int(cache_size_mb * 1024 * 1024 // row_bytes)
        n_slots = max(2, min(n_slots, n_data))
        self.rows = np.empty((n_slots, n_data))
        self.slot_of = np.full(n_data, -1, dtype=np.int64)
        self.row_of = np.full(n_slots, -1, dtype=np.int64)
        self.stamp = np.zeros(n_slots, dtype=np.int64)
        self.full = np.zeros(n_slots, dtype=np.bool_)
        self.epoch_of = np.zeros(n_slots, dtype=np.int64)
        # [clock, epoch, hits, misses]
        self.counters = np.zeros(4, dtype=np.int64)

    def arrays(self):
        return (self.rows, self.slot_of, self.row_of, self.stamp, self.full, self.epoch_of, self.counters)


@njit(cache=True)
def get_row(kd_code, kp, X, data, indices, indptr, sqn, sparse, work,
            rows, slot_of, row_of, stamp, full, epoch_of, counters,
            i, need_full, act_data, m):
    """The cached kernel row of data row ``i``: whole if ``need_full`` else at least
    the entries of ``act_data[:m]`` (callers pass ``need_full`` when every variable
    is active)."""
    counters[0] += 1
    slot = slot_of[i]
    if slot >= 0:
        if full[slot] or (not need_full and epoch_of[slot] == counters[1]):
            stamp[slot] = counters[0]
            counters[2] += 1
            return rows[slot]
    else:
        # evict the least recently used slot
        best = 0
        best_stamp = stamp[0]
        for s in range(1, rows.shape[0]):
            if stamp[s] < best_stamp:
                best_stamp = stamp[s]
                best = s
        slot = best
        old = row_of[slot]
        if old >= 0:
            slot_of[old] = -1
        row_of[slot] = i
        slot_of[i] = slot
    counters[3] += 1
    out = rows[slot]
    n = rows.shape[1]
    if need_full:
        allrows = np.arange(n)
        compute_row(kd_code, kp, X, data, indices, indptr, sqn, sparse, work, i, allrows, n, out)
        full[slot] = True
    else:
        compute_row(kd_code, kp, X, data, indices, indptr, sqn, sparse, work, i, act_data, m, out)
        full[slot] = False
    epoch_of[slot] = counters[1]
    stamp[slot] = counters[0]
    return out
