r"""Coordinate descent for the L1-regularised squared-hinge SVM (LIBLINEAR's solver 5; Yuan, Chang, Hsieh and
Lin, JMLR 2010, section 4.1.1 after Chang, Hsieh and Lin 2008).

Primal, with :math:`b_i(w) = 1 - y_i w\cdot x_i` (bias feature included in :math:`w` and in the norm, as in
LIBLINEAR):

.. math:: \min_w\ \|w\|_1 + \sum_i C_i \max(0, b_i(w))^2.

The solver works on the columns of X (CSC) and keeps :math:`b`.  For feature :math:`j`, over the rows
:math:`I = \{i : b_i > 0\}` with :math:`x_{ij} \ne 0`,

.. math:: L'_j = -2\sum_{i\in I} C_i y_i x_{ij} b_i, \qquad L''_j = \max\big(2\sum_{i\in I} C_i x_{ij}^2,\ 10^{-12}\big),

and the Newton direction of the one-variable model :math:`L'_j d + \tfrac12 L''_j d^2 + |w_j + d|` is
:math:`d = -(L'_j+1)/L''_j` if :math:`L'_j + 1 < L''_j w_j`, :math:`-(L'_j-1)/L''_j` if
:math:`L'_j - 1 > L''_j w_j`, else :math:`-w_j`.  A backtracking line search (halving, at most 20 times)
accepts :math:`\lambda d` when :math:`F(w + \lambda d e_j) - F(w) \le \sigma\lambda(L'_j d + |w_j + d| - |w_j|)`
with :math:`\sigma = 0.01`; the change of the loss is summed over column :math:`j`'s non-zeros only.  The full
step is first tested with the bound :math:`L'_j d + (\sum_i C_i x_{ij}^2) d^2` on the loss change (it holds for
every row, active or not): when the bound passes, so does the exact test, and the step is taken without that
pass over the column (as LIBLINEAR does; most steps).

Features are visited in a random order each epoch, so each column starts with cache misses the hardware cannot
foresee (its start in ``cindptr``, its entries, its weight and ``xj_sq``, then ``b``, ``y`` and ``C`` of its rows):
the loop asks for them in stages, 8, 4 and 2 columns ahead (the rows of a column's first 4 entries).  Measured
(session 8, in-process A/B, medians of 7): 300,000 rows with 4 of 2**20 hashed features 4.18 s -> 2.18 s;
40,000 x 300 one-hot and a 50,001-word text set unchanged within noise; 16/8/4 ahead was no better.
The column passes (:math:`L'_j, L''_j` and the line search's loss change) have no branch: a row's slack
enters through an indicator or ``max(b, 0)``, the same sums bit for bit.  With the branch, long columns of
rows on both sides of the margin were branch mispredictions; without it, the 40,000 x 300 one-hot set's L1
fit went 0.071 -> 0.040 s and the text set's 2.44 -> 2.02 s (session 8, in-process A/B).
Dense input of mostly nonzeros keeps every entry, column after column, with no row indices (:func:`to_columns`,
``dense`` in the epochs: the row of an entry is its place in the column): 8 bytes a value read instead of 12, and
the slacks read in order; the same sums as its CSC to rounding (long columns sum in vector lanes, below).  Measured (session 14, in-process, dense / CSC):
5,000 x 2,000 0.71, letter26 (15,000 x 16, 26 classes) 0.79, 200,000 x 20 0.61.
Shrinking drops a zero weight whose minimum-norm
subgradient is zero with a margin of ``M/m`` (``M`` the largest violation of the previous epoch, ``m`` the number
of weights).  LIBLINEAR divides by the number of samples instead; measured here (session 7, before ``tol`` was
scaled as below), that took more epochs: a9a 9 against 6, a generated 50,001-word text set 121 against 111, and
20-40% more time.  Not measured again with the scaled ``tol``.  Stopping: the
sum of the violations (minimum-norm subgradients) of an epoch at most ``tol`` times that of the first epoch, with
``tol`` scaled by ``max(min(#pos, #neg), 1)/n`` as LIBLINEAR does for this solver (and :mod:`.tron`).  Without
the scaling (before session 7) one class of a 100-class text set stopped at an objective 0.2% above
LIBLINEAR's, after 17 returns from the shrunk set to all 50,001 features (0.26 s); with it, at LIBLINEAR's
objective after 123 epochs (0.038 s, LIBLINEAR 0.045 s): the tighter test keeps the epochs on the shrunk set.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit, prange, uint64

from .._jit import parallel_and_serial
from ._linear_common import KEEP_THRESHOLDS, _prefetch, balanced_tol, drive, epoch_end, rand_below, rng_state
from .dual_cd import LinearFit

INF = np.inf


# The column passes are sums over a column's entries, compiled with floating-point reassociation allowed
# (``fastmath={"reassoc"}``, nothing else: no FMA contraction, NaN and inf kept): the compiler then keeps several
# partial sums in vector lanes.  One running sum waits ~4 cycles for each addition.  Measured (session 27, AMD
# EPYC, a dense column of 5,000 rows in cache): the gradient and line-search passes 1.40 -> 0.26 ns a value.
# They are separate functions (not inlined): an inlined body would be compiled under the epochs' strict rules.
# Short columns keep the plain loops inline (a call and vector set-up cost more than they save there: text sets
# of ~12 values a column ran 1.09-1.11x slower through the calls).
_REASSOC = {"reassoc"}

#: columns of at least this many stored values go through the vectorised passes
LONG_COLUMN = 32


@njit(cache=True, nogil=True, fastmath=_REASSOC)
def _column_sums(zdata, cindices, b, lo, hi, dense):
    r""":math:`(L'_j, L''_j)` before the floor, over the entries ``lo..hi-1`` of a column (rows ``cindices``, or
    ``p - lo`` in the dense layout): :math:`-2\sum z_p \max(b_{r_p}, 0)` and :math:`2\sum z_p^2 [b_{r_p} > 0]`."""
    g = 0.0
    h = 0.0
    if dense:
        for p in range(lo, hi):
            bi = b[p - lo]
            v = zdata[p]
            g += v * max(bi, 0.0)
            h += v * v if bi > 0.0 else 0.0
    else:
        for p in range(lo, hi):
            bi = b[uint64(cindices[p])]
            v = zdata[p]
            g += v * max(bi, 0.0)
            h += v * v if bi > 0.0 else 0.0
    return -2.0 * g, 2.0 * h


@njit(cache=True, nogil=True, fastmath=_REASSOC)
def _loss_change(zdata, cindices, b, lo, hi, dense, d):
    r""":math:`\sum \max(b_r - d z_p, 0)^2 - \max(b_r, 0)^2` over a column's entries (the line search)."""
    t = 0.0
    if dense:
        for p in range(lo, hi):
            bi = b[p - lo]
            nb = max(bi - d * zdata[p], 0.0)
            bi = max(bi, 0.0)
            t += nb * nb - bi * bi
    else:
        for p in range(lo, hi):
            bi = b[uint64(cindices[p])]
            nb = max(bi - d * zdata[p], 0.0)
            bi = max(bi, 0.0)
            t += nb * nb - bi * bi
    return t


