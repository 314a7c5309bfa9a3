r"""Crammer-Singer multi-class SVM by dual coordinate descent (LIBLINEAR's solver 4; Keerthi, Sundararajan,
Chang, Hsieh and Lin, KDD 2008).

Primal, classes :math:`m = 1..k`, per-sample :math:`C_i`, with :math:`e_i^m = 0` for :math:`m = y_i` and 1
otherwise:

.. math:: \min_{w_1..w_k}\ \tfrac12\sum_m w_m\cdot w_m + \sum_i C_i \max_m\big(e_i^m + w_m\cdot x_i - w_{y_i}\cdot x_i\big).

Dual: :math:`\min_\alpha \tfrac12\sum_m \|w_m\|^2 + \sum_{i,m} e_i^m\alpha_i^m` with
:math:`w_m = \sum_i \alpha_i^m x_i`, subject to :math:`\sum_m \alpha_i^m = 0` and :math:`\alpha_i^m \le C_i^m`
(:math:`C_i^{y_i} = C_i`, else 0).  One step solves the sub-problem of one sample exactly: with
:math:`A = \|x_i\|^2`, :math:`G_m = w_m\cdot x_i + e_i^m` and :math:`B_m = G_m - A\alpha_i^m`, the minimiser of
:math:`\tfrac12 A\|\alpha_i\|^2 + B\cdot\alpha_i` on the constraints is

.. math:: \alpha_i^m = \min\big(C_i^m,\ (\beta - B_m)/A\big),

with :math:`\beta` the root of :math:`\sum_m \min(D_m, \beta) = \sum_m B_m`, :math:`D_m = B_m + A C_i^m`: order
:math:`D` decreasingly (as far as needed) and take :math:`\beta = (\sum_{m<r} D_m - A C_i)/r` for the first
:math:`r` with :math:`\beta \ge D_r`.  Samples are visited in a random order each epoch; the optimality violation
of sample :math:`i` is :math:`\max_m G_m - \min_{m:\ \alpha_i^m < C_i^m} G_m`.

Classes and samples are shrunk as LIBLINEAR shrinks them (:func:`_epochs`), and the solver stops, as LIBLINEAR's,
after an epoch that started with every sample and class in play and whose largest violation is below ``tol``.
(Until session 28 every epoch visited every sample and class, and the solver stopped at the first epoch whose
largest violation was at most ``tol``: at the same ``tol`` it stopped elsewhere than LIBLINEAR, and on letter26 --
26 classes, 15,000 rows -- it ran into ``max_iter`` = 1,000 at an objective 26% above LIBLINEAR's, where
LIBLINEAR converges after ~31,000 epochs.  Shrunk: 1,000 epochs in 0.46x the time, 22% above; 200 classes on
sparse rows 0.66x the time at a lower objective.)

On CSR rows the epochs (:func:`_epochs_rec`) read each sample's scalars, multipliers and list of classes from one
record (:func:`records`) instead of eight per-sample arrays, each a cache miss of its own in the random visiting
order: the same iterates, bit for bit; session 64 (Intel host, whole fits, records / arrays): 300,000 rows of 2.3
binary features in 8 classes 0.31x the time (19.8 -> 6.1 s), 40 classes 0.82, 15 imbalanced classes 0.69, 20-class
text 0.77; 100-200 classes 0.97-0.98, 1,000 classes 0.94.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange, uint64

from .. import _pages
from .._jit import parallel_and_serial, with_constants
from ._linear_common import (
    _dense_row_axpy,
    _dense_row_dot,
    _prefetch,
    aligned_floats,
    column_counts,
    drive,
    epoch_stages,
    l2_cache_bytes,
    prefetch_entries,
    prefetch_plan,
    prefetch_row,
    prefetch_staged,
    rand_below,
    rng_state,
    sqnorms,
    used_columns,
)

INF = np.inf
#: from this many classes on, a sample's sub-problem orders its values ``D`` by moving the largest of the rest to
#: the front one at a time, as far as the root needs (O(k r), r the classes it ends with), not by a whole
#: insertion sort (O(k^2) in a random order): 200 classes 0.69x the epoch time; 26 classes (letter26, where r is
#: often large) 1.08x slower, so fewer classes keep the sort
SELECT_MIN_CLASSES = 64
#: a CSR row's update adds the changes of every class (zeros for the unchanged) in vector lanes, one pass of
#: ``k`` weights a feature, where at least ``k / DENSE_CHANGES`` classes changed; fewer change one weight at a time.
#: Session 52, the changed classes one weight at a time against all of them in lanes (news20m's 125 values a row,
#: 20 classes, a random order): 2 changed 7.8 / 10.5 ms an epoch's updates, 5 11.5 / 10.3, 10 17.0 / 10.7, 20 26.0 /
#: 10.6; whole fits (the same iterates) news20m 0.86x the time, text100, classes200 and 60,000 rows of 100 classes
#: 0.97-1.02 (2 and 8 here the same)
DENSE_CHANGES = 4
#: on CSR rows with at least WEIGHTS_AHEAD_BYTES of weights, an epoch asks for the weights of the sample
#: WEIGHTS_AHEAD positions on (its classes in play, where the scores gather them: fewer than a quarter of the
#: classes), one line a (feature, class).  Session 72, whole fits with and without (identical iterates, alternating,
#: medians of 9): multi40 (40 classes, 18 MB of weights) 0.86-0.90, news20m (20, 20 MB) 0.92-0.96, classes100s (100,
#: 7.6 MB) 0.90-0.95, classes1k (1,000, 153 MB) 0.94, text100 (100, 38 MB; its rows keep 25+ classes in play, so
#: few rows gather) 0.98; generated 40-class rows of 60 Zipf words over 3,000-200,000 words (`/tmp/s72/wsweep.py`):
#: 0.9 MB 1.05, 3.7 MB 1.04 (slower: their hot rows stay in the core's 1 MB L2), 7.6 MB 0.99, 15 MB 0.97, 31 MB
#: 0.96, 61 MB 0.92.  Two positions on: level or worse (multi40 0.96, news20m 1.00)
WEIGHTS_AHEAD = 1
WEIGHTS_AHEAD_BYTES = 6 << 20
#: the two prefetches of the weights (flags of ``weights_ahead`` in :func:`_epochs_rec`): of the classes in play,
#: where they are fewer than a quarter of the classes (on WEIGHTS_AHEAD_BYTES of weights and more, see above) ...
AHEAD_FEW = 1
#: ... and of every class, each feature's row of ``k`` weights (a line in every 8 and the last), where they are more
#: and the scores read the rows whole -- on CSR data beyond the core's cache (``prefetch_plan``'s stages > 0),
#: whatever the weights' size, given AHEAD_ALL_COLD.  Session 77, whole fits with and without (identical iterates,
#: alternating in one process, medians of 5-11, `/tmp/s77/toggle_cs.py`): tfidf30 (30 classes, 96 values a row, 23
#: MB of weights) 0.59-0.72, long60 (60, 259 a row, 92 MB) 0.71, text10 at C = 10 (10 classes, 4.6 MB) 0.70-0.94,
#: rawcs (10, 3.8 MB) 0.78-0.87, news20m 0.78-0.97, multi40 0.85, tags120 (3.2 MB) 0.90, tags8 (1.8 MB) 0.90-0.95,
#: cs30 0.88-0.93, tags100 0.94, text100 0.77-1.00, many300, shortcs 0.97-0.98, classes200 and classes100s 1.00;
#: imb15 (15 classes, 2.3 MB) 1.02-1.18, the one loss (AHEAD_ALL_COLD).  The few classes' prefetch on the smaller
#: weights as well stays a loss beside it (rawcs 1.18, imb15 1.21, tags120 1.13, text10 1.07)
AHEAD_ALL = 2
#: ... where at least this share of the stored values lie in columns beyond the hottest ones whose weights fill the
#: core's L2 (:func:`cold_share`): imb15 (15 classes, 45 values a row, 0.06 of them cold) took 1.18x the time with
#: the prefetch (session 77, medians of 9) and is level without it; every other set above has at least 0.09
#: (tags120) and gained, save tags8 (0.01, 2.3 values a row: 0.90-0.95 with it, now without)
AHEAD_ALL_COLD = 0.08


def cold_share(ld, k):
    """The share of CSR data ``ld``'s stored values that lie outside its most used columns, as many as the core's L2
    holds rows of ``k`` weights of (0 where every column fits).  One pass over the column numbers, shared with the
    other users of :func:`~._linear_common.column_counts`."""
    counts = column_counts(ld)
    hot = max(l2_cache_bytes() // (8 * max(int(k), 1)), 1)
    if hot >= counts.shape[0]:
        return 0.0
    total = float(counts.sum())
    top = float(np.partition(counts, counts.shape[0] - hot)[counts.shape[0] - hot :].sum())
    return 1.0 - top / total if total > 0 else 0.0


@njit(cache=True, nogil=True, inline="always")
def _scores(i, Wt, Xd, data, indices, indptr, dense, nf, bias, out):
    """``out[m] = w_m . x_i`` for every class from the feature-major weights ``Wt`` (n_weights, k): one pass over
    the row, reading each feature's k weights side by side.  (Class-major weights made every (feature, class)
    pair a cache miss of its own once the weights outgrew the cache: text100's 100 x 50,001 weights, 40 MB, took
    0.67 s an epoch.)

    A CSR row's values are added two at a time, ``out[m] += v0 W0[m] + v1 W1[m]``: one load and store of each
    ``out[m]`` a pair, where the value-at-a-time loop's chain of loads and stores through ``out`` set the pace once
    the weights' rows were asked for ahead (:data:`AHEAD_ALL`).  Session 77, whole Crammer-Singer fits (the same
    epochs, objectives equal to 2e-14; `/tmp/s77/toggle_cs.py`): text10 at C = 10 0.91, tfidf30 0.90, rawcs 0.94,
    news20m 0.95, cs30 1.00; the scores alone over every row (`/tmp/s77/scoremicro.py`) 0.76-0.91, four at a time
    0.82-0.97."""
    k = out.shape[0]
    for m in range(k):
        out[m] = 0.0
    if dense:
        for f in range(nf):
            v = Xd[i, f]
            Wf = Wt[f]
            for m in range(k):
                out[m] += v * Wf[m]
    else:
        _add_row_scores(data, indices, uint64(indptr[i]), uint64(indptr[i + 1]), Wt, out)
    if bias > 0:
        Wf = Wt[nf]
        for m in range(k):
            out[m] += bias * Wf[m]


@njit(cache=True, nogil=True, inline="always")
def _add_row_scores(data, indices, lo, hi, Wt, out):
    """``out[m] += sum_p data[p] Wt[indices[p], m]`` over the CSR entries ``lo:hi`` (unsigned), two values at a time
    (see :func:`_scores`)."""
    k = out.shape[0]
    p = lo
    while p + uint64(1) < hi:
        v0 = data[p]
        W0 = Wt[indices[p]]
        v1 = data[p + uint64(1)]
        W1 = Wt[indices[p + uint64(1)]]
        for m in range(k):
            out[m] += v0 * W0[m] + v1 * W1[m]
        p += uint64(2)
    if p < hi:
        v = data[p]
        Wf = Wt[indices[p]]
        for m in range(k):
            out[m] += v * Wf[m]


@njit(cache=True, nogil=True, inline="always")
def _scores_of(i, Wt, cls, na, S, Xd, data, indices, indptr, dense, nf, bias, G):
    """``G[q] = w_m . x_i`` for the classes ``m = cls[q]``, ``q < na``: where at least a quarter of the classes are
    in the list, every class's score by :func:`_scores` (contiguous weights, into ``S``) and then those; else only
    the listed classes' weights, gathered."""
    k = Wt.shape[1]
    if 4 * na >= k:
        _scores(i, Wt, Xd, data, indices, indptr, dense, nf, bias, S)
        for q in range(na):
            G[q] = S[cls[q]]
        return
    for q in range(na):
        G[q] = 0.0
    if dense:
        for f in range(nf):
            v = Xd[i, f]
            Wf = Wt[f]
            for q in range(na):
                G[q] += v * Wf[cls[q]]
    else:
        for p in range(uint64(indptr[i]), uint64(indptr[i + 1])):
            v = data[p]
            Wf = Wt[indices[p]]
            for q in range(na):
                G[q] += v * Wf[cls[q]]
    if bias > 0:
        Wf = Wt[nf]
        for q in range(na):
            G[q] += bias * Wf[cls[q]]


