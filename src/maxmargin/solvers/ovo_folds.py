r"""The cross-validation folds of a one-vs-one problem (``probability=True``), in compiled code.

Platt's sigmoids need, per pair of classes, decision values that each point gets from a model
trained without it: LIBSVM's 5-fold cross-validation, one permutation of the pair's rows per pair
(:func:`maxmargin.probability.fold_plan`).  Where the pairs are solved by
:mod:`maxmargin.solvers.ovo` (their Gram matrices fit in memory as class blocks), so are their
folds, by :func:`one_fold`, called right after the pair's own solve on the same kernel rows (no
kernel value computed twice, no Python call per fold): the pair's blocks, or its row store where the
pair computed its rows as SMO visited them (:func:`maxmargin.solvers.pair_smo.fill_row`; a fold
computes the rows it visits first into the same store, for the folds after it):

* fold :math:`f`'s problem is the pair's dual on the rows outside fold :math:`f`, solved on the
  pair's blocks as they are: the held-out rows get the upper bound 0, which keeps their
  multipliers at 0 and them out of SMO's selection and stopping test (no copy of any block);
* it starts from the full fit's multipliers on those rows, with the equality constraint
  :math:`y^T\alpha = 0` restored by taking the excess from the side that has too much, its largest
  multipliers first (:func:`maxmargin.probability.restore_equality`: few multipliers move, the support
  vectors at their bound stay there), and the gradient :math:`Q\alpha - e` is formed from the blocks;
* :func:`maxmargin.solvers.pair_smo.pair_smo` (WSS3, shrinking, the same stopping rule as every
  SMO here) solves it, LIBSVM's rule gives the offset over the training rows, and the held-out
  rows' decision values :math:`\sum_s \alpha_s y_s K(x_t, x_s) - \rho` are read off the gradient,
  which SMO keeps for every row.

A fold whose training rows hold one class only gives its held-out rows the value +1 or -1 of that
class, as LIBSVM does.  Each pair's values depend on its rows and folds only, so the result is the
same bit for bit on any number of threads.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .pair_smo import _held, fill_row, pair_smo
from .smo import compute_rho


@njit(cache=True, nogil=True)
def _restore_equality(alpha, na):
    """Make sum(alpha[:na]) == sum(alpha[na:]) by taking the excess from the side with more, its largest
    multipliers first (in place): as few multipliers as possible leave their value, so the support
    vectors at their bound mostly stay there (:func:`maxmargin.probability.restore_equality`)."""
    sa = 0.0
    for t in range(na):
        sa += alpha[t]
    sb = 0.0
    for t in range(na, alpha.shape[0]):
        sb += alpha[t]
    lo, hi, excess = (0, na, sa - sb) if sa > sb else (na, alpha.shape[0], sb - sa)
    if excess <= 0.0:
        return
    order = np.argsort(-alpha[lo:hi], kind="mergesort")
    for k in range(order.shape[0]):
        t = lo + order[k]
        take = min(alpha[t], excess)
        alpha[t] -= take
        excess -= take
        if excess <= 0.0:
            break


@njit(cache=True, nogil=True)
def one_fold(
    Da, Db, off, offT, U_pair, alpha_pair, fold, f, tol, max_iter, shrinking, dec, lazy=None, qd=None, full=None
):
    """Fold ``f`` of one pair (rows ``fold != f`` train, ``fold == f`` are held out); the held-out
    decision values go to ``dec`` (pair order).  Returns the SMO steps.

    The fold is solved on the pair's own blocks, no copy: a held-out row gets the upper bound 0, so
    its multiplier stays 0 and it is in neither of SMO's index sets (never selected, no part of the
    stopping test); its gradient is kept up to date like every other, and
    :math:`y_t(G_t + 1) - \rho` is its decision value.  With ``lazy`` (the pair's row store,
    :func:`maxmargin.solvers.pair_smo.fill_row`, and ``qd`` its diagonal) the fold reads the rows the pair's
    solve and the earlier folds computed, and computes those it visits first; with ``full`` (a small pair's whole Gram
    matrix, :func:`maxmargin.solvers.pair_smo.whole_gram`) SMO reads that."""
    na = Da.shape[0]
    nb = Db.shape[0]
    n = na + nb
    train = np.empty(n, dtype=np.bool_)
    ma = 0
    mb = 0
    for t in range(n):
        train[t] = fold[t] != f
        if train[t]:
            if t < na:
                ma += 1
            else:
                mb += 1
    if ma == 0 or mb == 0:  # one class left in training: LIBSVM's +1 / -1
        v = 0.0 if ma == 0 and mb == 0 else (1.0 if ma > 0 else -1.0)
        for t in range(n):
            if not train[t]:
                dec[t] = v
        return 0
    U = np.empty(n)
    alpha = np.empty(n)
    for t in range(n):
        U[t] = U_pair[t] if train[t] else 0.0
        alpha[t] = min(alpha_pair[t], U[t])
    _restore_equality(alpha, na)
    # G = Q alpha - e (Q_st = y_s y_t K_st), every row
    G = -np.ones(n)
    for s in range(n):
        a = alpha[s]
        if a == 0.0:
            continue
        if lazy is not None:  # the row as the store holds it: its class-a segment, then its class-b one
            fill_row(lazy, s, na, Da, Db)
            La, Lb = _held(lazy, s, na)
            c = a if s < na else -a
            for r in range(na):
                G[r] += c * La[r]
            for r in range(nb):
                G[na + r] -= c * Lb[r]
        elif s < na:
            La = Da[s]
            Lb = off[s]
            for r in range(na):
                G[r] += a * La[r]
            for r in range(nb):
                G[na + r] -= a * Lb[r]
        else:
            La = offT[s - na]
            Lb = Db[s - na]
            for r in range(na):
                G[r] -= a * La[r]
            for r in range(nb):
                G[na + r] += a * Lb[r]
    it = pair_smo(Da, Db, off, offT, U, alpha, G, tol, max_iter, shrinking, lazy, qd, full)
    # LIBSVM's offset over the training rows (a held-out row, at alpha = 0 = U, would count as bounded)
    yt = np.empty(ma + mb)
    Gt = np.empty(ma + mb)
    at = np.empty(ma + mb)
    Ut = np.empty(ma + mb)
    k = 0
    for t in range(n):
        if train[t]:
            yt[k] = 1.0 if t < na else -1.0
            Gt[k] = G[t]
            at[k] = alpha[t]
            Ut[k] = U[t]
            k += 1
    rho = compute_rho(yt, Gt, at, Ut)
    for t in range(n):
        if not train[t]:
            dec[t] = (G[t] + 1.0 if t < na else -(G[t] + 1.0)) - rho
    return it


@njit(cache=True, nogil=True)
def layout_folds(labels, perms, offsets, n_folds):
    """For pairs laid end to end (pair p at ``offsets[p]:offsets[p + 1]``; ``labels`` +1/-1 per row in
    increasing row order, ``perms`` each pair's fold permutation, :meth:`SVC._fold_plans`): ``layout``
    (each row's position in :func:`maxmargin.solvers.ovo.layout`'s order: class a's rows first) and
    ``fold`` (each position's fold, the same folds as :func:`maxmargin.probability.plan_of`).  One
    compiled pass for all pairs: 300 classes have 44,850 of them."""
    total = labels.shape[0]
    layout = np.empty(total, dtype=np.int64)
    fold = np.empty(total, dtype=np.int64)
    for p in range(offsets.shape[0] - 1):
        o = offsets[p]
        n = offsets[p + 1] - o
        n_a = 0
        for r in range(n):
            if labels[o + r] > 0:
                n_a += 1
        ka = 0
        kb = n_a
        for r in range(n):
            if labels[o + r] > 0:
                layout[o + r] = ka
                ka += 1
            else:
                layout[o + r] = kb
                kb += 1
        f = 0
        for k in range(n):
            while (f + 1) * n // n_folds <= k:
                f += 1
            fold[o + layout[o + perms[o + k]]] = f
    return layout, fold
