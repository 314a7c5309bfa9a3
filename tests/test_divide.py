"""solver='divide' (divide and conquer, local threads) against a QP reference, SMO and scikit-learn."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import kkt_violation, qp_reference
from sklearn.svm import SVC as SkSVC

from maxmargin import SVC
from maxmargin.io import load_model as load
from maxmargin.io import save_libsvm_model, save_model
from maxmargin.kernels import make_kernel
from maxmargin.problem import csvc_problem, nu_svc_problem
from maxmargin.solvers import divide, smo


@pytest.fixture(autouse=True)
def divide_small_problems(monkeypatch):
    """These problems have hundreds of rows: below ``DIRECT_BELOW`` the solver would solve them whole, so the
    tests lower it to 0 (every problem divided), and they divide whatever kernel mass the parts leave across
    (``ACROSS_MAX``); ``test_small_problems_are_solved_whole`` and ``test_partition_no_better_than_random_is_solved
    _whole`` check the defaults."""
    monkeypatch.setattr(divide, "DIRECT_BELOW", 0)
    monkeypatch.setattr(divide, "ACROSS_MAX", np.inf)


def _blobs(rng, n=400, d=3, k=2, sparse=False):
    """Overlapping Gaussian clusters, labels alternating between clusters (several modes per class)."""
    centres = rng.normal(scale=2.5, size=(2 * k, d))
    lab = rng.integers(2 * k, size=n)
    X = centres[lab] + rng.normal(size=(n, d))
    y = lab % k
    if sparse:
        X[rng.random(X.shape) < 0.3] = 0.0
        X = sp.csr_matrix(X)
    return X, y


@pytest.mark.parametrize("form", ["l1", "l2"])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize(
    "opts",
    [dict(n_parts=4), dict(n_parts=8, levels=2, partition="random"), dict(n_parts=5, part_solver="batched")],
)
def test_solver_matches_qp_reference(rng, form, sparse, opts):
    X, y = _blobs(rng, n=300, sparse=sparse)
    ypm = np.where(y == 1, 1.0, -1.0)
    C = rng.uniform(0.5, 3.0, size=ypm.size)  # per-sample weights
    k = make_kernel("rbf", gamma=0.3, X=X)
    make = (lambda: csvc_problem(X, k, ypm, C)) if form == "l1" else (lambda: csvc_problem(X, k, ypm, C, 1 / C, True))
    prob = make()
    Q = prob.q_matrix()
    _, f_ref = qp_reference(Q, prob.p, ypm, prob.upper)
    sol = divide.solve(prob, tol=1e-8, **opts)
    assert sol.converged
    assert abs(sol.objective - f_ref) <= 1e-6 * abs(f_ref)
    assert kkt_violation(Q, prob.p, ypm, prob.upper, sol.alpha) < 1e-6  # over all rows
    assert abs(ypm @ sol.alpha) < 1e-9
    ref = smo.solve(make(), tol=1e-8)
    assert abs(sol.rho - ref.rho) < 1e-5
    levels = sol.extra["divide"]
    assert [r["level"] for r in levels] == list(range(opts.get("levels", 1), -1, -1))
    assert levels[0]["parts"] == opts["n_parts"]


@pytest.mark.parametrize("sparse", [False, True])
def test_whole_gradient_from_the_parts(rng, sparse):
    """The global step's start: each part's own gradient plus the other parts' support vectors is
    the whole problem's gradient at the union of the parts' solutions (rows gathered: a subset)."""
    X, y = _blobs(rng, n=260, sparse=sparse)
    rows = np.sort(rng.choice(260, size=200, replace=False))
    ypm = np.where(y[rows] == 1, 1.0, -1.0)
    k = make_kernel("rbf", gamma=0.3, X=X)
    prob = csvc_problem(X, k, ypm, 1.0, 0.5, True, index=rows)  # the l2 form: a shift on the diagonal
    labels = rng.integers(4, size=200)
    members = [(g, np.flatnonzero(labels == g)) for g in range(4)]
    results = [divide.solve_part(divide.subproblem(prob, v), dict(tol=1e-6)) for _, v in members]
    alpha = np.zeros(200)
    for (_, v), res in zip(members, results):
        alpha[v] = res[0]
    G = divide.whole_gradient(prob, alpha, members, results)
    np.testing.assert_allclose(G, prob.q_matrix() @ alpha + prob.p, atol=1e-10)


def test_kmeans_partition_follows_clusters(rng):
    centres = np.array([[0.0, 0.0], [20.0, 0.0], [0.0, 20.0]])
    lab = rng.integers(3, size=600)
    X = centres[lab] + rng.normal(size=(600, 2))
    part = divide.partition(X, make_kernel("rbf", gamma=0.05), 3, sample_size=200, random_state=1)
    # each part is exactly one of the well separated clusters
    table = np.zeros((3, 3), dtype=int)
    np.add.at(table, (lab, part.labels), 1)
    assert sorted((table > 0).sum(axis=1)) == [1, 1, 1]
    rand = divide.partition(X, make_kernel("rbf", gamma=0.05), 4, method="random", y=lab % 2)
    assert np.bincount(rand.labels).max() - np.bincount(rand.labels).min() <= 2


@pytest.mark.parametrize("sparse", [False, True])
def test_svc_matches_sklearn_weighted(rng, sparse):
    X, y = _blobs(rng, n=500, sparse=sparse)
    sw = rng.uniform(0.2, 2.0, size=y.size)
    kw = dict(C=2.0, gamma=0.4, tol=1e-8, class_weight={0: 1.0, 1: 2.5})
    ours = SVC(solver="divide", solver_options=dict(n_parts=4, n_jobs=2), **kw).fit(X, y, sample_weight=sw)
    ref = SVC(solver="smo", **kw).fit(X, y, sample_weight=sw)
    sk = SkSVC(kernel="rbf", **kw).fit(X, y, sample_weight=sw)
    assert abs(ours.objective_[0] - ref.objective_[0]) <= 1e-6 * abs(ref.objective_[0])
    np.testing.assert_allclose(ours.decision_function(X), sk.decision_function(X), atol=1e-4)
    assert np.array_equal(ours.predict(X), sk.predict(X))
    assert ours.fit_status_ == 0


def test_multiclass_and_hard(rng):
    X, y = _blobs(rng, n=450, k=3)
    kw = dict(C=1.5, gamma=0.3, tol=1e-8)
    ours = SVC(solver="divide", solver_options=dict(n_parts=3), **kw).fit(X, y)
    ref = SVC(solver="smo", **kw).fit(X, y)
    np.testing.assert_allclose(ours.objective_, ref.objective_, rtol=1e-6)
    sk = SkSVC(kernel="rbf", **kw).fit(X, y)
    assert np.array_equal(ours.predict(X), sk.predict(X))
    # hard margin on separable data
    Xs = np.r_[rng.normal(size=(80, 2)) + 4, rng.normal(size=(80, 2)) - 4]
    ys = np.r_[np.ones(80), -np.ones(80)]
    h = SVC(formulation="hard", kernel="linear", tol=1e-8, solver="divide", solver_options=dict(n_parts=4)).fit(Xs, ys)
    hr = SVC(formulation="hard", kernel="linear", tol=1e-8, solver="smo").fit(Xs, ys)
    assert abs(h.objective_[0] - hr.objective_[0]) <= 1e-6 * abs(hr.objective_[0])


def test_early_stop_routes_to_part_models(rng, tmp_path):
    X, y = _blobs(rng, n=800, k=2)
    Xt, yt = X[600:], y[600:]
    X, y = X[:600], y[:600]
    exact = SVC(gamma=0.3, solver="divide", solver_options=dict(n_parts=4)).fit(X, y)
    early = SVC(gamma=0.3, solver="divide", solver_options=dict(n_parts=4, early_stop=1)).fit(X, y)
    assert early.fit_status_ == 0 and early._early_rho.shape == (4,)
    # the decision value of a point is its part's own model: recompute from the parts' SVs
    part = divide.route(early._get_kernel()(Xt, early._early_sample), _early_dict(early))
    K = early._get_kernel()(Xt, early.support_vectors_)
    manual = (
        np.array(
            [
                K[i, early._early_sv_group == part[i]] @ early.dual_coef_[0, early._early_sv_group == part[i]]
                for i in range(len(Xt))
            ]
        )
        + early._early_rho[part]
    )
    np.testing.assert_allclose(early.decision_function(Xt), manual, atol=1e-10)
    # approximate, but close to the exact model on this easy data
    assert abs(early.score(Xt, yt) - exact.score(Xt, yt)) < 0.06
    assert early.train_error_ == pytest.approx(np.mean(early.predict(X) != y))
    # model files store it as data; pickling keeps it; LIBSVM files refuse it
    save_model(early, tmp_path / "m.npz")
    np.testing.assert_array_equal(load(tmp_path / "m.npz").decision_function(Xt), early.decision_function(Xt))
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(early)).predict(Xt), early.predict(Xt))
    with pytest.raises(ValueError, match="routed level-k model"):
        save_libsvm_model(early, tmp_path / "m.libsvm")
    # an exact fit leaves no routed model behind
    assert exact._early_rho is None


def _early_dict(est):
    return dict(
        sample_labels=est._early_sample_labels, centre_sq=est._early_centre_sq, cluster_group=est._early_cluster_group
    )


@pytest.mark.parametrize(
    "opts,match",
    [
        (dict(n_parts=0), "n_parts"),
        (dict(levels=1.5), "levels"),
        (dict(partition="spectral"), "partition"),
        (dict(early_stop=2), "early_stop"),
        (dict(early_stop=1, partition="random"), "kmeans"),
        (dict(backend="spark"), "backend"),
        (dict(part_solver="qp"), "part_solver"),
        (dict(n_part=3), "n_part"),
    ],
)
def test_bad_options(rng, opts, match):
    X, y = _blobs(rng, n=60)
    with pytest.raises(ValueError, match=match):
        SVC(solver="divide", solver_options=opts).fit(X, y)


def test_refuses_what_it_cannot_solve(rng):
    X, y = _blobs(rng, n=60, k=3)
    with pytest.raises(ValueError, match="two classes"):
        SVC(solver="divide", solver_options=dict(early_stop=1)).fit(X, y)
    with pytest.raises(ValueError, match="probability=False"):
        SVC(solver="divide", probability=True, solver_options=dict(early_stop=1)).fit(X, y % 2)
    lin = SVC(kernel="linear", solver="divide", solver_options=dict(n_parts=2, early_stop=1)).fit(X, y % 2)
    with pytest.raises(AttributeError, match="routed early model"):
        lin.coef_
    # refitting the same estimator exactly leaves no routed model behind
    lin.set_params(solver_options=dict(n_parts=2)).fit(X, y)
    assert lin._early_rho is None and lin.coef_.shape == (3, X.shape[1])
    with pytest.raises(ValueError, match="precomputed"):
        SVC(kernel="precomputed", solver="divide").fit(X @ X.T, y)
    with pytest.raises(ValueError, match="not supported"):
        divide.solve(nu_svc_problem(X, make_kernel("rbf", gamma=1.0), np.where(y == 1, 1.0, -1.0), 0.3))
    with pytest.raises(ValueError, match="cannot be solved"):
        SVC(formulation="l2-simplex", solver="divide").fit(X, y)


def _mixture20(seed, n):
    """bench_divide's 20-D overlapping two-class mixture (4 Gaussians a class): under a wide RBF kernel a partition
    of it is no better than random, and each part's model is a fair model of the others' rows."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=0.4, size=(2, 4, 20))
    cls = rng.integers(2, size=n)
    return centres[cls, rng.integers(4, size=n)] + rng.normal(size=(n, 20)), cls


