"""Class labels to class numbers: ``np.unique(y, return_inverse=True)`` without the sort where the labels allow.

``np.unique`` sorts the labels (an ``argsort`` of all n); a fit of 50,000 rows spent 3-4 ms there, a tenth of a
LinearSVC fit on ijcnn1.  Labels of two values, and integer-valued labels over a short range, are encoded here by
comparisons and a count instead (a few passes over ``y``, ~0.1-0.3 ms); anything else goes to ``np.unique``.
The result is the same in every case: the sorted distinct labels (in ``y``'s dtype) and each row's index into
them (``np.intp``).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import njit

#: integer-valued labels spanning at most this many values are counted (``np.bincount``) instead of sorted
COUNT_SPAN = 1 << 16
#: string labels of at most this many distinct values are found by comparisons (:func:`_encode_strings`)
PEEL_MAX = 8
#: the label dtypes :func:`_two_scan` takes (one compiled copy each; others go the NumPy way)
_SCANNED = (np.dtype(np.float64), np.dtype(np.int64), np.dtype(np.float32), np.dtype(np.int32))


@njit(cache=True, nogil=True)
def _two_scan(y, number):
    """For contiguous 1-D labels ``y``: ``(lo, hi, two)``, where ``two`` says every label is ``lo`` or ``hi`` (NaN is
    neither), ``lo`` / ``hi`` the first label and the first one unlike it, ordered; ``number[i] = (y[i] == hi)``.
    One compiled call in place of NumPy's ten (min, max, two comparisons and counts, ...): 4.5 against 30 us warm
    at 6,093 labels, ~50 against ~150-200 us right after another library's fit (cold caches, where a NumPy call
    costs ~20 us), 0.65 against 2.7 ms at 1M (session 68).  The pass has no branch on the labels."""
    n = y.shape[0]
    a = y[0]
    b = a
    for i in range(n):
        if y[i] != a:
            b = y[i]
            break
    lo = min(a, b)
    hi = max(a, b)
    k = 0
    for i in range(n):
        v = y[i]
        t = v == hi
        number[i] = t
        k += t | (v == lo)
    return lo, hi, k == n


def _encode_strings(y):
    """:func:`encode` for NumPy strings: each row's stored bytes compared, as machine words, with the labels found so
    far (the last one matched first) in one compiled pass.  NumPy's ``unique`` hashes and sorts the strings: 1.6 ms
    of a 7 ms LinearSVC fit on a9a's 32,561 rows with labels ``'c-1'``/``'c1'``; peeling the labels off with NumPy's
    string comparisons (sessions 45-51) 3.9 ms for 200,000 labels ``'spam'``/``'ham'``, this pass ~0.5 ms.  More than
    :data:`PEEL_MAX` distinct labels: ``np.unique``."""
    n = y.shape[0]
    size = y.dtype.itemsize
    word = np.uint64 if size % 8 == 0 else np.uint32 if size % 4 == 0 else np.uint16 if size % 2 == 0 else np.uint8
    # NUL-padded fixed-width storage: equal stored bytes are equal strings, as NumPy compares them
    K = np.ascontiguousarray(y).view(np.uint8).reshape(n, size).view(word)
    n_labels, first, number = _peel(K, PEEL_MAX)
    if n_labels < 0:
        return np.unique(y, return_inverse=True)
    found = y[first[:n_labels]]
    order = np.argsort(found, kind="stable")  # NumPy's order: sorted as strings
    rank = np.empty(n_labels, dtype=np.intp)
    rank[order] = np.arange(n_labels, dtype=np.intp)
    return found[order], rank[number]


@njit(cache=True, nogil=True)
def _peel(K, max_labels):
    """(labels found, the row of each one's first occurrence, each row's label in order of appearance) for the rows
    of words ``K``; -1 labels when there are more than ``max_labels``."""
    n, m = K.shape
    first = np.zeros(max_labels, dtype=np.int64)
    number = np.empty(n, dtype=np.intp)
    found = 0
    last = 0
    for i in range(n):
        hit = -1
        for t in range(found):
            c = last + t
            if c >= found:
                c -= found
            r = first[c]
            same = True
            for j in range(m):
                if K[i, j] != K[r, j]:
                    same = False
                    break
            if same:
                hit = c
                break
        if hit < 0:
            if found == max_labels:
                return -1, first, number
            first[found] = i
            hit = found
            found += 1
        number[i] = hit
        last = hit
    return found, first, number


def _encode_objects(y):
    """:func:`encode` for an object array of Python strings (a pandas column of text labels): the distinct labels
    peeled off by equality (the first label left, then the rows unlike it), each row's number by one comparison a
    class.  ``np.unique`` sorts the objects, 45 ms for 200,000 labels ``'spam'``/``'ham'``, and the fit's check of
    the targets sorted them again: a LinearSVC fit of 31 ms took 186.  So ~7 ms.  Labels that are not all ``str``,
    or more than :data:`PEEL_MAX` of them: ``np.unique`` (its order, its errors)."""
    rest = y
    found = []
    while rest.shape[0]:
        label = rest[0]
        if len(found) == PEEL_MAX or type(label) is not str:
            return np.unique(y, return_inverse=True)
        found.append(label)
        rest = rest[rest != label]
    classes = np.empty(len(found), dtype=object)
    classes[:] = sorted(found)
    y_idx = np.zeros(y.shape[0], dtype=np.intp)
    for c in range(1, classes.shape[0]):
        y_idx[y == classes[c]] = c
    return classes, y_idx


def encode(y):
    """``(classes, y_idx)`` exactly as ``np.unique(y, return_inverse=True)`` gives them for a 1-d ``y``."""
    y = np.asarray(y)
    n = y.shape[0] if y.ndim == 1 else 0
    if n and y.dtype.kind in "US":
        return _encode_strings(y)
    if n and y.dtype == object:
        return _encode_objects(y)
    if n == 0 or y.dtype.kind not in "iuf":
        return np.unique(y, return_inverse=True)
    if y.dtype in _SCANNED and y.flags.c_contiguous:
        number = np.empty(n, dtype=np.intp)
        lo, hi, two = _two_scan(y, number)
        if two and lo != hi and math.isfinite(lo) and math.isfinite(hi):
            return np.array([lo, hi], dtype=y.dtype), number
    lo = y.min()
    hi = y.max()
    if not (np.isfinite(lo) and np.isfinite(hi)):  # NaN or infinite labels: np.unique's answer, checked later
        return np.unique(y, return_inverse=True)
    top = y == hi
    n_top = int(np.count_nonzero(top))
    if lo == hi:
        return y[:1].copy(), np.zeros(n, dtype=np.intp)
    if n_top + int(np.count_nonzero(y == lo)) == n:  # two labels
        classes = np.empty(2, dtype=y.dtype)
        classes[0] = lo
        classes[1] = hi
        return classes, top.view(np.uint8).astype(np.intp)
    span = float(hi) - float(lo)
    if span < COUNT_SPAN and not (y.dtype.kind == "u" and y.dtype.itemsize == 8):
        if y.dtype.kind == "f":
            shift = (y - lo).astype(np.intp)
            if not np.array_equal(shift + float(lo), y):  # labels that are not integer-valued
                return np.unique(y, return_inverse=True)
        else:
            shift = (y.astype(np.int64) - int(lo)).astype(np.intp)
        counts = np.bincount(shift, minlength=int(span) + 1)
        present = np.flatnonzero(counts)
        number = np.zeros(counts.shape[0], dtype=np.intp)
        number[present] = np.arange(present.shape[0], dtype=np.intp)
        if y.dtype.kind == "f":
            classes = (present + float(lo)).astype(y.dtype)  # exact: each equals a label (checked above)
        else:
            classes = (present.astype(np.int64) + int(lo)).astype(y.dtype)
        return classes, number[shift]
    return np.unique(y, return_inverse=True)


@functools.lru_cache(maxsize=64)
def _unit_weights(k):
    """``k`` ones, read-only and shared by every fit without class weights (a NumPy call fewer a fit)."""
    ones = np.ones(k)
    ones.flags.writeable = False
    return ones


def class_weights(class_weight, classes, y, y_idx, sample_weight=None):
    """scikit-learn's ``compute_class_weight(class_weight, classes=classes, y=y, sample_weight=sample_weight)``
    for the labels ``y`` numbered ``y_idx`` (:func:`encode`); ``None``: ones (read-only, shared).  ``'balanced'`` is
    computed here with its arithmetic -- each class's (weighted) count :math:`n_c` and
    :math:`w_c = \\sum_c n_c / (k\\, n_c)` -- without its validation and label encoding (2 ms of a 9 ms LinearSVC
    fit on text2's 6,000 rows); a dict goes to scikit-learn, whose messages name a class it does not know."""
    k = classes.shape[0]
    if class_weight is None:
        return _unit_weights(k)
    if isinstance(class_weight, str) and class_weight == "balanced":
        weights = np.ones(y_idx.shape[0]) if sample_weight is None else sample_weight
        counts = np.bincount(y_idx, weights=weights, minlength=k)
        return counts.sum() / (k * counts)
    from sklearn.utils.class_weight import compute_class_weight

    return compute_class_weight(class_weight, classes=classes, y=y, sample_weight=sample_weight)


def one_vs_rest(y_idx, m, C, sw, cw):
    r"""The binary problem of class ``m`` against the rest: targets :math:`y_i = \pm 1` (+1 where ``y_idx == m``)
    and per-row costs :math:`C_i = C\,s_i\,c_i` -- ``sw`` the sample weights (None: ones), :math:`c_i` = ``cw[m]``
    on the class's rows and ``cw[0]`` on the others for two classes (``m`` = 1: each row its own class's weight),
    1 on the others for more (LIBLINEAR's one-vs-rest).  One compiled pass: the five NumPy operations before took
    ~40 us with cold caches, ~2% of a 2.5 ms fit on mushrooms (session 70)."""
    n = y_idx.shape[0]
    yb = np.empty(n)
    Ci = np.empty(n)
    rest = float(cw[0]) if cw.shape[0] == 2 else 1.0
    weights = sw is not None
    _one_vs_rest(
        np.ascontiguousarray(y_idx, dtype=np.intp),
        int(m),
        float(C),
        np.ascontiguousarray(sw, dtype=np.float64) if weights else yb,
        weights,
        float(cw[m]),
        rest,
        yb,
        Ci,
    )
    return yb, Ci


@njit(cache=True, nogil=True)
def _one_vs_rest(y_idx, m, C, sw, weights, c_pos, c_neg, yb, Ci):
    for i in range(y_idx.shape[0]):
        pos = y_idx[i] == m
        yb[i] = 1.0 if pos else -1.0
        s = C * sw[i] if weights else C
        Ci[i] = s * (c_pos if pos else c_neg)
