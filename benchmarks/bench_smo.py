"""maxmargin's SMO solver against scikit-learn's SVC (LIBSVM) on the same data, in one run.

    python benchmarks/bench_smo.py a9a ijcnn1

Prints fit time, predict time, test accuracy, #SV, dual objective and the ratio
of scikit-learn's fit time to maxmargin's (> 1 means maxmargin is faster).
Parameters (issue 2): a9a C=1, gamma=0.05; ijcnn1 C=32, gamma=2; tol=1e-3, cache 200 MB.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
from datasets import LOADERS  # noqa: E402


def dual_objective_binary(dual_coef, sv, kernel):
    """1/2 c'Kc - sum |c| computed in blocks from the support vectors."""
    c = dual_coef.toarray().ravel() if hasattr(dual_coef, "toarray") else np.asarray(dual_coef).ravel()
    return float(0.5 * c @ kernel.mmv(sv, sv, c) - np.abs(c).sum())


def run(name, repeat=1):
    from sklearn.svm import SVC as SkSVC

    import maxmargin
    from maxmargin.kernels import make_kernel

    Xtr, ytr, Xte, yte, params = LOADERS[name]()
    common = dict(tol=1e-3, cache_size=200, **params)
    # warm the compiled code on a tiny problem so compilation is not timed
    warm = np.r_[np.flatnonzero(ytr == ytr[0])[:25], np.flatnonzero(ytr != ytr[0])[:25]]
    maxmargin.SVC(**common).fit(Xtr[warm], ytr[warm])
    rows = []
    for label, cls in (("maxmargin SVC(smo)", maxmargin.SVC), ("sklearn SVC", SkSVC)):
        fits = []
        for _ in range(repeat):
            est = cls(**common)
            t = time.perf_counter()
            est.fit(Xtr, ytr)
            fits.append(time.perf_counter() - t)
        t = time.perf_counter()
        acc = float(np.mean(est.predict(Xte) == yte))
        tp = time.perf_counter() - t
        g = est._gamma
        kern = make_kernel("rbf", gamma=g)
        obj = dual_objective_binary(est.dual_coef_, est.support_vectors_, kern)
        rows.append((label, float(np.median(fits)), tp, acc, int(est.support_.shape[0]), obj))
    print(f"\n{name}: n={Xtr.shape[0]} d={Xtr.shape[1]} {params} tol=1e-3 cache=200MB")
    print(f"{'solver':22s} {'fit s':>8s} {'pred s':>8s} {'acc':>7s} {'#SV':>7s} {'dual objective':>16s}")
    for r in rows:
        print(f"{r[0]:22s} {r[1]:8.2f} {r[2]:8.2f} {r[3]:7.4f} {r[4]:7d} {r[5]:16.6f}")
    mm, sk = rows[0], rows[1]
    print(
        f"sklearn/maxmargin fit-time ratio: {sk[1] / mm[1]:.2f}x   predict ratio: {sk[2] / mm[2]:.2f}x   "
        f"objective rel diff: {abs(mm[5] - sk[5]) / abs(sk[5]):.2e}   accuracy diff: {100 * (mm[3] - sk[3]):+.2f} pp"
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("datasets", nargs="*", default=["a9a", "ijcnn1"], choices=sorted(LOADERS))
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    for d in a.datasets:
        run(d, a.repeat)
