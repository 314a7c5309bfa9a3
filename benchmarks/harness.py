"""maxmargin against its peers on the same data and parameters, each fit in its own process.

    python benchmarks/harness.py a9a ijcnn1 usps --repeat 3
    python benchmarks/harness.py mnist --peers maxmargin sklearnex --timeout 900
    python benchmarks/harness.py shapes --busy          # every shape of issue 11, one busy process beside
    python benchmarks/harness.py --first-fit            # first fit after install vs a warm fit

Shapes (issue 11): many classes (pendigits 10, usps 10, mnist 10, the generated
letter26: 26 classes x 16 features x 15k rows, text100: 100 classes, 6.4k sparse
rows x 50k words), very sparse binary (a9a, the generated sparse40k: 40k x 300,
12 nonzeros a row), wide sparse binary text (the generated text2: 6k x 30k tf-idf), dense and wide binary (the generated
dense2k: 5k x 2,000), narrow dense (ijcnn1, skin), imbalanced many classes (the generated
zipf50: 50 classes of Zipf sizes, 20k x 30), large and easy binary (the generated easy20k:
20k x 10, about 50 SVs), very many small classes (the generated classes300: 300 classes of 20
rows, 44,850 pairs).  ``shapes`` names them all.
``--busy`` runs one CPU-bound process beside every fit (a spin loop), as a
machine shared with other work.

Peers (all from PyPI; missing ones are reported and skipped):
  maxmargin    maxmargin.SVC (solver='auto': the batched working-set solver)
  sklearn      sklearn.svm.SVC (LIBSVM inside)
  sklearnex    sklearnex.svm.SVC (Intel oneDAL)
  libsvm       libsvm-official (svmutil)
  thundersvm   thundersvm-cpu (float32)

For each dataset one table: median fit time over the repeats (and the spread),
predict time, test accuracy, #SV, the dual objective (computed here from each
peer's dual coefficients and support vectors, so the same yardstick for all;
for several classes the sum over the one-vs-one problems), the peak resident memory during the fit (the data and
the imports included, the warm-up's arrays, freed before, not: the high-water mark reset before the fit) and of the
whole worker process in parentheses (maxmargin's warm-up predicts 40,000 rows: on wide data that copy sets the
process's peak), and each peer's fit time divided by maxmargin's (> 1: maxmargin is faster).
Parameters: tol=1e-3, cache 200 MB, RBF kernel, C and gamma per dataset (issue 7).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

PEERS = ("maxmargin", "sklearn", "sklearnex", "libsvm", "thundersvm")
SHAPES = (
    *("pendigits", "usps", "letter26", "text100", "mnist", "zipf50", "classes300"),
    *("a9a", "sparse40k", "text2", "dense2k", "ijcnn1", "skin", "easy20k"),
)


def _gamma_value(gamma, X):
    if gamma == "scale":
        var = (X.multiply(X).mean() - X.mean() ** 2) if hasattr(X, "multiply") else X.var()
        return 1.0 / (X.shape[1] * var)
    return float(gamma)


def _objective(dual_coef, SV, gamma):
    """1/2 c'Kc - sum |c| for a binary problem (the dual minimum, any sign convention)."""
    from maxmargin.kernels import RBFKernel

    c = dual_coef.toarray().ravel() if hasattr(dual_coef, "toarray") else np.asarray(dual_coef).ravel()
    return float(0.5 * c @ RBFKernel(gamma).mmv(SV, SV, c) - np.abs(c).sum())


def _objective_ovo(dual_coef, SV, n_support, gamma):
    """The sum over the one-vs-one problems of 1/2 c'Kc - sum |c|, from the LIBSVM layout
    of dual_coef_ (row b-1 holds class a's coefficients in pair (a, b), row a class b's)."""
    from maxmargin.kernels import RBFKernel

    dc = dual_coef.toarray() if hasattr(dual_coef, "toarray") else np.asarray(dual_coef)
    starts = np.concatenate([[0], np.cumsum(n_support)])
    k = len(n_support)
    kern = RBFKernel(gamma)
    diag = [kern(SV[starts[c] : starts[c + 1]], SV[starts[c] : starts[c + 1]]) for c in range(k)]
    total = 0.0
    for a in range(k):
        sa = slice(starts[a], starts[a + 1])
        for b in range(a + 1, k):
            sb = slice(starts[b], starts[b + 1])
            ca, cb = dc[b - 1, sa], dc[a, sb]
            cross = ca @ (kern(SV[sa], SV[sb]) @ cb)
            total += 0.5 * (ca @ diag[a] @ ca + cb @ diag[b] @ cb + 2 * cross) - np.abs(ca).sum() - np.abs(cb).sum()
    return float(total)


