r"""SMO on one pair of classes whose Gram matrix is held as class blocks.

Used by :mod:`maxmargin.solvers.ovo` (every one-vs-one problem of a multi-class C-SVC) and
:mod:`maxmargin.solvers.ovo_folds` (their cross-validation folds).  Rows ``0..na-1`` are class a
(:math:`y = +1`), rows ``na..`` class b (:math:`y = -1`); the kernel row of a class-a row is
``[Da[i], off[i]]``, of a class-b row ``[offT[i - na], Db[i - na]]``.

The kernel rows may also be computed on demand (``lazy``, :func:`fill_row`): a row's off-diagonal segment
(and its diagonal segment, where the classes' diagonal blocks are not computed) the first time SMO selects
its variable, as LIBSVM computes kernel rows, into the next free row of a store.  Where the
classes are easy to separate SMO visits a few rows in a hundred, and the pair's kernel work shrinks to
those rows; where it visits most of them, each row costs what it costs in a whole block (the same
per-row loops: :func:`maxmargin.kernels.objects.narrow_dots` and the sparse postings).
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

from ..kernels.blocks import DENSE, NARROW, narrow_dots, postings_dots
from ..kernels.formulas import transform
from .smo import TAU, pair_step


@njit(cache=True, nogil=True)
def _violation(y, G, alpha, U):
    """max_{I_up} -y G - min_{I_low} -y G (the stopping measure), 0 if a set is empty."""
    gmax = -np.inf
    gmin = np.inf
    for t in range(y.shape[0]):
        s = -y[t] * G[t]
        if (y[t] > 0 and alpha[t] < U[t]) or (y[t] < 0 and alpha[t] > 0.0):
            gmax = max(gmax, s)
        if (y[t] > 0 and alpha[t] > 0.0) or (y[t] < 0 and alpha[t] < U[t]):
            gmin = min(gmin, s)
    if gmax == -np.inf or gmin == np.inf:
        return 0.0
    return max(gmax - gmin, 0.0)


@njit(cache=True, nogil=True, inline="always")
def _row(i, na, Da, Db, off, offT):
    """Row i of the pair's Gram matrix as its two class segments (no copy)."""
    if i < na:
        return Da[i], off[i]
    return offT[i - na], Db[i - na]


@njit(cache=True, nogil=True)
def _kernel_row(lz, r, c0, cols, o):
    """``o[t] = K(x_r, z_{c0 + t})`` for the data row r and the rows sorted by class (:func:`fill_row`'s
    ``lz``); ``cols``: the class of those rows as columns (sparse mode)."""
    mode, code, gamma, coef0, degree, X, XT, Xs, data, indices, indptr, sq, sqs, w = lz[4:18]
    m = o.shape[0]
    if mode == NARROW:
        narrow_dots(X[r], XT, c0, o)
    elif mode == DENSE:
        o[:] = np.dot(Xs[c0 : c0 + m], X[r])
    else:
        cptr, crow, cval = cols
        o[:] = 0.0
        postings_dots(o, indices, data, indptr[r], indptr[r + 1], cptr, crow, cval)
    transform(o, code, gamma, coef0, degree, sq[r], sqs[c0 : c0 + m], w)


@njit(cache=True, nogil=True)
def self_kernels(lz, rows, out):
    """``out[t] = K(x_r, x_r)`` for the data rows ``r = rows[t]`` (:func:`fill_row`'s ``lz``), in one pass."""
    mode, code, gamma, coef0, degree, X, XT, Xs, data, indices, indptr, sq = lz[4:16]
    m = rows.shape[0]
    twice = np.empty(m)  # for RBF: ||x||^2 + ||x||^2 - 2 x.x, with 0 for the row's own norm
    for t in range(m):
        r = rows[t]
        v = 0.0
        if mode == NARROW or mode == DENSE:
            for f in range(X.shape[1]):
                v += X[r, f] * X[r, f]
        else:
            for q in range(indptr[r], indptr[r + 1]):
                v += data[q] * data[q]
        out[t] = v
        twice[t] = 2.0 * sq[r]
    transform(out, code, gamma, coef0, degree, 0.0, twice, np.empty(m))


