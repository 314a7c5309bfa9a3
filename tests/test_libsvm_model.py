"""LIBSVM's text model format: round trips here, and interoperation with the real LIBSVM."""

import os

import numpy as np
import pytest
import scipy.sparse as sp
from click.testing import CliRunner

import maxmargin
from maxmargin.cli import cli
from maxmargin.datasets import heart_scale_path, load_heart_scale
from maxmargin.io import ModelFormatError, load_data
from maxmargin.io.libsvm_model import (
    is_libsvm_model,
    load_libsvm_model,
    read_libsvm_model,
    save_libsvm_model,
    widen_features,
)

HEART = os.fspath(heart_scale_path())


@pytest.fixture(scope="module")
def heart():
    return load_heart_scale()


@pytest.fixture(scope="module")
def multiclass(tmp_path_factory):
    """Iris with labels 7, -2, 5, rows shuffled so LIBSVM sees the labels unsorted (7 first)."""
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(y))
    X, y = X[order], np.array([7.0, -2.0, 5.0])[y[order]]
    first = np.flatnonzero(y == 7)[0]
    X[[0, first]], y[[0, first]] = X[[first, 0]], y[[first, 0]]
    path = tmp_path_factory.mktemp("iris") / "iris.svm"
    with open(path, "w") as fh:
        for xi, yi in zip(X, y):
            fh.write(f"{int(yi)} " + " ".join(f"{j + 1}:{v:g}" for j, v in enumerate(xi)) + "\n")
    return X, y, os.fspath(path)


def _check_same(a, b, X):
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X), rtol=1e-9, atol=1e-9)


# --------------------------------------------------------------------------- within maxmargin


@pytest.mark.parametrize(
    "params",
    [
        {"C": 1.0},
        {"kernel": "linear", "C": 0.1},
        {"kernel": "poly", "degree": 2, "gamma": 0.5, "coef0": 1.0},
        {"kernel": "sigmoid", "gamma": 0.01, "coef0": -0.5},
    ],
)
def test_round_trip_binary(tmp_path, heart, params):
    X, y = heart
    clf = maxmargin.SVC(**params).fit(X, y)
    path = tmp_path / "m.model"
    save_libsvm_model(clf, path)
    assert is_libsvm_model(path)
    back = load_libsvm_model(path)
    assert back.kernel == clf.kernel
    _check_same(clf, back, X)
    np.testing.assert_array_equal(back.n_support_, clf.n_support_)
    np.testing.assert_array_equal(back.classes_, clf.classes_)


def test_round_trip_multiclass_sparse(tmp_path, multiclass):
    X, y, _ = multiclass
    Xs = sp.csr_matrix(X)
    clf = maxmargin.SVC(C=10.0, gamma=0.5).fit(Xs, y)
    save_libsvm_model(clf, tmp_path / "m.model")
    back = load_libsvm_model(tmp_path / "m.model")
    _check_same(clf, back, X)
    _check_same(clf, back, Xs)
    text = (tmp_path / "m.model").read_text()
    assert "label -2 5 7\n" in text and "nr_class 3\n" in text


def test_loaded_model_can_be_saved_in_maxmargin_format(tmp_path, heart):
    X, y = heart
    clf = maxmargin.SVC().fit(X, y)
    save_libsvm_model(clf, tmp_path / "m.model")
    back = load_libsvm_model(tmp_path / "m.model")
    assert np.isnan(back.margin_).all() and np.isnan(back.loo_bound_)
    maxmargin.io.save_model(back, tmp_path / "m.mm")
    again = maxmargin.io.load_model(tmp_path / "m.mm")
    _check_same(clf, again, X)


def test_widen_features(tmp_path, heart):
    X, y = heart
    clf = maxmargin.SVC().fit(X, y)
    save_libsvm_model(clf, tmp_path / "m.model")
    back = load_libsvm_model(tmp_path / "m.model", n_features=20)
    assert back.n_features_in_ == 20 and back.support_vectors_.shape[1] == 20
    X20 = np.hstack([X, np.zeros((X.shape[0], 7))])
    np.testing.assert_array_equal(back.predict(X20), clf.predict(X))
    with pytest.raises(ValueError, match="cannot narrow"):
        widen_features(back, 5)


