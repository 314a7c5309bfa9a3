"""One-vs-one pairs solved on several threads, and the compiled parallel/serial twins."""

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from maxmargin import SVC, NuSVC
from maxmargin._jit import parallel_and_serial
from maxmargin.svm import THREADS_MIN_ROWS, BaseSVMClassifier


@pytest.fixture
def four_classes():
    X, y = make_blobs(400, centers=4, n_features=5, cluster_std=2.5, random_state=0)
    return X, y


def _spy(monkeypatch):
    # the compiled all-pairs route (tests/test_ovo.py) off: these tests are about the threaded one
    monkeypatch.setattr(
        BaseSVMClassifier, "_compiled_pairs", lambda self, X, kern, members, warm: np.zeros(len(members), bool)
    )
    calls = []
    original = BaseSVMClassifier._fit_pairs_in_threads

    def spy(self, *args):
        calls.append(args[-1])
        return original(self, *args)

    monkeypatch.setattr(BaseSVMClassifier, "_fit_pairs_in_threads", spy)
    return calls


@pytest.mark.parametrize("make", [lambda: SVC(C=3.0, tol=1e-8), lambda: NuSVC(nu=0.3, tol=1e-8)])
def test_threads_give_the_sequential_model(monkeypatch, four_classes, make):
    X, y = four_classes
    calls = _spy(monkeypatch)
    threaded = make().fit(X, y)
    if BaseSVMClassifier._pair_workers.__get__(threaded)([(np.arange(THREADS_MIN_ROWS), None)] * 2, None) < 2:
        pytest.skip("one core: pairs are never threaded")
    assert calls, "the threaded path was not taken"
    monkeypatch.setattr(BaseSVMClassifier, "_pair_workers", lambda self, members, warm, X=None: 1)
    seq = make().fit(X, y)
    np.testing.assert_array_equal(threaded.support_, seq.support_)
    np.testing.assert_allclose(threaded.dual_coef_, seq.dual_coef_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(threaded.intercept_, seq.intercept_, rtol=1e-6, atol=1e-8)
    np.testing.assert_array_equal(threaded.predict(X), seq.predict(X))
    np.testing.assert_allclose(threaded.objective_, seq.objective_, rtol=1e-9)


def test_what_keeps_pairs_sequential(monkeypatch, four_classes):
    X, y = four_classes
    calls = _spy(monkeypatch)
    SVC(callback=lambda info: None).fit(X, y)  # callbacks run in the caller's thread
    SVC(solver="qp").fit(X[:120], y[:120])  # only SMO pairs are threaded
    SVC(kernel="linear", solver="primal-qp").fit(X[:120], y[:120])
    SVC(warm_start=True).fit(X, y)  # the warm-start row pool is per thread
    NuSVC(nu=0.3).fit(X[:200], y[:200])  # pairs of too few rows in all (THREADS_MIN_ROWS) for a thread pool
    assert calls == []
    SVC().fit(X, y)
    assert len(calls) == 1


@pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaPerformanceWarning")
def test_parallel_and_serial_twins_have_their_own_cache_entries():
    def body(x):
        s = 0.0
        for i in range(x.shape[0]):
            s += x[i]
        return s

    par, ser = parallel_and_serial(body)
    assert par.py_func.__qualname__ != ser.py_func.__qualname__
    assert par.targetoptions.get("parallel") and not ser.targetoptions.get("parallel")
    x = np.arange(10.0)
    assert par(x) == ser(x) == 45.0


def _count_predicted_rows(monkeypatch):
    """A list that gets the number of rows of each prediction from the support vectors during a fit."""
    from maxmargin.svm import BaseSVMClassifier

    predicted = []
    chunks = BaseSVMClassifier._by_row_chunks

    def counted(self, Z, reduce):
        predicted.append(Z.shape[0])
        return chunks(self, Z, reduce)

    monkeypatch.setattr(BaseSVMClassifier, "_by_row_chunks", counted)
    return predicted


@pytest.mark.parametrize("kw", [{}, {"break_ties": True}, {"kernel": "poly", "degree": 2}])
def test_multiclass_train_error_is_the_models_own_error(four_classes, kw, monkeypatch):
    """``train_error_`` is the share of training rows ``predict`` gets wrong, with the voting shortcut: only the rows
    that lose a pair of their own class are predicted from the support vectors (break_ties as well: a class that
    wins all its pairs is the arg-max of the one-vs-rest scores too)."""
    X, y = four_classes
    w = np.ones(y.shape[0])
    w[::17] = 0.0  # rows left out of every pair: their votes come from the support vectors
    predicted = _count_predicted_rows(monkeypatch)
    m = SVC(C=0.5, **kw).fit(X, y, sample_weight=w)
    assert 0 < sum(predicted) < X.shape[0] / 2  # the shortcut
    assert m.train_error_ == pytest.approx(np.mean(m.predict(X) != y), abs=1e-12)
    assert m.train_error_ > 0  # overlapping blobs: the shortcut does not just return 0


@pytest.mark.parametrize("kernel", ["rbf", "precomputed"])
def test_binary_train_error_predicts_only_the_rows_left_out(four_classes, kernel, monkeypatch):
    """Two classes: the training decision values come from the solver's gradient; only the rows of weight 0 (left
    out of the problem) are predicted from the support vectors, and ``train_error_`` is the model's own error."""
    from maxmargin.kernels import make_kernel

    X, y = four_classes
    y = (y >= 2).astype(int)
    if kernel == "precomputed":
        X = make_kernel("rbf", gamma=0.5)(X, X)
    w = np.ones(y.shape[0])
    w[::7] = 0.0
    predicted = _count_predicted_rows(monkeypatch)
    m = SVC(C=0.5, kernel=kernel).fit(X, y, sample_weight=w)
    assert predicted == [int(np.sum(w == 0))]
    monkeypatch.undo()
    assert m.train_error_ == pytest.approx(np.mean(m.predict(X) != y), abs=1e-12)
    assert m.train_error_ > 0


def _interrupt_after(seconds):
    """Ctrl-C (SIGINT to this process) after ``seconds``, as a user pressing it mid-fit."""
    import signal
    import threading

    t = threading.Timer(seconds, lambda: signal.raise_signal(signal.SIGINT))
    t.start()
    return t


def _slow_classes(n=9000, k=6):
    X, y = make_blobs(n, centers=k, n_features=8, cluster_std=7.0, random_state=2)
    return X, y


def test_ctrl_c_stops_threaded_pairs_between_chunks(monkeypatch):
    X, y = _slow_classes()
    calls = _spy(monkeypatch)
    done = []
    original = SVC._fit_pair

    def counting(self, *args, **kw):
        fit = original(self, *args, **kw)
        done.append(fit.status)
        return fit

    monkeypatch.setattr(SVC, "_fit_pair", counting)
    if BaseSVMClassifier._pair_workers.__get__(SVC())([(np.arange(THREADS_MIN_ROWS), None)] * 2, None) < 2:
        pytest.skip("one core: pairs are never threaded")
    timer = _interrupt_after(0.3)
    with pytest.raises(KeyboardInterrupt):
        SVC(C=100.0, tol=1e-6).fit(X, y)
    timer.cancel()
    assert calls, "the threaded path was not taken"
    # without the stop, every one of the 15 pairs would have run to the end
    assert len([s for s in done if s == "converged"]) < 15
    assert "callback" in done  # the running pairs were stopped, not waited for


def test_ctrl_c_stops_the_compiled_pairs_between_batches(monkeypatch):
    from maxmargin.solvers import ovo

    X, y = _slow_classes(n=12000, k=12)
    batches = []
    original = ovo._solve_pairs

    def counting(p0, p1, *args):
        original(p0, p1, *args)
        batches.append(p1 - p0)

    monkeypatch.setattr(ovo, "_solve_pairs", counting)
    monkeypatch.setattr(ovo, "BATCH_ENTRIES", 1)  # one pair a batch
    timer = _interrupt_after(0.3)
    with pytest.raises(KeyboardInterrupt):
        SVC(C=100.0, tol=1e-6).fit(X, y)
    timer.cancel()
    assert 0 < sum(batches) < 66  # stopped between batches: not every one of the 66 pairs ran
