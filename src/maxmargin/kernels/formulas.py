r"""The kernel formulas, each written once, compiled.

=============  ===============================================  ====
name           k(x, z) from the dot product x.z                 code
=============  ===============================================  ====
linear         x . z                                            0
poly           (gamma x . z + coef0) ** degree                  1
rbf            exp(-gamma (||x||^2 + ||z||^2 - 2 x . z))        2
sigmoid        tanh(gamma x . z + coef0)                        3
precomputed    the user's Gram matrix (no formula)              4
=============  ===============================================  ====

The Gaussian kernel of the documents (seed 002, ``computeGaussianKernel``) is
``exp(-||x - z||^2 / (2 sigma^2))``, i.e. gamma = 1 / (2 sigma^2).

Every solver, the row cache, the row engine, the kernel objects and prediction
turn dot products into kernel values with :func:`transform` (one chunk of a row,
in place) or :func:`transform_rows` (a block, rows in parallel).  A code that is
not one of the four formulas raises ``ValueError`` inside compiled code, never
falls through to another formula.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .._jit import parallel_and_serial

LINEAR, POLY, RBF, SIGMOID, PRECOMPUTED = 0, 1, 2, 3, 4
#: the codes :func:`transform` knows
FORMULA_CODES = (LINEAR, POLY, RBF, SIGMOID)

LOG2E = 1.4426950408889634
LN2_HI = 0.6931471803691238  # ln 2 split in two (Cody & Waite): kf * LN2_HI is exact
LN2_LO = 1.9082149292705877e-10
ROUND_MAGIC = 6755399441055744.0  # 1.5 * 2**52: adding it rounds to an integer, kept in the low bits


#: below this argument the compiled exponential gives 0 (``exp_nonpos``)
EXP_MIN_ARG = -708.0


@njit(cache=True, fastmath={"contract"}, nogil=True)
def exp_nonpos(o, scratch):
    """``o[:] = exp(o)`` for arguments <= 0 (the RBF exponent), within 1 ulp of
    ``np.exp``, in loops LLVM vectorises (Numba's scalar ``math.exp`` is several
    times slower), so the exponential runs on a chunk while it is in the CPU cache.

    exp(x) = 2^k exp(r) with k = round(x / ln 2), |r| <= ln2/2; exp(r) by its
    Taylor polynomial of degree 13 (remainder < 1e-17); 2^k built in the exponent
    bits.  Arguments below -708 give exactly 0 (``np.exp`` gives subnormal numbers
    down to -745): an absolute error below 3e-308, far under anything a kernel value
    can matter, and no subnormal number reaches the solvers' sums, where each
    product costs 10-100x a normal one on x86 (an RBF fit with a large gamma, most
    exponents far below -708, ran 3x slower when they became 3e-308 instead)."""
    w = o.shape[0]
    for t in range(w):
        x0 = o[t]
        x = max(x0, EXP_MIN_ARG)
        z = x * LOG2E + ROUND_MAGIC
        kf = z - ROUND_MAGIC
        r = (x - kf * LN2_HI) - kf * LN2_LO
        v = 1.0 / 6227020800.0
        v = v * r + 1.0 / 479001600.0
        v = v * r + 1.0 / 39916800.0
        v = v * r + 1.0 / 3628800.0
        v = v * r + 1.0 / 362880.0
        v = v * r + 1.0 / 40320.0
        v = v * r + 1.0 / 5040.0
        v = v * r + 1.0 / 720.0
        v = v * r + 1.0 / 120.0
        v = v * r + 1.0 / 24.0
        v = v * r + 1.0 / 6.0
        v = v * r + 0.5
        v = v * r + 1.0
        o[t] = v * r + 1.0 if x0 >= EXP_MIN_ARG else 0.0
        scratch[t] = z
    bits = scratch[:w].view(np.int64)
    for t in range(w):
        bits[t] = (bits[t] + 1023) << 52  # the low bits of z hold k: into the exponent field
    scale = scratch[:w]
    for t in range(w):
        o[t] *= scale[t]


@njit(cache=True, nogil=True, fastmath={"reassoc"})
def dot_prefix(a, b, m):
    """``a[:m] @ b[:m]``, reassociated: LLVM keeps several vector accumulators (a separate function, so that the
    flag stays here).  As a plain loop the sum is one chain of dependent additions, 3-4 cycles a term: in the
    fused gradient rebuild of 2-D RBF rows that chain was half the time (session 46)."""
    s = 0.0
    for t in range(m):
        s += a[t] * b[t]
    return s


@njit(cache=True, fastmath={"contract"}, nogil=True)
def tanh_vec(o, scratch):
    """``o[:] = tanh(o)`` within a few ulp of ``np.tanh``, in loops LLVM vectorises (Numba's scalar ``np.tanh``
    is a library call a value: the sigmoid kernel's predict on text spent most of its time there).

    tanh(x) = sign(x) (-m) / (2 + m) with m = expm1(-2|x|) in (-1, 0], which has no cancellation for small |x|.
    expm1(y) = 2^k expm1(r) + (2^k - 1), k = round(y / ln 2), |r| <= ln2/2, expm1(r) by its Taylor polynomial of
    degree 14 (remainder < 1e-18 relative); for k = 0 that is expm1(r) itself.  As in :func:`exp_nonpos`, 2^k is
    built in the exponent bits; x's sign rides in the sign bit of the scratch value until the last loop.
    From |x| = 19.1 on the result is exactly +-1, as ``np.tanh``'s (arguments below -708 are clamped there).
    Sigmoid-kernel predict on 20 dense features: 0.19 of the time with ``np.tanh`` (benchmarks/RESULTS.md,
    session 30)."""
    w = o.shape[0]
    for t in range(w):
        x0 = o[t]
        y = max(-2.0 * abs(x0), EXP_MIN_ARG)
        z = y * LOG2E + ROUND_MAGIC
        kf = z - ROUND_MAGIC
        r = (y - kf * LN2_HI) - kf * LN2_LO
        v = 1.0 / 87178291200.0
        v = v * r + 1.0 / 6227020800.0
        v = v * r + 1.0 / 479001600.0
        v = v * r + 1.0 / 39916800.0
        v = v * r + 1.0 / 3628800.0
        v = v * r + 1.0 / 362880.0
        v = v * r + 1.0 / 40320.0
        v = v * r + 1.0 / 5040.0
        v = v * r + 1.0 / 720.0
        v = v * r + 1.0 / 120.0
        v = v * r + 1.0 / 24.0
        v = v * r + 1.0 / 6.0
        v = v * r + 0.5
        o[t] = (v * r + 1.0) * r
        scratch[t] = -z if x0 < 0.0 else z
    bits = scratch[:w].view(np.int64)
    for t in range(w):
        b = bits[t]
        bits[t] = ((b + 1023) << 52) | ((b >> 63) << 63)  # 2^k, with x's sign
    scale = scratch[:w]
    for t in range(w):
        sc = scale[t]
        s = abs(sc)
        m = s * o[t] + (s - 1.0)
        v = -m / (2.0 + m)
        o[t] = v if sc > 0.0 else -v


@njit(cache=True, nogil=True)
def transform(o, code, gamma, coef0, degree, a, sqc, scratch):
    """In place on a chunk of one kernel row: dot products ``o[t] = x . z_t`` become
    kernel values ``k(x, z_t)``.  ``a`` is ||x||^2 and ``sqc[t]`` = ||z_t||^2 (read
    by RBF only); ``scratch`` has at least ``len(o)`` entries.  One loop per
    formula so that each vectorises."""
    w = o.shape[0]
    if code == LINEAR:
        return
    if code == RBF:
        for t in range(w):
            d = a + sqc[t] - 2.0 * o[t]
            o[t] = -gamma * max(d, 0.0)
        exp_nonpos(o, scratch)
    elif code == POLY:
        ideg = int(degree)
        if ideg == degree and 0 <= ideg <= 16:  # integer powers by products (pow is 4x slower)
            # the same products in the same order as v = 1; v *= b (ideg times), but one vector loop a factor:
            # with the power loop inside the loop over t, LLVM left it scalar (predict, degree 3, 20 features:
            # 1.7x oneDAL's time)
            for t in range(w):
                scratch[t] = gamma * o[t] + coef0
                o[t] = 1.0
            for _ in range(ideg):
                for t in range(w):
                    o[t] *= scratch[t]
        else:
            for t in range(w):
                o[t] = (gamma * o[t] + coef0) ** degree
    elif code == SIGMOID:
        for t in range(w):
            o[t] = gamma * o[t] + coef0
        tanh_vec(o, scratch)
    else:
        raise ValueError("unknown kernel code: only linear (0), poly (1), rbf (2) and sigmoid (3) have a formula")


#: values of a block per chunk of whole rows in :func:`_transform_rows_py` (at least one row): the chunk and
#: its scratch stay in the L1 cache
TRANSFORM_CHUNK_VALUES = 2048


def _transform_rows_py(D, code, gamma, coef0, degree, sq_rows, sq_cols):
    """In place on a block: ``D[r, t] = k(x_r, z_t)`` from ``D[r, t] = x_r . z_t``; rows in chunks of about
    :data:`TRANSFORM_CHUNK_VALUES` values, one scratch array a chunk, RBF's exponential over a chunk's rows at
    once.  Row by row, the cost per row (a scratch array, the vector loops' remainders) was most of the time
    on narrow blocks (500 x 26: 6.5 ns a value, against 1.6 ns on 26 x 500; now 1.6 ns both).  A row longer
    than a chunk goes in pieces of a chunk: whole, its values and scratch (10,000 columns: 160 KB) left the L1
    cache between the exponential's passes (``Kernel.mmv`` of 20,000 x 10,000 RBF values: see
    benchmarks/RESULTS.md, session 23).  ``D`` is C-ordered (:func:`transform_rows`)."""
    n, m = D.shape
    flat = D.reshape(-1)
    per = max(1, TRANSFORM_CHUNK_VALUES // max(m, 1))
    for b in prange((n + per - 1) // per):
        r0 = b * per
        r1 = min(n, r0 + per)
        if m > TRANSFORM_CHUNK_VALUES:  # one long row: in pieces that stay in the L1 cache
            scratch = np.empty(TRANSFORM_CHUNK_VALUES)
            for c0 in range(0, m, TRANSFORM_CHUNK_VALUES):
                c1 = min(m, c0 + TRANSFORM_CHUNK_VALUES)
                transform(D[r0, c0:c1], code, gamma, coef0, degree, sq_rows[r0], sq_cols[c0:c1], scratch)
        elif code == RBF:  # the exponents row by row, then one exponential over the chunk's rows at once
            for r in range(r0, r1):
                o = D[r]
                a = sq_rows[r]
                for t in range(m):
                    o[t] = -gamma * max(a + sq_cols[t] - 2.0 * o[t], 0.0)
            exp_nonpos(flat[r0 * m : r1 * m], np.empty((r1 - r0) * m))
        else:
            scratch = np.empty(m)
            for r in range(r0, r1):
                transform(D[r], code, gamma, coef0, degree, sq_rows[r], sq_cols, scratch)


_transform_rows_par, _transform_rows_ser = parallel_and_serial(_transform_rows_py, nogil=True)

#: below this many entries a block is transformed on one thread (waking the others costs more)
PARALLEL_MIN_ENTRIES = 2_000_000


def check_code(code):
    """``code`` as an int, or ValueError when no formula has it."""
    code = int(code)
    if code not in FORMULA_CODES:
        raise ValueError(f"unknown kernel code {code}: expected one of {FORMULA_CODES} (linear, poly, rbf, sigmoid)")
    return code


def transform_rows(D, code, params, sq_rows=None, sq_cols=None, parallel=True):
    """The kernel block from the block of dot products ``D`` (dense, float64,
    C-ordered, changed in place and returned); ``params = (gamma, coef0, degree)``;
    ``sq_rows``/``sq_cols`` the squared norms of the two sides (RBF only); on Numba's
    threads from :data:`PARALLEL_MIN_ENTRIES` entries unless ``parallel`` is False."""
    code = check_code(code)
    if code == LINEAR:
        return D
    n, m = D.shape
    sq_rows = np.zeros(n) if sq_rows is None else np.ascontiguousarray(sq_rows, dtype=np.float64)
    sq_cols = np.zeros(m) if sq_cols is None else np.ascontiguousarray(sq_cols, dtype=np.float64)
    gamma, coef0, degree = (float(v) for v in params)
    fn = _transform_rows_par if parallel and D.size >= PARALLEL_MIN_ENTRIES else _transform_rows_ser
    fn(D, code, gamma, coef0, degree, sq_rows, sq_cols)
    return D


def values_from_dots(dots, code, params, sq_a=None, sq_b=None):
    """Element-wise kernel values for 1-D arrays of dot products (``dots[t] = x_t . z_t``,
    squared norms ``sq_a[t]``, ``sq_b[t]``), e.g. the diagonal k(x_t, x_t)."""
    dots = np.array(dots, dtype=np.float64, copy=True).reshape(1, -1)
    if int(code) == RBF:
        # the pairs (x_t, z_t) have different norms: fold ||x_t||^2 into the dots
        sa = np.zeros(dots.shape[1]) if sq_a is None else np.asarray(sq_a, dtype=np.float64)
        sb = np.zeros(dots.shape[1]) if sq_b is None else np.asarray(sq_b, dtype=np.float64)
        dots = dots - 0.5 * sa[None, :]
        return transform_rows(dots, code, params, np.zeros(1), sb)[0]
    return transform_rows(dots, code, params)[0]
