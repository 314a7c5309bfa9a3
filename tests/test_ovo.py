"""The compiled all-pairs one-vs-one route (maxmargin.solvers.ovo) against the
pair-by-pair SMO route, scikit-learn's SVC and an independent QP solver."""

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import qp_reference
from sklearn.datasets import make_blobs
from sklearn.svm import SVC as SkSVC

from maxmargin import SVC
from maxmargin import svm as svm_module
from maxmargin.kernels import make_kernel
from maxmargin.kernels.blocks import block_data
from maxmargin.solvers import ovo
from maxmargin.svm import BaseSVMClassifier


def blobs(n=300, k=5, d=6, sparse=False, seed=0):
    X, y = make_blobs(n, centers=k, n_features=d, cluster_std=3.0, random_state=seed)
    if sparse:
        X[np.abs(X) < 4] = 0.0
        X = sp.csr_matrix(X)
    return X, y


def pair_by_pair(monkeypatch):
    monkeypatch.setattr(
        BaseSVMClassifier, "_compiled_pairs", lambda self, X, kern, members, warm: np.zeros(len(members), bool)
    )


@pytest.fixture
def spy(monkeypatch):
    calls = []
    original = ovo.solve_pairs

    def wrapped(*args, **kw):
        calls.append(len(args[3]))
        return original(*args, **kw)

    monkeypatch.setattr(ovo, "solve_pairs", wrapped)
    return calls


CASES = [
    dict(kernel="rbf", gamma=0.05),
    dict(kernel="linear"),
    dict(kernel="poly", degree=2, gamma=0.02, coef0=1.0),
    dict(kernel="sigmoid", gamma=0.001, coef0=0.0),
]


