"""Every compiled kernel path against a naive formula, and dense input against sparse."""

import numpy as np
import pytest
import scipy.sparse as sp

from maxmargin import SVC, SVR, OneClassSVM
from maxmargin.kernels import formulas, make_kernel
from maxmargin.kernels.blocks import (
    DENSE,
    GRAM,
    NARROW,
    SPARSE,
    block_by_columns,
    block_data,
    columns_of,
    kernel_block,
)
from maxmargin.kernels.engine import KernelRows, decide, kernel_times
from maxmargin.kernels.rowcache import compute_row, kernel_data, kernel_diag

KERNELS = [
    ("linear", {}),
    ("poly", {"gamma": 0.3, "degree": 3, "coef0": 1.0}),
    ("poly", {"gamma": 0.2, "degree": 2, "coef0": 0.0}),
    ("rbf", {"gamma": 0.4}),
    ("sigmoid", {"gamma": 0.05, "coef0": -0.5}),
]


def naive(name, kw, A, B):
    """The kernel by its textbook formula, one pair of rows at a time."""
    A = A.toarray() if sp.issparse(A) else A
    B = B.toarray() if sp.issparse(B) else B
    out = np.empty((A.shape[0], B.shape[0]))
    for i, a in enumerate(A):
        for j, b in enumerate(B):
            if name == "linear":
                out[i, j] = a @ b
            elif name == "poly":
                out[i, j] = (kw["gamma"] * (a @ b) + kw["coef0"]) ** kw["degree"]
            elif name == "rbf":
                out[i, j] = np.exp(-kw["gamma"] * np.sum((a - b) ** 2))
            else:
                out[i, j] = np.tanh(kw["gamma"] * (a @ b) + kw["coef0"])
    return out


def data(shape, density=None, seed=0):
    rng = np.random.default_rng(seed)
    if density is None:
        return rng.normal(size=shape)
    return sp.random(*shape, density=density, format="csr", random_state=seed, data_rvs=rng.standard_normal)


# (name of the case, data, the engine path decide() must choose, the block mode)
CASES = [
    ("narrow dense", lambda: data((70, 5)), "narrow", NARROW),
    ("dense", lambda: data((70, 40)), "dense", DENSE),
    ("sparse rows", lambda: data((70, 60), density=0.1), "sparse", SPARSE),
    ("wide sparse", lambda: data((70, 6000), density=0.003), "wide", SPARSE),
    # few enough features to densify, but many: very sparse rows take the inverted index, denser ones the chunks
    ("very sparse, 1,500 features", lambda: data((70, 1500), density=0.004), "wide", SPARSE),
    ("denser, 1,500 features", lambda: data((70, 1500), density=0.2), "sparse", SPARSE),
]