@pytest.mark.parametrize("seed", [0, 1])
def test_early_blend_is_chosen_on_held_out_rows_where_it_predicts_better(monkeypatch, seed):
    """early_blend='auto' holds rows out of the parts and blends the nearest parts' values where that predicts the
    held-out rows better: on the 20-D mixture it does (more accurate than the nearest part alone on new rows too);
    the held-out rows are in no part (no multiplier), and 'nearest' holds out nothing."""
    monkeypatch.setattr(divide, "BLEND_SHARE", 0.1)
    X, y = _mixture20(seed, 16000)
    Xt, yt, X, y = X[12000:], y[12000:], X[:12000], y[:12000]
    opts = dict(n_parts=16, early_stop=1)
    auto = SVC(gamma=0.05, solver="divide", solver_options=opts).fit(X, y)
    near = SVC(gamma=0.05, solver="divide", solver_options=dict(opts, early_blend="nearest")).fit(X, y)
    top, T = auto._early_blend
    assert top > 1 and T > 0 and tuple(near._early_blend) == (1.0, 0.0)
    assert auto.score(Xt, yt) > near.score(Xt, yt)
    prob = csvc_problem(X, make_kernel("rbf", gamma=0.05), np.where(y == 1, 1.0, -1.0), 1.0)
    sol = divide.solve(prob, **opts)
    blend = sol.extra["divide"][-1]["blend"]
    assert blend["held"] == 1200 and blend["parts"] == top and blend["error"] < blend["error_nearest"]
    held = np.sort(np.random.default_rng([0, 1]).choice(12000, size=1200, replace=False))
    assert not sol.alpha[held].any()
    if seed == 0:  # sparse rows: the same parts, blend and values
        sparse = SVC(gamma=0.05, solver="divide", solver_options=opts).fit(sp.csr_matrix(X), y)
        np.testing.assert_allclose(sparse._early_blend, auto._early_blend, rtol=1e-9)
        np.testing.assert_allclose(sparse.decision_function(sp.csr_matrix(Xt)), auto.decision_function(Xt), atol=1e-8)
    sol_near = divide.solve(prob, early_blend="nearest", **opts)
    assert "blend" not in sol_near.extra["divide"][-1] and (sol_near.alpha > 0).sum() > (sol.alpha > 0).sum()


