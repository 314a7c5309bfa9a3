"""One-vs-one decision values of a many-class model, their votes and one-vs-rest scores, row by row (compiled).

A model of k classes has k(k-1)/2 one-vs-one decision functions.  For pair (a, b), a < b (LIBSVM's order),

    f_ab(x) = sum_{i in class a} dual_coef_[b-1, i] K(x_i, x) + sum_{i in class b} dual_coef_[a, i] K(x_i, x) + b_ab,

so :meth:`maxmargin.svm.BaseSVMClassifier._ovo_decision` first forms, per class a, the products
``M[a][:, c] = K(X, SV_a) @ dual_coef_[c, SV_a]`` (one matrix product per class), and pair (a, b) is
``M[a][:, b-1] + M[b][:, a] + b_ab``.  With 300 classes a row has 44,850 pair values: forming them by NumPy
gathers and voting through ``np.bincount`` took ~160 ms of every 190 ms block of 93 rows (the products 25 ms),
and scikit-learn's own loop was faster.  Here one compiled pass per row does each of:

- :func:`values_from_class_sums`: the pair values from ``M``;
- :func:`labels_by_votes`: one vote a pair, to a where ``f_ab > 0``, else to b, and the class with most votes
  (ties to the class listed first), as LIBSVM's predict;
- :func:`ovr_scores`: scikit-learn's one-vs-rest scores, votes (a zero value votes for a) plus the summed
  confidences squashed into (-1/3, 1/3), summed pair by pair in scikit-learn's order.

From :data:`FUSED_MIN_CLASSES` classes on, the classifiers skip the whole ``M`` and the stored pair values
(:func:`pair_values_from_kernel`, :func:`labels_from_kernel`, :func:`ovr_from_kernel`): the class sums of
:data:`FUSED_ROWS` rows at a time, ``M[a, r, c] = sum_{i in class a} K(x_r, x_i) dual_coef_[c, i]`` (2 x 718 KB
at 300 classes: they stay in the core's cache), are formed from the rows' kernel values by one contiguous
multiply-add over the k-1 coefficients of each support vector (``dual_coef_.T``), and the rows' pair values,
votes (without branches: their outcomes are a coin toss to the branch predictor) or scores are read off them at
once.  With 300 classes the two-step route moved each row's 44,850 values through memory three times (``M``, the
values, the votes): 1.2 s of a 3,000-row predict, against the kernel block's 0.05 s; fused, 0.3 s.  ``predict``,
``decision_function`` and the scores of one model go through the same route, so they agree to the last bit.

Rows are independent: the results do not depend on the number of threads.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._jit import parallel_and_serial

#: below this many pair values the serial loops run (a parallel region costs ~10-20 us to start)
PARALLEL_MIN_VALUES = 1 << 16
#: from this many classes the pair values, votes and scores come from each row's class sums
#: (:func:`labels_from_kernel`); below it through ``M`` (one matrix product per class).  Predict on 5,000 rows of
#: blobs, fused / through M (session 29): 8 classes 1.40, 12 1.39, 16 1.18, 24 0.82, 50 0.56, 100 0.48; 300
#: classes 0.20 (the class sums' inner loop runs over k-1 coefficients: short for few classes)
FUSED_MIN_CLASSES = 20
#: rows whose class sums the fused loops form together (each support vector's coefficients read once for them;
#: 300 classes, per row: 1 row 139 us, 2 rows 104, 4 rows 108, 8 rows 172 -- their sums then leave the cache)
FUSED_ROWS = 2
#: the fused loops' rows go to this many tasks (each holds the class sums of FUSED_ROWS rows)
FUSED_TASKS = 16


def _values_py(M, intercept, out):
    k = M.shape[0]
    for i in prange(out.shape[0]):
        p = 0
        for a in range(k):
            for b in range(a + 1, k):
                out[i, p] = M[a, i, b - 1] + M[b, i, a] + intercept[p]
                p += 1


def _labels_py(dec, k, labels):
    for i in prange(dec.shape[0]):
        votes = np.zeros(k, dtype=np.int64)
        p = 0
        for a in range(k):
            for b in range(a + 1, k):
                if dec[i, p] > 0:
                    votes[a] += 1
                else:
                    votes[b] += 1
                p += 1
        best = 0
        for a in range(1, k):
            if votes[a] > votes[best]:
                best = a
        labels[i] = best


def _ovr_py(dec, k, out):
    for i in prange(dec.shape[0]):
        votes = np.zeros(k)
        conf = np.zeros(k)
        p = 0
        for a in range(k):
            for b in range(a + 1, k):
                v = dec[i, p]
                if v >= 0:
                    votes[a] += 1.0
                else:
                    votes[b] += 1.0
                conf[a] += v
                conf[b] -= v
                p += 1
        for a in range(k):
            out[i, a] = votes[a] + conf[a] / (3.0 * (abs(conf[a]) + 1.0))


@njit(cache=True, nogil=True, inline="always")
def _block_sums(K, r0, rr, CT, starts, M):
    """``M[a, r, c] = sum_{s in class a} K[r0 + r, s] CT[s, c]`` for the ``rr`` rows from ``r0``: the rows' kernel
    values against the support vectors (grouped by class, ``starts``) times their coefficients ``CT``
    (``dual_coef_.T``), one contiguous multiply-add of length k-1 per support vector and row; a support vector's
    coefficients are read once for the ``rr`` rows."""
    k1 = M.shape[2]
    for a in range(M.shape[0]):
        Ma = M[a]
        for r in range(rr):
            Mr = Ma[r]
            for c in range(k1):
                Mr[c] = 0.0
        for s in range(starts[a], starts[a + 1]):
            Cs = CT[s]
            for r in range(rr):
                kv = K[r0 + r, s]
                Mr = Ma[r]
                for c in range(k1):
                    Mr[c] += kv * Cs[c]


def _values_k_py(K, CT, starts, intercept, out):
    n = K.shape[0]
    k = starts.shape[0] - 1
    n_blocks = (n + FUSED_ROWS - 1) // FUSED_ROWS
    per = (n_blocks + FUSED_TASKS - 1) // FUSED_TASKS
    for t in prange(FUSED_TASKS):
        M = np.empty((k, FUSED_ROWS, k - 1))
        for q in range(t * per, min(n_blocks, (t + 1) * per)):
            r0 = q * FUSED_ROWS
            rr = min(FUSED_ROWS, n - r0)
            _block_sums(K, r0, rr, CT, starts, M)
            for r in range(rr):
                o = out[r0 + r]
                p = 0
                for a in range(k):
                    Mra = M[a, r]
                    for b in range(a + 1, k):
                        o[p] = Mra[b - 1] + M[b, r, a] + intercept[p]
                        p += 1


def _labels_k_py(K, CT, starts, intercept, labels):
    n = K.shape[0]
    k = starts.shape[0] - 1
    n_blocks = (n + FUSED_ROWS - 1) // FUSED_ROWS
    per = (n_blocks + FUSED_TASKS - 1) // FUSED_TASKS
    for t in prange(FUSED_TASKS):
        M = np.empty((k, FUSED_ROWS, k - 1))
        votes = np.empty(k, dtype=np.int64)
        for q in range(t * per, min(n_blocks, (t + 1) * per)):
            r0 = q * FUSED_ROWS
            rr = min(FUSED_ROWS, n - r0)
            _block_sums(K, r0, rr, CT, starts, M)
            for r in range(rr):
                votes[:] = 0
                p = 0
                for a in range(k):
                    Mra = M[a, r]
                    wins = 0
                    for b in range(a + 1, k):  # branch-free: the outcomes are a coin toss to the predictor
                        win = 1 if Mra[b - 1] + M[b, r, a] + intercept[p] > 0 else 0
                        wins += win
                        votes[b] += 1 - win
                        p += 1
                    votes[a] += wins
                best = 0
                for a in range(1, k):
                    if votes[a] > votes[best]:
                        best = a
                labels[r0 + r] = best


def _ovr_k_py(K, CT, starts, intercept, out):
    n = K.shape[0]
    k = starts.shape[0] - 1
    n_blocks = (n + FUSED_ROWS - 1) // FUSED_ROWS
    per = (n_blocks + FUSED_TASKS - 1) // FUSED_TASKS
    for t in prange(FUSED_TASKS):
        M = np.empty((k, FUSED_ROWS, k - 1))
        votes = np.empty(k)
        conf = np.empty(k)
        for q in range(t * per, min(n_blocks, (t + 1) * per)):
            r0 = q * FUSED_ROWS
            rr = min(FUSED_ROWS, n - r0)
            _block_sums(K, r0, rr, CT, starts, M)
            for r in range(rr):
                votes[:] = 0.0
                conf[:] = 0.0
                p = 0
                for a in range(k):
                    Mra = M[a, r]
                    wins = 0.0
                    for b in range(a + 1, k):  # votes branch-free, as in _labels_k_py; sums in _ovr_py's order
                        v = Mra[b - 1] + M[b, r, a] + intercept[p]
                        win = 1.0 if v >= 0 else 0.0
                        wins += win
                        votes[b] += 1.0 - win
                        conf[a] += v
                        conf[b] -= v
                        p += 1
                    votes[a] += wins
                for a in range(k):
                    out[r0 + r, a] = votes[a] + conf[a] / (3.0 * (abs(conf[a]) + 1.0))


_values_par, _values_ser = parallel_and_serial(_values_py)
_labels_par, _labels_ser = parallel_and_serial(_labels_py)
_ovr_par, _ovr_ser = parallel_and_serial(_ovr_py)
_values_k_par, _values_k_ser = parallel_and_serial(_values_k_py)
_labels_k_par, _labels_k_ser = parallel_and_serial(_labels_k_py)
_ovr_k_par, _ovr_k_ser = parallel_and_serial(_ovr_k_py)


def _pick(par, ser, n_values):
    return par if n_values >= PARALLEL_MIN_VALUES else ser


def values_from_class_sums(M, intercept, out):
    """Fill ``out`` (n, k(k-1)/2) with ``M[a, :, b-1] + M[b, :, a] + intercept[p]`` for the pairs p = (a, b) in
    LIBSVM's order; ``M`` (k, n, k-1) holds each class's products with its dual coefficients."""
    intercept = np.ascontiguousarray(intercept, dtype=np.float64)
    _pick(_values_par, _values_ser, out.size)(M, intercept, out)
    return out


def labels_by_votes(dec, n_classes):
    """Index of the winning class of each row of one-vs-one values ``dec`` (n, k(k-1)/2), LIBSVM's vote."""
    dec = np.ascontiguousarray(dec, dtype=np.float64)
    labels = np.empty(dec.shape[0], dtype=np.int64)
    _pick(_labels_par, _labels_ser, dec.size)(dec, n_classes, labels)
    return labels