@njit(cache=True, nogil=True, inline="always")
def _class_scores(i, Wc, cls, na, Xd, nf, bias, G):
    """``G[q] = w_m . x_i`` for the classes ``m = cls[q]``, ``q < na``, of a dense row from class-major weights
    ``Wc`` (k, n_weights): one vector-lane product a class (:func:`~._linear_common._dense_row_dot`)."""
    x = Xd[i]
    for q in range(na):
        m = cls[q]
        g = _dense_row_dot(x, Wc[m], nf)
        if bias > 0:
            g += bias * Wc[m, nf]
        G[q] = g


@njit(cache=True, nogil=True, inline="always")
def _largest_to(D, r, k):
    """Swap the largest of ``D[r:k]`` into ``D[r]`` (the first of equals)."""
    best = r
    for a in range(r + 1, k):
        if D[a] > D[best]:
            best = a
    x = D[best]
    D[best] = D[r]
    D[r] = x


@njit(cache=True, nogil=True, inline="always")
def _add_changes(Wf, v, changed, dm, nch):
    """Feature ``f``'s weights ``Wf`` += v * (the changes ``dm`` of the classes ``changed``)."""
    for c in range(nch):
        Wf[changed[c]] += dm[c] * v


@njit(cache=True, nogil=True, inline="always")
def _shrinkable(alpha, i, cls, q, yp, Ci, G, gmin):
    """Whether the class at position ``q`` of sample ``i``'s active list sits at its bound (``C_i`` for the own
    class, 0 for the others) with a score below the smallest of the classes that can still move."""
    bound = Ci if q == yp else 0.0
    return alpha[i, cls[q]] == bound and G[q] < gmin


