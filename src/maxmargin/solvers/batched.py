r"""The batched working-set solver: decomposition with large working sets and BLAS.

Same problem and same stopping rule as :mod:`maxmargin.solvers.smo` (the
maximal KKT violation :math:`\max_{I_{up}} -y_tG_t - \min_{I_{low}} -y_tG_t < tol`),
but each *round* works on a working set :math:`B` of up to :math:`q` variables
(64 to 1024, from ``n`` and ``cache_size``) instead of two; it starts with
:data:`START_SLOTS` of them and doubles as support vectors turn up:

1. **select** the :math:`q/4` most violating variables not yet in :math:`B`
   (:math:`q` at the start), half from :math:`I_{up}` (largest :math:`-y_tG_t`)
   and half from :math:`I_{low}` (smallest), so the maximal violating pair is
   always in (the nu-variant: per class, the more violating class first); they
   replace members at a bound first, then the oldest ones (free variables keep
   coming back as violators: on ijcnn1, FIFO alone computed 9.5 rows per
   distinct member);
2. **kernel rows** of the new members against the active points, computed in
   column chunks on all cores (:class:`KernelRows`: BLAS on dense data, a
   compiled loop over the nonzeros of sparse rows, the exponential fused into
   the chunk); kept members keep their rows, which are compacted, not
   recomputed, when shrinking drops columns; once rows come to be computed
   again after their member left (:data:`KEEP_AFTER`), rows that left are kept
   too, least recently read out, in what ``cache_size`` leaves beside the
   working set, and a member that comes back reads its row from there;
3. **inner SMO** (WSS3, compiled) on the :math:`q`-variable subproblem, with
   :math:`Q_{BB}` in the CPU cache (refreshed only for the new members), to a
   local tolerance :math:`\max(tol/2, 0.1\,\text{violation})`;
4. **gradient update** of the active variables with one pass
   :math:`G \mathrel{+}= y \circ K_{B\cdot}^T (y_B \circ \Delta\alpha_B)` over the
   rows whose :math:`\alpha` changed;
5. **shrinking** (LIBSVM's rule) every second round; once the active problem is
   solved, the gradient of the shrunk variables is rebuilt and all are checked
   again.  Each shrunk variable's gradient was exact when it was dropped, so the
   rebuild adds only what the multipliers changed since then contributed,
   :math:`G_t \mathrel{+}= y_t\sum_{j\in D}K(x_t,x_j)\,y_j(\alpha_j-\alpha_j^{then})`
   (the rounds log the old values of what they change); from all the support
   vectors instead when that costs fewer kernel values (one fused compiled pass
   for sparse and narrow data).  Where most support vectors sit at a bound from
   early on, :math:`D` is a few thousand multipliers against tens of thousands of
   support vectors (xor, 100k rows: the rebuild 4.1 s -> 0.8 s, the fit 0.76x).

The kernel-block work is behind :class:`KernelRows`, so another array backend
can take its place.
"""

from __future__ import annotations

import time

import numpy as np
from numba import njit, prange, uint64

from .._jit import parallel_and_serial
from .._threads import blas_lifted, one_blas_thread
from ..kernels.engine import CHUNK, PARALLEL_MIN_WORK, KernelRows, held_times
from .base import Solution, Watch
from .smo import compute_rho, compute_rho_nu, initial_alpha, pair_step

#: What this solver takes (read by :mod:`maxmargin.solvers.registry`): the kinds of problem,
#: the common options it reads (the others are ignored), its own options, and its traits.
PROBLEMS = ("dual", "nu-dual")
OPTIONS = ("tol", "max_iter", "shrinking", "cache_size", "callback", "callback_info", "time_limit", "verbose")
OWN_OPTIONS = ("working_set_size_", "inner_max_iter", "grad0", "p_of", "shared_rows")
TRAITS = ("iterative", "libsvm-rho", "gathered-rows")

TAU = 1e-12
#: rebuild the gradient and look at every variable once the active violation is
#: below 10 tol (LIBSVM does); when False, only when the active problem is solved
#: (one rebuild fewer: each costs #SV x #inactive kernel values)
UNSHRINK_EARLY = False
#: the inner SMO stops at max(tol/2, INNER_TOL_FACTOR * global violation)
INNER_TOL_FACTOR = 0.1
#: working-set members at a bound are replaced before free ones
EVICT_BOUND_FIRST = True
#: the fraction of the working set that new violators replace each round
NEW_FRACTION = 0.25
#: the change log of the rebuild holds at most this many entries a variable (16 bytes each); past it the
#: next rebuild is a whole one, from all support vectors
LOG_MAX_PER_VAR = 4
#: the working set starts with this many slots and doubles (up to q) after a round in which more
#: than half of its members are free support vectors, or the nonzero multipliers number more than
#: SV_PER_SLOT a slot: an easy problem (few support vectors, a few hundred SMO steps) is solved
#: without computing q kernel rows it never needs (a 6,569-row problem with 45 support vectors:
#: 0.116 s with q = 1024 from the start, 0.026 s growing), a hard one reaches q within a few rounds
START_SLOTS = 64
SV_PER_SLOT = 8
#: ... SV_PER_SLOT_DEAR where a kernel row costs at least DEAR_ROW_VALUES multiply-adds (dense: columns x features;
#: wide sparse rows on the every-column path): each kernel pass reads all of X there, so a pass for 16 new rows costs
#: 2-3x per row what one for 256 does (5,000 x 2,000 dense: 0.44-0.59 ms a row at 16, 0.25 at 256), and the slots grow
#: sooner.  Measured (session 22, in-process A/B, medians of 7): 3,000 x 3,000 dense (every row a support vector)
#: 0.87, dense2k 0.92-0.94, 10,000 x 500 0.95, 20,000 x 300 0.98; easy embeddings (8,000-20,000 x 384-1,536, a few
#: hundred support vectors) unchanged.  Starting with 256 slots instead won as much there but cost easy embeddings
#: 1.19-1.26 (20,000 x 768, 15,000 x 384: rows they never needed).
SV_PER_SLOT_DEAR = 2
DEAR_ROW_VALUES = 4_000_000
#: keep kernel rows after their member leaves the working set, in what ``cache_size`` leaves beside it, once more
#: than KEEP_AFTER of the rows computed (and at least q of them) were computed before -- where a row is dear: wide
#: sparse data, or dense data of at least KEEP_MIN_FEATURES features (where rows are cheap, following the kept rows
#: through the shrinks cost about what they saved: a9a, ijcnn1 and sparse40k at 8,000 to 20,000 rows, -2% to +10%;
#: dense2k 0.85x)
KEEP_ROWS = True
KEEP_AFTER = 0.05
KEEP_MIN_FEATURES = 64
#: where rows are dearer still (dense from FULL_MIN_FEATURES features, wide sparse from FULL_MIN_POSTINGS postings
#: a kernel value) and cache_size keeps at least q rows beside the working set's, compute every row over every
#: column, whatever the active set: no gather of the columns' data, no compaction at a shrink, no kept rows dropped
#: when the active set grows again, and the rebuilds of shrunk gradients read the kept rows of the changed
#: variables.  Measured (session 14, `/tmp/s14/fullab.py`, in-process, with / without): dense2k 0.84, SVR on text2
#: 0.78-0.82, text2 0.96-1.02, 8,000 x 768 unit rows 0.82-0.86, 6,000 x 1,536 0.86; where rows are cheaper:
#: 8,000 x 384 1.03, hashed300k 10,000 1.08; where few kept rows fit (20,000 x 384: 286 beside q = 1,024): 1.34
FULL_COLUMNS = True
FULL_MIN_FEATURES = 512
FULL_MIN_POSTINGS = 4.0
#: ... where cache_size holds this many rows per working-set slot (12,000 x 768 with 2.1: 1.05; 20,000 rows: 0.93
#: without)
FULL_MIN_ROWS_PER_SLOT = 3

