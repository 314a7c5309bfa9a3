r"""Kernels as objects (the user-facing side of :mod:`maxmargin.kernels`).

Every kernel computes *blocks*: ``kernel(X, Z)`` is the dense matrix of kernel
values between the rows of ``X`` and the rows of ``Z``, from one BLAS matrix
product for dense input and one sparse product for CSR input.  ``rows(X, idx)``
is the block between some rows of ``X`` and all of ``X``; ``diag(X)`` the
diagonal; ``mmv(X, Z, v)`` the product ``K(X, Z) v`` in row blocks, never
forming the whole matrix.

=============  ===============================================  ===========
name           k(x, z)                                          code
=============  ===============================================  ===========
linear         x . z                                            0
poly           (gamma x . z + coef0) ** degree                  1
rbf            exp(-gamma ||x - z||^2),  gamma = 1 / (2 sigma^2) 2
sigmoid        tanh(gamma x . z + coef0)                        3
precomputed    the user's Gram matrix                           4
=============  ===============================================  ===========

The Gaussian kernel of the documents (seed 002, ``computeGaussianKernel``) is
``exp(-||x - z||^2 / (2 sigma^2))``; seed 000's figure uses sigma = 2.  The
``code`` column is what the compiled code receives; the formulas themselves live
in :mod:`maxmargin.kernels.formulas`, written once for every caller.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp
from numba import njit, prange

from .._jit import parallel_and_serial
from .formulas import LINEAR, POLY, PRECOMPUTED, RBF, SIGMOID, transform_rows

#: Rows per block when a kernel product is taken in pieces (bounded memory).
BLOCK_ROWS = 1024
#: ... and at most this many kernel values a block (16 MB): larger temporaries are mapped fresh
#: from the system at every allocation (glibc maps blocks above 32 MB), and touching new pages
#: cost more than the kernel values themselves (measured: 80 ms of page faults on a 57 MB block
#: whose values take 16 ms)
BLOCK_VALUES = 1 << 21


def block_rows_for(n_columns, rows=BLOCK_ROWS):
    """Rows per block of a kernel product against ``n_columns`` columns (see :data:`BLOCK_VALUES`)."""
    return int(max(16, min(rows, BLOCK_VALUES // max(int(n_columns), 1))))


#: Sparse operands with at most this many features (and at most DENSIFY_MAX_ELEMENTS
#: entries) are densified for a kernel block: one BLAS product on all cores beats a
#: sparse-sparse product by far when the feature space is small (a9a: 123 features).
DENSIFY_MAX_FEATURES = 4096
DENSIFY_MAX_ELEMENTS = 32_000_000
#: ... and only when both operands have this many rows (a single kernel row is
#: cheaper as a sparse product than densifying all of X for it).
DENSIFY_MIN_ROWS = 64


def densifies_cheaply(A):
    """Whether :func:`densify_if_cheap` would make a dense copy of ``A`` (a sparse matrix small enough)."""
    return sp.issparse(A) and A.shape[1] <= DENSIFY_MAX_FEATURES and A.shape[0] * A.shape[1] <= DENSIFY_MAX_ELEMENTS


def densify_if_cheap(A):
    """A dense copy of a CSR matrix when that is cheap, else the matrix itself."""
    return A.toarray() if densifies_cheaply(A) else A


#: Dense products with at most this many features use a compiled loop instead of BLAS, where the other
#: operand has at least :data:`SMALL_DOT_MIN_COLS` rows (one feature: 128).  OpenBLAS 0.3.31 (one thread /
#: every core, compiled loop's time over BLAS's, ``/tmp/s19/sd3.py``): 1 feature 0.3-0.7 from 128 columns;
#: 2-4 features 0.56-0.9 from 512 columns but 1.0-5.8 at 128-256; 5-8 features 0.7-1.8, and at 26 columns
#: 7-19x slower for any width up to 32 (the loop's cost per row).  Session 19 found the old bound (32
#: features, any number of columns) losing: a 500 x 26 block took 140 us instead of 16 us.
SMALL_D = 4
#: see :data:`SMALL_D`
SMALL_DOT_MIN_COLS = 512


@njit(cache=True, nogil=True, fastmath={"contract"})
def narrow_dots(x, ZT, c0, o):
    """``o[t] = x . z_t`` for the rows z_t held as columns ``c0 .. c0 + len(o) - 1`` of ``ZT`` (features x
    rows): up to four features per pass over ``o``, vectorised along it."""
    d = x.shape[0]
    nb = o.shape[0]
    f = 0
    while f < d:
        x0 = x[f]
        x1 = x[f + 1] if f + 1 < d else 0.0
        x2 = x[f + 2] if f + 2 < d else 0.0
        x3 = x[f + 3] if f + 3 < d else 0.0
        z0 = ZT[f, c0 : c0 + nb]
        z1 = ZT[min(f + 1, d - 1), c0 : c0 + nb]
        z2 = ZT[min(f + 2, d - 1), c0 : c0 + nb]
        z3 = ZT[min(f + 3, d - 1), c0 : c0 + nb]
        if f == 0:
            for t in range(nb):
                o[t] = (x0 * z0[t] + x1 * z1[t]) + (x2 * z2[t] + x3 * z3[t])
        else:
            for t in range(nb):
                o[t] += (x0 * z0[t] + x1 * z1[t]) + (x2 * z2[t] + x3 * z3[t])
        f += 4
    if d == 0:
        o[:] = 0.0


@njit(cache=True, nogil=True, fastmath={"contract"})
def _small_dot_rows(X, ZT, out, r0, r1):
    """out[i] = X[i] @ ZT for rows r0..r1-1, few columns in X: per row, chunks of the output
    kept in cache (:func:`narrow_dots` on each)."""
    m = ZT.shape[1]
    for i in range(r0, r1):
        x = X[i]
        for lo in range(0, m, 512):  # five 4 KB strips (o and four rows of ZT) stay in L1
            hi = min(lo + 512, m)
            narrow_dots(x, ZT, lo, out[i][lo:hi])


def _small_dot_py(X, ZT, out):
    """out = X @ ZT, blocks of 32 rows in parallel; each block is one call of the
    separately compiled :func:`_small_dot_rows` (inside a parallel region Numba's
    loops did not vectorise: 6x slower)."""
    n = X.shape[0]
    for b in prange((n + 31) // 32):
        _small_dot_rows(X, ZT, out, b * 32, min(n, b * 32 + 32))


_small_dot_par, _small_dot_ser = parallel_and_serial(_small_dot_py)


def small_dot(X, Z):
    """``X @ Z.T`` for dense operands with at most :data:`SMALL_D` features."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    ZT = np.ascontiguousarray(np.asarray(Z, dtype=np.float64).T)
    out = np.empty((X.shape[0], ZT.shape[1]))
    fn = _small_dot_par if out.size * max(X.shape[1], 1) >= 4_000_000 else _small_dot_ser
    fn(X, ZT, out)
    return out