@pytest.mark.parametrize("name,kw", KERNELS)
@pytest.mark.parametrize("case,make,path,mode", CASES, ids=[c[0] for c in CASES])
def test_every_path_matches_the_naive_formula(name, kw, case, make, path, mode):
    X = make()
    kern = make_kernel(name, X=X, **kw)
    ref = naive(name, kw, X, X)
    tol = dict(rtol=1e-10, atol=1e-11)
    # the kernel object's block
    np.testing.assert_allclose(kern(X, X), ref, **tol)
    # the row engine (batched solver), whole rows and rows restricted to columns
    assert decide(X, kern) == path
    eng = KernelRows(X, kern)
    idx = np.array([0, 3, 69, 10])
    out = np.zeros((4, X.shape[0]))
    eng.compute(idx, out)
    np.testing.assert_allclose(out, ref[idx], **tol)
    cols = np.arange(5, 60, 3)
    eng.set_columns(cols)
    out = np.zeros((4, X.shape[0]))
    eng.compute(idx, out)
    np.testing.assert_allclose(out[:, : cols.size], ref[np.ix_(idx, cols)], **tol)
    np.testing.assert_allclose(eng.diag(), np.diag(ref), **tol)
    # K(A, B) @ c between two sets of rows (prediction, held-out decision values), on all
    # threads and on the caller's
    A, B, c = X[:25], X[30:], np.linspace(-1.0, 2.0, X.shape[0] - 30)
    for par in (True, False):
        np.testing.assert_allclose(kernel_times(kern, A, B, c, parallel=par), ref[:25, 30:] @ c, **tol)
    assert kernel_times(kern, A[:0], B, c).shape == (0,)
    # the single rows of SMO
    kd = kernel_data(X, kern)
    row = np.zeros(X.shape[0])
    targets = np.arange(X.shape[0], dtype=np.int64)
    compute_row(*kd, 7, targets, targets.size, row)
    np.testing.assert_allclose(row, ref[7], **tol)
    if kd.sparse:  # the two ways to sparse dots (inverted index / row by row) give the same sums bit for bit
        for cost in (np.zeros_like(kd.rowcost), np.full_like(kd.rowcost, 1 << 40)):
            other = np.zeros(X.shape[0])
            compute_row(*kd._replace(rowcost=cost), 7, targets, targets.size, other)
            np.testing.assert_array_equal(other, row)
    diag = kernel_diag(kd.code, kd.kp, kd.X, kd.data, kd.indices, kd.indptr, kd.sqn, kd.sparse, X.shape[0])
    np.testing.assert_allclose(diag, np.diag(ref), **tol)
    # the class blocks of the one-vs-one route, between index sets
    bd = block_data(X, kern)
    assert bd.mode == mode
    ra, rb = np.array([4, 1, 30, 31]), np.arange(50, 70)
    np.testing.assert_allclose(kernel_block(bd, ra, rb), ref[np.ix_(ra, rb)], **tol)
    if mode == SPARSE:  # the other side as columns, built once per class
        cptr, crow, cval = columns_of(bd.data, bd.indices, bd.indptr, bd.n_features, rb)
        out = np.empty((ra.size, rb.size))
        block_by_columns(
            bd.data,
            bd.indices,
            bd.indptr,
            bd.code,
            bd.gamma,
            bd.coef0,
            bd.degree,
            bd.sq,
            ra,
            cptr,
            crow,
            cval,
            np.ascontiguousarray(bd.sq[rb]),
            out,
        )
        np.testing.assert_allclose(out, ref[np.ix_(ra, rb)], **tol)


@pytest.mark.parametrize("name,kw", KERNELS)
def test_kernel_times_of_large_thin_dense_blocks_takes_the_fused_loop(name, kw, monkeypatch):
    from maxmargin.kernels import engine

    A, B = data((1000, 5), seed=1), data((2100, 5), seed=2)
    c = np.linspace(-1.0, 1.0, 2100)
    kern = make_kernel(name, X=A, **kw)
    called = []
    times = engine.KernelRows.times
    monkeypatch.setattr(engine.KernelRows, "times", lambda self, *a, **k: called.append(1) or times(self, *a, **k))
    np.testing.assert_allclose(kernel_times(kern, A, B, c), kern(A, B) @ c, rtol=1e-10, atol=1e-9)
    assert called  # 2.1M kernel values of 5 features: the fused loop
    called.clear()
    np.testing.assert_allclose(kernel_times(kern, A, B, c, fused_dense=False), kern(A, B) @ c, rtol=1e-10, atol=1e-9)
    assert not called  # no fused loop for dense rows: blocks
    # a bound on the features (the predict paths on an AVX-512 host: engine.FUSED_DENSE_PREDICT, 8): 5 <= 8 fused,
    # 5 > 4 blocks
    np.testing.assert_allclose(kernel_times(kern, A, B, c, fused_dense=4), kern(A, B) @ c, rtol=1e-10, atol=1e-9)
    assert not called
    np.testing.assert_allclose(kernel_times(kern, A, B, c, fused_dense=8), kern(A, B) @ c, rtol=1e-10, atol=1e-9)
    assert called