@njit(cache=True, nogil=True)
def _epochs(zdata, cindices, cindptr, xj_sq, w, b, index, istate, fstate, rng, tol, n_epochs, shrinking, dense):
    """On the scaled columns ``zdata`` and the scaled slacks ``b`` (:func:`scaled_columns`); ``dense``: every column
    holds every row in order (:func:`to_columns` of dense data: the row of entry ``p`` of column ``j`` is
    ``p - cindptr[j]``, ``cindices`` unused).  istate = [active_size, iteration]; fstate = [Gmax_old,
    Gnorm1_init, violation]. Returns 0 when converged."""
    m = w.shape[0]
    n_rows = uint64(b.shape[0])
    active = istate[0]
    g_max_old = fstate[0]
    g_norm1_init = fstate[1]
    sigma = 0.01
    for _ in range(n_epochs):
        g_max = 0.0
        g_norm1 = 0.0
        for s in range(active):
            k = s + rand_below(rng, active - s)
            t = index[s]
            index[s] = index[k]
            index[k] = t
        keep = 0
        s = 0
        while s < active:
            j = index[s]
            # the random order makes every column a round of cache misses: its start (cindptr), entries, weight
            # and bound, then the rows it touches; each is asked for a few columns ahead (see the module's text)
            if s + 8 < active:
                _prefetch(cindptr, index[s + 8])
            if s + 4 < active:
                q = index[s + 4]
                _prefetch(w, q)
                _prefetch(xj_sq, q)
                _prefetch(zdata, cindptr[q])
                if not dense:
                    _prefetch(cindices, cindptr[q])
            if s + 2 < active and not dense:
                q = index[s + 2]
                for p in range(cindptr[q], min(cindptr[q + 1], cindptr[q] + 4)):
                    _prefetch(b, cindices[p])
            lo = uint64(cindptr[j])
            hi = uint64(cindptr[j + 1])
            # a CSC column holding every row holds them in order, each once (to_columns of canonical rows): read it
            # as the dense layout, with no row indices (covlike, 60,000 x 54, 11 full columns of 55: the L1 fit
            # 0.52 -> 0.26 s; the gather of b through the row indices is not vectorised)
            full = dense or hi - lo == n_rows
            if hi - lo >= LONG_COLUMN:
                G, H = _column_sums(zdata, cindices, b, lo, hi, full)
            else:
                G = 0.0
                H = 0.0
                for p in range(lo, hi):
                    bi = b[p - lo if full else uint64(cindices[p])]
                    v = zdata[p]
                    G += v * max(bi, 0.0)
                    H += v * v if bi > 0.0 else 0.0
                G = -2.0 * G
                H = 2.0 * H
            H = max(H, 1e-12)
            Gp = G + 1.0
            Gn = G - 1.0
            wj = w[j]
            viol = 0.0
            if wj == 0.0:
                if Gp < 0.0:
                    viol = -Gp
                elif Gn > 0.0:
                    viol = Gn
                elif shrinking and Gp > g_max_old / m and Gn < -g_max_old / m:
                    s += 1  # shrunk: stays behind the kept columns (as dual_cd's epochs)
                    continue
            elif wj > 0.0:
                viol = abs(Gp)
            else:
                viol = abs(Gn)
            index[s] = index[keep]  # kept: to the front (see _linear_common.KEEP_THRESHOLDS)
            index[keep] = j
            keep += 1
            g_max = max(g_max, viol)
            g_norm1 += viol
            if Gp < H * wj:
                d = -Gp / H
            elif Gn > H * wj:
                d = -Gn / H
            else:
                d = -wj
            if abs(d) < 1e-12:
                s += 1
                continue
            delta = G * d + abs(wj + d) - abs(wj)
            # the loss change is at most G d + xj_sq d^2 (xj_sq[j] = sum_i z_ij^2 over all rows): when that
            # bound already passes the test, the step is taken without a pass over the column (LIBLINEAR's rule)
            if xj_sq[j] * d * d + G * d + abs(wj + d) - abs(wj) <= sigma * delta:
                for p in range(lo, uint64(cindptr[j + 1])):
                    b[p - lo if full else uint64(cindices[p])] -= d * zdata[p]
                w[j] = wj + d
                s += 1
                continue
            for _ls in range(20):
                if hi - lo >= LONG_COLUMN:
                    dl = _loss_change(zdata, cindices, b, lo, hi, full, d)
                else:
                    dl = 0.0
                    for p in range(lo, hi):
                        bi = b[p - lo if full else uint64(cindices[p])]
                        nb = max(bi - d * zdata[p], 0.0)
                        bi = max(bi, 0.0)
                        dl += nb * nb - bi * bi
                if dl + abs(wj + d) - abs(wj) <= sigma * delta:
                    for p in range(lo, uint64(cindptr[j + 1])):
                        b[p - lo if full else uint64(cindices[p])] -= d * zdata[p]
                    w[j] = wj + d
                    break
                d *= 0.5
                delta *= 0.5
            s += 1
        whole = active == m  # every variable visited: the stopping test may hold
        active = keep
        done, active, g_max_old, g_norm1_init = epoch_end(
            istate, fstate, g_norm1, g_norm1_init, g_max, g_max_old, tol, active, m, whole, KEEP_THRESHOLDS
        )
        if done:
            return 0
    istate[0] = active
    fstate[0] = g_max_old
    fstate[1] = g_norm1_init
    return 1


