r"""All one-vs-one problems of a multi-class C-SVC, solved in compiled code.

For classes :math:`a < b` the binary problem is the standard dual (seed 001)

.. math::

    \min_\alpha \tfrac12 \alpha^TQ\alpha - e^T\alpha \quad\text{s.t.}\quad
    y^T\alpha = 0,\; 0 \le \alpha_t \le C_t,\qquad Q_{st} = y_sy_tK(x_s, x_t),

over the rows of classes a (:math:`y = +1`) and b (:math:`y = -1`).  When a
pair's Gram matrix is small (:func:`pair_fits`), nothing is gained by computing
its kernel rows on demand: SMO visits most of them.  Here each pair's Gram
matrix is assembled from *class blocks*: the diagonal blocks
:math:`K(X_a, X_a)` are computed once per class and shared by the :math:`k-1`
pairs of that class, the off-diagonal block :math:`K(X_a, X_b)` once for its
pair, so the kernel work for :math:`k` classes is about
:math:`\tfrac12 n^2`, that of one binary problem of the same size.  The pair's
SMO (WSS3, :func:`pair_smo`) then runs on the class blocks
in memory (no assembled matrix), and the offset (LIBSVM's rule), the objective and the
training decision values come out of the same compiled call.  Rows are index
arrays into the training matrix, never copies of it.

Pairs run in batches on a pool of threads (the compiled code releases the
GIL).  Between batches Python checks for a stop (Ctrl-C, time limit), and the
batches are handed out dynamically, so a core taken by another process slows
only the batches it runs.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import numpy as np
from numba import njit

from .._threads import cores, one_blas_thread
from ..kernels.blocks import DENSE, GRAM, NARROW, SPARSE, block, block_by_columns, columns_of
from ..probability import _sigmoid_train
from .ovo_folds import one_fold
from .pair_smo import FULL_MAX_ROWS, _violation, nu_gradient, pair_smo, pair_smo_nu, self_kernels, whole_gram
from .smo import compute_rho, compute_rho_nu

#: a batch holds pairs up to this many Gram entries in all (a few tens of ms of work)
BATCH_ENTRIES = 4_000_000
#: pairs of at most this many Gram entries in all run without a BLAS thread limit (one small batch: BLAS
#: stays on one thread for products that small anyway)
SMALL_WORK = 1 << 18
#: the block modes whose rows :func:`solve_pairs` computes on demand by default (no Gram matrix; dense rows wider
#: than ``NARROW_D`` only with many pairs and up to :data:`LAZY_MAX_DENSE_D` features)
LAZY_MODES = (NARROW, SPARSE)
#: :func:`lazy_workers` counts on each row store holding this multiple of the share of rows the probes visited
LAZY_STORE_MARGIN = 2.0
#: rows on demand (:func:`lazy_plan`): a spread sample of this many pairs is solved first, its rows on demand ...
LAZY_PROBES = 8
#: ... and the other pairs' off-diagonal rows too where SMO visited at most this fraction of the probes' rows ...
LAZY_MAX_VISITS = 0.4
#: ... (dense rows above ``NARROW_D`` features: this fraction; usps visits 0.14, mnist 0.19, separated blobs
#: 0.04-0.07) ...
LAZY_MAX_VISITS_DENSE = 0.1
#: ... up to this many features: a row on demand reads its class's rows, which stay in L2 no longer (mnist, 784
#: features: the probes alone made the fit 1.27x slower; blobs of 40 and 64 features 0.61 and 0.67), and only
#: where the probes are at most a third of the pairs (random labels, 4 classes x 40 features: 2 probes of 6 pairs
#: made the fit 1.18-1.24x as long)
LAZY_MAX_DENSE_D = 64
#: ... and their diagonal blocks as well, each pair its own, where that costs at most this fraction of the classes'
#: shared blocks
OWN_MAX_COST = 0.7
#: no SMO limit when max_iter is -1 (LIBSVM has none either)
NO_LIMIT = 1 << 62


def pair_fits(n_pair, cache_size, workers):
    """Whether a pair of ``n_pair`` rows is solved on its in-memory Gram matrix: every
    worker holds one, within ``cache_size`` MB together (``n_pair`` may be an array of sizes)."""
    return 8.0 * n_pair * n_pair * max(workers, 1) <= cache_size * 1024 * 1024


def plan(counts, pairs, eligible, cache_size, workers):
    """The pairs that go to :func:`solve_pairs` within ``cache_size`` MB: the diagonal class
    blocks are kept for the whole run (8 * sum n_c^2 bytes over the classes involved) and each
    worker holds one pair's off-diagonal block and its transpose (16 n_a n_b bytes).

    Classes join smallest first while all of that fits; the ``eligible`` pairs between classes
    that joined are chosen.  The others (those of the largest classes, when a few large classes
    would not fit beside the rest: imbalanced data) go pair by pair, whose memory their own row
    caches bound."""
    eligible = np.asarray(eligible, dtype=bool)
    if not eligible.any():
        return np.zeros(len(pairs), dtype=bool)
    counts = np.asarray(counts, dtype=np.float64)
    P_all = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    P = P_all[eligible]
    # each class's partners in the eligible pairs, as slices of one array (300 classes: 44,850 pairs; a dict of
    # lists took ~0.1 s)
    ends = np.concatenate([P[:, 0], P[:, 1]])
    others = np.concatenate([P[:, 1], P[:, 0]])
    by = np.argsort(ends, kind="stable")
    ends, others = ends[by], others[by]
    k = counts.shape[0]
    first = np.searchsorted(ends, np.arange(k + 1))
    budget = cache_size * 1024 * 1024
    workers = max(workers, 1)
    joined = np.zeros(k, dtype=bool)
    diag = 0.0
    worker = 0.0
    for c in sorted(np.unique(ends).tolist(), key=lambda c: (counts[c], c)):
        partners = others[first[c] : first[c + 1]]
        with_c = counts[partners[joined[partners]]]
        widest = max(worker, 16.0 * counts[c] * with_c.max()) if with_c.size else worker
        if diag + 8.0 * counts[c] ** 2 + workers * widest > budget:
            break  # every later class is at least as large
        joined[c] = True
        diag += 8.0 * counts[c] ** 2
        worker = widest
    return eligible & joined[P_all[:, 0]] & joined[P_all[:, 1]]


@njit(cache=True, nogil=True)
def _class_blocks(c0, c1, cstart, order, bd, doff, diag):
    """The diagonal blocks K(X_c, X_c) of classes c0..c1-1 into ``diag`` (flat, at ``doff[c]``);
    ``bd`` is the :class:`maxmargin.kernels.blocks.BlockData` as a tuple."""
    mode, code, gamma, coef0, degree, X, data, indices, indptr, sq, n_features = bd
    for c in range(c0, c1):
        r = order[cstart[c] : cstart[c + 1]]
        m = r.shape[0]
        if doff[c + 1] - doff[c] != m * m:
            continue  # a class no requested pair needs
        out = diag[doff[c] : doff[c] + m * m].reshape((m, m))
        if mode == SPARSE:
            cptr, crow, cval = columns_of(data, indices, indptr, n_features, r)
            sqc = np.empty(m)
            for t in range(m):
                sqc[t] = sq[r[t]]
            block_by_columns(data, indices, indptr, code, gamma, coef0, degree, sq, r, cptr, crow, cval, sqc, out)
        else:
            block(bd, r, r, out)


@njit(cache=True, nogil=True)
def _transpose_into(A, B):
    """``B[:, :] = A.T`` (B C-ordered, written row by row)."""
    for j in range(B.shape[0]):
        for i in range(B.shape[1]):
            B[j, i] = A[i, j]


def _scratch_size(counts, pa, pb, plist, lazy):
    """Values of :func:`_solve_pairs`' scratch for the pairs ``plist`` (see its ``work``)."""
    na = counts[pa[plist]].astype(np.int64)
    nb = counts[pb[plist]].astype(np.int64)
    if plist.size == 0:
        return 0
    big_n = int((na + nb).max())
    if lazy:
        return big_n * big_n + big_n
    return 2 * int((na * nb).max()) + FULL_MAX_ROWS * FULL_MAX_ROWS


