r"""Identical training rows of one class merged into one row with their bounds summed (exact for the C-SVC dual
and the duals like it).

Rows i and j with x_i = x_j and y_i = y_j have equal rows and columns in :math:`Q_{ij} = y_i y_j K(x_i, x_j)`, so
the C-SVC dual (seed 002, eq. 4: :math:`\min \tfrac12 \alpha^T Q \alpha - e^T\alpha`, :math:`0 \le \alpha_i \le C_i`,
:math:`y^T\alpha = 0`) depends on a group G of such rows only through :math:`s_G = \sum_{i \in G} \alpha_i`, with
:math:`0 \le s_G \le \sum_{i \in G} C_i`.  Solving over one variable per group is the same problem with fewer
variables; any split of :math:`s_G` within the boxes is an optimal solution of the original.  :func:`expand` splits
it as LIBSVM's solutions tend to be: the group's rows in index order take their bound C_i until :math:`s_G` is used
up (at most one free row a group).

The same holds wherever the constraints see a group only through its sum: SVR (identical rows with the same target;
:math:`\alpha` and :math:`\alpha^*` each summed), one-class (:math:`e^T\alpha = \nu\sum_i w_i`), nu-SVC (class sums
:math:`\nu\sum_i w_i/2`) and nu-SVR (:math:`\sum\alpha = \sum\alpha^* = \nu\sum_i C_i/2`): merging keeps every
right-hand side, as the weights' total is kept.  nu-SVC's coefficients are its solution divided by :math:`r` (one
per binary problem), so their bounds are :math:`w_i/r` (``expand``'s ``scale``).

Data of few distinct values repeat rows a lot: Skin_NonSkin's 100,000 training rows (B, G, R in 0..255) hold 29,200
distinct (x, y); a9a's 32,561 hold 26,008.  Where fewer than :data:`MAX_SHARE` of the rows stay, the estimator (SVC,
NuSVC, SVR, NuSVR, OneClassSVM) solves the smaller problem.  Rows are compared by their stored values: dense rows
exactly (-0.0 = 0.0), CSR rows by their indices and values (rows equal as vectors but stored differently stay
apart, which costs speed, never exactness).

The linear estimators (``LinearSVC``, ``LinearSVR``: the squared losses' dual solvers, ``linear._repeats``) merge
too, where :func:`sampled_share` -- a look at 4,096 rows, ~0.1 ms -- finds repeats first: the same primal problem
with summed weights, their dual variables shared out by weight afterwards.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from numba import njit, prange, uint64

from ._jit import parallel_and_serial

#: fewer training rows than this are never merged (the search costs more than it can save)
MIN_ROWS = 2000
#: merged only where at most this share of the rows stays (a few duplicates are not worth a changed problem)
MAX_SHARE = 0.9

_MIX = uint64(0x9E3779B97F4A7C15)


@njit(cache=True, nogil=True, inline="always")
def _mix(h, v):
    h ^= v + _MIX + (h << uint64(6)) + (h >> uint64(2))
    return h


def _dense_hashes_py(X, labels, out):
    for i in prange(X.shape[0]):
        bits = np.empty(1, dtype=np.float64)
        ubits = bits.view(np.uint64)
        h = uint64(labels[i]) * _MIX
        for j in range(X.shape[1]):
            bits[0] = X[i, j] + 0.0  # -0.0 + 0.0 = 0.0
            h = _mix(h, ubits[0])
        out[i] = h


_dense_hashes_par, _dense_hashes = parallel_and_serial(_dense_hashes_py)
#: dense rows of at least this many values in all are hashed on every core
PARALLEL_MIN_VALUES = 1 << 18
#: rows looked at by :func:`sampled_share`, and at most this many stored values in all
SAMPLE_ROWS = 4096
SAMPLE_VALUES = 1 << 15
SAMPLE_BLOCKS = 64


@njit(cache=True, nogil=True)
def _sparse_hashes(data, indices, indptr, labels, out):
    bits = np.empty(1, dtype=np.float64)
    ubits = bits.view(np.uint64)
    for i in range(indptr.shape[0] - 1):
        h = uint64(labels[i]) * _MIX
        for q in range(indptr[i], indptr[i + 1]):
            bits[0] = data[q] + 0.0
            h = _mix(_mix(h, uint64(indices[q])), ubits[0])
        out[i] = h


@njit(cache=True, nogil=True)
def _sparse_row_prints(data, indices, indptr, rows, labels, out):
    """A cheap fingerprint of each CSR row in ``rows`` (of any value and index types), into ``out``: its label and
    length mixed with the wrapping sum of its entries' hashes.  Equal rows (as stored) have equal prints; unlike
    :func:`_sparse_hashes` there is no chain from entry to entry but the sum, so the entries pipeline."""
    bits = np.empty(1, dtype=np.float64)
    ubits = bits.view(np.uint64)
    for r in range(rows.shape[0]):
        i = rows[r]
        acc = uint64(0)
        for q in range(indptr[i], indptr[i + 1]):
            bits[0] = np.float64(data[q]) + 0.0
            e = (uint64(indices[q]) + _MIX) * uint64(0xFF51AFD7ED558CCD) ^ ubits[0]
            e *= uint64(0xC4CEB9FE1A85EC53)
            acc += e ^ (e >> uint64(33))
        h = _mix(uint64(labels[i]) * _MIX, uint64(indptr[i + 1] - indptr[i]))
        out[r] = _mix(h, acc)


@njit(cache=True, nogil=True)
def _dense_equal(X, i, j):
    for f in range(X.shape[1]):
        if X[i, f] != X[j, f]:
            return False
    return True


@njit(cache=True, nogil=True)
def _sparse_equal(data, indices, indptr, i, j):
    if indptr[i + 1] - indptr[i] != indptr[j + 1] - indptr[j]:
        return False
    d = indptr[j] - indptr[i]
    for q in range(indptr[i], indptr[i + 1]):
        if indices[q] != indices[q + d] or data[q] != data[q + d]:
            return False
    return True


@njit(cache=True, nogil=True)
def _groups(order, keys, labels, mergeable, dense, X, data, indices, indptr, group):
    """``group[i]``: the first mergeable row (least index) of row i's run of equal keys (``order``: the rows sorted
    by key, in any order within a run), where row i equals it and shares its label; rows that differ from it (a hash
    collision) or may not merge are their own group.  The heads are found run by run, then each row is compared
    with its head in index order: one row streams while the heads, fewer and reused, stay in cache (comparing in
    key order read both rows of every pair from random places: 31 of find's 47 ms on 200,000 one-hot rows)."""
    n = order.shape[0]
    head = np.empty(n, dtype=np.int64)
    s = 0
    while s < n:
        e = s + 1
        ks = keys[order[s]]
        while e < n and keys[order[e]] == ks:
            e += 1
        h = n
        for t in range(s, e):
            i = order[t]
            if mergeable[i] and i < h:
                h = i
        for t in range(s, e):
            head[order[t]] = h
        s = e
    for i in range(n):
        h = head[i]
        group[i] = i
        if h < i and mergeable[i] and labels[i] == labels[h]:
            if _dense_equal(X, h, i) if dense else _sparse_equal(data, indices, indptr, h, i):
                group[i] = h


class Duplicates(NamedTuple):
    """The merged problem: ``keep`` (its rows, each group's first, increasing), ``group`` (per original row, its
    row in ``keep``'s numbering), ``C`` (per kept row, the group's summed bounds), ``counts`` (rows a group)."""

    keep: np.ndarray
    group: np.ndarray
    C: np.ndarray
    counts: np.ndarray


def _keys(X, labels):
    """Each row's hash (with its label), and the rows as the comparisons read them: ``(keys, Xd, data, indices,
    indptr)`` (dense rows in ``Xd``, CSR rows in the other three; the unused ones are placeholders)."""
    keys = np.empty(X.shape[0], dtype=np.uint64)
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        data = np.ascontiguousarray(X.data, dtype=np.float64)
        indices, indptr = X.indices.astype(np.int64), X.indptr.astype(np.int64)
        _sparse_hashes(data, indices, indptr, labels, keys)
        Xd = np.zeros((1, 1))
    else:
        Xd = np.ascontiguousarray(X, dtype=np.float64)
        (_dense_hashes_par if Xd.size >= PARALLEL_MIN_VALUES else _dense_hashes)(Xd, labels, keys)
        data, indices, indptr = np.zeros(1), np.zeros(1, dtype=np.int64), np.zeros(2, dtype=np.int64)
    return keys, Xd, data, indices, indptr


def sampled_share(X, labels, size=SAMPLE_ROWS, empty_apart=False):
    """The share of distinct (row, label) hashes among about ``size`` rows in :data:`SAMPLE_BLOCKS` runs evenly
    spaced over ``X`` (all rows where there are no more; fewer where the rows are long, :data:`SAMPLE_VALUES`): a
    cheap look at whether :func:`find` may pay.  A hash collision counts as a repeat; the look underestimates
    repeats (a pair of equal rows shows only where both are drawn).  CSR rows are compared by a fingerprint
    (:func:`_sparse_row_prints`): different rows of equal prints count as repeats too.  ``empty_apart``: rows
    without a nonzero value count as distinct (for callers that do not merge them)."""
    n = X.shape[0]
    width = max(X.nnz / max(n, 1) if sp.issparse(X) else X.shape[1], 1.0)
    size = int(max(min(size, SAMPLE_VALUES // width), 16))
    if n <= size:
        rows = np.arange(n, dtype=np.int64)
    else:  # SAMPLE_BLOCKS runs of consecutive rows, evenly spaced (single rows far apart cost a cache miss each)
        run = max(size // SAMPLE_BLOCKS, 1)
        starts = (np.arange(SAMPLE_BLOCKS, dtype=np.int64) * (n - run)) // max(SAMPLE_BLOCKS - 1, 1)
        rows = (starts[:, None] + np.arange(run, dtype=np.int64)).ravel()  # (runs apart: n > SAMPLE_BLOCKS * run)
    labels = np.asarray(labels)
    keys = np.empty(rows.shape[0], dtype=np.uint64)
    if sp.issparse(X) and X.format == "csr":
        _sparse_row_prints(X.data, X.indices, X.indptr, rows, labels, keys)
        empty = np.diff(X.indptr)[rows] == 0 if empty_apart else None
    else:
        Xs = X[rows]
        keys = _keys(Xs, np.ascontiguousarray(labels[rows], dtype=np.int64))[0]
        empty = ~np.any(Xs != 0, axis=1) if empty_apart else None
    if empty is not None and empty.any():
        keys[empty] = np.arange(np.count_nonzero(empty), dtype=np.uint64) * _MIX  # (a collision: a repeat too many)
    keys.sort()
    return (1 + np.count_nonzero(keys[1:] != keys[:-1])) / max(rows.shape[0], 1)


def find(X, labels, C, mergeable=None):
    """The groups of identical rows of one label among those with ``C > 0`` (and ``mergeable``, where given: a
    boolean per row), or None where fewer than :data:`MIN_ROWS` rows are given or more than :data:`MAX_SHARE` of
    them would stay."""
    n = X.shape[0]
    if n < MIN_ROWS:
        return None
    labels = np.ascontiguousarray(labels, dtype=np.int64)
    keys, Xd, data, indices, indptr = _keys(X, labels)
    # equal rows have equal keys: with too many distinct keys there are too many groups (the sort of the keys
    # alone: 0.3 ms for 20,000 rows; the argsort below, 2.4 ms for 200,000)
    sorted_keys = np.sort(keys)
    if 1 + np.count_nonzero(sorted_keys[1:] != sorted_keys[:-1]) > MAX_SHARE * n:
        return None
    order = np.argsort(keys)  # (the heads are the least index of a run: no stable sort needed, 2.4 against 13 ms)
    group = np.empty(n, dtype=np.int64)
    mergeable = np.asarray(C) > 0 if mergeable is None else (np.asarray(C) > 0) & np.asarray(mergeable, dtype=bool)
    _groups(order, keys, labels, mergeable, not sp.issparse(X), Xd, data, indices, indptr, group)
    is_head = group == np.arange(n)
    keep = np.flatnonzero(is_head)
    if keep.shape[0] > MAX_SHARE * n:
        return None
    renumber = np.cumsum(is_head) - 1  # a head's position in keep
    group = renumber[group]
    C_sum = np.bincount(group, weights=np.asarray(C, dtype=np.float64), minlength=keep.shape[0])
    return Duplicates(keep, group, C_sum, np.bincount(group, minlength=keep.shape[0]))


def expand(dual_u, support_u, dup, C, scale=None):
    """The dual coefficients of the original rows from those of the merged problem: ``dual_u`` (rows: the binary
    problems, e.g. ``dual_coef_``; columns: the kept rows ``support_u``) split over each group's rows in index
    order, each row up to its bound ``C`` (a group at its summed bound: every row at its own).  ``scale`` (the shape
    of ``dual_u``): where the coefficients are the solution times a factor of their own (NuSVC's :math:`1/r`, one a
    binary problem), the bounds of each entry are ``C`` times it.  Returns ``(rows, dual)``: the original rows with a
    nonzero coefficient (increasing) and their columns."""
    col_of = np.full(dup.keep.shape[0], -1, dtype=np.int64)
    col_of[support_u] = np.arange(support_u.shape[0])
    rows = np.flatnonzero(col_of[dup.group] >= 0)  # rows of groups with a coefficient
    g = dup.group[rows]
    order = np.argsort(g, kind="stable")  # by group, then index
    rows, g = rows[order], g[order]
    c = np.asarray(C, dtype=np.float64)[rows]
    run_start = np.r_[True, g[1:] != g[:-1]]
    csum = np.cumsum(c)
    before = csum - c - np.maximum.accumulate(np.where(run_start, csum - c, 0.0))  # bounds of earlier rows, same group
    vals = dual_u[:, col_of[g]]
    s = np.abs(vals)
    total = dup.C[g]
    if scale is not None:  # the bounds of each binary problem's coefficients (constant over a group's rows)
        f = np.asarray(scale, dtype=np.float64)[:, col_of[g]]
        c, before, total = c * f, before * f, total * f
    share = np.where(s >= total * (1.0 - 1e-12), c, np.clip(s - before, 0.0, c))
    dual = np.sign(vals) * share
    nonzero = np.any(dual != 0.0, axis=0)
    rows, dual = rows[nonzero], dual[:, nonzero]
    back = np.argsort(rows, kind="stable")
    return rows[back], dual[:, back]
