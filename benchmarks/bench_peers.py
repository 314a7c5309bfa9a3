"""Kernel estimators on generated shapes against scikit-learn (LIBSVM) and oneDAL (scikit-learn-intelex), one run.

    python benchmarks/bench_peers.py                      # every shape, median of 3
    python benchmarks/bench_peers.py --repeat 1 --only text20 svr_text

The shapes (fixed seeds; session 29) are those the tuned sets do not hold: many classes on sparse rows, TF-IDF text
with several classes, short documents, hashed features with a few values a row, and the single-function models
(SVR, NuSVR, one-class) on text, which predicted through scipy's sparse products before session 29.  Per shape and
peer: the median fit and predict time (predict on the held-out fifth), accuracy (or the largest difference of the
predicted values from maxmargin's, for regression), the support vector count; then maxmargin's time over each
peer's.  oneDAL is skipped where scikit-learn-intelex is missing or has no such estimator (one-class).
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np
import scipy.sparse as sp


def text(n, vocab, k, words, seed, topic=0.3):
    """``n`` TF-IDF-like documents (log counts, unit rows) of Poisson(``words``) + 2 words: a share ``topic`` from
    the class's own 50 words, the rest Zipf-distributed over ``vocab``; ``k`` classes."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, size=n)
    own = rng.integers(0, vocab, size=(k, 50))
    lens = rng.poisson(words, size=n) + 2
    p = 1.0 / np.arange(1, vocab + 1) ** 1.1
    p /= p.sum()
    rows, cols = [], []
    for i in range(n):
        m = lens[i]
        from_topic = rng.random(m) < topic
        c = np.where(from_topic, own[y[i], rng.integers(0, 50, size=m)], rng.choice(vocab, size=m, p=p))
        rows.append(np.full(m, i))
        cols.append(c)
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    X = sp.csr_matrix((np.ones(rows.shape[0]), (rows, cols)), shape=(n, vocab))
    X.sum_duplicates()
    X.data = np.log1p(X.data)
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    return sp.csr_matrix(sp.diags(1.0 / norms) @ X), y


def hashed(n, d, nnz, k, seed):
    """``n`` rows of ``nnz`` ones at random columns of ``d`` (hashed features), the first from the class's 5."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, size=n)
    cols = rng.integers(0, d, size=(n, nnz))
    cols[:, 0] = rng.integers(0, d, size=(k, 5))[y, rng.integers(0, 5, size=n)]
    X = sp.csr_matrix((np.ones(n * nnz), cols.ravel(), np.arange(0, n * nnz + 1, nnz)), shape=(n, d))
    X.sum_duplicates()
    return X, y


def shapes():
    """name -> (estimator, parameters, X, y or None)."""
    rng = np.random.default_rng(7)
    out = {}
    X, y = text(12000, 50000, 20, 30, 101)
    out["text20"] = ("SVC", dict(gamma=1.0), X, y)
    out["text20_linear"] = ("SVC", dict(kernel="linear"), X, y)
    out["short_text5"] = ("SVC", dict(gamma=1.0), *text(20000, 100000, 5, 6, 102))
    out["hashed5"] = ("SVC", dict(gamma=1.0), *hashed(20000, 1 << 20, 3, 5, 103))
    out["many100_text"] = ("SVC", dict(gamma=1.0), *text(5000, 20000, 100, 20, 104, topic=0.5))
    Xt, yt = text(10000, 40000, 2, 25, 201)
    beta = rng.normal(size=Xt.shape[1])
    out["svr_text"] = ("SVR", dict(C=1.0, epsilon=0.1), Xt, Xt @ beta * 0.3 + 0.1 * rng.normal(size=Xt.shape[0]))
    out["nusvr_text"] = ("NuSVR", dict(C=1.0, nu=0.3), Xt, Xt @ beta * 0.3)
    out["oneclass_text"] = ("OneClassSVM", dict(nu=0.1, gamma=1.0), Xt, None)
    out["oneclass_dense"] = ("OneClassSVM", dict(nu=0.05, gamma="scale"), rng.normal(size=(30000, 12)), None)
    out["poly3_text"] = ("SVC", dict(kernel="poly", degree=3, coef0=1.0, gamma=1.0), Xt, yt)
    out["sigmoid_text"] = ("SVC", dict(kernel="sigmoid", gamma=0.5), Xt, yt)
    out["nusvc_text"] = ("NuSVC", dict(nu=0.2, gamma=1.0), Xt, yt)
    centers = np.repeat(rng.normal(size=(12, 16)) * 1.5, 1000, axis=0)
    out["balanced12"] = (
        "SVC",
        dict(class_weight="balanced"),
        rng.normal(size=(12000, 16)) + centers,
        np.repeat(np.arange(12), 1000),
    )
    many = np.repeat(rng.normal(size=(300, 64)), 10, axis=0) + 0.6 * rng.normal(size=(3000, 64))
    out["nusvc300"] = ("NuSVC", dict(nu=0.1), many, np.repeat(np.arange(300), 10))
    return out


def _peers(est):
    import sklearn.svm

    import maxmargin

    peers = [("maxmargin", getattr(maxmargin, est)), ("sklearn", getattr(sklearn.svm, est))]
    try:
        import sklearnex.svm

        if hasattr(sklearnex.svm, est):
            peers.append(("onedal", getattr(sklearnex.svm, est)))
    except ImportError:
        pass
    return peers


def _median_time(f, repeat):
    times = []
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def run(name, spec, repeat):
    est, params, X, y = spec
    test = np.arange(X.shape[0]) % 5 == 0
    Xtr, Xte = X[~test], X[test]
    ytr = None if y is None else y[~test]
    res = {}
    for peer, cls in _peers(est):

        def fit(cls=cls):
            model = cls(**params)
            return model.fit(Xtr) if ytr is None else model.fit(Xtr, ytr)

        fit()  # compiled code and first touches, untimed
        t_fit, model = _median_time(fit, repeat)
        t_pred, pred = _median_time(lambda model=model: model.predict(Xte), repeat)
        res[peer] = (t_fit, t_pred, pred, model.support_.shape[0])
    ours = res["maxmargin"]
    for peer, (t_fit, t_pred, pred, n_sv) in res.items():
        if est in ("SVR", "NuSVR"):
            agree = f"max |f - maxmargin's f| {np.abs(pred - ours[2]).max():.2g}"
        else:
            agree = f"{100 * np.mean(pred == ours[2]):.1f}% as maxmargin"
        ratio = "-" if peer == "maxmargin" else f"{ours[0] / t_fit:.2f} / {ours[1] / t_pred:.2f}"
        print(f"| {name} | {peer} | {t_fit:.3f} | {t_pred:.3f} | {n_sv} | {agree} | {ratio} |", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", nargs="*", help="shape names (default: all)")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    from threadpoolctl import threadpool_info

    all_shapes = shapes()
    names = args.only or list(all_shapes)
    blas = ", ".join(
        f"{i['internal_api']} {i.get('num_threads')}" for i in threadpool_info() if i["user_api"] == "blas"
    )
    print(f"# bench_peers: median of {args.repeat}; BLAS {blas}")
    print("| shape | peer | fit s | predict s | support vectors | predictions | maxmargin / peer (fit / predict) |")
    print("|---|---|---|---|---|---|---|")
    for name in names:
        run(name, all_shapes[name], args.repeat)


if __name__ == "__main__":
    main()
