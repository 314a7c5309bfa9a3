"""Kernel rows one at a time, and the bounded LRU row cache of the SMO solver.

The training data reaches compiled code as plain arrays (:class:`KernelData`):
``X`` dense (n, d) or, for CSR input, ``data, indices, indptr``; ``sqn`` the
squared row norms (RBF); ``code`` and ``kp = (gamma, coef0, degree)`` name the
kernel, whose formula is :func:`maxmargin.kernels.formulas.transform`.  For a precomputed or callable kernel
``X`` is the Gram matrix itself.

The cache (:class:`RowCache`) keeps whole or partial kernel rows keyed by the
data row, least recently used first out.  A *partial* row holds the values for
the active variables of the solver at the time it was computed; it stays valid
while the active set only shrinks (``epoch`` is bumped when it grows).
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections import OrderedDict, namedtuple

import numpy as np
import scipy.sparse as sp
from numba import njit, uint64

from .._ready import canonical_csr
from .blocks import columns_of, postings_dots, scattered_dots
from .formulas import FORMULA_CODES, PRECOMPUTED, RBF, check_code, transform, transform_rows
from .objects import row_norms_sq

KernelData = namedtuple("KernelData", "code kp X data indices indptr sqn sparse work cptr crow cval rowcost acc")


def kernel_data(X, kernel):
    """Arrays for the compiled solvers from training data and a Kernel.

    For CSR data also the rows as an inverted index (``cptr, crow, cval``: the nonzeros of feature f at
    ``cptr[f]:cptr[f+1]``, row numbers and values; :func:`maxmargin.kernels.blocks.columns_of`), each row's
    cost through it (``rowcost``: the sum of its features' document frequencies) and its accumulator
    ``acc`` (see :func:`compute_row`); ``work`` and ``acc`` are scratch, one pair per thread."""
    code = kernel.code
    empty_f = np.zeros(1)
    # one array type per argument whatever the data (indices int32, indptr int64): dense, sparse
    # and precomputed problems then share one compiled SMO instead of compiling it again
    empty_i = np.zeros(1, dtype=np.int32)
    empty_p = np.zeros(1, dtype=np.int64)
    none = (empty_p, empty_p, empty_f, empty_p, empty_f)
    if code == PRECOMPUTED:
        if kernel.name == "callable":
            G = kernel(X, X)
        else:
            G = X.toarray() if sp.issparse(X) else X
        return gram_data(G)
    check_code(code)
    kp = np.array(kernel.params, dtype=np.float64)
    sqn = row_norms_sq(X) if code == RBF else np.zeros(X.shape[0])
    sqn = np.ascontiguousarray(sqn, dtype=np.float64)
    if sp.issparse(X):
        X = canonical_csr(sp.csr_matrix(X, dtype=np.float64))
        data = np.ascontiguousarray(X.data)
        indices = np.ascontiguousarray(X.indices, dtype=np.int32)
        indptr = np.ascontiguousarray(X.indptr, dtype=np.int64)
        n, d = X.shape
        cptr, crow, cval = columns_of(data, indices, indptr, d, np.arange(n, dtype=np.int64))
        df = np.diff(cptr)
        rowcost = np.zeros(n, dtype=np.int64)
        np.add.at(rowcost, np.repeat(np.arange(n), np.diff(indptr)), df[indices])
        return KernelData(
            code,
            kp,
            np.zeros((1, 1)),
            data,
            indices,
            indptr,
            sqn,
            True,
            np.zeros(d),
            cptr,
            crow,
            cval,
            rowcost,
            np.zeros(n),
        )
    X = np.ascontiguousarray(X, dtype=np.float64)
    return KernelData(code, kp, X, empty_f, empty_i, empty_p, sqn, False, empty_f, *none)


def gram_data(G):
    """:class:`KernelData` over a whole kernel matrix ``G`` (a precomputed kernel's, or one computed at once:
    :func:`whole_gram_cache`), with the same array types as any other."""
    G = np.ascontiguousarray(G, dtype=np.float64)
    e_f, e_i, e_p = np.zeros(1), np.zeros(1, dtype=np.int32), np.zeros(1, dtype=np.int64)
    return KernelData(PRECOMPUTED, np.zeros(3), G, e_f, e_i, e_p, e_f, False, e_f, e_p, e_p, e_f, e_p, e_f)


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
    sqc = np.empty(m)
    if code == 2:
        for k in range(m):
            sqc[k] = sqn[targets[k]]
    transform(buf, code, kp[0], kp[1], kp[2], sqa, sqc, np.empty(m))


@njit(cache=True)
def compute_row(
    code, kp, X, data, indices, indptr, sqn, sparse, work, cptr, crow, cval, rowcost, acc, i, targets, m, out
):
    """``out[t] = K(x_i, x_t)`` for ``t`` in ``targets[:m]`` (data-row indices).

    Sparse rows take the cheaper of two ways to the dot products, which give the same sums bit for bit (the
    common features' products added in increasing feature order): through the inverted index, each nonzero
    of x_i meets only the rows holding its feature (``rowcost[i]`` multiply-adds into ``acc``, over all
    rows); or row by row, each target's nonzeros against x_i scattered into ``work`` (nnz(x_t) each).  On
    wide text (6,000 x 30,000 tf-idf) the first is a fifth of the second over all rows; once shrinking has
    left few targets, the second."""
    if code == 4:
        for k in range(m):
            t = targets[k]
            out[t] = X[i, t]
        return
    buf = np.empty(m)
    tg = targets[:m]
    if sparse:
        n_all = acc.shape[0]
        # unsigned positions and indices: Numba tests each load through a signed index for a
        # negative value (Python's a[-1]); without those tests the sparse dots run ~1.7x faster
        if (rowcost[i] + n_all // 4) * n_all < m * indptr[n_all]:  # rowcost + n/4 < m * (nnz per row)
            acc[:] = 0.0
            postings_dots(acc, indices, data, indptr[i], indptr[i + 1], cptr, crow, cval)
            for k in range(m):
                buf[k] = acc[uint64(tg[k])]
        else:
            scattered_dots(work, data, indices, indptr, i, tg, buf)
    elif m == X.shape[0] and X.shape[1] >= 8:
        np.dot(X, X[i], buf)  # into buf: a slice assignment compiles a shape-checked copy (seconds)
    else:
        xi = X[i]
        for k in range(m):
            buf[k] = dot(xi, X[uint64(tg[k])])
    dots_to_kernel(code, kp, buf, sqn[i], sqn, tg)
    for k in range(m):
        out[uint64(tg[k])] = buf[k]


@njit(cache=True)
def kernel_diag(code, kp, X, data, indices, indptr, sqn, sparse, n):
    """k(x_i, x_i) for every row (the Gram matrix's diagonal for a precomputed kernel)."""
    out = np.empty(n)
    if code == 4:
        for i in range(n):
            out[i] = X[i, i]
        return out
    if code == RBF:  # k(x, x) = 1 (no pass over the rows: a tenth of a wide fold's time)
        out[:] = 1.0
        return out
    for i in range(n):
        s = 0.0
        if sparse:
            for q in range(indptr[i], indptr[i + 1]):
                s += data[q] * data[q]
        else:
            for f in range(X.shape[1]):
                s += X[i, f] * X[i, f]
        out[i] = s
    # RBF: with both norms passed as 0, the distance max(-2 x.x, 0) is 0 and k = 1
    transform(out, code, kp[0], kp[1], kp[2], 0.0, np.zeros(n), np.empty(n))
    return out


#: a slot whose stamp is at least this is never evicted (nor re-stamped): rows shared by several
#: caches (:meth:`RowCache.sharing`), and the slots another cache of the same rows owns
PINNED = np.int64(1) << np.int64(62)


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

    @classmethod
    def sharing(cls, rows, held, region):
        """A cache over the existing array ``rows`` (n_slots, n_data), nothing allocated for rows:
        its slots ``0..len(held)-1`` hold the whole kernel rows of the data rows ``held``, read only
        (pinned), and it computes rows into the slots ``region`` (a range, at least two) only; every
        other slot is pinned too.  Several such caches over one array, each with its own region,
        can run at once on threads (the cross-validation folds of ``probability=True``)."""
        self = cls.__new__(cls)
        n_slots, n_data = rows.shape
        k = len(held)
        self.rows = rows
        self.slot_of = np.full(n_data, -1, dtype=np.int64)
        self.slot_of[held] = np.arange(k)
        self.row_of = np.full(n_slots, -1, dtype=np.int64)
        self.row_of[:k] = held
        self.stamp = np.full(n_slots, PINNED, dtype=np.int64)
        self.stamp[region.start : region.stop] = 0
        self.full = np.zeros(n_slots, dtype=np.bool_)
        self.full[:k] = True
        self.epoch_of = np.zeros(n_slots, dtype=np.int64)
        self.counters = np.zeros(4, dtype=np.int64)
        self.counters[0] = 1
        return self

    def arrays(self):
        return (self.rows, self.slot_of, self.row_of, self.stamp, self.full, self.epoch_of, self.counters)


#: the SMO solver takes the whole kernel matrix in one product (BLAS, every core) instead of its rows one at a
#: time (a matrix-vector product each) where dense rows hold at least this many features and the matrix fits in
#: ``cache_size``.  ``/tmp/s16/gram.py`` (random two-class data, RBF, every row a support vector; SMO row by row /
#: the batched solver / the whole matrix, ms): 200 x 20,000 329 / 112 / 23, 1,000 x 5,000 1,078 / 423 / 85,
#: 3,000 x 2,000 3,272 / 988 / 418, 1,500 x 256 202 / 98 / 46, 800 x 100 24 / 36 / 19.
GRAM_MIN_FEATURES = 128


#: ... and where sparse rows meet at least this many stored values of the other rows a kernel value (postings on the
#: inverted index, ``sum_f df_f^2 / n^2``: text whose frequent words sit in most rows), the matrix from the kernel-row
#: engine in blocks (:class:`maxmargin.kernels.engine.KernelRows`, its frequent features by BLAS).  Session 48,
#: TF-IDF rows (``bench_shapes.py --only text``), SMO row by row / the whole matrix: 2,000 long documents x 60,000
#: words (~650 a row, every row a support vector), the whole fit 370 / 172 ms
GRAM_MIN_POSTINGS = 4.0


def gram_pays(X, kernel, n, cache_size):
    """Whether SMO on ``n`` rows of ``X`` should compute the whole ``n x n`` kernel matrix at once: rows of
    :data:`GRAM_MIN_FEATURES` (dense, or sparse rows the kernel-row engine densifies), or of
    :data:`GRAM_MIN_POSTINGS` (sparse rows it keeps sparse: its "wide" path), a kernel with a formula, ``8 n^2``
    bytes within ``cache_size`` MB."""
    if X is None or len(getattr(X, "shape", ())) != 2 or cache_size is None:
        return False
    if getattr(kernel, "code", None) not in FORMULA_CODES or getattr(kernel, "name", "") == "callable":
        return False
    if not 8.0 * n * n <= float(cache_size) * 1024 * 1024:
        return False
    if sp.issparse(X):
        from .engine import decide, postings_per_value

        if decide(X, kernel) == "wide":  # (rows the engine keeps sparse; the others it densifies: as dense rows)
            X = sp.csr_matrix(X)
            return X.shape[0] > 0 and postings_per_value(X.indices, X.shape[1], X.shape[0]) >= GRAM_MIN_POSTINGS
    return X.shape[1] >= GRAM_MIN_FEATURES


_KEEP = threading.local()


@contextlib.contextmanager
def keeping_gram():
    """Within this block (on this thread) the whole kernel matrix is wanted beyond one solve: SMO leaves the
    one it computes on its solution (``extra['gram']``, which the cross-validation folds of ``probability=True``
    read instead of computing kernel values again), and solver='auto' takes SMO over it up to the size
    ``cache_size`` allows (:func:`maxmargin.formulations.smo_on_gram`)."""
    previous = getattr(_KEEP, "on", False)
    _KEEP.on = True
    try:
        yield
    finally:
        _KEEP.on = previous


def gram_kept():
    """Whether a :func:`keeping_gram` block is open on this thread."""
    return getattr(_KEEP, "on", False)


def given_gram(X, kernel):
    """Whether ``X`` is itself a dense kernel matrix (a precomputed kernel's, not a callable's): SMO takes it as
    its pinned row cache (:func:`maxmargin.solvers.smo.solve`), and solver='auto' takes SMO for it."""
    return getattr(kernel, "code", None) == PRECOMPUTED and kernel.name != "callable" and not sp.issparse(X)


def whole_gram_cache(X, kernel):
    """A :class:`RowCache` holding every whole kernel row of ``X``, pinned: the solver never computes a row.
    Dense ``X``: one BLAS product ``X X'`` (symmetric: NumPy hands it to ``syrk``), then the kernel's formula;
    sparse: every row from the kernel-row engine (:class:`maxmargin.kernels.engine.KernelRows`).  On Numba's
    threads from the main thread only (a one-vs-one pair's thread runs it serially)."""
    parallel = threading.current_thread() is threading.main_thread()
    if sp.issparse(X):
        from .engine import KernelRows

        n = X.shape[0]
        G = np.empty((n, n))
        KernelRows(X, kernel).compute(np.arange(n, dtype=np.int64), G, parallel=parallel)
        return RowCache.sharing(G, np.arange(n, dtype=np.int64), range(0))
    X = np.ascontiguousarray(X, dtype=np.float64)
    G = X @ X.T
    sq = row_norms_sq(X) if kernel.code == RBF else None
    transform_rows(G, kernel.code, kernel.params, sq, sq, parallel=parallel)
    return RowCache.sharing(G, np.arange(X.shape[0], dtype=np.int64), range(0))


@njit(cache=True)
def get_row(
    kd,
    cache,
    i,
    need_full,
    act_data,
    m,
):
    """The cached kernel row of data row ``i``: whole if ``need_full`` else at least
    the entries of ``act_data[:m]`` (callers pass ``need_full`` when every variable
    is active).  ``kd`` is a :class:`KernelData` as a tuple, ``cache`` the arrays of a
    :class:`RowCache` (:meth:`RowCache.arrays`)."""
    kd_code, kp, X, data, indices, indptr, sqn, sparse, work, cptr, crow, cval, rowcost, acc = kd
    rows, slot_of, row_of, stamp, full, epoch_of, counters = cache
    counters[0] += 1
    slot = slot_of[i]
    if slot >= 0:
        if full[slot] or (not need_full and epoch_of[slot] == counters[1]):
            if stamp[slot] < PINNED:
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
        compute_row(
            kd_code, kp, X, data, indices, indptr, sqn, sparse, work, cptr, crow, cval, rowcost, acc, i, allrows, n, out
        )
        full[slot] = True
    else:
        compute_row(
            kd_code,
            kp,
            X,
            data,
            indices,
            indptr,
            sqn,
            sparse,
            work,
            cptr,
            crow,
            cval,
            rowcost,
            acc,
            i,
            act_data,
            m,
            out,
        )
        full[slot] = False
    epoch_of[slot] = counters[1]
    stamp[slot] = counters[0]
    return out


class KernelRowPool:
    """Kernel-row caches kept alive between solver runs (used by warm starts).

    A grid over C solves the same kernel matrix again and again; with a pool active
    (:func:`kernel_row_pool`), a run on the same data, kernel and ``cache_size``
    as an earlier one takes over its :class:`RowCache` (and compiled data arrays),
    so its kernel rows are not computed twice.  The key is a fingerprint of the
    data (BLAKE2 of its bytes), the kernel's code and parameters, and the cache
    size; a callable kernel is never pooled.  At most ``budget_mb`` MB are kept:
    when a new cache does not fit, caches not used since :meth:`new_generation`
    (the estimator calls it at each fit) are dropped first; if it still does not
    fit, it is not kept.
    """

    def __init__(self, budget_mb):
        self.budget = float(budget_mb) * 1024 * 1024
        self.entries = OrderedDict()  # key -> [kernel data, RowCache, generation last used]
        self.generation = 0

    def new_generation(self):
        self.generation += 1

    def key_of(self, problem, cache_size):
        """The key of ``problem``'s cache in this pool (a fingerprint of its data; None: never pooled)."""
        return _pool_key(problem, cache_size)

    def nbytes(self):
        return sum(e[1].rows.nbytes for e in self.entries.values())

    def lookup(self, key):
        entry = self.entries.get(key)
        if entry is None:
            return None
        entry[2] = self.generation
        self.entries.move_to_end(key)
        return entry[0], entry[1]

    def store(self, key, kd, cache):
        need = cache.rows.nbytes
        if self.nbytes() + need > self.budget:
            for k in [k for k, e in self.entries.items() if e[2] < self.generation]:
                del self.entries[k]
                if self.nbytes() + need <= self.budget:
                    break
        if self.nbytes() + need <= self.budget:
            self.entries[key] = [kd, cache, self.generation]


_POOL = threading.local()


@contextlib.contextmanager
def kernel_row_pool(pool):
    """Within this block, :func:`solve` takes and leaves kernel-row caches in ``pool``
    (a :class:`KernelRowPool`, or None for no pooling)."""
    previous = getattr(_POOL, "pool", None)
    _POOL.pool = pool
    try:
        yield pool
    finally:
        _POOL.pool = previous


def _pool_key(problem, cache_size):
    kernel = problem.kernel
    if getattr(kernel, "name", "") == "callable":
        return None
    X = problem.X
    h = hashlib.blake2b(digest_size=20)
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        for a in (X.data, X.indices, X.indptr):
            h.update(np.ascontiguousarray(a).view(np.uint8).ravel())
    else:
        h.update(np.ascontiguousarray(X, dtype=np.float64).view(np.uint8).ravel())
    return (
        h.hexdigest(),
        tuple(X.shape),
        sp.issparse(X),
        int(kernel.code),
        tuple(map(float, kernel.params)),
        float(cache_size),
    )
