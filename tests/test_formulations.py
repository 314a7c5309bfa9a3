"""Every (formulation, solver) pair of maxmargin.formulations against an independent QP (cvxopt),
the documents' bias and margin formulas, separability, the seed data sets and the comparison helper."""

import lzma

import numpy as np
import pytest

from maxmargin import formulations as F
from maxmargin.kernels import make_kernel

cvxopt = pytest.importorskip("cvxopt")
pytest.importorskip("qpsolvers")

GAMMA = 0.5


# ------------------------------------------------------------------ independent reference
def gram(kernel, A, B):
    """Kernel values written out here, independently of maxmargin.kernels."""
    if kernel == "linear":
        return A @ B.T
    d2 = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
    return np.exp(-GAMMA * d2)


def reference(formulation, kernel, X, y, C):
    """(alpha, rho, objective) of the dual of ``formulation`` by cvxopt, with the KKT offset."""
    n = y.size
    K = gram(kernel, X, X)
    yy = np.outer(y, y)
    cvxopt.solvers.options.update(show_progress=False, abstol=1e-12, reltol=1e-12, feastol=1e-12)
    if formulation == "l2-simplex":
        H = yy * (K + 1.0) + np.eye(n) / C
        sol = cvxopt.solvers.qp(
            cvxopt.matrix(H),
            cvxopt.matrix(np.zeros(n)),
            cvxopt.matrix(-np.eye(n)),
            cvxopt.matrix(np.zeros(n)),
            cvxopt.matrix(np.ones((1, n))),
            cvxopt.matrix(1.0),
        )
        mu = np.array(sol["x"]).ravel()
        return mu, -(y @ mu), 0.5 * mu @ H @ mu
    Q = yy * K + (np.eye(n) / C if formulation == "l2" else 0.0)
    if formulation == "l1":
        G, h = np.vstack([-np.eye(n), np.eye(n)]), np.r_[np.zeros(n), np.full(n, C)]
    else:
        G, h = -np.eye(n), np.zeros(n)
    sol = cvxopt.solvers.qp(
        cvxopt.matrix(Q),
        cvxopt.matrix(-np.ones(n)),
        cvxopt.matrix(G),
        cvxopt.matrix(h),
        cvxopt.matrix(y.reshape(1, -1)),
        cvxopt.matrix(0.0),
    )
    a = np.array(sol["x"]).ravel()
    s = K @ (a * y)
    shift = 1.0 / C if formulation == "l2" else 0.0
    upper = C if formulation == "l1" else np.inf
    tiny = 1e-6 * max(1.0, a.max())
    free = (a > tiny) & (a < upper - tiny)
    rho = float(np.mean(s[free] - y[free] * (1.0 - shift * a[free])))
    return a, rho, 0.5 * a @ Q @ a - a.sum()


def data(n=40, seed=0, sep=1.2, d=2):
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    X = rng.normal(size=(n, d))
    X[:, 0] += sep * y
    return X, y


