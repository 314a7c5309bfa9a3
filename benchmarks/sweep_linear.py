"""The LIBLINEAR solvers that ``bench_linear.py`` does not time, on generated shapes: maxmargin against
liblinear-official, same solver, same ``tol`` (LIBLINEAR's ``-e``), same data, one run.

    python benchmarks/sweep_linear.py                     # every case, 3 repeats, median
    python benchmarks/sweep_linear.py text100/cs hashed300k/l1 --repeat 5
    python benchmarks/sweep_linear.py --list

Cases are ``set/solver``: ``hinge`` (``loss='hinge'``, LIBLINEAR ``-s 3``, tol 0.1), ``l1`` (``penalty='l1'``,
``-s 5``, tol 0.01), ``cs`` (``multi_class='crammer_singer'``, ``-s 4``, tol 0.1), and for regression
``svr-l1`` (``-s 13``, tol 0.1), ``svr-l2`` (squared, dual, ``-s 12``, tol 0.1) and ``svr-primal`` (``-s 11``,
tol 0.001); C = 1, bias feature 1, epsilon 0.  Sets: the classification shapes of ``datasets.py``
(``text100``, ``sparse40k``, ``hashed300k``, ``tall200k``, ``letter26``, ``text2``, ``dense2k``) and three
generated regression sets, ``reg_dense`` (100,000 x 50 Gaussian, planted weights plus unit noise), ``reg_text``
(``text100``'s rows, 20,000 of them, with a planted sparse linear target) and ``reg_wide`` (5,000 x 2,000
Gaussian, 50 planted weights).  Fit times: median of ``--repeat`` fits after warm-up fits
(:func:`median_time`: fits of milliseconds are repeated for 0.3 s), LIBLINEAR's problem built once.  "test" is
the accuracy (classification) or the mean squared error
(regression) of each model on the held-out rows, computed here from each model's predictions.  Ratio = fit time
/ LIBLINEAR's; < 1: faster.  As in ``bench_linear.py``, the run holds BLAS to one thread (its own bookkeeping
would otherwise leave OpenBLAS's threads spinning on the cores the next fits use; ``--blas-threads 0`` lifts it).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

SOLVERS = {
    # name: (LIBLINEAR -s, tol, maxmargin estimator keywords, regression)
    "hinge": (3, 0.1, dict(loss="hinge", dual=True), False),
    "l1": (5, 0.01, dict(penalty="l1", dual=False), False),
    "cs": (4, 0.1, dict(multi_class="crammer_singer"), False),
    "svr-l1": (13, 0.1, dict(loss="epsilon_insensitive", dual=True), True),
    "svr-l2": (12, 0.1, dict(loss="squared_epsilon_insensitive", dual=True), True),
    "svr-primal": (11, 0.001, dict(loss="squared_epsilon_insensitive", dual=False), True),
}
CASES = (
    "text100/hinge",
    "text100/l1",
    "text100/cs",
    "sparse40k/l1",
    "hashed300k/hinge",
    "hashed300k/l1",
    "tall200k/hinge",
    "letter26/cs",
    "reg_dense/svr-l1",
    "reg_dense/svr-l2",
    "reg_dense/svr-primal",
    "reg_text/svr-l1",
    "reg_text/svr-primal",
    "text2/hinge",
    "text2/l1",
    "dense2k/hinge",
    "dense2k/l1",
    "reg_wide/svr-l2",
    "reg_wide/svr-primal",
)


def reg_dense(n=100_000, n_test=20_000, d=50, seed=33):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + n_test, d))
    y = X @ rng.normal(size=d) + rng.normal(size=n + n_test)
    return X[:n], y[:n], X[n:], y[n:]


def reg_wide(n=5_000, n_test=2_000, d=2_000, seed=35):
    """Dense and wide regression (dense2k's shape): 50 of 2,000 features carry the target, plus unit noise."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + n_test, d))
    w = np.zeros(d)
    w[:50] = rng.normal(size=50)
    y = X @ w + rng.normal(size=n + n_test)
    return X[:n], y[:n], X[n:], y[n:]


def reg_text(seed=34):
    import datasets

    Xtr, _, Xte, _, _ = datasets.text100(n=20_000, n_test=4_000, seed=seed)
    w = np.random.default_rng(seed).normal(size=Xtr.shape[1])
    noise = np.random.default_rng(seed + 1)
    return Xtr, 3 * (Xtr @ w) + 0.1 * noise.normal(size=Xtr.shape[0]), Xte, 3 * (Xte @ w)


def load(name):
    if name in ("reg_dense", "reg_text", "reg_wide"):
        return globals()[name]()
    import datasets

    Xtr, ytr, Xte, yte, _ = datasets.LOADERS[name]()
    return Xtr, np.asarray(ytr), Xte, np.asarray(yte)


def median_time(fit, repeat):
    """The median time of at least ``repeat`` fits (and of more, until 0.3 s have passed, for fits of
    milliseconds), after warm-up fits (one, or as many as 0.1 s holds): the same rule as ``bench_linear.py``."""
    t_warm = time.perf_counter()
    for _ in range(50):
        fit()
        if time.perf_counter() - t_warm >= 0.1:
            break
    times = []
    t_loop = time.perf_counter()
    while len(times) < repeat or (time.perf_counter() - t_loop < 0.3 and len(times) < 200):
        t0 = time.perf_counter()
        out = fit()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def run_case(case, data, repeat):
    from liblinear.liblinearutil import parameter, predict, problem, train

    import maxmargin

    name, solver = case.split("/")
    s, tol, kw, regression = SOLVERS[solver]
    Xtr, ytr, Xte, yte = data
    est_cls = maxmargin.LinearSVR if regression else maxmargin.LinearSVC
    extra = dict(epsilon=0.0) if regression else {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t_mm, est = median_time(lambda: est_cls(C=1.0, tol=tol, random_state=0, **kw, **extra).fit(Xtr, ytr), repeat)
    capped = any("max_iter" in str(w.message) for w in caught)
    prob = problem(np.asarray(ytr, dtype=float), Xtr if sp.issparse(Xtr) else np.ascontiguousarray(Xtr))
    param = parameter(f"-s {s} -c 1 -e {tol} -B 1 -q" + (" -p 0" if regression else ""))
    t_ll, model = median_time(lambda: train(prob, param), repeat)
    p_ll, _, _ = predict(np.zeros(Xte.shape[0]), Xte if sp.issparse(Xte) else np.ascontiguousarray(Xte), model, "-q")
    p_mm = est.predict(Xte)
    if regression:
        q_mm, q_ll = np.mean((p_mm - yte) ** 2), np.mean((np.asarray(p_ll) - yte) ** 2)
        quality = f"MSE {q_mm:.4g} / {q_ll:.4g}"
    else:
        q_mm, q_ll = 100 * np.mean(p_mm == yte), 100 * np.mean(np.asarray(p_ll) == yte)
        quality = f"{q_mm:.2f}% / {q_ll:.2f}%"
    note = " (maxmargin stopped at max_iter)" if capped else ""
    print(f"| {case} | {t_mm:.3f} | {t_ll:.3f} | {t_mm / t_ll:.2f} | {quality}{note} |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", nargs="*", default=list(CASES))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--blas-threads", type=int, default=1, help="BLAS threads for the run (0: BLAS's default)")
    args = ap.parse_args()
    if args.list:
        print("\n".join(CASES))
        return
    for case in args.cases:
        name, _, solver = case.partition("/")
        if solver not in SOLVERS:
            raise SystemExit(f"unknown solver in {case!r}: one of {', '.join(SOLVERS)}")
    print("| case | maxmargin s | liblinear s | ratio | test: maxmargin / liblinear |")
    print("|---|---|---|---|---|")
    from threadpoolctl import threadpool_limits

    loaded = {}
    with threadpool_limits(limits=args.blas_threads or None, user_api="blas"):
        for case in args.cases:
            name = case.split("/")[0]
            if name not in loaded:
                loaded.clear()
                loaded[name] = load(name)
            run_case(case, loaded[name], args.repeat)


if __name__ == "__main__":
    main()
