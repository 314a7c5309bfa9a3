"""solver='divide' on a Dask LocalCluster (2 worker processes, 1 thread each, loopback only)."""

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import kkt_violation, qp_reference

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

from maxmargin import SVC, scaleout  # noqa: E402
from maxmargin.kernels import make_kernel  # noqa: E402
from maxmargin.problem import csvc_problem  # noqa: E402
from maxmargin.scaleout import WorkerLostError  # noqa: E402
from maxmargin.solvers import divide  # noqa: E402

DASK = dict(backend="dask", n_parts=4)


@pytest.fixture(autouse=True)
def divide_small_problems(monkeypatch):
    """Every problem here is divided, small as it is (``divide.DIRECT_BELOW`` would solve it whole, here), whatever
    kernel mass its parts leave across (``divide.ACROSS_MAX``)."""
    monkeypatch.setattr(divide, "DIRECT_BELOW", 0)
    monkeypatch.setattr(divide, "ACROSS_MAX", np.inf)


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address="127.0.0.1:0",
        host="127.0.0.1",
        worker_dashboard_address="127.0.0.1:0",
    )
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def _blobs(rng, n=600, d=3, k=2, sparse=False):
    centres = rng.normal(scale=2.5, size=(2 * k, d))
    lab = rng.integers(2 * k, size=n)
    X = centres[lab] + rng.normal(size=(n, d))
    if sparse:
        X[rng.random(X.shape) < 0.3] = 0.0
        X = sp.csr_matrix(X)
    return X, lab % k


@pytest.mark.parametrize("sparse", [False, True])
def test_solver_exact_kkt_over_all_rows(client, rng, sparse):
    X, y = _blobs(rng, n=400, sparse=sparse)
    ypm = np.where(y == 1, 1.0, -1.0)
    C = rng.uniform(0.5, 3.0, size=ypm.size)
    k = make_kernel("rbf", gamma=0.3, X=X)
    prob = csvc_problem(X, k, ypm, C)
    Q = prob.q_matrix()
    sol = divide.solve(prob, tol=1e-8, levels=2, **dict(DASK, n_parts=8))
    ref = divide.solve(csvc_problem(X, k, ypm, C), tol=1e-8, part_solver="smo", n_parts=1)  # one SMO solve
    assert sol.converged
    assert abs(sol.objective - ref.objective) <= 1e-6 * abs(ref.objective)
    assert kkt_violation(Q, prob.p, ypm, prob.upper, sol.alpha) < 1e-6


def test_one_part_partition_is_solved_whole_on_a_worker(client, rng, monkeypatch):
    """A k-means partition with one part of nearly every row (wide sparse rows, nearly orthogonal) is not divided on
    Dask either: the whole problem goes to one worker as one task (``run_wide``), to the QP's optimum.  A partition
    no better than random (``kernel_across`` above ``ACROSS_MAX``) goes the same way below ``DASK_ACROSS_BELOW``
    variables, and is divided from there on."""
    monkeypatch.setattr(divide, "ACROSS_MAX", 0.8)
    wide = []
    run_wide = scaleout.DaskExecutor.run_wide
    monkeypatch.setattr(
        scaleout.DaskExecutor, "run_wide", lambda self, fn, item: wide.append(fn.__name__) or run_wide(self, fn, item)
    )
    X = sp.random(600, 20_000, density=15 / 20_000, random_state=3, format="csr")
    X.data[:] = 1.0
    X = sp.csr_matrix(X.multiply(1.0 / np.sqrt(np.asarray(X.multiply(X).sum(axis=1)))))
    ypm = np.where(rng.random(600) < 0.5, 1.0, -1.0)
    k = make_kernel("rbf", gamma=1.0)
    prob = csvc_problem(X, k, ypm, 1.0)
    sol = divide.solve(prob, tol=1e-8, sample_size=200, **DASK)
    (step,) = sol.extra["divide"]
    assert step["direct"] and step["largest_part"] > divide.ONE_PART_SHARE
    assert wide == ["_solve_whole"]
    Q = prob.q_matrix()
    _, f_ref = qp_reference(Q, prob.p, ypm, prob.upper)
    assert abs(sol.objective - f_ref) <= 1e-6 * abs(f_ref)
    assert kkt_violation(Q, prob.p, ypm, prob.upper, sol.alpha) < 1e-6

    Xw = rng.normal(size=(500, 30))  # 30-D rows, a wide kernel: the partition is no better than random
    yw = np.where(Xw[:, 0] + 0.5 * rng.normal(size=500) > 0, 1.0, -1.0)
    kw = make_kernel("rbf", gamma=1.0 / 30)
    assert divide.partition(Xw, kw, 4, sample_size=300).across > 0.8
    whole = divide.solve(csvc_problem(Xw, kw, yw, 1.0), tol=1e-6, sample_size=300, **DASK)
    assert whole.extra["divide"][0]["kernel_across"] > 0.8 and wide == ["_solve_whole"] * 2
    monkeypatch.setattr(divide, "DASK_ACROSS_BELOW", 500)  # from 500 variables on: divided
    divided = divide.solve(csvc_problem(Xw, kw, yw, 1.0), tol=1e-6, sample_size=300, **DASK)
    assert [r["level"] for r in divided.extra["divide"]] == [1, 0]
    assert abs(divided.objective - whole.objective) <= 1e-5 * abs(whole.objective)


