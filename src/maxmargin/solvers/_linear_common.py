r"""What the linear solvers share: the data view, row products, a random generator, the chunked driver.

Every linear solver sees the training rows :math:`x_i` through :class:`LinearData`: a dense C-ordered
array *or* the three CSR arrays (never both; the other is an empty placeholder, so one compiled
function serves both), plus an optional constant *bias feature* :math:`B` appended to every row (LIBLINEAR's
``-B``, scikit-learn's ``intercept_scaling``).  With the bias feature the weight vector has
``n_features + 1`` entries and the intercept is :math:`B\,w_{d}`; the bias weight is regularised like the
others, as in LIBLINEAR.  Float32 data stay float32 (the solvers compile once per dtype); the weights are
float64.

The compiled loops release the GIL (``nogil=True``), so one-vs-rest problems run on threads.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np
import scipy.sparse as sp
from llvmlite import ir
from numba import njit, prange, uint64
from numba.core import cgutils, types
from numba.extending import intrinsic

from .. import _scratch
from .._jit import parallel_and_serial
from .base import Watch

#: unsigned steps for the index arithmetic of the loops below (a signed literal would make the sum signed)
_U1, _U2, _U3, _U4 = (np.uint64(v) for v in (1, 2, 3, 4))
#: seconds one compiled chunk should take when a callback or time limit is watched
CHUNK_SECONDS = 0.2
#: dense data with fewer non-zeros than this fraction are handed to the solvers as CSR (MNIST: 19% non-zeros,
#: 2.5x faster epochs than the dense loops, which visit every zero)
SPARSE_BELOW = 0.5
#: dense data of at most this many features go to CSR for the coordinate-descent solvers (``linear_data(...,
#: rows_first=True)``): their one-row updates ran faster through the CSR loop even on fully dense rows (session 5,
#: 50 epochs of dual CD on 20k random dense rows: 16 features 0.089 s against 0.136 s, 32: 0.137 against 0.164,
#: 48: 0.179 against 0.194, 64: 0.233 against 0.188; letter26's 26 one-vs-rest problems 3.9 s against 5.2 s).
#: Session 18, with the dense rows' loops of their own (_dense_row_dot): dense / CSR, LinearSVC hinge and LinearSVR
#: (1,000 epochs): 40 features 2.8 / 2.4, 64: 1.6-2.2 / 1.4-1.7, 100: 1.38 / 1.17, 128: 1.03 / 0.98, 200: 0.75 / 0.63.
#: TRON's passes are faster on the dense layout (letter26: 0.10 s against 0.25 s), so it keeps it.
CD_CSR_MAX_FEATURES = 128
#: ... unless they have at least CD_DENSE_MIN_FEATURES features and take CD_DENSE_MIN_BYTES or more: rows of that
#: length out of the cache stream faster from the dense layout (8 bytes a value against CSR's 12, and the plain
#: prefetch of :func:`prefetch_plan`).  Session 35 (Zen 4, 1 MB L2), dual CD epochs, ns a row dense / CSR:
#: 40,000 x 50 (16 MB) 85 / 113, 80,000 x 50 107 / 141, 30,000 x 64 99 / 121, 40,000 x 100 143 / 210, 100,000 x
#: 100 162 / 226; in cache CSR stays ahead (20,000 x 50, 8 MB: 72 / 61) and so do shorter rows (40 features:
#: 135 / 142 and 130 / 125; 32: 94 / 87, 121 / 114; 20: 104 / 84).
CD_DENSE_MIN_FEATURES = 48
CD_DENSE_MIN_BYTES = 12 << 20
#: ... or CD_DENSE_MID_FEATURES features and CD_DENSE_MID_BYTES, or CD_DENSE_ANY_FEATURES features whatever their
#: size.  Session 36 (Zen 4), with the dense epochs' update one row late (``dual_cd.LAG``, which came after the
#: figures above), whole ``LinearSVC`` / ``LinearSVR`` dual fits, dense / CSR: 1,000-2,000 x 128 0.78-0.81, 4,000 x
#: 128 0.81 (LinearSVR 0.71-0.78), 10,000 x 128 0.73, 1,000 x 96 0.74, 2,000 x 96 0.91-0.94 (0.85-0.96), 4,000 x 96
#: 0.91, 8,000 x 96 0.84, 12,000 x 100 0.89 (10,000 x 100: 0.67-0.69); 64 features: 16,000 rows (8 MB) 0.87,
#: 20,000 0.66-0.78 (0.43-0.54), but 2,000-12,000 rows 0.97-1.10 (10,000: 0.86-0.88); 48 features: 10,000 rows
#: 1.17-1.29, 20,000-24,000 rows 0.78-1.10.
CD_DENSE_MID_FEATURES = 64
CD_DENSE_MID_BYTES = 8 << 20
CD_DENSE_ANY_FEATURES = 96


@dataclass
class LinearData:
    """Training rows for the compiled linear solvers (see the module docstring)."""

    Xd: np.ndarray
    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    dense: bool
    n_features: int
    bias: float
    #: every stored value of the CSR arrays is 1 (0/1 features): loops may skip reading ``data``
    unit: bool = False
    #: each CSR row stores its values in columns below this one first (:func:`fold_singletons` writes its rows so,
    #: at the split epochs' column: :func:`maxmargin.solvers.dual_split.split_column`); 0: not known
    split_at: int = 0

    @property
    def n_samples(self):
        return self.Xd.shape[0] if self.dense else self.indptr.shape[0] - 1

    @property
    def n_weights(self):
        return self.n_features + (1 if self.bias > 0 else 0)

    def args(self):
        """The positional arguments the compiled helpers take, in order."""
        return (self.Xd, self.data, self.indices, self.indptr, self.dense, self.n_features, float(self.bias))


#: what a pass over the data costs a row beyond its stored values, in values (the solvers' work counts: an
#: epoch of the dual, a pass of the Newton method)
ROW_VALUES = 8


def pass_values(ld):
    """The work of one pass over data ``ld``: stored values plus :data:`ROW_VALUES` a row (at least 1)."""
    stored = ld.Xd.size if ld.dense else int(ld.indptr[-1])
    return max(stored + ROW_VALUES * ld.n_samples, 1)


def row_values(ld):
    """The values stored in each row of ``ld``, as float64 (weights of the solvers' work sums)."""
    if ld.dense:
        return np.full(ld.n_samples, float(ld.Xd.shape[1]))
    return np.diff(ld.indptr).astype(np.float64)


#: values a block of :func:`_all_ones` and :func:`_all_float32`: a loop of a fixed count with no exit inside runs in
#: vector lanes, and the test for a value that fails is made once a block
CHECK_BLOCK = 1024


@njit(cache=True, nogil=True)
def balanced_tol(y, tol):
    """LIBLINEAR's stopping tolerance for the squared hinge: ``tol`` times the smaller class's share of the rows
    (labels +-1; ``tron``, ``cd_l1``).  (NumPy's ``sum(y > 0)``: ~50 us a fit with the caches cold, session 69.)"""
    n = y.shape[0]
    pos = 0
    for i in range(n):
        pos += y[i] > 0.0
    return tol * max(min(pos, n - pos), 1) / max(n, 1)


@njit(cache=True, nogil=True)
def _all_ones(a):
    """Whether every value of the 1-D array ``a`` is 1 (stops after the first block of :data:`CHECK_BLOCK`
    holding one that is not).  Session 63: the blocks' inner loops ran to ``min(start + 1024, n)``, a count the
    compiler could not vectorise (mushrooms' 128k values 52 -> 12 us, a9a's 450k 228 -> 132 us, 5M 5.7 -> 2.1 ms)."""
    n = a.shape[0]
    nb = n // CHECK_BLOCK
    for j in range(nb):
        bad = 0
        base = j * CHECK_BLOCK
        for k in range(CHECK_BLOCK):
            bad += a[base + k] != 1.0
        if bad:
            return False
    bad = 0
    for k in range(nb * CHECK_BLOCK, n):
        bad += a[k] != 1.0
    return bad == 0


@njit(cache=True, nogil=True)
def _all_float32(a):
    """Whether every value of ``a`` is exactly a float32 (NaN is not; stops after the first block of
    :data:`CHECK_BLOCK` holding one that is not).  Blocks as :func:`_all_ones`: 128k small counts 94 -> 28 us,
    5M 6.9 -> 3.8 ms (session 63; a test and an exit at every value before)."""
    a = a.ravel()
    n = a.shape[0]
    nb = n // CHECK_BLOCK
    for j in range(nb):
        bad = 0
        base = j * CHECK_BLOCK
        for k in range(CHECK_BLOCK):
            v = a[base + k]
            bad += np.float64(np.float32(v)) != v
        if bad:
            return False
    bad = 0
    for k in range(nb * CHECK_BLOCK, n):
        v = a[k]
        bad += np.float64(np.float32(v)) != v
    return bad == 0


def _lossless_float32(a):
    """``a`` as float32 when every value survives the round trip exactly (0/1 features, counts, ...), else ``a``:
    half the memory traffic for the same arithmetic (products and sums stay float64)."""
    if a.dtype != np.float64 or a.size == 0 or not _all_float32(a):
        return a
    return a.astype(np.float32)


def linear_data(X, bias, rows_first=False):
    """A :class:`LinearData` for ``X`` (dense, or CSR: rows in any order, no column twice in a row) and bias
    feature ``bias`` (<= 0: none).
    Float64 values that are exactly float32 are stored as float32 (:func:`_lossless_float32`); dense data with
    fewer than :data:`SPARSE_BELOW` non-zeros go to CSR.  ``rows_first``: for the coordinate-descent solvers,
    which visit one row at a time -- dense data of at most :data:`CD_CSR_MAX_FEATURES` features go to CSR too,
    except rows of :data:`CD_DENSE_ANY_FEATURES` values or more, and large data of :data:`CD_DENSE_MID_FEATURES`
    or :data:`CD_DENSE_MIN_FEATURES` features (:func:`_dense_rows_first`)."""
    bias = float(bias) if bias is not None and bias > 0 else -1.0
    if sp.issparse(X):
        if X.format != "csr":  # (a CSR matrix or array as it is: scipy's constructor checked it again, ~30 us)
            X = X.tocsr()
        return _csr_linear_data(X.data, X.indices, X.indptr, X.shape[1], bias)
    X = np.ascontiguousarray(X)
    long_rows = _dense_rows_first(X.shape[1], X.nbytes)
    to_rows = rows_first and X.shape[1] <= CD_CSR_MAX_FEATURES and not long_rows
    if X.size and not to_rows and _clearly_dense(X):
        indptr = None  # dense rows: no count of every value needed (a pass over X: 1 ms of reg_dense's 17 ms fit)
    else:
        indptr = _dense_row_counts(X) if X.size else None
    if X.size and indptr is not None and (indptr[-1] < SPARSE_BELOW * X.size or to_rows):
        # (the arrays as they are: two scipy matrices built on the way took ~0.1 ms of a 1 ms fit on iris)
        data, indices = _dense_to_csr(X, indptr, bool(indptr[-1] >= BRANCHLESS_MIN_DENSITY * X.size))
        return _csr_linear_data(data, indices, indptr, X.shape[1], bias)
    X = _lossless_float32(X)
    return LinearData(X, np.empty(0, X.dtype), np.empty(0, np.int32), np.zeros(1, np.int64), True, X.shape[1], bias)


def _dense_rows_first(n_features, nbytes):
    """Whether dense data of ``n_features`` features taking ``nbytes`` keep the dense layout for the
    coordinate-descent loops (see :data:`CD_DENSE_MIN_FEATURES`)."""
    return (
        n_features >= CD_DENSE_ANY_FEATURES
        or (n_features >= CD_DENSE_MID_FEATURES and nbytes >= CD_DENSE_MID_BYTES)
        or (n_features >= CD_DENSE_MIN_FEATURES and nbytes >= CD_DENSE_MIN_BYTES)
    )


#: :func:`_clearly_dense` counts the non-zeros of this many rows, spread over X ...
DENSITY_SAMPLE_ROWS = 512
#: ... and of at most this many values in all: of long rows, :data:`DENSITY_SAMPLE_WINDOWS` evenly spaced runs
#: of columns (320 rows of 20,000 values: the whole matrix, 2.7 ms of a 17 ms fit, was counted before; single
#: columns at an even stride, a cache line each, 0.45 ms; runs of 16 values, 0.05 ms)
DENSITY_SAMPLE_VALUES = 1 << 16
DENSITY_SAMPLE_WINDOWS = 8


def _clearly_dense(X):
    """Whether a sample of X (:data:`DENSITY_SAMPLE_ROWS` evenly spaced rows; where they hold more than
    :data:`DENSITY_SAMPLE_VALUES` values, only their columns in :data:`DENSITY_SAMPLE_WINDOWS` evenly spaced
    runs) holds so many non-zeros that X stays dense (at least ``SPARSE_BELOW + 0.15``); near the threshold
    every row is counted."""
    step = max(1, X.shape[0] // DENSITY_SAMPLE_ROWS)
    sample = X[::step]
    width = DENSITY_SAMPLE_VALUES // sample.shape[0] // DENSITY_SAMPLE_WINDOWS
    if width >= 1 and sample.shape[1] > width * DENSITY_SAMPLE_WINDOWS:
        starts = np.linspace(0, sample.shape[1] - width, DENSITY_SAMPLE_WINDOWS).astype(np.int64)
        sample = sample[:, (starts[:, None] + np.arange(width)).ravel()]
    return bool(np.count_nonzero(sample) >= (SPARSE_BELOW + 0.15) * sample.size)


#: the (0, 0) dense array of CSR data, one per value type (nothing to write in it: shared by every fit, one NumPy call
#: fewer a fit -- each costs ~10-40 us with cold caches, session 70)
_NO_DENSE_ROWS = {np.dtype(t): np.empty((0, 0), dtype=t) for t in (np.float64, np.float32)}


def _csr_linear_data(data, indices, indptr, n_features, bias):
    """:class:`LinearData` of CSR arrays (rows in any order, no column twice in a row)."""
    unit = bool(data.size > 0 and _all_ones(data))
    # 0/1 features: the hot loops never read the values (LinearData.unit), so no float32 copy is made
    data = data if unit else _lossless_float32(data)
    no_rows = _NO_DENSE_ROWS.get(data.dtype)
    return LinearData(
        np.empty((0, 0), dtype=data.dtype) if no_rows is None else no_rows,
        data,
        indices.astype(np.int32, copy=False),
        indptr.astype(np.int64, copy=False),
        False,
        n_features,
        bias,
        unit,
    )


#: :func:`fold_singletons` folds the features stored in one training row only when they hold at least this
#: fraction of the stored values (hashed features: hashed300k, 32%; news20b 7.5%; the other shapes of the benchmarks:
#: 0-4%) ...
FOLD_SINGLETONS_MIN = 0.05
#: ... and the features left (those of two rows or more) are at most this fraction of all: what the fold buys is
#: mostly a smaller weight vector for the epochs' scattered reads (news20b: 1M weights -> 16%; fold / no fold 0.86-0.88
#: of the time at tol 0.1, 0.75 at 1e-4), while its copy of the rows costs ~3 ns a value (:func:`_fold_rows`), about
#: two epochs.  Session 56, ``LinearSVC`` dual, fold / no fold, where most weights stay: fewwide (400
#: rows of 3,000 signed values over 500,000 columns; 9% one-row values, 69% of the weights left, 3 epochs) 1.3-1.5x,
#: 2,000 x 500 over 500,000 (13.5%, 59%, 7 epochs) 1.32-1.42, 20,000 x 50 over 400,000 (8%, 71%, 26 epochs) 1.00;
#: where few stay it gains: 20,000 x 50 over 700,000 (24%, 42%, 24 epochs) 0.80, over 2,000,000 (61%, 9%) 0.60.
FOLD_KEPT_MAX = 0.5
_FOLD_LOCK = threading.Lock()


@dataclass
class Folded:
    r"""CSR rows without their one-row features (:func:`fold_singletons`).

    A feature :math:`j` stored in row :math:`r` only has the weight :math:`w_j = y_r\alpha_r x_{rj}` in the
    dual, so its share of :math:`w\cdot x_r` is :math:`y_r\alpha_r x_{rj}^2`: a diagonal term of row
    :math:`r`, like the squared hinge's :math:`1/(2C_r)`.  ``ld``: the other features, renumbered (features
    stored nowhere dropped too); ``mass``: :math:`\sum_j x_{rj}^2` over the row's one-row features;
    ``kept``: each kept column's original number; ``rows``, ``cols``, ``vals``: the folded entries."""

    ld: LinearData
    mass: np.ndarray
    kept: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    vals: np.ndarray

    def weights(self, w, coef, n_features):
        r"""The weights of all ``n_features`` features (then the bias, if any) from the folded solver's ``w`` and
        the rows' :math:`y_r\alpha_r` (``coef``)."""
        return _unfolded(
            w, np.ascontiguousarray(coef, dtype=np.float64), self.kept, self.rows, self.cols, self.vals, n_features
        )


@njit(cache=True, nogil=True)
def _unfolded(w, coef, kept, rows, cols, vals, n_features):
    """:meth:`Folded.weights` in one compiled pass (NumPy's scattered assignments and the products' temporary:
    bigrams, 2M features, ~5 against ~2 ms)."""
    k = kept.shape[0]
    out = np.zeros(n_features + (w.shape[0] - k))
    for q in range(k):
        out[uint64(kept[q])] = w[q]
    for q in range(k, w.shape[0]):
        out[n_features + (q - k)] = w[q]
    for t in range(cols.shape[0]):
        out[uint64(cols[t])] = coef[uint64(rows[t])] * vals[t]
    return out


@njit(cache=True, nogil=True)
def put_column(w, out, p, nf):
    """``out[:, p] = w`` for a zeroed ``out``, writing the nonzero weights only (one-vs-rest weights of many
    classes over many features are mostly zero: a one-row feature's weight is zero in every problem whose dual
    variable of that row is); returns the sum of squares of ``w[:nf]`` (the margin's, read here because a
    later pass over ``out`` would fault in the pages never written)."""
    s = 0.0
    for j in range(w.shape[0]):
        v = w[j]
        if v != 0.0:
            out[j, p] = v
            if j < nf:
                s += v * v
    return s


#: the dual CD's record epochs read the rows' column numbers as uint16 (:func:`narrow_indices`) up to this many
#: features: 2 bytes a stored value instead of 4, the same iterates.  Session 45, epochs to tol 0.1 from zero
#: (uint16 / int32): ijcnn1 0.92-0.96, a9a 0.95-0.98, mushrooms 0.98, text2 0.93-0.94 (uint8 was 1-3% faster
#: still, not worth a third compiled copy of each loop)
NARROW_MAX_FEATURES = 1 << 16


def narrow_indices(ld):
    """``ld.indices`` as uint16 where every column number fits (CSR rows, at most :data:`NARROW_MAX_FEATURES`
    features), made once per :class:`LinearData` (one-vs-rest problems share it);
    else ``ld.indices`` itself."""
    if ld.dense or ld.n_features > NARROW_MAX_FEATURES or ld.indices.dtype == np.uint16:
        return ld.indices
    with _FOLD_LOCK:
        narrow = getattr(ld, "_narrow", None)
        if narrow is None:
            narrow = ld._narrow = ld.indices.astype(np.uint16)
        return narrow


def _restricted(ld, bits, prefix, n_kept):
    """CSR data ``ld`` on the columns marked in ``bits`` only (:func:`column_ranks`; renumbered in order, ``n_kept``
    of them; every stored value of ``ld`` is in one of them)."""
    out = _scratch.empty(ld.indices.shape[0], np.int32)  # (kept blocks: these end with the fit)
    _renumbered(ld.indices, bits, prefix, out)
    return LinearData(
        np.empty((0, 0), dtype=ld.data.dtype),
        ld.data,
        out,
        ld.indptr,
        False,
        int(n_kept),
        ld.bias,
        ld.unit,
    )


def aligned_floats(size, zeroed=False):
    """A (size,) float64 array starting on a 64-byte boundary (a cache line), uninitialised or ``zeroed``: per-row
    records and per-thread lines that must not straddle lines."""
    raw = (np.zeros if zeroed else np.empty)(size + 8)
    skip = (-raw.ctypes.data % 64) // 8
    return raw[skip : skip + size]


def fold_singletons(ld):
    """The :class:`Folded` form of CSR data ``ld``, or None (dense data, one-row features holding less than
    :data:`FOLD_SINGLETONS_MIN` of the stored values, or more than :data:`FOLD_KEPT_MAX` of the features left).
    Computed once per :class:`LinearData` (the one-vs-rest problems share it).  On hashed300k (300,000 rows, 4 of
    2**20 hashed features each) the weights the dual solver touches shrink from 2**20 to 332,369 and a third of the
    stored values go."""
    if ld.dense:
        return None
    with _FOLD_LOCK:
        if hasattr(ld, "_folded"):
            return ld._folded
        ld._folded = None
        nf = ld.n_features
        # each one-row feature holds one stored value: too few features, no fold (mushrooms: 112 of
        # 128k values; the count below took 1 ms of a 10 ms fit)
        if ld.indices.size == 0 or nf < FOLD_SINGLETONS_MIN * ld.indices.size:
            return None
        counts = _counts_of(ld)
        # a one-row feature holds exactly one stored value: their share from the counts alone (text2, 351k
        # values: 0.5 ms against 1.4 ms for the per-value mask, which only a fold needs)
        n_single, n_kept = _count_shares(counts)
        if n_single < FOLD_SINGLETONS_MIN * ld.indices.size:
            return None
        if n_kept > FOLD_KEPT_MAX * nf:  # most weights would stay: the copy costs more than it saves
            return None
        bits, prefix, kept = column_ranks(counts, 2, n_kept)
        # the split epochs' column, from the counts (exact); the copy writes each row's values below it first, so
        # that the split epochs need no partitioned copy of their own where the rows come unsorted (bigrams: the
        # copy of ~11-36 ms saved; sorted rows stay as they are)
        from .dual_split import may_split, split_from_counts

        split = split_from_counts(counts[kept]) if may_split(n_kept, ld.indices.size - n_single, ld.n_samples) else 0
        parts = _fold_entries(ld.data, ld.indices, ld.indptr, (bits, prefix), bool(ld.unit), n_single, split)
        data, indices, indptr, mass, rows, cols, vals = parts
        small = LinearData(
            np.empty((0, 0), dtype=ld.data.dtype),
            data,
            indices,
            indptr,
            False,
            int(kept.shape[0]),
            ld.bias,
            ld.unit,
            split,
        )
        folded = Folded(small, mass, kept, rows, cols, vals)
        ld._folded = folded
        return folded


def used_columns(ld):
    """The columns CSR data ``ld`` stores a value in (ascending), from its cached feature counts."""
    with _FOLD_LOCK:
        return np.flatnonzero(_counts_of(ld))


def column_counts(ld):
    """How many stored values each column of CSR data ``ld`` holds (cached per :class:`LinearData`: read only)."""
    with _FOLD_LOCK:
        return _counts_of(ld)


def _counts_of(ld):
    """:func:`_feature_counts` of CSR data ``ld``, computed once per :class:`LinearData` (the fold and
    :func:`compact_columns` share them; the caller holds ``_FOLD_LOCK``)."""
    counts = getattr(ld, "_counts", None)
    if counts is None:
        counts = ld._counts = _feature_counts(ld.indices, ld.n_features)
    return counts


@njit(cache=True, nogil=True)
def _count_shares(counts):
    """``(features stored once, features stored at least twice)`` of the feature ``counts``, one pass (NumPy's
    masks, ``count_nonzero`` and ``flatnonzero``: three passes and two temporaries; fewwide, 500,000 features,
    where the fold declines: 0.7 against 0.1 ms)."""
    single = 0
    kept = 0
    for j in range(counts.shape[0]):
        c = counts[j]
        single += c == 1
        kept += c >= 2
    return single, kept


def column_ranks(counts, least, n_kept):
    """``(bits, prefix, kept)`` for the columns holding at least ``least`` stored values (``n_kept`` of them, from
    ``counts``): ``bits`` one bit a column (uint64 words), ``prefix`` the kept columns before each word, ``kept``
    their original numbers in order.  A kept column ``j``'s new number is :func:`_rank` -- the kept columns below
    it --, read from one word of ``bits`` and one of ``prefix`` (int32): 1M columns in 192 kB, which stay in the
    core's 1 MB cache, where a table of int32 numbers (4 MB) missed it on every scattered read."""
    words = (counts.shape[0] + 63) // 64
    bits = _scratch.empty(words, np.uint64)
    prefix = _scratch.empty(words, np.int32)
    kept = _scratch.empty(n_kept + 1, np.int64)  # (+1: the slot the branchless loop writes the others' numbers to)
    _ranks_into(counts, least, bits, prefix, kept)
    return bits, prefix, kept[:n_kept]


@njit(cache=True, nogil=True)
def _ranks_into(counts, least, bits, prefix, kept):
    """:func:`column_ranks`' tables in one pass over ``counts``, without a branch on them (``kept``'s last slot
    takes the numbers of the columns left out)."""
    nf = counts.shape[0]
    dump = kept.shape[0] - 1
    q = 0
    for word in range(bits.shape[0]):
        prefix[word] = q
        b = uint64(0)
        j0 = word * 64
        for z in range(min(64, nf - j0)):
            j = j0 + z
            keep = counts[j] >= least
            b |= uint64(keep) << uint64(z)
            kept[dump + keep * (q - dump)] = j
            q += keep
        bits[word] = b


@njit(cache=True, nogil=True, inline="always")
def _popcount(x):
    """The set bits of the uint64 ``x`` (the SWAR sum)."""
    x = x - ((x >> uint64(1)) & uint64(0x5555555555555555))
    x = (x & uint64(0x3333333333333333)) + ((x >> uint64(2)) & uint64(0x3333333333333333))
    x = (x + (x >> uint64(4))) & uint64(0x0F0F0F0F0F0F0F0F)
    return (x * uint64(0x0101010101010101)) >> uint64(56)


@njit(cache=True, nogil=True, inline="always")
def _rank(bits, prefix, j):
    """``(kept, number)`` of column ``j`` in :func:`column_ranks`' tables: 1 if it is kept, else 0, and the number of
    kept columns below it (its new number, if kept)."""
    word = bits[j >> uint64(6)]
    shift = j & uint64(63)
    keep = (word >> shift) & uint64(1)
    below = prefix[j >> uint64(6)] + int(_popcount(word & ((uint64(1) << shift) - uint64(1))))
    return int(keep), below


@njit(cache=True, nogil=True)
def _renumbered(indices, bits, prefix, out):
    """The new numbers (:func:`_rank`) of the kept columns ``indices`` into the int32 ``out``, one pass."""
    for k in range(indices.shape[0]):
        out[k] = _rank(bits, prefix, uint64(indices[k]))[1]


def _feature_counts(indices, n_features):
    """``np.bincount(indices, minlength=n_features)``: 0.19 against 0.69 ms on text2's 352k values, a
    twentieth of its dual fit (``np.bincount`` first copies the int32 indices).  Int32 counts when no count can
    reach 2**31 (news20-like, 2.9M values over 1M features: 3.3 against 3.7-7.8 ms with int64, half the memory
    for the scattered increments)."""
    counts = _scratch.zeros(n_features, np.int32 if indices.shape[0] < 2**31 else np.int64)
    _count_into(indices, counts)
    return counts


@njit(cache=True, nogil=True)
def _count_into(indices, counts):
    for k in range(indices.shape[0]):
        counts[uint64(indices[k])] += 1


def _fold_entries(data, indices, indptr, ranks, unit, n_single, split=0):
    """One pass of :func:`fold_singletons` over the stored values: the entries of features stored in one row (not
    kept in ``ranks``, :func:`column_ranks`' ``(bits, prefix)``) go to ``(rows, cols, vals)`` and their squares to the
    row's ``mass``; the others stay, as CSR arrays with their columns renumbered (:func:`_rank`).  ``split`` > 0:
    each row's values in (renumbered) columns below it first, each part in the row's order (:func:`_fold_rows`)."""
    n = indptr.shape[0] - 1
    n_keep = indices.shape[0] - n_single
    # (kept blocks: the fold's arrays end with the fit; see maxmargin._scratch.  One slot more in the kept values'
    # arrays: _fold_rows writes every value there, and the last row's one-row values past their end)
    out_data = _scratch.empty(n_keep + 1, data.dtype)
    out_indices = _scratch.empty(n_keep + 1, np.int32)
    out_indptr = _scratch.zeros(n + 1, np.int64)
    mass = _scratch.empty(n, np.float64)
    rows = _scratch.empty(n_single, np.int64)
    cols = _scratch.empty(n_single, np.int64)
    vals = _scratch.empty(n_single, np.float64)
    bits, prefix = ranks
    _fold_rows(
        data, indices, indptr, bits, prefix, unit, split, out_data, out_indices, out_indptr, mass, rows, cols, vals
    )
    return out_data[:n_keep], out_indices[:n_keep], out_indptr, mass, rows, cols, vals


@njit(cache=True, nogil=True)
def _fold_rows(
    data, indices, indptr, bits, prefix, unit, split, out_data, out_indices, out_indptr, mass, rows, cols, vals
):
    """The rows of :func:`_fold_entries`, in order.  A row whose kept values cross ``split`` out of order is then
    partitioned where it was written (in the core's cache; a scratch copy of its upper part).

    Each value is written to the kept side whether or not it belongs there (a one-row feature's value is written over
    by the next kept one, or by the next row's); only a one-row feature's entry takes a branch.  Session 74 (one
    thread, the same arrays): hugevocab (2.1M values over 2**20 columns, 17% of them in one row) with a table of
    int32 numbers (4 MB, past the core's cache) 30.6 ms -- the former scheme, 11-16 ms on two threads (the second half
    of the rows written backwards) --, with the ranks' tables (:func:`column_ranks`, 192 kB) 7.1-7.5 ms; hashed300k
    (1.2M values of 4 a row, 32% in one-row features) 6.6-7.0 ms, where writing both sides without any branch took
    10.6 ms (each position then waits for the previous value's rank).  No thread: nothing lost where the second core is
    busy.
    """
    q = 0
    t = 0
    width = 0  # (the split's scratch: the longest row's length)
    if split > 0:
        for i in range(indptr.shape[0] - 1):
            width = max(width, int(indptr[i + 1] - indptr[i]))
    scratch_i = np.empty(width, dtype=np.int32)
    scratch_d = np.empty(width, dtype=out_data.dtype)
    for i in range(indptr.shape[0] - 1):
        q_row = q
        t_row = t
        m = 0.0
        for k in range(uint64(indptr[i]), uint64(indptr[i + 1])):
            j = uint64(indices[k])
            keep, c = _rank(bits, prefix, j)
            out_data[q_row] = data[k]
            out_indices[q_row] = c
            if keep:
                q_row += 1
            else:
                v = 1.0 if unit else np.float64(data[k])
                rows[t_row] = i
                cols[t_row] = j
                vals[t_row] = v
                m += v * v
                t_row += 1
        if split > 0:
            _split_row(out_data, out_indices, q, q_row, split, scratch_i, scratch_d)
        out_indptr[i + 1] = q_row
        mass[i] = m
        q = q_row
        t = t_row


@njit(cache=True, nogil=True)
def _split_row(out_data, out_indices, lo, hi, split, scratch_i, scratch_d):
    """A row's kept values ``lo:hi`` of :func:`_fold_rows`, those in columns below ``split`` first, each part in the
    row's order, where they cross it out of order (the upper part copied to ``scratch_i`` / ``scratch_d`` on the
    way).  A call of its own: the
    partition written in :func:`_fold_rows`' loop slowed every row, split or not (hashed300k 6.5 -> 9.8 ms)."""
    upper = False
    crossed = False
    for p in range(lo, hi):
        if out_indices[p] >= split:
            upper = True
        elif upper:
            crossed = True
            break
    if not crossed:
        return
    a = lo
    h = 0
    for p in range(lo, hi):
        c = out_indices[p]
        if c < split:
            out_indices[a] = c
            out_data[a] = out_data[p]
            a += 1
        else:
            scratch_i[h] = c
            scratch_d[h] = out_data[p]
            h += 1
    for z in range(h):
        out_indices[a + z] = scratch_i[z]
        out_data[a + z] = scratch_d[z]


#: :func:`compact_columns` drops the features stored in no row when at most this fraction of them is used
COMPACT_MAX_USED = 0.8
#: ... and when there are at least this many features per stored value (mushrooms, 112 features and 128k
#: values: the check alone took 0.6 ms of a 10 ms fit)
COMPACT_MIN_FEATURES_PER_VALUE = 0.01


def compact_columns(ld):
    """``(small, kept)``: CSR data ``ld`` without the features stored in no row (``small``, its columns renumbered;
    ``kept``: their original numbers), or None (dense data, or more than :data:`COMPACT_MAX_USED` of the features
    used).  For the primal solver: such a feature's weight is 0 at the optimum and, from a start at 0, at every
    iterate (its gradient is its own weight), so the vectors of the Newton and CG steps shrink to the used
    features (hashed300k: 714,602 of 2**20; text100: 36,279 of 50,000).  Computed once per
    :class:`LinearData`."""
    if ld.dense:
        return None
    with _FOLD_LOCK:
        if hasattr(ld, "_compact"):
            return ld._compact
        ld._compact = None
        nf = ld.n_features
        if nf < COMPACT_MIN_FEATURES_PER_VALUE * ld.indices.size:
            return None  # vectors of nf are a small part of a pass over the stored values: no gain
        # the features' counts, compiled (np.bincount: text2, 351k values, 0.5 ms -- a sixteenth of its primal fit,
        # only to find 82% of the features used and keep them all)
        counts = _counts_of(ld)
        n_used = int(np.count_nonzero(counts))
        if n_used > COMPACT_MAX_USED * nf:
            return None
        bits, prefix, kept = column_ranks(counts, 1, n_used)
        small = _restricted(ld, bits, prefix, n_used)
        small._counts = _counts_of(ld)[kept]  # (its columns' counts, for the passes' rules: tron.far_weights)
        ld._compact = (small, kept)
        return ld._compact


@njit(cache=True, nogil=True)
def _dense_row_counts(X):
    """The CSR ``indptr`` of a dense C-ordered matrix: its rows' running counts of non-zeros (no branch on the
    values, so the loop runs as vector code; 8,000 x 120 at 10% density: 0.4 ms, ``np.count_nonzero`` 1.5 ms)."""
    n, d = X.shape
    indptr = np.zeros(n + 1, dtype=np.int64)
    total = 0
    for i in range(n):
        c = 0
        for j in range(d):
            c += X[i, j] != 0
        total += c
        indptr[i + 1] = total
    return indptr


#: :func:`_dense_to_csr` stores every value and moves on by ``value != 0`` when at least this fraction of the values
#: are non-zero; sparser rows branch on each value, a branch then mostly predicted (8,000 x 120 at 10%: 2.6 ->
#: 1.8 ms; 1,797 x 64 at 50%: 0.9 -> 0.2 ms; 5,000 x 1,000 at 2%: 8.4 against 10.7 ms)
BRANCHLESS_MIN_DENSITY = 0.05


@njit(cache=True, nogil=True)
def _dense_to_csr(X, indptr, branchless):
    """``(data, indices)`` of a dense C-ordered matrix whose CSR ``indptr`` is given (:func:`_dense_row_counts`)."""
    n, d = X.shape
    nnz = indptr[n]
    data = np.empty(nnz + 1, dtype=X.dtype)  # one slot more: the branch-free loop stores each row's last zero too
    indices = np.empty(nnz + 1, dtype=np.int32)
    for i in range(n):
        k = indptr[i]
        if branchless:
            for j in range(d):
                v = X[i, j]
                data[k] = v
                indices[k] = j
                k += v != 0
        else:
            for j in range(d):
                v = X[i, j]
                if v != 0:
                    data[k] = v
                    indices[k] = j
                    k += 1
    return data[:nnz], indices[:nnz]


def subset_rows(X, rows):
    """Rows ``rows`` of dense or CSR ``X`` (no copy when every row is kept)."""
    if rows.shape[0] == X.shape[0]:
        return X
    return X[rows]


# --------------------------------------------------------------------------- compiled helpers


def _element_pointer(context, builder, aryty, ary_value, idx):
    """LLVM IR: the pointer to element ``idx`` of an array argument (no bounds check)."""
    ary = context.make_array(aryty)(context, builder, ary_value)
    return cgutils.get_item_pointer(context, builder, aryty, ary, [idx], wraparound=False)


def _emit_prefetch(builder, ptr):
    """LLVM IR: ``llvm.prefetch`` (read, keep in all cache levels, data) of the byte at ``ptr``."""
    i8p = ir.IntType(8).as_pointer()
    i32 = ir.IntType(32)
    fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
    fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
    builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])