#: sparse operands of at least this many features multiply as sparse matrices (not densified for BLAS) where a
#: product value meets at most features / SPARSE_PRODUCT_FEATURES_PER_POSTING pairs of stored values on average.
#: Measured (session 47, 1,000 x 4,000 products, scipy's sparse product and its dense copy against BLAS on two
#: threads): uniform rows at 1,000 features, 10 and 40 a row, 0.05 and 0.85 the time; 2,000 features 0.01-0.47;
#: 4,000 features at 200 a row 0.42; Zipf-distributed features 0.18-0.46 (2,000 x 80 a row, 24 pairs a value:
#: 0.71).  BLAS's time grows with the features, the sparse product's with the pairs and the values it stores.
SPARSE_PRODUCT_MIN_FEATURES = 1000
SPARSE_PRODUCT_FEATURES_PER_POSTING = 250


def dense_product_pays(X, Z):
    """Whether ``X @ Z.T`` should go to BLAS (sparse operands densified where :func:`densify_if_cheap` says) rather
    than be a sparse product: always unless both are sparse with at least :data:`SPARSE_PRODUCT_MIN_FEATURES`
    features and a product value meets at most features / :data:`SPARSE_PRODUCT_FEATURES_PER_POSTING` pairs of
    stored values on average (from the features' counts on both sides)."""
    if not (sp.issparse(X) and sp.issparse(Z)):
        return True
    d = X.shape[1]
    if d < SPARSE_PRODUCT_MIN_FEATURES:
        return True
    dfx = np.bincount(sp.csr_matrix(X).indices, minlength=d).astype(np.float64)
    dfz = np.bincount(sp.csr_matrix(Z).indices, minlength=d).astype(np.float64)
    pairs = float(dfx @ dfz) / max(X.shape[0] * Z.shape[0], 1)
    return pairs > d / SPARSE_PRODUCT_FEATURES_PER_POSTING


def _dot(X, Z):
    """Dense ``X @ Z.T`` for dense or CSR operands."""
    if (
        (sp.issparse(X) or sp.issparse(Z))
        and min(X.shape[0], Z.shape[0]) >= DENSIFY_MIN_ROWS
        and dense_product_pays(X, Z)
    ):
        X, Z = densify_if_cheap(X), densify_if_cheap(Z)
    if sp.issparse(X) or sp.issparse(Z):
        out = X @ Z.T
        return out.toarray() if sp.issparse(out) else np.asarray(out)
    d, m = X.shape[1], Z.shape[0]
    if d <= SMALL_D and m >= (128 if d <= 1 else SMALL_DOT_MIN_COLS) and X.shape[0] * m >= 4096:
        return small_dot(X, Z)
    return X @ Z.T


