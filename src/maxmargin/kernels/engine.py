r"""The kernel-row engine: kernel rows for batches of data rows, on all cores.

:class:`KernelRows` computes ``K(x_i, X[cols])`` for a batch of rows ``i`` into
a buffer (the batched solver's working-set rows, the gradient rebuild, the
one-vs-one blocks).  :func:`decide` picks, in this one place, how the dot products
are formed for the data at hand:

=============  ==========================================================
path           when, and how
=============  ==========================================================
``narrow``     dense, at most ``ROWS_SMALL_D`` features: a compiled loop
               vectorised along the columns (BLAS is slow on thin products)
``dense``      dense: column chunks in parallel, one BLAS product each
``sparse``     CSR with at most ``SPARSE_ROWS_MAX_DENSITY`` nonzeros and a
               small feature space: each new row costs nnz(row) vector
               updates over a transposed chunk of X held in cache
``wide``       CSR with many features (or 1,000+ and few postings a value):
               the columns as an inverted index (feature -> the columns
               holding it), each row's nonzeros meet only their own
               feature's postings; rows in parallel.  Very sparse rows
               (few postings) visit only the columns they share a feature
               with; every other value is f(0) (RBF: a product of two
               exponentials): ``_rows_touched_py``, ``_times_touched_py``
``gram``       precomputed or callable kernel: rows of the Gram matrix
=============  ==========================================================

Every path ends in :func:`maxmargin.kernels.formulas.transform`, applied to a
chunk while it is in cache.  A second array backend (GPU arrays, say) would be
one more module with a class of the same three methods (``set_columns``,
``compute``, ``times``) chosen by :func:`decide`.
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp
from numba import njit, prange, uint64

from .._jit import parallel_and_serial
from .._ready import canonical_csr
from .._threads import one_blas_thread, others_running
from .blocks import columns_of, postings_dots, touched_dots
from .formulas import EXP_MIN_ARG, PRECOMPUTED, RBF, dot_prefix, exp_nonpos, transform
from .objects import densifies_cheaply, densify_if_cheap, row_norms_sq

#: kernel rows of data with at most this many features come from a compiled loop;
#: wider data goes through BLAS (measured: the loop wins at 3 features, loses 3x at 22)
ROWS_SMALL_D = 8


# The compiled loops below index 1-D slices from 0 (``o = out[r][lo:hi]``, then
# ``o[t]``): with an offset index (``out[r, lo + t]``) Numba's negative-index
# handling stops LLVM from vectorising them (measured: 3-4x slower).


CHUNK = 2048
#: sparse input with at most this fraction of nonzeros computes kernel rows from
#: its sparse rows (nnz updates per column) rather than a dense product (d per column)
SPARSE_ROWS_MAX_DENSITY = 0.25
#: ... and fewer than this many features, or too many postings a kernel value (:func:`_inverted_index_pays`): from
#: here the transposed chunk (features x 512 columns, 4 MB at 1,000 features) leaves the L2 cache, and its clearing
#: costs features x columns a call, so the inverted index ("wide") takes its place.  Measured (session 47, 256
#: kernel rows against 8,000, RBF, wide / sparse time): uniform random rows at 1,000 features 0.50-0.75, 3,000
#: 0.26-0.35; Zipf-distributed features (frequent ones in most rows) 1,000 x 15-37 a row 0.77-0.96, 2,000 0.66,
#: 4,000 0.48; below it the transposed chunk wins: a9a (123 features) 1.62, mushrooms (112) 1.72, sparse40k (300)
#: 1.49, 300 Zipf features 1.07 (100-300 uniform: 0.7-1.03)
SPARSE_ROWS_MAX_FEATURES = 1000
#: ... where the rows are sparse enough (:func:`_inverted_index_pays`): uniform random rows, 256 kernel rows against
#: 8,000: 1,000 features x 100 non-zeros a row 0.53, x 200 1.20; 2,000 x 200 0.73, x 400 1.99; 4,000 x 800 1.29;
#: Zipf, 1,000 x 92 a row 1.36
WIDE_PER_NONZERO = 0.11
WIDE_PER_FEATURE = 1.0 / 1500
SPARSE_CHUNK = 512
#: the gradient rebuild of dense data with at most this many features runs in the
#: fused compiled loop (:func:`_times_sparse_py`) rather than BLAS on chunks (:func:`times_blas`); on an AVX-512
#: host :data:`ROWS_SMALL_D` (set below, with FUSED_DENSE_PREDICT)
TIMES_AXPY_MAX_D = 64


def _rows_dense_py(X, Xb, sq_b, sq, code, gamma, coef0, degree, out, dest, width):
    """out[dest[r]] = k(Xb[r], X): column chunks of ``width`` (:func:`chunk_width`) in parallel, each one BLAS
    product (run with BLAS limited to one thread) followed by the kernel transform while the chunk is still
    in cache."""
    n = X.shape[0]
    q = Xb.shape[0]
    nch = (n + width - 1) // width
    for c in prange(nch):
        lo = c * width
        hi = min(lo + width, n)
        D = np.dot(Xb, X[lo:hi].T)
        scratch = np.empty(hi - lo)
        sqc = sq[lo:hi]
        for r in range(q):
            o = out[dest[r]][lo:hi]
            o[:] = D[r]
            transform(o, code, gamma, coef0, degree, sq_b[r], sqc, scratch)


def _rows_small_py(XcT, Xb, sq_b, sq, code, gamma, coef0, degree, out, dest, width):
    """As :func:`_rows_dense_py` for few features: the products by a compiled loop
    over ``XcT`` (features x columns), vectorised along the columns."""
    d, n = XcT.shape
    q = Xb.shape[0]
    nch = (n + width - 1) // width
    for c in prange(nch):
        lo = c * width
        hi = min(lo + width, n)
        w = hi - lo
        scratch = np.empty(w)
        sqc = sq[lo:hi]
        for r in range(q):
            o = out[dest[r]][lo:hi]
            f = 0
            while f < d:  # up to four features per pass over the chunk
                x0 = Xb[r, f]
                x1 = Xb[r, f + 1] if f + 1 < d else 0.0
                x2 = Xb[r, f + 2] if f + 2 < d else 0.0
                x3 = Xb[r, f + 3] if f + 3 < d else 0.0
                z0 = XcT[f][lo:hi]
                z1 = XcT[min(f + 1, d - 1)][lo:hi]
                z2 = XcT[min(f + 2, d - 1)][lo:hi]
                z3 = XcT[min(f + 3, d - 1)][lo:hi]
                if f == 0:
                    for t in range(w):
                        o[t] = (x0 * z0[t] + x1 * z1[t]) + (x2 * z2[t] + x3 * z3[t])
                else:
                    for t in range(w):
                        o[t] += (x0 * z0[t] + x1 * z1[t]) + (x2 * z2[t] + x3 * z3[t])
                f += 4
            transform(o, code, gamma, coef0, degree, sq_b[r], sqc, scratch)


#: the dense and narrow rows cut fewer than EVEN_BELOW chunks of CHUNK columns into a multiple of CHUNKS_MULTIPLE
#: chunks of like width (at least MIN_CHUNK columns each): even for 2 and 4 threads, and the same cut whatever the
#: threads, so that the values do not depend on them
EVEN_BELOW = 8
CHUNKS_MULTIPLE = 4
MIN_CHUNK = 256


def chunk_width(n):
    """Columns a chunk of the dense and narrow rows over ``n`` columns: :data:`CHUNK`, except that fewer than
    :data:`EVEN_BELOW` chunks become a multiple of :data:`CHUNKS_MULTIPLE` of like width where each keeps
    :data:`MIN_CHUNK` columns, so that no thread is left with a chunk more than the others (5,000 columns in
    chunks of 2048, 2048 and 904 kept one of two threads idle a third of the time: a 5,000 x 2,000 dense fit used
    1.4 cores).  The cut depends on ``n`` only: a chunk's BLAS product may round differently from the same
    columns in another chunk."""
    nch = max(1, -(-n // CHUNK))
    if nch < EVEN_BELOW and n >= CHUNKS_MULTIPLE * MIN_CHUNK:
        nch = -(-nch // CHUNKS_MULTIPLE) * CHUNKS_MULTIPLE
        return max(1, -(-n // nch))
    return CHUNK


def _transpose_chunk(cptr, cidx, cval, lo, hi, d, T):
    """T[:d, :hi-lo] = rows lo..hi-1 of a CSR matrix, transposed (features x rows), zeros
    included (T's rows are padded by the caller: row strides of a power of two make the
    column writes collide in cache)."""
    w = hi - lo
    for f in range(d):
        T[f, :w] = 0.0
    for t in range(w):
        # unsigned: no negative-index test on each load (see rowcache.compute_row)
        for q in range(uint64(cptr[lo + t]), uint64(cptr[lo + t + 1])):
            T[uint64(cidx[q]), t] = cval[q]


def _sparse_row_dot(o, T, bidx, bval, k0, k1):
    """o[:] = sum_k bval[k] T[bidx[k], :w] over the nonzeros k0..k1 of one sparse row,
    up to four nonzeros per pass over ``o`` (missing ones count with value 0)."""
    w = o.shape[0]
    if k1 <= k0:
        o[:] = 0.0
        return
    k = k0
    while k < k1:
        last = k1 - 1
        v0 = bval[k]
        v1 = bval[k + 1] if k + 1 < k1 else 0.0
        v2 = bval[k + 2] if k + 2 < k1 else 0.0
        v3 = bval[k + 3] if k + 3 < k1 else 0.0
        T0 = T[bidx[k]]
        T1 = T[bidx[min(k + 1, last)]]
        T2 = T[bidx[min(k + 2, last)]]
        T3 = T[bidx[min(k + 3, last)]]
        if k == k0:
            for t in range(w):
                o[t] = (v0 * T0[t] + v1 * T1[t]) + (v2 * T2[t] + v3 * T3[t])
        else:
            for t in range(w):
                o[t] += (v0 * T0[t] + v1 * T1[t]) + (v2 * T2[t] + v3 * T3[t])
        k += 4


def _rows_sparse_py(cptr, cidx, cval, d, bptr, bidx, bval, sq_b, sq, code, gamma, coef0, degree, out, dest):
    """out[dest[r]] = k(b_r, X) for sparse rows b_r (CSR arrays ``bptr, bidx, bval``) and
    the columns X (CSR arrays ``cptr, cidx, cval``, never densified as a whole): each row
    costs nnz(b_r) vector updates per column instead of d, over a transposed chunk of X
    held in cache (sparse data such as a9a, 11% nonzeros)."""
    n = cptr.shape[0] - 1
    q = bptr.shape[0] - 1
    nch = (n + SPARSE_CHUNK - 1) // SPARSE_CHUNK
    for c in prange(nch):
        lo = c * SPARSE_CHUNK
        hi = min(lo + SPARSE_CHUNK, n)
        w = hi - lo
        T = np.empty((d, w + 8))
        _transpose_chunk(cptr, cidx, cval, lo, hi, d, T)
        scratch = np.empty(w)
        sqc = sq[lo:hi]
        for r in range(q):
            o = out[dest[r]][lo:hi]
            _sparse_row_dot(o, T, bidx, bval, bptr[r], bptr[r + 1])
            transform(o, code, gamma, coef0, degree, sq_b[r], sqc, scratch)


def _times_sparse_py(cptr, cidx, cval, d, bptr, bidx, bval, sq_b, sq, code, gamma, coef0, degree, coef, res):
    """res[r] = sum_j k(b_r, X[j]) coef[j] (the gradient rebuild) for sparse rows b_r and
    the rows X[j] in CSR arrays: blocks of rows in parallel, kernel values never kept
    beyond one chunk."""
    n = cptr.shape[0] - 1
    q = bptr.shape[0] - 1
    nb = (q + SPARSE_CHUNK - 1) // SPARSE_CHUNK
    for b in prange(nb):
        r0 = b * SPARSE_CHUNK
        r1 = min(r0 + SPARSE_CHUNK, q)
        T = np.empty((d, SPARSE_CHUNK + 8))
        buf = np.empty(SPARSE_CHUNK)
        scratch = np.empty(SPARSE_CHUNK)
        for r in range(r0, r1):
            res[r] = 0.0
        for lo in range(0, n, SPARSE_CHUNK):
            hi = min(lo + SPARSE_CHUNK, n)
            w = hi - lo
            _transpose_chunk(cptr, cidx, cval, lo, hi, d, T)
            o = buf[:w]
            sqc = sq[lo:hi]
            cc = coef[lo:hi]
            for r in range(r0, r1):
                _sparse_row_dot(o, T, bidx, bval, bptr[r], bptr[r + 1])
                transform(o, code, gamma, coef0, degree, sq_b[r], sqc, scratch)
                res[r] += dot_prefix(o, cc, w)


def _rows_wide_py(bptr, bidx, bval, cptr, crow, cval, sq_b, sq, code, gamma, coef0, degree, out, dest):
    """out[dest[r], :m] = k(b_r, X[cols]) for sparse rows b_r (CSR arrays ``bptr, bidx, bval``) against the
    columns held as an inverted index (``cptr, crow, cval``: the nonzeros of feature f among the columns at
    ``cptr[f]:cptr[f+1]``, :func:`maxmargin.kernels.blocks.columns_of`), the rows in parallel: each nonzero of
    b_r meets only the columns' nonzeros of its own feature, so a row costs the sum of its features'
    document frequencies among the columns, not nnz(X) (wide sparse text, 6,000 x 30,000 tf-idf: a fifth)
    nor any densified row."""
    q = bptr.shape[0] - 1
    m = sq.shape[0]
    for r in prange(q):
        o = out[dest[r]][:m]
        o[:] = 0.0
        postings_dots(o, bidx, bval, bptr[r], bptr[r + 1], cptr, crow, cval)
        scratch = np.empty(m)
        transform(o, code, gamma, coef0, degree, sq_b[r], sq, scratch)


#: wide rows' frequent features go to a dense product (:func:`_rows_split_py`, :func:`heavy_split`) where a kernel
#: row's postings on them cost more than a dense multiply-add per column: a feature held by ``df`` of the ``m``
#: columns meets about ``df^2 / m`` postings a kernel row, against ``HEAVY_COST x m`` for its dense column (BLAS
#: multiply-adds in cache against the index's scattered adds: 0.025 against 0.35-0.66 ns on two threads, session
#: 48); so the features with ``df >= sqrt(HEAVY_COST) m``, at most HEAVY_MAX of them (the dense block is m x
#: features), for blocks of at least HEAVY_MIN_ROWS rows (one row would read the whole dense block for itself).
#: 512 kernel rows against 6,000 (``/tmp/s48/split3.py``), us a row, index alone / split at HEAVY_COST 0.025, 0.05,
#: 0.1, 0.2: text2 17.3 / 14.0, 12.5, 12.2, 16.9; rcv1b 21.5 / 16.6, 15.0, 14.4, 14.6; news20m 32.1 / 22.5, 20.3,
#: 19.8, 20.7; abstracts 37.7 / 23.2, 20.5, 19.8, 20.9; longdocs (256 features apart) 326 / 162.  At most 512
#: features apart (``/tmp/s48/hmax.py``, HEAVY_MAX 128 / 256 / 512): longdocs 165 / 135 / 103 us a row (497 apart),
#: 2,000 long documents of ~650 words 48 / 39 / 39 (309); text2, 4,000 documents of ~200 words: no change
HEAVY_COST = 0.1
HEAVY_MAX = 512
#: ... and at most this many bytes of the dense block (m x features, float64)
HEAVY_MAX_BYTES = 64 << 20
HEAVY_MIN_ROWS = 16
#: ... and where at least HEAVY_MIN_FEATURES are that frequent (a product over fewer is bound by writing its block:
#: 4 features of short_text's took a kernel row from 3.6 to 6.2 us); rows of a product at a time
HEAVY_MIN_FEATURES = 16
HEAVY_ROW_BLOCK = 64
#: :meth:`KernelRows.times` with the frequent features apart computes the kernel rows of this many targets at a time,
#: in at most TIMES_SPLIT_BYTES (50,000 support vectors: 41 targets)
TIMES_SPLIT_BLOCK = 256
TIMES_SPLIT_BYTES = 16 << 20


def _rows_split_py(XH, Hc, bptr, bidx, bval, cptr, crow, cval, sq_b, sq, code, gamma, coef0, degree, out, dest, width):
    """:func:`_rows_wide_py` with the frequent features apart: ``XH`` (rows x heavy features, dense) times ``Hc``
    (the columns' values on them, m x heavy features) by BLAS in column chunks of ``width`` in parallel (BLAS on
    one thread each, as :func:`_rows_dense_py`), then each row's other features on the inverted index of the rest
    (``cptr, crow, cval``: the heavy features' postings are empty there) and the kernel's transform, rows in
    parallel.  On text (tf-idf, 6,000 x 30,000: 38 features in a fifth or more of the rows hold 87% of the
    postings) a kernel row costs 0.3-0.7 of the index's time (:data:`HEAVY_COST`)."""
    m = Hc.shape[0]
    q = XH.shape[0]
    nch = (m + width - 1) // width
    nrb = (q + HEAVY_ROW_BLOCK - 1) // HEAVY_ROW_BLOCK
    for t in prange(nch * nrb):  # blocks of rows x columns: each product's block stays in cache
        lo = (t % nch) * width
        hi = min(lo + width, m)
        r0 = (t // nch) * HEAVY_ROW_BLOCK
        r1 = min(r0 + HEAVY_ROW_BLOCK, q)
        D = np.dot(XH[r0:r1], Hc[lo:hi].T)
        for r in range(r0, r1):
            out[dest[r]][lo:hi] = D[r - r0]
    for r in prange(q):
        o = out[dest[r]][:m]
        postings_dots(o, bidx, bval, bptr[r], bptr[r + 1], cptr, crow, cval)
        scratch = np.empty(m)
        transform(o, code, gamma, coef0, degree, sq_b[r], sq, scratch)


def _times_wide_py(bptr, bidx, bval, cptr, crow, cval, sq_b, sq, code, gamma, coef0, degree, coef, res):
    """res[r] = sum_j k(b_r, X[j]) coef[j] for sparse rows b_r against the rows X[j] held as an inverted index
    (:func:`_rows_wide_py`), blocks of rows in parallel; one row of kernel values at a time."""
    q = bptr.shape[0] - 1
    m = sq.shape[0]
    nb = (q + SPARSE_CHUNK - 1) // SPARSE_CHUNK
    for b in prange(nb):
        o = np.empty(m)
        scratch = np.empty(m)
        for r in range(b * SPARSE_CHUNK, min((b + 1) * SPARSE_CHUNK, q)):
            o[:] = 0.0
            postings_dots(o, bidx, bval, bptr[r], bptr[r + 1], cptr, crow, cval)
            transform(o, code, gamma, coef0, degree, sq_b[r], sq, scratch)
            res[r] = dot_prefix(o, coef, m)


@njit(cache=True, nogil=True, inline="always")
def _touched_scratch(m):
    """One thread's arrays for the touched loops: dot products, marks (-1: no row yet), the touched list, the
    gathered values and norms, the formula's scratch; all ``m`` long."""
    return np.empty(m), np.full(m, -1, np.int64), np.empty(m, np.int64), np.empty(m), np.empty(m), np.empty(m)


def _times_touched_py(
    bptr, bidx, bval, cptr, crow, cval, sq_b, sq, code, gamma, coef0, degree, coef, res, F, cfac, base
):
    """res[r] = sum_j k(b_r, X[j]) coef[j] for sparse rows b_r whose features few columns share (very sparse rows):
    the columns X[j] as an inverted index, and only the columns a row meets (nonzero dot product, "touched")
    cost anything.  A kernel of the dot product alone, k = f(x . z), takes f(0) at every other column; RBF
    factors there, k = exp(-g|x|^2) exp(-g|z|^2).  So with ``F[r]`` = f(0) (RBF: exp(-g|b_r|^2)), ``cfac`` =
    coef (RBF: coef exp(-g|z_j|^2)) and ``base`` = sum(cfac):

        res[r] = F[r] (base - sum_touched cfac[j]) + sum_touched coef[j] k(b_r, X[j])

    Cost a row: its postings and its touched columns, not the number of columns (8,000 rows at 0.5% non-zeros
    over 2,000 features meet ~5% of the support vectors).  The touched dot products are summed as
    :func:`postings_dots` sums them; the untouched values differ from the direct formula's by rounding (a
    product of two exponentials), and by under 1e-307 where the direct one gives 0 below exp(-708)."""
    q = bptr.shape[0] - 1
    m = sq.shape[0]
    nb = (q + SPARSE_CHUNK - 1) // SPARSE_CHUNK
    for b in prange(nb):
        o, mark, lst, buf, sqg, scratch = _touched_scratch(m)
        cg = np.empty(m)
        for r in range(b * SPARSE_CHUNK, min((b + 1) * SPARSE_CHUNK, q)):
            nt = touched_dots(o, mark, lst, r, bidx, bval, bptr[r], bptr[r + 1], cptr, crow, cval)
            sub = 0.0
            for i in range(nt):
                c = lst[i]
                buf[i] = o[c]
                sqg[i] = sq[c]
                cg[i] = coef[c]
                sub += cfac[c]
            transform(buf[:nt], code, gamma, coef0, degree, sq_b[r], sqg[:nt], scratch)
            res[r] = F[r] * (base - sub) + dot_prefix(buf, cg, nt)


def _rows_touched_py(bptr, bidx, bval, cptr, crow, cval, sq_b, sq, code, gamma, coef0, degree, out, dest, F, E, tiny):
    """out[dest[r], :m] = k(b_r, X[cols]) as :func:`_rows_wide_py`, for very sparse rows (:func:`_times_touched_py`):
    every value first f(0) = ``F[r]`` (RBF: the product ``F[r] E[t]`` of exp(-g|b_r|^2) and exp(-g|z_t|^2), 0 below
    ``tiny`` = exp(-708) as the compiled exponential gives), then the columns the row shares a feature with by the
    formula.  A value costs a product and a store instead of a cleared entry, a formula and a store (hashed300k's
    20,000 rows, 256 kernel rows: 0.15 against 0.49 ns a value)."""
    q = bptr.shape[0] - 1
    m = sq.shape[0]
    nb = (q + SPARSE_CHUNK - 1) // SPARSE_CHUNK
    for b in prange(nb):
        dv, mark, lst, buf, sqg, scratch = _touched_scratch(m)
        for r in range(b * SPARSE_CHUNK, min((b + 1) * SPARSE_CHUNK, q)):
            o = out[dest[r]][:m]
            fr = F[r]
            if code == RBF:
                for t in range(m):
                    v = fr * E[t]
                    o[t] = v if v >= tiny else 0.0
            else:
                o[:] = fr
            nt = touched_dots(dv, mark, lst, r, bidx, bval, bptr[r], bptr[r + 1], cptr, crow, cval)
            for i in range(nt):
                c = lst[i]
                buf[i] = dv[c]
                sqg[i] = sq[c]
            transform(buf[:nt], code, gamma, coef0, degree, sq_b[r], sqg[:nt], scratch)
            for i in range(nt):
                o[lst[i]] = buf[i]


#: :meth:`KernelRows.times` on sparse rows takes :func:`_times_touched_py` where a target row's postings among the
#: columns number at most this fraction of the columns, on average
TOUCHED_MAX_FRACTION = 0.25
#: the smallest value the compiled exponential gives (exp(-708)); products of two below it are 0 as well
EXP_MIN_VALUE = math.exp(EXP_MIN_ARG)


#: Below this many multiply-adds a parallel region costs more than it gives: waking
#: the other thread can take a scheduler time slice on a busy machine.
PARALLEL_MIN_WORK = 4_000_000

_transpose_chunk = njit(cache=True)(_transpose_chunk)
_sparse_row_dot = njit(cache=True, fastmath={"contract"})(_sparse_row_dot)
# (parallel_and_serial: one cache entry each; see maxmargin._jit)
_rows_dense_par, _rows_dense_ser = parallel_and_serial(_rows_dense_py)
_rows_small_par, _rows_small_ser = parallel_and_serial(_rows_small_py, fastmath={"contract"})
_rows_sparse_par, _rows_sparse_ser = parallel_and_serial(_rows_sparse_py)
_rows_wide_par, _rows_wide_ser = parallel_and_serial(_rows_wide_py)
_rows_split_par, _rows_split_ser = parallel_and_serial(_rows_split_py)
_times_wide_par, _times_wide_ser = parallel_and_serial(_times_wide_py)
_times_sparse_par, _times_sparse_ser = parallel_and_serial(_times_sparse_py)
_times_touched_par, _times_touched_ser = parallel_and_serial(_times_touched_py)
_rows_touched_par, _rows_touched_ser = parallel_and_serial(_rows_touched_py)


#: dense rows of more features than the fused loop takes (:func:`kernel_times` past ``fused_dense``,
#: :meth:`KernelRows.times` past :data:`FUSED_DENSE_MAX_D`): chunks of about TIMES_BLAS_VALUES kernel values
#: (TIMES_BLAS_MIN_ROWS to TIMES_BLAS_MAX_ROWS rows of A), each one BLAS product per block of rows of B, on one BLAS
#: thread, the chunks on Numba's threads, each chunk's kernel values formed and summed with the coefficients while
#: they are in cache (:func:`_times_blas_py`).  ``Kernel.mmv`` stored 16 MB blocks and read them back twice (the
#: transform on two threads, then a matrix-vector product): memory traffic, not arithmetic.  Measured (session 49,
#: ``/tmp/s49/fused.py``, RBF, decision values of a fitted SVC on its training rows, chunks / blocks): 5,000 x 50
#: against 1,930 support vectors 0.63 (11.3 / 18.1 ms); 8,000 x 12 0.52, x 30 0.60, x 50 0.79; 3,000 x 200 0.84,
#: 6,000 x 200 0.92; 20,000 x 100 against 8,399 0.81; 1,000 x 5,000 0.96.  Against the fused loop over the rows
#: as CSR arrays (the gradient rebuild's up to 64 features): 8,000 x 12 0.50, x 30 0.68, x 50 0.54; x 6-8 0.91-0.97
#: (the fused loop kept there).  Chunks of 32-64 rows lost (the product against all of B is read again a chunk).
TIMES_BLAS_VALUES = 1 << 18
TIMES_BLAS_MIN_ROWS = 128
TIMES_BLAS_MAX_ROWS = 512
#: ... each against blocks of at most this many rows of B in turn (like widths; each block's products are at most
#: about TIMES_BLAS_VALUES doubles, 2 MB).  One product against all of B made a block
#: of 128 x m doubles, past ~32 MB (m >= 32,000) a fresh mapping of the allocator's each time: page faults on every
#: chunk.  Measured (session 54, ``/tmp/s54/grad2.py``, RBF, 20 features, two threads, ns a kernel value, all of B /
#: blocks of 2,048): 200,000 x 94,365 2.97 / 0.83 (3.6x), x 20,000 0.97 / 0.81, 100,000 x 6,000 0.82 / 0.79; blocks
#: of 1,024 / 4,096 / 8,192 / 16,384: 0.86 / 0.86 / 0.87 / 0.90
TIMES_BLAS_COLUMNS = 2048


@njit(cache=True, nogil=True, inline="always")
def _sum_rows(D, sqa, sqb, code, gamma, coef0, degree, coef, res, lo, scratch):
    """res[lo + r] += sum_t coef[t] k(., B[t]) from the row r of dot products ``D`` (changed in place)."""
    m = D.shape[1]
    for r in range(D.shape[0]):
        o = D[r]
        transform(o, code, gamma, coef0, degree, sqa[lo + r], sqb, scratch)
        res[lo + r] += dot_prefix(o, coef, m)


def _times_blas_py(A, B, sqa, sqb, code, gamma, coef0, degree, coef, res, per, width):
    """res[r] = sum_t coef[t] k(A[r], B[t]): ``per`` rows of A a chunk, chunks in parallel (see TIMES_BLAS_VALUES),
    each chunk against blocks of ``width`` rows of B in turn (see TIMES_BLAS_COLUMNS); BLAS must run on one thread
    (the caller's :func:`one_blas_thread`)."""
    n = A.shape[0]
    m = B.shape[0]
    nch = (n + per - 1) // per
    for c in prange(nch):
        lo = c * per
        hi = min(lo + per, n)
        res[lo:hi] = 0.0
        scratch = np.empty(min(width, m))
        for b0 in range(0, m, width):
            b1 = min(b0 + width, m)
            D = np.dot(A[lo:hi], B[b0:b1].T)
            _sum_rows(D, sqa, sqb[b0:b1], code, gamma, coef0, degree, coef[b0:b1], res, lo, scratch)


_times_blas_par, _times_blas_ser = parallel_and_serial(_times_blas_py, nogil=True)


#: :func:`kernel_times` (``pool_when_busy``) asks whether BLAS's pool still spins (:func:`_blas_pool_spinning`) from
#: this many multiply-adds (~10 ms of products; the question costs 40 us, and 1.5 ms more where a thread runs)
TIMES_BLAS_CHECK_WORK = 1 << 26


#: ... and from this many waits up to TIMES_BLAS_WAIT_S for the spin to end (OpenBLAS's pool spins ~105 ms after a
#: product, measured here), taking the chunks after all where it does: a large job on the blocks (2.2-2.7x the
#: chunks' time) loses more than the wait.  Without it, back-to-back predictions of a large model kept the blocks
#: for good -- each call's products left the pool spinning for the next.  Measured (session 54,
#: ``/tmp/s54/predab.py``, tall200k's SVC, 50,000 rows against 46,879 support vectors of 20 features): blocks
#: 4.4-5.5 s a call back to back, chunks 2.0-2.1 s)
TIMES_BLAS_WAIT_WORK = 1 << 32
TIMES_BLAS_WAIT_S = 0.15


def _pool_idle_within(seconds):
    """Whether the other threads of the process stop running within ``seconds`` (:func:`others_running`, asked every
    2 ms)."""
    end = time.perf_counter() + seconds
    while others_running():
        if time.perf_counter() >= end:
            return False
        time.sleep(0.002)
    return True


def _blas_pool_spinning():
    """Whether another thread of the process still runs 1.5 ms after a first look (:func:`others_running`): Numba's
    own pool spins ~1 ms after a parallel loop, OpenBLAS's ~100 ms after a product (session 49,
    ``/tmp/s49/tbbspin.py``)."""
    if not others_running():
        return False
    time.sleep(0.0015)
    return others_running()


def times_blas(A, B, sqa, sqb, code, gamma, coef0, degree, coef, parallel=True):
    """``K(A, B) @ coef`` for dense rows (C-ordered float64 ``A``, ``B`` of the same width; ``sqa`` / ``sqb`` their
    squared norms, read by RBF only) by :func:`_times_blas_py`, on Numba's threads where the work pays
    (:data:`PARALLEL_MIN_WORK`) unless ``parallel`` is False.  The chunks depend on ``B``'s rows alone, never on the
    threads: the same sums bit for bit on one thread and on all (BLAS's results depend on a product's height)."""
    n, m = A.shape[0], B.shape[0]
    res = np.empty(n)
    if n == 0:
        return res
    if m == 0:
        res[:] = 0.0
        return res
    par = parallel and n * m * max(A.shape[1], 1) >= PARALLEL_MIN_WORK
    sqa = np.ascontiguousarray(sqa, dtype=np.float64)
    sqb = np.ascontiguousarray(sqb, dtype=np.float64)
    coef = np.ascontiguousarray(coef, dtype=np.float64)
    g = (code, gamma, coef0, float(degree))
    nb = -(-m // TIMES_BLAS_COLUMNS)
    width = -(-m // nb)  # blocks of like width
    per = min(max(TIMES_BLAS_VALUES // width, TIMES_BLAS_MIN_ROWS), TIMES_BLAS_MAX_ROWS)
    with one_blas_thread():
        (_times_blas_par if par else _times_blas_ser)(A, B, sqa, sqb, *g, coef, res, per, width)
    return res


def _padded(A, dp):
    """Dense ``A`` as C-ordered float64 with zero columns up to ``dp`` (no copy where it already is)."""
    A = np.ascontiguousarray(A, dtype=np.float64)
    if A.shape[1] == dp:
        return A
    P = np.zeros((A.shape[0], dp))
    P[:, : A.shape[1]] = A
    return P


def _csr_arrays(A):
    """(indptr, indices, data) of a CSR matrix as the compiled loops take them."""
    return A.indptr.astype(np.int64), A.indices.astype(np.int64), np.ascontiguousarray(A.data, dtype=np.float64)


def _dense_as_csr(A):
    """(indptr, indices, data) of a dense block with every entry stored: the arrays the
    compiled sparse loops take, built directly (scipy's conversion from dense goes through
    COO and cost 6 ms for 6.5k x 30, as much as the gradient rebuild itself)."""
    m, d = A.shape
    indptr = np.arange(0, m * d + 1, d, dtype=np.int64)
    indices = np.tile(np.arange(d, dtype=np.int64), m)
    return indptr, indices, np.ascontiguousarray(A, dtype=np.float64).ravel()


def postings_per_value(indices, n_features, n):
    """The stored values of the columns a kernel value of CSR rows meets on the inverted index, on average over
    the rows: ``sum_f df_f^2 / n^2`` (``df_f``: the rows holding feature f, from the column ``indices``)."""
    df = np.bincount(indices, minlength=n_features).astype(np.float64)
    return float(df @ df) / max(n, 1) ** 2


def decide(X, kernel):
    """The path (see the module's table) for kernel rows of training data ``X``."""
    if kernel.code == PRECOMPUTED:
        return "gram"
    if sp.issparse(X) and not densifies_cheaply(X):  # (the test alone: a dense copy made here to learn its type
        return "wide"  # cost 60% of a sparse predict, 8,000 x 2,000 rows at 0.5% non-zeros)
    if X.shape[1] <= ROWS_SMALL_D:
        return "narrow"
    if sp.issparse(X) and X.nnz <= SPARSE_ROWS_MAX_DENSITY * X.shape[0] * X.shape[1]:
        return "wide" if _inverted_index_pays(X) else "sparse"
    return "dense"


def _inverted_index_pays(X):
    """For CSR rows that densify cheaply: whether the inverted index ("wide") beats the transposed chunks
    ("sparse"), by the costs a kernel value measured in session 47 (:data:`SPARSE_ROWS_MAX_FEATURES`): the
    postings it meets (``postings_per_value``) against WIDE_PER_NONZERO a non-zero of the row plus the chunk's
    clearing, WIDE_PER_FEATURE a feature.  Uniform random rows of 1,000-4,000 features took the transposed chunks
    from 100-400 non-zeros a row (the index 1.2-2.0x slower there), Zipf-distributed ones from ~90 at 1,000."""
    n, d = X.shape
    if d < SPARSE_ROWS_MAX_FEATURES or n == 0:
        return False
    X = sp.csr_matrix(X)
    postings = postings_per_value(X.indices, d, n)
    return postings <= WIDE_PER_NONZERO * X.nnz / n + WIDE_PER_FEATURE * d


def heavy_split(Xr, df):
    """The frequent features of the CSR rows ``Xr`` apart (:data:`HEAVY_COST`; ``df``: each feature's
    count among them): ``(slot, Hc, light index)`` -- each feature's column in ``Hc`` (-1: not heavy), the
    rows' values on them (rows x heavy, dense), and the inverted index (:func:`columns_of`) of the rows without
    them -- or None where fewer than :data:`HEAVY_MIN_FEATURES` features are that frequent.  A feature in ``df`` of
    the ``m`` rows meets about ``df^2 / m`` postings a kernel row (rows like these), its dense column ``m``
    multiply-adds: it goes apart from ``df >= sqrt(HEAVY_COST) m``.  Work and memory O(the rows' non-zeros)."""
    m = Xr.shape[0]
    heavy = np.flatnonzero(df >= math.sqrt(HEAVY_COST) * m)
    if heavy.size < HEAVY_MIN_FEATURES:
        return None
    most = max(HEAVY_MIN_FEATURES, min(HEAVY_MAX, HEAVY_MAX_BYTES // (8 * max(m, 1))))
    heavy = np.sort(heavy[np.argsort(-df[heavy], kind="stable")[:most]])
    d = Xr.shape[1]
    slot = np.full(d, -1, dtype=np.int64)
    slot[heavy] = np.arange(heavy.size)
    Hc = np.ascontiguousarray(Xr[:, heavy].toarray(), dtype=np.float64)
    indptr, indices, data = _csr_arrays(Xr)
    light = slot[indices] < 0
    lptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(np.repeat(np.arange(m), np.diff(indptr))[light], minlength=m), out=lptr[1:])
    return slot, Hc, columns_of(data[light], indices[light], lptr, d, np.arange(m, dtype=np.int64))


def _heavy_dense(slot, n_heavy, bptr, bidx, bval):
    """The CSR rows' values on the heavy features (:func:`heavy_split`), dense: rows x ``n_heavy``."""
    q = bptr.shape[0] - 1
    XH = np.zeros((q, n_heavy))
    at = slot[bidx]
    on = at >= 0
    XH[np.repeat(np.arange(q), np.diff(bptr))[on], at[on]] = bval[on]
    return XH


class KernelRows:
    """Kernel rows ``K(x_i, X[cols])`` for batches of data rows, into a given buffer.

    ``set_columns(cols)`` restricts the columns to the active data rows of a
    shrunk problem (the rows written are then ``len(cols)`` long).
    """

    def __init__(self, X, kernel):
        self.kernel = kernel
        self.code = kernel.code
        self.gamma, self.coef0, self.degree = kernel.params
        self.path = decide(X, kernel)
        self.small = self.path == "narrow"
        self.Xs = None  # CSR rows for the sparse-row products (low-density sparse input)
        if self.path == "gram":
            G = kernel(X, X) if kernel.name == "callable" else (X.toarray() if sp.issparse(X) else X)
            self.X = np.ascontiguousarray(G, dtype=np.float64)
            self.X_orig = self.X
        elif self.path == "sparse":
            # rows and columns from the CSR arrays alone: no dense copy of X (memory O(nnz))
            self.X = canonical_csr(sp.csr_matrix(X, dtype=np.float64))
            self.X_orig = self.Xs = self.X
            self.d = X.shape[1]
        elif self.path == "wide" and densifies_cheaply(X):  # (sparse rows of many features, X small)
            self.X = self.X_orig = canonical_csr(sp.csr_matrix(X, dtype=np.float64))
        else:
            self.X = densify_if_cheap(X)
            self.X_orig = self.X
            if self.path == "dense":
                # zero columns up to a multiple of 8: the products are unchanged, and
                # BLAS avoids a slow edge case for small odd widths (20x on 22 features)
                # (no copy when the width is already a multiple of 8)
                d = self.X.shape[1]
                dp = -(-d // 8) * 8
                if dp != d:
                    Xp = np.zeros((self.X.shape[0], dp))
                    Xp[:, :d] = self.X
                    self.X = Xp
                else:
                    self.X = np.ascontiguousarray(self.X, dtype=np.float64)
        self.sq = (
            np.ascontiguousarray(row_norms_sq(self.X), dtype=np.float64)
            if self.code == RBF
            else np.zeros(self.X.shape[0])
        )
        self.n = self.X.shape[0]
        self._csr = _csr_arrays(self.X) if self.path == "wide" else None
        self.set_columns(None)

    def set_columns(self, cols):
        """Compute kernel values against the data rows ``cols`` only (None: all)."""
        self.cols = cols
        if cols is None:
            self.sqc, self.m = self.sq, self.n
        else:
            self.sqc = np.ascontiguousarray(self.sq[cols])
            self.m = cols.shape[0]
        # the columns' data (wide: as an inverted index, _inverted), gathered when a row is first computed
        # against them: a solver that reads most rows from elsewhere (the batched solver's shared_rows) or
        # changes columns again first gathers nothing (5 folds of a 5,000 x 2,000 problem: 0.35 s of copies)
        self.inv = None
        self.df = None
        self._split = None  # the frequent features apart (_heavy_split); False: none
        self._xc = None
        self._E = None  # exp(-g|z|^2) of the columns (_untouched)

    def _columns(self):
        """The columns' data rows (``X[cols]``; the columns of a Gram matrix; the transpose for the narrow
        loop), gathered on first use after :meth:`set_columns`."""
        if self._xc is None:
            cols = self.cols
            Xc = self.X if cols is None else (self.X[:, cols] if self.code == PRECOMPUTED else self.X[cols])
            self._xc = np.ascontiguousarray(Xc.T) if self.small else Xc
        return self._xc

    def _column_rows(self):
        return np.arange(self.n, dtype=np.int64) if self.cols is None else np.asarray(self.cols, dtype=np.int64)

    def _inverted(self):
        """The columns as an inverted index (feature -> the columns holding it, :func:`columns_of`; wide path)."""
        if self.inv is None:
            indptr, indices, data = self._csr
            self.inv = columns_of(data, indices, indptr, self.X.shape[1], self._column_rows())
        return self.inv

    def _column_data(self):
        """The columns' rows (CSR; wide path)."""
        return self.X if self.cols is None else self.X[self._column_rows()]

    def _df(self):
        """Each feature's count among the columns (wide path)."""
        if self.df is None:
            self.df = np.bincount(self._column_data().indices, minlength=self.X.shape[1])
        return self.df

    def _heavy_split(self):
        """:func:`heavy_split` of the columns (wide path), kept until :meth:`set_columns`; None where no feature is
        that frequent."""
        if self._split is None:
            self._split = heavy_split(self._column_data(), self._df()) or False
        return self._split or None

    def rows_cost_at_least(self, min_features, min_postings):
        """Whether a kernel value costs at least ``min_features`` multiply-adds (dense and narrow rows: the features)
        or, on the wide path, meets at least ``min_postings`` stored values of the columns on average (the sum of a
        row's features' document frequencies over the rows: ``sum_f df_f^2 / n^2``); never for the other paths."""
        if self.path in ("dense", "narrow"):
            return self.X_orig.shape[1] >= min_features
        if self.path != "wide":
            return False
        return postings_per_value(self._csr[1], self.X.shape[1], self.n) >= min_postings

    def _row_args(self, idx):
        """The rows' squared norms, the columns' and the kernel's parameters, as the compiled row loops take them."""
        return self.sq[idx], self.sqc, self.code, self.gamma, self.coef0, float(self.degree)

    def diag(self):
        if self.code == PRECOMPUTED:
            return np.ascontiguousarray(np.diag(self.X), dtype=np.float64)
        return self.kernel._diag_from_sq(row_norms_sq(self.X))

    def compute(self, idx, out, dest=None, parallel=True):
        """``out[dest[k], :m] = K(x_idx[k], X[cols])`` (``dest`` defaults to 0..k-1); ``parallel=False``
        keeps the compiled loops on the calling thread (callers on worker threads of their own)."""
        idx = np.asarray(idx, dtype=np.int64)
        dest = np.arange(idx.size, dtype=np.int64) if dest is None else np.asarray(dest, dtype=np.int64)
        if idx.size == 0:
            return out
        m = self.m
        if self.path == "gram":
            out[dest, :m] = self._columns()[idx]
            return out
        if self.path == "sparse":
            Xi = self.Xs[idx]
            big = parallel and Xi.nnz * m >= PARALLEL_MIN_WORK
            (_rows_sparse_par if big else _rows_sparse_ser)(
                *_csr_arrays(self._columns()),
                self.d,
                Xi.indptr.astype(np.int64),
                Xi.indices.astype(np.int64),
                Xi.data,
                *self._row_args(idx),
                out,
                dest,
            )
            return out
        if self.path == "wide":
            Xi = self.X[idx]
            # the work: each row's nonzeros times the columns holding their features, and each value's formula
            # (very sparse rows meet few postings, but every row still costs m kernel values: hashed300k's 20,000
            # rows had run on one thread)
            work = int(self._df()[Xi.indices].sum())
            big = parallel and work + idx.size * m >= PARALLEL_MIN_WORK
            if work <= TOUCHED_MAX_FRACTION * idx.size * m:  # very sparse rows: the touched columns by formula
                cptr, crow, cval = self._inverted()
                F, E = self._untouched(idx)
                (_rows_touched_par if big else _rows_touched_ser)(
                    *_csr_arrays(Xi), cptr, crow, cval, *self._row_args(idx), out, dest, F, E, EXP_MIN_VALUE
                )
                return out
            split = self._heavy_split() if idx.size >= HEAVY_MIN_ROWS else None
            if split is not None:  # the frequent features by BLAS, the rest on the index
                slot, Hc, light = split
                bptr, bidx, bval = _csr_arrays(Xi)
                XH = _heavy_dense(slot, Hc.shape[1], bptr, bidx, bval)
                with one_blas_thread():  # (BLAS inside the compiled threads)
                    (_rows_split_par if big else _rows_split_ser)(
                        XH, Hc, bptr, bidx, bval, *light, *self._row_args(idx), out, dest, chunk_width(m)
                    )
                return out
            cptr, crow, cval = self._inverted()
            (_rows_wide_par if big else _rows_wide_ser)(
                *_csr_arrays(Xi),
                cptr,
                crow,
                cval,
                *self._row_args(idx),
                out,
                dest,
            )
            return out
        Xi = self.X[idx]
        # narrow (compiled loop over the transposed columns) or dense (BLAS chunks)
        big = parallel and idx.size * m * max(self.X.shape[1], 4) >= PARALLEL_MIN_WORK
        rows = {
            (True, True): _rows_small_par,
            (True, False): _rows_small_ser,
            (False, True): _rows_dense_par,
            (False, False): _rows_dense_ser,
        }[(self.small, big)]
        rows(self._columns(), np.ascontiguousarray(Xi), *self._row_args(idx), out, dest, chunk_width(m))
        return out

    def times(self, rows, coef, targets, parallel=True):
        """``K(X[targets], X[rows]) @ coef`` over all training data (gradient rebuild);
        ``parallel=False`` keeps the fused loop on the calling thread."""
        if rows.size == 0 or targets.size == 0:
            return np.zeros(targets.size)
        if self.path == "gram":
            return self.X[np.ix_(targets, rows)] @ coef
        if self.path == "wide":  # the rows as an inverted index, the targets' nonzeros drive the products
            indptr, indices, data = self._csr
            rows = np.asarray(rows, dtype=np.int64)
            d = self.X.shape[1]
            Xr = self.X[rows]
            df = np.bincount(Xr.indices, minlength=d)  # (each feature's count among the rows)
            Xt = self.X[targets]
            work = int(df[Xt.indices].sum())
            if work <= TOUCHED_MAX_FRACTION * rows.size * targets.size:
                inv = columns_of(data, indices, indptr, d, rows)
                return self._touched(Xt, inv, rows, coef, targets, parallel and work >= 2**16)
            split = heavy_split(Xr, df) if targets.size >= HEAVY_MIN_ROWS else None
            if split is not None:  # (only the index of the other features is built)
                return self._times_split(split, Xt, rows, coef, targets, parallel and work >= PARALLEL_MIN_WORK)
            cptr, crow, cval = columns_of(data, indices, indptr, d, rows)
            fn = _times_wide_par if parallel and work >= PARALLEL_MIN_WORK else _times_wide_ser
            return self._fused(fn, (*_csr_arrays(Xt), cptr, crow, cval), rows, coef, targets)
        if self.Xs is not None:
            # CSR rows: the targets' nonzeros drive the products.  Very sparse rows (few columns share a feature with
            # a target, counted from the features' counts alone): the touched columns only; else the fused loop
            # over transposed chunks (kernel value, exp, product with coef)
            Xr, Xt = self.Xs[rows], self.Xs[targets]
            work = int(np.bincount(Xr.indices, minlength=self.d)[Xt.indices].sum())
            if work <= TOUCHED_MAX_FRACTION * rows.size * targets.size:
                inv = columns_of(
                    Xr.data,
                    Xr.indices.astype(np.int64),
                    Xr.indptr.astype(np.int64),
                    self.d,
                    np.arange(rows.size, dtype=np.int64),
                )
                return self._touched(Xt, inv, rows, coef, targets, parallel and work >= 2**16)
            t_arrays = (Xt.indptr.astype(np.int64), Xt.indices.astype(np.int64), Xt.data)
            fn = _times_sparse_par if parallel else _times_sparse_ser
            return self._fused(fn, (*_csr_arrays(Xr), self.d, *t_arrays), rows, coef, targets)
        if not sp.issparse(self.X) and self.X_orig.shape[1] <= TIMES_AXPY_MAX_D:
            # dense rows as CSR arrays with every entry stored (no scipy conversion), without the zero columns the
            # BLAS path pads (22 features: 24 products a kernel value, not 22); the fused loop as above
            Xo = self.X_orig
            fn = _times_sparse_par if parallel else _times_sparse_ser
            arrays = (*_dense_as_csr(Xo[rows]), Xo.shape[1], *_dense_as_csr(Xo[targets]))
            return self._fused(fn, arrays, rows, coef, targets)
        if not sp.issparse(self.X):  # BLAS on chunks of the targets (the rows as padded for BLAS)
            g = (self.code, self.gamma, self.coef0, self.degree)
            return times_blas(self.X[targets], self.X[rows], self.sq[targets], self.sq[rows], *g, coef, parallel)
        return self.kernel.mmv(self.X_orig[targets], self.X_orig[rows], coef)

    def _f0(self):
        """The kernel at a zero dot product (and zero norms), by the compiled formula."""
        f0 = np.zeros(1)
        transform(f0, self.code, self.gamma, self.coef0, float(self.degree), 0.0, np.zeros(1), np.empty(1))
        return f0[0]

    def _untouched(self, idx):
        """(F, E) for :func:`_rows_touched_py`: the rows' f(0) (RBF: exp(-g|x|^2)) and the columns' exp(-g|z|^2)
        (RBF only; kept until the columns change)."""
        if self.code != RBF:
            return np.full(idx.size, self._f0()), np.zeros(1)
        if self._E is None:
            self._E = -self.gamma * self.sqc
            exp_nonpos(self._E, np.empty_like(self._E))
        F = -self.gamma * self.sq[idx]
        exp_nonpos(F, np.empty_like(F))
        return F, self._E

    def _touched(self, Xt, inv, rows, coef, targets, parallel):
        """``K(X[targets], X[rows]) @ coef`` by :func:`_times_touched_py` (``inv``: the rows' inverted index)."""
        coef = np.ascontiguousarray(coef, dtype=np.float64)
        sq_t = np.ascontiguousarray(self.sq[targets])
        sq_r = np.ascontiguousarray(self.sq[rows])
        if self.code == RBF:
            F = -self.gamma * sq_t
            exp_nonpos(F, np.empty_like(F))
            cfac = -self.gamma * sq_r
            exp_nonpos(cfac, np.empty_like(cfac))
            cfac *= coef
        else:  # f(0) at every untouched column
            F = np.full(targets.size, self._f0())
            cfac = coef
        res = np.empty(targets.size)
        (_times_touched_par if parallel else _times_touched_ser)(
            *_csr_arrays(Xt),
            *inv,
            sq_t,
            sq_r,
            self.code,
            self.gamma,
            self.coef0,
            float(self.degree),
            coef,
            res,
            F,
            np.ascontiguousarray(cfac, dtype=np.float64),
            float(np.sum(cfac)),
        )
        return res

    def _times_split(self, split, Xt, rows, coef, targets, parallel):
        """:meth:`times` on the wide path with the frequent features apart (:func:`heavy_split` of ``rows``):
        kernel rows of :data:`TIMES_SPLIT_BLOCK` targets at a time (fewer where they would exceed
        :data:`TIMES_SPLIT_BYTES`; :func:`_rows_split_py`), then their product with ``coef``."""
        slot, Hc, light = split
        m = rows.size
        fn = _rows_split_par if parallel else _rows_split_ser
        args = (np.ascontiguousarray(self.sq[rows]), self.code, self.gamma, self.coef0, float(self.degree))
        coef = np.ascontiguousarray(coef, dtype=np.float64)
        res = np.empty(targets.size)
        block = max(HEAVY_MIN_ROWS, min(TIMES_SPLIT_BLOCK, TIMES_SPLIT_BYTES // (8 * max(m, 1))))
        buf = np.empty((min(block, targets.size), m))
        with one_blas_thread():  # (BLAS inside the compiled threads)
            for lo in range(0, targets.size, block):
                hi = min(lo + block, targets.size)
                bptr, bidx, bval = _csr_arrays(Xt[lo:hi])
                XH = _heavy_dense(slot, Hc.shape[1], bptr, bidx, bval)
                dest = np.arange(hi - lo, dtype=np.int64)
                fn(XH, Hc, bptr, bidx, bval, *light, self.sq[targets[lo:hi]], *args, buf, dest, chunk_width(m))
                res[lo:hi] = buf[: hi - lo] @ coef
        return res

    def _fused(self, fn, arrays, rows, coef, targets):
        """``fn(*arrays, <norms, kernel parameters, coef>, res)``: a fused gradient-rebuild loop; returns ``res``."""
        res = np.empty(targets.size)
        fn(
            *arrays,
            self.sq[targets],
            np.ascontiguousarray(self.sq[rows]),
            self.code,
            self.gamma,
            self.coef0,
            float(self.degree),
            np.ascontiguousarray(coef, dtype=np.float64),
            res,
        )
        return res


#: :func:`kernel_times` of dense rows uses the fused loop from this many kernel values, at most this many
#: features (measured, RBF, against the block and a product: 1,600 x 3,300 x 10 features 0.58x the time,
#: 8,000 x 1,000 x 16 0.66x, 4,000 x 400 x 22 0.94x; 4,000 x 40 x 10 1.13x, 1,600 x 3,300 x 40 1.17x)
FUSED_DENSE_MIN_ENTRIES = 2_000_000
FUSED_DENSE_MAX_D = 24


def _host_has_avx512():
    try:
        import llvmlite.binding as llvm

        return bool(llvm.get_host_cpu_features().get("avx512f", False))
    except Exception:  # pragma: no cover - llvmlite without the query: keep the measured default
        return False


#: whether the predict paths (decision values of a binary, regression or one-class model) take the fused loop
#: for dense rows as well (:func:`kernel_times`'s ``fused_dense``).  The measurements above were made on an AVX2
#: host; on an AVX-512 host (session 29, AMD Zen 5, OpenBLAS) the blocks won every shape: 1,600 x 3,300 x 10 fused
#: 1.18x the time, 8,000 x 1,000 x 16 1.98x, 8,000 x 3,655 x 20 1.54x, 1,600 x 3,300 x 40 2.0x.  The solvers'
#: gradient rebuilds keep the fused loop everywhere (a 30,000 x 10 fit took 0.90x the time with it there).
#: Since session 46's reassociated closing sum the fused loop wins on thin rows there too (session 47, AMD Zen 4,
#: ``/tmp/s47/fd.py``, fused / blocks: 80,000 x 10,000 x 3 features 0.31, 20,000 x 5,000 x 3 0.38, 20,000 x 4,000
#: x 8 0.55; but 1,600 x 3,300 x 10 1.28, 8,000 x 1,000 x 16 1.68, 8,000 x 3,655 x 20 0.87, 20,000 x 4,000 x 24
#: 0.84): so the most features the predict paths fuse, ``kernel_times``'s ``fused_dense``
#: Since session 49 the dense rows past it go to BLAS on chunks (:func:`times_blas`), not to blocks, and beat the
#: fused loop from 12 features on this AVX-512 host (see TIMES_BLAS_VALUES): there both the predict paths and the
#: solvers' sums (kernel_times' default, KernelRows.times) fuse at most ROWS_SMALL_D features.  An AVX2 host keeps
#: the bounds measured on one (24 and 64 features).
_AVX512 = _host_has_avx512()
FUSED_DENSE_MAX_D = FUSED_DENSE_MAX_D if not _AVX512 else ROWS_SMALL_D
TIMES_AXPY_MAX_D = TIMES_AXPY_MAX_D if not _AVX512 else ROWS_SMALL_D
FUSED_DENSE_PREDICT = FUSED_DENSE_MAX_D


def _held_times_py(S, slots, coef, cols, out):
    """out[t] = sum_r coef[r] * S[slots[r], cols[t]], column chunks in parallel (each sum in the order of r)."""
    m = cols.shape[0]
    nb = (m + CHUNK - 1) // CHUNK
    for b in prange(nb):
        lo = b * CHUNK
        hi = min(lo + CHUNK, m)
        a = out[lo:hi]
        c = cols[lo:hi]
        a[:] = 0.0
        for r in range(slots.shape[0]):
            src = S[slots[r]]
            cr = coef[r]
            for t in range(hi - lo):
                a[t] += cr * src[c[t]]


_held_times_par, _held_times_ser = parallel_and_serial(_held_times_py)


def held_times(S, slots, coef, cols, parallel=True):
    r""":math:`\sum_r c_r K(i_r, j)` for the columns ``j`` in ``cols`` from kernel rows computed before: row
    ``slots[r]`` of ``S`` holds :math:`K(i_r, \cdot)` (the probability folds' rows of the full fit's support
    vectors, :class:`maxmargin.probability.HeldRows`).  A read of the stored values instead of new kernel
    values; the same sums whatever the threads."""
    slots = np.ascontiguousarray(slots, dtype=np.int64)
    cols = np.ascontiguousarray(cols, dtype=np.int64)
    coef = np.ascontiguousarray(coef, dtype=np.float64)
    out = np.empty(cols.shape[0])
    fn = _held_times_par if parallel and slots.shape[0] * cols.shape[0] >= PARALLEL_MIN_WORK else _held_times_ser
    fn(S, slots, coef, cols, out)
    return out


def kernel_times(kernel, A, B, coef, parallel=True, fused_dense=True, pool_when_busy=False):
    """``K(A, B) @ coef``: one decision value per row of ``A`` from the rows ``B`` (support
    vectors, say) and their coefficients, by :meth:`KernelRows.times` on the two stacked: the fused
    compiled loop, no kernel block stored, for sparse rows (measured 3x faster than the block and a
    matrix product on 1,600 x 3,300 rows of 300 sparse features) and, with ``fused_dense``, for thin dense
    data in large blocks (:data:`FUSED_DENSE_MAX_D` features; ``fused_dense`` may also be the most features
    it takes there, 0 for none).  Otherwise (and for precomputed and callable kernels): blocks and products.
    ``parallel=False`` for callers on worker threads of their own.  Dense rows past the fused bound: BLAS on chunks
    (:func:`times_blas`).

    ``pool_when_busy`` (the predict paths): where another thread of the process is running
    (:func:`_blas_pool_spinning`: BLAS's pool still spinning after a product, most often), Numba's threads would
    share the cores with it (2x the time right after a fit that ended in BLAS products); then ``Kernel.mmv``'s
    blocks instead (the route before; 1.5x the chunks' time on a quiet machine, 0.8x right after a product), whose
    values may differ from the chunks' in the last bits.  Fits keep the chunks (their results must not depend on
    timing).  A large job (:data:`TIMES_BLAS_WAIT_WORK`) waits up to :data:`TIMES_BLAS_WAIT_S` for the spin to end
    first."""
    coef = np.ascontiguousarray(coef, dtype=np.float64)
    path = decide(A, kernel)
    max_d = FUSED_DENSE_MAX_D if fused_dense is True else int(fused_dense)
    fused = path in ("sparse", "wide") or (
        path in ("narrow", "dense") and A.shape[1] <= max_d and A.shape[0] * B.shape[0] >= FUSED_DENSE_MIN_ENTRIES
    )
    if kernel.name == "callable" or path == "gram":
        return kernel.mmv(A, B, coef)
    if not fused:
        if path in ("narrow", "dense"):  # BLAS on chunks of A's rows, no block stored
            work = A.shape[0] * B.shape[0] * A.shape[1]
            if pool_when_busy and parallel and work >= TIMES_BLAS_CHECK_WORK and _blas_pool_spinning():
                if work < TIMES_BLAS_WAIT_WORK or not _pool_idle_within(TIMES_BLAS_WAIT_S):
                    return kernel.mmv(A, B, coef)
            A, B = densify_if_cheap(A), densify_if_cheap(B)
            if not (sp.issparse(A) or sp.issparse(B)):
                dp = -(-A.shape[1] // 8) * 8  # (zero columns: see KernelRows)
                A, B = _padded(A, dp), _padded(B, dp)
                rbf = kernel.code == RBF
                sqa = row_norms_sq(A) if rbf else np.zeros(A.shape[0])
                sqb = row_norms_sq(B) if rbf else np.zeros(B.shape[0])
                g = (kernel.code, *kernel.params)
                return times_blas(A, B, sqa, sqb, *g, coef, parallel)
        return kernel.mmv(A, B, coef)
    na = A.shape[0]
    if na == 0 or B.shape[0] == 0:
        return np.zeros(na)
    if sp.issparse(A) or sp.issparse(B):
        Z = sp.vstack([sp.csr_matrix(A), sp.csr_matrix(B)], format="csr")
    else:
        Z = np.vstack([A, B])
    kr = KernelRows(Z, kernel)
    return kr.times(np.arange(na, na + B.shape[0]), coef, np.arange(na), parallel=parallel)