@intrinsic
def _prefetch(typingctx, arr, idx):
    """LLVM's ``prefetch`` (read, keep in all cache levels) of ``arr[idx]``."""
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        _emit_prefetch(builder, _element_pointer(context, builder, signature.args[0], args[0], args[1]))
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _address(typingctx, arr, idx):
    """The address of ``arr[idx]`` as an unsigned integer (no bounds check)."""
    sig = types.uint64(arr, idx)

    def codegen(context, builder, signature, args):
        ptr = _element_pointer(context, builder, signature.args[0], args[0], args[1])
        return builder.ptrtoint(ptr, ir.IntType(64))

    return sig, codegen


@intrinsic
def _prefetch_address(typingctx, addr):
    """LLVM's ``prefetch`` (read, keep in all cache levels) of the byte at address ``addr`` (an unsigned integer)."""
    sig = types.void(addr)

    def codegen(context, builder, signature, args):
        _emit_prefetch(builder, builder.inttoptr(args[0], ir.IntType(8).as_pointer()))
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, nogil=True, inline="always")
def prefetch_lines(arr, lo, hi):
    """Every 64-byte cache line that holds a part of ``arr[lo:hi]`` (``hi > lo``), each once."""
    a = _address(arr, lo) & ~uint64(63)
    b = _address(arr, hi - 1)
    while a <= b:
        _prefetch_address(a)
        a += uint64(64)