@njit(cache=True, nogil=True)
def fill_row(lz, i, na, Da, Db):
    """Row i of the pair's Gram matrix, computed into the next free row of ``store`` the first time it is
    asked for (``slot[i] < 0``): its segment over class a, then over class b.  Its off-diagonal segment is
    computed; its diagonal segment too where the pair holds no diagonal blocks (``own``), else copied from
    ``Da[i]`` / ``Db[i - na]`` (the classes' shared blocks).  ``lz`` (:func:`maxmargin.solvers.ovo._solve_pairs`):
    ``(slot, store, count, own, mode, code, gamma, coef0, degree, X, XT, Xs, data, indices, indptr, sq, sqs,
    scratch, ra, rb, sa, sb, cols_a, cols_b)``: the rows held and how many, the data as
    :class:`maxmargin.kernels.blocks.BlockData` holds it, its rows sorted by class as columns (``XT``, narrow
    mode) or rows (``Xs``, dense mode) with their squared norms ``sqs``, a scratch row, the pair's data rows
    ``ra``/``rb`` and where they start in the sorted order (``sa``/``sb``), and each class as columns
    (sparse mode, :func:`maxmargin.kernels.blocks.columns_of`)."""
    slot, store, count, own = lz[0:4]
    if slot[i] >= 0:
        return
    ra, rb, sa, sb, ca, cb = lz[18:24]
    k = count[0]
    row = store[k]
    if i < na:
        r = ra[i]
        _kernel_row(lz, r, sb, cb, row[na:])
        if own:
            _kernel_row(lz, r, sa, ca, row[:na])
        else:
            row[:na] = Da[i]
    else:
        r = rb[i - na]
        _kernel_row(lz, r, sa, ca, row[:na])
        if own:
            _kernel_row(lz, r, sb, cb, row[na:])
        else:
            row[na:] = Db[i - na]
    slot[i] = k
    count[0] = k + 1


@njit(cache=True, nogil=True, inline="always")
def _held(lz, i, na):
    """Row i of the pair's Gram matrix as :func:`fill_row` holds it, as its two class segments (no copy)."""
    row = lz[1][lz[0][i]]
    return row[:na], row[na:]


@njit(cache=True, nogil=True)
def _shrink(act, m, na, U, alpha, G):
    """LIBSVM's shrinking rule on the active list ``act[:m]``: a variable at a bound whose
    gradient says it stays there leaves the selection (not the gradient update, which
    covers every variable: the Gram matrix is in memory, so nothing is rebuilt later).
    Returns the new active count (the list stays in increasing order)."""
    gmax1 = -np.inf  # max over I_up of -y G
    gmax2 = -np.inf  # max over I_low of y G
    for k in range(m):
        t = act[k]
        if t < na:
            if alpha[t] < U[t]:
                gmax1 = max(gmax1, -G[t])
            if alpha[t] > 0.0:
                gmax2 = max(gmax2, G[t])
        else:
            if alpha[t] > 0.0:
                gmax1 = max(gmax1, G[t])
            if alpha[t] < U[t]:
                gmax2 = max(gmax2, -G[t])
    keep = 0
    for k in range(m):
        t = act[k]
        out = False
        if alpha[t] >= U[t]:
            out = (-G[t] > gmax1) if t < na else (-G[t] > gmax2)
        elif alpha[t] <= 0.0:
            out = (G[t] > gmax2) if t < na else (G[t] > gmax1)
        if not out:
            act[keep] = t
            keep += 1
    return keep


#: pairs of at most this many rows run :func:`pair_smo` on their whole Gram matrix (:func:`whole_gram`; n^2 values
#: copied once, a step then reads rows without views): 300 classes of 10 rows, 20 rows a pair: 268 -> 198 ns a step
FULL_MAX_ROWS = 128


@njit(cache=True, nogil=True)
def whole_gram(Da, Db, off, full):
    """The pair's Gram matrix ``[[Da, off], [off', Db]]`` into ``full`` (n, n)."""
    na = Da.shape[0]
    nb = Db.shape[0]
    for r in range(na):
        for t in range(na):
            full[r, t] = Da[r, t]
        for t in range(nb):
            full[r, na + t] = off[r, t]
    for r in range(nb):
        for t in range(na):
            full[na + r, t] = off[t, r]
        for t in range(nb):
            full[na + r, na + t] = Db[r, t]


