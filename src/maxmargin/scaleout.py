r"""Divide-and-conquer SVMs on a Dask cluster (the optional extra ``maxmargin[dask]``).

``SVC(solver='divide', solver_options={'backend': 'dask'})`` runs
:mod:`maxmargin.solvers.divide` on the workers of the active Dask client
(``distributed.get_client()``: create a ``Client`` first; estimators never hold one, so
they stay clonable and picklable):

* each part is one task (``client.submit``) that receives only that part's rows and
  returns its multipliers; Cascade levels receive only support vectors;
* the global step (:func:`global_solve`) keeps the data as row blocks on the workers
  (scattered once) and works on the whole gradient :math:`G = Q\alpha + p`:

  1. :math:`G` once, from the scores :math:`s_i = \sum_{j\in SV}\alpha_jy_jK(x_j,x_i)` computed
     blockwise on the workers, where the blocks live; only the support vectors and their
     coefficients travel;
  2. the maximal KKT violation over *all* rows,
     :math:`\max_{I_{up}} -y_tG_t - \min_{I_{low}} -y_tG_t`, is tested against ``tol``
     (the stopping rule of SMO and the batched solver): below it, the solution is the
     minimiser of the whole problem;
  3. otherwise one worker solves the problem restricted to a working set :math:`W` (the free
     multipliers and the bound ones that can take part in a violating pair against the
     extremes, the most violating first, at most ``max(MAX_ADD, ADD_PER_ROW n, 2 #free)``; see
     :func:`solve_restricted`), every other multiplier held where it is; this lowers the
     objective (the maximal violating pair is in :math:`W`).  Nothing else of the fit runs
     meanwhile, so that task takes the threads of every worker on its host
     (:meth:`DaskExecutor.run_wide`);
  4. :math:`G \mathrel{+}= Q_{\cdot D}\,\Delta\alpha_D` over the multipliers :math:`D` that
     changed, blockwise on the workers again (few rows: the support vectors at their bound
     that stayed there, most of them, cost nothing); back to 2.

  Each round strictly lowers the objective and there are finitely many working sets, so
  the loop ends; the solution is exact, as the local global solve.
* with many classes, the one-vs-one problems large enough to divide are tasks side by side instead
  (:meth:`DaskExecutor.map_pairs`), each solved on one worker with its threads, when there are at least
  as many as the cluster has worker threads (``svm.BaseSVMClassifier._fit_pairs_on_dask``);
* a worker lost during the fit: its tasks are run again on the workers left (parts
  travel inside their tasks; scattered blocks are scattered again); if no worker comes
  back within ``timeout`` seconds, :class:`WorkerLostError`.

``fit`` accepts ``dask.array`` / ``dask.dataframe`` input (gathered to the client for
the fit: the client needs the training data in memory, each worker only its share);
``predict``, ``decision_function`` and ``predict_proba`` on a dask collection run
blockwise (``map_blocks``) and return a dask array.

Numba's compiled routines are cached on disk (``cache=True``): each worker process loads
them once, not once per task.  A task keeps the memory it frees in its process's heap until it
ends (:func:`heap_kept`; Dask's workers otherwise map every large array afresh).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import warnings

import numpy as np

from .solvers.base import Solution

#: rows per scattered block of the global step
BLOCK_ROWS = 50_000
#: the working set of a round of the global step holds at most max(MAX_ADD, ADD_PER_ROW n, 2 #free)
#: variables: each round costs two tasks (the restricted solve, the pass over the changed rows) on top
#: of its work, so not too few; a solve grows faster than its size, so not too many (xor, 100k rows,
#: 87,000 candidates in the first round; fit on one worker: 4,000 a round took 49 rounds and 24.6 s,
#: 8,000 17 rounds and 19.5 s, 12,000 9 rounds and 18.6 s, 20,000 11 rounds and 27.2 s)
MAX_ADD = 2000
ADD_PER_ROW = 0.12


class WorkerLostError(RuntimeError):
    """The Dask workers were lost during a fit and did not come back in time."""


def is_dask(obj):
    """Whether ``obj`` is a dask collection (without importing dask)."""
    mod = type(obj).__module__ or ""
    return mod.split(".")[0] in ("dask", "dask_expr") and hasattr(obj, "__dask_graph__")


def _import_distributed():
    try:
        import distributed
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "backend='dask' needs the optional dependency dask[distributed]: pip install 'maxmargin[dask]'"
        ) from exc
    return distributed


def get_client():
    """The active Dask client; a clear error when there is none."""
    distributed = _import_distributed()
    try:
        return distributed.get_client()
    except ValueError as exc:
        raise ValueError(
            "backend='dask' uses the active Dask client: create one first, e.g. "
            "`from distributed import Client; client = Client()` (or Client(LocalCluster(...)))"
        ) from exc


def _lost_errors():
    distributed = _import_distributed()
    from distributed.comm.core import CommClosedError

    errs = [distributed.KilledWorker, CommClosedError, OSError, TimeoutError]
    try:
        from distributed.client import FutureCancelledError

        errs.append(FutureCancelledError)
    except ImportError:  # pragma: no cover - older distributed
        pass
    import asyncio
    import concurrent.futures

    errs += [asyncio.CancelledError, concurrent.futures.CancelledError]
    return tuple(errs)


class DaskExecutor:
    """Runs tasks on the active client's workers, running them again when workers are
    lost (``retries`` times, waiting up to ``timeout`` seconds for a worker)."""

    def __init__(self, client=None, retries=3, timeout=120.0):
        self.client = client or get_client()
        self.retries = int(retries)
        self.timeout = float(timeout)
        self._blocks = None
        self._groups = None

    def _wait_for_workers(self):
        try:
            self.client.wait_for_workers(1, timeout=self.timeout)
        except Exception as exc:  # noqa: BLE001 - distributed raises several kinds
            raise WorkerLostError(
                f"no Dask worker is left (waited {self.timeout:g} s for one): the fit cannot go on"
            ) from exc

    def _run(self, submit):
        """``submit()`` returns futures; their results, again after a lost worker."""
        errors = _lost_errors()
        last = None
        for _attempt in range(self.retries + 1):
            self._wait_for_workers()
            try:
                futures = submit()
                return self.client.gather(futures)
            except errors as exc:
                last = exc
                self._blocks = None  # scattered data may have gone with the worker
                time.sleep(0.5)
        raise WorkerLostError(
            f"Dask workers were lost {self.retries + 1} times during the fit ({type(last).__name__}: {last})"
        ) from last

    def map(self, fn, items):
        def submit():
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*[Ll]arge.*")
                return [self.client.submit(on_worker, fn, *it, pure=False) for it in items]

        return self._run(submit)

    def _workers(self):
        """The scheduler's description of each worker, by address."""
        try:  # every worker (some releases list only the first few unless asked)
            info = self.client.scheduler_info(n_workers=-1)
        except TypeError:  # releases without the argument list them all
            info = self.client.scheduler_info()
        return info.get("workers", {})

    def widest_host(self):
        """``(address, threads)``: a worker on the host whose workers hold the most threads, and
        that host's thread count (every worker on it together)."""
        workers = self._workers()
        hosts = {}
        for addr, worker in workers.items():
            host = worker.get("host") or addr.rsplit(":", 1)[0]
            hosts.setdefault(host, []).append((addr, int(worker.get("nthreads", 1))))
        if not hosts:
            return None, 1
        members = max(hosts.values(), key=lambda m: sum(t for _, t in m))
        return max(members, key=lambda m: m[1])[0], sum(t for _, t in members)

    def run_wide(self, fn, item):
        """``fn(*item)`` as one task while no other task of the fit runs (the global step's
        restricted solve): it goes to a worker of the host with the most worker threads and may
        use all of them, since that host's other workers wait for it.  If that worker is lost
        it runs wherever the scheduler puts it, still at most on its machine's cores."""

        def submit():
            addr, threads = self.widest_host()
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*[Ll]arge.*")
                return [
                    self.client.submit(
                        on_worker,
                        fn,
                        *item,
                        threads=threads,
                        workers=None if addr is None else [addr],
                        allow_other_workers=True,
                        pure=False,
                    )
                ]

        return self._run(submit)[0]

    def threads(self):
        """Worker threads of the cluster, all workers together (0 when none is up)."""
        return sum(int(w.get("nthreads", 1)) for w in self._workers().values())

    def map_pairs(self, fn, blocks, items):
        """``fn(X_pair, *args, **kwargs)`` for each item ``(a, b, order, args, kwargs)``, each one task, in item
        order: ``X_pair`` is the rows of ``blocks[a]`` above those of ``blocks[b]``, taken in ``order``.  Each block
        (one class's rows) is scattered once and travels to the workers whose tasks need it, not once a pair
        (k classes: each class is in k - 1 pairs).  The largest pairs are submitted first, so that the workers
        finish closer together."""
        first = sorted(range(len(items)), key=lambda i: -items[i][2].shape[0])

        def submit():
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*[Ll]arge.*")
                held = self.client.scatter(list(blocks), hash=False)
                futures = [None] * len(items)
                for i in first:
                    a, b, order, args, kwargs = items[i]
                    futures[i] = self.client.submit(
                        on_worker, _pair_task, held[a], held[b], order, fn, args, kwargs, pure=False
                    )
                return futures

        return self._run(submit)

    # ------------------------------------------------------------ the global step
    def use_blocks(self, groups):
        """Scatter the data in these groups of rows (the first-level parts) instead of blocks of
        :data:`BLOCK_ROWS` consecutive rows: one task a part, and :meth:`scores` can leave out a part's
        own support vectors (``exclude_own``).  ``groups`` must partition the rows."""
        self._groups = [np.asarray(g, dtype=np.int64) for g in groups]
        self._blocks = None

    def _row_groups(self, n):
        groups = getattr(self, "_groups", None)
        if groups is None:
            groups = [np.arange(s, min(s + BLOCK_ROWS, n)) for s in range(0, n, BLOCK_ROWS)]
            self._groups = groups
        return groups

    def scores(self, X, kernel, sv_rows, coef, exclude_own=False):
        """:math:`K(X, X_{SV})\\,c` computed blockwise on the workers (blocks of X scattered
        once per fit; again when a worker was lost); with ``exclude_own``, each block's rows meet
        the support vectors of the other blocks only."""
        n = X.shape[0]
        groups = self._row_groups(n)
        Xsv = X[sv_rows]
        sv_owner = None
        if exclude_own:  # each support vector's block
            owner = np.empty(n, dtype=np.int64)
            for b, g in enumerate(groups):
                owner[g] = b
            sv_owner = owner[sv_rows]

        def submit():
            if self._blocks is None:
                self._blocks = self.client.scatter([X[g] for g in groups], hash=False)
            sv = self.client.scatter((Xsv, np.asarray(coef, dtype=np.float64), sv_owner), hash=False, broadcast=True)
            return [
                self.client.submit(on_worker, _block_scores, blk, kernel, sv, b, pure=False)
                for b, blk in enumerate(self._blocks)
            ]

        out = np.zeros(n)
        if sv_rows.size == 0:
            return out
        for g, part in zip(groups, self._run(submit)):
            out[g] = part
        return out