#: data up to this many bytes (rows, per-row arrays, weights) stay in a core's own caches: no prefetch at all
#: (``(0, 0, 0)``; the loops' prefetch instructions then only cost: LinearSVR on 1,000-5,000 dense rows of 10
#: features, all rows active, 0.76-0.83x the time of an epoch with them; level at 20,000 rows)
PREFETCH_NONE_BYTES = 1 << 20
#: the staged prefetch (:func:`prefetch_staged`) aims to have about this many cache lines of rows in flight
PREFETCH_LINES = 32
#: ... with CSR rows at least this many positions ahead (long rows: 4 -> 8 made rcv1-like and news20-like text
#: epochs faster on the 1 MB-L2 host of session 33; dense rows keep 4)
PREFETCH_MIN_AHEAD = 8
#: ... and prefetches the weights a row will touch when the weight vector is larger than this many times the
#: per-core (L2) cache (:func:`l2_cache_bytes`): then most weight reads miss (uniformly hashed features, 1-2
#: million weights after the fold, 4-8 a row: fits 0.75-0.8x the time with the weight stage).  Below it the stage
#: only costs instructions (session 33, 1 MB L2): text whose hot words fit the cache (1.2-1.5 MB of weights:
#: news20-like and tweet-like shapes 0.93x and 0.65x the time without it) and hashed300k's 2.5 MB after the fold
#: (0.80x).  Session 7 set the limit to that host's 1 MB L2, before the fold existed
PREFETCH_WEIGHTS_L2 = 4