def test_early_blend_decision_is_the_weighted_mean_of_the_nearest_parts_values(rng, tmp_path):
    """A blended early model's decision value, written out here: the parts' distances from the kernel values with
    the sample, the t nearest weighted exp(-(d - d_min) / T) (weights under 1e-6 dropped), each part's own value."""
    X, y = _blobs(rng, n=900, k=2)
    Xt, X, y = X[600:], X[:600], y[:600]
    est = SVC(gamma=0.3, solver="divide", solver_options=dict(n_parts=6, early_stop=1)).fit(X, y)
    K_s = est._get_kernel()(Xt, est._early_sample)
    labels, k = est._early_sample_labels, est._early_centre_sq.shape[0]
    dist = np.array(
        [[est._early_centre_sq[c] - 2 * K_s[i, labels == c].mean() for c in range(k)] for i in range(len(Xt))]
    )
    gap = np.sort(dist, axis=1)
    T = float(np.median(gap[:, 1] - gap[:, 0]))
    est._early_blend = np.array([3.0, T])  # as a fit that chose it would set it
    K = est._get_kernel()(Xt, est.support_vectors_)
    manual = np.zeros(len(Xt))
    for i in range(len(Xt)):
        near = np.argsort(dist[i], kind="stable")[:3]
        w = np.exp(-(dist[i, near] - dist[i, near[0]]) / T)
        w /= w.sum()
        w[w < 1e-6] = 0.0
        w /= w.sum()
        for g, wg in zip(near, w):
            own = est._early_sv_group == g
            manual[i] += wg * (K[i, own] @ est.dual_coef_[0, own] + est._early_rho[g])
    np.testing.assert_allclose(est.decision_function(Xt), manual, atol=1e-10)
    save_model(est, tmp_path / "m.npz")
    back = load(tmp_path / "m.npz")
    np.testing.assert_array_equal(back._early_blend, est._early_blend)
    np.testing.assert_array_equal(back.decision_function(Xt), est.decision_function(Xt))
    # a model file of an older maxmargin has no blend: the nearest part alone
    del back._early_blend
    part = divide.route(K_s, _early_dict(est))
    np.testing.assert_allclose(
        back.decision_function(Xt),
        [
            K[i, est._early_sv_group == g] @ est.dual_coef_[0, est._early_sv_group == g] + est._early_rho[g]
            for i, g in enumerate(part)
        ],
        atol=1e-10,
    )


