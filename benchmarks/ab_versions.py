"""The same fits with two versions of maxmargin in one process, alternating: before/after numbers that the
machine's noise (the same fit moves by up to 1.5x between runs an hour apart) does not swamp.

    python benchmarks/ab_versions.py --base 08ee4d6 --data xor --n 100000 --solver batched
    python benchmarks/ab_versions.py --base 08ee4d6 --data sparse40k --n 8000 --probability
    python benchmarks/ab_versions.py --base HEAD~1 --data ijcnn1 --n 60000 --solver divide --repeat 5
    python benchmarks/ab_versions.py --base HEAD~1 --data mnist --linear dual --repeat 5

``--base`` is any git revision of this repository: its ``src/maxmargin`` is exported (``git archive``) into a
temporary folder as the package ``mmbase`` (imports rewritten), beside the working tree's ``maxmargin``.
Every variant is fitted once untimed (compilation), then ``--repeat`` times, base and head alternating;
the table gives medians, head / base, and the largest difference of the objectives (and, with
``--probability``, of ``predict_proba`` on the first 2000 rows).  Data: bench_divide's generators (xor,
mix20, skin, ijcnn1 pooled) and bench_probability's loaders (every set of datasets.py, pendigits, usps).
``--linear dual|primal|hinge|cs|l1`` times ``LinearSVC`` instead (bench_linear's sets, C and tol: dual, hinge and
Crammer-Singer 0.1, primal and the L1 penalty 0.01); ``--linear svr-l1``
``LinearSVR(loss='epsilon_insensitive', epsilon=0)`` on sweep_linear's planted target over a set's rows
(``reg_<set>``).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def export_base(rev, dest):
    """``src/maxmargin`` at ``rev`` as the package ``mmbase`` under ``dest``."""
    out = subprocess.run(
        ["git", "-C", str(HERE.parent), "archive", "--format=tar", rev, "src/maxmargin"],
        capture_output=True,
        check=True,
    ).stdout
    tar_path = Path(dest) / "base.tar"
    tar_path.write_bytes(out)
    with tarfile.open(tar_path) as tar:
        tar.extractall(dest, filter="data")
    pkg = Path(dest) / "mmbase"
    (Path(dest) / "src" / "maxmargin").rename(pkg)
    for f in pkg.rglob("*.py"):
        text = f.read_text()
        text = re.sub(r"\bmaxmargin\.", "mmbase.", text)
        text = re.sub(r"(from|import) maxmargin\b", r"\1 mmbase", text)
        f.write_text(text)
    sys.path.insert(0, str(dest))


def load(name, n):
    """(X, y, SVC parameters) for ``n`` rows (0: all) of a named set."""
    import bench_divide

    if name in ("xor", "mix20", "skin"):
        X, y, _, _, params = bench_divide.make_data(name, n)
        return X, y, params
    import bench_probability

    return bench_probability.load(name, n)


def load_linear(name):
    """(X, y, LinearSVC parameters) of a bench_linear set (its training rows)."""
    import bench_linear

    X, y, _, _ = bench_linear.load(name)
    return X, y, dict(C=bench_linear.C_OF.get(name, 1.0))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="git revision to compare the working tree against")
    ap.add_argument("--data", required=True)
    ap.add_argument("--n", type=int, default=0, help="rows (0: all)")
    ap.add_argument("--solver", default="auto")
    ap.add_argument("--probability", action="store_true", help="time probability=True beside the plain fit")
    ap.add_argument(
        "--linear",
        choices=("dual", "primal", "hinge", "cs", "l1", "svr-l1"),
        help="LinearSVC with this solver instead of SVC (cs: multi_class='crammer_singer'; svr-l1: LinearSVR, "
        "epsilon 0, on a planted target)",
    )
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    os.environ.setdefault("MAXMARGIN_DATA", str(HERE.parent.parent / "shared" / "data"))
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        export_base(a.base, tmp)
        import mmbase

        import maxmargin

        if a.linear == "svr-l1":
            import sweep_linear

            X, y, _, _ = sweep_linear.load(a.data if a.data.startswith("reg_") else "reg_" + a.data)
            params = dict(loss="epsilon_insensitive", epsilon=0.0, tol=0.1, C=1.0)
        elif a.linear:
            X, y, params = load_linear(a.data)
            params.update(dual=a.linear not in ("primal", "l1"), tol=0.01 if a.linear in ("primal", "l1") else 0.1)
            if a.linear == "l1":
                params.update(penalty="l1")
            if a.linear == "hinge":
                params.update(loss="hinge")
            if a.linear == "cs":
                params.update(multi_class="crammer_singer")
        else:
            X, y, params = load(a.data, a.n)
        variants = [False, True] if a.probability else [False]
        times, objectives, probas = {}, {}, {}
        for r in range(a.repeat + 1):
            for label, mod in (("base", mmbase), ("head", maxmargin)):
                for proba in variants:
                    if a.linear:
                        est = (mod.LinearSVR if a.linear == "svr-l1" else mod.LinearSVC)(random_state=0, **params)
                    else:
                        est = mod.SVC(solver=a.solver, probability=proba, random_state=0, **params)
                    t = time.perf_counter()
                    est.fit(X, y)
                    t = time.perf_counter() - t
                    if r:
                        times.setdefault((label, proba), []).append(t)
                    objectives[label] = np.asarray(est.objective_, dtype=np.float64)
                    if proba and r == a.repeat:
                        probas[label] = est.predict_proba(X[:2000])
        med = {k: float(np.median(v)) for k, v in times.items()}
        solver = (
            (f"LinearSVR {a.linear}" if a.linear == "svr-l1" else f"LinearSVC {a.linear}")
            if a.linear
            else f"solver={a.solver}"
        )
        print(f"{a.data}, {X.shape[0]} x {X.shape[1]}, {solver}, medians of {a.repeat} (base {a.base})")
        for proba in variants:
            b, h = med[("base", proba)], med[("head", proba)]
            what = "probability=True" if proba else "plain fit"
            print(f"  {what:<17} base {b:8.3f} s  head {h:8.3f} s  head/base {h / b:.3f}")
        if a.probability:
            rb = med[("base", True)] / med[("base", False)]
            rh = med[("head", True)] / med[("head", False)]
            diff = float(np.abs(probas["head"] - probas["base"]).max())
            print(f"  proba / plain     base {rb:.2f}  head {rh:.2f}   max |p_head - p_base| {diff:.2e}")
        rel = np.abs(objectives["head"] - objectives["base"]) / np.maximum(np.abs(objectives["base"]), 1e-300)
        print(f"  objectives: largest relative difference {float(rel.max()):.1e}")


if __name__ == "__main__":
    main()
