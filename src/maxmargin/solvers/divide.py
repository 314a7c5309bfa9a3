r"""Divide and conquer: solve parts of the data, merge, finish with an exact global solve.

The standard dual (:mod:`maxmargin.problem`, :math:`\Delta = 0`, one equality constraint)

.. math::

    \min_\alpha \tfrac12\alpha^TQ\alpha + p^T\alpha
    \quad\text{s.t.}\quad y^T\alpha = 0,\; 0 \le \alpha_i \le U_i

is solved in three steps (DC-SVM, Hsieh, Si & Dhillon, ICML 2014; Cascade SVM,
Graf et al., NIPS 2005):

1. **partition** the data rows into ``n_parts`` parts: kernel k-means on a sample
   of ``sample_size`` rows (the distance in feature space
   :math:`\|\phi(x) - c_k\|^2 = K(x,x) - \tfrac{2}{|S_k|}\sum_{j\in S_k}K(x,x_j)
   + \tfrac{1}{|S_k|^2}\sum_{j,l\in S_k}K(x_j,x_l)`), every row then going to its
   nearest centre (``partition='kmeans'``); or a random split balanced per class
   (``partition='random'``);
2. **levels**: the parts are solved independently (the batched solver, SMO for parts
   below 4000 variables), each on its own rows: the subproblem keeps :math:`Q`'s block
   of the part and the others' variables at zero.  Every part solution satisfies
   :math:`y_P^T\alpha_P = 0`, so their union is feasible for the whole problem.  With
   ``levels > 1`` the parts are then merged ``branching`` at a time, and each merged
   part is solved again on the support vectors of its children only (Cascade SVM),
   warm-started from their multipliers, until ``n_parts / branching**(levels-1)``
   parts are left;
3. **global solve**: the whole problem, warm-started from the union of the last
   level's multipliers (``alpha0``), by the batched solver (SMO below 4000 variables),
   whose stopping test is the usual maximal KKT violation over *all* variables
   (:math:`\max_{I_{up}} -y_tG_t - \min_{I_{low}} -y_tG_t < tol`).  The result is the
   minimiser of the whole dual, the same as a single solve (objective within the
   tolerance), only reached from a good start: most multipliers are already right.

``early_stop=k`` (``1 <= k <= levels``) skips step 3 and keeps the level-``k`` models
(DC-SVM's *early prediction*): each part has its own :math:`(\alpha_P, \rho_P)` and a
point is predicted by the model of the part whose k-means centre is nearest in feature
space, or (``early_blend='auto'``, where it validates better) by a weighted mean of the
nearest parts' values,

.. math::

    f(x) = \sum_{P \in N_t(x)} w_P(x) f_P(x), \qquad
    w_P(x) \propto \exp\big(-(d_P(x) - d_{\min}(x)) / T\big),

over the ``t`` parts of nearest centres (:math:`d_P` the squared distance in feature
space).  A kernel that reaches across the parts (a wide kernel in many dimensions) makes
each part's model a fair model of its neighbours' rows too, and the mean of several
lowers the variance of models each fitted on a part of the data (the 20-D mixture of
``benchmarks/bench_divide.py``: -0.7 pp against the exact SVM by the nearest part, -0.15
pp by the blend); a local kernel makes a part's model poor beyond its border, where the
nearest part alone is better.  ``t`` and ``T`` are chosen on rows held out of the parts.
This is an **approximation** of the SVM (no global KKT test; accuracy usually close, the
decision function is not the SVM's); it needs ``partition='kmeans'``.

Options (``solver_options`` of the estimators)
----------------------------------------------
``n_parts`` (int or None, default None)
    Parts at the first level: by default 8, and with ``early_stop`` one part per
    :data:`EARLY_PART_ROWS` variables (at least 8, at most :data:`EARLY_MAX_PARTS`).
``levels`` (int, default 1)
    Levels before the global solve (1: parts, then the global solve).
``branching`` (int or None)
    Parts merged into one between levels; default ``ceil(n_parts ** (1/levels))``.
``partition`` ('kmeans' | 'random', default 'kmeans')
``sample_size`` (int, default 1000)
    Rows the kernel k-means runs on.
``random_state`` (int, default 0)
    Seeds the sample, the k-means start and the random partition.
``early_stop`` (None or int, default None)
    Return the level-``k`` model instead of the exact solution (approximate).
``early_blend`` ('auto' | 'nearest', default 'auto')
    How the level-``k`` model predicts: ``'nearest'``, by the part of the nearest centre
    alone (DC-SVM); ``'auto'``, by a blend of the nearest parts' decision values
    (:func:`blend_weights`) where that predicts better than the nearest part alone on
    rows held out of the parts (:data:`BLEND_ROWS`; chosen by :func:`choose_blend`).
``backend`` ('threads' | 'dask', default 'threads')
    Where the parts are solved: a thread pool here (the compiled solvers release the
    GIL), or the workers of the active Dask client (:mod:`maxmargin.scaleout`; the
    global step then also runs there, see :func:`maxmargin.scaleout.global_solve`).
``n_jobs`` (int or None)
    Threads of the local backend (default: the cores).
``part_solver`` ('auto' | 'smo' | 'batched', default 'auto')
    The solver of the parts and of the global step.
``direct_below`` (int, default :data:`DIRECT_BELOW`)
    A problem of fewer variables is not divided: the part solver solves it whole, here
    (also with ``early_stop`` or ``backend='dask'``; the result is then the exact
    solution, and ``extra['divide']`` holds the one global step with ``direct=True``).
    Below ~10,000 rows the partition and the parts cost more than they save: the
    k-means alone (~50 ms) is dearer than SMO on a one-vs-one pair of a few thousand
    rows.  ``0`` divides every problem.  A k-means partition with more than
    :data:`ONE_PART_SHARE` of the variables in one part is not used either: the problem
    is solved whole (``largest_part`` in the report; wide sparse text does this); nor,
    for the exact fit, one whose sample keeps about as much kernel mass across its parts
    as a random partition would (:data:`ACROSS_MAX`, ``kernel_across`` in the report):
    high-dimensional data under a wide kernel, where the parts' solutions are a poor
    start (dense rows of at most :data:`ACROSS_FEATURES` features are divided from
    :data:`ACROSS_ROWS` variables on all the same: there it pays).  Dividing pays where
    the kernel is local at the partition's scale.  With
    ``backend='dask'`` a problem below ``direct_below`` is solved here, one with a
    one-part partition as one task on a worker with its host's threads, as one with a
    partition no better than random below :data:`DASK_ACROSS_BELOW` variables (larger
    problems are divided there: the divided path spreads over every host of a cluster,
    a whole solve would run on one).

Besides: ``tol``, ``max_iter`` (of the global step), ``shrinking``, ``cache_size``,
``callback``, ``callback_info``, ``time_limit``, ``verbose``, as the other solvers.
``Solution.extra['divide']`` reports each level (parts, sizes, support vectors, seconds).
"""