@njit(cache=True, nogil=True, inline="always")
def _setup(Da, Db, qd, lazy, full):
    """``(QD, slots, store)`` of :func:`pair_smo` and :func:`pair_smo_nu`: the Gram matrix's diagonal (from the
    class blocks unless ``qd`` gives it) and the row store's slots and rows, unpacked once (a call that takes the
    whole ``lazy`` tuple pays two atomic reference counts per array in it, ~0.3 us, so :func:`fill_row` is called
    only for a row not yet held); placeholders without ``lazy``.  ``full``: the pair's whole Gram matrix, whose
    diagonal is ``QD``."""
    na = Da.shape[0]
    nb = Db.shape[0]
    if full is not None:
        QD = np.empty(na + nb)
        for t in range(na + nb):
            QD[t] = full[t, t]
    elif qd is None:
        QD = np.empty(na + nb)
        for t in range(na):
            QD[t] = Da[t, t]
        for t in range(nb):
            QD[na + t] = Db[t, t]
    else:
        QD = qd
    if lazy is not None:
        lslot = lazy[0]
        lstore = lazy[1]
    else:
        lslot = np.zeros(1, dtype=np.int64)
        lstore = np.zeros((1, 1))
    return QD, lslot, lstore


@njit(cache=True, nogil=True, inline="always")
def _move(i, j, Kij, yi, yj, U, alpha, G, QD):
    """The clipped pair step (:func:`maxmargin.solvers.smo.pair_step`) on alpha_i, alpha_j (``Kij``: their kernel
    value), in place; returns the changes times y_i and y_j, which the gradient update scales the rows by."""
    quad = QD[i] + QD[j] - 2.0 * Kij
    if quad <= 0.0:
        quad = TAU
    old_ai = alpha[i]
    old_aj = alpha[j]
    ai, aj = pair_step(yi != yj, old_ai, old_aj, G[i], G[j], U[i], U[j], quad)
    alpha[i] = ai
    alpha[j] = aj
    return (ai - old_ai) * yi, (aj - old_aj) * yj


@njit(cache=True, nogil=True, inline="always")
def _step(i, j, Da, Db, off, offT, U, alpha, G, QD, lazy, lslot, lstore, full):
    """One SMO step of :func:`pair_smo` and :func:`pair_smo_nu` on the variables i and j (j's row computed into
    the store first with ``lazy``; i's is there): the clipped pair step (:func:`maxmargin.solvers.smo.pair_step`)
    and the gradient update from the two kernel rows.  With ``full`` (the whole Gram matrix) the rows are read by
    two indices: a row view costs two atomic reference counts, which at 20 variables were a third of a step."""
    na = Da.shape[0]
    nb = Db.shape[0]
    yi = 1.0 if i < na else -1.0
    yj = 1.0 if j < na else -1.0
    if full is not None:
        ui = uint64(i)
        uj = uint64(j)
        dai, daj = _move(i, j, full[ui, uj], yi, yj, U, alpha, G, QD)
        for t in range(na):
            G[t] += full[ui, t] * dai + full[uj, t] * daj
        for t in range(na, na + nb):
            G[t] -= full[ui, t] * dai + full[uj, t] * daj
        return
    if lazy is not None:
        if lslot[j] < 0:
            fill_row(lazy, j, na, Da, Db)
        row = lstore[lslot[i]]
        Li, Ri = row[:na], row[na:]
        row = lstore[lslot[j]]
        Lj, Rj = row[:na], row[na:]
    else:
        Li, Ri = _row(i, na, Da, Db, off, offT)
        Lj, Rj = _row(j, na, Da, Db, off, offT)
    dai, daj = _move(i, j, Li[j] if j < na else Ri[j - na], yi, yj, U, alpha, G, QD)
    for t in range(na):
        G[t] += Li[t] * dai + Lj[t] * daj
    Gb = G[na:]
    for t in range(nb):
        Gb[t] -= Ri[t] * dai + Rj[t] * daj


@njit(cache=True, nogil=True, inline="always")
def _second_whole(full, i, gmax, act, m, na, U, alpha, G, QD):
    """:func:`pair_smo`'s second-order choice of j over I_low, and the maximal y G there, on the whole Gram
    matrix ``full`` (row i read by two indices, no view)."""
    ui = uint64(i)
    QDi = QD[i]
    j = -1
    gmax2 = -np.inf
    best = np.inf
    for k in range(m):
        t = act[k]
        u = uint64(t)
        if t < na:
            if alpha[u] <= 0.0:
                continue
            v = G[u]
        else:
            if alpha[u] >= U[u]:
                continue
            v = -G[u]
        gmax2 = max(gmax2, v)
        b = gmax + v
        if b > 0.0:
            a = QDi + QD[u] - 2.0 * full[ui, u]
            obj = -(b * b) / (a if a > 0.0 else TAU)
            if obj <= best:
                best = obj
                j = t
    return j, gmax2