def l2_cache_bytes():
    """The per-core L2 cache of this host in bytes (Linux sysfs; 1 MB where unknown)."""
    global _L2_BYTES
    if _L2_BYTES is None:
        try:
            size = parse_cache_size(Path("/sys/devices/system/cpu/cpu0/cache/index2/size").read_text())
        except (OSError, ValueError):
            size = 0
        _L2_BYTES = size if size > 0 else 1 << 20
    return _L2_BYTES


def parse_cache_size(text):
    """Bytes of a sysfs cache size such as ``'1024K'`` or ``'2M'`` (a plain number: bytes)."""
    text = text.strip().upper().removesuffix("B")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * scale


_L2_BYTES = None
#: rows, their per-row arrays, the visiting order and the weights up to this many bytes stay in the last-level
#: cache (half of this machine's 32 MB): the staged prefetch (:func:`prefetch_plan`) is for data larger than that.
#: ijcnn1 (10 MB) ran its epochs no faster staged; 200,000 x 20 (58 MB) twice as fast
PREFETCH_STAGED_BYTES = 16 << 20
#: ... and for CSR rows of a problem that runs alone (a binary classifier, a regression, one-vs-rest's problems one at
#: a time; not one-vs-rest's on two threads, nor Crammer-Singer's epochs) from this many.  Session 73, whole fits
#: staged / plain, one process alternating (``/tmp/s73/planab2.py``, identical iterates): data of 12-16 MiB --
#: 40,000 rows of 27 values over 2**17 columns (LinearSVR) 0.52-0.74, 200,000 rows of 8 one-hot values 0.77-0.82,
#: 100,000 rows of 8 words 0.73-0.85, 50,000 of 25 words 0.72-0.89, 20,000 of 51 words 0.87-0.94; beside
#: ``yes > /dev/null`` 0.51-0.88, beside a process copying 64 MB arrays 0.48-0.60.  Below it the plain scheme
#: still wins on a quiet machine (30,000 rows of 15 words, 6.5 MiB, staged 1.24-1.40; a9a's rows twice over,
#: 4.8 MiB, 1.63), and so does it at 12-16 MiB for ten one-vs-rest problems on two threads (1.13-1.20; one at a
#: time 0.82) and for Crammer-Singer (1.05-1.10)
PREFETCH_STAGED_ALONE_BYTES = 12 << 20