def test_early_fit_takes_a_part_per_early_part_rows_by_default(rng, monkeypatch):
    """Without n_parts, the exact fit takes 8 parts and the early fit one per ``EARLY_PART_ROWS`` variables (at
    least 8, at most ``EARLY_MAX_PARTS``); a given n_parts is kept."""
    X, y = _blobs(rng, n=900, k=2)
    prob = csvc_problem(X, make_kernel("rbf", gamma=0.3), np.where(y == 1, 1.0, -1.0), 1.0)
    assert divide.solve(prob, tol=1e-3).extra["divide"][0]["parts"] == 8
    assert divide.solve(prob, tol=1e-3, early_stop=1).extra["divide"][0]["parts"] == 8  # 900 / 16,000: at least 8
    monkeypatch.setattr(divide, "EARLY_PART_ROWS", 75)
    assert divide.solve(prob, tol=1e-3, early_stop=1).extra["divide"][0]["parts"] == 12
    monkeypatch.setattr(divide, "EARLY_MAX_PARTS", 10)
    assert divide.solve(prob, tol=1e-3, early_stop=1).extra["divide"][0]["parts"] == 10
    assert divide.solve(prob, tol=1e-3, early_stop=1, n_parts=5).extra["divide"][0]["parts"] == 5


def test_blend_weights():
    D = np.array([[0.3, 0.1, np.inf, 0.2], [0.0, 50.0, 60.0, 70.0]])
    parts, w = divide.blend_weights(D, 3, 0.1)
    np.testing.assert_array_equal(parts, [[1, 3, 0], [0, 1, 2]])
    e = np.exp(-np.array([0.0, 1.0, 2.0]))
    np.testing.assert_allclose(w[0], e / e.sum())
    np.testing.assert_array_equal(w[1], [1.0, 0.0, 0.0])  # exp(-500): dropped
    parts, w = divide.blend_weights(D, 1, 0.1)
    np.testing.assert_array_equal(parts[:, 0], [1, 0])
    assert divide.blend_weights(D, 3, 0.0)[1].shape == (2, 1)
    parts, w = divide.blend_weights(np.array([[0.2, np.inf]]), 2, 0.1)  # an empty part weighs nothing
    np.testing.assert_array_equal(w, [[1.0, 0.0]])