def test_global_step_in_many_small_rounds(client, rng, monkeypatch):
    """Working sets capped far below the candidates: many rounds, each a restricted solve with the
    rest held fixed and a pass over the changed rows only; the end is still the exact minimiser, with
    the whole gradient right."""
    monkeypatch.setattr(scaleout, "MAX_ADD", 30)
    monkeypatch.setattr(scaleout, "ADD_PER_ROW", 0.0)
    X, y = _blobs(rng, n=500)
    ypm = np.where(y == 1, 1.0, -1.0)
    C = rng.uniform(0.5, 3.0, size=ypm.size)
    k = make_kernel("rbf", gamma=0.5, X=X)
    prob = csvc_problem(X, k, ypm, C)
    sol = divide.solve(prob, tol=1e-8, **dict(DASK, n_parts=4))
    assert sol.converged and sol.extra["global_rounds"] > 3
    Q = prob.q_matrix()
    np.testing.assert_allclose(sol.grad, Q @ sol.alpha + prob.p, atol=1e-7)
    _, ref = qp_reference(Q, prob.p, ypm, prob.upper)
    assert abs(sol.objective - ref) <= 1e-7 * abs(ref)
    assert kkt_violation(Q, prob.p, ypm, prob.upper, sol.alpha) < 1e-7


def test_restricted_solve_takes_the_idle_workers_threads(client):
    """The global step's restricted solve runs alone: it goes to the host with the most worker threads
    and takes all of them (both 1-thread workers of the fixture share 127.0.0.1); the other tasks keep
    their worker's one thread."""
    import numba

    ex = scaleout.DaskExecutor(client)
    addr, threads = ex.widest_host()
    assert addr in client.scheduler_info()["workers"] and threads == 2
    limit = min(client.run(lambda: numba.config.NUMBA_NUM_THREADS).values())
    before = client.run(numba.get_num_threads)
    assert ex.run_wide(numba.get_num_threads, ()) == min(2, limit)
    assert client.run(numba.get_num_threads) == before  # the task gave the setting back
    assert ex.map(numba.get_num_threads, [(), ()]) == [1, 1]


def test_restricted_solve_holds_the_rest_fixed(rng):
    """One round without a cluster: the restricted problem (its linear term from the whole gradient)
    is the whole problem with the variables outside W fixed, checked against the QP reference."""
    X, y = _blobs(rng, n=160)
    ypm = np.where(y == 1, 1.0, -1.0)
    k = make_kernel("rbf", gamma=0.5, X=X)
    prob = csvc_problem(X, k, ypm, 1.5)
    Q = prob.q_matrix()
    alpha = divide.solve(csvc_problem(X, k, ypm, 1.5), tol=1e-2, n_parts=4, early_stop=1).alpha
    work = np.sort(rng.choice(160, size=70, replace=False))
    rest = np.setdiff1d(np.arange(160), work)
    G = Q @ alpha + prob.p
    for part_solver in ("smo", "batched"):
        res = scaleout.solve_restricted(
            divide.subproblem(prob, work, alpha[work]), G[work], dict(tol=1e-9, part_solver=part_solver)
        )
        # the reference: minimise over alpha_W with alpha_rest fixed
        p_w = prob.p[work] + Q[np.ix_(work, rest)] @ alpha[rest]
        _, ref = qp_reference(Q[np.ix_(work, work)], p_w, ypm[work], prob.upper[work], delta=ypm[work] @ alpha[work])
        a_w = res[0]
        obj = 0.5 * a_w @ Q[np.ix_(work, work)] @ a_w + p_w @ a_w
        assert obj == pytest.approx(ref, rel=1e-7, abs=1e-9)
        assert abs(ypm[work] @ a_w - ypm[work] @ alpha[work]) < 1e-9