def on_worker(fn, *args, threads=None):
    """``fn(*args)`` with the compiled code's threads (Numba) and BLAS held to the worker's
    ``nthreads``: Dask's convention that a worker thread is a core.  Without it every worker
    of a machine would start one thread per core and they would fight over the cores.
    ``threads``: a task that runs alone on its host (:meth:`DaskExecutor.run_wide`) takes the
    threads of every worker there instead, at most the cores Numba was started with."""
    try:
        from distributed import get_worker

        worker = get_worker()
        n = int(getattr(worker, "state", worker).nthreads)
    except (ImportError, ValueError, AttributeError):  # not on a worker: as it is
        return fn(*args)
    if threads is not None:
        n = max(n, int(threads))
    import numba
    from threadpoolctl import threadpool_limits

    old = numba.get_num_threads()
    numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))
    try:
        with threadpool_limits(n), heap_kept():
            return fn(*args)
    finally:
        numba.set_num_threads(old)


#: glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: during a task: arrays up to this size come from the heap, and up to _TASK_TRIM of free heap stays
_TASK_MMAP = 32 << 20
_TASK_TRIM = 256 << 20
#: glibc's default mmap threshold (which Dask's setting freezes)
_DEFAULT_MMAP = 128 << 10
_HEAP = {"depth": 0, "libc": None}
_HEAP_LOCK = threading.Lock()