#: the working set follows the active columns: once shrinking leaves few enough columns that ``cache_size`` holds
#: at least twice q kernel rows over them (:func:`working_set_size` of the active columns), q doubles (or more) and
#: the kernel rows move to a store of the new width; when the active set grows again q returns to what the width
#: allows.  Not with ``working_set_size_``, rows over every column (FULL_COLUMNS) or ``shared_rows``.
FOLLOW_ACTIVE = True
FOLLOW_GROWTH = 2.0

#: seconds between two progress reports (callback, time limit, verbose line) of a fit
REPORT_SECONDS = 0.2


@njit(cache=True, inline="always")
def _inner_step(KB, ws, y, U, QD, shift, alpha, Gl, si, sj):
    """The clipped two-variable step on members ``si``, ``sj`` of the working set
    (:func:`maxmargin.solvers.smo.pair_step`) and its update of the local gradient."""
    i = ws[si]
    j = ws[sj]
    old_ai = alpha[i]
    old_aj = alpha[j]
    quad = QD[i] + QD[j] - 2.0 * KB[si, sj]
    if quad <= 0.0:
        quad = TAU
    ai, aj = pair_step(y[i] != y[j], old_ai, old_aj, Gl[si], Gl[sj], U[i], U[j], quad)
    alpha[i] = ai
    alpha[j] = aj
    dai = (ai - old_ai) * y[i]
    daj = (aj - old_aj) * y[j]
    Ki = KB[si]
    Kj = KB[sj]
    for s in range(ws.shape[0]):
        Gl[s] += y[uint64(ws[s])] * (Ki[s] * dai + Kj[s] * daj)  # unsigned: no negative-index test
    Gl[si] += shift[i] * (ai - old_ai)
    Gl[sj] += shift[j] * (aj - old_aj)


@njit(cache=True, inline="always")
def _most_violating_up(ws, y, U, alpha, Gl):
    """Per class, the member of I_up with the largest -y G (last one on ties):
    ``(value, slot)`` for y = +1, then for y = -1 (slot -1 when there is none)."""
    gmaxp = -np.inf
    gmaxn = -np.inf
    sp_ = -1
    sn_ = -1
    for s in range(ws.shape[0]):
        v = uint64(ws[s])  # unsigned: no negative-index test on each load
        if y[v] > 0:
            if alpha[v] < U[v] and -Gl[s] >= gmaxp:
                gmaxp = -Gl[s]
                sp_ = s
        else:
            if alpha[v] > 0.0 and Gl[s] >= gmaxn:
                gmaxn = Gl[s]
                sn_ = s
    return gmaxp, sp_, gmaxn, sn_


#: the inner SMO's float flags: its values are finite (the gradient, the kernel block) or -inf (the flags of members
#: outside I_up / I_low), never NaN; ``nsz`` lets the selects of its scans compile to plain compares
_INNER_MATH = {"nnan", "nsz"}


@njit(cache=True, fastmath=_INNER_MATH, error_model="numpy", inline="always")
def _argmax_last(x):
    """``(max(x), the last index that holds it)``: four independent chains of compare and select (one chain waits
    on each compare's latency; a quarter of the time on 1,024 members), then their results, ties to the later index.
    -inf and index -1 for an empty ``x``."""
    q = x.shape[0]
    m0 = m1 = m2 = m3 = -np.inf
    i0 = i1 = i2 = i3 = -1
    q4 = q - q % 4
    for s in range(0, q4, 4):
        if x[s] >= m0:
            m0, i0 = x[s], s
        if x[s + 1] >= m1:
            m1, i1 = x[s + 1], s + 1
        if x[s + 2] >= m2:
            m2, i2 = x[s + 2], s + 2
        if x[s + 3] >= m3:
            m3, i3 = x[s + 3], s + 3
    for s in range(q4, q):
        if x[s] >= m0:
            m0, i0 = x[s], s
    if m1 > m0 or (m1 == m0 and i1 > i0):
        m0, i0 = m1, i1
    if m3 > m2 or (m3 == m2 and i3 > i2):
        m2, i2 = m3, i3
    if m2 > m0 or (m2 == m0 and i2 > i0):
        m0, i0 = m2, i2
    return m0, i0


@njit(cache=True, fastmath=_INNER_MATH, error_model="numpy", inline="always")
def _max4(x):
    """max(x) in four chains (-inf for an empty ``x``)."""
    q = x.shape[0]
    m0 = m1 = m2 = m3 = -np.inf
    q4 = q - q % 4
    for s in range(0, q4, 4):
        m0 = x[s] if x[s] > m0 else m0
        m1 = x[s + 1] if x[s + 1] > m1 else m1
        m2 = x[s + 2] if x[s + 2] > m2 else m2
        m3 = x[s + 3] if x[s + 3] > m3 else m3
    for s in range(q4, q):
        m0 = x[s] if x[s] > m0 else m0
    return max(max(m0, m1), max(m2, m3))


@njit(cache=True, fastmath=_INNER_MATH, error_model="numpy", inline="always")
def _set_flags(yl, al, Ul, up, low, s):
    """Member ``s``'s flags: 0 where it is in I_up (``up``) / I_low (``low``), else -inf."""
    if yl[s] > 0:
        up[s] = 0.0 if al[s] < Ul[s] else -np.inf
        low[s] = 0.0 if al[s] > 0.0 else -np.inf
    else:
        up[s] = 0.0 if al[s] > 0.0 else -np.inf
        low[s] = 0.0 if al[s] < Ul[s] else -np.inf