def test_svc_weighted_multiclass_and_dask_input(client, rng):
    X, y = _blobs(rng, n=600, k=3)
    sw = rng.uniform(0.2, 2.0, size=y.size)
    kw = dict(C=2.0, gamma=0.4, tol=1e-8)
    ref = SVC(solver="smo", **kw).fit(X, y, sample_weight=sw)
    ours = SVC(solver="divide", solver_options=DASK, **kw).fit(X, y, sample_weight=sw)
    np.testing.assert_allclose(ours.objective_, ref.objective_, rtol=1e-6)
    assert np.array_equal(ours.predict(X), ref.predict(X))
    # dask.array input (blocks of rows and columns), labels and weights too
    Xd, yd, swd = da.from_array(X, chunks=(150, 2)), da.from_array(y, chunks=150), da.from_array(sw, chunks=150)
    ours_d = SVC(solver="divide", solver_options=DASK, **kw).fit(Xd, yd, sample_weight=swd)
    np.testing.assert_allclose(ours_d.objective_, ref.objective_, rtol=1e-6)


def _pairs_sent(monkeypatch):
    """The lists of pairs :meth:`scaleout.DaskExecutor.map_pairs` is given (one list a call)."""
    sent = []
    orig = scaleout.DaskExecutor.map_pairs

    def spy(self, fn, blocks, items):
        sent.append([(a, b) for a, b, *_ in items])
        return orig(self, fn, blocks, items)

    monkeypatch.setattr(scaleout.DaskExecutor, "map_pairs", spy)
    return sent


@pytest.mark.parametrize("sparse", [False, True])
def test_many_classes_pairs_are_tasks_side_by_side(client, rng, monkeypatch, sparse):
    """Four classes: the six one-vs-one problems go to the workers as six tasks (each divided there with the
    worker's threads), each class's rows scattered once; the model equals SMO's: objective, predictions, KKT of
    every pair.  Rows of zero weight are left out as in the other routes."""
    X, y = _blobs(rng, n=800, d=4, k=4, sparse=sparse)
    sw = rng.uniform(0.2, 2.0, size=y.size)
    sw[rng.random(y.size) < 0.05] = 0.0
    kw = dict(C=2.0, gamma=0.4, tol=1e-8)
    sent = _pairs_sent(monkeypatch)
    ours = SVC(solver="divide", solver_options=dict(DASK, direct_below=0), **kw).fit(X, y, sample_weight=sw)
    assert sent == [[(a, b) for a in range(4) for b in range(a + 1, 4)]]
    ref = SVC(solver="smo", **kw).fit(X, y, sample_weight=sw)
    np.testing.assert_allclose(ours.objective_, ref.objective_, rtol=1e-6)
    assert np.array_equal(ours.predict(X), ref.predict(X))
    k = make_kernel("rbf", gamma=0.4, X=X)
    start = np.concatenate([[0], np.cumsum(ours.n_support_)])
    for a in range(4):
        for b in range(a + 1, 4):
            rows = np.flatnonzero(((y == a) | (y == b)) & (sw > 0))
            ypm = np.where(y[rows] == a, 1.0, -1.0)
            prob = csvc_problem(X[rows], k, ypm, 2.0 * sw[rows])
            alpha = np.zeros(rows.size)
            for c, j in ((a, b - 1), (b, a)):  # class c's coefficients in the pair (a, b): dual_coef_ row j
                sv = ours.support_[start[c] : start[c + 1]]
                alpha[np.searchsorted(rows, sv)] = np.abs(ours.dual_coef_[j, start[c] : start[c + 1]])
            assert kkt_violation(prob.q_matrix(), prob.p, ypm, prob.upper, alpha) < 1e-6


def test_few_pairs_to_divide_stay_divided_over_the_cluster(client, rng, monkeypatch):
    """Fewer pairs to divide than worker threads: none is sent whole; the one large pair is divided over the
    cluster, the small ones go to SMO's compiled route; the model equals SMO's."""
    sizes = [100, 200, 400]
    X = np.vstack([rng.normal(loc=2.0 * c, size=(m, 3)) for c, m in enumerate(sizes)])
    y = np.repeat(np.arange(3), sizes)
    kw = dict(C=2.0, gamma=0.4, tol=1e-8)
    sent = _pairs_sent(monkeypatch)
    ours = SVC(solver="divide", solver_options=dict(DASK, direct_below=550), **kw).fit(X, y)
    assert sent == []
    ref = SVC(solver="smo", **kw).fit(X, y)
    np.testing.assert_allclose(ours.objective_, ref.objective_, rtol=1e-6)
    assert np.array_equal(ours.predict(X), ref.predict(X))


