"""Large scratch arrays kept for the next fit.

A fit's large temporaries (the fold's copy of the rows, the feature counts and renumbering tables of
:mod:`maxmargin.solvers._linear_common`, the duplicate check's stamps) were fresh memory at every fit, and the
first touch of each fresh page is a page fault.  On virtual machines that hand freed memory back to the host
(virtio-balloon free page reporting, as this project's Firecracker guests do) such a fault costs several
microseconds and comes in phases: session 59, ``LinearSVC`` on 20,000 x 2M unsorted bigram rows (~120 MB of
temporaries a fit) took 190-285 ms a fit in the slow phases, 60-100 ms of it system time in ~10,000 faults, and
134-193 ms with the fold's arrays kept between fits.  A block already touched costs nothing to reuse.

Rules:

- only requests of at least :data:`MIN_BYTES` are served from kept blocks (smaller ones are plain ``np.empty``);
- a block is handed out again only when nothing made from it is alive: every NumPy view of it holds a reference
  to the block's owning array (``view.base``), so the owner's reference count tells (:func:`_refs`);
- blocks idle for :data:`KEEP_SECONDS` are released by a daemon thread (which ends when none are left), at most
  :data:`KEEP_BYTES` are kept at all, and :func:`release` frees every idle block at once;
- off under free-threaded Python, where reference counts are not exact, and reset in a forked child.

Only temporaries that end with the fit come from here; what an estimator keeps (``coef_``) never does.  An array
from here that a caller keeps anyway is simply never reused (its owner stays referenced).
"""

from __future__ import annotations

import os
import sys
import threading
import time

import numpy as np

#: requests below this many bytes are plain ``np.empty`` (a fault or two; not worth the bookkeeping)
MIN_BYTES = 1 << 20
#: an idle block is released after this many seconds unused (a grid search or C path reuses it well before)
KEEP_SECONDS = 5.0
#: at most this many bytes are kept in blocks (a request past it gets plain memory)
KEEP_BYTES = 1 << 30
#: a kept block serves a request of at least this share of its size (else a smaller block is made)
FIT_SHARE = 0.5

_ENABLED = getattr(sys, "_is_gil_enabled", lambda: True)()
_lock = threading.Lock()
_blocks = []  # [owner (a uint8 ndarray), the time it was last handed out]
_reaper = [None]


def _refs(entry):
    """The reference count of ``entry[0]`` as seen from here (compared with the count of an idle probe, taken the
    same way, so that the interpreter's own counting cancels out)."""
    return sys.getrefcount(entry[0])


_IDLE_REFS = _refs([np.empty(1, dtype=np.uint8), 0.0])


def _idle(entry):
    return _refs(entry) <= _IDLE_REFS


def empty(n, dtype):
    """A 1-D array of ``n`` items of ``dtype``, uninitialised: a kept block when one is idle and fits, else fresh
    memory (kept for later where it is large enough)."""
    dtype = np.dtype(dtype)
    nbytes = int(n) * dtype.itemsize
    if not _ENABLED or nbytes < MIN_BYTES:
        return np.empty(n, dtype=dtype)
    now = time.monotonic()
    with _lock:
        best = None
        for entry in _blocks:
            size = entry[0].shape[0]
            if nbytes <= size and nbytes >= FIT_SHARE * size and _idle(entry):
                if best is None or size < best[0].shape[0]:
                    best = entry
        if best is None:
            # an idle block too small or too large for this request goes now (its memory serves the new one)
            _blocks[:] = [e for e in _blocks if not _idle(e)]
            if sum(e[0].shape[0] for e in _blocks) + nbytes > KEEP_BYTES:
                return np.empty(n, dtype=dtype)
            best = [np.empty(nbytes, dtype=np.uint8), now]
            _blocks.append(best)
            _start_reaper()
        best[1] = now
        return best[0][:nbytes].view(dtype)


def zeros(n, dtype):
    """:func:`empty`, filled with zeros."""
    a = empty(n, dtype)
    a.fill(0)
    return a


def full(n, value, dtype):
    """:func:`empty`, filled with ``value``."""
    a = empty(n, dtype)
    a.fill(value)
    return a


def release():
    """Free every idle kept block now; returns the bytes freed.  Public as ``maxmargin.release_scratch()``: the
    large temporaries of a fit are otherwise kept for :data:`KEEP_SECONDS` for the next fit."""
    with _lock:
        freed = sum(e[0].shape[0] for e in _blocks if _idle(e))
        _blocks[:] = [e for e in _blocks if not _idle(e)]
    return freed


def kept_bytes():
    """Bytes held in kept blocks (idle or in use)."""
    with _lock:
        return sum(e[0].shape[0] for e in _blocks)


def _start_reaper():
    """(with ``_lock`` held) the daemon thread that releases idle blocks, unless it runs."""
    if _reaper[0] is not None:
        return
    t = threading.Thread(target=_reap, name="maxmargin-scratch", daemon=True)
    _reaper[0] = t
    t.start()


def _reap():
    while True:
        time.sleep(KEEP_SECONDS / 2)
        now = time.monotonic()
        with _lock:
            _blocks[:] = [e for e in _blocks if not (_idle(e) and now - e[1] >= KEEP_SECONDS)]
            if not _blocks:
                _reaper[0] = None
                return


def _after_fork():
    global _lock
    _lock = threading.Lock()
    _blocks.clear()
    _reaper[0] = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