@pytest.mark.parametrize("name,kw", KERNELS)
def test_times_on_chunks_of_dense_rows_match_the_formula(name, kw, monkeypatch):
    """``engine.times_blas`` (BLAS on chunks of rows, kernel values summed in cache): every kernel against the naive
    formula, chunk counts that do not divide the rows, blocks of B's rows that do not divide them, one row, one chunk,
    threads on and off, no columns, the blocks
    taken while BLAS's pool spins; and the
    callers that route dense rows there: ``kernel_times`` past its fused bound (odd widths padded to 8) and
    ``KernelRows.times`` past ``TIMES_AXPY_MAX_D`` (column subsets, targets in any order)."""
    from maxmargin.kernels import engine

    A, B = data((301, 13), seed=3), data((257, 13), seed=4)
    c = np.linspace(-1.0, 2.0, 257)
    kern = make_kernel(name, X=A, **kw)
    ref = naive(name, kw, A, B) @ c
    tol = {"rtol": 1e-10, "atol": 1e-9}
    sqa, sqb = (A * A).sum(1), (B * B).sum(1)
    g = (kern.code, *kern.params)
    monkeypatch.setattr(engine, "TIMES_BLAS_MIN_ROWS", 16)  # many chunks of these few rows
    monkeypatch.setattr(engine, "TIMES_BLAS_MAX_ROWS", 40)
    for parallel in (True, False):
        np.testing.assert_allclose(engine.times_blas(A, B, sqa, sqb, *g, c, parallel), ref, **tol)
    # B's rows in blocks (257 rows: 6 blocks of 43 and one of 42 at a bound of 50; one block of 1 row at a bound of
    # 1): the same sums, and bit for bit the same on one thread and on all
    monkeypatch.setattr(engine, "PARALLEL_MIN_WORK", 0)  # (Numba's threads on these few rows)
    for cols in (50, 1, 256):
        monkeypatch.setattr(engine, "TIMES_BLAS_COLUMNS", cols)
        par, ser = (engine.times_blas(A, B, sqa, sqb, *g, c, p) for p in (True, False))
        np.testing.assert_allclose(par, ref, **tol)
        np.testing.assert_array_equal(par, ser)
    monkeypatch.undo()
    monkeypatch.setattr(engine, "TIMES_BLAS_MIN_ROWS", 16)
    monkeypatch.setattr(engine, "TIMES_BLAS_MAX_ROWS", 40)
    # BLAS's pool still spinning after a product: kernel_times takes Kernel.mmv's blocks instead
    monkeypatch.setattr(engine, "_blas_pool_spinning", lambda: True)
    monkeypatch.setattr(engine, "TIMES_BLAS_CHECK_WORK", 0)
    np.testing.assert_allclose(kernel_times(kern, A, B, c, fused_dense=False, pool_when_busy=True), ref, **tol)
    monkeypatch.undo()
    monkeypatch.setattr(engine, "TIMES_BLAS_MIN_ROWS", 16)
    monkeypatch.setattr(engine, "TIMES_BLAS_MAX_ROWS", 40)
    np.testing.assert_allclose(engine.times_blas(A[:1], B, sqa[:1], sqb, *g, c), ref[:1], **tol)
    assert engine.times_blas(A[:0], B, sqa[:0], sqb, *g, c).shape == (0,)
    np.testing.assert_array_equal(engine.times_blas(A, B[:0], sqa, sqb[:0], *g, c[:0]), np.zeros(301))
    monkeypatch.undo()
    called = []
    real = engine.times_blas
    monkeypatch.setattr(engine, "times_blas", lambda *a, **k: called.append(1) or real(*a, **k))
    np.testing.assert_allclose(kernel_times(kern, A, B, c, fused_dense=False), ref, **tol)
    assert called
    called.clear()
    X = np.vstack([A, B])
    kr = KernelRows(X, kern)
    monkeypatch.setattr(engine, "TIMES_AXPY_MAX_D", 8)  # 13 features: past the fused loop on any host
    targets = np.arange(300, -1, -1)
    got = kr.times(np.arange(301, 301 + 257), c, targets)
    np.testing.assert_allclose(got, ref[targets], **tol)
    assert called
    kr.set_columns(np.arange(0, 558, 2))  # (the columns do not change what times sums)
    np.testing.assert_allclose(kr.times(np.arange(301, 558), c, np.arange(301)), ref, **tol)