def test_parts_on_threads_run_with_blas_on_one_thread(monkeypatch):
    """The parts' threads see BLAS held to one thread, set in the calling thread before they start (OpenBLAS
    ignored the counts the parts' threads set themselves: two parts' products then ran on all of BLAS's threads
    beside each other's compiled loops, 2x the fit), and BLAS has its own count back after the fit."""
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def counts():
        return [d["num_threads"] for d in threadpoolctl.threadpool_info() if d["user_api"] == "blas"]

    if not counts():
        pytest.skip("no BLAS library that threadpoolctl can see")
    seen = []
    solve_part = divide.solve_part

    def watched(part, options):
        seen.append(counts())
        return solve_part(part, options)

    monkeypatch.setattr(divide, "solve_part", watched)
    X, y = _mixture20(0, 2000)
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = counts()
        SVC(gamma=0.05, solver="divide", solver_options=dict(n_parts=4, n_jobs=2, early_stop=1)).fit(X, y)
        assert counts() == before
    assert len(seen) == 4 and all(c == [1] * len(before) for c in seen)


def test_early_single_class_parts_predict_their_class(rng):
    """Parts holding one class only (far apart clusters) have no support vectors: their
    model predicts that class (rho = -y)."""
    centres = np.array([[0.0, 0.0], [30.0, 0.0], [0.0, 30.0], [30.0, 30.0]])
    lab = rng.integers(4, size=400)
    X = centres[lab] + rng.normal(size=(400, 2))
    y = lab % 2
    est = SVC(gamma=0.05, solver="divide", solver_options=dict(n_parts=4, early_stop=1)).fit(X, y)
    assert est.support_.size == 0 and sorted(est._early_rho) == [-1.0, -1.0, 1.0, 1.0]
    assert np.array_equal(est.predict(X), y)


def test_dask_backend_without_client_says_so(rng):
    pytest.importorskip("distributed")
    X, y = _blobs(rng, n=60)
    with pytest.raises(ValueError, match="active Dask client"):
        SVC(solver="divide", solver_options=dict(backend="dask")).fit(X, y)


def test_cluster_sums_equal_the_one_hot_product(rng):
    # the partition's centre distances sum kernel values per cluster without the one-hot product
    K = rng.normal(size=(37, 50))
    labels = rng.integers(0, 6, size=50)
    labels[labels == 3] = 4  # cluster 3 empty
    one = np.zeros((50, 7))
    one[np.arange(50), labels] = 1.0
    np.testing.assert_allclose(divide.cluster_sums(K, labels, 7), K @ one, rtol=1e-12, atol=1e-12)
    csq = divide._centre_sq(K[:, :37] @ K[:, :37].T, labels[:37], 7)
    Kss = K[:, :37] @ K[:, :37].T
    size = np.maximum(one[:37].sum(axis=0), 1.0)
    np.testing.assert_allclose(csq, ((Kss @ one[:37]) * one[:37]).sum(axis=0) / size**2, rtol=1e-12)
    # the nearest centre: the smallest feature-space distance, an empty cluster never chosen
    near = divide.nearest_centre(K[:, :37], labels[:37], csq, 7)
    dist = csq[None, :] - 2.0 * (K[:, :37] @ one[:37]) / size[None, :]
    dist[:, one[:37].sum(axis=0) == 0] = np.inf
    np.testing.assert_array_equal(near, np.argmin(dist, axis=1))