def row_norms_sq(X):
    """Squared Euclidean norm of each row (dense or CSR)."""
    if sp.issparse(X):
        return np.asarray(X.multiply(X).sum(axis=1)).ravel()
    return np.einsum("ij,ij->i", X, X)


def _diag_by_formula(kernel, sq):
    """k(x, x) from ||x||^2 by the shared formula."""
    D = np.array(sq, dtype=np.float64, order="C").reshape(1, -1)
    return transform_rows(D, kernel.code, kernel.params)[0]


class Kernel:
    """Base class. Subclasses set ``name`` and ``code`` and implement ``_from_dot``."""

    name = "kernel"
    code = -1

    def __call__(self, X, Z=None):
        if Z is None:
            Z = X
        return self._block(X, Z)

    def _block(self, X, Z):
        return self._from_dot(_dot(X, Z), X, Z)

    def _from_dot(self, D, X, Z):
        """Kernel values from the dot products ``D`` (the shared compiled formula)."""
        return transform_rows(np.ascontiguousarray(D, dtype=np.float64), self.code, self.params)

    def rows(self, X, idx):
        """Kernel values between rows ``idx`` of ``X`` and all of ``X``."""
        return self._block(X[idx], X)

    def diag(self, X):
        """``k(x_i, x_i)`` for every row of ``X``."""
        return self._diag_from_sq(row_norms_sq(X))

    def _diag_from_sq(self, sq):  # pragma: no cover - abstract
        raise NotImplementedError

    def mmv(self, X, Z, v, block_rows=None):
        """``K(X, Z) @ v`` computed ``block_rows`` rows of ``X`` at a time (by default
        :func:`block_rows` of Z's size)."""
        v = np.asarray(v)
        n = X.shape[0]
        block_rows = block_rows or block_rows_for(Z.shape[0])
        out = np.empty((n,) + v.shape[1:], dtype=np.result_type(v.dtype, np.float64))
        for start in range(0, n, block_rows):
            stop = min(start + block_rows, n)
            out[start:stop] = self._block(X[start:stop], Z) @ v
        return out

    @property
    def params(self):
        """(gamma, coef0, degree) as floats, for the compiled solvers."""
        return (0.0, 0.0, 0.0)

    def __repr__(self):
        return f"{type(self).__name__}()"


class LinearKernel(Kernel):
    name, code = "linear", LINEAR

    def _from_dot(self, D, X, Z):
        return np.asarray(D, dtype=np.float64)

    def _diag_from_sq(self, sq):
        return sq


class PolynomialKernel(Kernel):
    name, code = "poly", POLY

    def __init__(self, gamma=1.0, degree=3, coef0=0.0):
        self.gamma, self.degree, self.coef0 = float(gamma), int(degree), float(coef0)

    def _diag_from_sq(self, sq):
        return _diag_by_formula(self, sq)

    @property
    def params(self):
        return (self.gamma, self.coef0, float(self.degree))

    def __repr__(self):
        return f"PolynomialKernel(gamma={self.gamma!r}, degree={self.degree}, coef0={self.coef0!r})"


class RBFKernel(Kernel):
    """Gaussian kernel ``exp(-gamma ||x - z||^2)``, by the squared-distance trick."""

    name, code = "rbf", RBF

    def __init__(self, gamma=1.0):
        self.gamma = float(gamma)

    @property
    def sigma(self):
        return float(np.sqrt(1.0 / (2.0 * self.gamma)))

    def _from_dot(self, D, X, Z):
        return transform_rows(
            np.ascontiguousarray(D, dtype=np.float64), RBF, self.params, row_norms_sq(X), row_norms_sq(Z)
        )

    def _diag_from_sq(self, sq):
        return np.ones_like(sq)

    @property
    def params(self):
        return (self.gamma, 0.0, 0.0)

    def __repr__(self):
        return f"RBFKernel(gamma={self.gamma!r})"


class SigmoidKernel(Kernel):
    """``tanh(gamma x.z + coef0)``: not positive semi-definite in general."""

    name, code = "sigmoid", SIGMOID

    def __init__(self, gamma=1.0, coef0=0.0):
        self.gamma, self.coef0 = float(gamma), float(coef0)

    def _diag_from_sq(self, sq):
        return _diag_by_formula(self, sq)

    @property
    def params(self):
        return (self.gamma, self.coef0, 0.0)

    def __repr__(self):
        return f"SigmoidKernel(gamma={self.gamma!r}, coef0={self.coef0!r})"


class PrecomputedKernel(Kernel):
    """The data *is* the kernel: ``X`` is the (n_rows, n_train) Gram matrix."""

    name, code = "precomputed", PRECOMPUTED

    def _block(self, X, Z):
        # X holds kernel values against the training points; Z is unused.
        return np.asarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)

    def rows(self, X, idx):
        return self._block(X[idx], None)

    def diag(self, X):
        X = X.toarray() if sp.issparse(X) else X
        return np.asarray(np.diag(X), dtype=np.float64).copy()