def test_a_large_prediction_waits_for_blas_to_stop_spinning_before_it_gives_up_the_chunks(monkeypatch):
    """``kernel_times(pool_when_busy=True)`` where BLAS's pool still spins: a small job takes ``Kernel.mmv``'s blocks
    at once; a large one (:data:`TIMES_BLAS_WAIT_WORK`) waits for the other threads to stop, up to
    :data:`TIMES_BLAS_WAIT_S`, and takes the chunks where they did (back-to-back predictions of a large model no
    longer keep the blocks for good), the blocks where they did not."""
    from maxmargin.kernels import engine

    A, B = data((60, 13), seed=5), data((40, 13), seed=6)
    c = np.linspace(-1.0, 1.0, 40)
    kern = make_kernel("rbf", X=A, gamma=0.1)
    ref = naive("rbf", {"gamma": 0.1}, A, B) @ c
    route = []
    real_blas, real_mmv = engine.times_blas, type(kern).mmv
    monkeypatch.setattr(engine, "times_blas", lambda *a, **k: route.append("chunks") or real_blas(*a, **k))
    monkeypatch.setattr(type(kern), "mmv", lambda self, *a, **k: route.append("blocks") or real_mmv(self, *a, **k))
    monkeypatch.setattr(engine, "TIMES_BLAS_CHECK_WORK", 0)
    monkeypatch.setattr(engine, "_blas_pool_spinning", lambda: True)
    polls = []

    def running():  # spinning for three looks, then idle
        polls.append(1)
        return len(polls) <= 3

    monkeypatch.setattr(engine, "others_running", running)
    for wait_work, expect, looks in ((10**12, "blocks", 0), (0, "chunks", 4)):
        route.clear(), polls.clear()
        monkeypatch.setattr(engine, "TIMES_BLAS_WAIT_WORK", wait_work)
        np.testing.assert_allclose(
            kernel_times(kern, A, B, c, fused_dense=False, pool_when_busy=True), ref, rtol=1e-10, atol=1e-9
        )
        assert route == [expect] and len(polls) == looks
    # a thread that never stops: the blocks after the wait, which is bounded
    import time

    monkeypatch.setattr(engine, "others_running", lambda: True)
    monkeypatch.setattr(engine, "TIMES_BLAS_WAIT_S", 0.02)
    route.clear()
    t = time.perf_counter()
    np.testing.assert_allclose(
        kernel_times(kern, A, B, c, fused_dense=False, pool_when_busy=True), ref, rtol=1e-10, atol=1e-9
    )
    assert route == ["blocks"] and 0.02 <= time.perf_counter() - t < 5.0


def test_dot_prefix_sums_the_first_m_products_in_any_order_to_rounding():
    """The reassociated sum of the fused gradient-rebuild loops: every prefix length (the vector body, the
    remainder, none at all) against an exactly rounded sum; entries past ``m`` are never read into it."""
    import math

    from maxmargin.kernels.formulas import dot_prefix

    rng = np.random.default_rng(3)
    a, b = rng.normal(size=70), rng.normal(size=70)
    b[60:] = np.nan  # past every prefix below: a read of them would show
    for m in range(0, 61):
        exact = math.fsum(float(x) * float(y) for x, y in zip(a[:m], b[:m]))
        assert abs(dot_prefix(a, b, m) - exact) <= 1e-13 * max(1.0, float(np.abs(a[:m] * b[:m]).sum()))