def _libc():
    if _HEAP["libc"] is None:
        try:
            import ctypes

            libc = ctypes.CDLL("libc.so.6")
            _HEAP["libc"] = libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else False
        except (OSError, AttributeError):  # not glibc
            _HEAP["libc"] = False
    return _HEAP["libc"]


@contextlib.contextmanager
def heap_kept():
    """A context in which freed memory stays in the process's heap, given back to the system at its end.

    Dask's nanny starts workers with ``MALLOC_TRIM_THRESHOLD_`` set (memory goes back to the system
    soon after it is freed), and any such setting also stops glibc from raising its mmap threshold as
    it does by default: every array over 128 KiB is then mapped fresh and unmapped when freed, and its
    pages fault in again on first touch.  The solvers' per-round work arrays (kernel columns, gradients
    of 10,000-20,000 rows) paid that each time: a restricted solve of the global step (mix20, 100k rows)
    took 11.7 s on a worker and 8.2 s in a plain process.  Here the thresholds are raised for the
    task and restored after it, with ``malloc_trim`` to give the memory back as Dask intends.  Only
    where such a setting is in the environment (otherwise glibc's adaptive threshold is left alone:
    it cannot be restored once set), and only with glibc; the first of concurrent tasks raises the
    thresholds, the last one restores them."""
    trim = os.environ.get("MALLOC_TRIM_THRESHOLD_")
    libc = _libc() if trim is not None and "MALLOC_MMAP_THRESHOLD_" not in os.environ else False
    if not libc:
        yield
        return
    with _HEAP_LOCK:
        if _HEAP["depth"] == 0:
            libc.mallopt(_M_MMAP_THRESHOLD, _TASK_MMAP)
            libc.mallopt(_M_TRIM_THRESHOLD, _TASK_TRIM)
        _HEAP["depth"] += 1
    try:
        yield
    finally:
        with _HEAP_LOCK:
            _HEAP["depth"] -= 1
            if _HEAP["depth"] == 0:
                libc.mallopt(_M_MMAP_THRESHOLD, _DEFAULT_MMAP)
                try:
                    libc.mallopt(_M_TRIM_THRESHOLD, int(trim))
                except ValueError:  # not a number: glibc ignored it too
                    pass
                libc.malloc_trim(0)