@njit(cache=True, nogil=True)
def scaled_columns(cdata, cindices, cindptr, scale, dense=False):
    r"""The columns as the epochs use them, :math:`z_{ij} = \sqrt{C_i}\,y_i\,x_{ij}` (``scale`` =
    :math:`\sqrt{C_i}\,y_i`), and :math:`\sum_i z_{ij}^2 = \sum_i C_i x_{ij}^2` per column (the line search's
    bound).  With the slacks kept scaled as well, :math:`\tilde b_i = \sqrt{C_i}\,b_i`, every term of the
    solver loses its :math:`C_i` and :math:`y_i`: :math:`L'_j = -2\sum_{\tilde b_i > 0} z_{ij}\tilde b_i`,
    :math:`L''_j = 2\sum_{\tilde b_i > 0} z_{ij}^2`, the loss :math:`\sum_i \max(0, \tilde b_i)^2`, a step
    :math:`\tilde b_i \mathrel{-}= d\,z_{ij}`; the loops then read one per-row array (:math:`\tilde b`)
    instead of three (LIBLINEAR multiplies its columns by :math:`y_i` for the same reason).  Rows of zero
    weight get :math:`z = \tilde b = 0`: no part in the loss, as before."""
    zdata = np.empty_like(cdata)
    m = cindptr.shape[0] - 1
    sq = np.zeros(m)
    for j in range(m):
        t = 0.0
        lo = uint64(cindptr[j])
        for p in range(lo, uint64(cindptr[j + 1])):
            v = cdata[p] * scale[p - lo if dense else uint64(cindices[p])]
            zdata[p] = v
            t += v * v
        sq[j] = t
    return zdata, sq