@pytest.mark.parametrize("kernel", ["rbf", "poly", "linear", "sigmoid"])
def test_fused_assignment_equals_the_kernel_blocks(rng, kernel):
    # dense rows meet the sample in one compiled pass; the same nearest centres as by kernel blocks
    X = rng.normal(size=(700, 5))
    kern = make_kernel(kernel, gamma=0.3, degree=2, coef0=0.5)
    part = divide.partition(X, kern, 6, sample_size=120, random_state=1)
    by_blocks = divide.nearest_centre(kern(X, part.sample), part.sample_labels, part.centre_sq, 6)
    np.testing.assert_array_equal(divide.assign(X, kern, part.sample, part.sample_labels, part.centre_sq, 6), by_blocks)
    np.testing.assert_array_equal(part.labels, by_blocks)
    # sparse rows take the block path: the same centres
    Xs = sp.csr_matrix(np.where(np.abs(X) > 0.7, X, 0.0))
    centres = (part.sample, part.sample_labels, part.centre_sq, 6)
    np.testing.assert_array_equal(divide.assign(Xs, kern, *centres), divide.assign(Xs.toarray(), kern, *centres))


def test_small_problems_are_solved_whole(monkeypatch):
    """Below ``direct_below`` variables (default ``DIRECT_BELOW``) the problem is not divided: one solve by the part
    solver, reported as one direct global step, with the divided solution's objective and predictions; the early
    model is not built (the result is the exact one).  A multi-class fit's small pairs go the same way."""
    monkeypatch.undo()  # the default threshold
    assert divide.DIRECT_BELOW == 10_000
    rng = np.random.default_rng(7)
    X, y = _blobs(rng, n=500, d=3, k=2)
    ypm = np.where(y == 1, 1.0, -1.0)
    prob = csvc_problem(X, make_kernel("rbf", gamma=0.3, X=X), ypm, 2.0)
    whole = divide.solve(prob, tol=1e-8, n_parts=4)
    assert whole.extra["divide"] == [
        dict(level=0, parts=1, sizes=[500], support_vectors=int((whole.alpha > 0).sum()), direct=True)
        | {"seconds": whole.extra["divide"][0]["seconds"]}
    ]
    divided = divide.solve(prob, tol=1e-8, n_parts=4, direct_below=0)
    assert [r["level"] for r in divided.extra["divide"]] == [1, 0]
    assert "direct" not in divided.extra["divide"][-1]
    assert abs(whole.objective - divided.objective) <= 1e-6 * abs(divided.objective)
    assert kkt_violation(prob.q_matrix(), prob.p, ypm, prob.upper, whole.alpha) < 1e-6
    # just below the threshold it is solved whole, at the threshold divided
    assert divide.solve(prob, tol=1e-3, n_parts=4, direct_below=501).extra["divide"][0].get("direct")
    assert len(divide.solve(prob, tol=1e-3, n_parts=4, direct_below=500).extra["divide"]) == 2
    early = divide.solve(prob, tol=1e-8, n_parts=4, early_stop=1)
    assert early.status != "early_stop" and "early" not in early.extra
    np.testing.assert_allclose(early.alpha, whole.alpha, atol=1e-12)

    est = SVC(gamma=0.3, C=2.0, tol=1e-6, solver="divide", solver_options=dict(n_parts=4)).fit(X, y)
    assert getattr(est, "_early_rho", None) is None
    ref = SVC(gamma=0.3, C=2.0, tol=1e-6).fit(X, y)
    np.testing.assert_array_equal(est.predict(X), ref.predict(X))
    with pytest.raises(ValueError, match="direct_below must be an integer >= 0"):
        divide.solve(prob, direct_below=-1)
    for bad in ("x", -1):  # many classes: the pairs' routing reads it first
        with pytest.raises(ValueError, match="direct_below must be an integer >= 0"):
            SVC(solver="divide", solver_options=dict(direct_below=bad)).fit(X, np.arange(X.shape[0]) % 3)


def _near_orthogonal(rng, n=800, d=20_000, words=15):
    """Wide sparse rows of unit norm, nearly orthogonal (as wide text): under the RBF kernel every row is nearest to
    the most diffuse k-means centre, so one part takes almost every row."""
    X = sp.random(n, d, density=words / d, random_state=int(rng.integers(1 << 30)), format="csr")
    X.data[:] = 1.0
    X = sp.csr_matrix(X.multiply(1.0 / np.sqrt(np.asarray(X.multiply(X).sum(axis=1)))))
    return X, rng.integers(2, size=n)