class _RssPeak:
    """The peak resident set size of this process while in the block: the kernel's high-water mark (VmHWM) reset on
    entry (``/proc/self/clear_refs``, Linux 4.0+), read on exit; elsewhere the process's ``ru_maxrss``."""

    def __enter__(self):
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self._reset = True
        except OSError:
            self._reset = False
        return self

    def __exit__(self, *exc):
        self.mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        if self._reset:
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        self.mb = int(line.split()[1]) / 1024.0
        return False


def worker(peer, name):
    """Fit one peer once; print one JSON line."""
    from datasets import LOADERS

    Xtr, ytr, Xte, yte, params = LOADERS[name]()
    C = float(params["C"])
    gamma = _gamma_value(params["gamma"], Xtr)
    binary = np.unique(ytr).size == 2
    out = {"peer": peer, "dataset": name, "n": int(Xtr.shape[0]), "d": int(Xtr.shape[1]), "gamma": gamma}
    if peer == "libsvm":
        from libsvm.svmutil import svm_parameter, svm_predict, svm_problem, svm_train

        prob = svm_problem(ytr, Xtr)
        param = svm_parameter(f"-s 0 -t 2 -c {C} -g {float(gamma)} -e 0.001 -m 200 -q")
        t = time.perf_counter()
        model = svm_train(prob, param)
        out["fit"] = time.perf_counter() - t
        t = time.perf_counter()
        pred, _, _ = svm_predict(yte, Xte, model, "-q")
        out["predict"] = time.perf_counter() - t
        out["acc"] = float(np.mean(np.asarray(pred) == yte))
        out["nsv"] = int(model.get_nr_sv())
        if binary:
            idx = np.asarray(model.get_sv_indices()) - 1
            coef = np.asarray(model.get_sv_coef()).ravel()
            out["objective"] = _objective(coef, Xtr[idx], gamma)
    else:
        if peer == "maxmargin":
            import maxmargin

            est = maxmargin.SVC(C=C, gamma=gamma, tol=1e-3, cache_size=200, solver="auto")
            # compile outside the timing (first use in a process compiles the solvers; --first-fit
            # measures that separately)
            warm = np.r_[np.flatnonzero(ytr == ytr[0])[:30], np.flatnonzero(ytr != ytr[0])[:30]]
            small = maxmargin.SVC(C=C, gamma=gamma).fit(Xtr[warm], ytr[warm])
            maxmargin.SVC(C=C, gamma=gamma, solver="batched").fit(Xtr[warm], ytr[warm])
            three = np.concatenate([np.flatnonzero(ytr == c)[:20] for c in np.unique(ytr)[:3]])
            if not binary:  # the compiled one-vs-one route, and the parallel loops of its predict
                multi = maxmargin.SVC(C=C, gamma=gamma).fit(Xtr[three], ytr[three])
                multi.predict(Xtr[np.resize(np.arange(Xtr.shape[0]), 40_000)])
            # and the parallel kernel-block loop of predict (blocks of >= 2M kernel values)
            small.predict(Xtr[np.resize(np.arange(Xtr.shape[0]), 40_000)])
        elif peer == "sklearn":
            from sklearn.svm import SVC

            est = SVC(C=C, gamma=gamma, tol=1e-3, cache_size=200)
        elif peer == "sklearnex":
            from sklearnex.svm import SVC

            est = SVC(C=C, gamma=gamma, tol=1e-3, cache_size=200)
        elif peer == "thundersvm":
            from thundersvm import SVC

            est = SVC(C=C, gamma=gamma, tol=1e-3, cache_size=200)
        else:
            raise SystemExit(f"unknown peer {peer}")
        with _RssPeak() as peak:
            t = time.perf_counter()
            est.fit(Xtr, ytr)
            out["fit"] = time.perf_counter() - t
        out["fit_mb"] = peak.mb
        t = time.perf_counter()
        pred = est.predict(Xte)
        out["predict"] = time.perf_counter() - t
        out["acc"] = float(np.mean(np.asarray(pred).ravel() == yte))
        sup = np.asarray(est.support_).ravel()
        out["nsv"] = int(sup.size)
        if binary:
            out["objective"] = _objective(est.dual_coef_, Xtr[sup], gamma)
        else:
            out["objective"] = _objective_ovo(est.dual_coef_, Xtr[sup], np.asarray(est.n_support_), gamma)
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print("RESULT " + json.dumps(out), flush=True)


FIRST_FIT = """
import time
t0 = time.perf_counter()
import maxmargin
from maxmargin.datasets import load_heart_scale
X, y = load_heart_scale()
t1 = time.perf_counter()
maxmargin.SVC(C=2.0).fit(X, y)
t2 = time.perf_counter()
maxmargin.SVC(C=2.0).fit(X, y)
t3 = time.perf_counter()
print("RESULT", t1 - t0, t2 - t1, t3 - t2)
"""