def _pair_task(block_a, block_b, order, fn, args, kwargs):
    """:meth:`DaskExecutor.map_pairs`' task: the pair's rows stacked and ordered, then ``fn``."""
    import scipy.sparse as sp

    X = sp.vstack([block_a, block_b], format="csr") if sp.issparse(block_a) else np.vstack([block_a, block_b])
    return fn(X[order], *args, **kwargs)


def _block_scores(block, kernel, sv, b):
    """:math:`K(B, X_{SV})\\,c` for the block B number ``b`` (:func:`maxmargin.kernels.engine.kernel_times`),
    without the support vectors of that block where ``sv`` gives each one's block."""
    from .kernels.engine import kernel_times

    Xsv, coef, owner = sv
    if owner is not None:
        other = owner != b
        Xsv, coef = Xsv[other], coef[other]
    if Xsv.shape[0] == 0:
        return np.zeros(block.shape[0])
    return kernel_times(kernel, block, Xsv, coef)


def _up_low(y, alpha, U):
    """The index sets I_up and I_low (as masks) of the KKT test."""
    up = ((y > 0) & (alpha < U)) | ((y < 0) & (alpha > 0))
    low = ((y > 0) & (alpha > 0)) | ((y < 0) & (alpha < U))
    return up, low


def _violation(y, G, alpha, U):
    """``(max_{I_up} -yG, min_{I_low} -yG)``."""
    up, low = _up_low(y, alpha, U)
    mg = -y * G
    return float(mg[up].max(initial=-np.inf)), float(mg[low].min(initial=np.inf))