@njit(cache=True, nogil=True)
def pair_smo(Da, Db, off, offT, U, alpha, G, tol, max_iter, shrinking, lazy=None, qd=None, full=None):
    """WSS3 SMO (seed 001's clipped pair step, :func:`maxmargin.solvers.smo.pair_step`)
    on one pair whose Gram matrix is held as class blocks: rows ``0..na-1`` are class
    a (y = +1), with kernel rows ``[Da[i], off[i]]``; rows ``na..`` class b (y = -1),
    ``[offT[i - na], Db[i - na]]``.  The gradient ``G`` and ``alpha`` are updated in
    place.  With ``shrinking`` the selection looks at the active variables only
    (:func:`_shrink` every ``min(n, 1000)`` steps) and, once they are optimal, at all
    of them again.  With ``lazy`` (:func:`fill_row`'s tuple) the rows are computed as SMO first needs them
    (the gradient update reads only rows of the two variables of the step) and held apart from the blocks
    (``Da``/``Db`` are the classes' shared diagonal blocks, or of shape (na, 0) / (nb, 0) where the pair's
    own rows are computed whole; ``off``/``offT`` are not read); ``qd`` is the Gram matrix's diagonal then.
    ``full``: the pair's whole Gram matrix (n, n), read in place of the blocks (small pairs: :data:`FULL_MAX_ROWS`).
    Returns the number of steps."""
    na = Da.shape[0]
    nb = Db.shape[0]
    n = na + nb
    QD, lslot, lstore = _setup(Da, Db, qd, lazy, full)
    act = np.arange(n)
    m = n
    period = min(n, 1000)
    counter = period
    it = 0
    while it < max_iter:
        if shrinking:
            counter -= 1
            if counter <= 0:
                counter = period
                m = _shrink(act, m, na, U, alpha, G)
        # i: the maximal -y G over I_up
        gmax = -np.inf
        i = -1
        for k in range(m):
            t = act[k]
            u = uint64(t)  # an unsigned index: no negative-index test on each load
            if t < na:
                if alpha[u] < U[u] and -G[u] >= gmax:
                    gmax = -G[u]
                    i = t
            elif alpha[u] > 0.0 and G[u] >= gmax:
                gmax = G[u]
                i = t
        j = -1
        gmax2 = -np.inf
        if i >= 0 and full is not None:
            j, gmax2 = _second_whole(full, i, gmax, act, m, na, U, alpha, G, QD)
        elif i >= 0:
            if lazy is not None:
                if lslot[i] < 0:
                    fill_row(lazy, i, na, Da, Db)
                row = lstore[lslot[i]]
                Li, Ri = row[:na], row[na:]
            else:
                Li, Ri = _row(i, na, Da, Db, off, offT)
            QDi = QD[i]
            # j: the second-order choice over I_low (Fan, Chen & Lin 2005)
            best = np.inf
            for k in range(m):
                t = act[k]
                u = uint64(t)
                if t < na:
                    if alpha[u] <= 0.0:
                        continue
                    v = G[u]
                    kit = Li[u]
                else:
                    if alpha[u] >= U[u]:
                        continue
                    v = -G[u]
                    kit = Ri[uint64(t - na)]
                gmax2 = max(gmax2, v)
                b = gmax + v
                if b > 0.0:
                    a = QDi + QD[u] - 2.0 * kit
                    obj = -(b * b) / (a if a > 0.0 else TAU)
                    if obj <= best:
                        best = obj
                        j = t
        if i < 0 or j < 0 or gmax + gmax2 < tol:
            if m == n:
                break
            m = n  # optimal on the active set: look at every variable again
            for t in range(n):
                act[t] = t
            counter = period
            continue
        _step(i, j, Da, Db, off, offT, U, alpha, G, QD, lazy, lslot, lstore, full)
        it += 1
    return it


