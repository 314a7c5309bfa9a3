"""Large zeroed arrays whose pages the kernel may back with transparent huge pages.

A fresh page is zero-filled by the kernel at its first touch, one fault a 4 KB page.  Where faults are dear (virtual
machines that report freed memory to the host: see :mod:`maxmargin._scratch`) a large array written all over costs
more in faults than in writes: session 60, one-vs-rest weights of 200 classes over 2**20 features (1.6 GB, every
page written) took 3.9-4.0 s to fill from ``np.zeros`` and 2.2-2.3 s from memory advised for huge pages (2 MB a
fault), against 0.33 s once faulted.  Linux only (``madvise(MADV_HUGEPAGE)``, which matters where the kernel's
setting is ``madvise``, the common default); elsewhere, and below :data:`MIN_BYTES`, plain ``np.zeros``.

The array is a NumPy view of an anonymous ``mmap``: it pickles and copies as any array, and its memory goes back
when the last view of it dies.
"""

from __future__ import annotations

import mmap

import numpy as np

#: arrays of fewer bytes than this are plain ``np.zeros`` (a few huge pages at most: not worth a mapping)
MIN_BYTES = 32 << 20


def zeros(shape, dtype=np.float64):
    """A C-ordered zeroed array of ``shape``, on memory advised for huge pages where that is possible."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    size = n * dtype.itemsize
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if size < MIN_BYTES or advice is None:
        return np.zeros(shape, dtype=dtype)
    try:
        buf = mmap.mmap(-1, size)
        buf.madvise(advice)
    except (OSError, ValueError):  # (no such advice on this kernel, or no mapping: the plain way)
        return np.zeros(shape, dtype=dtype)
    return np.frombuffer(buf, dtype=dtype, count=n).reshape(shape)