class CallableKernel(Kernel):
    """A user function ``f(X, Z) -> (len(X), len(Z))`` array."""

    name, code = "callable", PRECOMPUTED

    def __init__(self, func):
        self.func = func

    def _block(self, X, Z):
        K = np.asarray(self.func(X, Z), dtype=np.float64)
        if K.shape != (X.shape[0], Z.shape[0]):
            raise ValueError(
                f"the kernel callable returned an array of shape {K.shape}; "
                f"expected ({X.shape[0]}, {Z.shape[0]}) for inputs with "
                f"{X.shape[0]} and {Z.shape[0]} rows"
            )
        return K

    def diag(self, X):
        return np.array([self._block(X[i : i + 1], X[i : i + 1])[0, 0] for i in range(X.shape[0])])

    def __repr__(self):
        return f"CallableKernel({getattr(self.func, '__name__', self.func)!r})"


KERNELS = ("linear", "poly", "rbf", "sigmoid", "precomputed")


def _variance(X):
    if sp.issparse(X):
        mean = X.mean()
        return float(X.multiply(X).mean() - mean**2)
    return float(X.var())


def median_sigma(X, max_points=1000, random_state=0):
    """Sigma estimated as the median pairwise Euclidean distance of the rows of ``X``.

    This is the data-driven width of the notebook's ``gaussianKernel[fTr]``
    (seed 002): the median of the distance matrix.  At most ``max_points`` rows
    (a fixed random subset) are used, so the cost stays bounded.
    """
    n = X.shape[0]
    if n > max_points:
        rng = np.random.default_rng(random_state)
        X = X[np.sort(rng.choice(n, max_points, replace=False))]
    sq = row_norms_sq(X)
    D = np.maximum(sq[:, None] + sq[None, :] - 2.0 * _dot(X, X), 0.0)
    iu = np.triu_indices(X.shape[0], k=1)
    d = np.sqrt(D[iu])
    d = d[d > 0]
    if d.size == 0:
        return 1.0
    return float(np.median(d))


def resolve_gamma(gamma, X, sigma=None):
    """Turn ``gamma`` ('scale', 'auto', 'median' or a number) or ``sigma`` into a float."""
    n_features = X.shape[1]
    if sigma is not None:
        if not isinstance(sigma, numbers.Real) or isinstance(sigma, bool) or not sigma > 0:
            raise ValueError(f"sigma must be a positive number, got {sigma!r}")
        return 1.0 / (2.0 * float(sigma) ** 2)
    if isinstance(gamma, str):
        if gamma == "scale":
            var = _variance(X)
            return 1.0 / (n_features * var) if var != 0 else 1.0
        if gamma == "auto":
            return 1.0 / n_features
        if gamma == "median":
            return 1.0 / (2.0 * median_sigma(X) ** 2)
        raise ValueError(f"gamma must be 'scale', 'auto', 'median' or a positive float, got {gamma!r}")
    if not isinstance(gamma, numbers.Real) or isinstance(gamma, bool):
        raise ValueError(f"gamma must be 'scale', 'auto', 'median' or a positive float, got {gamma!r}")
    if not gamma >= 0 or not np.isfinite(gamma):
        raise ValueError(f"gamma must be non-negative and finite, got {gamma!r}")
    return float(gamma)


def make_kernel(kernel="rbf", gamma="scale", degree=3, coef0=0.0, X=None, sigma=None):
    """Map the user-facing description of a kernel to a :class:`Kernel` object.

    ``X`` (the training data) is needed to resolve ``gamma='scale'``, ``'auto'``
    and ``'median'``.  A :class:`Kernel` instance is returned as is.
    """
    if isinstance(kernel, Kernel):
        return kernel
    if callable(kernel):
        return CallableKernel(kernel)
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS} or a callable, got {kernel!r}")
    if kernel == "linear":
        return LinearKernel()
    if kernel == "precomputed":
        return PrecomputedKernel()
    if isinstance(degree, bool) or not isinstance(degree, numbers.Integral) or degree < 0:
        if not (isinstance(degree, numbers.Real) and float(degree).is_integer() and degree >= 0):
            raise ValueError(f"degree must be a non-negative integer, got {degree!r}")
    if not isinstance(coef0, numbers.Real) or not np.isfinite(coef0):
        raise ValueError(f"coef0 must be a finite number, got {coef0!r}")
    g = resolve_gamma(gamma, X, sigma) if X is not None else float(gamma)
    if kernel == "rbf":
        return RBFKernel(g)
    if kernel == "poly":
        return PolynomialKernel(g, int(degree), coef0)
    return SigmoidKernel(g, coef0)
