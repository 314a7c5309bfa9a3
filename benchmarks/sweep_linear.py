"""The LIBLINEAR solvers that ``bench_linear.py`` does not time, on generated shapes: maxmargin against
liblinear-official, same solver, same ``tol`` (LIBLINEAR's ``-e``), same data, one run.

    python benchmarks/sweep_linear.py                     # every case, 3 repeats, median
    python benchmarks/sweep_linear.py text100/cs hashed300k/l1 --repeat 5
    python benchmarks/sweep_linear.py --list
    python benchmarks/sweep_linear.py --tol 1e-4          # every case at scikit-learn's default tol
    python benchmarks/sweep_linear.py news20b/hinge --C 0.01   # another C for every case (default 1)
    python benchmarks/sweep_linear.py rawcs/cs raretext/primal --busy   # beside one CPU-bound process

Cases are ``set/solver``: ``hinge`` (``loss='hinge'``, LIBLINEAR ``-s 3``, tol 0.1), ``l1`` (``penalty='l1'``,
``-s 5``, tol 0.01), ``cs`` (``multi_class='crammer_singer'``, ``-s 4``, tol 0.1), ``sqh`` (squared hinge, dual,
``-s 1``, tol 0.1), ``primal`` (squared hinge, ``dual=False``, ``-s 2``, tol 0.01), and for regression
``svr-l1`` (``-s 13``, tol 0.1), ``svr-l2`` (squared, dual, ``-s 12``, tol 0.1) and ``svr-primal`` (``-s 11``,
tol 0.001); C = 1 (``--C``), bias feature 1, epsilon 0.  Sets: the classification shapes of ``datasets.py``
(``text100``, ``sparse40k``, ``hashed300k``, ``tall200k``, ``letter26``, ``text2``, ``dense2k``) and three
generated regression sets, ``reg_dense`` (100,000 x 50 Gaussian, planted weights plus unit noise), ``reg_text``
(``text100``'s rows, 20,000 of them, with a planted sparse linear target) and ``reg_wide`` (5,000 x 2,000
Gaussian, 50 planted weights); session 28 added the shapes ``wide400`` (320 x 20,000 dense), ``imbal100k`` (1%
positives), ``short_text`` (200k rows of 3-13 words) and ``classes200`` (200 classes, sparse), and ``reg_<set>``,
a planted target on the rows of any classification set (:func:`planted_target`); session 44 ``rated_<set>``,
that target rounded to ratings 1-5 (:func:`rated_target`: on repeated rows, repeated (row, rating) pairs).  Fit
times: median of ``--repeat`` fits after warm-up fits
(:func:`median_time`: fits of milliseconds are repeated for 0.3 s), LIBLINEAR's problem built once.  "test" is
the accuracy (classification) or the mean squared error
(regression) of each model on the held-out rows, computed here from each model's predictions; "objective" is
maxmargin's primal objective (:func:`primal_objective`, computed here from the coefficients) and how far it lies
from LIBLINEAR's (negative: lower).  LIBLINEAR's dual solvers stop at 300 epochs (``imbal100k/hinge`` reaches
it short of ``tol``), maxmargin's at ``max_iter`` = 1,000, scikit-learn's default.  Ratio = fit time
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
    "sqh": (1, 0.1, dict(loss="squared_hinge", dual=True), False),
    "primal": (2, 0.01, dict(loss="squared_hinge", dual=False), False),
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
    # shapes added in session 28
    "wide400/hinge",
    "wide400/l1",
    "imbal100k/hinge",
    "imbal100k/l1",
    "short_text/hinge",
    "short_text/l1",
    "classes200/hinge",
    "classes200/cs",
    "reg_short_text/svr-l1",
    "reg_short_text/svr-primal",
    "reg_wide400/svr-l2",
    # wide text shapes (session 33's, in datasets.py since session 34)
    "news20b/hinge",
    "longdocs/hinge",
    "rcv1b/l1",
    "longdocs/l1",
    "news20m/cs",
    "reg_rcv1b/svr-l1",
    # dense rows for Crammer-Singer, and the shapes of session 36
    "emb128/cs",
    "wide400/cs",
    "emb128/hinge",
    "abstracts/hinge",
    # session 37: 100 classes on dense embedding rows
    "emb100c/cs",
    "emb100c/hinge",
    "emb100c/l1",
    # session 38: small and unscaled data
    "cancer/hinge",
    "covlike/hinge",
    "genes/l1",
    "covlike7/l1",
    "reg_covlike/svr-l2",
    "reg_cancer/svr-l2",
    "reg_digits/svr-l2",
    "rated_categories/svr-l2",
    "rated_skin/svr-l2",
    "rated_categories/svr-l1",
    # session 52: shapes nobody tuned on
    "classes100s/hinge",
    "classes100s/cs",
    "veryshort/hinge",
    "veryshort/l1",
    "rawcounts/hinge",
    "rawcounts/l1",
    "bowf32/hinge",
    "reg_bowf32/svr-l2",
    # session 56: shapes nobody tuned on
    "mixedlen/hinge",
    "mixedlen/l1",
    "fewwide/hinge",
    "fewwide/l1",
    "multi40/hinge",
    "multi40/cs",
    "multi40/l1",
    "binhigh/hinge",
    "binhigh/l1",
    "bigrams/hinge",
    "dupes/hinge",
    "dupes/l1",
    "imb15/cs",
    "imb15/l1",
    "densecsr/hinge",
    "tags8/cs",
    "tags8/hinge",
    "tags100/cs",
    "tags100/hinge",
    "lowrank/hinge",
    "reg_mixedlen/svr-l1",
    "reg_fewwide/svr-l2",
    "reg_binhigh/svr-primal",
    # session 58: shapes nobody tuned on
    "classes1k/hinge",
    "classes1k/cs",
    "classes1k/l1",
    "normspread/hinge",
    "normspread/l1",
    "tallf32/hinge",
    "ctrmix/hinge",
    "ctrmix/l1",
    "manydense/hinge",
    "manydense/cs",
    "regout/svr-l1",
    "regout/svr-l2",
    "regout/svr-primal",
    "reg_normspread/svr-l1",
    # session 73: shapes nobody tuned on (textc10 is meant for --C 10)
    "tweets5/sqh",
    "tweets5/hinge",
    "tweets5/primal",
    "tweets5/l1",
    "tags120/hinge",
    "tags120/sqh",
    "tags120/cs",
    "onehot8/sqh",
    "onehot8/hinge",
    "onehot8/primal",
    "onehot8/l1",
    "regwide17/svr-l1",
    "regwide17/svr-l2",
    "regwide17/svr-primal",
    "dense6c/sqh",
    "dense6c/hinge",
    "dense6c/primal",
    "dense6c/cs",
    # session 74: shapes nobody tuned on
    "hugevocab/hinge",
    "hugevocab/sqh",
    "hugevocab/primal",
    "hugevocab/l1",
    "many300/hinge",
    "many300/cs",
    "tabmix/sqh",
    "tabmix/hinge",
    "tabmix/primal",
    "onetwo/hinge",
    "onetwo/primal",
    "cs30/cs",
    "cs30/hinge",
    # session 75: shapes nobody tuned on
    "rawcs/cs",
    "rawcs/hinge",
    "raretext/hinge",
    "raretext/primal",
    "raretext/l1",
    "halfzero/hinge",
    "halfzero/primal",
    "shortcs/cs",
    "shortcs/hinge",
    # session 76
    "tfidf30/cs",
    "tfidf30/hinge",
    "countreg/svr-l1",
    "countreg/svr-primal",
    # session 77
    "long60/cs",
    "long60/hinge",
    "text10/cs",
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


def planted_target(name, seed=36):
    """A regression target on the rows of the classification set ``name``: planted Gaussian weights over every
    feature, scaled to unit variance on the training rows, plus noise of standard deviation 0.3."""
    import datasets

    Xtr, _, Xte, _, _ = datasets.LOADERS[name]()
    rng = np.random.default_rng(seed)
    w = rng.normal(size=Xtr.shape[1])
    ftr, fte = np.asarray(Xtr @ w), np.asarray(Xte @ w)
    scale = ftr.std()
    return Xtr, ftr / scale + 0.3 * rng.normal(size=Xtr.shape[0]), Xte, fte / scale


def rated_target(name, seed=37):
    """Ratings 1-5 on the rows of the classification set ``name``: the planted target of :func:`planted_target`
    rounded to the nearest of five levels (with its noise, so identical rows may differ in rating).  On sets of
    repeated rows (``categories``, ``skin``) identical (row, rating) pairs then repeat too, the shape LinearSVR
    merges (session 44)."""
    Xtr, ytr, Xte, yte = planted_target(name, seed)
    return Xtr, np.clip(np.round(3 + 1.2 * ytr), 1, 5), Xte, np.clip(np.round(3 + 1.2 * yte), 1, 5)


def load(name):
    if name in ("reg_dense", "reg_text", "reg_wide"):
        return globals()[name]()
    if name.startswith("rated_"):  # rated_<set>: ratings 1-5 on a classification set's rows
        return rated_target(name[6:])
    if name.startswith("reg_"):  # reg_<set>: a planted target on a classification set's rows
        return planted_target(name[4:])
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


def run_case(case, data, repeat, tol=None, C=1.0):
    """Time one ``set/solver`` case on ``data`` and print its row; ``tol``: for both libraries, else the solver's
    LIBLINEAR default (:data:`SOLVERS`); ``C``: for both, and in the objectives."""
    from liblinear.liblinearutil import parameter, predict, problem, train

    import maxmargin

    name, solver = case.split("/")
    s, default_tol, kw, regression = SOLVERS[solver]
    tol = default_tol if tol is None else tol
    Xtr, ytr, Xte, yte = data
    est_cls = maxmargin.LinearSVR if regression else maxmargin.LinearSVC
    extra = dict(epsilon=0.0) if regression else {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t_mm, est = median_time(lambda: est_cls(C=C, tol=tol, random_state=0, **kw, **extra).fit(Xtr, ytr), repeat)
    capped = any("max_iter" in str(w.message) for w in caught)
    prob = problem(np.asarray(ytr, dtype=float), Xtr if sp.issparse(Xtr) else np.ascontiguousarray(Xtr))
    param = parameter(f"-s {s} -c {C} -e {tol} -B 1 -q" + (" -p 0" if regression else ""))
    t_ll, model = median_time(lambda: train(prob, param), repeat)
    p_ll, _, _ = predict(np.zeros(Xte.shape[0]), Xte if sp.issparse(Xte) else np.ascontiguousarray(Xte), model, "-q")
    p_mm = est.predict(Xte)
    objectives = primal_objective(solver, est.coef_, est.intercept_, Xtr, ytr, C)
    ll_coef, ll_b = liblinear_weights(model, solver, getattr(est, "classes_", None), Xtr.shape[1])
    objectives = objectives, primal_objective(solver, ll_coef, ll_b, Xtr, ytr, C)
    if regression:
        q_mm, q_ll = np.mean((p_mm - yte) ** 2), np.mean((np.asarray(p_ll) - yte) ** 2)
        quality = f"MSE {q_mm:.4g} / {q_ll:.4g}"
    else:
        q_mm, q_ll = 100 * np.mean(p_mm == yte), 100 * np.mean(np.asarray(p_ll) == yte)
        quality = f"{q_mm:.2f}% / {q_ll:.2f}%"
    note = " (maxmargin stopped at max_iter)" if capped else ""
    rel = (objectives[0] - objectives[1]) / abs(objectives[1])
    print(
        f"| {case} | {t_mm:.3f} | {t_ll:.3f} | {t_mm / t_ll:.2f} | {objectives[0]:.6g} ({rel:+.1e}) "
        f"| {quality}{note} |",
        flush=True,
    )


def liblinear_weights(model, solver, classes, n_features):
    """``(coef, intercept)`` of a liblinear-official model in maxmargin's layout: rows in the order of ``classes``
    (one row for two classes, except Crammer-Singer's), zero weights for the columns past LIBLINEAR's last
    non-zero one."""
    nr_f = model.get_nr_feature()
    k = model.get_nr_class()
    nr_w = 1 if (classes is None or (k == 2 and solver != "cs")) else k
    W = np.ctypeslib.as_array(model.w, shape=((nr_f + 1) * nr_w,)).reshape(nr_f + 1, nr_w).T.copy()
    if classes is not None:
        labels = list(model.get_labels())
        if nr_w == 1 and labels[0] != classes[1]:
            W = -W
        elif nr_w > 1:
            W = W[[labels.index(c) for c in classes]]
    coef = np.zeros((W.shape[0], n_features))
    coef[:, :nr_f] = W[:, :nr_f]
    return coef, W[:, nr_f]


def primal_objective(solver, coef, intercept, X, y, C=1.0):
    r"""The primal objective each solver minimises, with the bias feature (1) regularised as LIBLINEAR's ``-B 1``:
    ``hinge`` :math:`\tfrac12\|w\|^2 + C\sum\xi_i` (``sqh``, ``primal``: :math:`\xi_i^2`), ``l1``
    :math:`\|w\|_1 + C\sum\xi_i^2` (one-vs-rest: summed over the classes), ``cs`` Crammer and Singer's
    :math:`\tfrac12\sum_k\|w_k\|^2 + C\sum_i\max_k(\delta_{k\ne y_i} + w_k\cdot x_i - w_{y_i}\cdot x_i)`, and for
    regression (epsilon 0) :math:`\tfrac12\|w\|^2 + C\sum|r_i|` (``svr-l1``) or :math:`C\sum r_i^2` (the others)."""
    coef = np.atleast_2d(np.asarray(coef, dtype=np.float64))
    b = np.atleast_1d(np.asarray(intercept, dtype=np.float64))
    F = np.asarray(X @ coef.T) + b
    sq = 0.5 * (float(np.sum(coef * coef)) + float(b @ b))
    if SOLVERS[solver][3]:
        r = np.abs(np.asarray(y, dtype=np.float64) - F[:, 0])
        return sq + C * float(np.sum(r if solver == "svr-l1" else r * r))
    classes = np.unique(y)
    if solver == "cs":
        if F.shape[1] != classes.shape[0]:
            return float("nan")
        pos = np.searchsorted(classes, y)
        own = F[np.arange(F.shape[0]), pos]
        margins = 1.0 + F - own[:, None]
        margins[np.arange(F.shape[0]), pos] = 0.0
        return sq + C * float(np.sum(margins.max(axis=1)))
    Y = np.where(y[:, None] == classes[None, 1:] if F.shape[1] == 1 else y[:, None] == classes[None, :], 1.0, -1.0)
    xi = np.maximum(0.0, 1.0 - Y * F)
    if solver == "l1":
        return float(np.sum(np.abs(coef)) + np.sum(np.abs(b))) + C * float(np.sum(xi * xi))
    return sq + C * float(np.sum(xi * xi if solver in ("sqh", "primal") else xi))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", nargs="*", default=list(CASES))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--blas-threads", type=int, default=1, help="BLAS threads for the run (0: BLAS's default)")
    ap.add_argument(
        "--tol",
        type=float,
        default=None,
        help="tol of every case (default: LIBLINEAR's, per solver; "
        "scikit-learn's LinearSVC / LinearSVR default is 1e-4)",
    )
    ap.add_argument("--C", type=float, default=1.0, help="C of every case (default 1; small C: fits of a few epochs)")
    ap.add_argument(
        "--busy",
        action="store_true",
        help="the whole run beside one CPU-bound process (a spin loop, as harness.py --busy): a machine shared with "
        "other work, where maxmargin's threads lose a core and LIBLINEAR runs one thread anyway",
    )
    args = ap.parse_args()
    if args.list:
        print("\n".join(CASES))
        return
    for case in args.cases:
        name, _, solver = case.partition("/")
        if solver not in SOLVERS:
            raise SystemExit(f"unknown solver in {case!r}: one of {', '.join(SOLVERS)}")
    print(
        "| case | maxmargin s | liblinear s | ratio | objective (rel. to LIBLINEAR's) | test: maxmargin / liblinear |"
    )
    print("|---|---|---|---|---|---|")
    from contextlib import nullcontext

    from harness import Busy
    from threadpoolctl import threadpool_limits

    loaded = {}
    with threadpool_limits(limits=args.blas_threads or None, user_api="blas"), Busy() if args.busy else nullcontext():
        for case in args.cases:
            name = case.split("/")[0]
            if name not in loaded:
                loaded.clear()
                loaded[name] = load(name)
            run_case(case, loaded[name], args.repeat, args.tol, args.C)


if __name__ == "__main__":
    main()
