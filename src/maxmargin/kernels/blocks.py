r"""Kernel blocks between two index sets of one training matrix, compiled.

``block(bd, ra, rb, out)`` writes :math:`K(x_{ra_i}, x_{rb_j})` into
``out[:len(ra), :len(rb)]`` without copying the training data beyond one block:
the one-vs-one problems (:mod:`maxmargin.solvers.ovo`) address their rows by
index arrays into X.  :class:`BlockData` holds X as plain arrays for compiled
code; how the dot products are formed is decided once, from the data:

==========  =================================================================
mode        how
==========  =================================================================
narrow      dense with at most ``NARROW_D`` features: a loop vectorised along
            the columns of the block (BLAS is slow on thin products)
dense       dense: the two sides gathered, one BLAS product
sparse      CSR: each row of ``ra`` scattered into a dense work vector, each
            row of ``rb`` gathers its nonzeros from it (cost by nonzeros); when
            one side is used for many blocks (a class of a one-vs-one problem),
            it is turned into columns once (:func:`columns_of`) and each
            block costs only the products of nonzeros that share a feature
            (:func:`block_by_columns`)
gram        precomputed kernel: entries of the Gram matrix
==========  =================================================================

Every dot product becomes a kernel value through
:func:`maxmargin.kernels.formulas.transform`, one block row at a time.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import scipy.sparse as sp
from numba import njit, uint64

from .._ready import canonical_csr
from .formulas import PRECOMPUTED, RBF, check_code, exp_nonpos, transform
from .objects import narrow_dots, row_norms_sq

#: dense data with at most this many features: compiled loop instead of BLAS
NARROW_D = 32
#: :func:`_narrow` forms rows of at least this many columns in place (row views); fewer, in a buffer without views
NARROW_VIEWS_MIN_COLS = 32
NARROW, DENSE, SPARSE, GRAM = 0, 1, 2, 3

BlockData = namedtuple("BlockData", "mode code gamma coef0 degree X data indices indptr sq n_features")


def block_mode(X, kernel):
    """The mode :func:`block_data` gives ``X`` (GRAM, SPARSE, NARROW or DENSE), without building it."""
    if kernel.code == PRECOMPUTED:
        return GRAM
    if sp.issparse(X):
        return SPARSE
    return NARROW if X.shape[1] <= NARROW_D else DENSE


def block_data(X, kernel):
    """:class:`BlockData` for training data ``X`` (dense or CSR; the Gram matrix for a
    precomputed kernel) and a built-in or precomputed :class:`~maxmargin.kernels.Kernel`."""
    empty_f, empty_i = np.zeros(1), np.zeros(1, dtype=np.int64)
    if kernel.code == PRECOMPUTED:
        if kernel.name == "callable":
            raise ValueError("a callable kernel has no compiled blocks")
        G = np.ascontiguousarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)
        return BlockData(GRAM, PRECOMPUTED, 0.0, 0.0, 0.0, G, empty_f, empty_i, empty_i, empty_f, 0)
    code = check_code(kernel.code)
    gamma, coef0, degree = (float(v) for v in kernel.params)
    sq = np.ascontiguousarray(row_norms_sq(X), dtype=np.float64) if code == RBF else np.zeros(X.shape[0])
    if sp.issparse(X):
        Xc = canonical_csr(sp.csr_matrix(X, dtype=np.float64))
        return BlockData(
            SPARSE,
            code,
            gamma,
            coef0,
            degree,
            np.zeros((1, 1)),
            Xc.data,
            Xc.indices.astype(np.int64),
            Xc.indptr.astype(np.int64),
            sq,
            X.shape[1],
        )
    Xd = np.ascontiguousarray(X, dtype=np.float64)
    mode = NARROW if Xd.shape[1] <= NARROW_D else DENSE
    return BlockData(mode, code, gamma, coef0, degree, Xd, empty_f, empty_i, empty_i, sq, X.shape[1])


@njit(cache=True, nogil=True)
def _rbf_exponents(vals, base, a, sqc, gamma):
    """``vals[base + t]`` (a dot product) becomes the RBF exponent, as :func:`maxmargin.kernels.formulas.transform`
    forms it (no fused multiply-add: the same bits)."""
    for t in range(sqc.shape[0]):
        dist = a + sqc[t] - 2.0 * vals[base + t]
        vals[base + t] = -gamma * max(dist, 0.0)


@njit(cache=True, nogil=True, fastmath={"contract"})
def _narrow(X, code, gamma, coef0, degree, sq, ra, rb, out):
    na, nb, d = ra.shape[0], rb.shape[0], X.shape[1]
    ZT = np.empty((d, nb))
    sqb = np.empty(nb)
    for j in range(nb):
        sqb[j] = sq[rb[j]]
        for f in range(d):
            ZT[f, j] = X[rb[j], f]
    scratch = np.empty(nb)
    if nb >= NARROW_VIEWS_MIN_COLS:
        for i in range(na):
            o = out[i][:nb]
            narrow_dots(X[ra[i]], ZT, 0, o)
            transform(o, code, gamma, coef0, degree, sq[ra[i]], sqb, scratch)
        return
    # few columns (the one-vs-one pairs of small classes): the same sums without row views, each of which costs two
    # atomic reference counts -- at 5 x 5 entries and 20 features, more than the products -- into one buffer whose
    # kernel values are formed in one pass (transform's arithmetic, RBF's exponent written out here)
    vals = np.empty(na * nb)
    spare = np.empty(na * nb)
    for i in range(na):
        r = uint64(ra[i])
        base = i * nb
        f = 0
        while f < d:
            x0 = X[r, f]
            x1 = X[r, f + 1] if f + 1 < d else 0.0
            x2 = X[r, f + 2] if f + 2 < d else 0.0
            x3 = X[r, f + 3] if f + 3 < d else 0.0
            f1 = min(f + 1, d - 1)
            f2 = min(f + 2, d - 1)
            f3 = min(f + 3, d - 1)
            if f == 0:
                for t in range(nb):
                    vals[base + t] = (x0 * ZT[f, t] + x1 * ZT[f1, t]) + (x2 * ZT[f2, t] + x3 * ZT[f3, t])
            else:
                for t in range(nb):
                    vals[base + t] += (x0 * ZT[f, t] + x1 * ZT[f1, t]) + (x2 * ZT[f2, t] + x3 * ZT[f3, t])
            f += 4
        if d == 0:
            for t in range(nb):
                vals[base + t] = 0.0
        if code == RBF:
            _rbf_exponents(vals, base, sq[r], sqb, gamma)
    if code == RBF:
        exp_nonpos(vals, spare)
    else:  # the other kernels' values depend on the dot product alone
        transform(vals, code, gamma, coef0, degree, 0.0, sqb, spare)
    for i in range(na):
        for t in range(nb):
            out[i, t] = vals[i * nb + t]


@njit(cache=True, nogil=True)
def _dense(X, code, gamma, coef0, degree, sq, ra, rb, out):
    na, nb, d = ra.shape[0], rb.shape[0], X.shape[1]
    Xa = np.empty((na, d))
    Xb = np.empty((nb, d))
    for i in range(na):
        Xa[i] = X[ra[i]]
    for j in range(nb):
        Xb[j] = X[rb[j]]
    D = np.dot(Xa, Xb.T)
    sqb = np.empty(nb)
    for j in range(nb):
        sqb[j] = sq[rb[j]]
    scratch = np.empty(nb)
    for i in range(na):
        o = out[i][:nb]
        o[:] = D[i]
        transform(o, code, gamma, coef0, degree, sq[ra[i]], sqb, scratch)


@njit(cache=True, nogil=True)
def _sparse(data, indices, indptr, n_features, code, gamma, coef0, degree, sq, ra, rb, out):
    na, nb = ra.shape[0], rb.shape[0]
    work = np.zeros(n_features)
    sqb = np.empty(nb)
    for j in range(nb):
        sqb[j] = sq[rb[j]]
    scratch = np.empty(nb)
    for i in range(na):
        r = ra[i]
        o = out[i][:nb]
        scattered_dots(work, data, indices, indptr, r, rb, o)
        transform(o, code, gamma, coef0, degree, sq[r], sqb, scratch)


@njit(cache=True, nogil=True)
def block(bd, ra, rb, out):
    """``out[:len(ra), :len(rb)] = K(x_ra, x_rb)`` (``bd`` a :class:`BlockData` as a tuple)."""
    mode, code, gamma, coef0, degree, X, data, indices, indptr, sq, n_features = bd
    if mode == NARROW:
        _narrow(X, code, gamma, coef0, degree, sq, ra, rb, out)
    elif mode == DENSE:
        _dense(X, code, gamma, coef0, degree, sq, ra, rb, out)
    elif mode == SPARSE:
        _sparse(data, indices, indptr, n_features, code, gamma, coef0, degree, sq, ra, rb, out)
    else:
        for i in range(ra.shape[0]):
            for j in range(rb.shape[0]):
                out[i, j] = X[ra[i], rb[j]]


@njit(cache=True, nogil=True, inline="always")
def postings_dots(o, bidx, bval, k0, k1, cptr, crow, cval):
    """``o[c] += x . z_c`` for the sparse row x (nonzeros ``k0..k1-1`` of ``bidx, bval``) and the rows z_c held
    as an inverted index (:func:`columns_of`): each nonzero of x meets only the nonzeros of its own feature, the
    features in the row's order.  Unsigned positions: no negative-index test on each load."""
    for k in range(uint64(k0), uint64(k1)):
        f = bidx[k]
        v = bval[k]
        for s in range(uint64(cptr[f]), uint64(cptr[f + 1])):
            o[uint64(crow[s])] += v * cval[s]


