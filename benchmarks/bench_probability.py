"""probability=True against the plain fit, for maxmargin and scikit-learn, and the cost of callbacks.

    python benchmarks/bench_probability.py                  # ijcnn1 (8000 rows) and pendigits, best of 5
    python benchmarks/bench_probability.py --n 5000 --repeat 5 --data ijcnn1

Per dataset, in one process (every variant run once untimed first): the best fit time over the repeats of

  mm plain        maxmargin.SVC()
  mm proba        maxmargin.SVC(probability=True)
  sk plain        sklearn.svm.SVC()              (LIBSVM)
  sk proba        sklearn.svm.SVC(probability=True)
  mm callback     maxmargin.SVC() with a callback that does nothing (the mechanism's own cost)
  mm progress     maxmargin.SVC() with set_callbacks(ProgressBar()) (output to /dev/null; rich's
                  drawing thread included)

and the ratios: proba / plain per library (the issue asks <= 1.5 for maxmargin), maxmargin's
proba against scikit-learn's, and the overheads of the callback mechanism and of the progress bar
(variant / plain - 1).  Wall times, then the process's CPU times (all threads: the work done,
less sensitive to other load than the wall time).
The repeats alternate between the variants, so that load from other processes falls on all.
Datasets: pendigits, usps, ijcnn1 and the other sets of ../shared/data (set MAXMARGIN_DATA elsewhere),
and every generated shape of datasets.py (letter26, text100, sparse40k, zipf50, classes300, easy20k, ...).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import datasets  # noqa: E402


def load(name, n):
    if name == "ijcnn1":
        X, y, _, _, params = datasets.ijcnn1()
    elif name == "pendigits":
        X, y = datasets._svmlight("pendigits.xz", 16)
        X = X.toarray() / 100.0
        params = dict(C=10.0, gamma=1.0)
    elif name == "usps":
        X, y, _, _, params = datasets.usps()
    elif name in datasets.LOADERS:  # the other sets and the generated shapes, fixed seeds (datasets.py)
        X, y, _, _, params = datasets.LOADERS[name]()
    else:
        raise SystemExit(f"unknown dataset {name!r}: pendigits or one of {', '.join(datasets.LOADERS)}")
    if n and n < X.shape[0]:
        idx = np.random.default_rng(0).choice(X.shape[0], n, replace=False)
        X, y = X[idx], y[idx]
    return (X if sp.issparse(X) else np.ascontiguousarray(X)), y, params


class _Nothing:
    """A scikit-learn callback that does nothing."""

    def setup(self, estimator, context):
        pass

    def teardown(self, estimator, context):
        pass

    def on_fit_task_begin(self, estimator, context):
        pass

    def on_fit_task_end(self, estimator, context):
        pass


def mechanism_cost():
    """Microseconds per sub-problem task (begin + end) and per solver chunk, with a do-nothing callback."""
    import maxmargin
    from maxmargin.callbacks import FitReport

    est = maxmargin.SVC().set_callbacks(_Nothing())
    report = FitReport(est)
    report.begin(4950)
    t = time.perf_counter()
    report.batch_done(range(4950))
    per_task = (time.perf_counter() - t) / 4950 * 1e6
    report = FitReport(est)
    report.begin(1, steps=True)
    cb = report.solver_callback(0)
    t = time.perf_counter()
    for i in range(20000):
        cb({"violation": 1.0 / (i + 1), "tol": 1e-3})
    return per_task, (time.perf_counter() - t) / 20000 * 1e6


def timed(fn):
    """(wall seconds, CPU seconds of the process, all threads)."""
    t, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t, time.process_time() - c


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", nargs="+", default=["ijcnn1", "pendigits"])
    ap.add_argument("--n", type=int, default=8000, help="rows (a random subset; 0: all)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-sklearn", action="store_true")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args()

    import sklearn.svm

    warnings.filterwarnings("ignore", category=FutureWarning)  # scikit-learn 1.9 deprecates probability=True

    import maxmargin

    maxmargin.SVC(probability=True, random_state=0).fit(np.random.rand(60, 3), np.arange(60) % 3)  # compile
    rows = []
    for name in args.data:
        X, y, params = load(name, args.n)
        variants = {
            "mm plain": lambda: maxmargin.SVC(**params).fit(X, y),
            "mm proba": lambda: maxmargin.SVC(probability=True, random_state=0, **params).fit(X, y),
        }
        if not args.no_sklearn:
            variants["sk plain"] = lambda: sklearn.svm.SVC(**params).fit(X, y)
            variants["sk proba"] = lambda: sklearn.svm.SVC(probability=True, random_state=0, **params).fit(X, y)
        if not args.no_progress:
            try:
                from rich.console import Console
                from sklearn.callback import ProgressBar
                from sklearn.callback import _progressbar as pb_module
            except ImportError:
                print("(no sklearn.callback or rich: the progress bar's overhead is not measured)")
            else:
                null = open(os.devnull, "w")

                orig = pb_module._Progress.__init__  # the same bar, drawn into /dev/null
                if not getattr(orig, "to_devnull", False):  # patched once, not once per dataset

                    def init(self, *a, orig=orig, **k):
                        k.setdefault("console", Console(file=null, force_terminal=True))
                        orig(self, *a, **k)

                    init.to_devnull = True
                    pb_module._Progress.__init__ = init
                variants["mm callback"] = lambda: maxmargin.SVC(**params).set_callbacks(_Nothing()).fit(X, y)
                variants["mm progress"] = lambda: maxmargin.SVC(**params).set_callbacks(ProgressBar()).fit(X, y)
        times = {k: [] for k in variants}
        for fn in variants.values():  # once untimed: compiled routes for this shape, caches
            fn()
        for _ in range(args.repeat):
            for k, fn in variants.items():
                times[k].append(timed(fn))
        med = {k: float(np.min([w for w, _ in v])) for k, v in times.items()}  # the best: least disturbed
        cpu = {k: float(np.min([c for _, c in v])) for k, v in times.items()}
        rows.append((name, X.shape, len(np.unique(y)), med, cpu))

    print(f"\nload average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; best of {args.repeat}")
    if not args.no_progress:
        try:
            per_task, per_chunk = mechanism_cost()
            print(
                f"the callback mechanism alone: {per_task:.1f} us per sub-problem task, {per_chunk:.1f} us per "
                "solver chunk (SMO and the batched solver report every ~0.2 s)"
            )
        except Exception as exc:  # scikit-learn < 1.9
            print(f"(callback mechanism not measured: {exc})")
    head = f"{'data':<10} {'n x d':>11} {'k':>3} " + " ".join(f"{k:>11}" for k in rows[0][3])
    print(head + "   mm proba/plain  sk proba/plain  mm/sk proba  callback  progress  (wall)")
    for name, shape, k, med, cpu in rows:
        line = f"{name:<10} {shape[0]:>5}x{shape[1]:<5} {k:>3} " + " ".join(f"{v:>10.2f}s" for v in med.values())
        line += f"   {med['mm proba'] / med['mm plain']:>14.2f}"
        line += f"  {med['sk proba'] / med['sk plain']:>14.2f}" if "sk plain" in med else f"  {'-':>14}"
        line += f"  {med['mm proba'] / med['sk proba']:>11.2f}" if "sk proba" in med else f"  {'-':>11}"
        if "mm progress" in med:
            line += f"  {100 * (med['mm callback'] / med['mm plain'] - 1):>+7.1f}%"
            line += f"  {100 * (med['mm progress'] / med['mm plain'] - 1):>+7.1f}%"
        print(line)
    print("CPU time of the process (all threads): the work, less sensitive to other load")
    for name, shape, k, med, cpu in rows:
        line = f"{name:<10} {shape[0]:>5}x{shape[1]:<5} {k:>3} " + " ".join(f"{v:>10.2f}s" for v in cpu.values())
        line += f"   {cpu['mm proba'] / cpu['mm plain']:>14.2f}"
        line += f"  {cpu['sk proba'] / cpu['sk plain']:>14.2f}" if "sk plain" in cpu else f"  {'-':>14}"
        line += f"  {cpu['mm proba'] / cpu['sk proba']:>11.2f}" if "sk proba" in cpu else f"  {'-':>11}"
        if "mm progress" in cpu:
            line += f"  {100 * (cpu['mm callback'] / cpu['mm plain'] - 1):>+7.1f}%"
            line += f"  {100 * (cpu['mm progress'] / cpu['mm plain'] - 1):>+7.1f}%"
        print(line)


if __name__ == "__main__":
    main()