@njit(cache=True, fastmath=_INNER_MATH, error_model="numpy")
def _inner_smo(KB, ws, y, U, QD, shift, alpha, Gl, eps, max_iter):
    r"""WSS3 SMO on the working set only.

    ``KB[s, t]`` is the kernel between the data rows of members ``s`` and ``t``
    of the working set; ``ws[s]`` the variable of member s.  ``Gl`` holds the gradient of the
    working-set variables (updated in place with ``alpha``).  Returns the
    number of steps and the first local violation.

    Each step: i = the last member of I_up with the largest :math:`-y_s G_s`; j = the last member of I_low with
    the largest gain :math:`b^2/a`, :math:`b = -y_iG_i + y_sG_s > 0`, :math:`a = Q_{ii} + Q_{ss} - 2K_{is}`
    (LIBSVM's second-order rule; ties to the later member, as one forward pass with ``>=`` takes them).  The
    members' labels, multipliers, bounds and diagonal are copied into contiguous arrays first, and I_up / I_low
    are held as 0 / -inf flags added to the values, so each scan is a branch-free pass (the gains' divisions
    vectorised) and a compare-and-select in four chains (:func:`_argmax_last`).  The same steps, bit for bit, as
    a scan that gathers ``y[ws[s]]`` and branches on each member's bounds, at 0.41-0.50 of its time
    (1,024 members, session 48)."""
    q = ws.shape[0]
    yl = np.empty(q)  # labels, multipliers, bounds, diagonal of the members
    al = np.empty(q)
    Ul = np.empty(q)
    ql = np.empty(q)
    up = np.empty(q)  # 0 in I_up, else -inf
    low = np.empty(q)  # 0 in I_low, else -inf
    uv = np.empty(q)  # -y G + up
    lv = np.empty(q)  # y G + low
    gain = np.empty(q)
    for s in range(q):
        v = ws[s]
        yl[s], al[s], Ul[s], ql[s] = y[v], alpha[v], U[v], QD[v]
        _set_flags(yl, al, Ul, up, low, s)
        uv[s] = up[s] - yl[s] * Gl[s]
    first_viol = -1.0
    it = 0
    while it < max_iter:
        gmax, si = _argmax_last(uv)
        if si < 0 or gmax == -np.inf:
            break
        qi = ql[si]
        Ki = KB[si]
        for s in range(q):
            val = yl[s] * Gl[s] + low[s]
            b = gmax + val
            a = qi + ql[s] - 2.0 * Ki[s]
            a = a if a > 0.0 else TAU
            gain[s] = (b * b) / a if b > 0.0 else -np.inf
            lv[s] = val
        viol = gmax + _max4(lv)
        if first_viol < 0.0:
            first_viol = viol
        best, sj = _argmax_last(gain)
        if viol < eps or best == -np.inf:
            break
        old_ai, old_aj = al[si], al[sj]
        quad = qi + ql[sj] - 2.0 * Ki[sj]
        if quad <= 0.0:
            quad = TAU
        ai, aj = pair_step(yl[si] != yl[sj], old_ai, old_aj, Gl[si], Gl[sj], Ul[si], Ul[sj], quad)
        al[si], al[sj] = ai, aj
        _set_flags(yl, al, Ul, up, low, si)
        _set_flags(yl, al, Ul, up, low, sj)
        dai = (ai - old_ai) * yl[si]
        daj = (aj - old_aj) * yl[sj]
        Kj = KB[sj]
        for s in range(q):
            g = Gl[s] + yl[s] * (Ki[s] * dai + Kj[s] * daj)
            Gl[s] = g
            uv[s] = up[s] - yl[s] * g
        Gl[si] += shift[ws[si]] * (ai - old_ai)
        Gl[sj] += shift[ws[sj]] * (aj - old_aj)
        uv[si] = up[si] - yl[si] * Gl[si]
        uv[sj] = up[sj] - yl[sj] * Gl[sj]
        it += 1
    for s in range(q):
        alpha[ws[s]] = al[s]
    return it, first_viol


@njit(cache=True)
def _inner_smo_nu(KB, ws, y, U, QD, shift, alpha, Gl, eps, max_iter):
    """As :func:`_inner_smo` for the nu-variant (two equality constraints, one per
    class): both variables of a step come from the same class, the first the most
    violating in its class, the second by WSS3 against it (LIBSVM's Solver_NU)."""
    q = ws.shape[0]
    first_viol = -1.0
    it = 0
    while it < max_iter:
        gmaxp, sp_, gmaxn, sn_ = _most_violating_up(ws, y, U, alpha, Gl)
        gmaxp2 = -np.inf
        gmaxn2 = -np.inf
        sj = -1
        best = np.inf
        for s in range(q):
            v = uint64(ws[s])  # unsigned: no negative-index test on each load
            if y[v] > 0:
                if alpha[v] <= 0.0:
                    continue
                val = Gl[s]
                if val > gmaxp2:
                    gmaxp2 = val
                b = gmaxp + val
                if sp_ >= 0 and b > 0.0:
                    a = QD[ws[sp_]] + QD[v] - 2.0 * KB[sp_, s]
                    if a <= 0.0:
                        a = TAU
                    obj = -(b * b) / a
                    if obj <= best:
                        best = obj
                        sj = s
            else:
                if alpha[v] >= U[v]:
                    continue
                val = -Gl[s]
                if val > gmaxn2:
                    gmaxn2 = val
                b = gmaxn + val
                if sn_ >= 0 and b > 0.0:
                    a = QD[ws[sn_]] + QD[v] - 2.0 * KB[sn_, s]
                    if a <= 0.0:
                        a = TAU
                    obj = -(b * b) / a
                    if obj <= best:
                        best = obj
                        sj = s
        viol = max(gmaxp + gmaxp2, gmaxn + gmaxn2)
        if first_viol < 0.0:
            first_viol = viol
        if viol < eps or sj < 0:
            break
        si = sp_ if y[ws[sj]] > 0 else sn_
        _inner_step(KB, ws, y, U, QD, shift, alpha, Gl, si, sj)
        it += 1
    return it, first_viol