def test_one_part_partition_is_solved_whole(rng, monkeypatch):
    """A k-means partition with more than ``ONE_PART_SHARE`` of the variables in one part is not used: the problem is
    solved whole (``largest_part`` in the report), to the reference optimum; ``partition(max_share=)`` refuses it
    from a probe of ``PROBE_ROWS`` rows before every row is assigned, and leaves a balanced partition as it was."""
    X, y = _near_orthogonal(rng)
    kern = make_kernel("rbf", gamma=1.0)
    part = divide.partition(X, kern, 4, sample_size=200)
    assert np.bincount(part.labels).max() > 0.9 * X.shape[0]  # the shape this is about
    ypm = np.where(y == 1, 1.0, -1.0)
    prob = csvc_problem(X, kern, ypm, 1.0)
    sol = divide.solve(prob, tol=1e-8, n_parts=4, sample_size=200)
    (step,) = sol.extra["divide"]
    assert step["direct"] and step["largest_part"] > divide.ONE_PART_SHARE
    Q = prob.q_matrix()
    _, f_ref = qp_reference(Q, prob.p, ypm, prob.upper)
    assert abs(sol.objective - f_ref) <= 1e-6 * abs(f_ref)
    assert kkt_violation(Q, prob.p, ypm, prob.upper, sol.alpha) < 1e-6

    monkeypatch.setattr(divide, "PROBE_ROWS", 50)  # the probe runs from 10 x PROBE_ROWS rows on
    refused = divide.partition(X, kern, 4, sample_size=200, max_share=divide.ONE_PART_SHARE)
    assert refused.labels is None and refused.largest > divide.ONE_PART_SHARE
    Xb, yb = _blobs(np.random.default_rng(2), n=600)
    kb = make_kernel("rbf", gamma=0.3)
    plain = divide.partition(Xb, kb, 3, sample_size=200, random_state=1)
    probed = divide.partition(Xb, kb, 3, sample_size=200, random_state=1, max_share=divide.ONE_PART_SHARE)
    assert probed.largest is None
    np.testing.assert_array_equal(probed.labels, plain.labels)
    assert np.bincount(plain.labels).max() < divide.ONE_PART_SHARE * 600


def test_low_dimensional_dense_rows_are_divided_whatever_the_partition_leaves_across(monkeypatch):
    """Dense rows of at most ``ACROSS_FEATURES`` features are divided from ``ACROSS_ROWS`` variables on even where
    the partition is no better than random (there the divided fit paid, 1.1-1.8x at 100,000-200,000 rows), to
    the same optimum; below ``ACROSS_ROWS``, with more features, or sparse, the rule still solves them whole."""
    rng = np.random.default_rng(11)
    X = rng.normal(size=(700, 8))  # 8-D, a wide kernel: no better than random
    ypm = np.where(X[:, 0] + 0.5 * rng.normal(size=700) > 0, 1.0, -1.0)
    kern = make_kernel("rbf", gamma=1.0 / 16)
    monkeypatch.setattr(divide, "ACROSS_MAX", 0.8)
    assert divide.partition(X, kern, 4, sample_size=300).across > 0.8
    prob = csvc_problem(X, kern, ypm, 1.0)
    whole = divide.solve(prob, tol=1e-8, n_parts=4, sample_size=300)
    assert whole.extra["divide"][0]["direct"]  # 700 variables < ACROSS_ROWS
    monkeypatch.setattr(divide, "ACROSS_ROWS", 600)
    divided = divide.solve(prob, tol=1e-8, n_parts=4, sample_size=300)
    assert [r["level"] for r in divided.extra["divide"]] == [1, 0]
    assert abs(divided.objective - whole.objective) <= 1e-6 * abs(whole.objective)
    assert kkt_violation(prob.q_matrix(), prob.p, ypm, prob.upper, divided.alpha) < 1e-6
    sparse = divide.solve(csvc_problem(sp.csr_matrix(X), kern, ypm, 1.0), tol=1e-8, n_parts=4, sample_size=300)
    assert sparse.extra["divide"][0]["direct"]
    monkeypatch.setattr(divide, "ACROSS_FEATURES", 7)
    assert divide.solve(prob, tol=1e-8, n_parts=4, sample_size=300).extra["divide"][0]["direct"]


