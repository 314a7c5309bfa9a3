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


def blas_threads(n):
    """A context in which BLAS runs on at most ``n`` threads (a no-op where threadpoolctl fails).

    The libraries are found once per process (:class:`threadpoolctl.ThreadpoolController`);
    ``threadpool_limits`` looks them up again on every call by reading ``/proc/self/maps``,
    which cost about 7 ms a call, 15 ms of a 30 ms batched fit."""
    try:
        if not _CONTROLLER:
            from threadpoolctl import ThreadpoolController

            _CONTROLLER.append(ThreadpoolController())
        return _CONTROLLER[0].limit(limits=max(1, int(n)), user_api="blas")
    except Exception:  # pragma: no cover - threadpoolctl missing or failing: run as is
        return contextlib.nullcontext()


#: the open :func:`one_blas_thread` blocks of the process and the limit the first of them set
_ONE = {"depth": 0, "limit": None}
_ONE_LOCK = threading.Lock()


@contextlib.contextmanager
def one_blas_thread():
    """A context in which BLAS runs on one thread (a no-op where threadpoolctl fails).

    BLAS's thread count is one setting for the whole process, so the blocks open at a time (nested, or on the
    threads of one fit) share one limit: the first block to open sets it, the last to close lifts it.  Setting
    and lifting cost ~50 us together, which every one-vs-one pair paid again inside its fit's block (190 pairs:
    10 ms of a 90 ms fit)."""
    with _ONE_LOCK:
        if _ONE["depth"] == 0:
            _ONE["limit"] = blas_threads(1)
            _ONE["limit"].__enter__()
        _ONE["depth"] += 1
    try:
        yield
    finally:
        with _ONE_LOCK:
            _ONE["depth"] -= 1
            if _ONE["depth"] == 0:
                limit, _ONE["limit"] = _ONE["limit"], None
                limit.__exit__(None, None, None)