def _grad_update_py(KB, rows, coef, vars_, vpos, y, G, m):
    """G[v] += y[v] * sum_r coef[r] * KB[rows[r], vpos[k]] for v = vars_[k]
    (the sums over column blocks in parallel)."""
    acc = np.zeros(m)
    nb = (m + CHUNK - 1) // CHUNK
    nr = rows.shape[0]
    for b in prange(nb):
        lo = b * CHUNK
        hi = min(lo + CHUNK, m)
        a = acc[lo:hi]
        w = hi - lo
        r = 0
        while r + 4 <= nr:  # four rows per pass over the chunk of acc
            c0, c1, c2, c3 = coef[r], coef[r + 1], coef[r + 2], coef[r + 3]
            k0 = KB[rows[r]][lo:hi]
            k1 = KB[rows[r + 1]][lo:hi]
            k2 = KB[rows[r + 2]][lo:hi]
            k3 = KB[rows[r + 3]][lo:hi]
            for t in range(w):
                a[t] += (c0 * k0[t] + c1 * k1[t]) + (c2 * k2[t] + c3 * k3[t])
            r += 4
        while r < nr:
            c = coef[r]
            k0 = KB[rows[r]][lo:hi]
            for t in range(w):
                a[t] += c * k0[t]
            r += 1
    for k in range(vars_.shape[0]):
        v = vars_[k]
        G[v] += y[v] * acc[vpos[k]]


def _gather_rows_py(S, slots, scols, KB, rows):
    """KB[rows[r], t] = S[slots[r], scols[t]]: kernel rows read from rows computed before over other columns
    (``shared_rows``), rows in parallel."""
    m = scols.shape[0]
    for r in prange(slots.shape[0]):
        src = S[slots[r]]
        dst = KB[rows[r]]
        for t in range(m):
            dst[t] = src[scols[t]]


_gather_rows_par, _gather_rows_ser = parallel_and_serial(_gather_rows_py)


def _refresh_block_py(KB, rowslot, KS, fresh, occ, cp, posf):
    """KS[s, t] = KS[t, s] = K(member s, member t) for the slots ``s`` in ``fresh``
    and every occupied slot ``t`` (``cp[t]``: the column of t's data row in KB), from
    the rows of the fresh members only (``KB[rowslot[s]]``; the solver takes Q symmetric throughout): an entry
    between two fresh slots from the row of the later one in ``fresh`` (``posf[t]``: t's place in ``fresh``, -1
    when t is not fresh), as one pass over ``fresh`` writing both entries would leave it.  Two passes in
    parallel: the fresh slots' rows of KS, then the other entries of their columns, row by row (each entry
    written by one thread, and read only where the second pass writes nothing)."""
    for a in prange(fresh.shape[0]):
        s = fresh[a]
        row = KB[rowslot[s]]
        for b in range(occ.shape[0]):
            t = occ[b]
            KS[s, t] = row[cp[t]]
    for b in prange(occ.shape[0]):
        t = occ[b]
        pt = posf[t]
        for a in range(fresh.shape[0]):
            if pt < 0 or pt < a:
                s = fresh[a]
                KS[t, s] = KS[s, t]


_refresh_block_par, _refresh_block_ser = parallel_and_serial(_refresh_block_py)
#: Q_BB refreshes of at least this many entries run on threads
REFRESH_PARALLEL_MIN = 65_536


def _refresh_block(KB, rowslot, KS, fresh, occ, cp):
    posf = np.full(KS.shape[0], -1, dtype=np.int64)
    posf[fresh] = np.arange(fresh.shape[0])
    big = fresh.shape[0] * occ.shape[0] >= REFRESH_PARALLEL_MIN
    (_refresh_block_par if big else _refresh_block_ser)(KB, rowslot, KS, fresh, occ, cp, posf)


@njit(cache=True)
def _gather_block(KB, rows, cols):
    """KB[rows][:, cols] as a new contiguous array."""
    m = rows.shape[0]
    out = np.empty((m, cols.shape[0]))
    for a in range(m):
        src = KB[rows[a]]
        for b in range(cols.shape[0]):
            out[a, b] = src[cols[b]]
    return out


@njit(cache=True, parallel=True)
def _compact_rows(KB, slots, pos):
    """KB[s, :k] = KB[s, pos] for each slot s (pos increasing, so pos[t] >= t and
    the copy can run in place from the left)."""
    k = pos.shape[0]
    for a in prange(slots.shape[0]):
        row = KB[slots[a]]
        for t in range(k):
            row[t] = row[pos[t]]


_grad_update_par, _grad_update_ser = parallel_and_serial(_grad_update_py)


def _grad_update(KB, rows, coef, vars_, vpos, y, G, m):
    fn = _grad_update_par if rows.shape[0] * m >= PARALLEL_MIN_WORK else _grad_update_ser
    fn(KB, rows, coef, vars_, vpos, y, G, m)


@njit(cache=True)
def _violators(act, y, G, alpha, U):
    """Over the active variables ``act``: scores -y G, masks of I_up and I_low,
    the maximal violation, and LIBSVM's shrinking thresholds
    (Gmax1 = max_{I_up} -y G, Gmax2 = max_{I_low} y G)."""
    m = act.shape[0]
    score = np.empty(m)
    up = np.zeros(m, dtype=np.bool_)
    low = np.zeros(m, dtype=np.bool_)
    gmax = -np.inf
    gmin = np.inf
    for k in range(m):
        t = act[k]
        s = -y[t] * G[t]
        score[k] = s
        if y[t] > 0:
            u = alpha[t] < U[t]
            lo = alpha[t] > 0.0
        else:
            u = alpha[t] > 0.0
            lo = alpha[t] < U[t]
        up[k] = u
        low[k] = lo
        if u and s > gmax:
            gmax = s
        if lo and s < gmin:
            gmin = s
    return score, up, low, gmax - gmin, gmax, -gmin


@njit(cache=True)
def _violators_nu(act, y, G, alpha, U):
    """As :func:`_violators` for the nu-variant: the violation is the larger of the
    two classes' (each class has its own equality constraint)."""
    m = act.shape[0]
    score = np.empty(m)
    up = np.zeros(m, dtype=np.bool_)
    low = np.zeros(m, dtype=np.bool_)
    gmax = np.array([-np.inf, -np.inf])  # per class (+1, -1): max over I_up of -y G
    gmin = np.array([np.inf, np.inf])  # min over I_low of -y G
    for k in range(m):
        t = act[k]
        s = -y[t] * G[t]
        score[k] = s
        c = 0 if y[t] > 0 else 1
        if y[t] > 0:
            u = alpha[t] < U[t]
            lo = alpha[t] > 0.0
        else:
            u = alpha[t] > 0.0
            lo = alpha[t] < U[t]
        up[k] = u
        low[k] = lo
        if u and s > gmax[c]:
            gmax[c] = s
        if lo and s < gmin[c]:
            gmin[c] = s
    return score, up, low, gmax[0] - gmin[0], gmax[1] - gmin[1]


