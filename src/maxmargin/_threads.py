"""Thread counts and BLAS limits in one place.

On a machine shared with other work, a parallel region split statically over
every core waits for its slowest thread: one busy core makes the whole region
twice as slow.  Work here is therefore cut into batches handed out dynamically
(:mod:`maxmargin.solvers.ovo`), and BLAS runs on one thread wherever our own
threads already cover the cores or the products are small (OpenBLAS's threads
spin while waiting and fare worst under load: the many-class prediction ran
2.5 times slower with them on a busy machine).
"""

from __future__ import annotations

import contextlib
import os
import threading

_CONTROLLER = []


def cores():
    """The cores this thread may use: those the process may run on, at most Numba's thread
    setting (``numba.set_num_threads``, which a Dask worker's task holds to its ``nthreads``)."""
    try:
        n = max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        n = os.cpu_count() or 1
    import numba

    return max(1, min(n, numba.get_num_threads()))


def _runnable(path):
    """Linux's count of runnable threads now (the fourth field of ``/proc/loadavg``), or None."""
    try:
        with open(path) as f:
            return int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None


def _own_runnable(task_dir):
    """How many of this process's threads are runnable now (state ``R`` in ``/proc/self/task/*/stat``)."""
    count = 0
    try:
        tids = os.listdir(task_dir)
    except OSError:
        return 0
    for tid in tids:
        try:
            with open(os.path.join(task_dir, tid, "stat")) as f:
                stat = f.read()
        except OSError:  # (a thread that ended meanwhile)
            continue
        end = stat.rfind(")")
        count += end >= 0 and stat[end + 2 : end + 3] == "R"
    return count


def other_cores_busy(path="/proc/loadavg", task_dir="/proc/self/task"):
    """Whether other processes hold every other core now: the runnable threads of the machine (``/proc/loadavg``),
    less this process's own runnable ones, fill every core but this thread's -- twice in a row.

    Then the split dual epochs run their serial mode from the start -- the same iterates -- instead of threads that
    would stall within the first epoch (beside ``yes > /dev/null`` on 2 cores: longdocs 1.07-1.09x the plain
    solver's time with the threads started).  The count alone (sessions 60-67) included this process's own threads:
    Numba's workers spin for ~0.2-1 ms after a parallel region, and a question asked within that window read "busy"
    (session 68, on a quiet machine right after an ijcnn1 primal fit: 199 of 200 reads).  Without its own threads one
    read still said busy after 9 of 200 such fits (the states are not read at one instant), two reads in a row after
    2 of 300; beside ``yes`` 50 of 50 read busy.  A quiet machine costs one read of ``/proc/loadavg`` (~13 us), a
    busy answer ~0.2 ms.  False where the files cannot be read."""
    cpus = os.cpu_count() or 1
    for _ in range(2):
        running = _runnable(path)
        if running is None or running < cpus:
            return False
        if running - _own_runnable(task_dir) < cpus - 1:
            return False
    return True


def _controller():
    """The process's :class:`threadpoolctl.ThreadpoolController`, made once (None where threadpoolctl fails)."""
    if not _CONTROLLER:
        try:
            from threadpoolctl import ThreadpoolController

            _CONTROLLER.append(ThreadpoolController())
        except Exception:  # pragma: no cover - threadpoolctl missing or failing
            _CONTROLLER.append(None)
    return _CONTROLLER[0]


def blas_threads(n):
    """A context in which BLAS runs on at most ``n`` threads (a no-op where threadpoolctl fails).

    The libraries are found once per process (:class:`threadpoolctl.ThreadpoolController`);
    ``threadpool_limits`` looks them up again on every call by reading ``/proc/self/maps``,
    which cost about 7 ms a call, 15 ms of a 30 ms batched fit."""
    try:
        return _controller().limit(limits=max(1, int(n)), user_api="blas")
    except Exception:  # pragma: no cover - threadpoolctl missing or failing: run as is
        return contextlib.nullcontext()


class _BlasHeld:
    """BLAS held to one thread by the libraries' own calls: each library's count is read, set to 1 where it is not,
    and put back on exit.  ``threadpoolctl``'s ``limit`` does the same through a description of every library
    (``info()``, dicts a library) at ~20 us a fit, a sixth of a 0.12 ms ``LinearSVC`` fit on 200 rows; this takes
    ~1 us where BLAS already runs on one thread and ~4 us where it does not."""

    def __init__(self, libs):
        self.libs = libs
        self.old = ()

    def __enter__(self):
        self.old = [(lib, lib.num_threads) for lib in self.libs]
        for lib, n in self.old:
            if n != 1:
                lib.set_num_threads(1)
        return self

    def __exit__(self, *exc):
        for lib, n in self.old:
            if n != 1:
                lib.set_num_threads(n)
        return False


def _one_thread_limit():
    """A context holding BLAS to one thread: :class:`_BlasHeld` on the controller's BLAS libraries, or
    :func:`blas_threads` where the controller lacks the per-library calls (threadpoolctl releases differ)."""
    try:
        libs = [lib for lib in _controller().lib_controllers if lib.user_api == "blas"]
        for lib in libs:
            lib.num_threads  # noqa: B018 - the call this needs, tried once
            lib.set_num_threads  # noqa: B018
        return _BlasHeld(libs)
    except Exception:  # noqa: BLE001 - any failure: the general route
        return blas_threads(1)


#: OpenBLAS runs a dot product of at most this many values on one thread (``ddot``: 10,001 values woke its
#: threads, 10,000 did not; session 70, ``/tmp/s70/wake.py``) ...
OPENBLAS_DOT_SERIAL_MAX = 10_000
#: ... and a Cholesky factor (``dpotrf``, which Numba's ``np.linalg.cholesky`` calls) of fewer rows than this
OPENBLAS_CHOLESKY_SERIAL_BELOW = 128