def test_unsupported_models(tmp_path, heart):
    X, y = heart
    with pytest.raises(ValueError, match="integer class labels"):
        save_libsvm_model(maxmargin.SVC().fit(X, np.where(y > 0, "sick", "well")), tmp_path / "m.model")
    K = X @ X.T
    with pytest.raises(ValueError, match="cannot be written"):
        save_libsvm_model(maxmargin.SVC(kernel="precomputed").fit(K, y), tmp_path / "m.model")
    assert not (tmp_path / "m.model").exists()


GOOD = """svm_type c_svc
kernel_type rbf
gamma 0.5
nr_class 2
total_sv 2
rho 0.1
label 1 -1
nr_sv 1 1
SV
1 1:0.5 2:1
-1 1:-0.5 3:2
"""


@pytest.mark.parametrize(
    "text, pattern",
    [
        (
            GOOD.replace("total_sv 2", "total_sv 3").replace("nr_sv 1 1", "nr_sv 2 1"),
            "truncated: total_sv is 3 but only 2",
        ),
        (GOOD.split("SV\n")[0], "no 'SV' line"),
        (GOOD.replace("gamma 0.5", "gama 0.5"), r"line 3: unknown entry 'gama'"),
        (GOOD.replace("kernel_type rbf", "kernel_type precomputed"), "precomputed kernel are not supported"),
        (GOOD.replace("nr_sv 1 1", "nr_sv 1 2"), "nr_sv adds up to 3"),
        (GOOD.replace("rho 0.1", "rho 0.1 0.2"), "rho needs 1 values, found 2"),
        (GOOD.replace("1 1:0.5 2:1", "1 1:0.5 2:x"), r"line 10: feature '2:x'"),
        (GOOD.replace("svm_type c_svc", "svm_type fancy"), "unknown svm_type 'fancy'"),
        ("hello world\n", "not a LIBSVM model file"),
    ],
)
def test_bad_libsvm_models(tmp_path, text, pattern):
    p = tmp_path / "bad.model"
    p.write_text(text)
    with pytest.raises(ModelFormatError, match=pattern):
        load_libsvm_model(p)


def test_hand_written_model_label_order(tmp_path):
    """LIBSVM orients the decision towards its first label (here 1, listed before -1)."""
    p = tmp_path / "hand.model"
    p.write_text(GOOD)
    m = read_libsvm_model(p)
    assert m["label"].tolist() == [1, -1] and m["SV"].shape == (2, 3)
    X = np.array([[0.5, 1, 0], [-0.5, 0, 2]])
    # libsvm's decision value: sum coef_i K(x_i, x) - rho; positive means label 1
    K = np.exp(-0.5 * ((X[:, None, :] - np.array([[0.5, 1, 0], [-0.5, 0, 2]])[None]) ** 2).sum(-1))
    dec = K @ np.array([1.0, -1.0]) - 0.1
    est = load_libsvm_model(p)
    assert est.classes_.tolist() == [1.0, -1.0]
    np.testing.assert_allclose(est.decision_function(X), -dec)  # positive means classes_[1] = -1
    np.testing.assert_array_equal(est.predict(X), np.where(dec > 0, 1.0, -1.0))
    est = load_libsvm_model(p, label_order="sorted")
    assert est.classes_.tolist() == [-1.0, 1.0]
    np.testing.assert_allclose(est.decision_function(X), dec)  # positive means classes_[1] = 1
    np.testing.assert_array_equal(est.predict(X), np.where(dec > 0, 1.0, -1.0))
    with pytest.raises(ValueError, match="label_order"):
        load_libsvm_model(p, label_order="alphabetical")


def test_cli_predicts_with_a_libsvm_model(tmp_path, heart):
    X, y = heart
    clf = maxmargin.SVC(C=2.0).fit(X, y)
    save_libsvm_model(clf, tmp_path / "m.model")
    out = tmp_path / "pred.txt"
    r = CliRunner().invoke(cli, ["predict", str(tmp_path / "m.model"), HEART, "-o", str(out)])
    assert r.exit_code == 0, r.output
    np.testing.assert_array_equal(np.loadtxt(out), clf.predict(X))
    assert "Accuracy = " in r.stdout
    r = CliRunner().invoke(cli, ["info", str(tmp_path / "m.model")])
    assert r.exit_code == 0 and "LIBSVM model file" in r.stdout