def separable(n=40, seed=0):
    rng = np.random.default_rng(seed)
    y = np.r_[np.ones(n // 2), -np.ones(n - n // 2)]
    X = rng.normal(size=(n, 2)) * 0.7 + 2.5 * y[:, None]
    return X, y


def decision(fit, kernel, X, y, Xt):
    if fit.alpha is None:
        return Xt @ fit.w - fit.rho
    return gram(kernel, Xt, X) @ (fit.alpha * y) - fit.rho


def cases():
    for f, s in F.valid_pairs():
        if f == "zero-one":
            continue
        kernels = ["linear"] if s in F.LINEAR_ONLY else ["linear", "rbf"]
        for k in kernels:
            yield f, s, k


# ------------------------------------------------------------------ every pair vs the reference
@pytest.mark.parametrize("formulation,solver,kernel", list(cases()))
def test_pair_matches_the_reference_qp(formulation, solver, kernel):
    C = 1.0
    X, y = separable(seed=1) if formulation == "hard" else data(seed=1)
    Xt, _ = data(n=60, seed=2)
    a_ref, rho_ref, obj_ref = reference(formulation, kernel, X, y, C)
    kern = make_kernel(kernel, gamma=GAMMA)
    tol = {"frank-wolfe": 1e-4, "subgradient": 1e-4}.get(solver, 1e-6)
    fit = F.fit_binary(X, y, C, kern, formulation, solver, tol=tol)
    assert fit.formulation == formulation and fit.solver == F.resolve_solver(formulation, solver, y.shape[0])

    # objective: 1e-5 relative (Frank-Wolfe 1e-3 with its certified gap below tol; subgradient 2 tol)
    if solver == "frank-wolfe":
        assert fit.converged and fit.gap <= tol * fit.objective
        assert obj_ref - 1e-12 <= fit.objective <= obj_ref + fit.gap + 1e-12
        rel = 1e-3
    else:
        rel = {"subgradient": 2 * tol}.get(solver, 1e-5)
    assert fit.objective == pytest.approx(obj_ref, rel=rel)

    # predictions agree (decision values too, to the solver's accuracy)
    f_ref = gram(kernel, Xt, X) @ (a_ref * y) - rho_ref
    f_fit = decision(fit, kernel, X, y, Xt)
    scale = np.abs(f_ref).max()
    atol = {"frank-wolfe": 0.05, "subgradient": 0.05}.get(solver, 1e-4) * scale
    np.testing.assert_allclose(f_fit, f_ref, atol=atol)
    clear = np.abs(f_ref) > atol
    np.testing.assert_array_equal(np.sign(f_fit[clear]), np.sign(f_ref[clear]))

    # the margin formula of the formulation agrees with its definition min y f / ||w||, from w
    if kernel == "linear":
        w = fit.w if fit.alpha is None else X.T @ (fit.alpha * y)
        # primal solvers: w is the QP's, alpha its cleaned multipliers -> equal to the QP's accuracy
        np.testing.assert_allclose(fit.w, w, atol=1e-12 if solver != "primal-qp" else 1e-6)
        w_norm = np.linalg.norm(fit.w)
    else:
        c = fit.alpha * y
        w_norm = np.sqrt(c @ gram(kernel, X, X) @ c)
    assert fit.extra["w_norm"] == pytest.approx(w_norm, rel=1e-9)
    f_train = decision(fit, kernel, X, y, X)
    g_def = np.min(y * f_train) / w_norm
    margin_tol = {"frank-wolfe": 5e-3, "subgradient": 5e-3}.get(solver, 1e-5)
    assert fit.margin == pytest.approx(g_def, rel=margin_tol, abs=margin_tol)
    if formulation == "hard":
        assert fit.margin == pytest.approx(1.0 / w_norm, rel=1e-9)
        assert fit.margin == pytest.approx(a_ref.sum() ** -0.5, rel=1e-5)  # = (sum alpha)^(-1/2), seed 002


def test_zero_one_is_a_valid_pair_with_a_linear_kernel_only():
    X, y = data(seed=3)
    fit = F.fit_binary(X, y, 1.0, make_kernel("linear"), "zero-one", "random-search")
    assert fit.alpha is None and fit.margin == pytest.approx(np.min(y * (X @ fit.w - fit.rho)) / np.linalg.norm(fit.w))
    with pytest.raises(ValueError, match="linear kernel only"):
        F.fit_binary(X, y, 1.0, make_kernel("rbf", gamma=1.0), "zero-one", "random-search")


# ------------------------------------------------------------------ bias and KKT
@pytest.mark.parametrize("solver", ["qp", "smo"])
@pytest.mark.parametrize("formulation", ["l1", "hard", "l2"])
def test_kkt_conditions_hold_with_the_default_bias(formulation, solver):
    C = 2.0
    X, y = separable(seed=4) if formulation == "hard" else data(seed=4)
    fit = F.fit_binary(X, y, C, make_kernel("rbf", gamma=GAMMA), formulation, solver, tol=1e-8)
    a, m = fit.alpha, y * fit.extra["train_decision"]
    atol = 1e-6
    assert fit.extra["bias_rule"] == F.DEFAULT_BIAS[formulation]
    if formulation == "l1":
        free, at_c = (a > 0) & (a < C), a >= C
        np.testing.assert_allclose(m[free], 1.0, atol=atol)
        assert np.all(m[a == 0] >= 1 - atol) and np.all(m[at_c] <= 1 + atol)
    elif formulation == "hard":
        np.testing.assert_allclose(m[a > 0], 1.0, atol=atol)
        assert np.all(m >= 1 - atol)
    else:  # y f = 1 - xi with xi = alpha / C (eq. 22)
        np.testing.assert_allclose(m[a > 0], 1.0 - a[a > 0] / C, atol=atol)
        assert np.all(m[a == 0] >= 1 - atol)


def test_l2_simplex_kkt_with_its_bias():
    X, y = data(seed=5)
    C = 1.0
    fit = F.fit_binary(X, y, C, make_kernel("linear"), "l2-simplex", "qp")
    mu = fit.alpha
    assert fit.rho == pytest.approx(-(y @ mu))  # b = -y'mu, seed 000 eq. (7)
    m = y * fit.extra["train_decision"]
    rho_m = 2 * fit.objective  # mu'H mu
    np.testing.assert_allclose(m[mu > 0], rho_m - mu[mu > 0] / C, atol=1e-7)
    assert np.all(m[mu == 0] >= rho_m - 1e-7)


def test_bias_rules_agree_where_the_documents_say_they_are_exact():
    kern = make_kernel("rbf", gamma=GAMMA)
    X, y = data(seed=6)
    for formulation in ("hard", "l2"):
        Xf, yf = separable(seed=6) if formulation == "hard" else (X, y)
        rhos = [
            F.fit_binary(Xf, yf, 1.0, kern, formulation, "qp", bias=r).rho
            for r in ("notebook", "libsvm", "largest-alpha", "sv-average")
        ]
        np.testing.assert_allclose(rhos, rhos[0], atol=1e-7)
    # 1-norm soft margin with bounded SVs: the notebook's printed formula (alpha weights) is not exact,
    # LIBSVM's free-SV average is (this is why it is the default for 'l1')
    fits = {r: F.fit_binary(X, y, 0.5, kern, "l1", "qp", bias=r) for r in ("notebook", "libsvm", "largest-alpha")}
    a = fits["libsvm"].alpha
    assert np.any(a == 0.5), "the test needs bounded support vectors"
    assert fits["largest-alpha"].rho == pytest.approx(fits["libsvm"].rho, abs=1e-7)
    assert abs(fits["notebook"].rho - fits["libsvm"].rho) > 1e-3
    with pytest.raises(ValueError, match="bias must be one of"):
        F.fit_binary(X, y, 1.0, kern, "l1", "qp", bias="median")
    with pytest.raises(ValueError, match="l2-simplex"):
        F.fit_binary(X, y, 1.0, kern, "l1", "qp", bias="simplex")
    with pytest.raises(ValueError, match="own bias"):
        F.fit_binary(X, y, 1.0, kern, "l2-simplex", "qp", bias="libsvm")
    with pytest.raises(ValueError, match="finds b itself"):
        F.fit_binary(X, y, 1.0, make_kernel("linear"), "l1", "primal-qp", bias="libsvm")


# ------------------------------------------------------------------ margins
def test_geometric_margin_formulas_and_gram_input():
    X, y = data(seed=7)
    C = 1.0
    K = gram("linear", X, X)
    for formulation, solver in [("l1", "qp"), ("l2", "qp"), ("l2-simplex", "qp"), ("hard", "qp")]:
        Xf, yf = separable(seed=7) if formulation == "hard" else (X, y)
        Kf = gram("linear", Xf, Xf)
        fit = F.fit_binary(Xf, yf, C, make_kernel("linear"), formulation, solver)
        w_norm = np.linalg.norm(fit.w)
        by_norm = F.geometric_margin(formulation, fit.alpha, yf, C, w_norm, decision=fit.extra["train_decision"])
        by_gram = F.geometric_margin(formulation, fit.alpha, yf, C, Kf, rho=fit.rho)
        by_def = F.margin_from_definition(w_norm, yf, Xf @ fit.w - fit.rho)
        assert by_norm == pytest.approx(by_gram, rel=1e-9)
        assert by_norm == pytest.approx(by_def, rel=1e-6, abs=1e-9)
    # the 2-norm notebook formula, explicitly: (1 - max alpha / C) / ||w||, ||w||^2 = sum a - sum a^2 / C
    fit = F.fit_binary(X, y, C, make_kernel("linear"), "l2", "qp")
    a = fit.alpha
    assert np.sum(a) - np.sum(a * a) / C == pytest.approx(np.linalg.norm(fit.w) ** 2, rel=1e-6)
    assert fit.margin == pytest.approx((1 - a.max() / C) / np.linalg.norm(fit.w))
    with pytest.raises(ValueError, match="decision"):
        F.geometric_margin("l1", fit.alpha, y, C, 1.0)
    with pytest.raises(ValueError, match="formulation"):
        F.geometric_margin("l3", fit.alpha, y, C, 1.0)
    assert F.geometric_margin("hard", a, y, C, K * 0.0, rho=0.0) == np.inf


# ------------------------------------------------------------------ hard margin
@pytest.mark.parametrize("solver", ["smo", "qp", "primal-qp"])
def test_hard_equals_l1_with_huge_C_on_separable_data(solver):
    X, y = separable(seed=8)
    kern = make_kernel("linear")
    hard = F.fit_binary(X, y, 1.0, kern, "hard", solver, tol=1e-9)
    soft = F.fit_binary(X, y, 1e8, kern, "l1", solver, tol=1e-9)
    assert hard.objective == pytest.approx(soft.objective, rel=1e-7)
    np.testing.assert_allclose(hard.w, soft.w, rtol=1e-6, atol=1e-9)
    assert hard.rho == pytest.approx(soft.rho, abs=1e-6)
    assert np.all(y * hard.extra["train_decision"] >= 1 - 1e-6)


@pytest.mark.parametrize("solver", ["smo", "qp", "primal-qp"])
def test_hard_raises_on_non_separable_data(solver):
    X, y = data(seed=9, sep=0.3)
    with pytest.raises(F.NotSeparableError, match="not separable"):
        F.fit_binary(X, y, 1.0, make_kernel("linear"), "hard", solver)
    assert issubclass(F.NotSeparableError, ValueError)


@pytest.mark.parametrize("solver", ["smo", "qp"])
def test_hard_rbf_raises_on_contradictory_duplicates_and_fits_otherwise(solver):
    X, y = data(seed=10, sep=0.3)
    kern = make_kernel("rbf", gamma=GAMMA)
    fit = F.fit_binary(X, y, 1.0, kern, "hard", solver)  # distinct points: separable in RBF space
    assert np.all(np.sign(fit.extra["train_decision"]) == y)
    Xd = np.vstack([X, X[:1]])
    yd = np.r_[y, -y[:1]]
    with pytest.raises(F.NotSeparableError):
        F.fit_binary(Xd, yd, 1.0, kern, "hard", solver)


def test_hard_min_margin_option():
    X, y = separable(seed=11)
    fit = F.fit_binary(X, y, 1.0, make_kernel("linear"), "hard", "smo")
    with pytest.raises(F.NotSeparableError, match="margin <"):
        F.fit_binary(X, y, 1.0, make_kernel("linear"), "hard", "smo", min_margin=2 * fit.margin)
    with pytest.raises(ValueError, match="min_margin"):
        F.fit_binary(X, y, 1.0, make_kernel("linear"), "hard", "qp", min_margin=-1)


@pytest.mark.parametrize("solver", ["smo", "qp"])
def test_seed_003_example(solver):
    X = np.array([[1.0, 5.0], [2.0, 4.0], [2.0, 2.0], [4.0, 4.0]])
    y = np.array([1.0, 1.0, -1.0, -1.0])
    fit = F.fit_binary(X, y, 1.0, make_kernel("linear"), "hard", solver, tol=1e-9)
    np.testing.assert_array_equal(np.sign(X @ fit.w - fit.rho), [1, 1, -1, -1])
    # seed 003's own bias (b = y_n - w.x_n, n = argmax alpha) is the same number at the optimum
    b003 = F.fit_binary(X, y, 1.0, make_kernel("linear"), "hard", solver, tol=1e-9, bias="largest-alpha")
    assert b003.rho == pytest.approx(fit.rho, abs=1e-6)


# ------------------------------------------------------------------ seed 004 data sets
def blobs():
    from sklearn.datasets import make_blobs
    from sklearn.preprocessing import StandardScaler

    X, y = make_blobs(n_samples=200, n_features=2, centers=2, center_box=(-15.0, 15.0), cluster_std=1.0, random_state=4)
    y = np.where(y == 0, -1.0, 1.0)
    return StandardScaler().fit_transform(X), y


def xor_clusters(seed=0):
    """Seed 004's generate_non_linear (four Gaussian clusters, XOR layout; the usual means and covariance)."""
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(seed)
    cov = [[1.0, 0.8], [0.8, 1.0]]
    m1, m2, m3, m4 = [-1, 2], [1, -1], [4, -4], [-4, 4]
    X1 = np.vstack([rng.multivariate_normal(m1, cov, 50), rng.multivariate_normal(m3, cov, 50)])
    X2 = np.vstack([rng.multivariate_normal(m2, cov, 50), rng.multivariate_normal(m4, cov, 50)])
    X = StandardScaler().fit_transform(np.vstack([X1, X2]))
    return X, np.r_[np.ones(100), -np.ones(100)]


@pytest.mark.parametrize("solver", ["smo", "qp", "primal-qp"])
def test_seed_004_blobs_hard_margin(solver):
    X, y = blobs()
    fit = F.fit_binary(X, y, 1.0, make_kernel("linear"), "hard", solver)
    assert np.mean(np.sign(X @ fit.w - fit.rho) == y) == 1.0
    assert fit.margin > 0


@pytest.mark.parametrize(
    "formulation,solver", [("hard", "qp"), ("hard", "smo"), ("l1", "smo"), ("l2-simplex", "frank-wolfe")]
)
def test_seed_004_xor_clusters_rbf(formulation, solver):
    X, y = xor_clusters()
    kern = make_kernel("rbf", sigma=1.0, X=X)
    fit = F.fit_binary(X, y, 1.0, kern, formulation, solver)
    acc = np.mean(np.sign(fit.extra["train_decision"]) == y)
    assert acc >= 0.95
    # the linear soft margin "cannot fit well this data"
    if formulation == "l1":
        lin = F.fit_binary(X, y, 1.0, make_kernel("linear"), "l1", "qp")
        assert np.mean(np.sign(lin.extra["train_decision"]) == y) < 0.8


# ------------------------------------------------------------------ dispatch errors
def test_invalid_pairs_and_options_raise_clear_errors():
    X, y = data(n=10)
    lin = make_kernel("linear")
    with pytest.raises(ValueError, match=r"valid \(formulation, solver\) pairs: .*\('l2-simplex', 'frank-wolfe'\)"):
        F.fit_binary(X, y, 1.0, lin, "l1", "frank-wolfe")
    with pytest.raises(ValueError, match="formulation must be one of"):
        F.check_pair("l3", "smo")
    with pytest.raises(ValueError, match="solver must be one of"):
        F.check_pair("l1", "newton")
    with pytest.raises(ValueError, match="linear kernel only"):
        F.fit_binary(X, y, 1.0, make_kernel("rbf", gamma=1.0), "l1", "subgradient")
    with pytest.raises(ValueError, match="applies to solver 'frank-wolfe'"):
        F.fit_binary(X, y, 1.0, lin, "l1", "qp", step="away")
    with pytest.raises(ValueError, match="unknown option 'nonsense'"):
        F.fit_binary(X, y, 1.0, lin, "l1", "qp", nonsense=1)
    # the estimator's common options are accepted by every solver
    common = dict(tol=1e-3, max_iter=-1, shrinking=True, cache_size=100, callback=None, time_limit=None, verbose=False)
    for f, s in F.valid_pairs():
        Xf, yf = separable(n=20) if f == "hard" else (X, y)
        F.fit_binary(Xf, yf, 1.0, lin, f, s, **common)
    assert set(F.VALID) == {(f, s) for f, s in F.valid_pairs()}
    assert all(f in F.FORMULATIONS and s in F.SOLVERS for f, s in F.VALID)


def test_frank_wolfe_step_option_through_fit_binary():
    X, y = data(seed=12)
    lin = make_kernel("linear")
    ref = F.fit_binary(X, y, 1.0, lin, "l2-simplex", "qp")
    for step in ("2/(t+2)", "line-search", "away", "pairwise"):
        fit = F.fit_binary(X, y, 1.0, lin, "l2-simplex", "frank-wolfe", step=step, tol=1e-3, max_iter=300_000)
        assert fit.extra["step"] == step
        assert fit.objective == pytest.approx(ref.objective, rel=2e-3)
        assert fit.gap is not None


# ------------------------------------------------------------------ the estimator (when present)
def _svc():
    try:
        from maxmargin import SVC
    except Exception:
        return None
    return SVC if "formulation" in SVC().get_params() else None


def test_svc_uses_fit_binary():
    SVC = _svc()
    assert SVC is not None, "maxmargin.SVC must take formulation and solver"
    X, y = data(seed=13)
    clf = SVC(kernel="linear", C=1.0, formulation="l2-simplex", solver="frank-wolfe", tol=1e-3).fit(X, y)
    fit = F.fit_binary(X, y, 1.0, make_kernel("linear"), "l2-simplex", "frank-wolfe", tol=1e-3)
    assert fit.converged and clf.fit_status_ == 0
    assert clf.objective_[0] == pytest.approx(fit.objective, rel=1e-9)
    assert clf.margin_[0] == pytest.approx(fit.margin, rel=1e-9)
    assert np.isfinite(clf.duality_gap_[0])
    np.testing.assert_array_equal(np.sign(clf.decision_function(X)), np.sign(fit.extra["train_decision"]))
    with pytest.raises(ValueError, match="valid"):
        SVC(formulation="hard", solver="subgradient").fit(X, y)
    with pytest.raises(F.NotSeparableError):
        SVC(kernel="linear", formulation="hard", solver="qp").fit(*data(seed=14, sep=0.2))


# ------------------------------------------------------------------ comparison helper
def test_compare_table(capsys):
    from maxmargin.compare import COLUMNS, compare

    X, y = data(n=40, seed=15)
    Xt, yt = data(n=40, seed=16)
    pairs = [
        ("l1", "qp"),
        ("l2", "primal-qp"),
        ("hard", "qp"),
        ("l2-simplex", "frank-wolfe", {"step": "pairwise"}),
        ("l1", "subgradient"),
        ("zero-one", "random-search"),
    ]
    rows = compare(X, y, Xt, yt, pairs=pairs, kernel="linear", C=1.0, max_iter=-1)
    out = capsys.readouterr().out
    assert "formulation" in out and "frank-wolfe[step=pairwise]" in out
    assert [r["status"] for r in rows][:3] == ["ok", "ok", "not separable"]
    for r in rows:
        assert set(COLUMNS) <= set(r)
    ok = [r for r in rows if r["status"] == "ok"]
    assert all(0 <= r["train_err"] <= 1 and 0 <= r["test_err"] <= 1 and r["n_sv"] > 0 for r in ok)
    assert rows[0]["objective"] == pytest.approx(rows[4]["objective"], rel=1e-2)  # hinge: qp vs subgradient
    rows = compare(X, y, pairs=[("l1", "subgradient"), ("l1", "qp", {"max_n": 10})], kernel="rbf", print_table=False)
    assert rows[0]["status"].startswith("skipped") and rows[1]["status"] == "refused (n=40 > 10)"


def test_compare_command_line(tmp_path, capsys):
    from maxmargin.compare import main

    X, y = data(n=30, seed=17)
    lines = [" ".join([f"{int(v):+d}"] + [f"{j + 1}:{x:.6f}" for j, x in enumerate(row)]) for row, v in zip(X, y)]
    path = tmp_path / "train.svm.xz"
    with lzma.open(path, "wt") as fh:
        fh.write("\n".join(lines) + "\n")
    assert (
        main(
            [
                "--data",
                str(path),
                "--test",
                str(path),
                "--n-train",
                "20",
                "--kernel",
                "linear",
                "--pairs",
                "l1:qp,l2-simplex:frank-wolfe:step=away",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "training: 20 x 2, test: 30" in out
    assert "frank-wolfe[step=away]" in out and "ok" in out


@pytest.mark.parametrize("solver", ["smo", "batched"])
def test_hard_margin_on_non_separable_data_stops_early(solver):
    """Issue 14.9: a poly kernel whose feature space cannot separate the data used to run for
    minutes (millions of SMO steps) before NotSeparableError; the convex-hull bound of the solver's
    iterate proves it after the first progress report."""
    from sklearn.datasets import make_classification

    X, y = make_classification(400, 10, flip_y=0.1, random_state=0)
    seen = []
    from maxmargin import SVC

    est = SVC(
        formulation="hard",
        kernel="poly",
        degree=2,
        solver=solver,
        time_limit=10,
        callback=lambda info: seen.append(info["iteration"]),
    )
    with pytest.raises(F.NotSeparableError, match="margin < min_margin"):
        est.fit(X, y)
    assert max(seen, default=0) < 100_000


def test_auto_takes_the_batched_solver_where_kernel_rows_are_dear():
    """solver='auto' below AUTO_BATCHED_MIN_N: SMO, unless the rows hold at least AUTO_DEAR_MIN_WORK values
    (dense and wide: SMO's one matrix-vector product a row loses up to 5x to the batched solver's blocks);
    the two solvers reach the same optimum."""
    import scipy.sparse as sp

    rng = np.random.default_rng(3)
    n, d = F.AUTO_DEAR_MIN_N, -(-F.AUTO_DEAR_MIN_WORK // F.AUTO_DEAR_MIN_N)
    X = rng.normal(size=(n, d))
    y = np.where(X[:, :5].sum(axis=1) + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    k = make_kernel("rbf", gamma=1.0 / d)
    assert F.rows_dear_for_smo(X, n, k)
    assert not F.rows_dear_for_smo(X, n - 1, k)  # too few rows
    assert not F.rows_dear_for_smo(X[:, : d // 2], n, k)  # too narrow
    assert not F.rows_dear_for_smo(X, n, make_kernel("precomputed"))
    S = sp.random(n, 40 * d, density=0.01, random_state=0, format="csr")  # 40 * d * 0.01 = 0.4 d nonzeros a row
    assert not F.rows_dear_for_smo(S, n, k)
    # a cache_size too small for the whole kernel matrix (with the default, SMO computes it at once: the next test)
    assert F.smo_on_gram(X, n, k) and not F.rows_dear_for_smo(X, n, k, cache_size=200)
    auto = F.fit("l1", X, y, 1.0, k, cache_size=4)
    smo = F.fit("l1", X, y, 1.0, k, solver="smo", cache_size=4)
    assert auto.solver == "batched" and smo.solver == "smo"
    assert auto.objective == pytest.approx(smo.objective, rel=1e-4)
    assert np.mean(np.sign(auto.extra["train_decision"]) == np.sign(smo.extra["train_decision"])) > 0.99
    below = F.fit("l1", X[: n - 1], y[: n - 1], 1.0, k, cache_size=4)
    assert below.solver == "smo"


def test_smo_takes_the_whole_kernel_matrix_where_it_pays(monkeypatch):
    """Dense rows of >= GRAM_MIN_FEATURES features whose kernel matrix fits in cache_size: solver='auto' runs
    SMO over the whole matrix, computed at once (whatever the size rule says, up to GRAM_MAX_N rows), for a
    subset of rows too (a one-vs-one pair: gathered first); the same optimum as SMO computing its rows one at a
    time, the batched solver and LIBSVM."""
    import scipy.sparse as sp
    from sklearn.svm import SVC

    from maxmargin.kernels import rowcache
    from maxmargin.solvers import smo as smo_mod

    rng = np.random.default_rng(5)
    n, d = 700, rowcache.GRAM_MIN_FEATURES + 22
    X = rng.normal(size=(n, d))
    y = np.where(X[:, :5].sum(axis=1) + 0.7 * rng.normal(size=n) > 0, 1.0, -1.0)
    k = make_kernel("rbf", gamma=0.5 / d)
    mb = 8.0 * n * n / 2**20
    assert F.smo_on_gram(X, n, k, cache_size=mb) and not F.smo_on_gram(X, n, k, cache_size=0.99 * mb)
    assert not F.smo_on_gram(X[:, : rowcache.GRAM_MIN_FEATURES - 1], n, k)  # too narrow
    assert F.smo_on_gram(sp.csr_matrix(X), n, k)  # sparse rows the engine densifies: as dense ones
    assert not F.smo_on_gram(sp.csr_matrix(X[:, : rowcache.GRAM_MIN_FEATURES - 1]), n, k)
    few = sp.random(n, 5000, density=0.002, format="csr", random_state=1)
    assert not F.smo_on_gram(few, n, k)  # very sparse rows (few postings a value): SMO's rows one at a time
    assert not F.smo_on_gram(X, n, make_kernel("precomputed"))
    assert not F.smo_on_gram(X, F.GRAM_MAX_N + 1, k, cache_size=1e6)
    with rowcache.keeping_gram():  # the matrix serves the folds of probability=True too: as far as it fits
        assert F.smo_on_gram(X, F.GRAM_MAX_N + 1, k, cache_size=1e6)
    assert not rowcache.gram_kept()
    calls = []
    whole = smo_mod.whole_gram_cache
    monkeypatch.setattr(smo_mod, "whole_gram_cache", lambda X, kern: calls.append(X.shape) or whole(X, kern))
    gram = F.fit("l1", X, y, 1.0, k)
    assert gram.solver == "smo" and calls == [(n, d)]
    rowwise = F.fit("l1", X, y, 1.0, k, solver="smo", cache_size=0.5 * mb)  # the matrix does not fit
    batched = F.fit("l1", X, y, 1.0, k, solver="batched")
    assert calls == [(n, d)]
    ref = SVC(C=1.0, kernel="rbf", gamma=0.5 / d, tol=1e-3).fit(X, y)
    for other in (rowwise, batched):
        assert gram.objective == pytest.approx(other.objective, rel=1e-6)
    np.testing.assert_allclose(gram.extra["train_decision"], ref.decision_function(X), atol=2e-3)
    # a pair's rows: gathered into a matrix of their own
    rows = np.flatnonzero(rng.random(n) < 0.6)
    sub = F.fit("l1", X, y[rows], 1.0, k, rows=rows)
    assert calls[-1] == (rows.size, d)
    alone = F.fit("l1", X[rows], y[rows], 1.0, k, solver="smo", cache_size=0.1)
    assert sub.objective == pytest.approx(alone.objective, rel=1e-6)


def test_auto_takes_smo_over_a_precomputed_matrix_at_any_size(monkeypatch):
    """A dense precomputed kernel matrix: solver='auto' takes SMO beyond the size rule too (the matrix is its
    pinned row cache; no kernel value to compute), a pair's rows gathered first; the batched solver's optimum.
    A named kernel of the same size still goes to the batched solver."""
    from maxmargin.formulations import base

    monkeypatch.setattr(base, "AUTO_BATCHED_MIN_N", 100)
    rng = np.random.default_rng(8)
    X = rng.normal(size=(300, 6))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=300) > 0, 1.0, -1.0)
    rbf = make_kernel("rbf", gamma=0.3)
    K, pre = rbf(X, X), make_kernel("precomputed")
    auto = F.fit("l1", K, y, 1.0, pre)
    batched = F.fit("l1", K, y, 1.0, pre, solver="batched")
    assert auto.solver == "smo" and F.fit("l1", X, y, 1.0, rbf).solver == "batched"
    assert auto.objective == pytest.approx(batched.objective, rel=1e-6)
    rows = np.flatnonzero(rng.random(300) < 0.5)
    sub = F.fit("l1", K, y[rows], 1.0, pre, rows=rows)
    alone = F.fit("l1", K[np.ix_(rows, rows)], y[rows], 1.0, pre, solver="batched")
    assert sub.solver == "smo" and sub.objective == pytest.approx(alone.objective, rel=1e-6)
