"""Dense kernel products three ways, same data, one run: the fused compiled loop (kernel value, exponential and
product with the coefficients in one pass, no block stored), BLAS on chunks of rows with the kernel values summed
while in cache (``engine.times_blas``, session 49), and a BLAS block + the compiled transform + a matrix-vector
product (``Kernel.mmv``), on 1 and 2 threads, over shapes of ``K(A, B) @ c``.

Which path wins depends on the CPU (on Intel cores with AVX-512 BLAS runs 512-bit vectors, Numba's loops
256-bit ones) and on what else runs: the BLAS path writes a block of kernel values and reads it back (memory
traffic), the fused loop does not, so with ``--side-by-side`` (two processes of one thread each at once, as two
Dask workers or two joblib jobs) the BLAS path slows down more.  Run it on the machine at hand before moving
``engine.FUSED_DENSE_MAX_D`` or ``engine.TIMES_AXPY_MAX_D``.  The two paths alternate in each repeat (the
machine's speed moves); medians are printed.

    python3 benchmarks/kernel_paths.py                      # the default shapes
    python3 benchmarks/kernel_paths.py --shapes 20x20000x10000 12x100000x500 --repeat 5
    python3 benchmarks/kernel_paths.py --side-by-side       # two one-thread processes at once
"""

from __future__ import annotations

import argparse
import statistics
import time

import numba
import numpy as np
from threadpoolctl import threadpool_limits

from maxmargin.kernels import engine
from maxmargin.kernels.engine import KernelRows
from maxmargin.kernels.objects import RBFKernel

SHAPES = ["4x20000x10000", "8x20000x10000", "12x20000x10000", "20x20000x10000", "20x20000x1000", "32x20000x5000"]


def one_shape(d, na, nb, threads, repeat):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(na + nb, d))
    c = rng.normal(size=nb)
    kern = RBFKernel(gamma=1.0 / d)
    kr = KernelRows(X, kern)
    rows, targets = np.arange(na, na + nb), np.arange(na)
    A, B = X[:na], X[na:]
    sqa, sqb = (A * A).sum(1), (B * B).sum(1)
    g = (kern.code, *kern.params)
    numba.set_num_threads(threads)
    t_fused, t_chunks, t_blas = [], [], []
    fused = kr.path in ("narrow", "dense")
    saved = engine.TIMES_AXPY_MAX_D
    engine.TIMES_AXPY_MAX_D = max(saved, d)  # KernelRows.times' fused loop, whatever the host's bound
    try:
        with threadpool_limits(threads):
            if fused:
                kr.times(rows[:50], c[:50], targets[:50])
            engine.times_blas(A[:50], B[:50], sqa[:50], sqb[:50], *g, c[:50])
            for _ in range(repeat):
                t = time.perf_counter()
                r1 = kr.times(rows, c, targets) if fused else None
                t_fused.append(time.perf_counter() - t)
                t = time.perf_counter()
                r3 = engine.times_blas(A, B, sqa, sqb, *g, c)
                t_chunks.append(time.perf_counter() - t)
                t = time.perf_counter()
                r2 = kern.mmv(A, B, c)
                t_blas.append(time.perf_counter() - t)
    finally:
        engine.TIMES_AXPY_MAX_D = saved
    diff = max(float(np.abs(r1 - r2).max()) if r1 is not None else 0.0, float(np.abs(r3 - r2).max()))
    tf = statistics.median(t_fused) if fused else float("nan")
    return tf, statistics.median(t_chunks), statistics.median(t_blas), diff


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", nargs="+", default=SHAPES, help="d x rows of A x rows of B")
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--side-by-side", action="store_true", help="two processes of one thread each at once")
    args = ap.parse_args(argv)
    print(
        f"this host: fused loops up to {engine.FUSED_DENSE_MAX_D} features (kernel_times), "
        f"{engine.TIMES_AXPY_MAX_D} (gradient rebuild)"
    )
    head = "| d | rows A | rows B | threads | fused s | chunks s | BLAS block s | fused / block | chunks / block"
    print(head + " | max diff |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for shape in args.shapes:
        d, na, nb = (int(v) for v in shape.split("x"))
        if args.side_by_side:
            import multiprocessing as mp

            with mp.get_context("spawn").Pool(2) as pool:
                both = pool.starmap(one_shape, [(d, na, nb, 1, args.repeat)] * 2)
            runs = [("1 (x2 processes)", tuple(np.mean([r[k] for r in both]) for k in range(4)))]
        else:
            runs = [(th, one_shape(d, na, nb, th, args.repeat)) for th in args.threads]
        for th, (tf, tc, tb, diff) in runs:
            print(
                f"| {d} | {na:,} | {nb:,} | {th} | {tf:.3f} | {tc:.3f} | {tb:.3f} | {tf / tb:.2f} | {tc / tb:.2f} "
                f"| {diff:.1e} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
