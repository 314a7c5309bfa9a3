"""The rest of the SVM family against scikit-learn (issue 4), in one script.

    python benchmarks/bench_family.py usps svr oneclass grid      # everything
    python benchmarks/bench_family.py grid --grid-rows 10000 --cache-size 200
    python benchmarks/bench_family.py svr --repeat 3

Tables (times are medians over ``--repeat`` fits with [min, max]; every fit runs in
this process after the compiled code was warmed on a tiny problem):

usps      10 classes (7291 train, 2007 test), C=10, gamma='scale', probability=True
          (random_state=0): fit time, test accuracy of ``predict`` and of
          ``argmax(predict_proba)``, test log loss, #SV; also both without
          probabilities, to show what the 5-fold cross-validation costs.
svr       SVR vs scikit-learn's SVR on the bundled diabetes data (75/25 split, raw
          features, C=100, epsilon=5, gamma='scale') and on Friedman #1
          (``make_friedman1``, 10 features, noise 1; 16000 train / 4000 test; C=10,
          epsilon=0.1, gamma='scale'): fit time, dual objective (both computed from
          the fitted ``dual_coef_`` the same way), test RMSE and MAE, #SV; also
          maxmargin's SVR with ``solver='batched'`` (its "iter" counts inner SMO steps).
oneclass  OneClassSVM vs scikit-learn's on 20000 points (10-D Gaussian mixture plus
          5% uniform outliers), nu=0.05, gamma='scale': fit time, dual objective,
          offset_, agreement of ``predict`` on a test set, ROC AUC of
          ``score_samples`` for telling the test outliers from the test inliers.
grid      a9a (first ``--grid-rows`` rows), gamma=0.05, 10 values of C (logspace
          -1..2): one estimator refitted along the grid with ``warm_start=True``
          (multipliers scaled by C_new/C_old; SMO also keeps its kernel rows) vs
          independent fits (``warm_start=False``), for ``solver='smo'`` and
          ``'batched'`` (what ``'auto'`` picks at this size), and scikit-learn's SVC
          for reference; total time, iterations, largest relative objective
          difference warm vs cold.

The machine these numbers come from matters: on a shared 2-core machine single
fits show sporadic 3-20x outliers (see ../shared/PEERS.md); repeat and compare the
medians, and compare only numbers from one run of this script.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _timed(make, fit_args, repeat):
    """Median, min and max fit time and the last fitted estimator."""
    times = []
    est = None
    for _ in range(repeat):
        est = make()
        t = time.perf_counter()
        est.fit(*fit_args)
        times.append(time.perf_counter() - t)
    return float(np.median(times)), float(min(times)), float(max(times)), est


def _t(med, lo, hi):
    return f"{med:8.2f} [{lo:.2f}, {hi:.2f}]"


def _warm_jit():
    import maxmargin as mm

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = (X[:, 0] > 0).astype(int)
    mm.SVC().fit(X, y)
    mm.SVC(probability=True).fit(X, y)
    mm.NuSVC(nu=0.3).fit(X, y)
    mm.SVR().fit(X, X[:, 1])
    mm.NuSVR().fit(X, X[:, 1])
    mm.OneClassSVM().fit(X)


def _sk(name):
    import sklearn.svm as sksvm

    return getattr(sksvm, name)


# ------------------------------------------------------------------------------- usps
def bench_usps(repeat):
    from datasets import usps
    from sklearn.metrics import log_loss

    import maxmargin as mm

    Xtr, ytr, Xte, yte, params = usps()
    print(
        f"\nusps: n={Xtr.shape[0]} test={Xte.shape[0]} d={Xtr.shape[1]} classes=10 {params} tol=1e-3 "
        f"probability=True random_state=0 (5-fold Platt scaling + pairwise coupling)"
    )
    print(
        f"{'estimator':32s} {'fit s [min, max]':>22s} {'acc':>7s} {'acc(argmax p)':>14s} {'log loss':>9s} {'#SV':>6s}"
    )
    # maxmargin's default solver='auto' is SMO here: every one-vs-one problem has < 2000 points
    for prob in (True, False):
        for label, cls in (("maxmargin SVC", mm.SVC), ("sklearn SVC", _sk("SVC"))):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # scikit-learn 1.9 deprecates probability=True
                med, lo, hi, est = _timed(lambda: cls(probability=prob, random_state=0, **params), (Xtr, ytr), repeat)
                acc = float(np.mean(est.predict(Xte) == yte))
                if prob:
                    P = est.predict_proba(Xte)
                    acc_p = float(np.mean(est.classes_[P.argmax(1)] == yte))
                    ll = f"{log_loss(yte, P, labels=est.classes_):9.4f}"
                    accp = f"{acc_p:14.4f}"
                else:
                    ll, accp = f"{'-':>9s}", f"{'-':>14s}"
            name = f"{label}(probability={prob})"
            print(f"{name:32s} {_t(med, lo, hi):>22s} {acc:7.4f} {accp} {ll} {est.support_.shape[0]:6d}")


# -------------------------------------------------------------------------------- svr
def _svr_objective(est, z_train, epsilon, kern):
    """1/2 b'Kb + eps |b|_1 - z'b from the fitted dual coefficients (kernel in blocks)."""
    b = np.asarray(est.dual_coef_).ravel()
    SV = est.support_vectors_
    return float(0.5 * b @ kern.mmv(SV, SV, b) + epsilon * np.abs(b).sum() - z_train[est.support_] @ b)


def bench_svr(repeat):
    from sklearn.datasets import load_diabetes, make_friedman1

    import maxmargin as mm
    from maxmargin.kernels import make_kernel

    X, y = load_diabetes(return_X_y=True)
    rng = np.random.default_rng(0)
    perm = rng.permutation(X.shape[0])
    cut = int(0.75 * X.shape[0])
    cases = [("diabetes", X[perm[:cut]], y[perm[:cut]], X[perm[cut:]], y[perm[cut:]], dict(C=100.0, epsilon=5.0))]
    Xf, yf = make_friedman1(20000, 10, noise=1.0, random_state=0)
    cases.append(("friedman1 20k", Xf[:16000], yf[:16000], Xf[16000:], yf[16000:], dict(C=10.0, epsilon=0.1)))
    for name, Xtr, ytr, Xte, yte, p in cases:
        print(f"\nSVR on {name}: n={Xtr.shape[0]} test={Xte.shape[0]} d={Xtr.shape[1]} {p} gamma='scale' tol=1e-3")
        print(
            f"{'estimator':18s} {'fit s [min, max]':>22s} {'dual objective':>16s} {'test RMSE':>10s} "
            f"{'test MAE':>9s} {'#SV':>6s} {'iter':>8s}"
        )
        kern = make_kernel("rbf", gamma="scale", X=Xtr)
        objs = []
        runs = (
            ("maxmargin SVR(smo)", mm.SVR, {"solver": "smo"}),
            ("sklearn SVR", _sk("SVR"), {}),
            ("maxmargin (batched)", mm.SVR, {"solver": "batched"}),
        )
        for label, cls, extra in runs:
            med, lo, hi, est = _timed(lambda: cls(gamma="scale", **p, **extra), (Xtr, ytr), repeat)
            r = est.predict(Xte) - yte
            obj = _svr_objective(est, ytr, p["epsilon"], kern)
            objs.append(obj)
            print(
                f"{label:18s} {_t(med, lo, hi):>22s} {obj:16.6f} {np.sqrt(np.mean(r * r)):10.4f} "
                f"{np.mean(np.abs(r)):9.4f} {est.support_.shape[0]:6d} {int(np.ravel(est.n_iter_)[0]):8d}"
            )
        print(
            f"objective rel diff (smo vs sklearn): {abs(objs[0] - objs[1]) / abs(objs[1]):.2e}; "
            f"(batched vs sklearn): {abs(objs[2] - objs[1]) / abs(objs[1]):.2e}"
        )


# --------------------------------------------------------------------------- oneclass
def bench_oneclass(repeat):
    from sklearn.metrics import roc_auc_score

    import maxmargin as mm
    from maxmargin.kernels import make_kernel

    rng = np.random.default_rng(0)
    d = 10
    centers = rng.normal(scale=3.0, size=(3, d))

    def sample(n, frac_out):
        n_out = int(frac_out * n)
        inl = centers[rng.integers(0, 3, n - n_out)] + rng.normal(size=(n - n_out, d))
        out = rng.uniform(-10, 10, size=(n_out, d))
        return np.r_[inl, out], np.r_[np.ones(n - n_out), -np.ones(n_out)]

    Xtr, _ = sample(20000, 0.05)
    Xte, lab = sample(5000, 0.10)
    p = dict(nu=0.05, gamma="scale")
    print(
        f"\nOneClassSVM: n={Xtr.shape[0]} d={d} (3 Gaussians + 5% uniform outliers) {p} tol=1e-3; "
        f"test: 5000 points, 10% outliers"
    )
    print(
        f"{'estimator':27s} {'fit s [min, max]':>22s} {'dual objective':>15s} {'offset_':>10s} {'#SV':>6s} "
        f"{'test AUC':>9s} {'test outl.':>10s}"
    )
    kern = make_kernel("rbf", gamma="scale", X=Xtr)
    preds = []
    runs = (
        ("maxmargin OneClassSVM(smo)", mm.OneClassSVM, {"solver": "smo"}),
        ("sklearn OneClassSVM", _sk("OneClassSVM"), {}),
        ("maxmargin (batched)", mm.OneClassSVM, {"solver": "batched"}),
    )
    for label, cls, extra in runs:
        med, lo, hi, est = _timed(lambda: cls(**p, **extra), (Xtr,), repeat)
        a = np.asarray(est.dual_coef_).ravel()
        SV = est.support_vectors_
        obj = float(0.5 * a @ kern.mmv(SV, SV, a))
        auc = roc_auc_score(lab, est.score_samples(Xte))
        pred = est.predict(Xte)
        preds.append(pred)
        print(
            f"{label:27s} {_t(med, lo, hi):>22s} {obj:15.6f} {float(np.ravel(est.offset_)[0]):10.5f} "
            f"{est.support_.shape[0]:6d} {auc:9.4f} {np.mean(pred == -1):10.4f}"
        )
    print(
        f"predictions agree with scikit-learn's on {100 * np.mean(preds[0] == preds[1]):.2f}% (smo) and "
        f"{100 * np.mean(preds[2] == preds[1]):.2f}% (batched) of the test points"
    )


# ------------------------------------------------------------------------------- grid
def bench_grid(repeat, rows, cache_size):
    from datasets import a9a

    import maxmargin as mm

    Xtr, ytr, _, _, _ = a9a()
    X, y = Xtr[:rows], ytr[:rows]
    Cs = np.logspace(-1, 2, 10)
    print(
        f"\na9a C grid: first {X.shape[0]} rows, gamma=0.05, C in logspace(-1, 2, 10) = "
        f"{', '.join(f'{c:.3g}' for c in Cs)}; tol=1e-3, cache_size={cache_size} MB"
    )
    results = {}
    labels = (
        "smo warm_start=False",
        "smo warm_start=True",
        "batched warm_start=False",
        "batched warm_start=True",
        "sklearn SVC (no warm start)",
    )
    for label in labels:
        totals = []
        for _ in range(repeat):
            if label.startswith("sklearn"):
                est = _sk("SVC")(gamma=0.05, cache_size=cache_size)
            else:
                est = mm.SVC(
                    gamma=0.05, cache_size=cache_size, solver=label.split()[0], warm_start=label.endswith("True")
                )
            per, iters, objs = [], [], []
            t0 = time.perf_counter()
            for C in Cs:
                t = time.perf_counter()
                est.set_params(C=C).fit(X, y)
                per.append(time.perf_counter() - t)
                iters.append(int(np.ravel(est.n_iter_)[0]))
                objs.append(float(getattr(est, "objective_", [np.nan])[0]))
            totals.append(time.perf_counter() - t0)
        results[label] = (totals, per, iters, objs)
    print(f"{'run':30s} {'grid s [min, max]':>24s} {'iterations':>11s}   per-C seconds (last run)")
    for label, (totals, per, iters, _) in results.items():
        med = float(np.median(totals))
        print(
            f"{label:30s} {_t(med, min(totals), max(totals)):>24s} {sum(iters):11d}   "
            + " ".join(f"{s:.2f}" for s in per)
        )
    for solver in ("smo", "batched"):
        cold, warm = results[f"{solver} warm_start=False"], results[f"{solver} warm_start=True"]
        rel = max(abs(a - b) / abs(a) for a, b in zip(cold[3], warm[3]))
        print(
            f"{solver} warm/cold: time {np.median(warm[0]) / np.median(cold[0]):.2f}x, iterations "
            f"{sum(warm[2]) / sum(cold[2]):.2f}x, largest relative objective difference {rel:.1e}"
        )
    print("(iterations: SMO steps; for the batched solver, its inner SMO steps)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("parts", nargs="*", metavar="PART", help="any of usps, svr, oneclass, grid (default: all four)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--grid-rows", type=int, default=10000)
    ap.add_argument("--cache-size", type=float, default=200.0)
    a = ap.parse_args(argv)
    parts = a.parts or ["usps", "svr", "oneclass", "grid"]
    bad = sorted(set(parts) - {"usps", "svr", "oneclass", "grid"})
    if bad:
        ap.error(f"unknown part(s) {bad}; choose from usps, svr, oneclass, grid")
    import os

    import sklearn

    import maxmargin

    print(
        f"maxmargin {maxmargin.__version__}, scikit-learn {sklearn.__version__}, numpy {np.__version__}, "
        f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f} at start"
    )
    _warm_jit()
    for part in parts:
        if part == "usps":
            bench_usps(a.repeat)
        elif part == "svr":
            bench_svr(a.repeat)
        elif part == "oneclass":
            bench_oneclass(a.repeat)
        else:
            bench_grid(a.repeat, a.grid_rows, a.cache_size)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