@njit(cache=True, nogil=True, inline="always")
def touched_dots(dv, mark, lst, r, bidx, bval, k0, k1, cptr, crow, cval):
    """:func:`postings_dots` for the row numbered ``r``, keeping only the columns it meets: ``dv[c] = x . z_c`` for
    each column c it shares a feature with, listed once in ``lst[:nt]`` (nt returned); ``mark[c] == r`` marks them
    (``mark`` starts at -1, and rows are numbered apart, so no clearing between rows).  The same sums in the same
    order as :func:`postings_dots` from zeros."""
    nt = 0
    for k in range(uint64(k0), uint64(k1)):
        f = bidx[k]
        v = bval[k]
        for s in range(uint64(cptr[f]), uint64(cptr[f + 1])):
            c = crow[s]
            if mark[c] != r:
                mark[c] = r
                dv[c] = 0.0 + v * cval[s]
                lst[nt] = c
                nt += 1
            else:
                dv[c] += v * cval[s]
    return nt


@njit(cache=True, nogil=True, inline="always")
def scattered_dots(work, data, indices, indptr, i, targets, out):
    """``out[j] = x_i . x_targets[j]`` for CSR rows: x_i scattered into ``work`` (zeros, as long as the features;
    zeros again after), each target's nonzeros against it."""
    for q in range(uint64(indptr[i]), uint64(indptr[i + 1])):
        work[uint64(indices[q])] = data[q]
    for j in range(targets.shape[0]):
        t = targets[j]
        s = 0.0
        for q in range(uint64(indptr[t]), uint64(indptr[t + 1])):
            s += work[uint64(indices[q])] * data[q]
        out[j] = s
    for q in range(uint64(indptr[i]), uint64(indptr[i + 1])):
        work[uint64(indices[q])] = 0.0