def test_blockwise_predict_equals_in_memory(client, rng, monkeypatch):
    X, y = _blobs(rng, n=500, k=3)
    est = SVC(gamma=0.4, probability=True, random_state=0, solver="divide", solver_options=DASK).fit(X, y)
    Xd = da.from_array(X, chunks=(120, 2))
    pred = est.predict(Xd)
    assert isinstance(pred, da.Array)
    assert np.array_equal(pred.compute(), est.predict(X))
    np.testing.assert_array_equal(est.decision_function(Xd).compute(), est.decision_function(X))
    np.testing.assert_array_equal(est.predict_proba(Xd).compute(), est.predict_proba(X))
    # two classes: a 1-D decision function; the early (routed) model too
    early = SVC(gamma=0.4, solver="divide", solver_options=dict(DASK, early_stop=1)).fit(X, y % 2)
    # the routed model meets each part's support vectors in groups of rows whose sizes depend on the
    # block, and the kernel's vectorised exp splits a block into SIMD lanes and a tail by its size:
    # equal to the last bits, not bit for bit
    np.testing.assert_allclose(early.decision_function(Xd).compute(), early.decision_function(X), rtol=0, atol=1e-12)
    assert np.array_equal(early.predict(Xd).compute(), early.predict(X))
    # a blend chosen on held-out rows (early_blend='auto'; rows held out at this size only by lowering the floor):
    # the same parts and blend as on threads, and blockwise values equal to in-memory ones
    monkeypatch.setattr(divide, "BLEND_SHARE", 0.2)
    monkeypatch.setattr(divide, "BLEND_MIN", 50)
    opts = dict(DASK, early_stop=1)
    on_dask = SVC(gamma=0.4, solver="divide", solver_options=opts).fit(X, y % 2)
    local = SVC(gamma=0.4, solver="divide", solver_options=dict(opts, backend="threads")).fit(X, y % 2)
    np.testing.assert_array_equal(on_dask._early_blend, local._early_blend)
    np.testing.assert_allclose(on_dask.decision_function(X), local.decision_function(X), rtol=0, atol=1e-10)
    on_dask._early_blend = np.array([3.0, 0.05])  # a blend of three parts, whichever was chosen
    np.testing.assert_allclose(
        on_dask.decision_function(Xd).compute(), on_dask.decision_function(X), rtol=0, atol=1e-12
    )


def test_dataframe_input(client, rng):
    dd = pytest.importorskip("dask.dataframe")  # needs pandas and pyarrow
    import pandas as pd

    X, y = _blobs(rng, n=300)
    frame = dd.from_pandas(pd.DataFrame(X, columns=["a", "b", "c"]), npartitions=3)
    est = SVC(gamma=0.4, tol=1e-8, solver="divide", solver_options=DASK).fit(frame, y)
    ref = SVC(gamma=0.4, tol=1e-8, solver="smo").fit(X, y)
    np.testing.assert_allclose(est.objective_, ref.objective_, rtol=1e-6)
    np.testing.assert_array_equal(est.predict(frame).compute(), ref.predict(X))


KILL = dict(C=10.0, gamma=0.5, tol=1e-6)


@pytest.fixture(scope="module")
def kill_data():
    X, y = _blobs(np.random.default_rng(7), n=2000, d=4)
    return X, y, SVC(solver="smo", **KILL).fit(X, y).objective_[0]


def _fit_interrupted(monkeypatch, X, y, interrupt):
    """Fit with ``interrupt(client, futures)`` called once, right after the first tasks of
    the fit were submitted (so it hits the fit in flight, deterministically); in a thread,
    so that a hang fails the test instead of blocking it."""
    done = []
    orig = scaleout.DaskExecutor._run

    def run(self, submit):
        def submit_then_interrupt():
            futures = submit()
            if not done:
                done.append(True)
                interrupt(self.client, futures)
            return futures

        return orig(self, submit_then_interrupt)

    monkeypatch.setattr(scaleout.DaskExecutor, "_run", run)
    result = {}

    def fit():
        try:
            result["est"] = SVC(solver="divide", solver_options=dict(DASK, n_parts=6), **KILL).fit(X, y)
        except WorkerLostError as exc:  # the named error is an accepted outcome
            result["error"] = exc
        except Exception as exc:  # noqa: BLE001 - reported below
            result["other"] = exc

    th = threading.Thread(target=fit, daemon=True)
    th.start()
    th.join(timeout=240)
    assert not th.is_alive(), "the fit hung after the workers were interrupted"
    assert done, "the interruption did not happen"
    assert "other" not in result, f"unexpected {type(result.get('other')).__name__}: {result.get('other')}"
    return result


