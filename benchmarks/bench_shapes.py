"""Shapes and options nobody tuned on: maxmargin against scikit-learn (LIBSVM) on the same generated data, fit
and predict, in one process.

    python benchmarks/bench_shapes.py                  # every case, median of 3
    python benchmarks/bench_shapes.py --only gamma wide --repeat 5

Each case is data made here with a fixed seed and one estimator setting users reach for but the shared data sets do
not exercise: a large RBF gamma (the corner of every grid search, where most kernel values underflow), a small one
with a large C, class and sample weights, float32 and Fortran-ordered input, a precomputed Gram matrix, the sigmoid
and a degree-4 polynomial kernel, 50 classes, 8 and 20 classes easy to separate (few support vectors), 20 small
classes (SVC and NuSVC) and 8 overlapping ones, rows repeated ten times, binary sparse rows as CSR, CSC and
integers, very sparse rows (10 of 2,000 features a row: 5 classes, one-class, probabilities; 4 of 2**20 hashed
features), text whose frequent words sit in most documents, regression on sparse rows and with targets in the
thousands, one-class on 20,000 rows, the linear kernel on few features with overlapping classes (C = 0.1-10, 3
classes, SVR), wide dense data with far fewer rows than features (gene-expression shape, n << d), 300 classes of 10
rows and 1,000 of 5, rows that repeat (pixel colours, one-hot categories), and the latency of ``predict`` on one
row. Every fit runs once untimed (compilation), then ``--repeat`` times; the table gives medians and maxmargin /
scikit-learn (< 1: maxmargin faster) for the fit and for ``predict`` on the test rows, and the agreement of the two
predictions.
Time it on a quiet machine.

``--peer sklearnex`` times Intel's oneDAL (scikit-learn-intelex) instead of scikit-learn.  Where oneDAL does not
take a case (its estimator is missing, or it hands the call back to scikit-learn: a kernel, sparse input or an
option it lacks), the row says so in the "peer ran" column ("sklearn" for a fallback, "oneDAL" where
sklearnex's log says it ran accelerated), so a ratio against a fallback is not read as one against oneDAL.
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))


def _classification(n, d, seed=0, **kw):
    from sklearn.datasets import make_classification

    return make_classification(n, d, n_informative=min(d - 2, 10), random_state=seed, **kw)


def _cases():
    """(group, name, estimator, parameters, X, y, X_test, fit keywords)."""
    from sklearn.datasets import make_blobs, make_regression
    from sklearn.preprocessing import StandardScaler

    out = []

    def case(group, name, est, params, X, y, Xte=None, fit_kw=None):
        out.append((group, name, est, params, X, y, X if Xte is None else Xte, fit_kw or {}))

    X, y = _classification(5000, 50, flip_y=0.05)
    Xs = StandardScaler().fit_transform(X)
    case("gamma", "gamma=10, 3,000 x 50 (every row a support vector)", "SVC", {"gamma": 10.0}, Xs[:3000], y[:3000])
    case("gamma", "gamma=10, 5,000 x 50", "SVC", {"gamma": 10.0}, Xs, y)
    case("gamma", "gamma=1e-3, C=100", "SVC", {"gamma": 1e-3, "C": 100.0}, Xs[:3000], y[:3000])
    case("gamma", "SVR gamma=10", "SVR", {"gamma": 10.0}, Xs[:3000], Xs[:3000, :5].sum(axis=1))
    case("weights", "float32", "SVC", {}, X.astype(np.float32), y)
    case("weights", "Fortran order", "SVC", {}, np.asfortranarray(X), y)
    Xi, yi = _classification(5000, 20, weights=[0.98], flip_y=0.01)
    case("weights", "2% positives, class_weight=balanced", "SVC", {"class_weight": "balanced"}, Xi, yi)
    Xw, yw = _classification(5000, 20, flip_y=0.1)
    sw = np.random.default_rng(1).uniform(0.1, 3.0, Xw.shape[0])
    case("weights", "sample_weight", "SVC", {}, Xw, yw, fit_kw={"sample_weight": sw})
    K = np.exp(-0.02 * ((Xs[:3000, None, :] - Xs[None, :3000, :]) ** 2).sum(-1))
    case("kernels", "precomputed 3,000", "SVC", {"kernel": "precomputed"}, K, y[:3000])
    case("kernels", "sigmoid", "SVC", {"kernel": "sigmoid", "gamma": 0.01}, Xs, y)
    Xp, yp = _classification(3000, 200, flip_y=0.05)
    case("kernels", "poly degree 4", "SVC", {"kernel": "poly", "degree": 4, "coef0": 1.0}, Xp, yp)
    # the polynomial kernel of degree 2 on few features, large C: a low-rank problem SMO needs ~1M steps for (the
    # interior point on its explicit features since session 30: solvers/ipm.py)
    Xq, yq = _classification(8000, 20, flip_y=0.1)
    Xq = StandardScaler().fit_transform(Xq)
    case("kernels", "poly degree 2, 8,000 x 20, C=100", "SVC", {"kernel": "poly", "degree": 2, "C": 100.0}, Xq, yq)
    zq = Xq[:, :5].sum(axis=1) + np.random.default_rng(2).normal(size=Xq.shape[0])
    case("kernels", "poly degree 2 SVR, 8,000 x 20, C=10", "SVR", {"kernel": "poly", "degree": 2, "C": 10.0}, Xq, zq)
    Xb, yb = make_blobs(5000, 20, centers=50, cluster_std=4.0, random_state=0)
    case("classes", "50 classes (predict 20,000 rows)", "SVC", {}, Xb, yb, Xte=np.vstack([Xb] * 4))
    Xe, ye = make_blobs(6000, 20, centers=8, cluster_std=4.0, random_state=1)
    case("classes", "8 well-separated classes, 6,000 x 20", "SVC", {}, Xe, ye)
    Xe, ye = make_blobs(6000, 20, centers=8, cluster_std=8.0, random_state=1)
    case("classes", "8 overlapping classes, 6,000 x 20", "SVC", {}, Xe, ye)
    Xe, ye = make_blobs(10000, 10, centers=20, cluster_std=2.0, random_state=1)
    case("classes", "20 well-separated classes, 10,000 x 10", "SVC", {}, Xe, ye)
    Xe, ye = make_blobs(5000, 8, centers=20, cluster_std=2.5, random_state=7)
    case("classes", "20 classes of 250 rows (pairs of 500), 5,000 x 8", "SVC", {}, Xe, ye)
    case("classes", "the same, NuSVC nu=0.05", "NuSVC", {"nu": 0.05}, Xe, ye)
    Xd, yd = _classification(500, 10, flip_y=0.1)
    case("classes", "rows repeated 10 times", "SVC", {}, np.repeat(Xd, 10, axis=0), np.repeat(yd, 10))
    rng = np.random.default_rng(3)
    S = sp.random(8000, 2000, density=0.005, format="csr", random_state=3, data_rvs=lambda k: np.ones(k))
    beta = rng.normal(size=2000)
    ys = (S @ beta + 0.3 * rng.normal(size=8000) > 0).astype(int)
    case("sparse", "binary sparse CSR 8,000 x 2,000", "SVC", {}, S, ys)
    case("sparse", "the same as CSC", "SVC", {}, S.tocsc(), ys)
    case("sparse", "the same as int64", "SVC", {}, sp.csr_matrix(S.astype(np.int64)), ys)
    case("sparse", "SVR on the sparse rows", "SVR", {}, S, S @ beta)
    # very sparse rows over a few thousand features (session 47: the predict paths densified them for BLAS, 4-6x
    # oneDAL's time): five classes, one-class, probabilities; and hashed features, 4 of 2**20 a row
    rv = np.random.default_rng(47)  # (its own draws: the later cases keep their data)
    yk = np.argmax(S @ rv.normal(size=(2000, 5)) + 0.3 * rv.normal(size=(8000, 5)), axis=1)
    case("verysparse", "5 classes, sparse 8,000 x 2,000, 10 a row", "SVC", {}, S, yk)
    case("verysparse", "one-class on the same rows", "OneClassSVM", {"nu": 0.1}, S, None)
    case("verysparse", "probability=True, 2 classes", "SVC", {"probability": True}, S[:4000], ys[:4000])
    hrows = rv.integers(0, 1 << 20, size=(20000, 4))
    H = sp.csr_matrix((np.ones(80000), (np.repeat(np.arange(20000), 4), hrows.ravel())), shape=(20000, 1 << 20))
    yh = (H @ rv.normal(size=1 << 20) > 0).astype(int)
    case("verysparse", "hashed 20,000 x 2**20, 4 a row", "SVC", {}, H, yh)
    # wide sparse text (datasets.text2's TF-IDF rows) for the single-function models (session 29: their predict
    # went through scipy's sparse products, 7x oneDAL's time)
    from datasets import text2

    T, _, Tte, _, _ = text2()
    w_text = rng.normal(size=T.shape[1])
    case("sparse", "SVR on TF-IDF text 6,000 x 30,000", "SVR", {"gamma": 1.0}, T, T @ w_text, Xte=Tte)
    case("sparse", "one-class on the same text", "OneClassSVM", {"nu": 0.1, "gamma": 1.0}, T, None, Xte=Tte)
    # text whose frequent words sit in most documents (Zipf counts, TF-IDF rows; seeds no other set uses): their
    # postings are most of a kernel row's work on the inverted index (session 48)
    from datasets import _wide_text

    rt = np.random.default_rng(48)  # (its own draws: the cases after keep their data)
    for name, shape in (
        ("4,000 docs x 20,000 words, ~170 a doc", (4000, 1000, 20_000, 400, 300, 0.02, 481)),
        ("2,000 long docs x 60,000 words, ~600 a doc", (2000, 1000, 60_000, 1500, 600, 0.005, 482)),
    ):
        Dt, dy, Dte, _, _ = _wide_text(*shape)
        case("text", f"{name}, SVC", "SVC", {"gamma": 1.0}, Dt, dy, Xte=Dte)
        case("text", f"{name}, SVR", "SVR", {"gamma": 1.0}, Dt, Dt @ rt.normal(size=Dt.shape[1]), Xte=Dte)
    Xr, yr = make_regression(4000, 20, noise=5.0, random_state=0)
    case("regression", "SVR, targets x 1000, C=1e4", "SVR", {"C": 1e4}, Xr, 1000 * yr)
    case("regression", "NuSVR", "NuSVR", {}, StandardScaler().fit_transform(Xr), yr / yr.std())
    Xo, _ = _classification(20000, 10)
    case("regression", "one-class 20,000 x 10", "OneClassSVM", {"nu": 0.05}, Xo, None)
    # the linear kernel on few features with overlapping classes: SMO's steps grow with C (solvers/ipm.py)
    Xl, yl = _classification(4000, 20, flip_y=0.1)
    Xl = StandardScaler().fit_transform(Xl)
    for C in (0.1, 1.0, 10.0):
        case("linear", f"linear kernel, noisy 4,000 x 20, C={C:g}", "SVC", {"kernel": "linear", "C": C}, Xl, yl)
    Xl3, yl3 = _classification(6000, 10, n_classes=3, flip_y=0.1)
    case("linear", "linear kernel, 3 classes 6,000 x 10, C=1", "SVC", {"kernel": "linear"}, Xl3, yl3)
    # large C on weighted rows: the interior point's factor failed near the end before session 30 (SMO from zero)
    Xw3, yw3 = _classification(3600, 6, seed=5, n_classes=3, flip_y=0.1)
    Xw3 = StandardScaler().fit_transform(Xw3)
    sw3 = np.random.default_rng(1).uniform(0.5, 2.0, Xw3.shape[0])
    case(
        "linear",
        "linear kernel, 3 weighted classes 3,600 x 6, C=100",
        "SVC",
        {"kernel": "linear", "C": 100.0},
        Xw3,
        yw3,
        fit_kw={"sample_weight": sw3},
    )
    Xlr, ylr = make_regression(4000, 10, noise=20.0, random_state=2)
    case("linear", "linear-kernel SVR 4,000 x 10, C=10", "SVR", {"kernel": "linear", "C": 10.0}, Xlr / 50, ylr / 50)
    # many classes of few rows each (face identification: 300 people, 10 embeddings each); predict on every row
    rng = np.random.default_rng(21)
    Xm = np.repeat(rng.normal(size=(300, 64)), 10, axis=0) + 0.6 * rng.normal(size=(3000, 64))
    ym = np.repeat(np.arange(300), 10)
    case("manyclass", "300 classes x 10 rows, 64-D", "SVC", {}, Xm, ym)
    case("manyclass", "the same, linear kernel", "SVC", {"kernel": "linear"}, Xm, ym)
    case("manyclass", "the same, NuSVC nu=0.1", "NuSVC", {"nu": 0.1}, Xm, ym)  # (session 29: 35x scikit-learn's)
    # 1,000 classes of 5 rows: 499,500 pairs of 10 rows (session 32: 1.01x scikit-learn's fit beside a busy process)
    Xk, yk = make_blobs(5000, 20, centers=1000, cluster_std=2.0, random_state=5)
    case("manyclass", "1,000 classes x 5 rows, 20-D", "SVC", {}, Xk, yk, Xte=Xk[:2000])
    # rows that repeat: few distinct values (pixel colours 0-255, as Skin_NonSkin) and one-hot categories
    rgb = np.clip(rng.normal(128, 40, size=(80000, 3)), 0, 255)
    rgb[:20000] = np.clip(rng.normal((200, 140, 110), 12, size=(20000, 3)), 0, 255)
    rgb = rgb // 8 * 8  # a 32-level palette: ~5,000 distinct colours
    yq = (np.arange(80000) < 20000) ^ (rng.random(80000) < 0.02)
    case("repeats", "pixel colours 80,000 x 3, 32 levels", "SVC", {}, rgb / 255.0, yq.astype(int))
    zq = rgb[:, 0] / 255 + 0.5 * (rgb[:, 1] > 128)
    case("repeats", "the same, SVR", "SVR", {}, rgb / 255.0, zq)
    case("repeats", "the same, 20,000 rows, NuSVC nu=0.3", "NuSVC", {"nu": 0.3}, rgb[::4] / 255.0, yq[::4].astype(int))
    case("repeats", "the same, 20,000 rows, NuSVR nu=0.3", "NuSVR", {"nu": 0.3}, rgb[::4] / 255.0, zq[::4])
    cats = rng.integers(0, 8, size=(30000, 4))
    onehot = sp.csr_matrix(
        (np.ones(120000), (np.repeat(np.arange(30000), 4), (cats + 8 * np.arange(4)).ravel())), shape=(30000, 32)
    )
    yc = ((cats[:, 0] + cats[:, 1]) % 3 == 0) ^ (rng.random(30000) < 0.1)
    case("repeats", "one-hot, 4 categories of 8 levels, 30,000 rows", "SVC", {}, onehot, yc.astype(int))
    Xg = np.random.default_rng(0).normal(size=(200, 20000))
    yg = (Xg[:, :50].sum(axis=1) > 0).astype(int)
    case("wide", "200 x 20,000 dense, RBF", "SVC", {"gamma": "scale"}, Xg, yg)
    case("wide", "200 x 20,000 dense, linear", "SVC", {"kernel": "linear"}, Xg, yg)
    Xh = np.random.default_rng(1).normal(size=(1000, 5000))
    yh = (Xh[:, :50].sum(axis=1) > 0).astype(int)
    case("wide", "1,000 x 5,000 dense, RBF", "SVC", {"gamma": "scale"}, Xh, yh)
    case("wide", "1,000 x 5,000 dense, probability", "SVC", {"gamma": "scale", "probability": True}, Xh, yh)
    return out


def _time(make, X, y, Xte, fit_kw, repeat):
    make().fit(X, y, **fit_kw)
    fits, preds = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        model = make().fit(X, y, **fit_kw)
        fits.append(time.perf_counter() - t)
        t = time.perf_counter()
        pred = model.predict(Xte)
        preds.append(time.perf_counter() - t)
    return statistics.median(fits), statistics.median(preds), pred


class _PeerLog:
    """What sklearnex's log said during a call: oneDAL ran ("accelerated") or scikit-learn did ("fallback")."""

    def __init__(self):
        import logging

        self.seen = set()
        self.handler = logging.Handler()
        self.handler.emit = self._emit
        self.logger = logging.getLogger("sklearnex")
        self.logger.addHandler(self.handler)
        self.logger.setLevel(logging.INFO)
        self.logger.propagate = False  # its lines read here, not printed between the table's rows
        for h in list(self.logger.handlers):
            if h is not self.handler:
                self.logger.removeHandler(h)

    def _emit(self, record):
        text = record.getMessage().lower()
        if "fallback" in text:
            self.seen.add("sklearn")
        elif "accelerated" in text:
            self.seen.add("oneDAL")

    def take(self):
        out = "+".join(sorted(self.seen)) or "?"
        self.seen = set()
        return out