def _epochs(
    Xd,
    data,
    indices,
    indptr,
    dense,
    nf,
    bias,
    y,
    C,
    A,
    alpha,
    Wt,
    index,
    act_cls,
    n_cls,
    y_pos,
    istate,
    fstate,
    rng,
    tol,
    n_epochs,
    ahead,
    stages,
    entries,
):
    """Wt: (n_weights, k) weights, a feature's k weights side by side; alpha: (n, k).  Dense rows (class-major
    ``Wt``, :data:`CLASS_MAJOR`) and more than :data:`REC_MAX_CLASSES` classes; CSR rows take :func:`_epochs_rec`.

    Shrinking as LIBLINEAR's: sample ``i`` works on the classes ``act_cls[i, :n_cls[i]]`` (``y_pos[i]``: the position
    of its own class in that list, ``>= n_cls[i]`` when shrunk); a class at its bound whose score is below the
    smallest of the movable ones leaves the list, a sample left with one class leaves the visiting order
    (``index[:active]``).  When an epoch's largest violation falls below ``eps_shrink`` everything comes back and
    ``eps_shrink`` halves (down to ``tol``); the solver stops after an epoch that started with everything back
    and ended with a violation below ``tol``.  istate = [iteration, active, started from all];
    fstate = [violation, eps_shrink].  0 when converged."""
    n = y.shape[0]
    k = Wt.shape[0] if CLASS_MAJOR else Wt.shape[1]
    G = np.empty(k)
    dm = np.empty(k)
    changed = np.empty(k, dtype=np.int64)
    B = np.empty(k)
    D = np.empty(k)
    new = np.empty(k)
    S = np.empty(k)
    dvec = np.zeros(k)
    active = istate[1]
    from_all = istate[2] != 0
    eps_shrink = fstate[1]
    for _ in range(n_epochs):
        for s in range(active):
            j = s + rand_below(rng, active - s)
            t = index[s]
            index[s] = index[j]
            index[j] = t
        stopping = -INF
        keep = 0
        s = 0
        pf = epoch_stages(stages, dense, active, Xd)
        while s < active:
            i = index[s]
            if pf == 1:
                if s + 2 < active:
                    prefetch_row(index[s + 2], Xd, data, indices, indptr, dense)
                    prefetch_entries(index, s, 2, active, A, C, y, n_cls, y_pos)
            elif pf > 1:  # (0: data small enough to stay in the core's cache, no prefetch)
                prefetch_staged(index, s, active, ahead, stages, Xd, data, indices, indptr, dense, False, A)
                prefetch_entries(index, s, entries, active, A, C, y, n_cls, y_pos)
            if s + 2 < active:  # the sample two ahead: its multipliers (up to 8 lines) and its list of classes
                q = index[s + 2]
                for j in range(0, min(k, 64), 8):
                    _prefetch(alpha[q], j)
                _prefetch(act_cls[q], 0)
            Ai = A[i]
            if Ai <= 0.0:
                index[s] = index[keep]
                index[keep] = i
                keep += 1
                s += 1
                continue
            yi = y[i]
            Ci = C[i]
            cls = act_cls[i]
            na = n_cls[i]
            yp = y_pos[i]
            if CLASS_MAJOR:
                _class_scores(i, Wt, cls, na, Xd, nf, bias, G)
            else:
                _scores_of(i, Wt, cls, na, S, Xd, data, indices, indptr, dense, nf, bias, G)
            for q in range(na):
                G[q] += 1.0
            if yp < na:
                G[yp] -= 1.0
            gmax = -INF
            gmin = INF
            for q in range(na):
                if alpha[i, cls[q]] < 0.0 and G[q] < gmin:
                    gmin = G[q]
                gmax = max(gmax, G[q])
            if yp < na and alpha[i, yi] < Ci and G[yp] < gmin:
                gmin = G[yp]
            q = 0
            while q < na:
                if _shrinkable(alpha, i, cls, q, yp, Ci, G, gmin):
                    na -= 1
                    while na > q:
                        if not _shrinkable(alpha, i, cls, na, yp, Ci, G, gmin):
                            c = cls[q]
                            cls[q] = cls[na]
                            cls[na] = c
                            g = G[q]
                            G[q] = G[na]
                            G[na] = g
                            if yp == na:
                                yp = q
                            elif yp == q:
                                yp = na
                            break
                        na -= 1
                q += 1
            n_cls[i] = na
            y_pos[i] = yp
            if na <= 1:  # dropped: stays behind the kept samples
                s += 1
                continue
            index[s] = index[keep]  # kept: to the front (see _linear_common.KEEP_THRESHOLDS)
            index[keep] = i
            keep += 1
            v = gmax - gmin
            if v <= 1e-12:
                s += 1
                continue
            stopping = max(stopping, v)
            for q in range(na):
                B[q] = G[q] - Ai * alpha[i, cls[q]]
                D[q] = B[q]
            if yp < na:
                D[yp] += Ai * Ci
            if na < SELECT_MIN_CLASSES:  # sort D decreasingly (insertion sort)
                for a in range(1, na):
                    x = D[a]
                    b = a - 1
                    while b >= 0 and D[b] < x:
                        D[b + 1] = D[b]
                        b -= 1
                    D[b + 1] = x
            else:  # D in decreasing order only as far as the root needs it (see SELECT_MIN_CLASSES)
                _largest_to(D, 0, na)
            beta = D[0] - Ai * Ci
            r = 1
            while r < na:
                if na >= SELECT_MIN_CLASSES:
                    _largest_to(D, r, na)
                if beta >= r * D[r]:
                    break
                beta += D[r]
                r += 1
            beta /= r
            for q in range(na):
                cap = Ci if q == yp else 0.0
                new[q] = min((beta - B[q]) / Ai, cap)
            nch = 0
            for q in range(na):
                m = cls[q]
                d = new[q] - alpha[i, m]
                # a change below 1e-12 is skipped (the weights' pass costs more than it gives) unless it lands the
                # multiplier on its bound: a value left a rounding error off the bound counts as movable in the
                # violation above, which it then keeps each epoch, so the active set's violation never met
                # eps_shrink (see SNAP_TO_BOUND)
                if abs(d) >= 1e-12 or (SNAP_TO_BOUND and d != 0.0 and new[q] == (Ci if q == yp else 0.0)):
                    alpha[i, m] = new[q]
                    changed[nch] = m
                    dm[nch] = d
                    nch += 1
            if nch > 0 and CLASS_MAJOR:
                for c in range(nch):
                    _dense_row_axpy(Xd[i], Wt[changed[c]], nf, dm[c])
                    if bias > 0:
                        Wt[changed[c], nf] += dm[c] * bias
            elif nch > 0:
                if dense:
                    for f in range(nf):
                        _add_changes(Wt[f], Xd[i, f], changed, dm, nch)
                elif DENSE_CHANGES * nch >= k:  # every class's weights, the unchanged ones' change 0: vector lanes
                    for c in range(nch):
                        dvec[changed[c]] = dm[c]
                    for p in range(uint64(indptr[i]), uint64(indptr[i + 1])):
                        v = data[p]
                        Wf = Wt[indices[p]]
                        for m in range(k):
                            Wf[m] += dvec[m] * v
                    for c in range(nch):
                        dvec[changed[c]] = 0.0
                else:
                    for p in range(uint64(indptr[i]), uint64(indptr[i + 1])):
                        _add_changes(Wt[indices[p]], data[p], changed, dm, nch)
                if bias > 0:
                    _add_changes(Wt[nf], bias, changed, dm, nch)
            s += 1
        active = keep
        istate[0] += 1
        fstate[0] = max(stopping, 0.0)
        if stopping < eps_shrink:
            if stopping < tol and from_all:
                istate[1] = active
                istate[2] = 1
                fstate[1] = eps_shrink
                return 0
            active = n
            for i in range(n):
                n_cls[i] = k
            eps_shrink = max(eps_shrink / 2.0, tol)
            from_all = True
        else:
            from_all = False
    istate[1] = active
    istate[2] = 1 if from_all else 0
    fstate[1] = eps_shrink
    return 1