from __future__ import annotations

import dataclasses
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numba import prange

from .._jit import parallel
from ..kernels.formulas import FORMULA_CODES, transform
from ..problem import DualProblem
from .base import Solution

#: below this many variables a part is solved by SMO, from it on by the batched solver
BATCHED_MIN_N = 4000
#: problems of fewer variables are solved whole (option ``direct_below``).  Measured (session 42, RBF,
#: tol 1e-3, time of SVC(solver='auto') / time of the divided fit): the 2-D checkerboard of bench_divide 0.26 at
#: 2,000 rows, 0.68 at 5,000, 1.0 at 10,000, 1.24 at 20,000; its 20-D overlapping mixture 0.32, 0.61, 0.76,
#: 0.83 (0.80 at 40,000); one-vs-one pairs of pendigits (~1,500 rows) 0.02, letter26 (~1,150) 0.02.
DIRECT_BELOW = 10_000
#: a k-means partition that puts more than this share of the variables into one part is not used: the problem
#: is solved whole (``extra['divide']`` reports ``largest_part``; the k-means of the tabular sets put 13-27% into
#: their largest of 8 parts, and two parts of 60:40 are usual).  Wide sparse text under the RBF kernel gives
#: such partitions -- rows nearly orthogonal, every row nearest to the most diffuse centre: rcv1b 92% of its
#: 20,000 rows in one of 8 parts, realsim 96% of 60,000, news20b 91% -- where the divided fit took 2x the whole
#: solve (session 42: rcv1b 7.8 against 3.8 s, realsim 18 against 10.5 s); a random partition instead gave parts
#: with 1.8-2.3x the final support vectors and a global step slower than a cold start (7.2 and 21 s).
ONE_PART_SHARE = 0.75
#: a k-means partition (exact fits only) whose sample keeps more than this of a random partition's kernel mass across
#: its parts (:func:`kernel_across`) is not used: the problem is solved whole (``kernel_across`` in the report).
#: Measured (session 42, 8 parts, RBF at the sets' gamma; the divided fit's speed against the whole solve's): the
#: 2-D checkerboard 0.40 (1.69x at 100,000 rows), ijcnn1 0.26 (1.16x), skin 0.68; the 20-D overlapping mixture 0.95
#: (0.85x), tall200k 0.95 (0.92x), a9a 0.96 (0.6x), clicks 0.95 (0.44x), imbal100k 0.94 (0.41x), covlike 0.94
#: (1.0x), mid64's pairs 0.86 (0.5x).  High-dimensional data under a wide kernel give partitions no better than
#: random: every row near every other, the parts' solutions a poor start for the global step (clicks: 1,066
#: rounds from the parts' start against 911 from zero).
ACROSS_MAX = 0.8
#: with ``backend='dask'``, the rule of :data:`ACROSS_MAX` applies to problems of fewer variables only (the refused
#: problem then solved as one task on the widest host): larger ones are divided, the divided path spreading over
#: every host where a whole solve would take one.  Measured (session 42, LocalCluster of 2 workers x 1 thread):
#: mid64's 45 one-vs-one pairs of ~12,000 rows, each divided over the cluster, 63.6-69.2 s; each solved whole on a
#: worker 27.3 s (SVC() here 19 s); mix20 at 100,000 rows divided 25.6-34.3 s, whole on a worker 25.6 s.
DASK_ACROSS_BELOW = 50_000
#: the rule of :data:`ACROSS_MAX` does not apply to dense rows of at most ACROSS_FEATURES features from ACROSS_ROWS
#: variables on: such problems are divided whatever their partition leaves across.  Measured (session 55, after
#: the parts' threads got BLAS held to one thread -- before, the parts' level took up to 2x as long; whole solve /
#: divided fit, one process a fit, ``gamma='scale'`` unless said): 8 features (rings, 150,000 rows) 1.78x; 12 (a
#: sine-and-product rule, 200,000) 1.56; 16 (a Gaussian mixture, 100,000) 1.12; 20 (tall200k) 1.33, (mix20 at gamma
#: 0.05) 1.06 at 100,000, 1.17 at 200,000, 0.9-1.0 at 20,000-60,000; 30 and 40 (mixtures, 150,000) 1.0 and 0.97;
#: 50 (imbal100k) 0.47, 54 (covlike) 1.45, 64 (a mixture, 200,000) 0.86, (mid64's pairs) 0.51, 100 (dense100k)
#: 0.65; sparse clicks 0.53 at 100,000 and 0.56 at 200,000 rows
ACROSS_FEATURES = 24
ACROSS_ROWS = 80_000
#: rows of the probe that tests a k-means partition's balance before every row is assigned (problems of at least
#: ten times as many rows)
PROBE_ROWS = 2000
#: rows of X per kernel block when assigning rows to the k-means centres
ASSIGN_BLOCK = 8192
#: ``early_stop`` without ``n_parts``: one part per EARLY_PART_ROWS variables, at least 8, at most EARLY_MAX_PARTS.
#: Measured (session 55; early with the blend against the exact divided fit; 1M rows): the 20-D mixture 32 parts
#: 58.5 s (-0.12 pp), 64 parts 38.8 s (26x, +0.08 pp), 100 parts 36.5 s (-0.11 pp; its largest part 56,615 rows);
#: the checkerboard 32 parts 14.2 s (-0.36), 64 parts 8.3-9.2 s (20-22x, -0.36), 100 parts 6.2 s (-0.48)
EARLY_PART_ROWS = 16_000
EARLY_MAX_PARTS = 128
#: ``early_blend='auto'``: the variables held out of the parts to choose the early model's blend -- at most
#: BLEND_ROWS, at most BLEND_SHARE of the problem; below BLEND_MIN the nearest part alone (nothing held out)
BLEND_ROWS = 10_000
BLEND_SHARE = 0.05
BLEND_MIN = 200
#: the blends tried (:func:`choose_blend`): the ``t`` nearest parts, and T = scale x the held-out rows' median gap
#: between their nearest and second nearest centre.  Measured (session 55; test accuracy, nearest part alone ->
#: the blend the held-out rows chose): mix20 300k, 32 parts 79.83 -> 80.38% (t 5, scale 1; the exact SVM 80.53),
#: the 1M checkerboard, 64 parts 95.83 -> 96.03 (t 5, scale 0.3) and 96.02 -> 96.07 (t 3, 0.3); larger scales
#: cost the checkerboard up to 10 pp, so the choice is made on data
BLEND_TOPS = (2, 3, 5, 8)
BLEND_SCALES = (0.3, 1.0, 2.0, 4.0, 8.0, 16.0)
#: weights below this (after normalising) are dropped and the rest normalised again: a part whose weight is
#: negligible is not evaluated at prediction
BLEND_NEGLIGIBLE = 1e-6