def _scratch(pool, size):
    """The calling thread's scratch array of at least ``size`` values from ``pool`` (a dict by thread), made anew
    only when it must grow: the pages of one array are written once, not those of a new array every pair."""
    import threading

    key = threading.get_ident()
    buf = pool.get(key)
    if buf is None or buf.shape[0] < size:
        buf = pool[key] = _malloc(max(size, 1))
    return buf


@njit(cache=True, nogil=True)
def _malloc(n):
    """``np.empty(n)`` from Numba's allocator (the C library's ``malloc``), not NumPy's: NumPy asks the kernel for
    huge pages on arrays of 4 MB and more, and each huge page is zeroed whole on its first write.  The row store of
    rows on demand is written only where SMO visits: in 2 MB pages, zipf50's probability fit spent 0.215 s of
    system time in ``solve_pairs`` against 0.072 s in 4 KB pages."""
    return np.empty(n)


@njit(cache=True, nogil=True)
def _solve_pairs(
    p0,
    p1,
    plist,
    pa,
    pb,
    cstart,
    order,
    C,
    bd,
    doff,
    diag,
    tol,
    max_iter,
    shrinking,
    aoff,
    alpha_out,
    G_out,
    res,
    fold_of,
    n_folds,
    cv_out,
    fold_tol,
    sorted_rows,
    lazy,
    own,
    visits,
    nu,
    work,
):
    """The pairs ``plist[p0:p1]``: the off-diagonal class block, SMO, offset and objective.

    ``res[p] = (rho, objective, iterations, violation, fold iterations, sigmoid A, sigmoid B)``; the multipliers and the
    gradient of pair p go to ``alpha_out``/``G_out`` at ``aoff[p]`` (rows of class a
    first, then b, each in the order of ``order``).  With ``n_folds > 0`` the pair's
    cross-validation folds follow on the same blocks (:func:`maxmargin.solvers.ovo_folds.one_fold`;
    ``fold_of``: each row's fold, same layout), their held-out decision values into ``cv_out``.
    With ``lazy`` each kernel row is computed into a row store as SMO first visits it
    (:func:`maxmargin.solvers.pair_smo.fill_row`; ``sorted_rows``: :func:`sorted_rows`): its off-diagonal
    segment, and its diagonal segment too with ``own`` (else copied from ``diag``); the folds read the
    same store and add the rows they visit first; ``visits[p]``: the fraction of the pair's rows computed
    (by its solve and its folds).

    ``nu > 0``: the pairs of a nu-SVC (``C``: the rows' weights, the box): LIBSVM's feasible start (each class
    filled in row order up to ``nu sum(w) / 2``, :func:`maxmargin.problem.nu_svc_problem`), its gradient
    :math:`Q\alpha` (:func:`maxmargin.solvers.pair_smo.nu_gradient`), the nu-variant's SMO
    (:func:`maxmargin.solvers.pair_smo.pair_smo_nu`), then LIBSVM's offsets (:func:`compute_rho_nu`) and the C-SVC
    solution :math:`\alpha/r`, :math:`\rho/r`, objective :math:`\tfrac12\alpha^TQ\alpha/r^2`, and the gradient of
    that solution less 1 (as a C-SVC pair's); ``r`` goes to ``res[p, 4]`` (no folds), the nu-variant's own
    violation to ``res[p, 3]``.  A pair with ``r <= 0`` keeps its unscaled solution (the caller raises).

    ``work``: the calling thread's scratch (:func:`_scratch`, at least :func:`_scratch_size` values): the off-diagonal
    blocks, the row store and the small pairs' whole Gram matrices are views into it, not arrays allocated a pair
    (zipf50's pairs of a few hundred rows each: 12,600 page faults a fit, most of the solve's system time on a virtual
    machine)."""
    mode, code, gamma, coef0, degree, X, data, indices, indptr, sq, n_features = bd
    XT, Xs, sqs = sorted_rows
    big_n = 0
    big_off = 0
    for q in range(p0, p1):
        na_q = cstart[pa[plist[q]] + 1] - cstart[pa[plist[q]]]
        nb_q = cstart[pb[plist[q]] + 1] - cstart[pb[plist[q]]]
        big_n = max(big_n, na_q + nb_q)
        big_off = max(big_off, na_q * nb_q)
    if lazy:
        big_off = 0
    offbuf = work[:big_off]
    offTbuf = work[big_off : 2 * big_off]
    rest = work[2 * big_off :]
    cur = -1
    cptr = np.zeros(1, dtype=np.int64)
    crow = np.zeros(1, dtype=np.int64)
    cval = np.zeros(1)
    sqa = np.zeros(1)
    cols_b = (cptr, crow, cval)
    scratch = rest[:0]
    store = rest[:0]
    if lazy:  # the rows SMO visits, in order, for every pair of the call
        store = rest[: big_n * big_n]
        scratch = rest[big_n * big_n : big_n * big_n + big_n]
    wholes = rest[: 0 if lazy else FULL_MAX_ROWS * FULL_MAX_ROWS]  # small pairs' whole Gram matrices
    for q in range(p0, p1):
        p = plist[q]
        a = pa[p]
        b = pb[p]
        ra = order[cstart[a] : cstart[a + 1]]
        rb = order[cstart[b] : cstart[b + 1]]
        na = ra.shape[0]
        nb = rb.shape[0]
        n = na + nb
        if lazy and own:
            Da = np.empty((na, 0))
            Db = np.empty((nb, 0))
        else:
            Da = diag[doff[a] : doff[a] + na * na].reshape((na, na))
            Db = diag[doff[b] : doff[b] + nb * nb].reshape((nb, nb))
        if lazy:  # the rows filled in by SMO
            off = np.empty((na, 0))
            offT = np.empty((nb, 0))
            if mode == SPARSE:  # class b as columns for the rows of a, class a (kept while a is) for those of b
                cols_b = columns_of(data, indices, indptr, n_features, rb)
                if a != cur:
                    cptr, crow, cval = columns_of(data, indices, indptr, n_features, ra)
                    cur = a
        elif mode == SPARSE:
            # class a as columns, built once for the consecutive pairs (a, .) of the batch
            if a != cur:
                cptr, crow, cval = columns_of(data, indices, indptr, n_features, ra)
                sqa = np.empty(na)
                for t in range(na):
                    sqa[t] = sq[ra[t]]
                cur = a
            offT = offTbuf[: nb * na].reshape((nb, na))
            block_by_columns(data, indices, indptr, code, gamma, coef0, degree, sq, rb, cptr, crow, cval, sqa, offT)
            off = offbuf[: na * nb].reshape((na, nb))
            _transpose_into(offT, off)
        else:
            off = offbuf[: na * nb].reshape((na, nb))
            block(bd, ra, rb, off)
            offT = offTbuf[: nb * na].reshape((nb, na))
            _transpose_into(off, offT)
        small = not lazy and n <= FULL_MAX_ROWS  # SMO on the whole Gram matrix (pair_smo.whole_gram)
        full = wholes[: n * n].reshape((n, n)) if small else wholes[:0].reshape((0, 0))
        if small:
            whole_gram(Da, Db, off, full)
        y = np.empty(n)
        U = np.empty(n)
        for i in range(n):
            y[i] = 1.0 if i < na else -1.0
            U[i] = C[ra[i]] if i < na else C[rb[i - na]]
        alpha = np.zeros(n)
        G = -np.ones(n)
        viol_nu = 0.0
        if nu > 0.0:
            wa = 0.0
            wb = 0.0
            for i in range(n):
                if i < na:
                    wa += U[i]
                else:
                    wb += U[i]
            half = min(nu * (wa + wb) / 2.0, wa, wb)
            before = 0.0
            for i in range(n):
                if i == na:
                    before = 0.0
                alpha[i] = min(max(half - before, 0.0), U[i])
                before += U[i]
            G[:] = 0.0
        if lazy:
            slot = np.full(n, -1, dtype=np.int64)
            count = np.zeros(1, dtype=np.int64)
            lz = (slot, store[: n * n].reshape((n, n)), count, own, mode, code, gamma, coef0, degree, X, XT, Xs)
            lz = lz + (
                data,
                indices,
                indptr,
                sq,
                sqs,
                scratch,
                ra,
                rb,
                cstart[a],
                cstart[b],
                (cptr, crow, cval),
                cols_b,
            )
            qd = np.empty(n)  # the Gram matrix's diagonal (SMO's QD)
            if own:
                self_kernels(lz, ra, qd[:na])
                self_kernels(lz, rb, qd[na:])
            else:
                for t in range(n):
                    qd[t] = Da[t, t] if t < na else Db[t - na, t - na]
            if nu > 0.0:
                nu_gradient(Da, Db, off, offT, alpha, G, lz)
                it, viol_nu = pair_smo_nu(Da, Db, off, offT, U, alpha, G, tol, max_iter, lz, qd)
            else:
                it = pair_smo(Da, Db, off, offT, U, alpha, G, tol, max_iter, shrinking, lz, qd)
        elif nu > 0.0:
            nu_gradient(Da, Db, off, offT, alpha, G)
            if small:
                it, viol_nu = pair_smo_nu(Da, Db, off, offT, U, alpha, G, tol, max_iter, None, None, full)
            else:
                it, viol_nu = pair_smo_nu(Da, Db, off, offT, U, alpha, G, tol, max_iter)
        elif small:
            it = pair_smo(Da, Db, off, offT, U, alpha, G, tol, max_iter, shrinking, None, None, full)
        else:
            it = pair_smo(Da, Db, off, offT, U, alpha, G, tol, max_iter, shrinking)
        if nu > 0.0:
            o = aoff[p]
            rho_s, r = compute_rho_nu(y, G, alpha, U)
            q = 0.0
            for i in range(n):
                q += alpha[i] * G[i]
            res[p, 2] = it
            res[p, 3] = viol_nu
            res[p, 4] = r
            scale = r if r > 0.0 else 1.0
            for i in range(n):
                alpha_out[o + i] = alpha[i] / scale
                G_out[o + i] = G[i] / scale - 1.0
            res[p, 0] = rho_s / scale
            res[p, 1] = 0.5 * q / scale / scale
            if lazy:
                visits[p] = count[0] / n
            continue
        obj = 0.0
        for i in range(n):
            obj += alpha[i] * (G[i] - 1.0)
        o = aoff[p]
        alpha_out[o : o + n] = alpha
        G_out[o : o + n] = G
        res[p, 0] = compute_rho(y, G, alpha, U)
        res[p, 1] = 0.5 * obj
        res[p, 2] = it
        res[p, 3] = _violation(y, G, alpha, U)
        fold_its = 0
        for f in range(n_folds):  # each from this pair's alpha, y'alpha = 0 restored on few multipliers
            fo = fold_of[o : o + n]
            if lazy:  # on the pair's row store: the rows computed so far and those the fold visits first
                fold_its += one_fold(
                    Da, Db, off, offT, U, alpha, fo, f, fold_tol, max_iter, shrinking, cv_out[o : o + n], lz, qd
                )
            elif small:
                dec = cv_out[o : o + n]
                its = one_fold(Da, Db, off, offT, U, alpha, fo, f, fold_tol, max_iter, shrinking, dec, None, None, full)
                fold_its += its
            else:
                fold_its += one_fold(
                    Da, Db, off, offT, U, alpha, fo, f, fold_tol, max_iter, shrinking, cv_out[o : o + n]
                )
        if lazy:
            visits[p] = count[0] / n
        res[p, 4] = fold_its
        if n_folds > 0:  # Platt's sigmoid on the held-out values, here on the pair's thread
            res[p, 5], res[p, 6] = _sigmoid_train(cv_out[o : o + n], y > 0.0, 100, 1e-10, 1e-12, 1e-5)


