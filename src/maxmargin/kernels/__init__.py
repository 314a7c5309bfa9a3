"""Everything that computes kernel values.

=================  =============================================================
module             what it holds
=================  =============================================================
``objects``        the kernel objects users and estimators see (``make_kernel``,
                   ``RBFKernel``, ...): blocks ``k(X, Z)``, ``diag``, ``mmv``;
                   gamma and sigma rules
``formulas``       the kernel codes and each formula once, compiled
                   (``transform``, ``transform_rows``, ``exp_nonpos``)
``engine``         batches of kernel rows on all cores; ``decide`` picks the
                   path (narrow dense, BLAS, sparse rows, wide sparse, Gram)
``blocks``         kernel blocks between index sets of one training matrix
                   (the one-vs-one problems: no copies of X)
``rowcache``       single rows for SMO, the LRU row cache and the row pool
=================  =============================================================
"""

from .formulas import LINEAR, POLY, PRECOMPUTED, RBF, SIGMOID, exp_nonpos, transform, transform_rows
from .objects import (
    BLOCK_ROWS,
    KERNELS,
    CallableKernel,
    Kernel,
    LinearKernel,
    PolynomialKernel,
    PrecomputedKernel,
    RBFKernel,
    SigmoidKernel,
    block_rows_for,
    densify_if_cheap,
    make_kernel,
    median_sigma,
    resolve_gamma,
    row_norms_sq,
    small_dot,
)

__all__ = [
    "BLOCK_ROWS",
    "block_rows_for",
    "KERNELS",
    "LINEAR",
    "POLY",
    "PRECOMPUTED",
    "RBF",
    "SIGMOID",
    "CallableKernel",
    "Kernel",
    "LinearKernel",
    "PolynomialKernel",
    "PrecomputedKernel",
    "RBFKernel",
    "SigmoidKernel",
    "densify_if_cheap",
    "exp_nonpos",
    "make_kernel",
    "median_sigma",
    "resolve_gamma",
    "row_norms_sq",
    "small_dot",
    "transform",
    "transform_rows",
]