#: What this solver takes (read by :mod:`maxmargin.solvers.registry`): the C-SVC dual only (one
#: variable per data row, y'a = 0; not the nu-variants, SVR or one-class), the common options it
#: reads, its own options, and its traits.
PROBLEMS = ("csvc-dual",)
OPTIONS = ("tol", "max_iter", "shrinking", "cache_size", "callback", "callback_info", "time_limit", "verbose")
TRAITS = ("iterative", "libsvm-rho", "gathered-rows")
OWN_OPTIONS = (
    "n_parts",
    "levels",
    "branching",
    "partition",
    "sample_size",
    "random_state",
    "early_stop",
    "early_blend",
    "backend",
    "n_jobs",
    "part_solver",
    "direct_below",
)


class DivideError(ValueError):
    """A problem or an option the divide-and-conquer solver cannot take."""


# ----------------------------------------------------------------- partition
@dataclass
class Partition:
    """Rows of ``X`` split into parts.

    ``labels[i]`` is the part of data row ``i``.  For ``'kmeans'`` also the sample the
    centres are made of (``sample`` its rows of X, ``sample_labels`` their cluster) and
    ``centre_sq[k]`` :math:`= \\tfrac{1}{|S_k|^2}\\sum_{j,l\\in S_k}K(x_j,x_l)`.
    ``labels`` is None where :func:`partition`'s ``max_share`` or ``max_across`` refused it.
    """

    labels: np.ndarray | None
    n_parts: int
    sample: np.ndarray | None = None
    sample_labels: np.ndarray | None = None
    centre_sq: np.ndarray | None = None
    #: the largest part's share of the probe's rows, where ``max_share`` refused the partition (``labels`` None)
    largest: float | None = None
    #: the sample's kernel mass across parts relative to a random partition's (:func:`kernel_across`; k-means only)
    across: float | None = None


def _rows(X, rows):
    return X[np.asarray(rows, dtype=np.int64)]


def _dense(A):
    return A.toarray() if sp.issparse(A) else np.asarray(A, dtype=np.float64)


def _cluster_sums_rows(K, labels, out):
    for r in prange(K.shape[0]):
        for j in range(K.shape[1]):
            out[r, labels[j]] += K[r, j]


_cluster_sums_rows = parallel(_cluster_sums_rows, nogil=True)


def cluster_sums(K, labels, k):
    """``K @ one_hot(labels)``: for each row of ``K`` (n, m), the sum of its values over the
    columns of each of the ``k`` clusters (an empty cluster sums to 0): O(n m) additions,
    where the product with the one-hot matrix costs O(n m k) (xor 300k, 64 parts: 1.5 s of
    the partition's 3.1 s)."""
    K = np.ascontiguousarray(K, dtype=np.float64)
    out = np.zeros((K.shape[0], k))
    _cluster_sums_rows(K, np.ascontiguousarray(labels, dtype=np.int64), out)
    return out


def centre_distances_from(K_xs, sample_labels, centre_sq, n_parts):
    """Each row's squared distance in feature space to each k-means centre, less the row's
    own :math:`K(x,x)` (the same for every centre), from its kernel values ``K_xs`` with the
    sample: (n, n_parts), inf for an empty cluster."""
    size = np.bincount(sample_labels, minlength=n_parts).astype(np.float64)
    dist = centre_sq[None, :] - 2.0 * cluster_sums(K_xs, sample_labels, n_parts) / np.maximum(size, 1.0)[None, :]
    dist[:, size == 0] = np.inf
    return dist


def nearest_centre(K_xs, sample_labels, centre_sq, n_parts):
    """The nearest k-means centre of each row, from its kernel values ``K_xs`` with the
    sample (the constant :math:`K(x,x)` drops out of the comparison)."""
    return np.argmin(centre_distances_from(K_xs, sample_labels, centre_sq, n_parts), axis=1).astype(np.int64)