@pytest.mark.parametrize("name,kw", KERNELS + [("rbf", {"gamma": 30.0})])
@pytest.mark.parametrize("shape", [(300, 400), (300, 20_000)], ids=["sparse path", "wide path"])
def test_kernel_times_over_the_touched_columns_only_matches_the_formula(name, kw, shape, monkeypatch):
    """Very sparse rows: K(A, B) @ c from the columns each row shares a feature with, the rest from f(0) (RBF:
    exp(-g|a|^2) exp(-g|b|^2)), forced on and off, against the naive formula; rows with no non-zero, negative
    values and (gamma = 30) kernel values that underflow included."""
    from maxmargin.kernels import engine

    X = data(shape, density=8.0 / shape[1], seed=4)
    X = sp.vstack([X, sp.csr_matrix((5, shape[1]))], format="csr")  # empty rows: they touch nothing
    kern = make_kernel(name, **kw)
    A, B = X[:150], X[150:]
    c = np.random.default_rng(1).normal(size=B.shape[0])
    ref = naive(name, kw, A, B) @ c
    taken = []
    real = engine.KernelRows._touched
    monkeypatch.setattr(engine.KernelRows, "_touched", lambda self, *a: taken.append(1) or real(self, *a))
    for fraction in (0.0, 1.0):
        monkeypatch.setattr(engine, "TOUCHED_MAX_FRACTION", fraction)
        for par in (True, False):
            got = kernel_times(kern, A, B, c, parallel=par)
            np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12 * np.abs(c).sum())
    assert len(taken) == 2  # fraction 1.0 takes it on both thread settings, fraction 0.0 never
    # the default choice on such rows: the touched columns
    monkeypatch.setattr(engine, "TOUCHED_MAX_FRACTION", 0.25)
    kernel_times(kern, A, B, c)
    assert len(taken) == 3
    # kernel rows of such data (wide path): f(0) / the RBF product first, the touched columns by formula; and the
    # same rows where the touched route is off
    if engine.decide(X, kern) == "wide":
        full = naive(name, kw, X, X)
        idx = np.array([0, 7, 151, X.shape[0] - 1])
        for fraction in (0.25, 0.0):
            monkeypatch.setattr(engine, "TOUCHED_MAX_FRACTION", fraction)
            kr = KernelRows(X, kern)
            out = np.full((4, X.shape[0]), np.nan)
            kr.compute(idx, out)
            np.testing.assert_allclose(out, full[idx], rtol=1e-10, atol=1e-300)
            cols = np.arange(3, X.shape[0], 2)
            kr.set_columns(cols)
            kr.compute(idx, out)
            np.testing.assert_allclose(out[:, : cols.size], full[np.ix_(idx, cols)], rtol=1e-10, atol=1e-300)


def test_kernel_times_of_a_callable_kernel_calls_it():
    X = data((40, 6))
    kern = make_kernel(lambda A, B: (A @ B.T + 1.0) ** 2)
    c = np.arange(15.0)
    np.testing.assert_allclose(kernel_times(kern, X[:10], X[25:], c), ((X[:10] @ X[25:].T + 1.0) ** 2) @ c, rtol=1e-12)


def test_gram_blocks_and_rows_read_the_matrix():
    X = data((30, 4))
    G = naive("rbf", {"gamma": 0.5}, X, X)
    kern = make_kernel("precomputed")
    bd = block_data(G, kern)
    assert bd.mode == GRAM
    ra, rb = np.array([3, 0]), np.array([5, 6, 29])
    np.testing.assert_array_equal(kernel_block(bd, ra, rb), G[np.ix_(ra, rb)])
    assert decide(G, kern) == "gram"


def _naive_transform(code, D, sa, sb, params):
    """Kernel values from dot products ``D`` (squared norms ``sa``, ``sb`` of the two sides) by the formulas."""
    g, c0, deg = params
    return {
        0: D,
        1: (g * D + c0) ** deg,
        2: np.exp(-g * np.maximum(sa[:, None] + sb[None, :] - 2 * D, 0)),
        3: np.tanh(g * D + c0),
    }[code]