def _movable(y, G, alpha, U, m_up, m_low):
    """How far each variable is from the KKT condition against the extremes ``m_up``, ``m_low``:
    positive for a variable that can take part in a violating pair (a bound variable on the
    wrong side of the other set's extreme), ``inf`` for the free ones (always in play)."""
    mg = -y * G
    up, low = _up_low(y, alpha, U)
    amount = np.full(y.shape[0], -np.inf)
    only_up = up & ~low
    only_low = low & ~up
    amount[only_up] = mg[only_up] - m_low
    amount[only_low] = m_up - mg[only_low]
    amount[up & low] = np.inf
    return amount


def solve_restricted(part, G_w, options):
    r"""One round of the global step on a worker: the problem restricted to the working set ``W``
    (``part``: its rows, its multipliers as ``alpha0``), every other multiplier held where it is.
    Its linear term makes the restricted gradient equal the whole problem's ``G_w`` at the start,
    :math:`p'_W = G_W - Q_{WW}\alpha_W`, and its equality constraint keeps :math:`y_W^T\alpha_W` (the
    others are fixed).  The batched solver starts from ``G_w`` and computes :math:`p'_W` only if it
    needs it (``p_of``: :math:`Q_{WW}\alpha_W` is a kernel pass over W's support vectors, 45% of a
    round's time on xor, 100k rows); SMO (small W) takes it at once.  Returns
    :func:`maxmargin.solvers.divide.solve_part`'s tuple (its objective NaN where :math:`p'_W` was not
    needed: the caller takes the objective from the whole gradient)."""
    import dataclasses

    from .kernels.engine import kernel_times
    from .solvers import batched
    from .solvers.divide import pick_solver, solve_part

    a = np.asarray(part.alpha0, dtype=np.float64)
    G_w = np.asarray(G_w, dtype=np.float64)

    def linear_term():
        sv = np.flatnonzero(a > 0)
        own = np.zeros(a.shape[0])
        if sv.size:
            Xw = part.X[part.index]
            own = part.y * kernel_times(part.kernel, Xw, Xw[sv], a[sv] * part.y[sv])
        return G_w - own - part.shift * a

    options = dict(options)
    delta = float(part.y @ a)
    if pick_solver(options.get("part_solver", "auto"), part.n_var) is batched:
        # the restricted gradient at the start is the whole one: no pass, and p' on demand
        part = dataclasses.replace(part, p=np.zeros(a.shape[0]), delta=delta)
        options.update(grad0=G_w, p_of=linear_term)
    else:
        part = dataclasses.replace(part, p=linear_term(), delta=delta)
    return solve_part(part, options)


