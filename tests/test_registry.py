"""The registry of formulations and solvers (maxmargin.formulations, maxmargin.solvers.registry):
declarations consistent, rows as index arrays equal to copies, every SVM type through the QP reference."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_classification, make_regression

from maxmargin import SVR, NuSVC, NuSVR, OneClassSVM
from maxmargin import formulations as F
from maxmargin.kernels import make_kernel
from maxmargin.solvers import registry


def test_declarations_are_consistent():
    kinds = set(registry.PROBLEM_KINDS)
    for name, spec in registry.specs().items():
        assert spec.problems and set(spec.problems) <= kinds, name
        assert set(spec.options) <= set(registry.COMMON_OPTIONS), name
        assert not set(spec.own_options) & set(registry.COMMON_OPTIONS), name
        assert set(spec.traits) <= set(registry.KNOWN_TRAITS), name
    for name, form in F.REGISTRY.items():
        assert form.name == name and set(form.problems) <= kinds
        assert len(F.solvers_for(name)) > 1, f"no solver takes {name!r}"
    # the pairs follow from the declarations: each solver of a pair takes one of its kinds
    for f, s in F.VALID:
        if s != "auto":
            assert F.get(f).kind_for(registry.spec(s)) is not None
    assert ("l2-simplex", "smo") not in F.VALID and ("l1", "frank-wolfe") not in F.VALID
    assert set(F.LINEAR_ONLY) == {"primal-qp", "subgradient", "random-search", "ipm"}


def test_unknown_and_foreign_options_are_named():
    X, y = make_classification(60, 4, random_state=0)
    y = np.where(y > 0, 1.0, -1.0)
    kern = make_kernel("rbf", gamma=0.5)
    with pytest.raises(ValueError, match="option 'step' applies to solver 'frank-wolfe'"):
        F.fit("l1", X, y, 1.0, kern, "smo", step="away")
    with pytest.raises(ValueError, match="unknown option 'colour'"):
        F.fit("one-class", X, np.ones(60), np.ones(60), kern, "smo", nu=0.5, colour=1)
    with pytest.raises(ValueError, match="needs the option nu"):
        F.fit("nu-svr", X, y, 1.0, kern, "smo")
    with pytest.raises(ValueError, match="formulation must be one of"):
        F.fit("l3", X, y, 1.0, kern, "smo")


def _gram(X, kern):
    return kern(X, X)


@pytest.mark.parametrize("solver", ["smo", "batched", "qp", "frank-wolfe", "primal-qp", "subgradient"])
@pytest.mark.parametrize("sparse", [False, True])
def test_rows_index_equals_a_copy(solver, sparse):
    """A problem on rows ``rows`` of X (no copy) is the problem on X[rows]."""
    X, y = make_classification(240, 5, flip_y=0.1, random_state=1)
    X = sp.csr_matrix(X) if sparse else X
    y = np.where(y > 0, 1.0, -1.0)
    rows = np.flatnonzero(np.arange(240) % 3 != 1)
    formulation = "l2-simplex" if solver == "frank-wolfe" else "l1"
    kern = make_kernel("linear" if solver in F.LINEAR_ONLY else "rbf", gamma=0.3)
    C = np.linspace(0.5, 2.0, rows.size)
    opts = {"tol": 1e-6}
    if solver == "subgradient":
        opts.update(random_state=0, max_iter=200)
    a = F.fit_binary(X, y[rows], C, kern, formulation, solver, rows=rows, **opts)
    b = F.fit_binary(X[rows], y[rows], C, kern, formulation, solver, **opts)
    assert a.objective == pytest.approx(b.objective, rel=1e-9, abs=1e-12)
    assert a.rho == pytest.approx(b.rho, rel=1e-8, abs=1e-10)
    if b.coef is None:  # primal-only solver: w
        np.testing.assert_allclose(a.w, b.w, rtol=1e-8, atol=1e-10)
    else:
        np.testing.assert_allclose(a.coef, b.coef, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(a.extra["train_decision"], b.extra["train_decision"], rtol=1e-8, atol=1e-8)


def test_rows_index_with_a_precomputed_gram_matrix():
    X, y = make_classification(150, 4, random_state=2)
    y = np.where(y > 0, 1.0, -1.0)
    rows = np.arange(0, 150, 2)
    rbf = make_kernel("rbf", gamma=0.4)
    G = _gram(X, rbf)
    pre = make_kernel("precomputed")
    for solver in ("smo", "qp"):
        a = F.fit_binary(G, y[rows], 1.0, pre, "l1", solver, rows=rows, tol=1e-7)
        b = F.fit_binary(X[rows], y[rows], 1.0, rbf, "l1", solver, tol=1e-7)
        assert a.objective == pytest.approx(b.objective, rel=1e-7)
        np.testing.assert_allclose(a.coef, b.coef, atol=1e-6)


# ------------------------------------------------------- every SVM type through the QP reference
@pytest.fixture(scope="module")
def cls_data():
    X, y = make_classification(160, 5, flip_y=0.1, random_state=3)
    return X, y


@pytest.fixture(scope="module")
def reg_data():
    return make_regression(140, 4, noise=4.0, random_state=3)


def _agree(qp_model, smo_model, X, decision, rel=1e-5):
    assert qp_model.objective_ == pytest.approx(smo_model.objective_, rel=rel)
    a, b = decision(qp_model, X), decision(smo_model, X)
    np.testing.assert_allclose(a, b, atol=1e-3 * max(1.0, np.abs(b).max()))


def test_nusvc_by_the_qp_reference(cls_data):
    X, y = cls_data
    w = np.linspace(0.5, 1.5, y.shape[0])
    q = NuSVC(nu=0.35, gamma=0.3, solver="qp").fit(X, y, sample_weight=w)
    s = NuSVC(nu=0.35, gamma=0.3, solver="smo", tol=1e-8).fit(X, y, sample_weight=w)
    # the QP's nu-solution is rescaled by its r, an average over free SVs of an interior-point
    # solution: 1e-5 relative here (SMO at tol 1e-8 equals scikit-learn's NuSVC to 1e-8)
    _agree(q, s, X, lambda m, X: m.decision_function(X), rel=1e-4)
    assert np.mean(q.predict(X) == s.predict(X)) >= 0.99


def test_svr_types_by_the_qp_reference(reg_data):
    X, z = reg_data
    w = np.linspace(0.5, 1.5, z.shape[0])
    q = SVR(C=5.0, epsilon=2.0, gamma=0.2, solver="qp").fit(X, z, sample_weight=w)
    s = SVR(C=5.0, epsilon=2.0, gamma=0.2, solver="smo", tol=1e-8).fit(X, z, sample_weight=w)
    _agree(q, s, X, lambda m, X: m.predict(X))
    q = NuSVR(nu=0.4, C=5.0, gamma=0.2, solver="qp").fit(X, z)
    s = NuSVR(nu=0.4, C=5.0, gamma=0.2, solver="smo", tol=1e-8).fit(X, z)
    _agree(q, s, X, lambda m, X: m.predict(X))
    assert q.epsilon_ == pytest.approx(s.epsilon_, rel=1e-3)


def test_one_class_by_the_qp_reference(cls_data):
    X, _ = cls_data
    w = np.linspace(0.5, 1.5, X.shape[0])
    q = OneClassSVM(nu=0.2, gamma=0.2, solver="qp").fit(X, sample_weight=w)
    s = OneClassSVM(nu=0.2, gamma=0.2, solver="smo", tol=1e-8).fit(X, sample_weight=w)
    _agree(q, s, X, lambda m, X: m.decision_function(X))
    assert q.offset_ == pytest.approx(s.offset_, rel=1e-4)


def test_estimators_name_the_solvers_of_their_formulation():
    with pytest.raises(ValueError, match="one-class.*cannot be solved by solver='frank-wolfe'"):
        OneClassSVM(solver="frank-wolfe").fit(np.zeros((4, 2)))
    with pytest.raises(ValueError, match="solver must be one of"):
        NuSVC(solver="lbfgs").fit(np.eye(4), [0, 0, 1, 1])