#: the record of a sample (:func:`records`), in float64 slots: its squared norm, C_i, its row's first and end
#: positions, four int16 (its class, the classes in play, its own class's position among them, 0), its k
#: multipliers, then its list of classes (int16, four a slot), the whole padded to 64 bytes
REC_A = 0
REC_C = 1
REC_LO = 2
REC_HI = 3
REC_INTS = 4
REC_ALPHA = 5
#: classes whose numbers fit the records' int16 list; more take the per-sample arrays of :func:`_epochs`
REC_MAX_CLASSES = 32767


def record_width(k):
    """The float64 slots of a record for ``k`` classes: a multiple of 8 (64 bytes)."""
    return -(-(REC_ALPHA + k + (k + 3) // 4) // 8) * 8


def records(n, k):
    """``(R, alpha)``: zeroed records of ``n`` samples for ``k`` classes, ``R`` flat and 64-byte aligned, ``alpha``
    the (n, k) view of their multipliers."""
    W = record_width(k)
    R = aligned_floats(n * W, zeroed=True)
    return R, R.reshape(n, W)[:, REC_ALPHA : REC_ALPHA + k]


@njit(cache=True, nogil=True)
def _fill_records(R, R16, W, k, A, C, indptr, y):
    """Each sample's scalars into its record, every class in play (in order); its multipliers are there already."""
    for i in range(y.shape[0]):
        r = W * i
        R[r + REC_A] = A[i]
        R[r + REC_C] = C[i]
        R[r + REC_LO] = indptr[i]
        R[r + REC_HI] = indptr[i + 1]
        h = 4 * (r + REC_INTS)
        R16[h] = y[i]
        R16[h + 1] = k
        R16[h + 2] = y[i]
        c = 4 * (r + REC_ALPHA + k)
        for q in range(k):
            R16[c + q] = q


def _epochs_rec(
    data, indices, nf, bias, R, R16, W, Wt, index, istate, fstate, rng, tol, n_epochs, ahead, stages, weights_ahead
):
    """:func:`_epochs` on CSR rows with each sample's scalars, multipliers and list of classes in one record of
    ``R`` (:func:`records`; ``R16`` its int16 view, ``W`` its width): the same iterates, bit for bit.

    In the random visiting order every per-sample array of :func:`_epochs` is a cache line (and a page) of its own:
    the squared norm, C_i, the label, the count of classes in play, the own class's position, ``indptr``, the
    multipliers and the list of classes -- eight before the row's values.  The record is two adjacent lines for 8
    classes, seven for 40.  It is asked for 4 positions ahead and the row 2 ahead (read from the record), or with the
    staged scheme ``stages * ahead`` and ``(stages - 1) * ahead`` positions ahead; nothing where ``stages`` is 0
    (data that stay in the core's cache).  ``weights_ahead`` (flags :data:`AHEAD_FEW`, :data:`AHEAD_ALL`; 0: none)
    asks for the weights of the sample :data:`WEIGHTS_AHEAD` positions on, where its scores will read them.

    Where few classes are in play, the scores' gather, the weights' prefetch and the update run class by class over
    the row (the row's values stay in the core's first cache): each score is summed in a register, where a pass over
    the row summing into every class's slot loaded and stored the slot once a value.  The same sums in the same order,
    so the same iterates; session 74, whole fits against session 73's loop (alternating, medians of 9): cs30 (30
    classes of ~40 words) 0.93, tags120 0.94, multi40 0.97, classes100s 0.99.

    The sub-problem and the weights' update are written out as in :func:`_epochs` rather than shared through inline
    helpers: with the update in a helper (``inline="always"``) this loop ran 1.6x slower on 300,000 rows of 2.3
    values in 8 classes (session 64, one process alternating, identical iterates)."""
    n = index.shape[0]
    k = Wt.shape[1]
    G = np.empty(k)
    dm = np.empty(k)
    changed = np.empty(k, dtype=np.int64)
    B = np.empty(k)
    D = np.empty(k)
    new = np.empty(k)
    S = np.empty(k)
    dvec = np.zeros(k)
    lines = min((W + 7) // 8, 8)  # the record's first lines (header and multipliers; at most 8) ...
    list_apart = REC_ALPHA + k >= 8 * lines  # ... and the class list's first line where those leave it out
    rec_ahead = stages * ahead if stages > 1 else 4
    row_ahead = (stages - 1) * ahead if stages > 1 else 2
    active = istate[1]
    from_all = istate[2] != 0
    eps_shrink = fstate[1]
    for _ in range(n_epochs):
        for s in range(active):
            j = s + rand_below(rng, active - s)
            t = index[s]
            index[s] = index[j]
            index[j] = t
        stopping = -INF
        keep = 0
        s = 0
        while s < active:
            i = index[s]
            if stages > 0:
                if s + rec_ahead < active:
                    r = W * index[s + rec_ahead]
                    for line in range(lines):
                        _prefetch(R, r + 8 * line)
                    if list_apart:
                        _prefetch(R16, 4 * (r + REC_ALPHA + k))
                if s + row_ahead < active:
                    r = W * index[s + row_ahead]
                    lo2 = int(R[uint64(r + REC_LO)])
                    _prefetch(data, lo2)
                    _prefetch(indices, lo2)
            if weights_ahead != 0 and s + WEIGHTS_AHEAD < active:
                # the weights of the sample WEIGHTS_AHEAD on, where its scores will read them: of its classes in play
                # where they are few (AHEAD_FEW), else every class's (AHEAD_ALL); its record and row were asked
                # for earlier
                r = W * index[s + WEIGHTS_AHEAD]
                na = int(R16[uint64(4 * (r + REC_INTS) + 1)])
                if 1 < na and 4 * na < k and weights_ahead & AHEAD_FEW:
                    c0 = 4 * (r + REC_ALPHA + k)
                    lo2 = uint64(R[uint64(r + REC_LO)])
                    hi2 = uint64(R[uint64(r + REC_HI)])
                    for q in range(na):
                        m = R16[uint64(c0 + q)]
                        for p in range(lo2, hi2):
                            _prefetch(Wt[indices[p]], m)
                elif weights_ahead & AHEAD_ALL and 4 * na >= k:
                    lo2 = uint64(R[uint64(r + REC_LO)])
                    hi2 = uint64(R[uint64(r + REC_HI)])
                    for p in range(lo2, hi2):
                        Wf = Wt[indices[p]]
                        for m in range(0, k, 8):
                            _prefetch(Wf, m)
                        _prefetch(Wf, k - 1)
            r = W * i
            a0 = r + REC_ALPHA  # the multipliers' slot; the class list's int16s from c0, the ints' from h
            c0 = 4 * (a0 + k)
            h = 4 * (r + REC_INTS)
            Ai = R[uint64(r + REC_A)]
            if Ai <= 0.0:
                index[s] = index[keep]
                index[keep] = i
                keep += 1
                s += 1
                continue
            lo = uint64(R[uint64(r + REC_LO)])
            hi = uint64(R[uint64(r + REC_HI)])
            yi = int(R16[uint64(h)])
            Ci = R[uint64(r + REC_C)]
            na = int(R16[uint64(h + 1)])
            yp = int(R16[uint64(h + 2)])
            # the scores of the classes in play (as _scores_of)
            if 4 * na >= k:
                for m in range(k):
                    S[m] = 0.0
                _add_row_scores(data, indices, lo, hi, Wt, S)
                if bias > 0:
                    Wf = Wt[nf]
                    for m in range(k):
                        S[m] += bias * Wf[m]
                for q in range(na):
                    G[q] = S[R16[uint64(c0 + q)]]
            else:
                for q in range(na):
                    m = R16[uint64(c0 + q)]
                    g = 0.0
                    for p in range(lo, hi):
                        g += data[p] * Wt[indices[p], m]
                    if bias > 0:
                        g += bias * Wt[nf, m]
                    G[q] = g
            for q in range(na):
                G[q] += 1.0
            if yp < na:
                G[yp] -= 1.0
            gmax = -INF
            gmin = INF
            for q in range(na):
                if R[uint64(a0 + R16[uint64(c0 + q)])] < 0.0 and G[q] < gmin:
                    gmin = G[q]
                gmax = max(gmax, G[q])
            if yp < na and R[uint64(a0 + yi)] < Ci and G[yp] < gmin:
                gmin = G[yp]
            q = 0
            while q < na:
                if _rec_shrinkable(R, R16, a0, c0, q, yp, Ci, G, gmin):
                    na -= 1
                    while na > q:
                        if not _rec_shrinkable(R, R16, a0, c0, na, yp, Ci, G, gmin):
                            c = R16[uint64(c0 + q)]
                            R16[uint64(c0 + q)] = R16[uint64(c0 + na)]
                            R16[uint64(c0 + na)] = c
                            g = G[q]
                            G[q] = G[na]
                            G[na] = g
                            if yp == na:
                                yp = q
                            elif yp == q:
                                yp = na
                            break
                        na -= 1
                q += 1
            R16[uint64(h + 1)] = na
            R16[uint64(h + 2)] = yp
            if na <= 1:  # dropped: stays behind the kept samples
                s += 1
                continue
            index[s] = index[keep]  # kept: to the front (see _linear_common.KEEP_THRESHOLDS)
            index[keep] = i
            keep += 1
            v = gmax - gmin
            if v <= 1e-12:
                s += 1
                continue
            stopping = max(stopping, v)
            for q in range(na):
                B[q] = G[q] - Ai * R[uint64(a0 + R16[uint64(c0 + q)])]
                D[q] = B[q]
            if yp < na:
                D[yp] += Ai * Ci
            if na < SELECT_MIN_CLASSES:  # sort D decreasingly (insertion sort)
                for a in range(1, na):
                    x = D[a]
                    b = a - 1
                    while b >= 0 and D[b] < x:
                        D[b + 1] = D[b]
                        b -= 1
                    D[b + 1] = x
            else:  # D in decreasing order only as far as the root needs it (see SELECT_MIN_CLASSES)
                _largest_to(D, 0, na)
            beta = D[0] - Ai * Ci
            rr = 1
            while rr < na:
                if na >= SELECT_MIN_CLASSES:
                    _largest_to(D, rr, na)
                if beta >= rr * D[rr]:
                    break
                beta += D[rr]
                rr += 1
            beta /= rr
            for q in range(na):
                cap = Ci if q == yp else 0.0
                new[q] = min((beta - B[q]) / Ai, cap)
            nch = 0
            for q in range(na):
                m = R16[uint64(c0 + q)]
                d = new[q] - R[uint64(a0 + m)]
                if abs(d) >= 1e-12 or (SNAP_TO_BOUND and d != 0.0 and new[q] == (Ci if q == yp else 0.0)):
                    R[uint64(a0 + m)] = new[q]
                    changed[nch] = m
                    dm[nch] = d
                    nch += 1
            if nch > 0:
                if DENSE_CHANGES * nch >= k:  # every class's weights, the unchanged ones' change 0: vector lanes
                    for c in range(nch):
                        dvec[changed[c]] = dm[c]
                    for p in range(lo, hi):
                        v = data[p]
                        Wf = Wt[indices[p]]
                        for m in range(k):
                            Wf[m] += dvec[m] * v
                    for c in range(nch):
                        dvec[changed[c]] = 0.0
                else:
                    for c in range(nch):
                        m = changed[c]
                        d = dm[c]
                        for p in range(lo, hi):
                            Wt[indices[p], m] += d * data[p]
                if bias > 0:
                    _add_changes(Wt[nf], bias, changed, dm, nch)
            s += 1
        active = keep
        istate[0] += 1
        fstate[0] = max(stopping, 0.0)
        if stopping < eps_shrink:
            if stopping < tol and from_all:
                istate[1] = active
                istate[2] = 1
                fstate[1] = eps_shrink
                return 0
            active = n
            for i in range(n):
                R16[uint64(4 * (W * i + REC_INTS) + 1)] = k
            eps_shrink = max(eps_shrink / 2.0, tol)
            from_all = True
        else:
            from_all = False
    istate[1] = active
    istate[2] = 1 if from_all else 0
    fstate[1] = eps_shrink
    return 1


@njit(cache=True, nogil=True, inline="always")
def _rec_shrinkable(R, R16, a0, c0, q, yp, Ci, G, gmin):
    """:func:`_shrinkable` on a record (multipliers from slot ``a0``, the class list from int16 ``c0``)."""
    bound = Ci if q == yp else 0.0
    return R[uint64(a0 + R16[uint64(c0 + q)])] == bound and G[q] < gmin


#: :func:`_epochs` compiled twice: feature-major weights ``Wt`` (n_weights, k), as written (CSR rows, where a row's
#: features gather their k weights side by side), and with ``CLASS_MAJOR`` for dense rows: ``Wt`` is then (k,
#: n_weights), each class's score a vector-lane product of the row with its weights and each changed class's
#: update a vector-lane axpy.  Feature-major, a dense row's scores add k products a feature through ``S`` in
#: memory.  Session 36 (Zen 4), whole fits, class-major / feature-major time: emb128 (8,000 x 128, 10 classes)
#: 0.36, mid64 (60,000 x 64, 10 classes) 0.35, letter26 (16 features, 26 classes) 0.67, wide400 (320 x 20,000,
#: 2 classes) 0.34, dense2k (5,000 x 2,000, 2 classes) 0.22; CSR rows unchanged.
CLASS_MAJOR = False
#: a multiplier a change of less than 1e-12 away from its bound is set on it (and the weights take that change).
#: Without it (session 57) a sample whose own multiplier ended 1e-13 below ``C_i`` counted its own class as
#: movable, so its violation stayed the gap to its own score (~1) while the sub-problem's step, too small to take,
#: never closed it: on 300,000 rows of 1-4 binary features in 8 classes (one feature of ~45% of the rows) the
#: active set's violation sat at 1.0 against eps_shrink 0.5 from epoch 50 to max_iter (1,000 epochs, 2.1x
#: LIBLINEAR's time, objective 7e-3 above), where LIBLINEAR -- which always stores the sub-problem's values --
#: converged in 260
SNAP_TO_BOUND = True
_epochs_cm = with_constants(_epochs, "_cm", {"CLASS_MAJOR": True}, nogil=True, error_model="numpy")
_epochs = with_constants(_epochs, "_plain", {"CLASS_MAJOR": False}, nogil=True, error_model="numpy")
_epochs_rec = with_constants(_epochs_rec, "_rec", {}, nogil=True, error_model="numpy")


#: the primal objective's pass over the rows: blocks of this many rows, on Numba's threads from
#: :data:`PRIMAL_PARALLEL_MIN_VALUES` stored values on
PRIMAL_BLOCK_ROWS = 256
PRIMAL_PARALLEL_MIN_VALUES = 200_000
#: ... and its squared norm in blocks of this many rows of the weights
NORM_BLOCK_ROWS = 4096


def _primal_body(Xd, data, indices, indptr, dense, nf, bias, y, C, Wt, used, class_major):
    """The primal objective at the weights ``Wt``, feature-major (n_weights, k), or (``class_major``, dense rows
    only) class-major (k, n_weights): the squared norm over the rows ``used`` of ``Wt`` (in blocks of
    :data:`NORM_BLOCK_ROWS` rows; class-major, ``used`` are the classes), the losses in blocks of
    :data:`PRIMAL_BLOCK_ROWS` rows; each block sums its own part and the blocks' sums are added in order, so the
    value is the same on any number of threads.  Class-major, each score is one vector-lane product
    (:func:`_class_scores`): the stall watch's looks on 600 dense rows of 20 features in 3 classes took ~86 us a
    pass from a feature-major copy (three products a feature through memory), as long as 20 of the fit's epochs."""
    n = y.shape[0]
    k = Wt.shape[0] if class_major else Wt.shape[1]
    n_norm = 0 if class_major else (used.shape[0] + NORM_BLOCK_ROWS - 1) // NORM_BLOCK_ROWS
    norms = np.zeros((n_norm, Wt.shape[1]))
    for b in prange(n_norm):  # (each row in memory order: by columns, 200 classes x 2**20 weights took 2-3 s)
        part = norms[b]
        for q in range(b * NORM_BLOCK_ROWS, min(used.shape[0], (b + 1) * NORM_BLOCK_ROWS)):
            j = used[q]
            for m in range(Wt.shape[1]):
                part[m] += Wt[j, m] * Wt[j, m]
    cols = np.zeros(k)
    if class_major:  # (each class's row of weights in memory order, one sum a class)
        for m in range(k):
            cols[m] = _dense_row_dot(Wt[m], Wt[m], Wt.shape[1])
    else:
        for b in range(n_norm):
            for m in range(k):
                cols[m] += norms[b, m]
    n_blocks = (n + PRIMAL_BLOCK_ROWS - 1) // PRIMAL_BLOCK_ROWS
    parts = np.zeros(n_blocks)
    classes = np.arange(k)
    for b in prange(n_blocks):
        G = np.empty(k)
        part = 0.0
        for i in range(b * PRIMAL_BLOCK_ROWS, min(n, (b + 1) * PRIMAL_BLOCK_ROWS)):
            yi = y[i]
            if class_major:
                _class_scores(i, Wt, classes, k, Xd, nf, bias, G)
            else:
                _scores(i, Wt, Xd, data, indices, indptr, dense, nf, bias, G)
            own = G[yi]
            worst = 0.0
            for m in range(k):
                if m != yi:
                    v = 1.0 + G[m] - own
                    worst = max(worst, v)
            part += C[i] * worst
        parts[b] = part
    loss = 0.0
    for b in range(n_blocks):
        loss += parts[b]
    return cols, loss


_primal_par, _primal_ser = parallel_and_serial(_primal_body, nogil=True)


def used_weights(ld):
    """The rows of the feature-major weights that a CSR ``ld`` can make nonzero: its stored columns and the bias
    (the others stay 0: :math:`w_m = \\sum_i \\alpha_i^m x_i`); None for dense rows (all of them)."""
    if ld.dense:
        return None
    cols = used_columns(ld)
    return np.append(cols, ld.n_features) if ld.bias > 0 else cols


def _primal_parts(Xd, data, indices, indptr, dense, nf, bias, y, C, Wt, parallel=False, used=None, class_major=False):
    """(the squared norms of the classes' weights, the losses): :func:`_primal_body`, on Numba's threads when
    ``parallel`` and the data hold enough values; ``Wt`` feature-major, or class-major on dense rows
    (``class_major``); ``used``: the rows of feature-major ``Wt`` that may be nonzero (:func:`used_weights`; None:
    every row)."""
    stored = Xd.size if dense else data.shape[0]
    run = _primal_par if parallel and stored >= PRIMAL_PARALLEL_MIN_VALUES else _primal_ser
    rows = np.arange(0 if class_major else Wt.shape[0], dtype=np.int64) if used is None else used
    cols, loss = run(Xd, data, indices, indptr, dense, nf, bias, y, C, Wt, rows, bool(class_major))
    return cols, float(loss)


def _primal(Xd, data, indices, indptr, dense, nf, bias, y, C, Wt, parallel=False, used=None, class_major=False):
    """The primal objective: half the squared norm (:func:`_half`) plus the losses (:func:`_primal_parts`)."""
    cols, loss = _primal_parts(Xd, data, indices, indptr, dense, nf, bias, y, C, Wt, parallel, used, class_major)
    return _half(cols) + loss


def _half(cols):
    """Half the sum of the columns' squared norms (NumPy's pairwise sum: the same bits on any number of threads;
    class-major weights have a column a feature)."""
    return 0.5 * float(np.sum(cols))


def dual_objective(W, alpha, y, half_sqnorm=None):
    r"""The dual objective as a lower bound of the primal: :math:`-\tfrac12\sum_m\|w_m\|^2 - \sum_i\sum_{m \ne
    y_i}\alpha_i^m` (weights ``W`` in either layout, ``alpha`` (n, k)); ``half_sqnorm``: the first term's
    :math:`\tfrac12\sum_m\|w_m\|^2` where the caller has it."""
    if half_sqnorm is None:
        flat = np.ravel(W)
        half_sqnorm = 0.5 * float(flat @ flat)
    return float(-half_sqnorm - (alpha.sum() - alpha[np.arange(alpha.shape[0]), y].sum()))


def solve(
    ld,
    y,
    n_classes,
    C,
    *,
    tol=0.1,
    max_iter=1000,
    seed=0,
    alpha0=None,
    callback=None,
    callback_info=None,
    time_limit=None,
    verbose=False,
    stall=None,
):
    """Crammer-Singer on ``ld`` (:class:`~maxmargin.solvers._linear_common.LinearData`) with class indices ``y``
    (0..k-1) and per-sample ``C``.  ``alpha0`` (n, k): a warm start.  Returns a
    :class:`~maxmargin.solvers.dual_cd.LinearFit` whose ``w`` is (k, n_weights) and ``dual`` is alpha (the epochs
    keep the weights feature-major, (n_weights, k), on CSR rows -- see :func:`_scores` -- and class-major on dense
    rows, :data:`CLASS_MAJOR`).  ``stall``: None, or ``stall(measure)`` giving a
    :class:`~maxmargin.solvers.dual_primal.StallWatch` that may stop the epochs early (status ``'stalled'``; see
    :mod:`.cs_ipm`); its ``measure()`` gives (violation, ``tol``, active samples, a callable of the relative
    duality gap now)."""
    from .dual_cd import LinearFit

    n = y.shape[0]
    y = np.ascontiguousarray(y, dtype=np.int64)
    C = np.ascontiguousarray(C, dtype=np.float64)
    A = sqnorms(ld)  # (read only: made once per ld, maybe already by the estimator's check of X)
    W = np.zeros((n_classes, ld.n_weights))
    alpha = np.zeros((n, n_classes))
    warm = alpha0 is not None and np.shape(alpha0) == (n, n_classes)
    if warm:
        # other classes <= 0, own class = -(sum of the others) <= C_i (rows scaled down where needed)
        rows = np.arange(n)
        a = np.minimum(np.asarray(alpha0, dtype=np.float64), 0.0)
        a[rows, y] = 0.0
        own = -a.sum(axis=1)
        scale = np.where(own > C, C / np.maximum(own, 1e-300), 1.0)
        a *= scale[:, None]
        a[rows, y] = -a.sum(axis=1)
        alpha = a
        from ._linear_common import weighted_sum

        for m in range(n_classes):
            weighted_sum(np.ascontiguousarray(alpha[:, m]), W[m], *ld.args())
    index = np.arange(n, dtype=np.int64)
    istate = np.array([0, n, 1], dtype=np.int64)  # iteration, active samples, the epoch starts from all
    fstate = np.array([INF, max(10.0 * float(tol), 1.0)])  # violation, eps_shrink (LIBLINEAR's start)
    rng = rng_state(seed)
    args = ld.args()
    ahead, stages, entries = prefetch_plan(ld)
    stages = min(stages, 2)  # no weight stage: every class has weights of its own
    # feature-major for the epochs on CSR rows (see _scores); a cold start's zeros without a copy (100 classes x
    # 50,001 weights: a 40 MB copy, 16 ms of a 0.5 s fit); class-major on dense rows (CLASS_MAJOR)
    class_major = bool(ld.dense)
    if class_major:
        Wt = W
    else:
        Wt = np.ascontiguousarray(W.T) if warm else _pages.zeros((ld.n_weights, n_classes))
    epochs = _epochs_cm if class_major else _epochs
    rec = None
    if not class_major and n_classes <= REC_MAX_CLASSES:
        # CSR rows: each sample's scalars, multipliers and classes in a record of its own (_epochs_rec)
        R, alpha_view = records(n, n_classes)
        if warm:
            alpha_view[:] = alpha
        alpha = alpha_view  # (a cold start's zeros, untouched, are given back)
        width = record_width(n_classes)
        R16 = R.view(np.int16)
        _fill_records(R, R16, width, n_classes, A, C, ld.indptr, y)
        rec = (R, R16, width)
        weights_ahead = (AHEAD_FEW if ld.n_weights * n_classes * 8 >= WEIGHTS_AHEAD_BYTES else 0) | (
            AHEAD_ALL if stages > 0 and cold_share(ld, n_classes) >= AHEAD_ALL_COLD else 0
        )
    else:
        # each sample's classes (a permutation whose first n_cls[i] are in play) and its own class's position there
        act_cls = np.empty((n, n_classes), dtype=np.int32)
        act_cls[:] = np.arange(n_classes, dtype=np.int32)
        n_cls = np.full(n, n_classes, dtype=np.int32)
        y_pos = y.astype(np.int32)

    def step(k):
        if rec is not None:
            data = (ld.data, ld.indices, ld.n_features, float(ld.bias))
            rc = _epochs_rec(
                *data, *rec, Wt, index, istate, fstate, rng, float(tol), int(k), ahead, stages, weights_ahead
            )
            return rc, istate[0]
        rc = epochs(
            *args,
            y,
            C,
            A,
            alpha,
            Wt,
            index,
            act_cls,
            n_cls,
            y_pos,
            istate,
            fstate,
            rng,
            float(tol),
            int(k),
            ahead,
            stages,
            entries,
        )
        return rc, istate[0]

    # the rows of the feature-major weights that can be nonzero: the objective's norm skips the others (200 classes
    # x 2**20 weights of which 1 in 3 can be: 2 s -> 0.1 s of a 7 s fit)
    used = None if class_major else used_weights(ld)

    def report():
        return _primal(*args, y, C, Wt, used=used, class_major=class_major), fstate[0]

    def relative_gap():  # (primal - dual) / primal at the current iterate: one pass over the rows
        cols, loss = _primal_parts(*args, y, C, Wt, used=used, class_major=class_major)
        half = _half(cols)
        return (half + loss - dual_objective(Wt, alpha, y, half)) / max(abs(half + loss), 1e-300)

    if stall is not None:
        step = stall(lambda: (fstate[0], tol, istate[1], relative_gap)).wrap(step)
    status, it = drive(
        step,
        max_iter,
        tol,
        callback=callback,
        callback_info=callback_info,
        time_limit=time_limit,
        report=report,
        verbose=verbose,
        name="crammer-singer",
    )
    cols, loss = _primal_parts(*args, y, C, Wt, parallel=True, used=used, class_major=class_major)
    half = _half(cols)
    primal = half + loss
    # (classes, weights) as a view of the feature-major weights, Fortran-ordered: the estimator's coef_ is kept
    # in that order anyway, so no copy is made here or there (a C-ordered copy, then a Fortran-ordered one, took
    # ~25 ms of a 220 ms fit at 20 classes of 130,000 features); dense rows' class-major weights as they are
    W = Wt if class_major else Wt.T
    # (with records, ``dual`` is their (n, k) view of the multipliers: a contiguous copy took 0.5 s of fresh memory
    # for 30,000 samples of 1,000 classes)
    fit = LinearFit(W, alpha, primal, dual_objective(Wt, alpha, y, half), it, fstate[0], status)
    fit.active = None  # (the interior point of cs_ipm runs on every sample)
    # the classes' squared norms without the bias (the estimator's margin_: no pass of its own)
    bias_weights = (Wt[:, ld.n_features] if class_major else Wt[ld.n_features]) if ld.bias > 0 else 0.0
    fit.class_sqnorms = cols - bias_weights**2
    return fit
