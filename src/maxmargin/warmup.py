"""Compile the solvers ahead of the first fit.

maxmargin's solvers are compiled by Numba the first time they run and kept in its
on-disk cache (``__pycache__`` beside the sources, or ``NUMBA_CACHE_DIR``).  Right
after ``pip install`` that first fit spends about 8 seconds compiling (see
``benchmarks/RESULTS.md``); every later process loads the cache in a fraction of
a second.  :func:`precompile` pays that cost once, up front, for the common
routes, so it can run as a step of an install script or an image build
(``maxmargin precompile``) instead of inside a user's first fit.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import scipy.sparse as sp


def _routes():
    """(name, function) pairs: one small fit or prediction per compiled route."""
    from . import SVC, SVR, NuSVC, OneClassSVM

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 6))
    y2 = np.where(X[:, 0] + 0.3 * rng.normal(size=120) > 0, 1, -1)
    y3 = np.digitize(X[:, 0], [-0.5, 0.5])
    Xs = sp.csr_matrix(np.where(np.abs(X) > 0.7, X, 0.0))
    big = np.resize(np.arange(120), 40_000)  # a prediction large enough for the parallel loops

    def binary():
        SVC(solver="smo").fit(X, y2).predict(X[big])

    def batched():
        SVC(solver="batched").fit(X, y2)
        SVC(solver="batched").fit(Xs, y2)

    def multiclass():
        SVC().fit(X, y3).predict(X[big])
        SVC().fit(Xs, y3)

    def probabilities():
        SVC(probability=True, random_state=0).fit(X, y2)
        SVC(probability=True, random_state=0).fit(X, y3)

    def family():
        NuSVC(nu=0.3).fit(X, y2)
        SVR().fit(X, X[:, 1])
        OneClassSVM(nu=0.2).fit(X)

    def string_labels():  # labels.encode's compiled pass, over 8-byte and 4-byte words (0.56 s the first time)
        SVC().fit(X, np.where(y2 > 0, "ab", "cd"))
        SVC().fit(X, np.where(y2 > 0, "abc", "d"))

    return [
        ("two classes (SMO)", binary),
        ("batched solver", batched),
        ("several classes", multiclass),
        ("probabilities", probabilities),
        ("nu-SVC, SVR, one-class", family),
        ("string labels", string_labels),
    ]


def precompile(verbose=False):
    """Compile (or load from Numba's cache) the solvers of the common routes: SMO, the
    batched solver, the compiled one-vs-one route, probabilities (its folds), nu-SVC, SVR and one-class, on dense
    and sparse data, and the parallel loops of prediction.  Returns the seconds each
    route took; with ``verbose``, prints them as it goes."""
    took = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings of the tiny problems
        for name, run in _routes():
            t = time.perf_counter()
            run()
            took[name] = time.perf_counter() - t
            if verbose:
                print(f"  {name:<26} {took[name]:6.2f} s", flush=True)
    return took
