"""Where the batched solver starts to beat SMO: both solvers on the first n rows of each
dataset (binary; usps split into digits < 5 and >= 5), same problem, tol 1e-3.

    python benchmarks/crossover.py                 # a9a ijcnn1 usps skin, n = 2000 4000 8000
    python benchmarks/crossover.py skin --n 2000 16000

It is what ``maxmargin.formulations.AUTO_BATCHED_MIN_N`` (solver='auto') was set from; run it on a
quiet machine, a warm-up solve first compiles both solvers.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from datasets import LOADERS

from maxmargin.kernels import make_kernel
from maxmargin.problem import csvc_problem
from maxmargin.solvers import batched, smo


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("datasets", nargs="*", default=["a9a", "ijcnn1", "usps", "skin"])
    ap.add_argument("--n", nargs="+", type=int, default=[2000, 4000, 8000])
    args = ap.parse_args()
    for name in args.datasets:
        Xtr, ytr, _, _, prm = LOADERS[name]()
        y = np.where(ytr < 5, 1.0, -1.0) if name == "usps" else np.where(ytr == ytr.max(), 1.0, -1.0)
        k = make_kernel("rbf", gamma=prm["gamma"], X=Xtr)
        for mod in (smo, batched):  # compile outside the timing
            mod.solve(csvc_problem(Xtr[:500], k, y[:500], prm["C"]))
        for n in args.n:
            times = []
            for mod in (smo, batched):
                t = time.perf_counter()
                mod.solve(csvc_problem(Xtr[:n], k, y[:n], prm["C"]), tol=1e-3)
                times.append(time.perf_counter() - t)
            print(
                f"{name:8s} n={n:6d}  smo {times[0]:7.3f} s  batched {times[1]:7.3f} s  "
                f"smo/batched {times[0] / times[1]:5.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