# --------------------------------------------------------------------------- against LIBSVM itself


@pytest.fixture(scope="module")
def svmutil():
    pytest.importorskip("libsvm")
    from libsvm import svmutil

    return svmutil


@pytest.mark.parametrize("options", ["-c 1 -g 0.07", "-t 0 -c 0.5", "-t 1 -d 2 -g 0.2 -r 1 -c 2"])
def test_libsvm_model_predicts_the_same_here(tmp_path, svmutil, options):
    yl, xl = svmutil.svm_read_problem(HEART)
    lm = svmutil.svm_train(yl, xl, options + " -q")
    path = os.fspath(tmp_path / "libsvm.model")
    svmutil.svm_save_model(path, lm)
    p_lib, _, dec_lib = svmutil.svm_predict(yl, xl, lm, "-q")
    est = load_libsvm_model(path)
    assert est.classes_.tolist() == lm.get_labels() == [1, -1]  # LIBSVM's order: +1 comes first in the file
    X, _ = load_data(HEART)
    np.testing.assert_array_equal(est.predict(X), p_lib)
    # LIBSVM's decision value is positive for its first label; ours for classes_[1]
    np.testing.assert_allclose(est.decision_function(X), -np.ravel(dec_lib), rtol=1e-7, atol=1e-7)
    est_sorted = load_libsvm_model(path, label_order="sorted")
    assert est_sorted.classes_.tolist() == [-1, 1]
    np.testing.assert_array_equal(est_sorted.predict(X), p_lib)
    np.testing.assert_allclose(est_sorted.decision_function(X), np.ravel(dec_lib), rtol=1e-7, atol=1e-7)


def test_maxmargin_model_predicts_the_same_in_libsvm(tmp_path, svmutil, heart):
    X, y = heart
    clf = maxmargin.SVC(C=3.0, gamma=0.1).fit(X, y)
    path = os.fspath(tmp_path / "mm.model")
    save_libsvm_model(clf, path)
    lm = svmutil.svm_load_model(path)
    p_lib, _, dec_lib = svmutil.svm_predict(y.tolist(), X.tolist(), lm, "-q")
    np.testing.assert_array_equal(np.array(p_lib), clf.predict(X))
    np.testing.assert_allclose(np.ravel(dec_lib), -clf.decision_function(X), rtol=1e-7, atol=1e-7)


def test_multiclass_interop_both_ways(tmp_path, svmutil, multiclass):
    X, y, path = multiclass
    yl, xl = svmutil.svm_read_problem(path)
    lm = svmutil.svm_train(yl, xl, "-c 10 -g 0.5 -q")
    assert lm.get_labels()[0] == 7 and list(lm.get_labels()) != sorted(lm.get_labels())
    mpath = os.fspath(tmp_path / "lib.model")
    svmutil.svm_save_model(mpath, lm)
    p_lib, _, _ = svmutil.svm_predict(yl, xl, lm, "-q")
    est = load_libsvm_model(mpath)
    assert est.classes_.tolist() == list(lm.get_labels())
    np.testing.assert_array_equal(est.predict(X), p_lib)
    est_sorted = load_libsvm_model(mpath, label_order="sorted")
    assert est_sorted.classes_.tolist() == [-2.0, 5.0, 7.0]
    np.testing.assert_array_equal(est_sorted.predict(X), p_lib)
    # a LIBSVM model read here and written back is the same model for LIBSVM
    save_libsvm_model(est, tmp_path / "again.model")
    p_again, _, _ = svmutil.svm_predict(yl, xl, svmutil.svm_load_model(os.fspath(tmp_path / "again.model")), "-q")
    assert p_again == p_lib
    # maxmargin -> LIBSVM
    clf = maxmargin.SVC(C=10.0, gamma=0.5).fit(X, y)
    opath = os.fspath(tmp_path / "mm.model")
    save_libsvm_model(clf, opath)
    p_back, _, _ = svmutil.svm_predict(yl, xl, svmutil.svm_load_model(opath), "-q")
    np.testing.assert_array_equal(np.array(p_back), clf.predict(X))
    # both trained on the same problem: the same support vectors, the same predictions
    assert est.support_vectors_.shape[0] == clf.support_vectors_.shape[0]
    np.testing.assert_array_equal(clf.predict(X), p_lib)