def _kill_a_busy_worker(client):
    """An ``interrupt`` for :func:`_fit_interrupted`: SIGKILL to the worker process running a task of the fit (any
    worker after 10 s without one)."""
    pids = client.run(os.getpid)

    def kill(c, futures):
        deadline = time.time() + 10
        while time.time() < deadline:  # the worker running a part of this fit
            busy = [w for w, tasks in c.processing().items() if tasks]
            if busy:
                os.kill(pids[busy[0]], signal.SIGKILL)
                return
            time.sleep(0.002)
        os.kill(next(iter(pids.values())), signal.SIGKILL)

    return kill


def test_worker_killed_mid_fit(client, kill_data, monkeypatch):
    """A worker process killed (SIGKILL) while the parts run: the fit finishes on the
    workers left (the nanny brings one back) with the exact solution, or raises
    WorkerLostError; no hang."""
    X, y, f_ref = kill_data
    result = _fit_interrupted(monkeypatch, X, y, _kill_a_busy_worker(client))
    if "est" in result:
        assert abs(result["est"].objective_[0] - f_ref) <= 1e-5 * abs(f_ref)
    client.wait_for_workers(2, timeout=60)


def test_restart_mid_fit(client, kill_data, monkeypatch):
    """client.restart() during the fit (every worker restarted, all data on them lost)."""
    X, y, f_ref = kill_data
    result = _fit_interrupted(monkeypatch, X, y, lambda c, futures: c.restart(wait_for_workers=False))
    if "est" in result:
        assert abs(result["est"].objective_[0] - f_ref) <= 1e-5 * abs(f_ref)
    client.wait_for_workers(2, timeout=60)


def test_worker_killed_while_pairs_run(client, monkeypatch):
    """Three classes, their pairs as tasks side by side: a worker killed while they run; the fit finishes with
    SMO's solution (each class's rows scattered again) or raises WorkerLostError; no hang."""
    X, y = _blobs(np.random.default_rng(11), n=1500, d=4, k=3)
    ref = SVC(solver="smo", **KILL).fit(X, y).objective_
    sent = _pairs_sent(monkeypatch)
    result = _fit_interrupted(monkeypatch, X, y, _kill_a_busy_worker(client))
    assert sent == [[(0, 1), (0, 2), (1, 2)]]
    if "est" in result:
        np.testing.assert_allclose(result["est"].objective_, ref, rtol=1e-5)
    client.wait_for_workers(2, timeout=60)


_FAULTS = """
import resource, sys
import numpy as np
from maxmargin.scaleout import heap_kept

def faults(rounds=30):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(rounds):
        a = np.ones(1 << 19)  # 4 MiB, touched
        del a
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

faults(2)
outside = faults()
with heap_kept():
    faults(2)
    inside = faults()
after = faults()
print(outside, inside, after)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or not scaleout._libc(), reason="glibc's mallopt")
def test_heap_kept_during_a_task_and_given_back_after():
    """Under Dask's MALLOC_TRIM_THRESHOLD_ every large array is mapped afresh and faults its pages in again;
    inside ``heap_kept`` freed arrays are reused from the heap, and after it the setting is as before."""
    # NumPy asks for transparent huge pages on arrays from 4 MiB (where the kernel grants them on request, as on
    # session 36's host, a 4 MiB array faults in as 2-3 huge pages: 90 faults in 30 rounds); 4 KiB pages here
    env = dict(os.environ, MALLOC_TRIM_THRESHOLD_="65536", NUMPY_MADVISE_HUGEPAGE="0")
    env.pop("MALLOC_MMAP_THRESHOLD_", None)
    out = subprocess.run([sys.executable, "-c", _FAULTS], env=env, capture_output=True, text=True, check=True)
    outside, inside, after = map(int, out.stdout.split())
    # a 4 MiB array's pages fault in again every time (1,024 pages; 514 measured), at least two huge pages where
    # the kernel hands them out unasked
    assert outside >= 30 * 2
    assert inside < outside / 10
    assert after > outside / 2