@pytest.mark.parametrize("kw", CASES, ids=lambda kw: kw["kernel"])
@pytest.mark.parametrize("shape", ["narrow", "wide", "sparse"])
def test_the_compiled_route_gives_the_pair_by_pair_model(monkeypatch, spy, kw, shape):
    X, y = blobs(d=40 if shape == "wide" else 6, sparse=shape == "sparse")
    w = np.ones(y.shape[0])
    w[::11] = 0.0  # rows in no pair
    w[::7] = 2.5
    params = dict(C=3.0, tol=1e-8, class_weight={0: 1.5, 3: 0.5}, **kw)
    fast = SVC(**params).fit(X, y, sample_weight=w)
    assert spy == [10], "the compiled route was not taken"
    pair_by_pair(monkeypatch)
    slow = SVC(**params).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(fast.objective_, slow.objective_, rtol=1e-7)
    np.testing.assert_array_equal(fast.support_, slow.support_)
    np.testing.assert_allclose(fast.dual_coef_, slow.dual_coef_, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(fast.intercept_, slow.intercept_, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(fast.predict(X), slow.predict(X))
    np.testing.assert_allclose(fast.margin_, slow.margin_, rtol=1e-5)
    np.testing.assert_allclose(fast.w_norm_, slow.w_norm_, rtol=1e-6)
    np.testing.assert_allclose(fast.duality_gap_, slow.duality_gap_, rtol=1e-4, atol=1e-6)
    assert fast.train_error_ == slow.train_error_
    assert fast.fit_status_ == 0


def test_precomputed_gram_takes_the_compiled_route(spy):
    X, y = blobs()
    K = make_kernel("rbf", gamma=0.05)(X, X)
    a = SVC(kernel="precomputed", C=2.0, tol=1e-8).fit(K, y)
    b = SVC(kernel="rbf", gamma=0.05, C=2.0, tol=1e-8).fit(X, y)
    assert spy == [10, 10]
    np.testing.assert_allclose(a.dual_coef_, b.dual_coef_, rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(a.predict(K), b.predict(X))


def test_agrees_with_scikit_learn():
    X, y = blobs(n=400, k=6)
    ours = SVC(C=10.0, gamma=0.05, tol=1e-6).fit(X, y)
    ref = SkSVC(C=10.0, gamma=0.05, tol=1e-6).fit(X, y)
    np.testing.assert_array_equal(ours.support_, ref.support_)
    np.testing.assert_allclose(ours.dual_coef_, ref.dual_coef_, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, rtol=1e-3, atol=1e-4)
    assert np.mean(ours.predict(X) == ref.predict(X)) >= 0.995


@pytest.mark.parametrize("data", ["narrow", "sparse", "wide"])
@pytest.mark.parametrize("plan", [(True, True), (True, False), (False, False)])
def test_each_pair_against_an_independent_qp(data, plan, monkeypatch):
    """Every way the compiled route computes its kernel rows (``plan``: :func:`ovo.lazy_plan`'s (rows on demand,
    each pair its own diagonal blocks) for the pairs after the probe), on the three kinds of data blocks (dense
    with few features, sparse, dense with many: BLAS rows), solves each pair to the QP's optimum."""
    X, y = blobs(n=150, k=3, sparse=data == "sparse")
    if data == "wide":
        X = np.hstack([X] * 8)  # 48 features: above NARROW_D
    monkeypatch.setattr(ovo, "lazy_plan", lambda *a: plan)
    C = np.full(y.shape[0], 5.0)
    C[:20] = 1.0
    kern = make_kernel("rbf", gamma=0.1 if data != "wide" else 0.0125)
    pairs = [(0, 1), (0, 2), (1, 2)]
    res = ovo.solve_pairs(block_data(X, kern), y, C, pairs, tol=1e-9, lazy=True)
    assert res["status"] == "converged"
    for p, (a, b) in enumerate(pairs):
        rows, alpha, G = res["rows"][p], res["alpha"][p], res["grad"][p]
        ys = np.where(y[rows] == a, 1.0, -1.0)
        assert np.all(ys[: res["n_first"][p]] == 1) and np.all(ys[res["n_first"][p] :] == -1)
        Xr = X[rows].toarray() if sp.issparse(X) else X[rows]
        K = kern(Xr, Xr)
        Q = ys[:, None] * ys[None, :] * K
        ref_alpha, ref_obj = qp_reference(Q, -np.ones(rows.size), ys, C[rows])
        assert res["objective"][p] == pytest.approx(ref_obj, rel=1e-6)
        np.testing.assert_allclose(G, Q @ alpha - 1.0, atol=1e-9)  # the gradient is the true one
        assert abs(ys @ alpha) < 1e-10 and np.all(alpha >= 0) and np.all(alpha <= C[rows])
        # KKT: the maximal violation is below tol
        up = ((ys > 0) & (alpha < C[rows])) | ((ys < 0) & (alpha > 0))
        low = ((ys > 0) & (alpha > 0)) | ((ys < 0) & (alpha < C[rows]))
        assert np.max(-ys[up] * G[up]) - np.min(-ys[low] * G[low]) < 1e-8
        assert res["violation"][p] < 1e-9


def test_what_keeps_the_pair_by_pair_route(spy):
    X, y = blobs(n=200, k=4)
    SVC(callback=lambda info: None).fit(X, y)
    SVC(solver="batched").fit(X, y)
    SVC(formulation="l2").fit(X, y)
    SVC(kernel=lambda A, B: A @ B.T).fit(X, y)
    SVC(warm_start=True).fit(X, y).fit(X, y)
    SVC().fit(X[y < 2], y[y < 2])  # two classes: one problem, the usual solvers
    assert spy == []
    SVC(cache_size=0.05).fit(X, y)  # no pair's Gram matrix fits (80 KB), not even for one worker: pair by pair
    assert spy == []
    SVC().fit(X, y)
    assert spy == [6]


@pytest.mark.parametrize("shape", ["narrow", "sparse", "wide"])
def test_one_worker_takes_the_pairs_that_two_would_not(monkeypatch, shape):
    """Where the pairs' Gram matrices fit in cache_size for one worker but not for two, narrow and sparse rows
    (computed on demand) take the compiled route on one worker, and the pairs after the probes on every core
    where the probes' rows leave room (ovo.lazy_workers); dense rows of many features still go pair by pair.
    The model is the pair-by-pair one."""
    monkeypatch.setattr(svm_module, "cores", lambda: 2)
    calls = []
    original, workers_of = ovo.solve_pairs, ovo.lazy_workers

    def wrapped(*args, **kw):
        calls.append(kw.get("workers"))
        return original(*args, **kw)

    monkeypatch.setattr(ovo, "solve_pairs", wrapped)
    seen = []
    monkeypatch.setattr(ovo, "lazy_workers", lambda *a: seen.append(workers_of(*a)) or seen[-1])
    monkeypatch.setattr(ovo, "cores", lambda: 2)
    X, y = blobs(n=1200, k=4, d=40 if shape == "wide" else 6, sparse=shape == "sparse")
    # a pair of 600 rows: 2.75 MB; one worker: 4 diagonal blocks (2.75 MB) + one off-diagonal pair (1.37 MB)
    params = dict(C=3.0, tol=1e-8, cache_size=4.5)
    fast = SVC(**params).fit(X, y)
    if shape == "wide":
        assert calls == [] and seen == []
    else:
        assert calls == [1] and seen == [2]  # separated blobs: the probes visit few rows
    pair_by_pair(monkeypatch)
    slow = SVC(**params).fit(X, y)
    np.testing.assert_allclose(fast.objective_, slow.objective_, rtol=1e-7)
    np.testing.assert_allclose(fast.dual_coef_, slow.dual_coef_, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(fast.intercept_, slow.intercept_, rtol=1e-5, atol=1e-7)


def test_lazy_workers():
    n = np.array([1000, 800])
    # each store: 2 x 5% of 1000^2 x 8 bytes = 0.76 MB
    assert ovo.lazy_workers(np.array([0.05, 0.01]), n, 2.0, 1, 4) == 2
    assert ovo.lazy_workers(np.array([0.05, 0.01]), n, 100.0, 1, 4) == 4
    assert ovo.lazy_workers(np.array([0.9]), n, 2.0, 1, 4) == 1  # no room for a second: the workers given
    assert ovo.lazy_workers(np.array([0.9]), n, 2.0, 3, 4) == 3


def test_the_class_blocks_and_every_workers_blocks_fit_in_cache_size():
    counts = np.array([1000, 1000, 1000, 1000])
    pairs = [(a, b) for a in range(4) for b in range(a + 1, 4)]
    everything = [True] * len(pairs)
    # 4 class blocks of 8e6 bytes + 2 workers x 16e6 bytes: 64e6 bytes = 61.04 MB
    assert ovo.plan(counts, pairs, everything, 61.1, 2).all()
    # 3 of them (56e6 bytes = 53.4 MB) fit: the pairs among classes 0, 1, 2
    chosen = ovo.plan(counts, pairs, everything, 61.0, 2)
    assert [pairs[p] for p in np.flatnonzero(chosen)] == [(0, 1), (0, 2), (1, 2)]
    assert ovo.plan(counts, pairs, everything, 53.3, 2).sum() == 1  # 2 classes: 46e6 bytes
    assert ovo.plan(counts, pairs, [False] * len(pairs), 1000, 2).sum() == 0


def test_the_largest_classes_are_left_out_first():
    """Imbalanced classes: one class too large to keep beside the others leaves only its own
    pairs to the pair-by-pair route (all pairs went there before)."""
    counts = np.array([300, 3000, 200, 250, 100])
    pairs = [(a, b) for a in range(5) for b in range(a + 1, 5)]
    chosen = ovo.plan(counts, pairs, [True] * len(pairs), 20.0, 2)
    # 8 (300^2 + 200^2 + 250^2 + 100^2) + 2 x 16 x 300 x 250 bytes = 4.0 MB; class 1 adds 72 MB
    assert [pairs[p] for p in np.flatnonzero(~chosen)] == [(0, 1), (1, 2), (1, 3), (1, 4)]
    # a pair not eligible stays out, the rest of its classes' pairs stay in
    eligible = [pr != (0, 2) for pr in pairs]
    chosen = ovo.plan(counts, pairs, eligible, 20.0, 2)
    assert not chosen[pairs.index((0, 2))] and chosen[pairs.index((0, 3))]


def test_imbalanced_classes_split_between_the_routes_give_the_same_model(spy, monkeypatch):
    import maxmargin.svm

    monkeypatch.setattr(maxmargin.svm, "cores", lambda: 2)
    monkeypatch.setattr(ovo, "LAZY_MODES", ())  # two workers' memory rule (not one worker's: below)
    rng = np.random.default_rng(3)
    sizes = [700, 60, 50, 40, 30]
    y = np.repeat(np.arange(5), sizes)
    X = rng.normal(size=(y.size, 4)) + 1.5 * rng.normal(size=(5, 4))[y]
    split = SVC(cache_size=7.0, tol=1e-9).fit(X, y)  # class 0 (700^2 doubles: 3.7 MB) is left out
    assert spy == [6]
    whole = SVC(cache_size=100.0, tol=1e-9).fit(X, y)
    assert spy == [6, 10]
    assert np.array_equal(split.support_, whole.support_)
    np.testing.assert_allclose(split.dual_coef_, whole.dual_coef_, atol=1e-5)
    np.testing.assert_allclose(split.intercept_, whole.intercept_, atol=1e-5)
    assert np.array_equal(split.predict(X), whole.predict(X))


def test_many_large_classes_keep_their_memory_bound(spy, monkeypatch):
    import maxmargin.svm

    monkeypatch.setattr(maxmargin.svm, "cores", lambda: 2)
    monkeypatch.setattr(ovo, "LAZY_MODES", ())  # two workers' memory rule (not one worker's: below)
    X, y = blobs(n=1200, k=6)
    SVC(cache_size=1.5).fit(X, y)  # class blocks of 200^2 doubles (0.3 MB each), the workers' 2 x 0.6 MB
    assert spy == []
    SVC(cache_size=3).fit(X, y)  # 5 of the 6 class blocks fit beside the workers' blocks
    assert spy == [10]
    SVC(cache_size=10).fit(X, y)
    assert spy == [10, 15]


def test_pair_fits_counts_every_worker():
    assert ovo.pair_fits(1000, 200, 2)
    assert not ovo.pair_fits(4000, 200, 2)
    assert ovo.pair_fits(4000, 200, 1)


def test_a_time_limit_leaves_a_usable_model():
    X, y = blobs(n=600, k=8)
    with pytest.warns(Warning, match="time"):
        m = SVC(C=10.0, time_limit=1e-9).fit(X, y)
    assert m.fit_status_ == 1
    assert m.predict(X).shape == y.shape
    assert np.all(np.isfinite(m.decision_function(X)))


def test_pairs_that_finished_before_a_stop_count_as_converged():
    """A run stopped early (time limit, callback) keeps the pairs it finished: converged where their
    violation is within tol, not converged where they never started."""
    from maxmargin.formulations import fits_from_pairs

    X, y = blobs(n=150, k=3)
    C = np.full(y.shape[0], 5.0)
    kern = make_kernel("rbf", gamma=0.1)
    pairs = [(0, 1), (0, 2), (1, 2)]
    res = ovo.solve_pairs(block_data(X, kern), y, C, pairs, tol=1e-3)
    res["status"] = "time_limit"  # as if the run had stopped after these pairs...
    res["solved"][2] = False  # ...before the last one started (as solve_pairs marks it)
    assert res["alpha"][2] is None and res["grad"][2] is None  # its per-pair views say so too
    fits = fits_from_pairs(res, C, kern, X, "smo", tol=1e-3)
    assert [f.converged for f in fits] == [True, True, False]
    assert fits[2].status == "time_limit" and fits[0].status == "converged"
    old = fits_from_pairs(res, C, kern, X, "smo")  # without tol: every pair of a stopped run
    assert not any(f.converged for f in old)


@pytest.mark.parametrize("empty,named", [(0, ("a", "b")), (1, ("a", "b")), (2, ("a", "c"))])
def test_a_class_left_without_weight_is_named(empty, named):
    """The first pair, in LIBSVM's order, that lost a class to zero sample weights is named."""
    X, y = blobs(n=90, k=3)
    labels = np.array(["a", "b", "c"])[y]
    w = np.where(y == empty, 0.0, 1.0)
    with pytest.raises(ValueError, match=f"classes '{named[0]}' and '{named[1]}' do not both have samples left"):
        SVC().fit(X, labels, sample_weight=w)


def test_pair_members_are_each_pairs_rows_in_increasing_order():
    rng = np.random.default_rng(4)
    y_idx = rng.integers(4, size=60)
    C = np.where(rng.random(60) < 0.2, 0.0, 1.0)
    members, counts = ovo.pair_members(y_idx, C, 4)
    pairs = [(a, b) for a in range(4) for b in range(a + 1, 4)]
    assert np.array_equal(counts, np.bincount(y_idx[C > 0], minlength=4))
    for (a, b), (rows, ysub) in zip(pairs, members):
        expected = np.flatnonzero((C > 0) & np.isin(y_idx, [a, b]))
        assert np.array_equal(rows, expected)
        assert np.array_equal(ysub, np.where(y_idx[expected] == a, 1.0, -1.0))


def test_pair_members_made_one_by_one_equal_the_flat_arrays(monkeypatch):
    """PairMembers makes a pair alone while few were asked for, then the flat arrays of all: the same rows either
    way; the compiled route of a fit without folds never makes the flat arrays."""
    rng = np.random.default_rng(5)
    y_idx = rng.integers(9, size=200)
    C = np.where(rng.random(200) < 0.1, 0.0, 1.0)
    members, _ = ovo.pair_members(y_idx, C, 9)
    alone = [members[p] for p in range(ovo.MEMBERS_SINGLE)]
    assert members._flat is None
    for p in range(len(members)):  # past MEMBERS_SINGLE: the flat arrays, made once
        rows, ysub = members[p]
        s, e = members.offsets[p], members.offsets[p + 1]
        assert rows.base is members.rows_flat and np.array_equal(rows, members.rows_flat[s:e])
        if p < ovo.MEMBERS_SINGLE:
            assert np.array_equal(alone[p][0], rows) and np.array_equal(alone[p][1], ysub)
    assert np.array_equal(members.counts, np.bincount(y_idx[C > 0], minlength=9))

    made = []
    original = ovo.PairMembers._arrays
    monkeypatch.setattr(ovo.PairMembers, "_arrays", lambda self: made.append(1) or original(self))
    X, y = blobs(n=400, k=8)
    m = SVC(C=2.0).fit(X, y)
    assert made == [] and m.train_error_ == np.mean(m.predict(X) != y)
    SVC(C=2.0, probability=True, random_state=0).fit(X, y)  # the folds read them
    assert made


def test_pairs_in_many_batches_on_one_scratch_equal_one_batch(monkeypatch):
    """Each worker thread's pairs take their blocks from one scratch array, reused batch after batch (dense,
    sparse and rows on demand): the same solutions as every pair in one batch, bit for bit, and each pair's
    training decision values those of LIBSVM on its rows."""
    from maxmargin.formulations import fits_from_pairs

    for X, y, lazy in [
        (*blobs(n=360, k=6), False),
        (*blobs(n=360, k=6, sparse=True), False),
        (*blobs(n=360, k=6), True),
    ]:
        kern = make_kernel("rbf", gamma=0.05)
        C = np.full(y.shape[0], 2.0)
        pairs = [(a, b) for a in range(6) for b in range(a + 1, 6)]
        whole = ovo.solve_pairs(block_data(X, kern), y, C, pairs, tol=1e-8, lazy=lazy, workers=1)
        monkeypatch.setattr(ovo, "BATCH_ENTRIES", 1)  # one pair a batch
        for workers in (1, 2):
            batches = ovo.solve_pairs(block_data(X, kern), y, C, pairs, tol=1e-8, lazy=lazy, workers=workers)
            assert np.array_equal(batches["alpha_flat"], whole["alpha_flat"])
            assert np.array_equal(batches["grad_flat"], whole["grad_flat"])
            assert np.array_equal(batches["rho"], whole["rho"])
        monkeypatch.undo()
        fits = fits_from_pairs(batches, C, kern, X, "smo", consume=True)
        for p, (a, b) in enumerate(pairs):
            rows = np.flatnonzero(np.isin(y, [a, b]))
            ref = SkSVC(C=2.0, gamma=0.05, tol=1e-8).fit(X[rows], y[rows])  # positive for class b
            np.testing.assert_allclose(fits[p].extra["train_decision"], -ref.decision_function(X[rows]), atol=1e-6)


def test_fits_from_pairs_consumes_the_flat_arrays_only_when_asked():
    """consume=True turns the solver's flat multipliers and gradient into the fits' coefficients and decision values in
    place (and takes them out of the result); the fits equal those made from copies."""
    from maxmargin.formulations import fits_from_pairs

    X, y = blobs(n=240, k=5)
    C = np.full(y.shape[0], 3.0)
    kern = make_kernel("rbf", gamma=0.1)
    pairs = [(a, b) for a in range(5) for b in range(a + 1, 5)]
    res = ovo.solve_pairs(block_data(X, kern), y, C, pairs)
    alpha, grad = res["alpha_flat"].copy(), res["grad_flat"].copy()
    kept = fits_from_pairs(res, C, kern, X, "smo", tol=1e-3)
    assert np.array_equal(res["alpha_flat"], alpha) and np.array_equal(res["grad_flat"], grad)
    taken = fits_from_pairs(res, C, kern, X, "smo", tol=1e-3, consume=True)
    assert res["alpha_flat"] is None and res["grad_flat"] is None
    for name in ("coef", "decision", "rho", "w_norm", "margin", "gap"):
        assert np.array_equal(kept.arrays[name], taken.arrays[name]), name
    first = np.arange(alpha.size) - np.repeat(res["offsets"][:-1], np.diff(res["offsets"])) < np.repeat(
        res["n_first"], np.diff(res["offsets"])
    )
    assert np.array_equal(taken.arrays["coef"], np.where(first, alpha, -alpha))
    for p in (0, 4, 9):
        lo, hi = res["offsets"][p], res["offsets"][p + 1]
        rows = taken.arrays["rows"][lo:hi]
        assert np.all(np.diff(res["rows"][p][np.argsort(rows)]) > 0)
        assert np.array_equal(taken[p].alpha, np.abs(taken.arrays["coef"][lo:hi][np.argsort(rows)]))
        assert taken[p].rho == res["rho"][p] and kept[p].objective == taken[p].objective


def test_predictions_in_row_blocks_equal_the_whole(monkeypatch):
    """predict, predict_proba and the 'ovr' decision form the one-vs-one values a block of rows at
    a time (memory: 8 k(k-1)/2 bytes a row); a block of 3 rows gives the same as one block."""
    import maxmargin.svm

    X, y = blobs(n=200, k=5)
    m = SVC(probability=True, random_state=0).fit(X, y)
    whole = (m.predict(X), m.predict_proba(X), m.decision_function(X))
    monkeypatch.setattr(maxmargin.svm, "OVO_BLOCK_BYTES", 8 * 10 * 3)  # 10 pairs: 3 rows a block
    blocks = (m.predict(X), m.predict_proba(X), m.decision_function(X))
    assert np.array_equal(whole[0], blocks[0])
    np.testing.assert_allclose(blocks[1], whole[1], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(blocks[2], whole[2], rtol=1e-12, atol=1e-12)
    m.set_params(predict_from_proba=True)
    assert np.array_equal(m.predict(X), np.argmax(whole[1], axis=1))


def test_the_model_from_the_pairs_arrays_equals_the_one_from_their_fits(monkeypatch):
    """The compiled pairs' fits come as flat arrays (PairFits) that _set_model reads directly; the
    same fits as a plain list of BinaryFit objects give the same model, attribute by attribute."""
    from maxmargin import formulations
    from maxmargin.formulations.pairs import PairFits

    X, y = blobs(n=240, k=6)
    seen = []
    original = formulations.fits_from_pairs

    def spy_fits(*a, **kw):
        out = original(*a, **kw)
        seen.append(out)
        return out

    monkeypatch.setattr(formulations, "fits_from_pairs", spy_fits)
    fast = SVC(C=3.0).fit(X, y)
    assert isinstance(seen[-1], PairFits)
    monkeypatch.setattr(formulations, "fits_from_pairs", lambda *a, **kw: list(original(*a, **kw)))
    slow = SVC(C=3.0).fit(X, y)
    for name in ("support_", "n_support_", "dual_coef_", "intercept_", "n_iter_", "objective_", "duality_gap_"):
        np.testing.assert_array_equal(getattr(fast, name), getattr(slow, name), err_msg=name)
    for name in ("w_norm_", "margin_"):
        np.testing.assert_allclose(getattr(fast, name), getattr(slow, name), rtol=1e-12, err_msg=name)
    assert (fast.fit_status_, fast.train_error_, fast.loo_bound_) == (
        slow.fit_status_,
        slow.train_error_,
        slow.loo_bound_,
    )
    fits = seen[-1]
    assert len(fits) == 15 and fits[3] is fits[3] and fits[-1] is fits[14]
    lo, hi = fits.arrays["offsets"][3], fits.arrays["offsets"][4]  # pair 3's entries, in the solver's order
    order = np.argsort(fits.arrays["rows"][lo:hi])
    assert np.array_equal(fits[3].coef, fits.arrays["coef"][lo:hi][order])
    assert np.array_equal(fits[3].extra["train_decision"], fits.arrays["decision"][lo:hi][order])


def easy_or_hard(kind, n=1600, k=4):
    """Four classes of 400 rows (pairs of 800): well separated, two of them overlapping, or labels at random
    (most rows support vectors: SMO visits most rows)."""
    if kind == "easy":
        return make_blobs(n, centers=k, n_features=5, cluster_std=1.0, random_state=3)
    if kind == "mixed":  # classes 0 and 3 overlap: their pair is hard, the other five easy
        return make_blobs(n, centers=[[0] * 5, [8] * 5, [-8] * 5, [0.3] * 5], cluster_std=1.0, random_state=3)
    rng = np.random.default_rng(3)
    return rng.normal(size=(n, 5)), np.repeat(np.arange(k), n // k)


@pytest.mark.parametrize("kind", ["easy", "mixed", "hard"])
def test_easy_and_hard_classes_agree_with_libsvm(spy, kind, monkeypatch):
    """Easy classes: SMO visits a few rows in a hundred, and the compiled route computes only those
    (:func:`ovo.lazy_plan` after the probes); hard ones (labels at random): whole blocks.  Either way the
    model is LIBSVM's, and each pair's objective the one reached with every block computed."""
    plans = []
    original = ovo.lazy_plan
    monkeypatch.setattr(ovo, "lazy_plan", lambda *a: plans.append(original(*a)) or plans[-1])
    X, y = easy_or_hard(kind)
    ours = SVC(decision_function_shape="ovo").fit(X, y)  # LIBSVM's defaults: tol 1e-3, gamma 'scale'
    ref = SkSVC(decision_function_shape="ovo").fit(X, y)
    assert spy == [6]
    if kind == "easy":
        assert plans == [(True, True)]
    elif kind == "hard":
        assert plans == [(False, False)]
    # both stop at a maximal KKT violation of 1e-3 (LIBSVM's, not quite on the same path: the overlapping pair's
    # multipliers differ by up to 0.033 of C = 1 where the objective is flat)
    np.testing.assert_array_equal(ours.support_, ref.support_)
    np.testing.assert_allclose(ours.dual_coef_, ref.dual_coef_, atol=4e-2 if kind == "mixed" else 2e-2)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, atol=2e-3)
    np.testing.assert_allclose(ours.decision_function(X), ref.decision_function(X), atol=2e-3)
    assert np.mean(ours.predict(X) == ref.predict(X)) >= 0.999
    solve = ovo.solve_pairs
    monkeypatch.setattr(ovo, "solve_pairs", lambda *a, **kw: solve(*a, **{**kw, "lazy": False}))
    whole = SVC().fit(X, y)
    np.testing.assert_allclose(ours.objective_, whole.objective_, rtol=1e-4)


@pytest.mark.parametrize("kind", ["easy", "mixed", "hard"])
def test_folds_on_rows_on_demand(monkeypatch, kind):
    """probability=True: each pair's cross-validation folds run on its row store (the rows its own solve
    computed, and those each fold visits first), and the probes' share of rows computed counts the folds' rows
    too.  The held-out values, and so the sigmoids, are those of the folds on whole blocks."""
    plans = []
    original = ovo.lazy_plan
    monkeypatch.setattr(ovo, "lazy_plan", lambda *a: plans.append((a[0].copy(), original(*a))) or plans[-1][1])
    X, y = easy_or_hard(kind)
    lazy = SVC(probability=True, random_state=0, tol=1e-6).fit(X, y)
    assert len(plans) == 1
    visited, plan = plans[0]
    assert plan[0] == (kind != "hard") and np.all((visited > 0) & (visited <= 1))
    plain = []
    monkeypatch.setattr(ovo, "lazy_plan", lambda *a: plain.append(a[0].copy()) or original(*a))
    SVC().fit(X, y)
    assert np.all(visited >= plain[0])  # the folds visit rows the pair's own solve did not
    solve = ovo.solve_pairs
    monkeypatch.setattr(ovo, "solve_pairs", lambda *a, **kw: solve(*a, **{**kw, "lazy": False}))
    whole = SVC(probability=True, random_state=0, tol=1e-6).fit(X, y)
    # both stop at a KKT violation of 1e-6 (3e-5 in the folds) but not on the same SMO path (the pairs' own
    # solves differ as much: test_easy_and_hard_classes_agree_with_libsvm), so they agree to that, not bit for bit
    np.testing.assert_allclose(lazy.dual_coef_, whole.dual_coef_, atol=1e-4)
    np.testing.assert_allclose(lazy.probA_, whole.probA_, atol=1e-4)
    np.testing.assert_allclose(lazy.probB_, whole.probB_, atol=5e-5)
    np.testing.assert_allclose(lazy.predict_proba(X), whole.predict_proba(X), atol=5e-6)


def test_the_lazy_plan():
    counts = np.array([100, 100, 100, 100])
    pa, pb = np.array([0, 0, 1, 2]), np.array([3, 2, 3, 3])
    assert ovo.lazy_plan(np.array([0.01, 0.02]), counts, pa, pb) == (True, True)
    # the classes are in 2, 1, 2 and 3 of the pairs left: own blocks cost 2 * (the fraction visited) of shared ones
    assert ovo.lazy_plan(np.array([0.3, 0.4]), counts, pa, pb) == (True, True)  # 0.7
    assert ovo.lazy_plan(np.array([0.38]), counts, pa, pb) == (True, False)  # 0.76
    assert ovo.lazy_plan(np.array([0.5]), counts, pa, pb) == (False, False)  # most rows: whole blocks
    assert ovo.lazy_plan(np.array([0.5]), counts, pa[:0], pb[:0]) == (True, True)  # nothing left
    # dense rows above NARROW_D: rows on demand only where rarer, on the shared diagonal blocks
    assert ovo.lazy_plan(np.array([0.01]), counts, pa, pb, dear=True) == (True, False)
    assert ovo.lazy_plan(np.array([0.2]), counts, pa, pb, dear=True) == (False, False)


def test_wide_dense_rows_on_demand_only_up_to_their_limits(monkeypatch):
    """Dense rows of 33-64 features: rows on demand (matrix-vector products) where the probes are at most a
    third of the pairs and visited few rows; more features, or fewer pairs: whole blocks, no probes."""
    plans = []
    original = ovo.lazy_plan
    monkeypatch.setattr(ovo, "lazy_plan", lambda *a: plans.append(original(*a)) or plans[-1])
    X, y = make_blobs(2400, centers=8, n_features=5, cluster_std=1.0, random_state=3)
    Xw = np.hstack([X] * 10)  # 50 features: BLAS blocks; 28 pairs
    ours = SVC(decision_function_shape="ovo").fit(Xw, y)  # gamma="scale": the same problem as on X
    assert plans == [(True, False)]
    ref = SkSVC(decision_function_shape="ovo").fit(Xw, y)
    np.testing.assert_allclose(ours.decision_function(Xw), ref.decision_function(Xw), atol=2e-3)
    SVC().fit(np.hstack([Xw, Xw]), y)  # 100 features
    SVC().fit(Xw[y < 4], y[y < 4])  # 6 pairs: the probes would be a third of them
    assert len(plans) == 1


def test_batches_are_consecutive_ranges_of_about_the_entries():
    """ovo._batches (compiled): the ranges the Python loop it replaced gave -- each closes at the item whose size
    brings its sum to ``entries``; the rest is one last range."""
    from maxmargin.solvers.ovo import _batches

    def loop(sizes, entries):
        out, i0, acc = [], 0, 0
        for i, s in enumerate(sizes):
            acc += s
            if acc >= entries:
                out.append((i0, i + 1))
                i0, acc = i + 1, 0
        if i0 < len(sizes):
            out.append((i0, len(sizes)))
        return out

    rng = np.random.default_rng(0)
    for _ in range(200):
        sizes = rng.integers(0, 100, size=int(rng.integers(0, 40)))
        entries = int(rng.integers(1, 400))
        assert _batches(sizes, entries) == loop(sizes.tolist(), entries)
    assert _batches([5, 5, 5], 10) == [(0, 2), (2, 3)]
    assert _batches([], 10) == []


@pytest.mark.parametrize("sizes", [(10, 10), (3, 40), (64, 64)])
def test_a_small_pairs_whole_gram_matrix_takes_the_same_steps(sizes):
    """Pairs of at most ``FULL_MAX_ROWS`` rows run SMO on their whole Gram matrix (``pair_smo.whole_gram``) instead
    of the class blocks: the same steps bit for bit, for the C-SVC's SMO, the nu-variant's and a probability
    fold's; and the route is taken (:func:`ovo.solve_pairs` on such pairs gives the same model as the blocks)."""
    from maxmargin.solvers.ovo_folds import one_fold
    from maxmargin.solvers.pair_smo import FULL_MAX_ROWS, nu_gradient, pair_smo, pair_smo_nu, whole_gram

    na, nb = sizes
    n = na + nb
    assert n <= FULL_MAX_ROWS
    rng = np.random.default_rng(n)
    X = np.vstack([rng.normal(size=(na, 5)), rng.normal(size=(nb, 5)) + 0.8])
    K = make_kernel("rbf", gamma=0.3)(X, X)
    Da, Db = np.ascontiguousarray(K[:na, :na]), np.ascontiguousarray(K[na:, na:])
    off = np.ascontiguousarray(K[:na, na:])
    offT = np.ascontiguousarray(off.T)
    full = np.empty((n, n))
    whole_gram(Da, Db, off, full)
    np.testing.assert_array_equal(full, K)
    U = rng.uniform(0.5, 3.0, n)
    runs = []
    for whole in (None, full):
        alpha, G = np.zeros(n), -np.ones(n)
        it = pair_smo(Da, Db, off, offT, U, alpha, G, 1e-6, 100_000, True, None, None, whole)
        runs.append((it, alpha, G))
    assert runs[0][0] == runs[1][0] > 0
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    np.testing.assert_array_equal(runs[0][2], runs[1][2])
    alpha_fit = runs[0][1]
    nus = []
    for whole in (None, full):
        alpha = np.zeros(n)
        alpha[:2] = alpha[na : na + 2] = 0.4
        G = np.zeros(n)
        nu_gradient(Da, Db, off, offT, alpha, G)
        it, viol = pair_smo_nu(Da, Db, off, offT, U, alpha, G, 1e-6, 100_000, None, None, whole)
        nus.append((it, viol, alpha, G))
    assert nus[0][:2] == nus[1][:2] and nus[0][0] > 0
    np.testing.assert_array_equal(nus[0][2], nus[1][2])
    np.testing.assert_array_equal(nus[0][3], nus[1][3])
    fold = np.arange(n) % 5
    decs = []
    for whole in (None, full):
        dec = np.zeros(n)
        it = one_fold(Da, Db, off, offT, U, alpha_fit, fold, 2, 1e-5, 100_000, True, dec, None, None, whole)
        decs.append((it, dec))
    assert decs[0][0] == decs[1][0]
    np.testing.assert_array_equal(decs[0][1], decs[1][1])
    assert np.any(decs[0][1] != 0)