@pytest.mark.parametrize("code", [0, 1, 2, 3])
def test_transform_is_the_formula(code):
    rng = np.random.default_rng(1)
    D = rng.normal(size=(3, 50))
    sa, sb = rng.random(3) * 5 + 3, rng.random(50) * 5 + 3
    params = (0.7, 0.25, 3.0)
    got = formulas.transform_rows(D.copy(), code, params, sa, sb)
    np.testing.assert_allclose(got, _naive_transform(code, D, sa, sb, params), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("code", [0, 1, 2, 3])
@pytest.mark.parametrize("shape", [(1, 1), (7, 1), (301, 26), (3, 2047), (2, 2049), (130, 40), (1, 4096), (3, 5000)])
def test_transform_in_chunks_of_rows_is_the_formula_on_any_shape(code, shape, monkeypatch):
    """Chunks of whole rows (RBF's exponential over a chunk at once): one-column blocks, chunks that end
    inside the block, rows longer than a chunk (in pieces of a chunk: two whole, a whole one and a remainder)."""
    rng = np.random.default_rng(2)
    D = rng.normal(size=shape)
    sa, sb = rng.random(shape[0]) * 5 + 3, rng.random(shape[1]) * 5 + 3
    params = (0.7, 0.25, 3.0)
    expect = formulas.transform_rows(D[:1].copy(), code, params, sa[:1], sb)  # one row: one chunk
    naive = _naive_transform(code, D, sa, sb, params)
    for parallel in (False, True):
        monkeypatch.setattr(formulas, "PARALLEL_MIN_ENTRIES", 0 if parallel else formulas.PARALLEL_MIN_ENTRIES)
        got = formulas.transform_rows(D.copy(), code, params, sa, sb, parallel=parallel)
        np.testing.assert_allclose(got, naive, rtol=1e-13, atol=1e-15)
        np.testing.assert_array_equal(got[:1], expect)


@pytest.mark.parametrize("d", [1, 3, 4, 5, 8, 32])
@pytest.mark.parametrize("m", [26, 200, 600])
def test_thin_dense_products_take_either_route_to_the_same_values(d, m):
    """The compiled loop (1-4 features against many columns) or BLAS: the same products."""
    from maxmargin.kernels import objects

    rng = np.random.default_rng(d * 1000 + m)
    X, Z = rng.normal(size=(300, d)), rng.normal(size=(m, d))
    np.testing.assert_allclose(objects._dot(X, Z), X @ Z.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(objects.small_dot(X, Z), X @ Z.T, rtol=1e-12, atol=1e-12)


def test_thin_dense_products_go_to_the_compiled_loop_only_where_it_wins(monkeypatch):
    from maxmargin.kernels import objects

    called = []
    real = objects.small_dot
    monkeypatch.setattr(objects, "small_dot", lambda X, Z: called.append((X.shape[1], Z.shape[0])) or real(X, Z))
    rng = np.random.default_rng(0)
    for d, m in [(1, 200), (3, 600), (4, 512), (3, 300), (5, 600), (8, 2000), (2, 26)]:
        objects._dot(rng.normal(size=(300, d)), rng.normal(size=(m, d)))
    assert called == [(1, 200), (3, 600), (4, 512)]


def test_unknown_kernel_codes_are_errors_not_another_formula():
    with pytest.raises(ValueError, match="unknown kernel code 7"):
        formulas.transform_rows(np.ones((2, 2)), 7, (1.0, 0.0, 3.0))
    with pytest.raises(ValueError, match="unknown kernel code"):
        formulas.transform(np.ones(3), 9, 1.0, 0.0, 3.0, 0.0, np.zeros(3), np.empty(3))  # inside compiled code
    with pytest.raises(ValueError, match="unknown kernel code"):
        formulas.check_code(4)  # precomputed has no formula


def test_exp_is_within_one_ulp():
    x = -np.concatenate([np.linspace(0, 50, 10_001), [0.0, 1e-300, 700.0, 707.9]])
    o = x.copy()
    formulas.exp_nonpos(o, np.empty_like(o))
    ref = np.exp(x)
    assert np.all(np.abs(o - ref) <= np.spacing(ref))


def test_tanh_is_within_three_ulp_and_odd():
    rng = np.random.default_rng(1)
    x = np.concatenate(
        [rng.normal(size=4000) * s for s in (1e-300, 1e-12, 1e-4, 0.1, 0.35, 0.6, 1.0, 3.0, 12.0, 30.0, 1e6)]
        + [[0.0, 19.0, 19.1, 354.0, 355.0, 1e300, np.inf, np.log(2) / 4, np.log(2) / 2, np.log(2)]]
    )
    x = np.concatenate([x, -x])
    o = x.copy()
    formulas.tanh_vec(o, np.empty_like(o))
    ref = np.tanh(x)
    assert np.all(np.abs(o - ref) <= 3 * np.spacing(np.abs(ref)) + 1e-320)
    np.testing.assert_array_equal(o[: x.size // 2], -o[x.size // 2 :])
    assert np.all(np.abs(o[np.abs(x) >= 19.1]) == 1.0)


# ----------------------------------------------------------- dense against sparse
def _two_views(n=120, d=12, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[rng.random((n, d)) < 0.6] = 0.0
    return X, sp.csr_matrix(X)


@pytest.mark.parametrize("kernel", ["linear", "rbf", "poly"])
@pytest.mark.parametrize("n_classes", [2, 4])
def test_svc_dense_and_sparse_models_are_equal(kernel, n_classes):
    X, Xs = _two_views()
    y = np.arange(X.shape[0]) * 7919 % n_classes
    y[X[:, 0] > 0.5] = 0
    dense = SVC(kernel=kernel, C=2.0, tol=1e-8, gamma=0.1).fit(X, y)
    sparse = SVC(kernel=kernel, C=2.0, tol=1e-8, gamma=0.1).fit(Xs, y)
    np.testing.assert_array_equal(dense.support_, sparse.support_)
    np.testing.assert_allclose(
        dense.dual_coef_,
        sparse.dual_coef_.toarray() if sp.issparse(sparse.dual_coef_) else sparse.dual_coef_,
        rtol=1e-6,
        atol=1e-7,
    )
    np.testing.assert_allclose(dense.intercept_, sparse.intercept_, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(dense.decision_function(X), sparse.decision_function(Xs), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("make", [lambda: SVR(C=3.0, epsilon=0.05, tol=1e-8), lambda: OneClassSVM(nu=0.3, tol=1e-8)])
def test_regression_and_one_class_dense_and_sparse_agree(make):
    X, Xs = _two_views()
    target = X[:, 1] - X[:, 2]
    fit = (lambda m, A: m.fit(A, target)) if isinstance(make(), SVR) else (lambda m, A: m.fit(A))
    dense, sparse = fit(make(), X), fit(make(), Xs)
    np.testing.assert_array_equal(dense.support_, sparse.support_)
    np.testing.assert_allclose(dense.predict(X), sparse.predict(Xs), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", ["rbf", "poly", "sigmoid", "linear"])
@pytest.mark.parametrize("d", [1, 3, 20, 32])
def test_narrow_blocks_of_few_columns_equal_the_columns_of_a_wide_one(name, d):
    """A narrow block of fewer than NARROW_VIEWS_MIN_COLS columns is formed without row views, in one buffer: each
    column the same value, bit for bit, as in a block of many columns (formed in place), and scikit-learn's."""
    from sklearn.metrics.pairwise import pairwise_kernels

    from maxmargin.kernels.blocks import NARROW, NARROW_VIEWS_MIN_COLS, block, block_data

    rng = np.random.default_rng(d)
    X = rng.normal(size=(90, d))
    kern = make_kernel(name, gamma=0.3, coef0=0.5, degree=3)
    bd = block_data(X, kern)
    assert bd.mode == NARROW
    ra = rng.choice(90, 7, replace=False)
    rb = rng.choice(90, NARROW_VIEWS_MIN_COLS + 8, replace=False)
    wide = np.empty((7, rb.size))
    block(tuple(bd), ra, rb, wide)
    for m in (1, 5, NARROW_VIEWS_MIN_COLS - 1):
        few = np.full((7, m), np.nan)
        block(tuple(bd), ra, rb[:m], few)
        np.testing.assert_array_equal(few, wide[:, :m])
    keys = {"rbf": ["gamma"], "poly": ["gamma", "coef0", "degree"], "sigmoid": ["gamma", "coef0"], "linear": []}[name]
    params = {k: {"gamma": 0.3, "coef0": 0.5, "degree": 3}[k] for k in keys}
    ref = pairwise_kernels(X[ra], X[rb], metric=name if name != "poly" else "polynomial", **params)
    np.testing.assert_allclose(wide, ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name,kw", KERNELS)
def test_wide_rows_with_frequent_features_apart_match_the_formula(name, kw, monkeypatch):
    """Wide sparse rows whose frequent features (in most rows, as text's common words) go to a dense product and
    the rest to the inverted index: kernel rows against every column and against a subset, into scattered rows of
    the buffer, on and off threads, against the naive formula; and the split is taken."""
    from maxmargin.kernels import engine

    rng = np.random.default_rng(8)
    n, d = 120, 5000
    rare = data((n, d), density=0.002, seed=9).tolil()
    common = rng.random((n, 24)) < 0.6  # 24 frequent features, each in ~60% of the rows
    for i, j in zip(*np.nonzero(common)):
        rare[i, 10 * j] = rng.normal()
    rare[3] = 0.0  # an empty row
    X = sp.csr_matrix(rare)
    X.eliminate_zeros()
    kern = make_kernel(name, **kw, X=X) if name == "rbf" else make_kernel(name, **kw)
    kr = KernelRows(X, kern)
    assert kr.path == "wide"
    monkeypatch.setattr(engine, "HEAVY_MIN_ROWS", 4)
    monkeypatch.setattr(engine, "HEAVY_ROW_BLOCK", 3)  # blocks that do not divide the rows
    full = naive(name, kw, X, X)
    idx = np.array([0, 3, 5, 8, 13, 21, 34, 55, 89, 119])
    dest = np.arange(idx.size)[::-1] * 2
    for cols in (None, np.arange(1, n, 3)):
        kr.set_columns(cols)
        want = full[idx] if cols is None else full[np.ix_(idx, cols)]
        for par in (True, False):
            out = np.full((2 * idx.size, n + 2), np.nan)
            kr.compute(idx, out, dest=dest, parallel=par)
            np.testing.assert_allclose(out[dest, : want.shape[1]], want, rtol=1e-10, atol=1e-12)
        slot, Hc, _ = kr._heavy_split()
        assert (slot >= 0).sum() >= engine.HEAVY_MIN_FEATURES and Hc.shape[0] == want.shape[1]
    # sums K(A, B) @ c the same way (predict, gradient rebuilds), in blocks of targets that do not divide them
    monkeypatch.setattr(engine, "TIMES_SPLIT_BLOCK", 7)
    taken = []
    real = engine.KernelRows._times_split
    monkeypatch.setattr(engine.KernelRows, "_times_split", lambda self, *a: taken.append(1) or real(self, *a))
    c = rng.normal(size=70)
    for par in (True, False):
        got = kernel_times(kern, X[70:], X[:70], c, parallel=par)
        np.testing.assert_allclose(got, full[70:, :70] @ c, rtol=1e-10, atol=1e-12 * np.abs(c).sum())
    assert len(taken) == 2


@pytest.mark.parametrize("name,kw", KERNELS)
def test_whole_gram_of_sparse_rows_is_the_formula(name, kw):
    """SMO's whole kernel matrix of sparse rows (text-like: frequent features in most rows) from the kernel-row
    engine equals the naive formula, and SVC on those rows reaches the batched solver's objective through it."""
    from maxmargin.kernels import rowcache

    rng = np.random.default_rng(11)
    n = 150
    X = data((n, 3000), density=0.003, seed=12).tolil()
    for j in range(30):
        rows = np.flatnonzero(rng.random(n) < 0.5)
        X[rows, 7 * j] = rng.normal(size=rows.size)
    X = sp.csr_matrix(X)
    kern = make_kernel(name, **kw)
    assert rowcache.gram_pays(X, kern, n, 200.0)
    cache = rowcache.whole_gram_cache(X, kern)
    np.testing.assert_allclose(cache.rows[:n, :n], naive(name, kw, X, X), rtol=1e-10, atol=1e-12)
    if name == "rbf":
        y = np.where(X[:, :50].sum(axis=1).A.ravel() + 0.3 * rng.normal(size=n) > 0, 1, -1)
        smo_fit = SVC(kernel=name, **kw, solver="smo", tol=1e-6).fit(X, y)
        batched_fit = SVC(kernel=name, **kw, solver="batched", tol=1e-6).fit(X, y)
        assert smo_fit.objective_ == pytest.approx(batched_fit.objective_, rel=1e-6)


@pytest.mark.skipif(not __import__("os").path.isdir("/proc/self/task"), reason="reads Linux's /proc")
def test_others_running_sees_a_thread_at_work_and_not_idle_ones():
    """``_threads.others_running`` (times_blas asks it before starting Numba's threads): a thread of this process
    in a long loop that holds no lock is seen; once it ends, idle threads (Numba's and BLAS's pools asleep, this
    test's finished thread) are not."""
    import threading
    import time

    from numba import njit

    from maxmargin._threads import others_running

    @njit(nogil=True)
    def spin(seconds_of_work):
        s = 0.0
        for i in range(int(seconds_of_work * 2e8)):
            s += (i % 7) * 1e-9
        return s

    spin(1e-6)
    t = threading.Thread(target=spin, args=(0.6,))
    t.start()
    time.sleep(0.05)
    seen = any(others_running() for _ in range(20))
    t.join()
    assert seen
    time.sleep(0.3)  # (pools started by earlier tests stop spinning: Numba's in ~1 ms, OpenBLAS's in ~0.1 s)
    assert not all(others_running() for _ in range(20))
