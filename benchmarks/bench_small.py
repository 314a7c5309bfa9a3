"""Small and medium fits, where the solver's steps and not the kernel rows take the time: maxmargin against
scikit-learn (LIBSVM) on the same data, in one run.

    python benchmarks/bench_small.py                 # every case, median of 5
    python benchmarks/bench_small.py --repeat 9 --only breast-raw

The shapes: the data sets scikit-learn ships (iris, wine, breast cancer standardised and raw, digits,
diabetes) and some generated with a fixed seed (``make_classification`` 3000 x 20 with 10% flipped labels,
2000 x 50 and 2000 x 300 dense for LinearSVC; ``make_regression`` 3000 x 20, and 2000 x 10 for LinearSVR).
Raw breast cancer under a linear kernel is ill-conditioned (features up
to ~4000): millions of SMO steps over 569 rows, where the cost of one step decides the time; small sets
(iris: a 1-2 ms fit) show the fixed cost of a fit.  Every fit runs in this process after one untimed fit
(compilation); the table gives medians, SMO iterations (summed over one-vs-one problems), the agreement of
``predict`` on the training data, and maxmargin's time / scikit-learn's (< 1: maxmargin faster).
Time it on a quiet machine: single fits of a few milliseconds move by 1.5x with a busy neighbour.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))


def _sets():
    from sklearn import datasets
    from sklearn.preprocessing import StandardScaler

    out = {}
    X, y = datasets.load_iris(return_X_y=True)
    out["iris"] = (StandardScaler().fit_transform(X), y)
    out["iris-reg"] = (out["iris"][0][:, :3], out["iris"][0][:, 3])  # petal width from the other three
    X, y = datasets.load_wine(return_X_y=True)
    out["wine"] = (StandardScaler().fit_transform(X), y)
    X, y = datasets.load_breast_cancer(return_X_y=True)
    out["breast"] = (StandardScaler().fit_transform(X), y)
    out["breast-raw"] = (X, y)
    X, y = datasets.load_digits(return_X_y=True)
    out["digits"] = (X / 16.0, y)
    X, y = datasets.make_classification(3000, 20, n_informative=10, flip_y=0.1, random_state=0)
    out["mc3000"] = (X, y)
    X, y = datasets.load_diabetes(return_X_y=True)
    out["diabetes"] = (StandardScaler().fit_transform(X), (y - y.mean()) / y.std())
    X, y = datasets.make_regression(3000, 20, noise=10.0, random_state=0)
    out["reg3000"] = (X, y / y.std())
    X, y = datasets.make_regression(2000, 10, noise=10.0, random_state=0)
    out["reg2000x10"] = (X, y / y.std())
    X, y = datasets.make_classification(2000, 50, n_informative=8, n_clusters_per_class=1, flip_y=0.1, random_state=0)
    out["mc2000x50"] = (X, y)
    X, y = datasets.make_classification(
        2000, 300, n_informative=20, n_clusters_per_class=1, flip_y=0.05, random_state=0
    )
    out["mc2000x300"] = (X, y)
    return out


#: (data, estimator, parameters)
CASES = [
    ("iris", "SVC", {}),
    ("iris", "SVC", {"kernel": "linear"}),
    ("wine", "SVC", {}),
    ("breast", "SVC", {}),
    ("breast", "SVC", {"kernel": "linear", "C": 10.0}),
    ("breast", "NuSVC", {"kernel": "linear", "nu": 0.1}),
    ("breast-raw", "SVC", {"kernel": "linear"}),
    ("breast-raw", "SVC", {}),
    ("digits", "SVC", {}),
    ("digits", "SVC", {"kernel": "linear"}),
    ("mc3000", "SVC", {"C": 10.0}),
    ("mc3000", "SVC", {"kernel": "linear"}),
    ("mc3000", "SVC", {"kernel": "poly", "degree": 3}),
    ("mc3000", "NuSVC", {"nu": 0.3}),
    ("mc3000", "OneClassSVM", {"nu": 0.2}),
    ("diabetes", "SVR", {"C": 10.0}),
    ("reg3000", "SVR", {"C": 10.0}),
    ("reg3000", "SVR", {"kernel": "linear", "epsilon": 0.05}),
    ("reg3000", "NuSVR", {"C": 10.0}),
    # session 18: multi-class NuSVC and the linear estimators on small and dense data
    ("wine", "NuSVC", {}),
    ("iris", "LinearSVC", {"random_state": 0}),
    ("iris-reg", "LinearSVR", {"random_state": 0}),
    ("reg2000x10", "LinearSVR", {"random_state": 0}),
    ("mc2000x50", "LinearSVC", {"loss": "hinge", "random_state": 0}),
    ("mc2000x300", "LinearSVC", {"dual": True, "random_state": 0}),
]


def _time(make, X, y, repeat):
    make().fit(X, y)  # compilation, caches
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        model = make().fit(X, y)
        times.append(time.perf_counter() - t)
    return statistics.median(times), model


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", nargs="*", help="data sets to run (default: all)")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    import sklearn.svm as sk

    import maxmargin as mm

    sets = _sets()
    print(f"# bench_small: median of {args.repeat} fits each, maxmargin time / scikit-learn time")
    print(
        "| data | estimator | parameters | maxmargin ms | iterations | scikit-learn ms | iterations | agree % | ratio |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for data, est, params in CASES:
        if args.only and data not in args.only:
            continue
        X, y = sets[data]
        y_fit = None if est == "OneClassSVM" else y
        t_mm, m_mm = _time(lambda: getattr(mm, est)(**params), X, y_fit, args.repeat)
        t_sk, m_sk = _time(lambda: getattr(sk, est)(**params), X, y_fit, args.repeat)
        p_mm, p_sk = m_mm.predict(X), m_sk.predict(X)
        if est in ("SVR", "NuSVR", "LinearSVR"):
            agree = 100.0 * float(np.mean(np.abs(p_mm - p_sk) <= 1e-2 * (1 + np.abs(p_sk))))
        else:
            agree = 100.0 * float(np.mean(p_mm == p_sk))
        ratio = t_mm / t_sk
        ratios.append(ratio)
        shown = ", ".join(f"{k}={v}" for k, v in params.items()) or "defaults"
        print(
            f"| {data} | {est} | {shown} | {t_mm * 1e3:.1f} | {int(np.sum(m_mm.n_iter_))} | {t_sk * 1e3:.1f} | "
            f"{int(np.sum(m_sk.n_iter_))} | {agree:.1f} | {ratio:.2f} |"
        )
    if ratios:
        print(f"\ngeometric mean of the ratios: {float(np.exp(np.mean(np.log(ratios)))):.2f} ({len(ratios)} cases)")


if __name__ == "__main__":
    main()