def lazy_plan(f, counts, pa, pb, dear=False):
    """How the pairs ``(pa, pb)`` left after the probes are solved, from the fractions ``f`` of the probes'
    rows that SMO visited: ``(lazy, own)``.  A lazy row of the off-diagonal block is one of two (a class-a
    row and a class-b row hold the same kernel values), so rows on demand pay while SMO visits less than
    :data:`LAZY_MAX_VISITS` of them; each pair's own diagonal blocks, filled on demand, cost about
    ``f * (pairs of the class)`` times a class's shared block, computed once: they pay below
    :data:`OWN_MAX_COST` of it (by the classes' sizes squared).  ``dear``: dense rows above ``NARROW_D``
    features, whose rows on demand (matrix-vector products) pay below :data:`LAZY_MAX_VISITS_DENSE` and
    on the shared diagonal blocks only."""
    if pa.size == 0:
        return True, not dear
    v = float(np.mean(f)) if len(f) else 1.0
    if v > (LAZY_MAX_VISITS_DENSE if dear else LAZY_MAX_VISITS):
        return False, False
    if dear:
        return True, False
    m2 = counts.astype(np.float64) ** 2
    deg = np.bincount(np.concatenate([pa, pb]), minlength=counts.shape[0]).astype(np.float64)
    used = deg > 0
    own = v * float(np.sum(deg[used] * m2[used])) <= OWN_MAX_COST * float(np.sum(m2[used]))
    return True, own


