"""solver='divide' (exact and early) and its Dask backend against the batched solver and the peers.

    python benchmarks/bench_divide.py                          # mix20 at 100k, every method
    python benchmarks/bench_divide.py --data mix20 --sizes 100000 300000 1000000 --cap 1800
    python benchmarks/bench_divide.py --data xor skin ijcnn1 --methods batched divide early
    python benchmarks/bench_divide.py --data pendigits letter26 rcv1b realsim mid64 categories --sizes 200000 \
        --methods auto divide       # shapes: many classes, wide text, wide kernels, repeated rows

Each fit runs in its own process (peak memory is that process's; for Dask, the largest
worker's), killed after ``--cap`` seconds (reported as '>cap').  A maxmargin fit is timed after an
untimed warm-up fit of the same method on the first 3000 rows (loading the compiled code: up to
6 s, which the early fit at 1M counted before this session).  Data (fixed seeds):

  mix20   two classes, each a mixture of 4 Gaussians in 20-D (unit covariance, centres
          N(0, 0.4^2)): heavily overlapping; n training rows + 20k test rows
  xor     2-D checkerboard (4 x 4 cells, labels alternate) with 3% label noise
  skin    Skin_NonSkin (245k x 3; ../shared/data), random split, n training rows
  ijcnn1  ijcnn1 train + test (141,691 x 22) pooled, random split, n training rows
  any other set of ``datasets.py`` (pendigits, letter26, usps, a9a, rcv1b, realsim, mid64, clicks,
          categories, ...): its own split and C, gamma, the first n training rows, 20k test rows at most

Methods: auto (SVC's default solver), batched (SVC solver='batched'), divide (exact), early (divide,
early_stop=1, --early-parts), dask1 / dask2 (divide on a LocalCluster of 1 / 2 worker processes, 1 thread each),
sklearn (sklearn.svm.SVC), sklearnex (oneDAL).  RBF kernel, tol=1e-3, cache 200 MB.
The table gives fit seconds, test accuracy, #SV, the dual objective, peak RSS, and the
ratios the issue sets targets for (batched/divide, sklearnex/divide, divide/early,
dask1/dask2, accuracy(divide) - accuracy(early)).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: rows of the untimed warm-up fit before each maxmargin fit
WARM_UP_ROWS = 3000
METHODS = ("auto", "batched", "divide", "early", "dask1", "dask2", "sklearn", "sklearnex")
N_TEST = 20_000


def make_data(name, n, seed=0):
    """(X_train, y_train, X_test, y_test, params) for n training rows."""
    rng = np.random.default_rng(seed)
    if name == "mix20":
        m = n + N_TEST
        centres = rng.normal(scale=0.4, size=(2, 4, 20))
        cls = rng.integers(2, size=m)
        comp = rng.integers(4, size=m)
        X = centres[cls, comp] + rng.normal(size=(m, 20))
        return X[:n], cls[:n], X[n:], cls[n:], dict(C=1.0, gamma=0.05)
    if name == "xor":
        m = n + N_TEST
        X = rng.uniform(0, 4, size=(m, 2))
        y = (np.floor(X[:, 0]).astype(int) + np.floor(X[:, 1]).astype(int)) % 2
        flip = rng.random(m) < 0.03
        y[flip] = 1 - y[flip]
        return X[:n], y[:n], X[n:], y[n:], dict(C=1.0, gamma=2.0)
    import datasets

    if name == "skin":
        Xtr, ytr, Xte, yte, _ = datasets.skin(n_train=n, seed=seed)
        return Xtr, ytr, Xte[:N_TEST], yte[:N_TEST], dict(C=1.0, gamma=1e-4)
    if name == "ijcnn1":
        Xtr, ytr, Xte, yte, p = datasets.ijcnn1()
        X, y = np.vstack([Xtr, Xte]), np.r_[ytr, yte]
        perm = rng.permutation(X.shape[0])
        n = min(n, X.shape[0] - N_TEST)
        return X[perm[:n]], y[perm[:n]], X[perm[n : n + N_TEST]], y[perm[n : n + N_TEST]], p
    if name in datasets.LOADERS:
        Xtr, ytr, Xte, yte, p = datasets.LOADERS[name]()
        params = {k: p[k] for k in ("C", "gamma") if k in p}
        return Xtr[:n], ytr[:n], Xte[:N_TEST], yte[:N_TEST], dict(dict(C=1.0, gamma="scale"), **params)
    raise SystemExit(f"unknown data {name!r}")


def _objective(dual_coef, SV, gamma, intercept=None):
    """1/2 c'Kc - sum|c| from a fitted binary model's dual coefficients (blockwise)."""
    from maxmargin.kernels import RBFKernel

    c = np.asarray(dual_coef, dtype=np.float64).ravel()
    SV = SV.toarray() if hasattr(SV, "toarray") else np.asarray(SV)
    return float(0.5 * c @ RBFKernel(gamma).mmv(SV, SV, c) - np.abs(c).sum())


def run_one(method, data, n, n_parts, early_parts):
    Xtr, ytr, Xte, yte, p = make_data(data, n)
    C, gamma = p["C"], p["gamma"]
    kw = dict(C=C, gamma=gamma, tol=1e-3, cache_size=200)
    worker_rss = None
    t0 = time.perf_counter()
    if method in ("auto", "batched", "divide", "early", "dask1", "dask2"):
        from maxmargin import SVC

        opts = {"n_parts": n_parts}
        if method == "early":
            opts = {"n_parts": early_parts, "early_stop": 1}
        if method.startswith("dask"):
            from distributed import Client, LocalCluster

            cluster = LocalCluster(
                n_workers=int(method[-1]),
                threads_per_worker=1,
                processes=True,
                dashboard_address="127.0.0.1:0",
                host="127.0.0.1",
                memory_limit=0,
            )
            client = Client(cluster)
            client.run(lambda: __import__("maxmargin.solvers.divide"))  # imports before the clock
            opts["backend"] = "dask"
        solver = method if method in ("auto", "batched") else "divide"
        # a warm-up fit on a few rows loads the compiled code (in this process and on the Dask workers), as the
        # other benchmarks do: the first-fit cost is measured apart (harness.py --first-fit)
        # (divided: below divide.DIRECT_BELOW rows it would be solved whole, the divided path's code left unloaded)
        m = min(WARM_UP_ROWS, Xtr.shape[0])
        warm = None if solver != "divide" else dict(opts, direct_below=0)
        SVC(solver=solver, solver_options=warm, **kw).fit(Xtr[:m], ytr[:m])
        t0 = time.perf_counter()
        est = SVC(solver=solver, solver_options=None if solver != "divide" else opts, **kw).fit(Xtr, ytr)
        fit = time.perf_counter() - t0
        if method.startswith("dask"):
            worker_rss = max(client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss).values())
            client.close()
            cluster.close()
        acc = float(np.mean(est.predict(Xte) == yte))
        obj = float(np.sum(est.objective_))  # multi-class: summed over the pairs
        nsv = int(est.support_.shape[0])
    else:
        if method == "sklearn":
            from sklearn.svm import SVC as Peer
        else:
            from sklearnex.svm import SVC as Peer
        est = Peer(kernel="rbf", **kw).fit(Xtr, ytr)
        fit = time.perf_counter() - t0
        acc = float(np.mean(est.predict(Xte) == yte))
        # the binary dual objective (gamma='scale' as the peer resolved it); not summed over one-vs-one pairs
        obj = _objective(est.dual_coef_, est.support_vectors_, est._gamma) if len(est.classes_) == 2 else np.nan
        nsv = int(est.support_.shape[0])
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return dict(
        fit=fit, acc=acc, obj=obj, nsv=nsv, rss_mb=rss, worker_rss_mb=None if worker_rss is None else worker_rss / 1024
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", nargs="+", default=["mix20"])
    ap.add_argument("--sizes", nargs="+", type=int, default=[100_000])
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--n-parts", type=int, default=8, help="parts of the exact divide fits")
    ap.add_argument("--early-parts", type=int, default=32, help="parts of the early (approximate) fit")
    ap.add_argument("--cap", type=float, default=1800, help="seconds per fit before it is killed")
    ap.add_argument("--one", nargs=3, metavar=("METHOD", "DATA", "N"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print("RESULT " + json.dumps(run_one(a.one[0], a.one[1], int(a.one[2]), a.n_parts, a.early_parts)))
        return
    env = dict(os.environ)
    src = str(HERE.parent / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    print(f"load: {os.getloadavg()[0]:.2f} (1-min load average), {os.cpu_count()} cores; cap {a.cap:g} s a fit")
    for data in a.data:
        for n in a.sizes:
            res = {}
            for m in a.methods:
                cmd = [sys.executable, __file__, "--one", m, data, str(n)]
                cmd += ["--n-parts", str(a.n_parts), "--early-parts", str(a.early_parts)]
                try:
                    out = subprocess.run(cmd, capture_output=True, text=True, timeout=a.cap + 120, env=env)
                    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
                    if line:
                        r = json.loads(line[-1][7:])
                        res[m] = r if r["fit"] <= a.cap else None
                    else:
                        res[m] = None
                        err = (out.stderr.strip().splitlines() or ["?"])[-1]
                        print(f"  {m}: failed ({err[:200]})")
                except subprocess.TimeoutExpired:
                    res[m] = None
            print(f"\n{data}, n = {n:,} (test {N_TEST:,}), n_parts = {a.n_parts}, early: {a.early_parts} parts")
            print(
                f"{'method':<10} {'fit s':>9} {'acc %':>7} {'#SV':>8} {'objective':>14} {'RSS MB':>8} {'worker MB':>10}"
            )
            for m in a.methods:
                r = res[m]
                if r is None:
                    print(f"{m:<10} {'>' + format(a.cap, 'g'):>9}")
                    continue
                w = "" if r["worker_rss_mb"] is None else f"{r['worker_rss_mb']:.0f}"
                print(
                    f"{m:<10} {r['fit']:9.1f} {100 * r['acc']:7.2f} {r['nsv']:8d} {r['obj']:14.6g} "
                    f"{r['rss_mb']:8.0f} {w:>10}"
                )

            def ratio(a_, b_):
                ra, rb = res.get(a_), res.get(b_)
                return "n/a" if not ra or not rb else f"{ra['fit'] / rb['fit']:.2f}x"

            d, e = res.get("divide"), res.get("early")
            gap = "n/a" if not d or not e else f"{100 * (d['acc'] - e['acc']):+.2f} pp"
            print(
                f"auto/divide {ratio('auto', 'divide')}, batched/divide {ratio('batched', 'divide')} (target >= 3), "
                f"sklearnex/divide {ratio('sklearnex', 'divide')} (>= 10), "
                f"sklearn/divide {ratio('sklearn', 'divide')}, divide/early {ratio('divide', 'early')} (>= 20), "
                f"acc(divide) - acc(early) {gap} (<= 0.5), dask1/dask2 {ratio('dask1', 'dask2')} (>= 1.6)"
            )


if __name__ == "__main__":
    main()
