"""Compiling one loop twice: a parallel and a serial version.

Numba keys its on-disk cache (``cache=True``) by the Python function's qualified
name and line, not by the compile flags.  Compiling the same function once with
``parallel=True`` and once without would therefore share one cache entry, and
whichever was compiled first would be loaded for both (measured: the "parallel"
kernel rows ran on one thread).  :func:`parallel_and_serial` compiles two copies
of the function under distinct names, so each keeps its own entry.
"""

from __future__ import annotations

import types

from numba import njit


def _renamed(fn, suffix):
    g = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__ + suffix, fn.__defaults__, fn.__closure__)
    g.__qualname__ = fn.__qualname__ + suffix
    g.__doc__ = fn.__doc__
    g.__module__ = fn.__module__
    return g


def parallel_and_serial(fn, **flags):
    """``(parallel, serial)`` compiled versions of ``fn`` (``prange`` loops run in
    parallel in the first, as plain loops in the second), cached separately."""
    par = njit(cache=True, parallel=True, **flags)(_renamed(fn, "_par"))
    ser = njit(cache=True, **flags)(_renamed(fn, "_ser"))
    return par, ser


def parallel(fn, **flags):
    """The parallel compiled version of ``fn`` under its own cache entry."""
    return njit(cache=True, parallel=True, **flags)(_renamed(fn, "_par"))


def with_constants(fn, suffix, constants, **flags):
    """``fn`` compiled (cached, under the name ``fn`` + ``suffix``) with the module globals ``constants`` replaced:
    Numba reads globals as compile-time constants, so a branch on one is compiled away.  For hot loops whose
    variants must not share code (see ``solvers.dual_cd._svc_epochs_rec``).  The copy sees the module's globals
    as they are when this is called."""
    g = _renamed(fn, suffix)
    g = types.FunctionType(g.__code__, {**fn.__globals__, **constants}, g.__name__, g.__defaults__, g.__closure__)
    g.__qualname__ = fn.__qualname__ + suffix
    g.__doc__ = fn.__doc__
    g.__module__ = fn.__module__
    return njit(cache=True, **flags)(g)