def lazy_workers(f, n_pair, cache_size, workers, most):
    """How many workers solve the pairs of ``n_pair`` rows with rows on demand and their own diagonal rows (no
    shared blocks): each worker's row store takes about the share of rows the probes visited at most (``f``),
    twice that for safety, of its largest pair's Gram matrix; ``workers`` (those whose whole matrices fit in
    ``cache_size`` MB) up to ``most``, as many as fit."""
    share = min(1.0, LAZY_STORE_MARGIN * float(np.max(f))) if len(f) else 1.0
    each = 8.0 * share * float(np.max(n_pair)) ** 2
    fit = int(cache_size * 1024 * 1024 // max(each, 1.0))
    return int(min(max(workers, fit), most))


def sorted_rows(bd, order):
    """What :func:`maxmargin.solvers.pair_smo.fill_row` reads besides ``bd``: the rows ``order`` (sorted by
    class) as columns (narrow mode: features x rows) or rows (dense mode), and their squared norms."""
    empty = np.zeros((1, 1))
    XT = np.ascontiguousarray(bd.X[order].T) if bd.mode == NARROW else empty
    Xs = np.ascontiguousarray(bd.X[order]) if bd.mode == DENSE else empty
    return XT, Xs, np.ascontiguousarray(bd.sq[order])


@njit(cache=True)
def _batch_ends(sizes, entries):
    ends = np.empty(sizes.shape[0], dtype=np.int64)
    k = 0
    acc = 0
    for i in range(sizes.shape[0]):
        acc += sizes[i]
        if acc >= entries:
            ends[k] = i + 1
            k += 1
            acc = 0
    if k == 0 or ends[k - 1] < sizes.shape[0]:
        ends[k] = sizes.shape[0]
        k += 1
    return ends[:k]


def _batches(sizes, entries):
    """Consecutive ranges [i0, i1) whose items' ``sizes`` add up to about ``entries`` (compiled: 300 classes'
    44,850 pairs took 9 ms as a Python loop)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    if sizes.size == 0:
        return []
    ends = _batch_ends(sizes, int(entries)).tolist()
    return list(zip([0] + ends[:-1], ends))


def _run_batches(fn, batches, workers, stop):
    """Run ``fn(i0, i1)`` for every batch on ``workers`` threads; between batches ``stop()``
    may return a reason to stop (no new batches start; the running ones finish).
    Returns None, or the reason.  Ctrl-C stops the same way, then is raised again."""
    if workers <= 1 or len(batches) <= 1:  # one batch: no thread pool (~0.3 ms to start one)
        for i0, i1 in batches:
            why = stop()
            if why:
                return why
            fn(i0, i1)
        return None
    pending = list(reversed(batches))
    running = set()
    why = None
    with ThreadPoolExecutor(max_workers=workers) as pool:
        try:
            while pending or running:
                while pending and len(running) < workers and why is None:
                    why = stop()
                    if why:
                        break
                    running.add(pool.submit(fn, *pending.pop()))
                if not running:
                    break
                done, running = wait(running, timeout=0.25, return_when=FIRST_COMPLETED)
                for f in done:
                    f.result()
        except BaseException:
            pending.clear()
            wait(running)
            raise
    return why


def layout(y_idx, C, pairs):
    """Where :func:`solve_pairs` (and :mod:`maxmargin.solvers.ovo_folds`) find each pair's rows and
    blocks: ``order`` (the rows with ``C > 0`` sorted by class, stable), ``counts``/``cstart`` per
    class, ``doff``/``sizes_sq`` (the flat diagonal blocks of the classes the pairs use), ``pa``/``pb``
    (the classes of each pair), ``n_pair`` and ``aoff`` (each pair's offset in per-row arrays)."""
    from types import SimpleNamespace

    y_idx = np.asarray(y_idx)
    C = np.ascontiguousarray(C, dtype=np.float64)
    k = int(y_idx.max()) + 1 if y_idx.size else 0
    keep = np.flatnonzero(C > 0)
    order = keep[np.argsort(y_idx[keep], kind="stable")].astype(np.int64)
    counts = np.bincount(y_idx[keep], minlength=k)
    cstart = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(counts, out=cstart[1:])
    P = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    pa, pb = np.ascontiguousarray(P[:, 0]), np.ascontiguousarray(P[:, 1])
    used = np.zeros(k, dtype=bool)
    used[pa] = True
    used[pb] = True
    doff = np.zeros(k + 1, dtype=np.int64)
    sizes_sq = np.where(used, counts.astype(np.int64) ** 2, 0)
    np.cumsum(sizes_sq, out=doff[1:])
    n_pair = counts[pa] + counts[pb]
    aoff = np.zeros(len(pairs) + 1, dtype=np.int64)
    np.cumsum(n_pair, out=aoff[1:])
    return SimpleNamespace(
        C=C,
        order=order,
        counts=counts,
        cstart=cstart,
        doff=doff,
        sizes_sq=sizes_sq,
        pa=pa,
        pb=pb,
        n_pair=n_pair,
        aoff=aoff,
    )


@njit(cache=True)
def _pair_rows(order, cstart, pa, pb, aoff, merged, rows, ysub):
    """Per pair p, into ``rows[aoff[p]:aoff[p + 1]]``: the rows of class ``pa[p]`` then those of
    ``pb[p]`` (:func:`solve_pairs`' layout), or with ``merged`` both merged in increasing order
    (each class's rows are increasing in ``order``); ``ysub`` is +1 on class ``pa[p]``, -1 on ``pb[p]`` (an empty
    ``ysub``: not written)."""
    with_y = ysub.shape[0] > 0
    for p in range(pa.shape[0]):
        o = aoff[p]
        i, i1 = cstart[pa[p]], cstart[pa[p] + 1]
        j, j1 = cstart[pb[p]], cstart[pb[p] + 1]
        while i < i1 or j < j1:
            take_a = j >= j1 or (i < i1 and (not merged or order[i] < order[j]))
            if take_a:
                rows[o] = order[i]
                if with_y:
                    ysub[o] = 1.0
                i += 1
            else:
                rows[o] = order[j]
                if with_y:
                    ysub[o] = -1.0
                j += 1
            o += 1


#: :class:`PairMembers` makes this many pairs one by one before it makes the flat arrays of all
MEMBERS_SINGLE = 16


def pair_members(y_idx, C, n_classes):
    """The one-vs-one problems (a, b), a < b in LIBSVM's order, as views into two flat arrays:
    ``[(rows, ysub), ...]`` with each pair's rows (``C > 0``) in increasing order and ysub +1 on
    class a; also the per-class row counts.  One compiled pass instead of a few NumPy calls a
    pair (300 classes: 44,850 pairs, 0.3 s of Python before)."""
    pairs = np.column_stack(np.triu_indices(n_classes, k=1))
    counts = np.bincount(np.asarray(y_idx)[np.asarray(C) > 0], minlength=n_classes)
    if not pairs.shape[0]:
        return [], counts
    return PairMembers(layout(np.asarray(y_idx), C, pairs), counts), counts


class PairMembers(Sequence):
    """:func:`pair_members`' sequence of ``(rows, ysub)``, one per pair (300 classes: the 89,700 views of a list took
    ~0.07 s, and a compiled fit reads a few of them); ``rows_flat`` / ``ysub_flat`` / ``offsets`` hold all of them end
    to end (pair p at ``offsets[p]:offsets[p + 1]``), ``counts`` each class's rows.

    The flat arrays are made when first read, or once more than :data:`MEMBERS_SINGLE` pairs were asked for one by
    one (each of those made alone): the compiled route never reads them (1,000 classes of 5 rows: 80 MB, 20,000 page
    faults of a virtual machine's 4-20 us each, never needed)."""

    def __init__(self, lay, counts):
        self._lay = lay
        self.offsets = lay.aoff
        self.counts = counts
        self._bounds = lay.aoff.tolist()
        self._flat = None
        self._single = 0

    def _arrays(self):
        if self._flat is None:
            lay = self._lay
            total = int(lay.aoff[-1])
            rows = np.empty(total, dtype=np.int64)
            ysub = np.empty(total)
            _pair_rows(lay.order, lay.cstart, lay.pa, lay.pb, lay.aoff, True, rows, ysub)
            self._flat = (rows, ysub)
        return self._flat

    @property
    def rows_flat(self):
        return self._arrays()[0]

    @property
    def ysub_flat(self):
        return self._arrays()[1]

    def __len__(self):
        return len(self._bounds) - 1

    def __getitem__(self, p):
        if isinstance(p, slice):
            return [self[q] for q in range(*p.indices(len(self)))]
        if p < 0:
            p += len(self)
        if not 0 <= p < len(self):
            raise IndexError(p)
        s, e = self._bounds[p], self._bounds[p + 1]
        if self._flat is None and self._single < MEMBERS_SINGLE:
            self._single += 1
            lay = self._lay
            rows = np.empty(e - s, dtype=np.int64)
            ysub = np.empty(e - s)
            off = np.array([0, e - s], dtype=np.int64)
            _pair_rows(lay.order, lay.cstart, lay.pa[p : p + 1], lay.pb[p : p + 1], off, True, rows, ysub)
            return rows, ysub
        rows, ysub = self._arrays()
        return rows[s:e], ysub[s:e]


class _PairResult(dict):
    """:func:`solve_pairs`' result: the per-pair lists of views ``rows``, ``alpha``, ``grad`` and ``cv`` (one
    Python object a pair: 300 classes' 44,850 pairs took ~0.15 s to list) are built when first read."""

    def __init__(self, lazy, **values):
        super().__init__(**values)
        self._lazy = lazy

    def __missing__(self, key):
        if key not in self._lazy:
            raise KeyError(key)
        value = self[key] = self._lazy.pop(key)()
        return value


def solve_pairs(
    bd,
    y_idx,
    C,
    pairs,
    tol=1e-3,
    max_iter=-1,
    shrinking=True,
    workers=None,
    time_limit=None,
    on_batch=None,
    folds=None,
    n_folds=0,
    fold_tol=None,
    lazy=None,
    cache_size=None,
    nu=0.0,
):
    """Solve the one-vs-one problems ``pairs`` (list of class-index pairs (a, b)).

    ``bd`` is the :class:`maxmargin.kernels.blocks.BlockData` of the training data,
    ``y_idx`` the class index of each row, ``C`` the per-row upper bounds (rows
    with ``C <= 0`` take part in no problem).  Returns a dict of arrays (the per-pair lists built when read):
    ``rows`` (per pair, the data rows: class a first, ``n_first`` of them; views into
    ``rows_flat``, pair p at ``offsets[p]:offsets[p + 1]``),
    ``alpha``/``grad`` (per pair),
    ``rho``, ``objective``, ``n_iter``, ``violation``, and ``status``
    ('converged', or 'time_limit' with the unsolved pairs' ``alpha`` None).
    ``on_batch(ps)``, if given, is called (on the worker's thread) when the pairs
    ``ps`` (a list of pair numbers) are solved; returning False stops as a time limit does (status 'callback').

    ``folds`` (per pair, each row's cross-validation fold in 0..n_folds-1, in the order of
    ``rows``; or those laid end to end in one array) adds each pair's ``n_folds``-fold
    cross-validation, warm-started from its solution (:mod:`maxmargin.solvers.ovo_folds`): ``cv``
    (per pair, the held-out decision values in the order of ``rows``; None for a pair not solved;
    ``cv_flat`` all of them end to end), ``cv_iter`` and Platt's sigmoid of each pair fitted on those
    values, ``probA``/``probB`` (:func:`maxmargin.probability.sigmoid_train`).  The folds stop
    at ``fold_tol`` (default ``tol``; :func:`maxmargin.probability.fold_tol`).

    ``lazy``: compute kernel rows as SMO visits them, as LIBSVM does, where that pays (with ``folds``, the
    folds' SMO too, on the same rows).  A spread sample of :data:`LAZY_PROBES` pairs is solved so first, each
    pair on its own blocks; the fraction of their rows SMO visited (in the pair's solve and its folds) decides
    how the rest go (:func:`lazy_plan`): the same way, or on
    the classes' shared diagonal blocks with the off-diagonal rows on demand, or as whole blocks.  Easy
    classes (SMO done after a few steps per hundred rows) leave most kernel values uncomputed.  None: for
    every built-in kernel (dense rows above ``NARROW_D`` features by stricter rules, :func:`lazy_plan`, and not
    above :data:`LAZY_MAX_DENSE_D` features or below ``3 * LAZY_PROBES`` pairs).

    ``cache_size`` (MB; with ``workers``, the number whose whole Gram matrices fit in it): where the probes' rows
    on demand leave room for more workers' row stores, the pairs after them run on every core
    (:func:`lazy_workers`).

    ``nu > 0``: the pairs of a nu-SVC (``C``: the rows' weights; no folds), each solved by the nu-variant and
    returned as the C-SVC solution it scales to (see :func:`_solve_pairs`), with each pair's ``r``.
    """
    if nu > 0.0 and n_folds:
        raise ValueError("the nu-SVC pairs are solved without cross-validation folds")
    t0 = time.perf_counter()
    lay = layout(y_idx, C, pairs)
    C, order, counts, cstart, doff, sizes_sq = lay.C, lay.order, lay.counts, lay.cstart, lay.doff, lay.sizes_sq
    pa, pb, n_pair, aoff = lay.pa, lay.pb, lay.n_pair, lay.aoff
    diag = np.empty(int(doff[-1]))
    alpha = np.zeros(int(aoff[-1]))
    grad = np.zeros(int(aoff[-1]))
    res = np.full((len(pairs), 7), np.nan)
    if folds is not None and n_folds > 0:
        flat = folds if isinstance(folds, np.ndarray) else np.concatenate(folds)
        fold_of = np.ascontiguousarray(flat, dtype=np.int64)
        if fold_of.shape[0] != aoff[-1]:
            raise ValueError("folds must give one fold per row of every pair")
    else:
        fold_of, n_folds = np.zeros(int(aoff[-1]), dtype=np.int64), 0
    cv = np.zeros(int(aoff[-1]))
    done = np.zeros(len(pairs), dtype=bool)
    scratch = {}  # each worker thread's scratch for _solve_pairs, kept for the whole call
    limit = NO_LIMIT if max_iter is None or max_iter < 0 else int(max_iter)
    workers = workers or cores()

    halted = []

    def stop():
        if halted:
            return "callback"
        if time_limit is not None and time.perf_counter() - t0 >= time_limit:
            return "time_limit"
        return None

    def classes(c0, c1):
        _class_blocks(c0, c1, cstart, order, tuple(bd), doff, diag)

    def pairs_of(plist, lazy, own):
        def run(q0, q1):
            _solve_pairs(
                q0,
                q1,
                plist,
                pa,
                pb,
                cstart,
                order,
                C,
                tuple(bd),
                doff,
                diag,
                float(tol),
                limit,
                bool(shrinking),
                aoff,
                alpha,
                grad,
                res,
                fold_of,
                int(n_folds),
                cv,
                float(tol if fold_tol is None else fold_tol),
                rows_sorted,
                bool(lazy),
                bool(own),
                visits,
                float(nu),
                _scratch(scratch, _scratch_size(counts, pa, pb, plist[q0:q1], lazy)),
            )
            done[plist[q0:q1]] = True
            if on_batch is not None and on_batch(plist[q0:q1].tolist()) is False:
                halted.append(True)

        return run

    if lazy is None:
        wide = bd.mode == DENSE and (bd.n_features > LAZY_MAX_DENSE_D or len(pairs) < 3 * LAZY_PROBES)
        lazy = bd.mode != GRAM and not wide
    lazy = bool(lazy)
    rows_sorted = sorted_rows(bd, order) if lazy else (np.zeros((1, 1)), np.zeros((1, 1)), np.zeros(1))
    visits = np.zeros(len(pairs))
    work = n_pair.astype(np.int64) ** 2 * (1 + int(n_folds))
    rest, own, why, diag_done = np.arange(len(pairs), dtype=np.int64), False, None, False
    # dense rows above NARROW_D: a block is one BLAS product, a row on demand a matrix-vector product (dearer
    # a value): the probes read the shared diagonal blocks, and rows on demand must be rarer to pay
    dear = bd.mode == DENSE
    # BLAS on one thread beside ours; not worth its limit (~30 us) on work as small as iris'
    small = int(work.sum()) <= SMALL_WORK
    with contextlib.nullcontext() if small else one_blas_thread():
        if lazy:  # a spread sample of pairs first, rows as visited
            if dear:
                why = _run_batches(classes, _batches(sizes_sq, BATCH_ENTRIES), workers, stop)
                diag_done = True
            n_probes = max(1, min(LAZY_PROBES, len(pairs) // 3))
            probes = np.unique(np.linspace(0, len(pairs) - 1, n_probes).astype(np.int64))
            if why is None:
                batches = [(q, q + 1) for q in range(probes.size)]
                why = _run_batches(pairs_of(probes, True, not dear), batches, workers, stop)
            rest = rest[~np.isin(rest, probes, assume_unique=True)]  # (setdiff1d sorts: 5 ms at 44,850 pairs)
            lazy, own = lazy_plan(visits[probes], counts, pa[rest], pb[rest], dear)
            if lazy and own and cache_size is not None and rest.size:
                workers = lazy_workers(visits[probes], n_pair[rest], cache_size, workers, cores())
        if why is None and not own and not diag_done:
            why = _run_batches(classes, _batches(sizes_sq, BATCH_ENTRIES), workers, stop)
        if why is None and rest.size:
            batches = _batches(work[rest], BATCH_ENTRIES)
            why = _run_batches(pairs_of(rest, lazy, own), batches, workers, stop)
    rows_flat = np.empty(int(aoff[-1]), dtype=np.int64)
    _pair_rows(order, cstart, pa, pb, aoff, False, rows_flat, np.empty(0))
    bounds = aoff.tolist()

    def views(flat, when):
        return lambda: [flat[bounds[p] : bounds[p + 1]] if when(p) else None for p in range(len(pairs))]

    lazy = {
        "rows": views(rows_flat, lambda p: True),
        "alpha": views(alpha, lambda p: done[p]),
        "grad": views(grad, lambda p: done[p]),
        "cv": views(cv, lambda p: done[p] and n_folds),
    }
    return _PairResult(
        lazy,
        rows_flat=rows_flat,
        offsets=aoff,
        alpha_flat=alpha,
        grad_flat=grad,
        solved=done,
        n_first=counts[pa],
        rho=res[:, 0],
        objective=res[:, 1],
        n_iter=res[:, 2],
        violation=res[:, 3],
        cv_flat=cv,
        cv_iter=res[:, 4],
        probA=res[:, 5],
        probB=res[:, 6],
        r=res[:, 4] if nu > 0.0 else None,
        status=why or "converged",
    )