def global_solve(
    problem,
    executor,
    tol=1e-3,
    max_iter=-1,
    shrinking=True,
    cache_size=200.0,
    part_solver="auto",
    time_limit=None,
    verbose=False,
    max_rounds=1000,
    parts=None,
):
    """The exact global step on the workers (see the module docstring), from
    ``problem.alpha0``; returns a :class:`~maxmargin.solvers.base.Solution` whose
    ``violation`` is the maximal KKT violation over all rows.  Each round lowers the objective;
    ``max_rounds`` only guards against a loop that would not end (xor, 100k rows: 9-17 rounds).
    ``parts``: ``[(rows, grad), ...]``, the first-level parts that ``problem.alpha0`` joins and each
    one's gradient over its own rows (:func:`maxmargin.solvers.divide.solve_part`); the data are then
    scattered part by part, and the first whole gradient takes only the other parts' support
    vectors at each part's rows (as :func:`maxmargin.solvers.divide.whole_gradient`)."""
    from .solvers.divide import subproblem
    from .solvers.smo import compute_rho, initial_alpha

    n = problem.n_var
    if not np.array_equal(problem.index, np.arange(n)):
        raise ValueError("backend='dask' needs one variable per data row (the C-SVC duals)")
    t0 = time.perf_counter()
    y, p, U, shift = problem.y, problem.p, problem.upper, problem.shift
    alpha = initial_alpha(problem)
    opts = dict(tol=tol, shrinking=shrinking, cache_size=cache_size, part_solver=part_solver)
    n_iter = 0
    status = "max_iter"
    viol = np.inf
    # the whole gradient once, then only what the changed multipliers add to it
    sv = np.flatnonzero(alpha > 0)
    tr = time.perf_counter()
    if parts is not None:
        executor.use_blocks([rows for rows, _ in parts])
        G = y * executor.scores(problem.X, problem.kernel, sv, alpha[sv] * y[sv], exclude_own=True)
        for rows, grad in parts:
            G[rows] += grad
    else:
        G = y * executor.scores(problem.X, problem.kernel, sv, alpha[sv] * y[sv]) + p + shift * alpha
    t_scores = time.perf_counter() - tr
    for rnd in range(max_rounds + 1):
        m_up, m_low = _violation(y, G, alpha, U)
        viol = m_up - m_low
        if verbose:
            print(
                f"[divide/dask] global round {rnd}: violation {viol:.3e}, {np.count_nonzero(alpha)} SVs, "
                f"scores {t_scores:.2f}s"
            )
        if viol < tol:
            status = "converged"
            break
        if rnd == max_rounds or (max_iter is not None and 0 <= max_iter <= n_iter):
            break
        if time_limit is not None and time.perf_counter() - t0 >= time_limit:
            status = "time_limit"
            break
        # the working set: the free multipliers and the bound ones that can take part in a
        # violating pair (the most violating first); the rest stay where they are
        amount = _movable(y, G, alpha, U, m_up, m_low)
        cand = np.flatnonzero(amount > 0)
        free = int(np.count_nonzero(np.isinf(amount[cand])))
        cap = max(MAX_ADD, int(ADD_PER_ROW * n), 2 * free)
        if cand.size > cap:
            cand = cand[np.argsort(-amount[cand], kind="stable")[:cap]]
        work = np.sort(cand)
        tr = time.perf_counter()
        res = executor.run_wide(solve_restricted, (subproblem(problem, work, alpha[work]), G[work], opts))
        if verbose:
            print(f"[divide/dask] working set of {work.size} solved in {time.perf_counter() - tr:.2f}s")
        d = res[0] - alpha[work]
        ch = np.flatnonzero(d)
        alpha = alpha.copy()
        alpha[work] = res[0]
        n_iter += int(res[4])
        if ch.size == 0:
            status = "stalled"
            break
        rows = work[ch]
        tr = time.perf_counter()
        G = (
            G
            + y * executor.scores(problem.X, problem.kernel, rows, d[ch] * y[rows])
            + shift * np.bincount(rows, weights=d[ch], minlength=n)
        )
        t_scores = time.perf_counter() - tr
    rho = compute_rho(y, G, alpha, U)
    return Solution(
        alpha=alpha,
        rho=float(rho),
        objective=float(0.5 * alpha @ (G + p)),
        n_iter=n_iter,
        violation=float(viol),
        converged=status == "converged",
        grad=G,
        status=status,
        extra={"global_rounds": rnd},
    )


# ------------------------------------------------------------ estimators and dask input
def to_local(X, y=None, sample_weight=None):
    """Dask collections gathered into NumPy (a dask DataFrame's columns in order)."""

    def one(a):
        if a is None or not is_dask(a):
            return a
        if hasattr(a, "to_dask_array"):
            a = a.to_dask_array(lengths=True)
        return np.asarray(a.compute())

    return one(X), one(y), one(sample_weight)


def blockwise(est, method, X):
    """``est.<method>(X)`` on a dask array or DataFrame, block by block (``map_blocks``)."""
    if hasattr(X, "to_dask_array"):
        X = X.to_dask_array(lengths=True)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got a dask array of shape {X.shape}")
    X = X.rechunk({1: -1})  # whole rows in each block
    fn = getattr(type(est), method)
    k = len(est.classes_)
    if method == "predict":
        dt = est.classes_.dtype
        return X.map_blocks(lambda b: fn(est, b), drop_axis=1, dtype=dt, meta=np.empty((0,), dtype=dt))
    if method == "decision_function":
        width = 1 if k == 2 else (k if est.decision_function_shape == "ovr" else k * (k - 1) // 2)
    else:  # predict_proba, predict_log_proba
        width = k
    if width == 1:
        return X.map_blocks(lambda b: fn(est, b), drop_axis=1, dtype=np.float64, meta=np.empty((0,)))
    return X.map_blocks(lambda b: fn(est, b), chunks=(X.chunks[0], (width,)), dtype=np.float64, meta=np.empty((0, 0)))