def _assign_rows(X, ST, sq_x, sq_s, code, gamma, coef0, degree, labels, weight, csq, out, dists):
    """:func:`nearest_centre` of every dense row of ``X`` with its kernel values computed
    here, 64 rows a task, and never stored beyond one row (``weight[c]`` = 2 / |cluster c|,
    0 for an empty one, whose ``csq`` is inf).  ``dists`` (n, k), where it has rows, gets
    every distance (:func:`centre_distances_from`)."""
    n, d = X.shape
    m = ST.shape[1]
    k = csq.shape[0]
    store = dists.shape[0] > 0
    for b in prange((n + 63) // 64):
        o = np.empty(m)
        scratch = np.empty(m)
        sums = np.empty(k)
        for r in range(b * 64, min(n, b * 64 + 64)):
            o[:] = 0.0
            for f in range(d):  # feature by feature: the loop over the sample vectorises
                xf = X[r, f]
                for j in range(m):
                    o[j] += xf * ST[f, j]
            transform(o, code, gamma, coef0, degree, sq_x[r], sq_s, scratch)
            sums[:] = 0.0
            for j in range(m):
                sums[labels[j]] += o[j]
            best = 0
            best_d = np.inf
            for c in range(k):
                dist = csq[c] - weight[c] * sums[c]
                if store:
                    dists[r, c] = dist
                if dist < best_d:
                    best_d = dist
                    best = c
            out[r] = best


_assign_rows = parallel(_assign_rows, nogil=True)


def assign(X, kernel, sample, sample_labels, centre_sq, n_parts, distances=False):
    """The nearest k-means centre of each row of ``X`` (:func:`nearest_centre`): for dense
    rows and a formula kernel in one compiled pass (no kernel block is stored: xor 1M with
    1000 sample rows, 1.9 s against 4.2 s by blocks); otherwise by blocks of
    :data:`ASSIGN_BLOCK` rows.  With ``distances``, the distances to every centre instead
    ((n, n_parts), :func:`centre_distances_from`)."""
    n = X.shape[0]
    code = getattr(kernel, "code", -1)
    if not sp.issparse(X) and code in FORMULA_CODES and sample.shape[0] > 0:
        X = np.ascontiguousarray(X, dtype=np.float64)
        S = np.ascontiguousarray(_dense(sample))
        size = np.bincount(sample_labels, minlength=n_parts).astype(np.float64)
        weight = np.where(size > 0, 2.0 / np.maximum(size, 1.0), 0.0)
        csq = np.where(size > 0, centre_sq, np.inf)
        out = np.empty(n, dtype=np.int64)
        dists = np.empty((n if distances else 0, n_parts))
        gamma, coef0, degree = kernel.params
        sq_x = np.einsum("ij,ij->i", X, X)
        sq_s = np.einsum("ij,ij->i", S, S)
        labels = np.ascontiguousarray(sample_labels, dtype=np.int64)
        _assign_rows(
            X, np.ascontiguousarray(S.T), sq_x, sq_s, int(code), gamma, coef0, degree, labels, weight, csq, out, dists
        )
        return dists if distances else out
    out = np.empty((n, n_parts)) if distances else np.empty(n, dtype=np.int64)
    for s in range(0, n, ASSIGN_BLOCK):
        e = min(s + ASSIGN_BLOCK, n)
        dist = centre_distances_from(_dense(kernel(X[s:e], sample)), sample_labels, centre_sq, n_parts)
        out[s:e] = dist if distances else np.argmin(dist, axis=1)
    return out


def _centre_sq(Kss, labels, k):
    size = np.maximum(np.bincount(labels, minlength=k), 1.0)
    sums = cluster_sums(Kss, labels, k)  # (m, k)
    return np.bincount(labels, weights=sums[np.arange(labels.shape[0]), labels], minlength=k) / size**2


def kernel_kmeans(Kss, k, rng, n_iter=30, n_init=4, give_up=None):
    """Kernel k-means (Lloyd's iterations in feature space) on the sample's Gram matrix:
    the best of ``n_init`` runs (least within-cluster sum of squared distances).  ``give_up(labels)``, when
    given, sees the first run's labels: if true, they are returned without the other runs (a partition about
    to be refused; on a wide kernel each run takes its 30 iterations: mid64's pairs of 11,500 rows, 105 of the
    110 ms of the partition that refused them)."""
    best, best_cost = None, np.inf
    diag = np.diag(Kss)
    for run in range(n_init):
        labels = _kernel_kmeans_once(Kss, k, rng, n_iter)
        if run == 0 and give_up is not None and give_up(labels):
            return labels
        csq = _centre_sq(Kss, labels, k)
        size = np.maximum(np.bincount(labels, minlength=k), 1.0)
        own = cluster_sums(Kss, labels, k)[np.arange(Kss.shape[0]), labels] / size[labels]
        cost = float(np.sum(diag - 2.0 * own + csq[labels]))
        if cost < best_cost:
            best, best_cost = labels, cost
    return best


def _kernel_kmeans_once(Kss, k, rng, n_iter):
    """One kernel k-means run: k-means++ seeding, Lloyd's iterations; an emptied cluster
    takes the point farthest from its centre."""
    m = Kss.shape[0]
    diag = np.diag(Kss).copy()
    # k-means++ on the feature-space distances d(i, j)^2 = K_ii + K_jj - 2 K_ij
    centres = [int(rng.integers(m))]
    d2 = np.maximum(diag + diag[centres[0]] - 2.0 * Kss[:, centres[0]], 0.0)
    for _ in range(1, k):
        total = d2.sum()
        c = int(rng.choice(m, p=d2 / total)) if total > 0 else int(rng.integers(m))
        centres.append(c)
        d2 = np.minimum(d2, np.maximum(diag + diag[c] - 2.0 * Kss[:, c], 0.0))
    labels = np.argmin(
        np.stack([diag[c] - 2.0 * Kss[:, c] for c in centres], axis=1),
        axis=1,
    )
    for _ in range(n_iter):
        sums = cluster_sums(Kss, labels, k)
        size = np.bincount(labels, minlength=k).astype(np.float64)
        csq = np.bincount(labels, weights=sums[np.arange(m), labels], minlength=k) / np.maximum(size, 1.0) ** 2
        dist = csq[None, :] - 2.0 * sums / np.maximum(size, 1.0)[None, :]
        dist[:, size == 0] = np.inf
        new = np.argmin(dist, axis=1)
        for c in np.flatnonzero(np.bincount(new, minlength=k) == 0):  # re-seed an emptied cluster
            own = dist[np.arange(m), new] + diag
            far = int(np.argmax(own))
            new[far] = c
        if np.array_equal(new, labels):
            break
        labels = new
    return labels.astype(np.int64)


def partition(
    X, kernel, n_parts, method="kmeans", sample_size=1000, random_state=0, y=None, max_share=None, max_across=None
):
    """Split the rows of ``X`` into ``n_parts`` parts (see the module docstring).  A k-means partition may be
    refused before any row is assigned (``labels`` None): with ``max_across``, where the sample's clusters keep
    more than that of a random partition's kernel mass across parts (:func:`kernel_across`, set in ``across``);
    with ``max_share``, where more than that share of :data:`PROBE_ROWS` random rows go to one part (``largest``;
    the probe costs a tenth or less of the assignment on the problems it is tried on)."""
    n = X.shape[0]
    rng = np.random.default_rng(random_state)
    n_parts = int(min(n_parts, n))
    if method == "random":
        labels = np.empty(n, dtype=np.int64)
        groups = [np.arange(n)] if y is None else [np.flatnonzero(y == c) for c in np.unique(y)]
        for g in groups:  # each class dealt round-robin after a shuffle: balanced parts and classes
            perm = rng.permutation(g)
            labels[perm] = (np.arange(perm.size) + int(rng.integers(n_parts))) % n_parts
        return Partition(labels=labels, n_parts=n_parts)
    if method != "kmeans":
        raise DivideError(f"partition must be 'kmeans' or 'random', got {method!r}")
    m = int(min(max(sample_size, n_parts), n))
    sample_rows = np.sort(rng.choice(n, size=m, replace=False))
    S = _rows(X, sample_rows)
    Kss = _dense(kernel(S, S))
    # refused on the first k-means run where its kernel mass across parts is too high, without the other runs
    # (mid64's pairs: 0.939 for the first run and for the best; on a 30-D wide kernel of 300 rows the four runs
    # left 0.79, 0.95, 0.75 and 0.89 -- unbalanced parts keep more within -- so the rule is a coarse one)
    first = {}  # the first run's labels and their mass across, measured once

    def give_up(lab):
        first.update(labels=lab, across=kernel_across(Kss, lab, n_parts))
        return first["across"] > max_across

    sample_labels = kernel_kmeans(Kss, n_parts, rng, give_up=None if max_across is None else give_up)
    across = first["across"] if first.get("labels") is sample_labels else kernel_across(Kss, sample_labels, n_parts)
    if max_across is not None and across > max_across:
        return Partition(labels=None, n_parts=n_parts, across=across)
    csq = _centre_sq(Kss, sample_labels, n_parts)
    if max_share is not None and n >= 10 * PROBE_ROWS:
        probe = rng.choice(n, size=PROBE_ROWS, replace=False)
        share = np.bincount(assign(_rows(X, probe), kernel, S, sample_labels, csq, n_parts)).max() / PROBE_ROWS
        if share > max_share:
            return Partition(labels=None, n_parts=n_parts, largest=float(share), across=across)
    labels = assign(X, kernel, S, sample_labels, csq, n_parts)
    return Partition(
        labels=labels,
        n_parts=n_parts,
        sample=_dense(S),
        sample_labels=sample_labels,
        centre_sq=csq,
        across=across,
    )


def kernel_across(Kss, labels, n_parts):
    r"""The sample's kernel mass between rows of different parts, :math:`\sum_{l_i \ne l_j}|K_{ij}|`, as a share
    of its mass between different rows, :math:`\sum_{i \ne j}|K_{ij}|`, divided by :math:`1 - 1/k`, what a random
    partition into ``k`` equal parts leaves across (so about 1 for a partition no better than random, 0 where no
    kernel value joins two parts).  The cross-part values are what the parts' solutions ignore: the objective of
    their union is within :math:`\tfrac12 C^2 \sum_{l_i \ne l_j}|K_{ij}|` of the optimum (DC-SVM, Hsieh, Si &
    Dhillon 2014, theorem 1), so a partition that keeps the kernel mass within its parts gives a start close to the
    solution, and one that does not gives little."""
    A = np.abs(Kss)
    total = A.sum() - np.trace(A)
    k = int(n_parts)
    if total <= 0.0 or k < 2:
        return 0.0
    one = np.zeros((labels.shape[0], k))
    one[np.arange(labels.shape[0]), labels] = 1.0
    within = float(np.trace(one.T @ A @ one)) - np.trace(A)
    return float((total - within) / total / (1.0 - 1.0 / k))


# ----------------------------------------------------------------- parts
def subproblem(problem, vars_, alpha0=None):
    """The dual restricted to the variables ``vars_`` (the others held at zero): the
    part's rows of X are gathered once (``X[rows]``), the variables index into them."""
    vars_ = np.asarray(vars_, dtype=np.int64)
    rows, inv = np.unique(problem.index[vars_], return_inverse=True)
    return DualProblem(
        X=_rows(problem.X, rows),
        kernel=problem.kernel,
        y=problem.y[vars_].copy(),
        p=problem.p[vars_].copy(),
        upper=problem.upper[vars_].copy(),
        index=inv.astype(np.int64),
        shift=problem.shift[vars_].copy(),
        alpha0=None if alpha0 is None else np.asarray(alpha0, dtype=np.float64),
    )


def pick_solver(name, n_var):
    """The solver module for ``n_var`` variables: ``'auto'`` takes SMO below
    :data:`BATCHED_MIN_N`, the batched solver from there on."""
    from . import batched, smo

    if name == "auto":
        name = "batched" if n_var >= BATCHED_MIN_N else "smo"
    if name not in ("smo", "batched"):
        raise DivideError(f"part_solver must be 'auto', 'smo' or 'batched', got {name!r}")
    return smo if name == "smo" else batched


def solve_part(part, options):
    """Solve one part (a :class:`DualProblem`); runs in a thread or on a Dask worker.
    Returns ``(alpha, rho, grad, objective, n_iter, status)``.  A part with one class
    only has the solution zero, and ``rho = -y`` (its model predicts that class: the
    decision value is ``-rho = y``)."""
    options = dict(options)
    name = options.pop("part_solver", "auto")
    y = part.y
    if y.size == 0 or not ((y > 0).any() and (y < 0).any()):
        a = np.zeros(y.shape[0])
        rho = -float(y[0]) if y.size else 0.0
        return a, rho, part.p + part.shift * a, 0.0, 0, "converged"
    sol = pick_solver(name, part.n_var).solve(part, **options)
    return sol.alpha, float(sol.rho), sol.grad, float(sol.objective), int(sol.n_iter), sol.status


class LocalExecutor:
    """Parts on a thread pool (the compiled solvers release the GIL)."""

    def __init__(self, n_jobs=None):
        from .._threads import cores

        self.n_jobs = int(n_jobs or cores())

    def map(self, fn, items):
        if self.n_jobs <= 1 or len(items) <= 1:
            return [fn(*it) for it in items]
        from .._threads import one_blas_thread

        # BLAS held to one thread here, in the calling thread, before the parts' threads start: OpenBLAS (0.3.30 and
        # 0.3.31, session 55) ignored thread counts set from other threads once the main thread had set one, so the
        # parts' own holds did not take, and two parts' products, each on all of BLAS's threads, ran beside each
        # other's compiled loops -- mix20 300k, 32 early parts: 8 s with BLAS on one thread, 18 s on two
        with one_blas_thread(), ThreadPoolExecutor(max_workers=min(self.n_jobs, len(items))) as pool:
            return list(pool.map(lambda it: fn(*it), items))


def _check_problem(problem):
    if problem.nu_constraints or problem.delta != 0:
        raise DivideError(
            "solver='divide' solves the standard dual with y'alpha = 0 (C-SVC: formulations 'l1', 'l2', "
            "'hard'); the nu-variants and problems with delta != 0 are not supported"
        )
    if problem.kernel.code == 4:
        raise DivideError(
            "solver='divide' needs the data's features: kernel='precomputed' and callable kernels are not "
            "supported (use solver='batched')"
        )


def _check_int(name, value, low=1):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise DivideError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def group_of(labels, level, levels, branching):
    """The part at ``level`` (``levels`` = the first, finest) of each first-level part."""
    return labels // (branching ** (levels - level))


def solve(
    problem,
    n_parts=None,
    levels=1,
    branching=None,
    partition="kmeans",
    sample_size=1000,
    random_state=0,
    early_stop=None,
    early_blend="auto",
    backend="threads",
    n_jobs=None,
    part_solver="auto",
    direct_below=None,
    tol=1e-3,
    max_iter=-1,
    shrinking=True,
    cache_size=200.0,
    callback=None,
    callback_info=None,
    time_limit=None,
    verbose=False,
):
    """Solve ``problem`` by divide and conquer (see the module docstring)."""
    _check_problem(problem)
    if n_parts is None:
        n_parts = 8 if early_stop is None else int(min(EARLY_MAX_PARTS, max(8, round(problem.n_var / EARLY_PART_ROWS))))
    n_parts = _check_int("n_parts", n_parts)
    levels = _check_int("levels", levels)
    if branching is None:
        branching = max(2, math.ceil(n_parts ** (1.0 / levels))) if levels > 1 else 2
    branching = _check_int("branching", branching, 2)
    if early_stop is not None:
        early_stop = _check_int("early_stop", early_stop)
        if early_stop > levels:
            raise DivideError(f"early_stop must be between 1 and levels={levels}, got {early_stop}")
        if partition != "kmeans":
            raise DivideError("early_stop routes each point to its k-means part: it needs partition='kmeans'")
    if early_blend not in ("auto", "nearest"):
        raise DivideError(f"early_blend must be 'auto' or 'nearest', got {early_blend!r}")
    if backend not in ("threads", "dask"):
        raise DivideError(f"backend must be 'threads' or 'dask', got {backend!r}")
    pick_solver(part_solver, 1)  # checks the name
    direct_below = DIRECT_BELOW if direct_below is None else _check_int("direct_below", direct_below, 0)
    t0 = time.perf_counter()
    step = dict(tol=tol, max_iter=max_iter, shrinking=shrinking, cache_size=cache_size, verbose=verbose)
    step.update(callback=callback, callback_info=callback_info, time_limit=time_limit)
    if problem.n_var < direct_below:
        return _whole(problem, part_solver, t0, [], dict(direct=True), step)
    n_var = problem.n_var
    n_data = problem.X.shape[0]
    ydata = np.zeros(n_data)
    ydata[problem.index] = problem.y
    part = globals()["partition"](
        problem.X,
        problem.kernel,
        n_parts,
        partition,
        sample_size,
        random_state,
        y=ydata,
        max_share=ONE_PART_SHARE,
        # on Dask the divided path spreads over every host, a whole solve would take one: large problems divide
        max_across=ACROSS_MAX if _across_rule_applies(problem, early_stop, backend) else None,
    )
    why = None
    if part.labels is None:  # refused: one part nearly the problem, or parts no better than random
        why = dict(largest_part=part.largest) if part.largest is not None else dict(kernel_across=part.across)
    else:
        labels = part.labels[problem.index]  # first-level part of each variable
        share = np.bincount(labels).max() / problem.n_var
        if share > ONE_PART_SHARE:  # one part is nearly the problem: dividing cannot pay
            why = dict(largest_part=float(share))
    if why is not None and backend == "dask":  # solved whole on a worker, with its host's threads
        from .. import scaleout

        tg = time.perf_counter()
        opts = _step_options(dict(step, callback=None), t0, tg)
        sol = scaleout.DaskExecutor().run_wide(_solve_whole, (problem, part_solver, opts))
        return _done(sol, [], tg, dict(direct=True, **why), verbose)
    if why is not None:
        return _whole(problem, part_solver, t0, [], dict(direct=True, **why), step)
    if backend == "dask":
        from .. import scaleout

        executor = scaleout.DaskExecutor()
    else:
        executor = LocalExecutor(n_jobs)
    part_opts = dict(tol=tol, shrinking=shrinking, cache_size=cache_size, part_solver=part_solver)
    if time_limit is not None:
        part_opts["time_limit"] = time_limit

    alpha = np.zeros(problem.n_var)
    if problem.alpha0 is not None:
        from .smo import initial_alpha

        alpha = initial_alpha(problem)  # a warm start: each part starts from its share
    report = []
    early = None
    held = None  # variables held out of the parts to choose the early model's blend
    if early_stop is not None and early_blend == "auto" and problem.alpha0 is None:
        n_held = min(BLEND_ROWS, int(BLEND_SHARE * n_var))
        if n_held >= BLEND_MIN:
            held = np.sort(np.random.default_rng([random_state, 1]).choice(n_var, size=n_held, replace=False))
    solved = np.ones(n_var, dtype=bool)
    if held is not None:
        solved[held] = False
    for level in range(levels, 0, -1):
        tl = time.perf_counter()
        groups = group_of(labels, level, levels, branching)
        items, members = [], []
        for g in np.unique(groups):
            vars_ = np.flatnonzero((groups == g) & solved)
            if level < levels:  # Cascade: the children's support vectors only
                vars_ = vars_[alpha[vars_] > 0]
            members.append((int(g), vars_))
            items.append((subproblem(problem, vars_, alpha[vars_] if alpha[vars_].any() else None), part_opts))
        # the largest parts first: the workers (threads or Dask's) finish closer together
        order = np.argsort([-v.size for _, v in members], kind="stable")
        done = executor.map(solve_part, [items[i] for i in order])
        results = [None] * len(items)
        for i, res in zip(order, done):
            results[i] = res
        new = np.zeros(problem.n_var)
        rho = {}
        for (g, vars_), res in zip(members, results):
            new[vars_] = res[0]
            rho[g] = res[1]
        alpha = new
        report.append(
            dict(
                level=level,
                parts=len(members),
                sizes=[int(v.size) for _, v in members],
                support_vectors=int((alpha > 0).sum()),
                seconds=time.perf_counter() - tl,
            )
        )
        if verbose:
            r = report[-1]
            print(
                f"[divide] level {level}: {r['parts']} parts (largest {max(r['sizes'], default=0)}), "
                f"{r['support_vectors']} SVs, {r['seconds']:.2f}s"
            )
        if early_stop == level:
            early = _early_model(problem, part, alpha, rho, groups, members, level, levels, branching, results)
            early["blend"] = (1, 0.0)
            if held is not None:
                tb = time.perf_counter()
                early["blend"], chosen = choose_blend(problem, alpha, early, held)
                chosen["seconds"] = time.perf_counter() - tb
                report[-1]["blend"] = chosen
                if verbose:
                    print(
                        f"[divide] blend: {chosen['parts']} nearest part(s), T {chosen['T']:.3g} (error on "
                        f"{chosen['held']} held-out rows {chosen['error']:.4f}, nearest part alone "
                        f"{chosen['error_nearest']:.4f}), {chosen['seconds']:.2f}s"
                    )
            break
    if early is not None:
        return early_solution(problem, alpha, early, report, t0)

    tg = time.perf_counter()
    problem = dataclasses.replace(problem, alpha0=alpha)  # the caller's problem stays as it was
    if backend == "dask":
        sol = scaleout.global_solve(
            problem,
            executor,
            tol=tol,
            max_iter=max_iter,
            shrinking=shrinking,
            cache_size=cache_size,
            part_solver=part_solver,
            time_limit=time_limit,
            verbose=verbose,
            parts=[(vars_, res[2]) for (_, vars_), res in zip(members, results)] if levels == 1 else None,
        )
        return _done(sol, report, tg, {}, verbose)
    from . import batched

    grad0 = None
    if levels == 1 and pick_solver(part_solver, problem.n_var) is batched:
        grad0 = whole_gradient(problem, alpha, members, results)  # the parts' gradients cover every variable
    return _whole(problem, part_solver, t0, report, {}, step, grad0=grad0, tg=tg)


def _across_rule_applies(problem, early_stop, backend):
    """Whether a partition no better than random (:data:`ACROSS_MAX`) is refused: exact fits only, on Dask below
    :data:`DASK_ACROSS_BELOW` variables only, and not for dense rows of at most :data:`ACROSS_FEATURES` features
    from :data:`ACROSS_ROWS` variables on."""
    if early_stop is not None or (backend == "dask" and problem.n_var >= DASK_ACROSS_BELOW):
        return False
    low_dense = not sp.issparse(problem.X) and problem.X.shape[1] <= ACROSS_FEATURES
    return not (low_dense and problem.n_var >= ACROSS_ROWS)


def _whole(problem, part_solver, t0, report, flags, step, grad0=None, tg=None):
    """The global step here (begun at ``tg``): the whole problem by the part solver with the options ``step``,
    from ``problem.alpha0`` (and the gradient ``grad0`` there, when known); its report entry (level 0) carries
    ``flags``."""
    tg = time.perf_counter() if tg is None else tg
    opts = _step_options(step, t0, tg)
    if grad0 is not None:
        opts["grad0"] = grad0
    return _done(_solve_whole(problem, part_solver, opts), report, tg, flags, step["verbose"])


def _step_options(step, t0, tg):
    """The global step's solver options from ``step`` at time ``tg`` (the fit began at ``t0``)."""
    opts = {k: v for k, v in step.items() if k not in ("callback", "callback_info", "time_limit")}
    if step["callback"] is not None:
        opts["callback"] = step["callback"]
        if step["callback_info"] is not None:
            opts["callback_info"] = step["callback_info"]
    if step["time_limit"] is not None:
        opts["time_limit"] = max(step["time_limit"] - (tg - t0), 1e-3)
    return opts


def _solve_whole(problem, part_solver, opts):
    """The whole problem by the part solver (here, or as a task on a Dask worker)."""
    return pick_solver(part_solver, problem.n_var).solve(problem, **opts)


def _done(sol, report, tg, flags, verbose):
    """``sol`` with the levels' report and the global step's entry in ``extra['divide']``."""
    report = report + [
        dict(
            level=0,
            parts=1,
            sizes=[int(sol.alpha.shape[0])],
            support_vectors=int((sol.alpha > 0).sum()),
            seconds=time.perf_counter() - tg,
            **flags,
        )
    ]
    if verbose:
        how = "direct solve (not divided)" if flags.get("direct") else "global solve"
        print(f"[divide] {how}: {report[-1]['support_vectors']} SVs, {report[-1]['seconds']:.2f}s")
    extra = dict(sol.extra)
    extra["divide"] = report
    sol.extra = extra
    return sol


def whole_gradient(problem, alpha, members, results):
    r""":math:`G = Q\alpha + p` of the whole problem at the union of the first-level parts' solutions,
    from each part's own gradient :math:`G_P = Q_{PP}\alpha_P + p_P` (returned by its solver) plus the
    other parts' support vectors, :math:`G_P \mathrel{+}= Q_{P\bar P}\alpha_{\bar P}`: the blocks on
    the diagonal are not computed again (1/n_parts of the kernel values of a pass over all rows)."""
    from ..kernels.engine import kernel_times

    G = np.empty(problem.n_var)
    sv = np.flatnonzero(alpha > 0)
    coef = alpha * problem.y
    X, idx = problem.X, problem.index
    for (_, vars_), res in zip(members, results):
        G[vars_] = res[2]
        others = np.setdiff1d(sv, vars_, assume_unique=True)
        if others.size and vars_.size:
            G[vars_] += problem.y[vars_] * kernel_times(
                problem.kernel, _rows(X, idx[vars_]), _rows(X, idx[others]), coef[others]
            )
    return G


# ----------------------------------------------------------------- early prediction
def _early_model(problem, part, alpha, rho, groups, members, level, levels, branching, results):
    """The level's per-part models and what routing needs (see :func:`early_solution`)."""
    n_groups = int(groups.max()) + 1 if groups.size else 0
    rho_g = np.zeros(n_groups)
    for g, r in rho.items():
        rho_g[g] = r
    # the gradient of each variable within its own part's model (G = Q_PP alpha_P + p_P)
    grad = problem.p + problem.shift * alpha
    for (g, vars_), res in zip(members, results):
        if level == levels and res[2] is not None and res[2].shape[0] == vars_.size:
            grad[vars_] = res[2]
        else:  # Cascade levels solved on the support vectors only: the rest from the kernel
            allv = np.flatnonzero(groups == g)
            sv = vars_[alpha[vars_] > 0]
            if sv.size:
                Xa = _rows(problem.X, problem.index[allv])
                Xs = _rows(problem.X, problem.index[sv])
                s = problem.kernel.mmv(Xa, Xs, alpha[sv] * problem.y[sv])
                grad[allv] = problem.y[allv] * s + problem.p[allv] + problem.shift[allv] * alpha[allv]
    cluster_group = group_of(np.arange(part.n_parts), level, levels, branching)
    return dict(
        rho=rho_g,
        grad=grad,
        var_group=groups,
        sample=part.sample,
        sample_labels=part.sample_labels,
        centre_sq=part.centre_sq,
        cluster_group=cluster_group,
        level=level,
        objective=float(sum(res[3] for res in results)),
    )


def early_solution(problem, alpha, early, report, t0):
    """A :class:`Solution` for the level-k model: ``alpha`` is the union of the parts'
    multipliers, ``grad`` each variable's gradient in its own part's model, ``rho`` the
    mean of the parts' offsets (the routed model keeps one per part in
    ``extra['early']``), ``objective`` the sum of the parts' objectives, ``status``
    ``'early_stop'`` (``converged`` says the parts converged; there is no global test)."""
    rho_mean = float(np.mean(early["rho"])) if early["rho"].size else 0.0
    grad = early.pop("grad")
    # train decision uses each part's own offset: shift the gradient so that
    # y (G - p - shift alpha) - rho_mean equals the part's decision value
    y = problem.y
    grad = grad - y * (early["rho"][early["var_group"]] - rho_mean)
    objective = early.pop("objective")  # the sum of the parts' objectives
    return Solution(
        alpha=alpha,
        rho=rho_mean,
        objective=objective,
        n_iter=0,
        violation=float("nan"),
        converged=True,
        grad=grad,
        status="early_stop",
        extra={"divide": report, "early": early, "elapsed": time.perf_counter() - t0},
    )


def route(K_xs, early):
    """The part (at the early level) of each row, from its kernel values with the sample."""
    cluster = nearest_centre(K_xs, early["sample_labels"], early["centre_sq"], early["centre_sq"].shape[0])
    return early["cluster_group"][cluster]


def group_distances(dist, cluster_group, n_groups):
    """(n, n_groups): each row's distance to each part of the early level, the least of its
    clusters' (:func:`centre_distances_from`; ``cluster_group`` maps a cluster to its part)."""
    D = np.full((dist.shape[0], n_groups), np.inf)
    for c in range(dist.shape[1]):
        g = cluster_group[c]
        np.minimum(D[:, g], dist[:, c], out=D[:, g])
    return D


def blend_weights(D, top, T, order=None):
    r"""The parts each row's value is blended from and their weights, from the distances
    ``D`` (n, parts) (:func:`group_distances`): the ``top`` nearest parts (nearest first),
    weighted :math:`\propto \exp(-(d_P - d_{\min}) / T)`; weights below
    :data:`BLEND_NEGLIGIBLE` dropped (set to 0) and the rest normalised to sum 1.
    ``top == 1`` or ``T <= 0``: the nearest part alone.  ``order``, where given, is ``D``'s
    rows' parts by distance (at least ``top`` columns).  Returns ``(parts, weights)``, both
    (n, t) with ``t = min(top, parts)``."""
    top = int(min(top, D.shape[1]))
    if top <= 1 or T <= 0:
        return np.argmin(D, axis=1)[:, None].astype(np.int64), np.ones((D.shape[0], 1))
    if order is not None:
        parts = np.asarray(order[:, :top], dtype=np.int64)
    elif top < D.shape[1]:  # the top nearest, then sorted: not a sort of every part (64 parts: 8 ms of 10,000 rows)
        parts = np.argpartition(D, top - 1, axis=1)[:, :top]
        parts = np.take_along_axis(parts, np.argsort(np.take_along_axis(D, parts, axis=1), axis=1), axis=1)
    else:
        parts = np.argsort(D, axis=1, kind="stable")
    parts = parts.astype(np.int64, copy=False)
    d = np.take_along_axis(D, parts, axis=1)
    with np.errstate(invalid="ignore"):
        w = np.exp(-(d - d[:, :1]) / T)
    w[~np.isfinite(d)] = 0.0  # an empty part
    w /= w.sum(axis=1, keepdims=True)
    w[w < BLEND_NEGLIGIBLE] = 0.0
    w /= w.sum(axis=1, keepdims=True)
    return parts, w


def choose_blend(problem, alpha, early, held):
    """The early model's blend (``early_blend='auto'``): the held-out variables ``held`` (no
    part saw them) are predicted by the nearest part alone and by every blend of
    :data:`BLEND_TOPS` x :data:`BLEND_SCALES` (:func:`blend_weights`); the blend with the
    fewest errors (weighted by the variables' bounds :math:`U_i`, so class and sample weights
    count) is taken where it beats the nearest part by more than the noise of the
    comparison (a weighted McNemar test at one standard deviation: the gain over the
    rows where the two disagree against the square root of their weights' squares),
    otherwise the nearest part alone.  Returns ``((top, T), report)``."""
    from ..kernels.engine import kernel_times

    X, idx, kernel = problem.X, problem.index, problem.kernel
    Xh = _rows(X, idx[held])
    yh = problem.y[held]
    wh = problem.upper[held] / max(float(np.mean(problem.upper[held])), 1e-300)
    n_groups = early["rho"].shape[0]
    dist = assign(
        Xh, kernel, early["sample"], early["sample_labels"], early["centre_sq"], early["centre_sq"].shape[0], True
    )
    D = group_distances(dist, early["cluster_group"], n_groups)
    order = np.argsort(D, axis=1, kind="stable")[:, : min(max(BLEND_TOPS), n_groups)]
    # each held-out row's value in each of its nearest parts' models: f_P(x) = sum_P alpha_i y_i K(x_i, x) - rho_P
    F = np.zeros(order.shape)
    coef = alpha * problem.y
    for g in range(n_groups):
        r, c = np.nonzero(order == g)
        if r.size == 0:
            continue
        sv = np.flatnonzero((early["var_group"] == g) & (alpha > 0))
        F[r, c] = -early["rho"][g]
        if sv.size:
            F[r, c] += kernel_times(kernel, Xh[r] if r.size < Xh.shape[0] else Xh, _rows(X, idx[sv]), coef[sv])

    def errors(top, T):
        _, w = blend_weights(D, top, T, order)  # its parts: order's first columns
        f = np.sum(F[:, : w.shape[1]] * w, axis=1)
        return np.where(f > 0, 1.0, -1.0) != yh

    near = errors(1, 0.0)
    gaps = np.take_along_axis(D, order[:, :2], axis=1) if n_groups > 1 else None  # the two nearest, in order
    med = float(np.median(gaps[:, 1] - gaps[:, 0])) if gaps is not None else 0.0
    best, best_gain = (1, 0.0), 0.0
    if n_groups > 1 and np.isfinite(med) and med > 0:
        for top in BLEND_TOPS:
            if top > n_groups:
                continue
            for scale in BLEND_SCALES:
                err = errors(top, scale * med)
                diff = near.astype(np.float64) - err
                gain = float(wh @ diff)
                noise = float(np.sqrt((wh**2) @ np.abs(diff)))
                if gain > noise and gain > best_gain:
                    best, best_gain = (top, scale * med), gain
    chosen = errors(*best) if best[0] > 1 else near
    report = dict(
        parts=int(best[0]),
        T=float(best[1]),
        held=int(held.size),
        error=float(wh @ chosen / wh.sum()),
        error_nearest=float(wh @ near / wh.sum()),
    )
    return best, report
