"""Linear SVMs: maxmargin.LinearSVC against liblinear-official and scikit-learn's LinearSVC, same data, one run.

    python benchmarks/bench_linear.py                       # every set, 3 repeats, median
    python benchmarks/bench_linear.py a9a ijcnn1 --repeat 5
    python benchmarks/bench_linear.py a9a text2 --C 100     # another C for every set
    python benchmarks/bench_linear.py a9a text2 --tol 1e-4  # another tol (scikit-learn's default) for both solvers
    python benchmarks/bench_linear.py --nystroem            # approximate-kernel route vs the exact RBF SVC

Problem: L2-regularised squared hinge, C = 1 (MNIST: C = 0.01, where LIBLINEAR's dual solver needs ~15 s at C = 1),
bias feature 1 (LIBLINEAR's ``-B 1``; scikit-learn's
``fit_intercept=True``), one-vs-rest for MNIST.  Two solvers, each against its LIBLINEAR counterpart at the same
``tol`` (LIBLINEAR's ``-e``): the dual coordinate descent (``-s 1``, LIBLINEAR's default solver; tol 0.1, its
default) and the primal Newton method with a line search (``-s 2``, as liblinear-official 2.40+; tol 0.01, its
default).  Fit times are the median of
``--repeat`` fits in this process (after warm-up fits: one, or as many as 0.1 s holds; and fits of
milliseconds are repeated until 0.3 s of them have passed, at most 200; since session 62 the peers' timed fits
alternate, one fit each a round), data conversion excluded for every peer
(LIBLINEAR's problem is built once).  The primal objective of every model is computed here by one function from
its weights, so the objectives compare directly.  Ratio = fit time / LIBLINEAR's (same solver); < 1: faster.
``maxmargin`` is seeded (``random_state=0``: serial, reproducible); ``maxmargin-async`` (dual solver only) is
``LinearSVC(n_jobs=2)`` unseeded, which lets one binary problem on large sparse wide data (here: bow) run
asynchronous epochs on two threads; elsewhere it is the serial solver again (another seed).
"CPU s" is the process CPU time of the fit (median; all threads summed): on a shared machine the wall time of
a single-threaded fit can be twice its CPU time, so CPU s shows the work done.
The whole run holds BLAS to one thread (``threadpoolctl``): no peer's fit uses BLAS threads (LIBLINEAR and
scikit-learn's LinearSVC are serial; maxmargin's linear solvers hold BLAS to one thread themselves), but this
script's own bookkeeping did (the objective's ``xi @ xi`` on 32k rows), and OpenBLAS's threads then spin for
~0.1 s (2**28 cycles, ``OPENBLAS_THREAD_TIMEOUT``) on the cores the next fits want: on 2 cores maxmargin's
two-thread primal passes ran at serial speed for the first ~12 fits after it (a9a 8.3 against 5.0 ms; session
27, RESULTS.md).  ``--blas-threads`` lifts the hold to see that effect.

Datasets from ../shared/data (MAXMARGIN_DATA elsewhere): a9a (+ a9a.t), mushrooms (fixed 75/25 split), ijcnn1
(+ ijcnn1.t), MNIST (first 20,000 training rows, scaled to [0, 1], the 10,000 test rows; 10 classes), ``bow``:
a generated bag-of-words set, 200,000 x 50,000 (+ 50,000 test rows), ~50 non-zeros a row, and three generated
shapes from ``datasets.py`` (fixed seeds): ``letter26`` (15,000 x 16 dense, unscaled 0..15, 26 classes),
``text100`` (6,400 x 50,000 TF-IDF, 100 classes), ``sparse40k`` (40,000 x 300 one-hot, 12 non-zeros a row),
``hashed300k`` (300,000 x 2**20, 4 hashed features a row), ``tall200k`` (200,000 x 20 dense), ``text2`` (6,000 x
30,000 TF-IDF, binary) and ``dense2k`` (5,000 x 2,000 dense, 50 informative features); later sessions' shapes
follow in ``SETS`` (session 38: small and unscaled dense data -- ``tiny``, scikit-learn's breast ``cancer`` and
``digits``, ``covlike``/``covlike7`` with columns up to ~3,000, ``genes`` 300 x 5,000 -- and text2 with dense
columns, ``textmeta``, or 30% empty rows, ``emptyrows``).  The other
LIBLINEAR solvers (hinge, L1 penalty, Crammer-Singer, SVR) on these shapes: ``sweep_linear.py``.
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

SETS = (
    "a9a",
    "mushrooms",
    "ijcnn1",
    "mnist",
    "bow",
    "letter26",
    "text100",
    "sparse40k",
    "hashed300k",
    "tall200k",
    "text2",
    "dense2k",
    "wide400",
    "imbal100k",
    "mid64",
    "emb128",
    "emb100c",
    "clicks",
    "abstracts",
    "short_text",
    "classes200",
    "news20b",
    "rcv1b",
    "realsim",
    "longdocs",
    "tweets",
    "news20m",
    # session 38: small and unscaled data (the squared-hinge dual stalls there), text with dense columns / empty rows
    "tiny",
    "cancer",
    "digits",
    "covlike",
    "covlike7",
    "genes",
    "textmeta",
    "emptyrows",
    # session 41: rows that repeat (Skin_NonSkin: 3 colour values of 0..255; categorical one-hot rows)
    "skin",
    "categories",
    # session 44: repeated rows of 10 classes (survey answers one-hot)
    "survey",
    # session 56: documents of very mixed length, few rows over 500,000 signed columns, 40 skewed classes of
    # documents, unscaled binary rows of 40 ones
    "mixedlen",
    "fewwide",
    "multi40",
    "binhigh",
    # session 57: hashed bigrams (unsorted rows over 2**21), repeated rows, 15 Zipf-sized classes, 30%-dense CSR
    # rows, 1-4 binary features in 8 classes, unscaled nearly low-rank dense rows
    "bigrams",
    "dupes",
    "imb15",
    "densecsr",
    "tags8",
    "lowrank",
    # session 58: a thousand classes of short documents, signed rows whose norms spread over four orders of
    # magnitude, tall dense float32 rows, one-hot click rows beside unscaled counts, 300 classes on dense rows
    "classes1k",
    "normspread",
    "tallf32",
    "ctrmix",
    "manydense",
    # session 60: 200 classes of five-one rows over 2**20 columns, float32 hashed rows with 64-bit indices, text at
    # C = 10, CSR columns of four orders of magnitude in scale
    "sparse200c",
    "hash32",
    "heavyc",
    "colscale",
    # session 61: click logs of 1.5M rows over 2**22 columns (no hot column), a large text set
    "tall4",
    "textbig",
    # session 64: 100 classes on rows of 1-4 binary features
    "tags100",
    # session 66: 400,000 rows of 1-3 words from a Zipf vocabulary of 200,000
    "zipfshort",
    # session 67: 12,000 rows of 16 one-hot attributes (mushrooms' kind, fresh)
    "onehot12k",
)
C_OF = {"mnist": 0.01, "heavyc": 10.0}
SOLVERS = {"dual": (1, 0.1), "primal": (2, 0.01)}

#: warm-up: fits until this many seconds have passed (at most WARM_FITS_MAX; at least one)
WARM_SECONDS = 0.1
WARM_FITS_MAX = 50
#: timed fits: at least ``--repeat`` of them, and more until MIN_SECONDS have passed (at most MAX_FITS)
MIN_SECONDS = 0.3
MAX_FITS = 200


# --------------------------------------------------------------------------- data


def bag_of_words(n=250_000, d=50_000, nnz=50, n_test=50_000, seed=0):
    """A generated text-like set: Zipf word frequencies (p_k ~ 1/(k + 10)), ~``nnz`` distinct words a row,
    log(1 + tf) * idf weights with unit-length rows, labels from a planted sparse linear rule with 5% flipped.
    Returns (X_train, y_train, X_test, y_test); the first ``n - n_test`` rows train."""
    rng = np.random.default_rng(seed)
    p = 1.0 / (np.arange(d) + 10.0)
    p /= p.sum()
    tokens = rng.poisson(nnz * 1.25, size=n).clip(5)
    rows = np.repeat(np.arange(n), tokens)
    cols = rng.choice(d, size=rows.shape[0], p=p)
    X = sp.csr_matrix((np.ones(rows.shape[0]), (rows, cols)), shape=(n, d))
    X.sum_duplicates()
    df = np.bincount(X.indices, minlength=d)
    idf = np.log((1.0 + n) / (1.0 + df)) + 1.0
    X.data = np.log1p(X.data) * idf[X.indices]
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.diags(1.0 / np.maximum(norms, 1e-12)) @ X
    X = sp.csr_matrix(X)
    w = np.zeros(d)
    support = rng.choice(d, size=2000, replace=False)
    w[support] = rng.normal(size=2000)
    score = X @ w
    y = np.where(score > np.median(score), 1, -1)
    flip = rng.random(n) < 0.05
    y[flip] = -y[flip]
    X.indices = X.indices.astype(np.int32)
    X.indptr = X.indptr.astype(np.int32)
    k = n - n_test
    return X[:k], y[:k], X[k:], y[k:]


def load(name):
    from datasets import _idx, _svmlight, a9a, ijcnn1

    if name == "a9a":
        Xtr, ytr, Xte, yte, _ = a9a()
    elif name == "ijcnn1":
        Xtr, ytr, Xte, yte, _ = ijcnn1()
        Xtr, Xte = sp.csr_matrix(Xtr), sp.csr_matrix(Xte)
    elif name == "mushrooms":
        X, y = _svmlight("mushrooms.xz")
        perm = np.random.default_rng(0).permutation(X.shape[0])
        k = int(0.75 * X.shape[0])
        Xtr, ytr, Xte, yte = X[perm[:k]], y[perm[:k]], X[perm[k:]], y[perm[k:]]
    elif name == "mnist":
        Xtr = _idx("mnist-train-images-idx3-ubyte.xz")[:20_000] / 255.0
        ytr = _idx("mnist-train-labels-idx1-ubyte.xz")[:20_000].astype(int)
        Xte = _idx("mnist-t10k-images-idx3-ubyte.xz") / 255.0
        yte = _idx("mnist-t10k-labels-idx1-ubyte.xz").astype(int)
    elif name == "skin":
        from datasets import skin

        Xtr, ytr, Xte, yte, _ = skin()
    elif name == "bow":
        Xtr, ytr, Xte, yte = bag_of_words()
    elif name in SETS:
        # generated shapes (datasets.py): many classes dense, wide sparse text of 100 classes, very sparse rows,
        # 4 hashed features of 2**20 a row, tall thin dense rows; since session 28 far fewer rows than features,
        # rare positives, short documents, 200 classes on sparse rows
        import datasets

        Xtr, ytr, Xte, yte, _ = getattr(datasets, name)()
    else:
        raise SystemExit(f"unknown dataset {name!r} (known: {', '.join(SETS)})")
    return Xtr, np.asarray(ytr), Xte, np.asarray(yte)


# --------------------------------------------------------------------------- one yardstick


def objective(coef, intercept, X, y, C=1.0):
    """Sum over the one-vs-rest problems of 1/2 ||(w, b)||^2 + C sum max(0, 1 - y_i (w.x_i + b))^2 (bias 1)."""
    classes = np.unique(y)
    coef = np.atleast_2d(coef)
    b = np.broadcast_to(np.asarray(intercept, dtype=float), (coef.shape[0],))
    problems = [(classes[1], coef[0], b[0])] if classes.shape[0] == 2 else list(zip(classes, coef, b))
    total = 0.0
    for c, w, b0 in problems:
        yy = np.where(y == c, 1.0, -1.0)
        xi = np.maximum(0.0, 1.0 - yy * (X @ w + b0))
        total += 0.5 * (w @ w + b0 * b0) + C * xi @ xi
    return float(total)


# --------------------------------------------------------------------------- peers


def _liblinear_weights(model, classes, n_features):
    """(coef, intercept) in scikit-learn's layout from a liblinear-official model (bias 1); LIBLINEAR counts the
    features up to the last non-zero column, so the weights are padded to ``n_features``."""
    nr_f = model.get_nr_feature()
    labels = list(model.get_labels())
    k = len(labels)
    nr_w = 1 if k == 2 else k
    W = np.ctypeslib.as_array(model.w, shape=((nr_f + 1) * nr_w,)).reshape(nr_f + 1, nr_w).T.copy()
    if k == 2:
        sign = 1.0 if labels[0] == classes[1] else -1.0
        W = sign * W
    else:
        W = W[[labels.index(c) for c in classes]]
    coef = np.zeros((W.shape[0], n_features))
    coef[:, :nr_f] = W[:, :nr_f]
    return coef, W[:, nr_f]


class Peer:
    def __init__(self, name, solver, tol, C=1.0):
        self.name, self.solver, self.tol, self.C = name, solver, tol, C

    def prepare(self, X, y):
        self.classes = np.unique(y)
        if self.name == "liblinear":
            from liblinear.liblinearutil import parameter, problem

            self.prob = problem(np.asarray(y, dtype=float), X)
            self.param = parameter(f"-s {self.solver} -c {self.C} -e {self.tol} -B 1 -q")

    def fit(self, X, y):
        dual = self.solver == 1
        if self.name.startswith("maxmargin"):
            import maxmargin

            if self.name == "maxmargin-async":  # threads for one binary dual problem: not seeded, n_jobs=2
                est = maxmargin.LinearSVC(C=self.C, dual=dual, tol=self.tol, n_jobs=2)
            else:
                est = maxmargin.LinearSVC(C=self.C, dual=dual, tol=self.tol, random_state=0)
            est.fit(X, y)
            return est.coef_, est.intercept_, est.predict
        if self.name == "sklearn":
            from sklearn.svm import LinearSVC

            est = LinearSVC(C=self.C, dual=dual, tol=self.tol, random_state=0).fit(X, y)
            return est.coef_, est.intercept_, est.predict
        from liblinear.liblinearutil import train

        model = train(self.prob, self.param)
        coef, b = _liblinear_weights(model, self.classes, X.shape[1])

        def predict(Z):
            d = Z @ coef.T + b
            return self.classes[(d[:, 0] > 0).astype(int)] if coef.shape[0] == 1 else self.classes[d.argmax(axis=1)]

        return coef, b, predict


def run_set(name, repeat, peers, C=None, tol_all=None):
    t0 = time.perf_counter()
    Xtr, ytr, Xte, yte = load(name)
    nnz = Xtr.nnz if sp.issparse(Xtr) else int(np.count_nonzero(Xtr))
    print(
        f"\n## {name}: {Xtr.shape[0]:,} x {Xtr.shape[1]:,} train ({nnz / Xtr.shape[0]:.1f} nnz/row, "
        f"{'sparse' if sp.issparse(Xtr) else 'dense'}), {Xte.shape[0]:,} test, {np.unique(ytr).shape[0]} classes "
        f"(loaded in {time.perf_counter() - t0:.1f} s), C = {C_OF.get(name, 1.0) if C is None else C}"
    )
    print(
        f"| solver | peer | fit s (median of >= {repeat}) | min-max | CPU s | primal objective | rel. to LIBLINEAR "
        "| test acc % | time / LIBLINEAR |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    C = C_OF.get(name, 1.0) if C is None else C
    rows = []
    for sname, (snum, tol_default) in SOLVERS.items():
        tol = tol_default if tol_all is None else tol_all
        res = {}
        active = [p for p in peers if not (p == "maxmargin-async" and sname != "dual")]  # (async: the dual's)
        runs = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for pname in active:
                peer = Peer(pname, snum, tol, C)
                peer.prepare(Xtr, ytr)
                # warm-up (first touch of memory, compiled code): one fit, and for fits of milliseconds more of them,
                # up to WARM_SECONDS, so that every peer is timed in the same steady state
                t_warm = time.perf_counter()
                for _ in range(WARM_FITS_MAX):
                    peer.fit(Xtr, ytr)
                    if time.perf_counter() - t_warm >= WARM_SECONDS:
                        break
                runs[pname] = (peer, [], [], [0.0], [None])
            # the timed fits alternate between the peers, a fit each a round, so that a machine's slow phase falls on
            # all of them (one peer's fits after the other's: ratios drifted 0.43-0.58 on mushrooms, session 62):
            # at least --repeat fits each, and fits of milliseconds until MIN_SECONDS of them (the median of many)
            while True:
                pending = [
                    p
                    for p, (_, times, _, spent, _) in runs.items()
                    if len(times) < repeat or (spent[0] < MIN_SECONDS and len(times) < MAX_FITS)
                ]
                if not pending:
                    break
                for pname in pending:
                    peer, times, cpus, spent, last = runs[pname]
                    t = time.perf_counter()
                    c = time.process_time()
                    last[0] = peer.fit(Xtr, ytr)
                    times.append(time.perf_counter() - t)
                    cpus.append(time.process_time() - c)
                    spent[0] += times[-1]
        for pname in active:
            _, times, cpus, _, last = runs[pname]
            coef, b, predict = last[0]
            obj = objective(coef, b, Xtr, ytr, C)
            acc = float(np.mean(predict(Xte) == yte))
            res[pname] = (statistics.median(times), min(times), max(times), statistics.median(cpus), obj, acc)
        ref = res.get("liblinear")
        for pname, (med, lo, hi, cpu, obj, acc) in res.items():
            rel = f"{(obj - ref[4]) / ref[4]:+.1e}" if ref else "-"
            ratio = f"{med / ref[0]:.2f}" if ref else "-"
            print(
                f"| {sname} (tol {tol}) | {pname} | {med:.4f} | {lo:.4f}-{hi:.4f} | {cpu:.4f} | {obj:.6g} | {rel} | "
                f"{100 * acc:.2f} | {ratio} |"
            )
            rows.append((name, sname, pname, med, obj, acc))
    return rows


def nystroem(repeat):
    """Nystroem + LinearSVC against the exact RBF SVC (maxmargin.SVC, C = 1), measured once each."""
    from sklearn.kernel_approximation import Nystroem
    from sklearn.pipeline import make_pipeline

    import maxmargin

    print("\n## Nystroem + LinearSVC vs the exact RBF SVC (C = 1)")
    print("| set | model | fit s | test acc % |")
    print("|---|---|---|---|")
    for name, gamma, comps in (("a9a", 0.05, 1000), ("ijcnn1", 2.0, 2000)):
        Xtr, ytr, Xte, yte = load(name)
        t = time.perf_counter()
        svc = maxmargin.SVC(C=1.0, kernel="rbf", gamma=gamma).fit(Xtr, ytr)
        t_svc = time.perf_counter() - t
        acc_svc = float(np.mean(svc.predict(Xte) == yte))
        print(f"| {name} | SVC(C=1, gamma={gamma}) exact | {t_svc:.1f} | {100 * acc_svc:.2f} |")
        for n_comp in (comps // 2, comps):
            t = time.perf_counter()
            pipe = make_pipeline(
                Nystroem(gamma=gamma, n_components=n_comp, random_state=0), maxmargin.LinearSVC(C=1.0, random_state=0)
            ).fit(Xtr, ytr)
            t_p = time.perf_counter() - t
            acc = float(np.mean(pipe.predict(Xte) == yte))
            print(
                f"| {name} | Nystroem({n_comp}) + LinearSVC | {t_p:.1f} | {100 * acc:.2f} "
                f"({100 * (acc - acc_svc):+.2f} pp) |"
            )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sets", nargs="*", default=list(SETS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--C", type=float, default=None, help="C for every set (default: 1, mnist 0.01)")
    ap.add_argument(
        "--tol",
        type=float,
        default=None,
        help="tol for both solvers (default: LIBLINEAR's, 0.1 dual and 0.01 primal; scikit-learn's default is 1e-4)",
    )
    ap.add_argument("--peers", nargs="+", default=["maxmargin", "maxmargin-async", "liblinear", "sklearn"])
    ap.add_argument("--nystroem", action="store_true", help="only the approximate-kernel comparison")
    ap.add_argument(
        "--blas-threads",
        type=int,
        default=1,
        help="BLAS threads for the whole run (default 1: see the module docstring; 0 = BLAS's own default)",
    )
    args = ap.parse_args()
    import os

    print(f"# bench_linear: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the start")
    if args.nystroem:
        nystroem(args.repeat)
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=args.blas_threads or None, user_api="blas"):
        for name in args.sets:
            run_set(name, args.repeat, args.peers, args.C, args.tol)
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