def first_fit():
    """The first fit on heart_scale in a fresh process: with an empty Numba cache (as right after
    ``pip install``), then again with the cache that run left, and a warm fit in the same process."""
    import tempfile

    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONUNBUFFERED="1")
        print("| run | import + read s | first fit s | second fit s |")
        print("|---|---|---|---|")
        for label in ("empty cache (after install)", "cache filled by the run above"):
            p = subprocess.run([sys.executable, "-c", FIRST_FIT], capture_output=True, text=True, env=env)
            line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT")), None)
            if line is None:
                print(f"| {label} | failed: {(p.stderr.strip().splitlines() or ['?'])[-1][:80]} | | |")
                continue
            a, b, c = (float(v) for v in line.split()[1:])
            print(f"| {label} | {a:.2f} | {b:.2f} | {c:.3f} |")


class Busy:
    """One CPU-bound process beside the measured one (a machine shared with other work)."""

    def __enter__(self):
        self.p = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        return self

    def __exit__(self, *exc):
        self.p.kill()
        self.p.wait()


def run_one(peer, name, timeout, busy=False):
    if busy:
        with Busy():
            return run_one(peer, name, timeout)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    try:
        p = subprocess.run(
            [sys.executable, __file__, "--worker", peer, name], capture_output=True, text=True, timeout=timeout, env=env
        )
    except subprocess.TimeoutExpired:
        return {"peer": peer, "error": f"> {timeout} s"}
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["no output"]
    return {"peer": peer, "error": tail[0][:80]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("datasets", nargs="*", default=["a9a", "ijcnn1", "usps"])
    ap.add_argument("--peers", nargs="*", default=list(PEERS), choices=PEERS)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--busy", action="store_true", help="one busy process beside every fit")
    ap.add_argument("--first-fit", action="store_true", help="first fit after install vs a warm fit")
    ap.add_argument("--worker", nargs=2, metavar=("PEER", "DATASET"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker(*a.worker)
        return
    if a.first_fit:
        first_fit()
        return
    if a.datasets == ["shapes"]:
        a.datasets = list(SHAPES)
    import platform

    from threadpoolctl import threadpool_info

    blas = ", ".join(sorted({f"{i['internal_api']} {i.get('version')}" for i in threadpool_info()}))
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M')} | {os.cpu_count()} cores | {platform.processor() or platform.machine()}"
        f" | BLAS: {blas} | repeat {a.repeat} (median) | tol 1e-3, cache 200 MB"
        f"{' | ONE BUSY PROCESS BESIDE' if a.busy else ' | quiet'}"
    )
    for name in a.datasets:
        rows = []
        for peer in a.peers:
            runs = [run_one(peer, name, a.timeout, a.busy) for _ in range(a.repeat)]
            ok = [r for r in runs if "fit" in r]
            if not ok:
                rows.append((peer, None, runs[0].get("error", "failed")))
                continue
            fits = [r["fit"] for r in ok]
            best = ok[int(np.argsort(fits)[len(fits) // 2])]
            best = dict(
                best,
                fit=statistics.median(fits),
                spread=(min(fits), max(fits)),
                predict=statistics.median(r["predict"] for r in ok),
            )
            rows.append((peer, best, None))
        head = next((r for _, r, _ in rows if r), None)
        if head is None:
            print(f"\n## {name}: no peer ran")
            continue
        print(f"\n## {name}: n={head['n']} d={head['d']} gamma={head['gamma']:.4g}")
        print(
            "| peer | fit s (min-max) | predict s | test acc | #SV | dual objective | peak MB fit (all) "
            "| fit time / maxmargin's |"
        )
        print("|---|---|---|---|---|---|---|---|")
        mm = next((r for p, r, _ in rows if p == "maxmargin" and r), None)
        for peer, r, err in rows:
            if r is None:
                print(f"| {peer} | {err} | | | | | | |")
                continue
            obj = r.get("objective", r.get("objective_sum"))
            objs = f"{obj:.6f}" if obj is not None else "-"
            ratio = f"{r['fit'] / mm['fit']:.2f}x" if mm else "-"
            pr = f" (predict {r['predict'] / mm['predict']:.1f}x)" if mm else ""
            print(
                f"| {peer} | {r['fit']:.2f} ({r['spread'][0]:.2f}-{r['spread'][1]:.2f}) | {r['predict']:.2f} | "
                f"{r['acc']:.4f} | {r['nsv']} | {objs} | {r.get('fit_mb', 0):.0f} ({r['peak_mb']:.0f}) | "
                f"{ratio}{pr} |"
            )
        sys.stdout.flush()


if __name__ == "__main__":
    main()