@njit(cache=True)
def _shrinkable(act, y, G, alpha, U, gmax1, gmax2):
    """LIBSVM's rule: a variable at a bound whose gradient says it stays there."""
    m = act.shape[0]
    out = np.zeros(m, dtype=np.bool_)
    for k in range(m):
        t = act[k]
        if alpha[t] >= U[t]:
            out[k] = (-G[t] > gmax1) if y[t] > 0 else (-G[t] > gmax2)
        elif alpha[t] <= 0.0:
            out[k] = (G[t] > gmax2) if y[t] > 0 else (G[t] > gmax1)
    return out


def _top(cands, key, k):
    """The k candidates with the smallest key, ordered."""
    if k <= 0 or cands.size == 0:
        return cands[:0]
    if cands.size > k:
        part = np.argpartition(key, k - 1)[:k]
        cands, key = cands[part], key[part]
    return cands[np.argsort(key, kind="stable")]


def working_set_size(n_var, n_data, cache_size):
    """q from the problem size and the kernel-row budget (rows of n_data doubles)."""
    budget = int(cache_size * 1024 * 1024 // (8 * max(n_data, 1)))
    q = min(1024, max(64, budget))
    return int(min(q, n_var))


def store_rows(q, width, cache_size, keep):
    """Rows of the kernel-row store: the working set's q, plus (``keep``) those cache_size holds beyond q at
    ``width`` columns, at most ``width``."""
    room = max(0, min(width, int(cache_size * 1024 * 1024 // (8 * max(width, 1)))) - q)
    return q + (room if keep else 0)


def solve(problem, **options):
    """Solve a :class:`~maxmargin.problem.DualProblem` by batched decomposition.

    Parameters are those of :func:`maxmargin.solvers.smo.solve` (``shrinking``
    as there; the nu-variant always runs without), plus
    ``working_set_size_`` (q; default from ``n`` and ``cache_size``) and
    ``inner_max_iter`` (steps of the inner SMO per round; default ``10 q``) and
    ``grad0`` (the gradient :math:`Q\alpha_0 + p` at the warm start, when the caller has it:
    the first pass over the support vectors is then skipped) and, with it, ``p_of`` (a callable
    returning the linear term, called at most once, when :math:`p` is dear and ``problem.p`` a
    placeholder: the restricted problems of :func:`maxmargin.scaleout.global_solve`, where
    :math:`p = G_0 - Q\alpha_0` is a kernel pass; only a rebuild of shrunk gradients from all the
    support vectors, a callback and the objective need it; the objective is NaN when nothing did).
    ``max_iter`` counts inner SMO steps, as in the two-variable solver.

    All parallel work runs on Numba's threads; BLAS is held to one thread
    meanwhile (each Numba thread calls it on its own chunk), since BLAS threads
    spinning beside Numba's cost more than they give on few cores.
    """
    with one_blas_thread():
        return _solve(problem, **options)


def _solve(
    problem,
    tol=1e-3,
    max_iter=-1,
    cache_size=200.0,
    working_set_size_=None,
    callback=None,
    time_limit=None,
    verbose=False,
    callback_info=None,
    shrinking=True,
    inner_max_iter=None,
    grad0=None,
    p_of=None,
    shared_rows=None,
):
    nu = bool(problem.nu_constraints)
    if p_of is not None and grad0 is None:
        raise ValueError("p_of (the linear term on demand) needs grad0")
    if nu:
        # the nu-variant runs without shrinking: LIBSVM's per-class shrinking rule is
        # not carried over (yet), so the rounds look at every variable
        shrinking = False
    t0 = time.perf_counter()
    watch = Watch(callback, callback_info, time_limit, tol)
    kr = KernelRows(problem.X, problem.kernel)
    n_data = kr.n
    kidx = np.ascontiguousarray(problem.index, dtype=np.int64)
    y = np.ascontiguousarray(problem.y, dtype=np.float64)
    p_known = [None if p_of is not None else np.ascontiguousarray(problem.p, dtype=np.float64)]

    def linear_term():
        if p_known[0] is None:
            p_known[0] = np.ascontiguousarray(p_of(), dtype=np.float64)
        return p_known[0]

    U = np.ascontiguousarray(problem.upper, dtype=np.float64)
    shift = np.ascontiguousarray(problem.shift, dtype=np.float64)
    n_var = y.shape[0]
    QD = kr.diag()[kidx] + shift
    alpha = initial_alpha(problem)
    q = working_set_size_ or working_set_size(n_var, n_data, cache_size)
    q = int(max(2, min(q, n_var)))
    # the slots in use: all q when the user set q, else START_SLOTS, doubling (see START_SLOTS)
    qe = q if working_set_size_ else min(q, START_SLOTS)

    # kernel rows: those of the working set's slots (slot s reads row rowslot[s]) and, in what cache_size leaves
    # beside them, rows kept after their member left (least recently used out): a member that comes back takes
    # its row from there instead of a new kernel pass (a 5,000 x 2,000 dense problem computed 7,440 rows for
    # 3,595 distinct ones without them)
    dear = kr.path == "wide" or (kr.path == "dense" and kr.X.shape[1] >= KEEP_MIN_FEATURES)
    n_rows = store_rows(q, n_data, cache_size, KEEP_ROWS and dear)
    full_columns = (
        FULL_COLUMNS
        and KEEP_ROWS
        and shared_rows is None
        and n_rows >= FULL_MIN_ROWS_PER_SLOT * q
        and kr.rows_cost_at_least(FULL_MIN_FEATURES, FULL_MIN_POSTINGS)
    )
    sv_per_slot = SV_PER_SLOT
    if not working_set_size_ and (
        (kr.path == "dense" and n_data * kr.X.shape[1] >= DEAR_ROW_VALUES) or (full_columns and kr.path == "wide")
    ):
        sv_per_slot = SV_PER_SLOT_DEAR  # rows dear enough that small passes cost (see SV_PER_SLOT_DEAR)
    all_rows = np.arange(n_data, dtype=np.int64)
    KB = np.empty((n_rows, n_data))
    rowslot = np.arange(q, dtype=np.int64)
    held = np.full(n_rows, -1, dtype=np.int64)  # the data row whose kernel row each row of KB holds (-1: none)
    row_of = np.full(n_data, -1, dtype=np.int64)  # the row of KB holding each data row's kernel row
    used = np.zeros(n_rows, dtype=np.int64)  # the round each row of KB was last read
    # rows of KB in use: as many as the slots in use (the working set's rows stay few while they are), all once rows
    # come to be computed again (KEEP_AFTER), where cache_size leaves room beside q
    rows_open = [qe]
    computed_once = np.zeros(n_data, dtype=bool)
    KS = np.empty((qe, qe))  # kernel among the members, by slot (Q_BB without y), slots 0..qe-1
    ks_member = np.full(q, -1, dtype=np.int64)  # the member each slot had when KS was filled
    ws = np.full(q, -1, dtype=np.int64)  # variable in each slot (-1: empty)
    in_ws = np.zeros(n_var, dtype=bool)
    age = np.zeros(q, dtype=np.int64)  # round at which each slot was filled

    # active set: the variables the rounds look at; colpos maps data rows to columns of KB
    act = np.arange(n_var, dtype=np.int64)
    colpos = np.arange(n_data, dtype=np.int64)
    vpos = kidx.copy()
    m_cols = n_data

    stats = {"rebuilds": 0, "delta_rebuilds": 0, "rebuild_time": 0.0, "rows_computed": 0, "rows_again": 0}
    # kernel rows computed before, over other columns (shared_rows = (S, slot, col): S[slot[i], col[j]] =
    # K(data row i, data row j), slot -1 where S lacks the row): read instead of computed
    S = None
    if shared_rows is not None:
        S, s_slot, s_col = shared_rows
        s_slot = np.ascontiguousarray(s_slot, dtype=np.int64)
        s_col = np.ascontiguousarray(s_col, dtype=np.int64)
        if S.ndim != 2 or s_slot.shape != (n_data,) or s_col.shape != (n_data,):
            raise ValueError("shared_rows must be (rows, slot of each data row, column of each data row)")
        stats["rows_shared"] = 0
    scols = [None if S is None else s_col]  # the columns of S that the active columns are
    identity_index = n_var == n_data and bool(np.array_equal(kidx, np.arange(n_data)))

    # What the rebuild needs: each shrink's dropped variables with the position in the change log at
    # that moment (their gradient was exact then), and the log of the multipliers the rounds changed
    # (variables and their values before the change), chunk by chunk.
    shrunk = []  # (log position, dropped variables)
    log_vars, log_old = [], []
    log_len = [0]  # entries logged; -1: past LOG_MAX_PER_VAR a variable, the next rebuild is a whole one

    def delta_cost():
        """Kernel values a rebuild from the changes costs (``sum |dropped| x |changed since|``), and the
        changes: the variables changed since each shrink, with their value at that shrink."""
        if not log_vars or log_len[0] < 0:
            return 0, None
        changed = np.concatenate(log_vars)
        before = np.concatenate(log_old)
        cost, parts = 0, []
        for pos, dropped in shrunk:
            u, first = np.unique(changed[pos:], return_index=True)
            d = alpha[u] - before[pos + first]
            nz = d != 0.0
            parts.append((dropped, u[nz], d[nz]))
            cost += dropped.size * int(nz.sum())
        return cost, parts

    def kernel_sum(vars_, coef_v, targets):
        """``y_t * sum_j K(t, j) coef_j`` for the target variables (one coefficient per variable); the rows held
        elsewhere are read (``shared_rows``, or the kept rows of KB over every column), the others computed."""
        if identity_index:  # one variable per data row, in order
            rows, coef, trows, tinv = vars_, coef_v, targets, None
        else:  # one coefficient per data row (SVR: two variables share a row)
            rows, inv = np.unique(kidx[vars_], return_inverse=True)
            coef = np.zeros(rows.size)
            np.add.at(coef, inv, coef_v)
            trows, tinv = np.unique(kidx[targets], return_inverse=True)
        if S is not None:
            store, slots, cols = S, s_slot[rows], s_col[trows]
        elif full_columns:
            store, slots, cols = KB, row_of[rows], trows
        else:
            store = None
        if store is None:
            vals = kr.times(rows, coef, trows)
        else:
            have = slots >= 0
            vals = held_times(store, slots[have], coef[have], cols)
            if not have.all():
                vals += kr.times(rows[~have], coef[~have], trows)
        return y[targets] * (vals if tinv is None else vals[tinv])

    def rebuild_inactive_gradient(active_mask):
        """G of the variables outside the active set: from the multipliers changed since each was
        dropped (its gradient was exact then: ``G_t += y_t sum_j K(t, j) y_j (alpha_j - alpha_j^then)``),
        or from all the support vectors when that is cheaper (early shrinks, few support vectors)."""
        inactive = np.flatnonzero(~active_mask)
        if inactive.size == 0:
            return
        stats["rebuilds"] += 1
        tr = time.perf_counter()
        sv = np.flatnonzero(alpha > 0)
        cost, parts = delta_cost() if shrunk else (0, None)
        with blas_lifted():  # where no other solve runs beside this one
            if parts is not None and cost < inactive.size * sv.size:
                stats["delta_rebuilds"] += 1
                for dropped, vars_, d in parts:
                    if vars_.size:
                        G[dropped] += kernel_sum(vars_, d * y[vars_], dropped)
            else:
                own = linear_term()[inactive] + shift[inactive] * alpha[inactive]
                G[inactive] = own + kernel_sum(sv, alpha[sv] * y[sv], inactive)
        shrunk.clear()
        log_vars.clear()
        log_old.clear()
        log_len[0] = 0
        stats["rebuild_time"] += time.perf_counter() - tr

    follow = FOLLOW_ACTIVE and not working_set_size_ and not full_columns and S is None

    def rows_for(width):
        """(q, rows of KB) for ``width`` active columns, as at the start for ``n_data``."""
        q_w = int(max(2, min(working_set_size(n_var, width, cache_size), n_var)))
        return q_w, store_rows(q_w, width, cache_size, KEEP_ROWS and dear)

    def follow_columns(width, kept):
        """q and KB for ``width`` active columns (FOLLOW_ACTIVE): larger where they shrank enough (``kept``: the
        rows of KB hold the new columns first, compacted; they move over), back to what the width allows where
        they grew past the store's width (the rows hold old columns: none move)."""
        nonlocal q, KB, KS, qe, n_rows, rowslot, ks_member, ws, age, held, used
        q_w, rows_w = rows_for(width)
        if kept and (q_w < FOLLOW_GROWTH * q or rows_w < n_rows):
            return
        if not kept and width <= KB.shape[1]:  # (the store holds q rows of this width: q stays)
            return
        old_rows = n_rows
        if kept:  # grow: the same rows, narrower
            KB2 = np.empty((rows_w, width))
            KB2[:n_rows] = KB[:, :width]
            KB = KB2
            held = np.concatenate([held, np.full(rows_w - n_rows, -1, dtype=np.int64)])
            used = np.concatenate([used, np.zeros(rows_w - n_rows, dtype=np.int64)])
            rowslot = np.concatenate([rowslot, np.arange(q, q_w, dtype=np.int64)])
            ks_member = np.concatenate([ks_member, np.full(q_w - q, -1, dtype=np.int64)])
            ws = np.concatenate([ws, np.full(q_w - q, -1, dtype=np.int64)])
            age = np.concatenate([age, np.zeros(q_w - q, dtype=np.int64)])
        else:  # the active set grew: no row is valid; fewer slots where the width allows fewer
            KB = None  # (the old store goes before the new one comes)
            KB = np.empty((rows_w, width))
            held = np.full(rows_w, -1, dtype=np.int64)
            used = np.zeros(rows_w, dtype=np.int64)
            if q_w < q:
                for v in ws[q_w:]:
                    if v >= 0:
                        in_ws[v] = False
                ws = ws[:q_w].copy()
                ks_member = ks_member[:q_w].copy()
                age = age[:q_w].copy()
                if qe > q_w:
                    qe = q_w
                    KS = np.ascontiguousarray(KS[:qe, :qe])
            rowslot = np.arange(q_w, dtype=np.int64)
            if q_w > q:
                ks_member = np.concatenate([ks_member, np.full(q_w - q, -1, dtype=np.int64)])
                ws = np.concatenate([ws, np.full(q_w - q, -1, dtype=np.int64)])
                age = np.concatenate([age, np.zeros(q_w - q, dtype=np.int64)])
        q, n_rows = q_w, rows_w
        rows_open[0] = n_rows if rows_open[0] >= old_rows else min(max(rows_open[0], qe), n_rows)
        stats["q_changes"] = stats.get("q_changes", 0) + 1

    def set_active(new_act):
        """Change the active set.  When it shrinks, the kernel rows already in the
        working set are compacted onto the remaining columns (a gather, no kernel
        values recomputed); when it grows they are computed again."""
        nonlocal act, vpos, m_cols
        act = new_act
        # full_columns: the rows stay over every column, nothing to gather, compact or drop
        cols = all_rows if full_columns else (act if identity_index else np.unique(kidx[act]))  # act stays sorted
        full = cols.size == n_data
        if not full_columns:
            old_pos = colpos[cols]
            shrinks = cols.size <= m_cols and bool(np.all(old_pos >= 0))
            kr.set_columns(None if full else cols)
            if S is not None:
                scols[0] = s_col if full else np.ascontiguousarray(s_col[cols])
            if shrinks:
                valid = np.flatnonzero(held >= 0)
                if valid.size:
                    _compact_rows(KB, valid.astype(np.int64), old_pos.astype(np.int64))
            else:  # rows hold the old columns
                row_of[held[held >= 0]] = -1
                held[:] = -1
            if follow:
                follow_columns(cols.size, shrinks)
        colpos[:] = -1
        colpos[cols] = np.arange(cols.size)
        vpos = colpos[kidx[act]]
        m_cols = cols.size
        keep = ws >= 0
        keep[keep] = np.isin(ws[keep], act)
        for s in np.flatnonzero(~keep & (ws >= 0)):
            in_ws[ws[s]] = False
        ws[~keep] = -1

    # gradient G = Q alpha + p (warm starts: from the nonzero alphas)
    if grad0 is not None:
        G = np.array(grad0, dtype=np.float64)
        if G.shape != (n_var,) or not np.all(np.isfinite(G)):
            raise ValueError(f"grad0 must hold {n_var} finite values, got shape {G.shape}")
    else:
        G = linear_term() + shift * alpha
        if np.any(alpha > 0):
            G[:] = 0.0
            rebuild_inactive_gradient(np.zeros(n_var, dtype=bool))

    n_iter = 0
    rounds = 0
    status = "max_iter"
    viol = np.inf
    last_report = t0
    stalls = 0
    unshrunk = False
    opened = 0  # slots added by the last doubling, filled in the next round
    while True:
        if nu:
            score, up, low, viol_pos, viol_neg = _violators_nu(act, y, G, alpha, U)
            viol = max(viol_pos, viol_neg)
            gmax1 = gmax2 = 0.0
        else:
            score, up, low, viol, gmax1, gmax2 = _violators(act, y, G, alpha, U)
        if viol < tol or (UNSHRINK_EARLY and shrinking and not unshrunk and act.size < n_var and viol <= 10 * tol):
            if act.size < n_var:
                # optimal on the active set (or close): rebuild the rest and look at everything
                mask = np.zeros(n_var, dtype=bool)
                mask[act] = True
                rebuild_inactive_gradient(mask)
                set_active(np.arange(n_var, dtype=np.int64))
                unshrunk = True
                continue
            if viol < tol:
                status = "converged"
                break
        if max_iter is not None and max_iter >= 0 and n_iter >= max_iter:
            break
        # ---- shrink: drop variables at a bound that will stay there
        if shrinking and rounds >= 2 and rounds % 2 == 0:
            drop = _shrinkable(act, y, G, alpha, U, gmax1, gmax2)
            drop &= ~in_ws[act]
            if drop.sum() > 0.1 * act.size:
                shrunk.append((log_len[0], act[drop]))
                set_active(act[~drop])
                score, up, low = score[~drop], up[~drop], low[~drop]
        # ---- select: q/2 new violators (q at the start), balanced between I_up and I_low
        n_new = qe if rounds == 0 else max(int(qe * NEW_FRACTION), 1, opened)
        opened = 0
        free_ = ~in_ws[act]
        if nu:  # per class, the more violating class first: each has its own pairs
            pos = y[act] > 0
            groups = (free_ & pos, free_ & ~pos) if viol_pos >= viol_neg else (free_ & ~pos, free_ & pos)
        else:
            groups = (free_,)
        lists = []
        for g in groups:
            cand_up = np.flatnonzero(up & g)
            cand_low = np.flatnonzero(low & g)
            lists.append(act[_top(cand_up, -score[cand_up], n_new)])
            lists.append(act[_top(cand_low, score[cand_low], n_new)])
        new = []
        seen = set()
        k = 0
        while len(new) < n_new and any(k < src.size for src in lists):
            for src in lists:
                if k < src.size and len(new) < n_new:
                    v = int(src[k])
                    if v not in seen:
                        seen.add(v)
                        new.append(v)
            k += 1
        new_arr = np.array(new, dtype=np.int64)
        # ---- slots: empty ones first, then the oldest members leave
        empty = np.flatnonzero(ws[:qe] < 0)
        need = new_arr.size - empty.size
        if need > 0:
            filled = np.flatnonzero(ws[:qe] >= 0)
            if EVICT_BOUND_FIRST:
                # members at a bound leave before free ones (oldest first within each):
                # free variables come back as violators again and again
                a_f = alpha[ws[filled]]
                free_m = (a_f > 0) & (a_f < U[ws[filled]])
                order = np.lexsort((age[filled], free_m))
                oldest = filled[order[:need]]
            else:
                oldest = filled[np.argsort(age[filled], kind="stable")[:need]]
            slots = np.concatenate([empty, oldest])
        else:
            slots = empty[: new_arr.size]
        for s in slots:
            if ws[s] >= 0:
                in_ws[ws[s]] = False
        ws[slots] = new_arr
        in_ws[new_arr] = True
        age[slots] = rounds
        # ---- kernel rows (against the active columns) where the slot lacks them
        occ = np.flatnonzero(ws >= 0)
        need = kidx[ws[occ]]
        todo = held[rowslot[occ]] != need
        if todo.any():
            rowslot[occ[todo]] = row_of[need[todo]]  # kept rows first (-1 where there is none)
            miss = occ[rowslot[occ] < 0]
            if miss.size:
                data, first, inv = np.unique(kidx[ws[miss]], return_index=True, return_inverse=True)
                free = np.zeros(n_rows, dtype=bool)
                free[: rows_open[0]] = True
                free[rowslot[occ][rowslot[occ] >= 0]] = False
                cand = np.flatnonzero(free)
                rows = cand[np.argsort(used[cand], kind="stable")[: data.size]]  # least recently read
                gone = held[rows]
                row_of[gone[gone >= 0]] = -1
                held[rows] = data
                row_of[data] = rows
                rowslot[miss] = rows[inv]
                if S is not None:
                    sl = s_slot[data]
                    have = sl >= 0
                    if have.any():
                        gather = _gather_rows_par if have.sum() * m_cols >= PARALLEL_MIN_WORK else _gather_rows_ser
                        gather(S, sl[have], scols[0], KB, rows[have])
                        stats["rows_shared"] += int(have.sum())
                    if not have.all():
                        kr.compute(data[~have], KB, rows[~have])
                    stats["rows_computed"] += data.size - int(have.sum())
                else:
                    kr.compute(data, KB, rows)
                    stats["rows_computed"] += data.size
                again = int(np.count_nonzero(computed_once[data]))
                computed_once[data] = True
                stats["rows_again"] += again
                # rows computed again after they left: open the kept rows (their pages are touched only then)
                keeping = rows_open[0] == n_rows or n_rows == q  # already, or no room for kept rows beside q
                filled = stats["rows_computed"] + stats.get("rows_shared", 0)
                if not keeping and stats["rows_again"] > KEEP_AFTER * max(filled, q):
                    rows_open[0] = n_rows
        used[rowslot[occ]] = rounds + 1
        # ---- Q_BB: refresh the entries of slots whose member changed
        fresh = np.flatnonzero((ws >= 0) & (ks_member != ws))
        if fresh.size:
            cp = np.full(q, -1, dtype=np.int64)
            cp[occ] = colpos[kidx[ws[occ]]]
            _refresh_block(KB, rowslot, KS, fresh.astype(np.int64), occ.astype(np.int64), cp)
            ks_member[fresh] = ws[fresh]
        # ---- inner SMO on the working set
        ws_occ = ws[occ]
        KBB = KS if occ.size == qe else KS[np.ix_(occ, occ)]
        a_old = alpha[ws_occ].copy()
        Gl = G[ws_occ].copy()
        eps = max(0.5 * tol, INNER_TOL_FACTOR * viol)
        steps = inner_max_iter or 10 * qe
        if max_iter is not None and max_iter >= 0:
            steps = min(steps, max_iter - n_iter)
        it, _ = (_inner_smo_nu if nu else _inner_smo)(KBB, ws_occ, y, U, QD, shift, alpha, Gl, eps, steps)
        n_iter += it
        rounds += 1
        if qe < q:  # double the slots (see START_SLOTS)
            a_ws = alpha[ws_occ]
            saturated = np.count_nonzero((a_ws > 0) & (a_ws < U[ws_occ])) > qe // 2
            if saturated or np.count_nonzero(alpha) > sv_per_slot * qe:
                grown = min(q, 2 * qe)
                rows_open[0] = max(rows_open[0], grown)
                KS2 = np.empty((grown, grown))
                KS2[:qe, :qe] = KS
                KS = KS2
                opened = grown - qe
                qe = grown
        # ---- gradient of the active variables
        d = alpha[ws_occ] - a_old
        ch = np.flatnonzero(d)
        if ch.size:
            stalls = 0
            vars_ = ws_occ[ch]
            if shrunk and log_len[0] >= 0:  # the changes the next rebuild of the dropped variables needs
                log_vars.append(vars_)
                log_old.append(a_old[ch])
                log_len[0] += ch.size
                if log_len[0] > LOG_MAX_PER_VAR * n_var:  # memory bound: give the log up
                    log_vars.clear()
                    log_old.clear()
                    log_len[0] = -1
            _grad_update(KB, rowslot[occ[ch]], d[ch] * y[vars_], act, vpos, y, G, m_cols)
            G[vars_] += shift[vars_] * d[ch]
        elif it == 0:
            # no progress possible on this working set: refresh it fully, and give
            # up (not converged) if even a fresh one cannot move
            stalls += 1
            if stalls > 2:
                status = "stalled"
                break
            in_ws[ws[ws >= 0]] = False
            ws[:] = -1
        now = time.perf_counter()
        if now - last_report >= REPORT_SECONDS or verbose:
            last_report = now
            if verbose:
                print(
                    f"[batched] round {rounds} iter {n_iter} violation {viol:.3e} active {act.size} q {qe} "
                    f"{now - t0:.1f}s"
                )
            why = watch.check(
                n_iter, lambda: 0.5 * alpha @ (G + linear_term()), viol, alpha_sum=lambda: float(alpha.sum())
            )
            if why is not None:
                status = why
                break
    if act.size < n_var:
        mask = np.zeros(n_var, dtype=bool)
        mask[act] = True
        rebuild_inactive_gradient(mask)
    extra = {}
    if nu:
        rho, r = compute_rho_nu(y, G, alpha, U)
        extra["r"] = float(r)
    else:
        rho = compute_rho(y, G, alpha, U)
    objective = float(0.5 * alpha @ (G + p_known[0])) if p_known[0] is not None else float("nan")
    if verbose:
        print(f"[batched] {status}: rounds {rounds}, iter {n_iter}, violation {viol:.3e}, objective {objective:.6g}")
    return Solution(
        alpha=alpha,
        rho=rho,
        objective=objective,
        n_iter=n_iter,
        violation=float(viol),
        converged=status == "converged",
        grad=G,
        status=status,
        extra={**extra, "rounds": rounds, "working_set_size": qe, **stats},
    )
