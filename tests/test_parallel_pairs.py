"""One-vs-one pairs solved on several threads, and the compiled parallel/serial twins."""
import numpy as np
import pytest
from sklearn.datasets import make_blobs

from maxmargin import SVC, NuSVC
from maxmargin._jit import parallel_and_serial
from maxmargin.svm import BaseSVMClassifier


@pytest.fixture
def four_classes():
    X, y = make_blobs(400, centers=4, n_features=5, cluster_std=2.5, random_state=0)
    return X, y


def _spy(monkeypatch):
    # the compiled all-pairs route (tests/test_ovo.py) off: these tests are about the threaded one
    monkeypatch.setattr(BaseSVMClassifier, "_compiled_pairs", lambda self, X, kern, members, warm: np.zeros(len(members), bool))
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
    if BaseSVMClassifier._pair_workers.__get__(threaded)([(np.arange(3), None)] * 2, None) < 2:
        pytest.skip("one core: pairs are never threaded")
    assert calls, "the threaded path was not taken"
    monkeypatch.setattr(BaseSVMClassifier, "_pair_workers", lambda self, members, warm: 1)
    seq = make().fit(X, y)
    np.testing.assert_array_equal(threaded.support_, seq.support_)
    np.testing.assert_allclose(threaded.dual_coef_, seq.dual_coef_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(threaded.intercept_, seq.intercept_, rtol=1e-6, atol=1e-8)
    np.testing.assert_array_equal(threaded.predict(X), seq.predict(X))
    np.testing.assert_allclose(threaded.objective_, seq.objective_, rtol=1e-9)


def test_what_keeps_pairs_sequential(monkeypatch, four_classes):
    X, y = four_classes
    calls = _spy(monkeypatch)
    SVC(callback=lambda info: None).fit(X, y)           # callbacks run in the caller's thread
    SVC(solver="qp").fit(X[:120], y[:120])               # only SMO pairs are threaded
    SVC(kernel="linear", solver="primal-qp").fit(X[:120], y[:120])
    SVC(warm_start=True).fit(X, y)                       # the warm-start row pool is per thread
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


@pytest.mark.parametrize("kw", [{}, {"break_ties": True}, {"kernel": "poly", "degree": 2}])
def test_multiclass_train_error_is_the_models_own_error(four_classes, kw):
    X, y = four_classes
    w = np.ones(y.shape[0])
    w[::17] = 0.0  # rows left out of every pair: their votes come from the support vectors
    m = SVC(C=0.5, **kw).fit(X, y, sample_weight=w)
    assert m.train_error_ == pytest.approx(np.mean(m.predict(X) != y), abs=1e-12)
    assert m.train_error_ > 0  # overlapping blobs: the shortcut does not just return 0