#: dense input with at least this fraction of nonzeros keeps every entry, column after column (no row indices: 8
#: bytes a value instead of CSC's 12, and the slacks read in order)
DENSE_COLUMNS_MIN_DENSITY = 0.5


#: :func:`fused_columns`' stand-in for the column values it does not make
_FUSED = np.ones(1)


def fused_columns(X, bias):
    """For dense X that :func:`to_columns` would keep whole (:data:`DENSE_COLUMNS_MIN_DENSITY`): its layout with
    the values left out (``_FUSED``), so that :func:`solve` makes the scaled columns straight from X
    (:func:`_scaled_dense_columns`) -- one pass and one array where the transpose and then the scaling made two
    (genes' 300 x 5,000 unscaled rows: two fresh 12 MB arrays, 10 of a 17 ms fit).  None for other X.  Only for a
    single problem: one-vs-rest problems share :func:`to_columns`' arrays."""
    if sp.issparse(X) or not X.size or np.count_nonzero(X) < DENSE_COLUMNS_MIN_DENSITY * X.size:
        return None
    n = X.shape[0]
    cols = X.shape[1] + (1 if bias > 0 else 0)
    return _FUSED, np.empty(0, dtype=np.int32), np.arange(0, n * cols + 1, n, dtype=np.int64)


def is_fused(columns):
    """Whether ``columns`` came from :func:`fused_columns` (then :func:`solve` needs X too)."""
    return columns[0] is _FUSED


def _scaled_dense_columns(X, bias, scale):
    """:func:`scaled_columns` of :func:`to_columns`' dense layout, made from X directly: ``(zdata, sq)``."""
    X = np.asarray(X)
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    n, d = X.shape
    cols = d + (1 if bias > 0 else 0)
    zdata = np.empty(n * cols)
    sq = np.empty(cols)
    _scale_transpose(X, float(bias), np.ascontiguousarray(scale, dtype=np.float64), zdata, sq)
    return zdata, sq


@njit(cache=True, nogil=True)
def _scale_transpose(X, bias, scale, zdata, sq):
    """``zdata[j n + i] = X[i, j] scale[i]`` (the bias column last, when ``bias > 0``) in blocks of 64 x 64, and
    ``sq[j]`` the column sums of squares."""
    n, d = X.shape
    for j0 in range(0, d, 64):
        j1 = min(j0 + 64, d)
        for i0 in range(0, n, 64):
            i1 = min(i0 + 64, n)
            for i in range(i0, i1):
                s = scale[i]
                for j in range(j0, j1):
                    zdata[j * n + i] = np.float64(X[i, j]) * s
    for j in range(d):
        t = 0.0
        for i in range(n):
            v = zdata[j * n + i]
            t += v * v
        sq[j] = t
    if bias > 0:
        t = 0.0
        for i in range(n):
            v = bias * scale[i]
            zdata[d * n + i] = v
            t += v * v
        sq[d] = t


