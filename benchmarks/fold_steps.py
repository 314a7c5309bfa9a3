"""How much work the probability folds are, in solver steps (not time): the plain fit against its five folds.

    python benchmarks/fold_steps.py pendigits letter26 ijcnn1 --n 8000

Per dataset: the plain fit's steps (sum of ``n_iter_``), the folds' steps warm-started from the full fit (as
``SVC(probability=True)`` runs them: compiled one-vs-one route or SMO fold problems) and cold (from zero, the
SMO fold problems).  ``probability=True`` can cost at most about 1 + warm / plain of a plain fit's time if every
step cost the same; the issue-15 target (1.5x) needs warm / plain near 0.5.  Steps do not depend on the machine
or its load.  Datasets as in bench_probability.py.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_probability  # noqa: E402


def fold_steps(X, y, params, warm=True):
    """(plain steps, fold steps) of ``SVC(probability=True, random_state=0, **params)`` on (X, y)."""
    import maxmargin
    from maxmargin.solvers import ovo

    counted = []
    inside = []
    saved = {name: getattr(maxmargin.SVC, name) for name in ("_fit_fold_problem", "_fit_pair", "_fit_probability")}
    solve_pairs = ovo.solve_pairs
    warm_start = maxmargin.SVC._folds_warm_start

    def counting(name):
        def run(self, *a, **kw):
            fit = saved[name](self, *a, **kw)
            if inside:  # a fold (SMO fold problem, or fit_binary for the batched folds)
                counted.append(fit.n_iter)
            return fit

        return run

    def in_probability(self, *a, **kw):
        inside.append(True)
        try:
            return saved["_fit_probability"](self, *a, **kw)
        finally:
            inside.clear()

    def counting_pairs(*args, **kw):
        res = solve_pairs(*args, **kw)
        counted.append(int(np.nansum(res["cv_iter"])))
        return res

    maxmargin.SVC._fit_fold_problem = counting("_fit_fold_problem")
    maxmargin.SVC._fit_pair = counting("_fit_pair")
    maxmargin.SVC._fit_probability = in_probability
    ovo.solve_pairs = counting_pairs
    if not warm:
        maxmargin.SVC._folds_warm_start = lambda self: False
    try:
        est = maxmargin.SVC(probability=True, random_state=0, **params).fit(X, y)
    finally:
        for name, fn in saved.items():
            setattr(maxmargin.SVC, name, fn)
        ovo.solve_pairs = solve_pairs
        maxmargin.SVC._folds_warm_start = warm_start
    return int(np.sum(est.n_iter_)), int(sum(counted))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="+")
    ap.add_argument("--n", type=int, default=8000, help="rows (a random subset; 0: all)")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold folds (slow on large data)")
    args = ap.parse_args()
    print(f"{'data':12} {'n x d':>12} {'k':>4} {'plain':>10} {'warm folds':>11} {'cold folds':>11} {'warm/plain':>11}")
    for name in args.data:
        X, y, params = bench_probability.load(name, args.n)
        plain, warm = fold_steps(X, y, params)
        cold = "-" if args.no_cold else str(fold_steps(X, y, params, warm=False)[1])
        shape = f"{X.shape[0]}x{X.shape[1]}"
        k = len(np.unique(y))
        print(f"{name:12} {shape:>12} {k:>4} {plain:>10} {warm:>11} {cold:>11} {warm / max(plain, 1):>11.2f}")


if __name__ == "__main__":
    main()
