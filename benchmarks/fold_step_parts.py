"""Where the SMO steps of one warm probability fold go, part by part, in CPU cycles.

    python benchmarks/fold_step_parts.py --data ijcnn1 --n 8000 --steps 2000

Fits the plain SVC, builds the probability folds' shared rows and warm starts as ``SVC(probability=True)``
does (:class:`maxmargin.probability.FoldRows`), then runs fold 0's SMO steps in a copy of
``maxmargin.solvers.smo._run_py`` that reads the CPU's cycle counter (LLVM's ``readcyclecounter``) around
each part: shrinking, the selection (WSS3), fetching the two kernel rows, the gradient update, the bounded
gradient (``Gbar``) update.  A profile of compiled code that ``perf`` cannot give here (Numba's JIT code does
not resolve to symbols).  The copy follows ``_run_py`` (standard C-SVC, no nu-variant, shrinking on); keep
it in step when that loop changes.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from llvmlite import ir
from numba import njit, types, uint64
from numba.core import cgutils
from numba.extending import intrinsic

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_probability  # noqa: E402

import maxmargin  # noqa: E402
from maxmargin import probability  # noqa: E402
from maxmargin.kernels.rowcache import get_row  # noqa: E402
from maxmargin.problem import csvc_problem  # noqa: E402
from maxmargin.solvers import smo  # noqa: E402
from maxmargin.solvers.smo import TAU, _select, _shrink, pair_step  # noqa: E402


@intrinsic
def _cycles(typingctx):
    """The CPU's cycle counter (``llvm.readcyclecounter``)."""
    sig = types.uint64()

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.IntType(64), [])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.readcyclecounter")
        return builder.call(fn, [])

    return sig, codegen


@njit
def _steps(kd, cache, sv, tol, max_steps, acc):
    kidx, y, p, U, QD, shift, alpha, G, Gbar, active, act_data, state, fstate = sv
    n_var = y.shape[0]
    whole = n_var >= 0
    done = 0
    for _ in range(max_steps):
        t0 = _cycles()
        state[2] -= 1
        if state[2] <= 0:
            state[2] = min(n_var, 1000)
            _shrink(kd, cache, sv, tol, False)
        m = state[0]
        t1 = _cycles()
        i, j, viol = _select(kd, cache, sv, m, m == n_var, tol)
        t2 = _cycles()
        if j < 0:
            break
        all_active = m == n_var
        Ki = get_row(kd, cache, kidx[i], all_active, act_data, m)
        Kj = get_row(kd, cache, kidx[j], all_active, act_data, m)
        t3 = _cycles()
        quad = QD[i] + QD[j] - 2.0 * Ki[kidx[j]]
        if quad <= 0.0:
            quad = TAU
        old_ai = alpha[i]
        old_aj = alpha[j]
        ai, aj = pair_step(y[i] != y[j], old_ai, old_aj, G[i], G[j], U[i], U[j], quad)
        alpha[i] = ai
        alpha[j] = aj
        dai = (ai - old_ai) * y[i]
        daj = (aj - old_aj) * y[j]
        for k in range(m):
            u = uint64(active[k])
            kt = uint64(kidx[u])
            G[u] += y[u] * (Ki[kt] * dai + Kj[kt] * daj)
        t4 = _cycles()
        for r in range(2):
            v = i if r == 0 else j
            old = old_ai if r == 0 else old_aj
            new = ai if r == 0 else aj
            was_up = old >= U[v]
            if was_up != (new >= U[v]):
                Kv = get_row(kd, cache, kidx[v], whole, act_data, m)
                c = U[v] * y[v]
                if was_up:
                    c = -c
                for t in range(n_var):
                    Gbar[t] += y[t] * c * Kv[uint64(kidx[t])]
        t5 = _cycles()
        acc[0] += t1 - t0
        acc[1] += t2 - t1
        acc[2] += t3 - t2
        acc[3] += t4 - t3
        acc[4] += t5 - t4
        acc[5] += m
        state[3] += 1
        done += 1
    return done


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="ijcnn1")
    ap.add_argument("--n", type=int, default=8000, help="rows (0: all)")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--tol", type=float, default=None, help="the fold's tol (default: the folds' own)")
    args = ap.parse_args()
    X, y, params = bench_probability.load(args.data, args.n)
    est = maxmargin.SVC(**params).fit(X, y)
    if len(est.classes_) != 2:
        raise SystemExit("a binary set, please (the compiled many-class folds are maxmargin.solvers.ovo_folds)")
    ypm = np.where(y == est.classes_[1], 1.0, -1.0)
    perm = probability.class_groups(ypm)
    if perm is not None:  # as SVC._cv_decision_values: the rows grouped by class
        X, ypm = X[perm], ypm[perm]
        alpha_full = np.zeros(len(ypm))
        alpha_full[np.argsort(perm)[est.support_]] = np.abs(est.dual_coef_[0])
    else:
        alpha_full = np.zeros(len(ypm))
        alpha_full[est.support_] = np.abs(est.dual_coef_[0])
    C = np.full(len(ypm), float(params.get("C", 1.0)))
    kern = est._fit_kernel(X)
    plan = probability.fold_plan(len(ypm), np.random.RandomState(0))
    shared = probability.FoldRows(X, kern, alpha_full, C, est.cache_size, 1)
    starts = shared.starts(plan, alpha_full, ypm, C)
    train = plan[0][0]
    fold = csvc_problem(X, kern, ypm[train], C[train], index=train)
    fold.alpha0 = starts[0][0]
    tol = args.tol if args.tol is not None else probability.fold_tol(est.tol)
    with shared.pool() as pool, smo.kernel_row_pool(pool):
        st = smo.SolverState(fold, est.cache_size)
        ka = st.kargs()
        st.G, st.Gbar = np.array(starts[0][1]), np.array(starts[0][2])
        st.sv = st.arrays()
        acc = np.zeros(6, dtype=np.uint64)
        _steps(*ka, st.sv, tol, 1, np.zeros(6, dtype=np.uint64))  # compile
        t = time.perf_counter()
        done = _steps(*ka, st.sv, tol, args.steps, acc)
        wall = time.perf_counter() - t
    parts = ("shrinking", "selection", "two kernel rows", "gradient update", "Gbar update")
    total = float(acc[:5].sum())
    print(
        f"{args.data}, fold 0 of {len(ypm)} rows: {done} steps in {wall * 1e3:.1f} ms "
        f"({wall / max(done, 1) * 1e6:.1f} us a step), {acc[5] / max(done, 1):.0f} active variables on average"
    )
    for name, c in zip(parts, acc[:5]):
        print(f"  {name:16s} {float(c) / max(done, 1):10.0f} cycles a step  {100 * float(c) / total:5.1f}%")


if __name__ == "__main__":
    main()