def to_columns(X, bias):
    """CSC arrays ``(data, indices, indptr)`` of X with the constant bias column appended when ``bias > 0``
    (float64 for the line search).  Dense X of at least :data:`DENSE_COLUMNS_MIN_DENSITY` nonzeros: every entry,
    column after column (``indptr`` in steps of n) and an empty ``indices`` (:func:`is_dense_layout`)."""
    if not sp.issparse(X) and X.size and np.count_nonzero(X) >= DENSE_COLUMNS_MIN_DENSITY * X.size:
        n = X.shape[0]
        cols = X.shape[1] + (1 if bias > 0 else 0)
        F = np.empty((cols, n))
        F[: X.shape[1]] = np.asarray(X, dtype=np.float64).T
        if bias > 0:
            F[-1] = float(bias)
        return F.ravel(), np.empty(0, dtype=np.int32), np.arange(0, n * cols + 1, n, dtype=np.int64)
    if not sp.issparse(X):
        X = np.asarray(X)
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        return _dense_columns(np.ascontiguousarray(X), float(bias), _full_count(X.shape[0]))
    X = X.tocsr()
    n, nf = X.shape
    parts = _transpose_parts(X.nnz, nf)
    split = np.searchsorted(X.indptr, (np.arange(parts + 1) * X.nnz) // parts).astype(np.int64)
    split[0], split[-1] = 0, n
    split = np.maximum.accumulate(np.minimum(split, n))
    transpose = _csr_columns_par if parts > 1 else _csr_columns_ser
    return transpose(X.data, X.indices, X.indptr, n, nf, float(bias), split, _full_count(n))


#: CSC columns holding at least this share of the rows are written out whole (:func:`_csr_columns`): a zero
#: entry adds exactly 0 to every column sum and leaves the slack it would update as it is, and the epochs read a
#: full column in order with no row indices (see :func:`_epochs`).  Session 41, L1 fits against none written out:
#: a9a 0.90-0.94, ijcnn1 0.94-1.01, covlike 0.86, mnist 0.92 at C = 1 (0.99 at 0.01), text100 0.98, hashed300k
#: 0.97; at 0.15 mnist 1.08 and a9a 1.09 (too many zeros read)
FULL_COLUMN_SHARE = 0.5


def _full_count(n):
    """The stored values from which a column of n rows is written out whole (:data:`FULL_COLUMN_SHARE`)."""
    return max(int(np.ceil(FULL_COLUMN_SHARE * n)), 1)


@njit(cache=True, nogil=True)
def _dense_columns(X, bias, min_count):
    """:func:`_csr_columns` of dense rows ``X``, their nonzeros only, except that a column of at least
    ``min_count`` nonzeros keeps every row (as :func:`_csr_columns` writes it): one counting and one
    scattering pass over X.  (Through ``scipy.sparse.csr_matrix`` first: covlike's 60,000 x 54 rows, 22% nonzeros,
    26 ms of a 520 ms L1 fit; here ~5.)"""
    n, nf = X.shape
    counts = np.zeros(nf, dtype=np.int64)
    for i in range(n):
        for j in range(nf):
            if X[i, j] != 0:
                counts[j] += 1
    whole = counts >= min_count
    n_cols = nf + (1 if bias > 0 else 0)
    out = np.empty(n_cols + 1, dtype=np.int64)
    out[0] = 0
    for j in range(nf):
        out[j + 1] = out[j] + (n if whole[j] else counts[j])
    pos = out[nf]
    nnz = pos + (n if bias > 0 else 0)
    cdata = np.empty(nnz)
    cind = np.empty(nnz, dtype=np.int32)
    nxt = out[:nf].copy()  # each column's next free slot
    for i in range(n):
        for j in range(nf):
            v = X[i, j]
            if v != 0 or whole[j]:
                p = nxt[j]
                cdata[p] = v
                cind[p] = i
                nxt[j] = p + 1
    if bias > 0:
        for i in range(n):
            cdata[pos + i] = bias
            cind[pos + i] = i
        out[n_cols] = nnz
    return cdata, cind, out


#: :func:`to_columns` transposes CSR rows on several threads (at most :data:`TRANSPOSE_MAX_PARTS`) when there are
#: at least this many stored values ...
TRANSPOSE_PARALLEL_MIN_VALUES = 100_000
#: ... and at most this many columns times threads per stored value (each thread counts every column: 2**20
#: hashed columns for 300,000 values would cost more than the transpose)
TRANSPOSE_MAX_COLUMNS_PER_VALUE = 0.5
TRANSPOSE_MAX_PARTS = 4


def _transpose_parts(nnz, n_cols):
    from .._threads import cores

    if nnz < TRANSPOSE_PARALLEL_MIN_VALUES:
        return 1
    parts = min(cores(), TRANSPOSE_MAX_PARTS)
    while parts > 1 and n_cols * parts > TRANSPOSE_MAX_COLUMNS_PER_VALUE * nnz:
        parts -= 1
    return max(parts, 1)


def _csr_columns(data, indices, indptr, n, nf, bias, split, min_count):
    """CSC arrays ``(data float64, row indices int32 in increasing order, indptr int64)`` of CSR rows, with the
    constant column ``bias`` appended when ``bias > 0``: one counting and one scattering pass, each part of the
    rows (``split``: row boundaries) on its own thread; part ``t``'s rows go before part ``t + 1``'s in every
    column, so each column's rows come out in order.  A column of at least ``min_count`` stored values is written
    out whole (:data:`FULL_COLUMN_SHARE`): zeros first, then each value at its row's position, in the same pass.
    scipy's ``csr_tocsc`` then ``hstack`` and ``sort_indices`` took 9 + 2 ms of a 34 ms L1 fit on 20,000 x 47,000
    text rows (1.5 million values); writing the whole columns in a second pass over every value (until session
    76) 9 ms of a 100 ms fit of 80,000 rows of 29 values."""
    parts = split.shape[0] - 1
    counts = np.zeros((parts, nf), dtype=np.int64)
    for t in prange(parts):
        for k in range(indptr[split[t]], indptr[split[t + 1]]):
            counts[t, uint64(indices[k])] += 1
    n_cols = nf + (1 if bias > 0 else 0)
    cptr = np.empty(n_cols + 1, dtype=np.int64)
    whole = np.zeros(nf, dtype=np.bool_)
    cptr[0] = 0
    pos = 0
    for j in range(nf):
        cptr[j] = pos
        total = 0
        for t in range(parts):
            total += counts[t, j]
        if total >= min_count:
            whole[j] = True
            pos += n
            continue
        for t in range(parts):
            c = counts[t, j]
            counts[t, j] = pos
            pos += c
    cptr[nf] = pos
    nnz = pos + (n if bias > 0 else 0)
    cdata = np.empty(nnz)
    cind = np.empty(nnz, dtype=np.int32)
    for j in prange(nf):
        if whole[j]:
            o = cptr[j]
            for i in range(n):
                cdata[o + i] = 0.0
                cind[o + i] = i
    for t in prange(parts):
        for i in range(split[t], split[t + 1]):
            for k in range(indptr[i], indptr[i + 1]):
                j = uint64(indices[k])
                if whole[j]:  # (+=: a row that repeats a column adds up, as its sum would)
                    cdata[cptr[j] + i] += data[k]
                else:
                    p = counts[t, j]
                    cdata[p] = data[k]
                    cind[p] = i
                    counts[t, j] = p + 1
    if bias > 0:
        for i in range(n):
            cdata[pos + i] = bias
            cind[pos + i] = i
        cptr[n_cols] = nnz
    return cdata, cind, cptr


_csr_columns_par, _csr_columns_ser = parallel_and_serial(_csr_columns, nogil=True)


def is_dense_layout(cdata, cindices):
    """Whether :func:`to_columns` gave the dense layout (every entry, no row indices)."""
    return cindices.shape[0] == 0 and cdata.shape[0] > 0


#: :func:`solve` drops the columns with no stored value unless at least this fraction of all columns hold one
STORED_COLUMNS_MAX = 0.9


def _stored_columns(cptr):
    """The columns holding a stored value, or None when nearly all do (at least :data:`STORED_COLUMNS_MAX`).

    A column without one has :math:`L'_j = 0`, so its weight is 0 at the optimum and never leaves 0: the epochs
    only visit it, a cache miss each, every time they run over all columns (hashed300k: 334,000 of 2**20
    features stored nowhere, a third of each such epoch).  Dropping them leaves CSC's values and row numbers as
    they are (an empty column owns none); only the column starts are taken at the kept columns."""
    counts = np.diff(cptr)
    kept = np.flatnonzero(counts)
    if kept.shape[0] == 0 or kept.shape[0] >= STORED_COLUMNS_MAX * counts.shape[0]:
        return None
    return kept


def objective(w, b):
    """:math:`\\|w\\|_1 + \\sum_i C_i \\max(0, b_i)^2` from the scaled slacks :math:`\\tilde b_i = \\sqrt{C_i} b_i`."""
    bp = np.maximum(b, 0.0)
    return float(np.abs(w).sum() + bp @ bp)


def solve(
    X,
    bias,
    y,
    C,
    *,
    tol=0.01,
    max_iter=1000,
    shrinking=True,
    seed=0,
    w0=None,
    columns=None,
    callback=None,
    callback_info=None,
    time_limit=None,
    verbose=False,
):
    """L1-regularised squared-hinge SVM on ``X`` (dense or CSR; converted to columns) with bias feature ``bias``
    (<= 0: none); ``y`` in {-1, +1}; ``w0`` a warm start; ``columns``: :func:`to_columns` of X computed before
    (one-vs-rest problems share them; X is then unused, except after :func:`fused_columns`).  Returns a
    :class:`~maxmargin.solvers.dual_cd.LinearFit` (no dual variables)."""
    y = np.ascontiguousarray(y, dtype=np.float64)
    C = np.ascontiguousarray(C, dtype=np.float64)
    cdata, cind, cptr = (fused_columns(X, bias) or to_columns(X, bias)) if columns is None else columns
    m = cptr.shape[0] - 1
    kept = None if cdata is _FUSED else _stored_columns(cptr)
    if kept is not None:  # solve on the stored columns only; the others' weights are 0 (see _stored_columns)
        fit = solve(
            None,
            bias,
            y,
            C,
            tol=tol,
            max_iter=max_iter,
            shrinking=shrinking,
            seed=seed,
            w0=None if w0 is None else np.asarray(w0, dtype=np.float64)[kept],
            columns=(cdata, cind, np.append(cptr[kept], cptr[-1])),
            callback=callback,
            callback_info=callback_info,
            time_limit=time_limit,
            verbose=verbose,
        )
        w = np.zeros(m)
        w[kept] = fit.w
        fit.w = w
        return fit
    w = np.zeros(m) if w0 is None else np.array(w0, dtype=np.float64)
    root_c = np.sqrt(C)
    dense = is_dense_layout(cdata, cind)
    if cdata is _FUSED:  # dense rows: the scaled columns made straight from X (:func:`fused_columns`)
        zdata, xj_sq = _scaled_dense_columns(X, bias, root_c * y)
    else:
        zdata, xj_sq = scaled_columns(cdata, cind, cptr, root_c * y, dense)
    b = root_c.copy()  # the scaled slacks sqrt(C_i) (1 - y_i w.x_i) at w = 0
    index = np.arange(m, dtype=np.int64)
    istate = np.array([m, 0], dtype=np.int64)
    fstate = np.array([INF, -1.0, INF])
    if w0 is not None:
        Zc = zdata.reshape(m, y.shape[0]).T if dense else sp.csc_matrix((zdata, cind, cptr), shape=(y.shape[0], m))
        b = root_c - Zc @ w
        # relative stopping rule: the violations at w = 0, as a cold start measures them
        fstate[1] = float(np.maximum(np.abs(2.0 * (Zc.T @ root_c)) - 1.0, 0.0).sum())
    rng = rng_state(seed)
    # LIBLINEAR's tolerance for this solver: tol * max(min(#pos, #neg), 1) / n (as tron.solve)
    eff_tol = float(balanced_tol(y, float(tol)))

    def step(k):
        rc = _epochs(
            zdata, cind, cptr, xj_sq, w, b, index, istate, fstate, rng, eff_tol, int(k), bool(shrinking), dense
        )
        return rc, istate[1]

    def report():
        return objective(w, b), fstate[2]

    status, it = drive(
        step,
        max_iter,
        tol,
        callback=callback,
        callback_info=callback_info,
        time_limit=time_limit,
        report=report,
        verbose=verbose,
        name="cd-l1",
    )
    return LinearFit(w, None, objective(w, b), None, it, fstate[2], status)
