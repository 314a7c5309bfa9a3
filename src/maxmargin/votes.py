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

Rows are independent: the results do not depend on the number of threads.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ._jit import parallel_and_serial

#: below this many pair values the serial loops run (a parallel region costs ~10-20 us to start)
PARALLEL_MIN_VALUES = 1 << 16


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


_values_par, _values_ser = parallel_and_serial(_values_py)
_labels_par, _labels_ser = parallel_and_serial(_labels_py)
_ovr_par, _ovr_ser = parallel_and_serial(_ovr_py)


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