def prefetch_plan(ld, alone=False):
    """``(ahead, stages, entries)`` for the prefetches of the coordinate-descent loops on data ``ld``; ``alone``:
    the problem runs by itself (the staged scheme from :data:`PREFETCH_STAGED_ALONE_BYTES` on).

    Data within :data:`PREFETCH_NONE_BYTES` get none (``stages`` 0; the CSR loops of the classifier keep
    their own plain scheme).
    Data that fit in cache with their per-row arrays (at most :data:`PREFETCH_STAGED_BYTES`) keep the plain
    scheme (:func:`prefetch_row`): the row and its per-row entries two positions ahead (``(2, 1, 0)``; session 5
    measured it 1.8x faster epochs on a9a than none).  So do dense rows of any size: session 35 (Zen 4, 1 MB L2)
    measured the plain scheme's epochs 0.77-0.85x the staged scheme's at every distance tried (80,000 x 50
    dense rows in a random order: 123 against 150-158 ns a row; 200,000 x 20: 119 against 143-157; 40,000 x 100:
    174 against 210-222), where the staged scheme had won against a plain scheme that did not yet prefetch the
    per-row entries.  Larger CSR data get the staged scheme (:func:`prefetch_staged`): ``ahead``
    positions for the last stage, longer for short rows (each costs little time, so a miss needs more rows to
    hide behind) and shorter for long ones (their lines fill the memory queues); CSR rows in 2 stages (``indptr``,
    then the row), or 3 when the weight vector is large (then the weights the row touches); ``entries``: the
    per-row arrays are prefetched that many positions ahead.  Measured when it came (the plain scheme without the
    per-row entries then) on 200,000 x 20 dense rows: 94 ms an epoch before, 43 ms staged; 300,000 rows with 4
    of 2**20 hashed features: 112 ms against 60 ms."""
    n = max(ld.n_samples, 1)
    if ld.dense:
        row_bytes = ld.n_features * ld.Xd.dtype.itemsize
    else:
        row_bytes = ld.data.size / n * (4 + (0 if ld.unit else ld.data.dtype.itemsize))
    footprint = n * (row_bytes + 6 * 8) + 8 * ld.n_weights
    if footprint <= PREFETCH_NONE_BYTES:
        return 0, 0, 0
    if footprint <= (PREFETCH_STAGED_ALONE_BYTES if alone else PREFETCH_STAGED_BYTES) or ld.dense:
        return 2, 1, 0
    lines = max(1, int(np.ceil(row_bytes / 64)))
    rows_ahead = int(np.clip(PREFETCH_LINES // lines, PREFETCH_MIN_AHEAD, 16))
    if ld.n_weights * 8 > PREFETCH_WEIGHTS_L2 * l2_cache_bytes():
        return rows_ahead // 2, 3, rows_ahead // 2
    return rows_ahead, 2, rows_ahead


#: dense rows whose active ones hold at most this many bytes get no prefetch in an epoch (:func:`epoch_stages`)
PREFETCH_ACTIVE_BYTES = 8 << 20


@njit(cache=True, nogil=True, inline="always")
def epoch_stages(stages, dense, active, Xd):
    """The prefetch scheme (``stages`` of :func:`prefetch_plan`) for one epoch over the ``active`` rows: none where
    those are dense rows of at most :data:`PREFETCH_ACTIVE_BYTES` (four L2 caches of this host) in all, else
    ``stages``.  The plan is made for every row, but shrinking leaves epochs over a few hundred rows, which stay
    in cache, and there the plain scheme's prefetches cost more than the rows (session 71, 80,000 x 50 dense
    rows, a fixed active set in the random order, ns a row without / with them: 300 rows 32 / 142, 1,000 28 /
    105, 6,000 76 / 119, 20,000 120 / 130, 40,000 100 / 105, 80,000 140 / 118).  CSR rows keep the plan: their
    fits ran slower without any prefetch (a9a 69 against 53 ms, ijcnn1 54 against 44, news20b 235 against 205)."""
    if stages == 1 and dense and active * Xd.shape[1] * Xd.itemsize <= PREFETCH_ACTIVE_BYTES:
        return 0
    return stages


@njit(cache=True, nogil=True, inline="always")
def prefetch_row(i, Xd, data, indices, indptr, dense):
    """The plain scheme of :func:`prefetch_plan`: ask the memory system for row ``i`` (its first 512 bytes).

    The solvers visit rows in a random order, so every row starts with cache misses the hardware prefetcher
    cannot foresee.  The loops call this (or :func:`prefetch_csr`) for the row two positions ahead when the data
    stay in cache and :func:`prefetch_staged` otherwise, from two branches of their own: one helper doing both
    made a9a's epochs 1.5-2x slower (the hot loop got more expensive even where the staged branch never ran).
    """
    if dense:
        for j in range(0, min(Xd.shape[1], 64), 8):
            _prefetch(Xd[i], j)
    else:
        prefetch_csr(i, data, indices, indptr)


@njit(cache=True, nogil=True, inline="always")
def prefetch_csr(i, data, indices, indptr):
    """:func:`prefetch_row` for CSR arrays."""
    prefetch_span(data, indices, indptr[i], indptr[i + 1], False, False)


#: :func:`prefetch_span` asks for at most this many entries of a row
PREFETCH_ROW_ENTRIES = 1024


@njit(cache=True, nogil=True, inline="always")
def prefetch_span(data, indices, lo, hi, unit, whole=False):
    """The stored values (unless ``unit``) and column indices ``lo:hi`` of a CSR row: with ``whole`` every cache
    line of them (its first :data:`PREFETCH_ROW_ENTRIES`, the last line included); else the lines of the first 64
    entries counted from ``lo`` (the scheme before session 33: a row that starts inside a line loses its last
    line, a longer row its tail -- each a miss to memory when the loop reaches it).  Measured on a 1 MB-L2 host
    (session 33, LinearSVC's dual fits, ``whole`` against not): 7 values a row (short_text) 0.77-0.81x the time,
    225 a row (news20-like) 0.79-0.85x, 1,024 a row 0.86x, LinearSVR on 13 and 76 a row 0.79x and 0.90x; 13 and 76
    a row (LinearSVC) 0.96-1.01x; 51 a row (real-sim-like, weights in the L2) 1.05-1.09x, a loss.  On rows of 2.7
    values (hashed300k after the fold) 1.25-1.35x although rows of at most 4 entries ask for the same lines -- the
    compiled loop itself ran slower -- so the CSR record loops are compiled twice
    (:data:`maxmargin.solvers.dual_cd.WHOLE_ROWS`) and short rows keep the old one."""
    if whole:
        end = min(hi, lo + PREFETCH_ROW_ENTRIES)
        if end > lo:
            if not unit:
                prefetch_lines(data, lo, end)
            prefetch_lines(indices, lo, end)
    else:
        hi = min(hi, lo + 64)
        if not unit:
            for k in range(lo, hi, 8):
                _prefetch(data, k)
        for k in range(lo, hi, 16):
            _prefetch(indices, k)


#: rows of at most this many stored values on average keep the first-64-entries prefetch
#: (:func:`prefetch_span` with ``whole=False``)
PREFETCH_WHOLE_MIN_VALUES = 5


@njit(cache=True, nogil=True, inline="always")
def prefetch_weights(w, indices, lo, hi):
    """The weights a CSR row's entries ``lo:hi`` touch (its first 64)."""
    for k in range(lo, min(hi, lo + 64)):
        _prefetch(w, indices[k])


@njit(cache=True, nogil=True, inline="always")
def prefetch_staged(index, p, end, ahead, stages, Xd, data, indices, indptr, dense, unit, w):
    """The staged scheme of :func:`prefetch_plan` for the positions after ``p`` of the visiting order ``index``
    (positions below ``end``): dense rows ``ahead`` positions on; CSR rows first their ``indptr`` entry
    (``stages * ahead`` on), then their values and column indices (``(stages - 1) * ahead`` on), and with
    ``stages`` = 3 the weights ``w`` the row ``ahead`` on touches -- each stage finds in cache what the one
    before asked for.  The loops call :func:`prefetch_entries` beside it."""
    if dense:
        q = p + ahead
        if q < end:
            Xi = Xd[index[q]]
            for j in range(0, min(Xd.shape[1], 64), 8):
                _prefetch(Xi, j)
    else:
        q = p + stages * ahead
        if q < end:
            _prefetch(indptr, index[q])
        q = p + (stages - 1) * ahead
        if q < end:
            i = index[q]
            prefetch_span(data, indices, indptr[i], indptr[i + 1], unit)
        if stages == 3:
            q = p + ahead
            if q < end:
                i = index[q]
                prefetch_weights(w, indices, indptr[i], indptr[i + 1])


@njit(cache=True, nogil=True, inline="always")
def prefetch_entries(index, p, entries, end, r0, r1, r2, r3, r4):
    """With the staged scheme: entry ``index[p + entries]`` of five per-row arrays (labels, dual variables,
    diagonal, bounds, ...).  In a random order each is a cache miss of its own: on 200,000 rows, five such
    reads cost more than the row itself (82 ms an epoch against 37 ms with them prefetched)."""
    q = p + entries
    if q < end:
        i = index[q]
        _prefetch(r0, i)
        _prefetch(r1, i)
        _prefetch(r2, i)
        _prefetch(r3, i)
        _prefetch(r4, i)


@njit(cache=True, nogil=True, inline="always")
def sparse_dot(data, indices, lo, hi, w):
    r""":math:`\sum_{k=lo}^{hi-1} data_k\, w_{indices_k}` with four partial sums: one running sum waits for
    each addition to finish (a chain of floating-point latencies), four overlap them (measured 4-5% faster
    passes on mushrooms and a9a, where the gathers from ``w`` dominate)."""
    # every index unsigned (the positions and the gathered feature numbers): Numba tests a load through a signed
    # index for a negative value (Python's a[-1]) on each load.  Session 26: 1.5x faster passes than slices
    # indexed from 0 (which spared the test on the positions only), 2x faster than signed indices.
    k = uint64(lo)
    end = uint64(hi)
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    while k + _U4 <= end:
        s0 += data[k] * w[uint64(indices[k])]
        s1 += data[k + _U1] * w[uint64(indices[k + _U1])]
        s2 += data[k + _U2] * w[uint64(indices[k + _U2])]
        s3 += data[k + _U3] * w[uint64(indices[k + _U3])]
        k += _U4
    while k < end:
        s0 += data[k] * w[uint64(indices[k])]
        k += _U1
    return (s0 + s1) + (s2 + s3)


@njit(cache=True, nogil=True, inline="always")
def sparse_sum(indices, lo, hi, w):
    """:func:`sparse_dot` when every stored value is 1 (``LinearData.unit``): the values are not read."""
    k = uint64(lo)
    end = uint64(hi)
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    while k + _U4 <= end:
        s0 += w[uint64(indices[k])]
        s1 += w[uint64(indices[k + _U1])]
        s2 += w[uint64(indices[k + _U2])]
        s3 += w[uint64(indices[k + _U3])]
        k += _U4
    while k < end:
        s0 += w[uint64(indices[k])]
        k += _U1
    return (s0 + s1) + (s2 + s3)


@njit(cache=True, nogil=True, inline="always")
def dense_dot(Xd, i, nf, w):
    r""":math:`\sum_{j<nf} X_{ij} w_j` with four partial sums (see :func:`sparse_dot`)."""
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    j = 0
    while j + 4 <= nf:
        s0 += Xd[i, j] * w[j]
        s1 += Xd[i, j + 1] * w[j + 1]
        s2 += Xd[i, j + 2] * w[j + 2]
        s3 += Xd[i, j + 3] * w[j + 3]
        j += 4
    while j < nf:
        s0 += Xd[i, j] * w[j]
        j += 1
    return (s0 + s1) + (s2 + s3)


@njit(cache=True, nogil=True, inline="always")
def row_dot(i, w, Xd, data, indices, indptr, dense, nf, bias):
    """:math:`w \\cdot x_i` (with the bias feature); a dense row by :func:`_dense_row_dot`, a CSR row with one
    running sum.  (LinearSVR's epochs read CSR rows through :func:`sparse_dot` instead since session 27: on the
    unsigned passes, 2,000 rows of 10 values 0.84x, a 20,000-row text set 0.69-0.97x, larger sets level.)"""
    if dense:
        s = _dense_row_dot(Xd[i], w, nf)
    else:
        s = 0.0
        for k in range(uint64(indptr[i]), uint64(indptr[i + 1])):
            s += data[k] * w[uint64(indices[k])]
    if bias > 0:
        s += bias * w[nf]
    return s


# A dense row's product with w and its update of w, compiled apart with reassociation allowed, so that both run
# as vector loops over the same lanes.  Written as scalar loops inside the epochs (the update vectorised, the
# product in four scalar chains), each product read back values the update before it had just stored, in
# another width: a dense epoch of 2,000 x 50 took 0.45-0.53 ms, 0.13-0.15 ms so.
@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _dense_row_dot(x, w, nf):
    s = 0.0
    for j in range(nf):
        s += x[j] * w[j]
    return s


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _dense_row_axpy(x, w, nf, a):
    for j in range(nf):
        w[j] += a * x[j]


@njit(cache=True, nogil=True, inline="always")
def row_axpy(i, a, w, Xd, data, indices, indptr, dense, nf, bias):
    """:math:`w \\leftarrow w + a\\,x_i`."""
    if dense:
        _dense_row_axpy(Xd[i], w, nf, a)
    else:
        for k in range(uint64(indptr[i]), uint64(indptr[i + 1])):
            w[uint64(indices[k])] += a * data[k]
    if bias > 0:
        w[nf] += a * bias


@njit(cache=True, nogil=True, fastmath={"reassoc"})
def _sparse_sqsum(data, lo, hi):
    """:math:`\\sum_{k=lo}^{hi-1} data_k^2`, reassociated (only) so that the sum runs in vector lanes: one running
    sum waits on each addition's latency (fewwide's 1.2M values: 1.0 ms; bigrams' 5M: 3.6 ms), four partial sums
    as :func:`sparse_dot`'s took 0.25 / 1.3 ms, this 0.11 / 0.9 (session 59)."""
    s = 0.0
    for k in range(uint64(lo), uint64(hi)):
        v = np.float64(data[k])
        s += v * v
    return s


@njit(cache=True, nogil=True)
def row_sqnorms(Xd, data, indices, indptr, dense, nf, bias):
    """:math:`\\|x_i\\|^2` for every row (with the bias feature)."""
    n = Xd.shape[0] if dense else indptr.shape[0] - 1
    out = np.empty(n)
    for i in range(n):
        s = 0.0
        if dense:  # in vector lanes (320 rows of 20,000 values: 3.2 ms as one running sum, 1 ms so)
            s = _dense_row_dot(Xd[i], Xd[i], nf)
        else:
            s = _sparse_sqsum(data, indptr[i], indptr[i + 1])
        if bias > 0:
            s += bias * bias
        out[i] = s
    return out


def sqnorms(ld):
    """:func:`row_sqnorms` of :class:`LinearData` ``ld``; rows of 0/1 values (``ld.unit``) from their counts alone,
    without a pass over the stored values (a9a, 450k values: 0.13 -> 0.02 ms).  Made once per ``ld`` (one-vs-rest
    problems share it; the estimators make it first, as their check of the stored values: ``maxmargin.linear``);
    the callers only read it."""
    norms = getattr(ld, "_sqnorms", None)
    if norms is None:
        norms = _count_sqnorms(ld.indptr, float(ld.bias)) if ld.unit and not ld.dense else row_sqnorms(*ld.args())
        ld._sqnorms = norms  # (two threads may both make it: the same values)
    return norms


@njit(cache=True, nogil=True)
def _count_sqnorms(indptr, bias):
    """Each row's count of stored values, plus ``bias**2`` where ``bias`` > 0: the squared norms of 0/1 rows (one
    compiled call: NumPy's three cost ~60 us with cold caches, session 68)."""
    n = indptr.shape[0] - 1
    out = np.empty(n)
    b2 = bias * bias if bias > 0 else 0.0
    for i in range(n):
        out[i] = float(indptr[i + 1] - indptr[i]) + b2
    return out


@njit(cache=True, nogil=True, inline="always")
def _dot_no_bias(i, w, Xd, data, indices, indptr, dense, nf):
    r""":math:`w \cdot x_i` without the bias feature: a CSR row with four partial sums (:func:`sparse_dot`), a dense
    row in vector lanes (:func:`_dense_row_dot`; four partial sums, :func:`dense_dot`, ran at a third of the
    memory's speed on rows of 20,000 values)."""
    if dense:
        return _dense_row_dot(Xd[i], w, nf)
    return sparse_dot(data, indices, indptr[i], indptr[i + 1], w)


@njit(cache=True, nogil=True)
def all_dots(w, Xd, data, indices, indptr, dense, nf, bias):
    """:math:`X w` (with the bias feature)."""
    n = Xd.shape[0] if dense else indptr.shape[0] - 1
    out = np.empty(n)
    wb = bias * w[nf] if bias > 0 else 0.0
    for i in range(n):
        out[i] = _dot_no_bias(i, w, Xd, data, indices, indptr, dense, nf) + wb
    return out


def _hinge_objective(w, Xd, data, indices, indptr, dense, nf, bias, y, C, squared, offset, n_chunks):
    r"""1/2 w.w + sum_i C_i xi_i (or xi_i^2), xi_i = max(0, 1 - y_i (w.x_i + offset_i)): the primal objective, one
    pass in ``n_chunks`` blocks of rows (on threads in the parallel copy); ``offset`` empty: none.  (Through
    :func:`row_dot`, one running sum a row, this pass took 5.5 ms on ijcnn1; 0.9 ms so.)"""
    n = y.shape[0]
    # the squared norm in vector lanes (one running sum: ~0.6 ms of 500,000 weights, half the pass on fewwide)
    f = 0.5 * _dense_row_dot(w, w, w.shape[0])
    wb = bias * w[nf] if bias > 0 else 0.0
    has_offset = offset.shape[0] > 0
    parts = np.zeros(n_chunks)
    for t in prange(n_chunks):
        loss = 0.0
        # two loops, not one with the offset's test inside: that test made the pass 3x slower (mushrooms, 6,093
        # rows of 21 values: 187 -> 57 us; the dual's fit computes this objective once, 0.2 of 3 ms)
        if has_offset:
            for i in range(t * n // n_chunks, (t + 1) * n // n_chunks):
                o = _dot_no_bias(i, w, Xd, data, indices, indptr, dense, nf) + wb + offset[i]
                xi = max(1.0 - y[i] * o, 0.0)
                loss += C[i] * (xi * xi if squared else xi)
        else:
            for i in range(t * n // n_chunks, (t + 1) * n // n_chunks):
                o = _dot_no_bias(i, w, Xd, data, indices, indptr, dense, nf) + wb
                xi = max(1.0 - y[i] * o, 0.0)
                loss += C[i] * (xi * xi if squared else xi)
        parts[t] = loss
    return f + parts.sum()


_hinge_objective_par, _hinge_objective_ser = parallel_and_serial(_hinge_objective, nogil=True)
#: stored values a block of the parallel objective holds at least
OBJECTIVE_BLOCK_VALUES = 200_000


def hinge_objective(w, Xd, data, indices, indptr, dense, nf, bias, y, C, squared, offset=None, parallel=False):
    """:func:`_hinge_objective`, on two or more threads (``parallel``) when the data hold enough values."""
    stored = Xd.size if dense else data.size
    chunks = min(numba.get_num_threads(), max(1, stored // OBJECTIVE_BLOCK_VALUES)) if parallel else 1
    offset = np.empty(0) if offset is None else offset
    fn = _hinge_objective_par if chunks > 1 else _hinge_objective_ser
    return fn(w, Xd, data, indices, indptr, dense, nf, bias, y, C, bool(squared), offset, chunks)


def _svr_objective(w, Xd, data, indices, indptr, dense, nf, bias, y, C, eps, squared, n_chunks):
    r"""1/2 w.w + sum_i C_i r_i (or r_i^2), r_i = max(0, |w.x_i - y_i| - eps): LinearSVR's primal objective, one
    pass in ``n_chunks`` blocks of rows (on threads in the parallel copy; :func:`_hinge_objective`'s layout)."""
    n = y.shape[0]
    f = 0.5 * _dense_row_dot(w, w, w.shape[0])  # (vector lanes, as _hinge_objective's)
    wb = bias * w[nf] if bias > 0 else 0.0
    parts = np.zeros(n_chunks)
    for t in prange(n_chunks):
        loss = 0.0
        for i in range(t * n // n_chunks, (t + 1) * n // n_chunks):
            r = max(abs(_dot_no_bias(i, w, Xd, data, indices, indptr, dense, nf) + wb - y[i]) - eps, 0.0)
            loss += C[i] * (r * r if squared else r)
        parts[t] = loss
    return f + parts.sum()


_svr_objective_par, _svr_objective_ser = parallel_and_serial(_svr_objective, nogil=True)


def svr_objective(w, Xd, data, indices, indptr, dense, nf, bias, y, C, eps, squared, parallel=False):
    """:func:`_svr_objective`, on two or more threads (``parallel``) when the data hold enough values
    (:data:`OBJECTIVE_BLOCK_VALUES` a block; reg_fewwide, 1.2M values: 1.6-2.0 ms on one thread)."""
    stored = Xd.size if dense else data.size
    chunks = min(numba.get_num_threads(), max(1, stored // OBJECTIVE_BLOCK_VALUES)) if parallel else 1
    fn = _svr_objective_par if chunks > 1 else _svr_objective_ser
    return fn(w, Xd, data, indices, indptr, dense, nf, bias, y, C, float(eps), bool(squared), chunks)


@njit(cache=True, nogil=True)
def weighted_sum(coef, out, Xd, data, indices, indptr, dense, nf, bias):
    """:math:`out \\leftarrow \\sum_i coef_i\\, x_i` (rows with ``coef_i == 0`` skipped)."""
    out[:] = 0.0
    n = coef.shape[0]
    for i in range(n):
        c = coef[i]
        if c != 0.0:
            row_axpy(i, c, out, Xd, data, indices, indptr, dense, nf, bias)


@njit(cache=True, nogil=True, inline="always")
def shuffle_active(index, active, rng):
    """A random order of ``index[:active]`` (Fisher-Yates, :func:`rand_below`), in place."""
    for s in range(active):
        j = s + rand_below(rng, active - s)
        t = index[s]
        index[s] = index[uint64(j)]
        index[uint64(j)] = t


@njit(cache=True, nogil=True, inline="always")
def svr_step(b, U, G, H, eps, shrinking, g_max_old):
    """One variable of the regression dual: ``(shrink, violation, new beta)`` from its value ``b`` in [-U, U], its
    gradient ``G`` (without epsilon) and curvature ``H``; ``shrink`` where it sits at 0 or a bound and, against the
    previous epoch's largest violation ``g_max_old``, will stay there (LIBLINEAR's rule)."""
    Gp = G + eps
    Gn = G - eps
    viol = 0.0
    if b == 0.0:
        if Gp < 0.0:
            viol = -Gp
        elif Gn > 0.0:
            viol = Gn
        elif shrinking and Gp > g_max_old and Gn < -g_max_old:
            return True, 0.0, b
    elif b >= U:
        if Gp > 0.0:
            viol = Gp
        elif shrinking and Gp < -g_max_old:
            return True, 0.0, b
    elif b <= -U:
        if Gn < 0.0:
            viol = -Gn
        elif shrinking and Gn > g_max_old:
            return True, 0.0, b
    elif b > 0.0:
        viol = abs(Gp)
    else:
        viol = abs(Gn)
    if H <= 0.0:
        return False, viol, b
    if Gp < H * b:
        d = -Gp / H
    elif Gn > H * b:
        d = -Gn / H
    else:
        d = -b
    nb = b
    if abs(d) >= 1e-12:
        nb = min(max(b + d, -U), U)
    return False, viol, nb


#: How the coordinate-descent epochs shrink (the dual CD of :mod:`~maxmargin.solvers.dual_cd`, the L1 penalty's CD of
#: :mod:`~maxmargin.solvers.cd_l1`).  LIBLINEAR drops a variable by swapping the last active one into its place and
#: visiting that one next.  In the random visiting order the swapped-in row was never asked for ahead, so each shrink
#: was a round of cache misses (its record and values) on data larger than the cache: session 51, tweets' (100,000
#: rows) first shrinking epoch 10.5 ms against 4.7 ms for a pass with none, 80,000 x 50 dense rows 11.3 against 6.3.
#: Here the epoch reads the active list in order and moves each kept variable to the front (``index[keep]``, a swap
#: with the first dropped one), so the prefetches ahead stay right; the dropped ones end behind the kept ones.  The
#: same rule and the same stopping test, another order within an epoch once something was dropped.
#:
#: ``KEEP_THRESHOLDS``: when the active variables meet ``tol`` and every variable comes back, the shrinking thresholds
#: are kept (LIBLINEAR sets them infinite), so the pass over every variable -- which decides whether the solver has
#: converged -- also drops what is settled, where LIBLINEAR's drops nothing and its next epoch is a second pass over
#: every variable.  A pass that started with every variable is the stopping test's (``whole``), whatever it drops:
#: a dropped variable's projected gradient is zero there.  (LinearSVR's dual and the L1 penalty's CD, through
#: :func:`epoch_end`.  The classifier's dual goes further: no epoch over every row, a check of every row at one
#: point, :func:`maxmargin.solvers.dual_cd.settled_rows`.)  Session 51, ``LinearSVC(loss='hinge')`` on
#: ``datasets.imbal100k`` (800 epochs, 5-7 times the active rows met ``tol`` and the pass over all 80,000 did not):
#: 0.65 of the time with the order and the kept thresholds, 0.58 with the check; tall200k 0.61 / 0.55, clicks 0.71 /
#: 0.69, realsim 0.79 / 0.72, tweets 0.82 / 0.76.  ``penalty='l1'`` (the order and the kept thresholds): news20b
#: 0.68, longdocs 0.68, hashed300k 0.80.
KEEP_THRESHOLDS = True


@njit(cache=True, nogil=True, inline="always")
def epoch_end(istate, fstate, g_norm1, g_norm1_init, g_max, g_max_old, tol, active, n, whole, keep):
    """The end of an epoch of the solvers that stop on the sum of the violations (LinearSVR's dual, the L1
    penalty's CD; LIBLINEAR's rule): the first epoch's sum is the reference; when an epoch's sum falls to ``tol``
    times it, the solver has converged if the epoch visited every variable (``whole``), else every variable comes
    back.  ``istate`` = [active, iteration], ``fstate`` = [largest violation of the last epoch, first sum, last
    sum].  Returns ``(converged, active, g_max_old, g_norm1_init)`` for the next epoch (the state saved when
    converged).  ``keep``: the variables come back with the shrinking threshold kept, so the pass over all of them
    shrinks as it goes (see :data:`maxmargin.solvers.dual_cd.KEEP_THRESHOLDS`); else LIBLINEAR's infinite
    threshold, nothing shrunk in that pass (and ``whole`` must be ``active == n``)."""
    if istate[1] == 0 and g_norm1_init < 0.0:
        g_norm1_init = g_norm1
    istate[1] += 1
    fstate[2] = g_norm1
    if g_norm1 <= tol * g_norm1_init:
        if whole:
            istate[0] = active
            fstate[0] = g_max_old
            fstate[1] = g_norm1_init
            return True, active, g_max_old, g_norm1_init
        return False, n, g_max_old if keep else np.inf, g_norm1_init
    return False, active, g_max, g_norm1_init


@njit(cache=True, nogil=True, inline="always")
def rand_below(state, k):
    """A pseudo-random integer in [0, k) (k < 2**32) from the 64-bit xorshift* generator kept in ``state[0]``."""
    x = state[0]
    x ^= x >> np.uint64(12)
    x ^= x << np.uint64(25)
    x ^= x >> np.uint64(27)
    state[0] = x
    r = (x * np.uint64(2685821657736338717)) >> np.uint64(32)  # 32 random bits
    return np.int64((r * np.uint64(k)) >> np.uint64(32))  # Lemire's multiply-shift: no division


def rng_state(seed):
    """The generator state for :func:`rand_below` from an integer seed (never zero)."""
    s = np.uint64((int(seed) * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) % (1 << 64)) or np.uint64(1)
    return np.array([s], dtype=np.uint64)


# --------------------------------------------------------------------------- the chunked driver


def drive(
    step,
    max_iter,
    tol,
    *,
    callback=None,
    callback_info=None,
    time_limit=None,
    report=None,
    verbose=False,
    name="solver",
    first_chunk=1,
):
    """Run ``step(k)`` (at most ``k`` more outer iterations; returns ``(code, iteration)`` with code 0 when
    converged, 2 when it gave up early -- :class:`~maxmargin.solvers.dual_primal.StallWatch` -- else 1) until
    convergence, ``max_iter``, the time limit or a callback that returns False.

    Without a callback, time limit or verbose output the whole run is one compiled call.  Otherwise the
    iterations come in chunks sized to last about :data:`CHUNK_SECONDS`; between chunks ``report()`` gives
    ``(objective, violation)`` for the callback dict ``{'iteration', 'objective', 'violation', 'tol',
    'elapsed', 'subproblem', 'n_subproblems'}``.  Returns ``(status, iteration)``.
    """
    t0 = time.perf_counter()
    # subproblem 0 of 1 unless the caller's callback_info says otherwise
    watch = Watch(callback, {"subproblem": 0, "n_subproblems": 1, **(callback_info or {})}, time_limit, tol)
    if callback is None and time_limit is None and not verbose:
        code, it = step(int(max_iter))
        return ("converged" if code == 0 else "stalled" if code == 2 else "max_iter"), int(it)
    chunk = max(int(first_chunk), 1)
    it = 0
    while True:
        steps = min(chunk, int(max_iter) - it)
        if steps <= 0:
            return "max_iter", it
        tc = time.perf_counter()
        code, it = step(steps)
        it = int(it)
        dt = time.perf_counter() - tc
        if code == 0:
            return "converged", it
        if code == 2:
            return "stalled", it
        if dt > 0:
            chunk = int(min(max(chunk * CHUNK_SECONDS / dt, 1), 1_000_000))
        elapsed = time.perf_counter() - t0
        if verbose or callback is not None:
            objective, violation = report()
            if verbose:
                print(f"[{name}] iter {it}  objective {objective:.6g}  violation {violation:.3e}  {elapsed:.1f}s")
        else:
            objective = violation = 0.0  # read by the callback only, and there is none
        why = watch.check(it, objective, violation)
        if why is not None:
            return why, it