def ovr_scores(dec, n_classes):
    """scikit-learn's one-vs-rest scores (n, k) from one-vs-one values ``dec`` (n, k(k-1)/2)."""
    dec = np.ascontiguousarray(dec, dtype=np.float64)
    out = np.empty((dec.shape[0], n_classes))
    _pick(_ovr_par, _ovr_ser, dec.size)(dec, n_classes, out)
    return out


def _fused_args(K, CT, starts, intercept):
    return (
        np.ascontiguousarray(K, dtype=np.float64),
        CT,
        np.ascontiguousarray(starts, dtype=np.int64),
        np.ascontiguousarray(intercept, dtype=np.float64),
    )


def _fused_work(K, CT):
    return K.shape[0] * CT.shape[0] * max(CT.shape[1], 1)


def pair_values_from_kernel(K, CT, starts, intercept, out):
    """Fill ``out`` (n, k(k-1)/2) with the one-vs-one values of the rows whose kernel values against the support
    vectors are ``K`` (n, n_SV; the vectors grouped by class, class a at ``starts[a]:starts[a + 1]``), ``CT`` =
    ``dual_coef_.T`` (n_SV, k-1, C-ordered) and ``intercept`` (the pairs' constants), through each row's class sums
    (see the module's docstring)."""
    args = _fused_args(K, CT, starts, intercept)
    _pick(_values_k_par, _values_k_ser, _fused_work(K, CT))(*args, out)
    return out


def labels_from_kernel(K, CT, starts, intercept):
    """:func:`labels_by_votes` of the values :func:`pair_values_from_kernel` would give, without forming them."""
    labels = np.empty(K.shape[0], dtype=np.int64)
    args = _fused_args(K, CT, starts, intercept)
    _pick(_labels_k_par, _labels_k_ser, _fused_work(K, CT))(*args, labels)
    return labels


def ovr_from_kernel(K, CT, starts, intercept):
    """:func:`ovr_scores` of the values :func:`pair_values_from_kernel` would give, without forming them."""
    out = np.empty((K.shape[0], starts.shape[0] - 1))
    args = _fused_args(K, CT, starts, intercept)
    _pick(_ovr_k_par, _ovr_k_ser, _fused_work(K, CT))(*args, out)
    return out