def test_partition_no_better_than_random_is_solved_whole(monkeypatch):
    """``kernel_across``: 0 where no kernel value joins two parts, ~1 for a random partition, ~1 for k-means on
    data where every row is near every other; the exact fit then solves the problem whole (``kernel_across`` in the
    report), the early fit still divides, and a local kernel (well separated clusters) is divided."""
    rng = np.random.default_rng(5)
    blocks = np.kron(np.eye(4), np.ones((25, 25)))
    labels = np.repeat(np.arange(4), 25)
    assert divide.kernel_across(blocks, labels, 4) == pytest.approx(0.0)
    assert divide.kernel_across(blocks, rng.permutation(labels), 4) == pytest.approx(1.0, abs=0.1)
    full = np.ones((100, 100))  # every value the same: any partition leaves the random share across
    assert divide.kernel_across(full, labels, 4) == pytest.approx(1.0 / (1 - 1 / 4) * (75 / 99))

    X = rng.normal(size=(600, 30))  # 30-D, gamma 'scale': a wide kernel, no clusters
    y = (X[:, 0] + 0.5 * rng.normal(size=600) > 0).astype(int)
    ypm = np.where(y == 1, 1.0, -1.0)
    kern = make_kernel("rbf", gamma=1.0 / 30)
    monkeypatch.undo()  # the default ACROSS_MAX
    assert divide.ACROSS_MAX == 0.8
    monkeypatch.setattr(divide, "DIRECT_BELOW", 0)
    assert divide.partition(X, kern, 4, sample_size=300).across > divide.ACROSS_MAX
    # refused after the first k-means run (not the best of four): the same answer for a quarter of the work
    runs = []
    once = divide._kernel_kmeans_once
    monkeypatch.setattr(divide, "_kernel_kmeans_once", lambda *a: runs.append(1) or once(*a))
    refused = divide.partition(X, kern, 4, sample_size=300, max_across=0.7)  # the first run leaves 0.79 across
    assert refused.labels is None and 0.7 < refused.across < divide.ACROSS_MAX and len(runs) == 1
    runs.clear()
    assert divide.partition(X, kern, 4, sample_size=300, max_across=1.5).labels is not None and len(runs) == 4
    prob = csvc_problem(X, kern, ypm, 1.0)
    sol = divide.solve(prob, tol=1e-8, n_parts=4, sample_size=300)
    (step,) = sol.extra["divide"]
    assert step["direct"] and step["kernel_across"] > divide.ACROSS_MAX
    Q = prob.q_matrix()
    assert kkt_violation(Q, prob.p, ypm, prob.upper, sol.alpha) < 1e-6
    early = divide.solve(prob, tol=1e-8, n_parts=4, sample_size=300, early_stop=1)
    assert early.status == "early_stop"

    Xc, yc = _blobs(rng, n=600, d=2, k=2)  # centres 2.5 apart at gamma 2: the kernel is local
    kc = make_kernel("rbf", gamma=2.0)
    assert divide.partition(Xc, kc, 4, sample_size=300).across < divide.ACROSS_MAX
    local = divide.solve(csvc_problem(Xc, kc, np.where(yc == 1, 1.0, -1.0), 1.0), tol=1e-6, n_parts=4)
    assert [r["level"] for r in local.extra["divide"]] == [1, 0]


def test_small_pairs_of_many_classes_take_smos_compiled_route(monkeypatch):
    """Many classes: the one-vs-one pairs below ``direct_below`` (and SMO's range) are SMO's pairs, solved by the
    compiled all-pairs route as ``solver='smo'`` solves them (session 42: letter26's 325 pairs 18.9 s divided one
    by one, 0.41 s so); the same model as SMO's.  Options the route cannot honour keep the pairs apart."""
    from maxmargin.solvers import ovo

    monkeypatch.undo()  # the default DIRECT_BELOW
    calls = []
    solve_pairs = ovo.solve_pairs
    monkeypatch.setattr(ovo, "solve_pairs", lambda *a, **k: calls.append(1) or solve_pairs(*a, **k))
    rng = np.random.default_rng(4)
    X, y = _blobs(rng, n=900, d=4, k=5)
    ours = SVC(gamma=0.3, C=2.0, tol=1e-6, solver="divide", solver_options=dict(n_parts=4)).fit(X, y)
    assert calls
    ref = SVC(gamma=0.3, C=2.0, tol=1e-6, solver="smo").fit(X, y)
    np.testing.assert_allclose(ours.objective_, ref.objective_, rtol=1e-9)
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X))
    calls.clear()
    with pytest.raises(ValueError, match="two classes"):
        SVC(solver="divide", solver_options=dict(early_stop=1)).fit(X, y)
    apart = SVC(gamma=0.3, C=2.0, tol=1e-6, solver="divide", solver_options=dict(part_solver="batched")).fit(X, y)
    assert not calls
    np.testing.assert_allclose(apart.objective_, ref.objective_, rtol=1e-5)