@njit(cache=True, nogil=True)
def columns_of(data, indices, indptr, n_features, rows):
    """The rows ``rows`` of a CSR matrix as columns (CSC, local column numbers 0..len(rows)-1):
    ``(cptr, crow, cval)``, the nonzeros of feature f at ``cptr[f]:cptr[f+1]``."""
    cptr = np.zeros(n_features + 1, dtype=np.int64)
    for c in range(rows.shape[0]):
        r = rows[c]
        for q in range(indptr[r], indptr[r + 1]):
            cptr[indices[q] + 1] += 1
    for f in range(n_features):
        cptr[f + 1] += cptr[f]
    nnz = cptr[n_features]
    crow = np.empty(nnz, dtype=np.int64)
    cval = np.empty(nnz)
    pos = cptr[:n_features].copy()
    for c in range(rows.shape[0]):
        r = rows[c]
        for q in range(indptr[r], indptr[r + 1]):
            f = indices[q]
            crow[pos[f]] = c
            cval[pos[f]] = data[q]
            pos[f] += 1
    return cptr, crow, cval


@njit(cache=True, nogil=True)
def block_by_columns(data, indices, indptr, code, gamma, coef0, degree, sq, ra, cptr, crow, cval, sqb, out):
    """``out[i, :nb] = K(x_ra[i], z)`` for the rows z given as columns (:func:`columns_of`,
    squared norms ``sqb``): each nonzero of x meets only the nonzeros of its own feature,
    so a block costs the number of (nonzero, nonzero) pairs that share a feature."""
    nb = sqb.shape[0]
    scratch = np.empty(nb)
    for i in range(ra.shape[0]):
        o = out[i][:nb]
        o[:] = 0.0
        r = ra[i]
        postings_dots(o, indices, data, indptr[r], indptr[r + 1], cptr, crow, cval)
        transform(o, code, gamma, coef0, degree, sq[r], sqb, scratch)


def kernel_block(bd, ra, rb):
    """K(x_ra, x_rb) as a new array (for tests and small callers)."""
    ra = np.ascontiguousarray(ra, dtype=np.int64)
    rb = np.ascontiguousarray(rb, dtype=np.int64)
    out = np.empty((ra.shape[0], rb.shape[0]))
    block(tuple(bd), ra, rb, out)
    return out
