"""Scratch blocks kept between fits (maxmargin._scratch): never handed out while in use, released when idle, and the
linear fold's arrays taken from them and given back when the fit ends (no reference cycle holding them)."""

import gc
import time

import numpy as np
import pytest
import scipy.sparse as sp

import maxmargin
from maxmargin import _scratch

N = 300_000  # float64 items: 2.4 MB, above MIN_BYTES


def _address(a):
    return a.__array_interface__["data"][0]


@pytest.fixture(autouse=True)
def _own_pool(monkeypatch):
    # each test its own list of blocks (blocks another test module's objects still use do not count here)
    monkeypatch.setattr(_scratch, "_blocks", [])


def test_a_block_is_reused_only_once_nothing_made_from_it_lives():
    a = _scratch.empty(N, np.float64)
    first = _address(a)
    view = a[10:].reshape(-1, 10)  # a view of a view: its base is still the block's owner
    del a
    b = _scratch.empty(N, np.float64)
    assert _address(b) != first  # the block is in use through the view
    assert not np.shares_memory(b, view)
    view[:] = 1.0
    b[:] = 2.0
    assert np.all(view == 1.0)
    second = _address(b)
    del view, b
    c = _scratch.empty(N, np.int64)  # (any dtype of a size that fits)
    d = _scratch.empty(N, np.float64)
    assert {_address(c), _address(d)} == {first, second}  # both blocks handed out again, no third made
    assert _scratch.kept_bytes() == 2 * N * 8


def test_small_requests_and_requests_past_the_cap_get_plain_memory(monkeypatch):
    small = _scratch.empty(10, np.float64)
    assert small.base is None and _scratch.kept_bytes() == 0
    monkeypatch.setattr(_scratch, "KEEP_BYTES", 3 * N * 8 // 2)
    a = _scratch.empty(N, np.float64)
    b = _scratch.empty(N, np.float64)  # a is in use, a second block would pass the cap
    assert a.base is not None and b.base is None
    assert _scratch.kept_bytes() == N * 8
    z = _scratch.zeros(N, np.int32)
    f = _scratch.full(N, -1, np.int32)
    assert np.all(z == 0) and np.all(f == -1) and not np.shares_memory(z, f)


def test_release_frees_idle_blocks_only():
    a = _scratch.empty(N, np.float64)
    b = _scratch.empty(N, np.float64)
    del b
    assert _scratch.release() == N * 8
    assert _scratch.kept_bytes() == N * 8  # a's block stays: a lives
    del a
    assert _scratch.release() == N * 8 and _scratch.kept_bytes() == 0


def test_idle_blocks_go_after_keep_seconds(monkeypatch):
    # let a reaper left by another test end first (it ends once no block is kept)
    if _scratch._reaper[0] is not None:
        _scratch._reaper[0].join(timeout=2 * _scratch.KEEP_SECONDS)
    monkeypatch.setattr(_scratch, "KEEP_SECONDS", 0.2)
    a = _scratch.empty(N, np.float64)
    time.sleep(0.6)
    assert _scratch.kept_bytes() == N * 8  # in use: kept however long
    del a
    deadline = time.monotonic() + 5.0
    while _scratch.kept_bytes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _scratch.kept_bytes() == 0
    deadline = time.monotonic() + 5.0
    while _scratch._reaper[0] is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _scratch._reaper[0] is None  # the thread ends with the last block


def _folding_rows(seed=0, n=4000, per_row=60, d=1_000_000):
    """Rows of distinct random columns over many features: most features in one row only (the fold runs), and
    enough stored values for its arrays to come from kept blocks."""
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.choice(d // 4, size=(n, per_row)) * 4 + rng.integers(0, 4, size=(n, 1)), axis=1)
    idx[:, ::3] = rng.integers(0, 2_000, size=(n, (per_row + 2) // 3)) * 4  # shared columns, so some stay
    idx = np.sort(idx, axis=1)
    X = sp.csr_matrix((rng.normal(size=n * per_row), idx.ravel(), np.arange(0, n * per_row + 1, per_row)), (n, d))
    X.sum_duplicates()
    y = np.where(np.asarray(X[:, : d // 2].sum(axis=1)).ravel() > 0, 1, -1)
    return X, y


def test_the_fold_takes_kept_blocks_and_gives_them_back_when_the_fit_ends(monkeypatch):
    from maxmargin.solvers import _linear_common as lc

    X, y = _folding_rows()
    folds = []
    original = lc.fold_singletons

    def watched(ld):
        f = original(ld)
        folds.append(f is not None)
        return f

    monkeypatch.setattr(lc, "fold_singletons", watched)
    import maxmargin.solvers.dual_cd as dual_cd

    monkeypatch.setattr(dual_cd, "fold_singletons", watched)
    gc.collect()
    gc.disable()  # what the fit leaves must be freed by reference counts alone
    try:
        first = maxmargin.LinearSVC(C=1.0, tol=1e-3, random_state=0).fit(X, y)
        kept = _scratch.kept_bytes()
        assert folds == [True] and kept > 0
        second = maxmargin.LinearSVC(C=1.0, tol=1e-3, random_state=0).fit(X, y)
        assert _scratch.kept_bytes() == kept  # the same blocks again: nothing of the first fit held them
        assert _scratch.release() == kept
    finally:
        gc.enable()
    monkeypatch.setattr(_scratch, "_ENABLED", False)
    plain = maxmargin.LinearSVC(C=1.0, tol=1e-3, random_state=0).fit(X, y)
    assert _scratch.kept_bytes() == 0
    np.testing.assert_array_equal(first.coef_, plain.coef_)
    np.testing.assert_array_equal(second.coef_, plain.coef_)
    assert first.intercept_ == plain.intercept_


def test_release_scratch_is_public():
    a = _scratch.empty(N, np.float64)
    del a
    assert maxmargin.release_scratch() == N * 8 and _scratch.kept_bytes() == 0
    assert "release_scratch" in maxmargin.__all__