def blas_serial_for(dot_len, cholesky_rows=0):
    """Whether BLAS runs on one thread anyway for dot products of at most ``dot_len`` values and Cholesky factors of
    at most ``cholesky_rows`` rows: every BLAS library of the process is OpenBLAS (whose thresholds are above) and
    the sizes are under its thresholds.  Then a :func:`one_blas_thread` block around work that makes no other BLAS
    call only costs time: lowering OpenBLAS's thread count stops its threads, ~20 us a library (two here, NumPy's
    and SciPy's), ~80 us a block with cold caches -- 3% of a 2.5 ms ``LinearSVC`` fit (session 70).  False where
    threadpoolctl fails or another BLAS (MKL, BLIS: other thresholds) is loaded."""
    if dot_len > OPENBLAS_DOT_SERIAL_MAX or cholesky_rows >= OPENBLAS_CHOLESKY_SERIAL_BELOW:
        return False
    kinds = _BLAS_KINDS
    if not kinds:
        try:
            kinds.append(
                all(lib.internal_api == "openblas" for lib in _controller().lib_controllers if lib.user_api == "blas")
            )
        except Exception:  # noqa: BLE001 - threadpoolctl missing or failing: the hold stays
            kinds.append(False)
    return kinds[0]


_BLAS_KINDS = []

#: the open :func:`one_blas_thread` blocks of the process, the limit the first of them set, and whether
#: :func:`blas_lifted` has lifted it for now
_ONE = {"depth": 0, "limit": None, "lifted": False}
_ONE_LOCK = threading.Lock()


def _hold(limit, held):
    """Set the libraries a :class:`_BlasHeld` ``limit`` changed to one thread (``held``) or back to their counts
    before the hold."""
    for lib, n in limit.old:
        if n != 1:
            lib.set_num_threads(1 if held else n)


@contextlib.contextmanager
def one_blas_thread():
    """A context in which BLAS runs on one thread (a no-op where threadpoolctl fails).

    BLAS's thread count is one setting for the whole process, so the blocks open at a time (nested, or on the
    threads of one fit) share one limit: the first block to open sets it, the last to close lifts it.  Setting
    and lifting cost ~50 us together, which every one-vs-one pair paid again inside its fit's block (190 pairs:
    10 ms of a 90 ms fit); :func:`_one_thread_limit` brought a block's cost to 1-4 us (session 45)."""
    with _ONE_LOCK:
        if _ONE["depth"] == 0:
            _ONE["limit"] = _one_thread_limit()
            _ONE["limit"].__enter__()
        elif _ONE["lifted"]:  # another thread's block lifted the hold while it was alone: held again
            _hold(_ONE["limit"], True)
            _ONE["lifted"] = False
        _ONE["depth"] += 1
    try:
        yield
    finally:
        with _ONE_LOCK:
            _ONE["depth"] -= 1
            if _ONE["depth"] == 0:
                limit, _ONE["limit"], _ONE["lifted"] = _ONE["limit"], None, False
                limit.__exit__(None, None, None)


@contextlib.contextmanager
def blas_lifted():
    """Inside a :func:`one_blas_thread` block: BLAS back on the threads it had before the hold, for a large
    product of one solver, where that block is the only one open in the process (no other thread of ours is
    computing beside it); otherwise (other blocks open, or BLAS held by threadpoolctl's general route) nothing
    changes.  A block opened meanwhile by another thread holds BLAS to one thread again.

    Before (session 55), such a lift set BLAS's thread count with ``threadpool_limits``, which saves the count it
    finds and puts it back on exit: two solves on two threads (divide's parts, one-vs-one pairs) saved and put back
    each other's settings -- BLAS left on one thread for the rest of the process, or on all threads while the other
    solve ran its own products beside it (an early divide fit of 300,000 rows 8 s or 17 s by the order of the fits
    before it)."""
    with _ONE_LOCK:
        limit = _ONE["limit"]
        lift = _ONE["depth"] == 1 and isinstance(limit, _BlasHeld) and not _ONE["lifted"]
        if lift:
            _hold(limit, False)
            _ONE["lifted"] = True
    try:
        yield
    finally:
        if lift:
            with _ONE_LOCK:
                if _ONE["lifted"] and _ONE["limit"] is limit:
                    _hold(limit, True)
                    _ONE["lifted"] = False


def others_running():
    """Whether another thread of this process is running or waiting for a core now (Linux: the state letter of
    each thread in ``/proc/self/task``, ~40 us for a few threads; elsewhere False).

    OpenBLAS's pool keeps spinning for ~0.1 s after each multi-threaded product (its ``THREAD_TIMEOUT``, fixed when
    NumPy loads it): Numba's threads started in that window share the cores with it.  Measured (session 49,
    ``/tmp/s49/spin2.py``): decision values of 5,000 rows against 1,930 support vectors on Numba's two threads took
    11.7 ms, 22.3 ms right after a 1,500 x 1,500 product, 15.6 ms 0.1 s after it; neither setting BLAS's thread count
    nor a small product ends the spin.  A caller that can do its work on BLAS's own threads instead asks this first."""
    try:
        me = threading.get_native_id()
        tasks = os.listdir("/proc/self/task")
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return False
    for tid in tasks:
        if tid == str(me):
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # (a thread that ended meanwhile)
            continue
        end = stat.rfind(b")")  # the name, in parentheses, may hold spaces
        if end >= 0 and stat[end + 2 : end + 3] == b"R":
            return True
    return False