def _peer_module(peer):
    if peer == "sklearnex":
        import sklearnex.svm

        return sklearnex.svm
    import sklearn.svm

    return sklearn.svm


def _latency(repeat, peer="sklearn"):
    """predict / decision_function / predict_proba on one row, 1,000 calls."""
    import maxmargin as mm

    sk = _peer_module(peer)

    X, y = _classification(2000, 20, flip_y=0.05)
    Xm, ym = _classification(2000, 20, n_classes=10, n_clusters_per_class=1)
    rows = []
    for label, data, call, params in (
        ("predict, 1 row", (X, y), "predict", {}),
        ("decision_function, 1 row", (X, y), "decision_function", {}),
        ("predict_proba, 1 row", (X, y), "predict_proba", {"probability": True}),
        ("predict, 1 row, 10 classes", (Xm, ym), "predict", {}),
    ):
        times = []
        for lib in (mm, sk):
            model = lib.SVC(**params).fit(*data)
            one = data[0][:1]
            fn = getattr(model, call)
            fn(one)
            ts = []
            for _ in range(repeat):
                t = time.perf_counter()
                for _ in range(1000):
                    fn(one)
                ts.append((time.perf_counter() - t) / 1000)
            times.append(statistics.median(ts))
        rows.append((label, *times))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--only",
        nargs="*",
        help="groups: gamma weights kernels classes sparse verysparse regression linear manyclass repeats wide latency "
        "(default: all)",
    )
    ap.add_argument("--match", default="", help="only the cases whose name holds this text (e.g. NuSVR)")
    ap.add_argument(
        "--peer",
        choices=("sklearn", "sklearnex"),
        default="sklearn",
        help="scikit-learn (LIBSVM) or scikit-learn-intelex (oneDAL; its fallbacks to scikit-learn are marked)",
    )
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    import maxmargin as mm

    sk = _peer_module(args.peer)
    log = _PeerLog() if args.peer == "sklearnex" else None
    who = "oneDAL" if log else "scikit-learn"
    print(f"# bench_shapes: medians of {args.repeat}, maxmargin / {who} (< 1: maxmargin faster)")
    head = "| group | case | mm fit ms | peer fit ms | fit ratio | mm predict ms | peer predict ms | predict ratio"
    print(head + " | agree % |" + (" peer ran |" if log else ""))
    print("|---|---|---|---|---|---|---|---|---|" + ("---|" if log else ""))
    ratios = []
    for group, name, est, params, X, y, Xte, fit_kw in _cases():
        if (args.only and group not in args.only) or args.match not in name:
            continue
        if not hasattr(sk, est):
            print(f"| {group} | {name} | | | | | | | | {args.peer} has no {est} |")
            continue
        a = _time(lambda: getattr(mm, est)(**params), X, y, Xte, fit_kw, args.repeat)
        if log:
            log.take()
        b = _time(lambda: getattr(sk, est)(**params), X, y, Xte, fit_kw, args.repeat)
        ran = f" {log.take()} |" if log else ""
        if est in ("SVR", "NuSVR"):
            agree = np.mean(np.abs(a[2] - b[2]) <= 1e-2 * (1 + np.abs(b[2])))
        else:
            agree = np.mean(a[2] == b[2])
        ratios += [a[0] / b[0], a[1] / b[1]]
        print(
            f"| {group} | {name} | {a[0] * 1e3:.1f} | {b[0] * 1e3:.1f} | {a[0] / b[0]:.2f} | {a[1] * 1e3:.1f} | "
            f"{b[1] * 1e3:.1f} | {a[1] / b[1]:.2f} | {100 * agree:.1f} |{ran}",
            flush=True,
        )
    if not args.only or "latency" in args.only:
        print("\n| latency | mm us a call | peer us a call | ratio |\n|---|---|---|---|")
        for label, t_mm, t_sk in _latency(args.repeat, args.peer):
            ratios.append(t_mm / t_sk)
            print(f"| {label} | {t_mm * 1e6:.0f} | {t_sk * 1e6:.0f} | {t_mm / t_sk:.2f} |", flush=True)
    if ratios:
        print(f"\ngeometric mean of the ratios: {float(np.exp(np.mean(np.log(ratios)))):.2f} ({len(ratios)})")


if __name__ == "__main__":
    main()