@njit(cache=True, nogil=True)
def nu_gradient(Da, Db, off, offT, alpha, G, lazy=None):
    """``G += Q alpha`` over the nonzero multipliers (the nu-variant's feasible start, whose linear term is 0), one
    kernel row each (computed into the row store first with ``lazy``), as :func:`pair_smo`'s gradient update."""
    na = Da.shape[0]
    nb = Db.shape[0]
    for s in range(na + nb):
        if alpha[s] == 0.0:
            continue
        if lazy is not None:
            if lazy[0][s] < 0:
                fill_row(lazy, s, na, Da, Db)
            row = lazy[1][lazy[0][s]]
            Ls, Rs = row[:na], row[na:]
        else:
            Ls, Rs = _row(s, na, Da, Db, off, offT)
        d = alpha[s] if s < na else -alpha[s]
        for t in range(na):
            G[t] += Ls[t] * d
        for t in range(nb):
            G[na + t] -= Rs[t] * d


@njit(cache=True, nogil=True)
def pair_smo_nu(Da, Db, off, offT, U, alpha, G, tol, max_iter, lazy=None, qd=None, full=None):
    """:func:`pair_smo` for the nu-variant of the pair's dual (LIBSVM's ``Solver_NU``; seed 001's two equality
    constraints, the class sums of alpha fixed): each step moves two multipliers of one class, chosen by WSS3
    within each class (as :func:`maxmargin.solvers.smo._run_py` with ``_NU``), until
    ``max(gmax_+ + gmax2_+, gmax_- + gmax2_-) < tol``.  No shrinking (the pairs this route takes are small).
    ``G`` must hold ``Q alpha`` (:func:`nu_gradient`); ``full`` as in :func:`pair_smo`.  Returns (steps, the final
    violation)."""
    na = Da.shape[0]
    nb = Db.shape[0]
    n = na + nb
    QD, lslot, lstore = _setup(Da, Db, qd, lazy, full)
    it = 0
    viol = 0.0
    while it < max_iter:
        # per class the maximal -y G over I_up: ip (class a, y = +1), jn (class b, y = -1)
        gmaxp = -np.inf
        gmaxn = -np.inf
        ip = -1
        jn = -1
        for t in range(n):
            u = uint64(t)
            if t < na:
                if alpha[u] < U[u] and -G[u] >= gmaxp:
                    gmaxp = -G[u]
                    ip = t
            elif alpha[u] > 0.0 and G[u] >= gmaxn:
                gmaxn = G[u]
                jn = t
        Lp = lstore[0]  # read only where ip >= 0 / jn >= 0 (and never with ``full``)
        Rn = lstore[0]
        if ip >= 0:
            if lazy is not None:
                if lslot[ip] < 0:
                    fill_row(lazy, ip, na, Da, Db)
                Lp = lstore[lslot[ip]][:na]
            elif full is None:
                Lp = _row(ip, na, Da, Db, off, offT)[0]
        if jn >= 0:
            if lazy is not None:
                if lslot[jn] < 0:
                    fill_row(lazy, jn, na, Da, Db)
                Rn = lstore[lslot[jn]][na:]
            elif full is None:
                Rn = _row(jn, na, Da, Db, off, offT)[1]
        # j: the second-order partner of ip (class a) or jn (class b) in its own class
        gmaxp2 = -np.inf
        gmaxn2 = -np.inf
        j = -1
        best = np.inf
        for t in range(n):
            u = uint64(t)
            if t < na:
                if alpha[u] <= 0.0:
                    continue
                v = G[u]
                if v > gmaxp2:
                    gmaxp2 = v
                b = gmaxp + v
                if ip >= 0 and b > 0.0:
                    a = QD[ip] + QD[u] - 2.0 * (full[uint64(ip), u] if full is not None else Lp[u])
                    obj = -(b * b) / (a if a > 0.0 else TAU)
                    if obj <= best:
                        best = obj
                        j = t
            else:
                if alpha[u] >= U[u]:
                    continue
                v = -G[u]
                if v > gmaxn2:
                    gmaxn2 = v
                b = gmaxn + v
                if jn >= 0 and b > 0.0:
                    a = QD[jn] + QD[u] - 2.0 * (full[uint64(jn), u] if full is not None else Rn[uint64(t - na)])
                    obj = -(b * b) / (a if a > 0.0 else TAU)
                    if obj <= best:
                        best = obj
                        j = t
        viol = max(gmaxp + gmaxp2, gmaxn + gmaxn2)
        if viol < tol or j < 0:
            break
        i = ip if j < na else jn  # (of j's class)
        _step(i, j, Da, Db, off, offT, U, alpha, G, QD, lazy, lslot, lstore, full)
        it += 1
    return it, max(viol, 0.0)