def test_probabilities_both_ways(tmp_path, svmutil, multiclass, monkeypatch):
    X, y, _ = multiclass
    for data, labels in ((X.tolist(), y.tolist()), (X[:, :2].tolist(), [1.0 if v == 7 else -1.0 for v in y])):
        lm = svmutil.svm_train(labels, data, "-c 2 -g 0.5 -b 1 -q")
        mpath = os.fspath(tmp_path / "prob.model")
        svmutil.svm_save_model(mpath, lm)
        p_lib, _, prob_lib = svmutil.svm_predict(labels, data, lm, "-b 1 -q")
        est = load_libsvm_model(mpath)
        assert est.probability
        Xd = np.asarray(data, dtype=float)
        # svm-predict -b 1 predicts the most probable label
        proba = est.predict_proba(Xd)
        np.testing.assert_allclose(proba, np.asarray(prob_lib), atol=2e-3)
        # maxmargin -> LIBSVM: the same Platt parameters give the same probabilities
        clf = maxmargin.SVC(C=2.0, gamma=0.5, probability=True, random_state=0).fit(Xd, labels)
        opath = os.fspath(tmp_path / "mmprob.model")
        save_libsvm_model(clf, opath)
        _, _, prob_back = svmutil.svm_predict(labels, data, svmutil.svm_load_model(opath), "-b 1 -q")
        np.testing.assert_allclose(np.asarray(prob_back), clf.predict_proba(Xd), atol=4e-3)
        # the differences are LIBSVM's coupling: it stops Wu, Lin & Weng's iteration point by point at a
        # residual of 0.005/k (3e-3 off the exact solution on one iris point); maxmargin solves the
        # system exactly.  With LIBSVM's iteration run point by point, the two agree to rounding.
        from maxmargin import probability

        with monkeypatch.context() as m:
            m.setattr(
                probability,
                "_couple",
                lambda dec, A, B, k: np.vstack(
                    [probability._coupling_iterative(probability.pairwise_matrix(d[None], A, B, k)) for d in dec]
                ),
            )
            np.testing.assert_allclose(np.asarray(prob_back), clf.predict_proba(Xd), atol=1e-9)


def test_regression_and_one_class_round_trip(tmp_path, svmutil):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    z = X[:, 0] - 2 * X[:, 1] + 0.1 * rng.normal(size=120)
    for svm_type, options, target in (
        ("epsilon_svr", "-s 3 -c 2 -p 0.1 -g 0.3", z),
        ("nu_svr", "-s 4 -c 2 -n 0.4 -g 0.3", z),
        ("one_class", "-s 2 -n 0.2 -g 0.3", np.ones(120)),
    ):
        lm = svmutil.svm_train(target.tolist(), X.tolist(), options + " -q")
        mpath = os.fspath(tmp_path / f"{svm_type}.model")
        svmutil.svm_save_model(mpath, lm)
        p_lib, _, dec_lib = svmutil.svm_predict(target.tolist(), X.tolist(), lm, "-q")
        est = load_libsvm_model(mpath)
        assert type(est).__name__ == {"epsilon_svr": "SVR", "nu_svr": "NuSVR", "one_class": "OneClassSVM"}[svm_type]
        # (LIBSVM's model file keeps 8 significant digits of the support vectors)
        if svm_type == "one_class":
            np.testing.assert_array_equal(est.predict(X), p_lib)
            np.testing.assert_allclose(est.decision_function(X), np.ravel(dec_lib), atol=1e-6)
        else:
            np.testing.assert_allclose(est.predict(X), p_lib, atol=1e-6)
        save_libsvm_model(est, tmp_path / "back.model")
        p_back, _, _ = svmutil.svm_predict(
            target.tolist(), X.tolist(), svmutil.svm_load_model(os.fspath(tmp_path / "back.model")), "-q"
        )
        np.testing.assert_allclose(p_back, p_lib, atol=1e-6)
    svr = maxmargin.SVR(C=2.0, epsilon=0.1, gamma=0.3).fit(X, z)
    save_libsvm_model(svr, tmp_path / "svr.model")
    p_lib, _, _ = svmutil.svm_predict(
        z.tolist(), X.tolist(), svmutil.svm_load_model(os.fspath(tmp_path / "svr.model")), "-q"
    )
    np.testing.assert_allclose(p_lib, svr.predict(X), atol=1e-8)
