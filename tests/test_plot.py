"""maxmargin.plot: the drawn artists carry the model's data."""

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from maxmargin import SVC, formulations, plot  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def blobs(n=60, seed=0, gap=1.6):
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal([-gap, -gap], 0.7, (n // 2, 2)), rng.normal([gap, gap], 0.7, (n // 2, 2))])
    y = np.repeat([-1, 1], n // 2)
    return X, y


def xor(n=80, seed=1):
    rng = np.random.default_rng(seed)
    centres = np.array([[1.3, 1.3], [-1.3, -1.3], [-1.3, 1.3], [1.3, -1.3]])
    lab = np.array([1, 1, -1, -1])
    k = rng.integers(0, 4, n)
    return centres[k] + rng.normal(0, 0.4, (n, 2)), lab[k]


def vertices(contour_set):
    segs = [s for level in contour_set.allsegs for s in level if len(s)]
    return np.vstack(segs) if segs else np.empty((0, 2))


def grid_step(result):
    xx, yy, _ = result.grid
    return max(xx[0, 1] - xx[0, 0], yy[1, 0] - yy[0, 0])


@pytest.mark.parametrize("kernel,data", [("linear", blobs), ("rbf", xor)])
def test_boundary_and_margins_follow_the_decision_function(kernel, data):
    X, y = data()
    model = SVC(kernel=kernel, C=10.0).fit(X, y)
    res = plot.decision_boundary(model, X, y, resolution=150)
    v0 = vertices(res.boundary)
    assert len(v0) > 20
    f0 = model.decision_function(v0)
    # linear interpolation inside one grid cell: |f| is at most slope * cell size
    slope = np.max(np.abs(np.gradient(res.grid[2], grid_step(res))))
    assert np.max(np.abs(f0)) < slope * grid_step(res)
    assert np.median(np.abs(f0)) < 0.02
    levels = list(res.margins.levels)
    assert levels == [-1.0, 1.0]
    for level, segs in zip(levels, res.margins.allsegs):
        pts = np.vstack([s for s in segs if len(s)])
        assert np.median(np.abs(model.decision_function(pts) - level)) < 0.03


def test_support_vectors_are_marked_and_points_split_by_size():
    X, y = blobs(80)
    model = SVC(kernel="linear", C=1.0).fit(X[::2], y[::2])
    res = plot.decision_boundary(model, X[::2], y[::2], X[1::2], y[1::2])
    np.testing.assert_allclose(res.support.get_offsets(), model.support_vectors_)
    assert len(res.support.get_offsets()) == len(model.support_)
    train_pts = np.vstack([a.get_offsets() for a in res.train])
    test_pts = np.vstack([a.get_offsets() for a in res.test])
    assert len(train_pts) == 40 and len(test_pts) == 40
    assert min(a.get_sizes()[0] for a in res.train) > max(a.get_sizes()[0] for a in res.test)


def test_title_has_errors_margin_and_support_count():
    X, y = blobs(80, seed=3)
    Xtr, ytr, Xte, yte = X[::3], y[::3], np.delete(X, np.s_[::3], 0), np.delete(y, np.s_[::3])
    model = SVC(kernel="linear", C=100.0).fit(Xtr, ytr)
    res = plot.decision_boundary(model, Xtr, ytr, Xte, yte)
    title = res.ax.get_title()
    s = res.stats
    assert s["train_error"] == pytest.approx(np.mean(model.predict(Xtr) != ytr))
    assert s["test_error"] == pytest.approx(np.mean(model.predict(Xte) != yte))
    assert s["margin"][0] == pytest.approx(model.margin_[0])
    assert s["n_sv"] == len(model.support_)
    assert f"train err {100 * s['train_error']:.1f}%" in title
    assert f"test err {100 * s['test_error']:.1f}%" in title
    assert f"margin {model.margin_[0]:.3g}" in title
    assert f"#SV {len(model.support_)}" in title


def test_margin_fallback_for_models_without_margin_attribute():
    from sklearn.svm import SVC as SkSVC

    X, y = blobs(60)
    sk = SkSVC(kernel="linear", C=10.0).fit(X, y)
    m = plot.geometric_margin(sk, X, y)
    expected = np.min(np.where(y == 1, 1, -1) * sk.decision_function(X)) / np.linalg.norm(sk.coef_)
    assert m[0] == pytest.approx(expected, rel=1e-6)
    rbf = SkSVC(kernel="rbf", C=10.0).fit(X, y)  # ||w||^2 from dual_coef_ and f at the SVs
    K = np.exp(-rbf._gamma * ((rbf.support_vectors_[:, None] - rbf.support_vectors_[None]) ** 2).sum(-1))
    c = rbf.dual_coef_[0]
    expected = np.min(np.where(y == 1, 1, -1) * rbf.decision_function(X)) / np.sqrt(c @ K @ c)
    assert plot.geometric_margin(rbf, X, y)[0] == pytest.approx(expected, rel=1e-6)


def test_multiclass_regions_and_borders():
    rng = np.random.default_rng(5)
    centres = np.array([[-2.0, -1.0], [2.0, -1.0], [0.0, 2.0]])
    y = np.repeat([0, 1, 2], 25)
    X = centres[y] + rng.normal(0, 0.5, (75, 2))
    model = SVC(kernel="rbf", C=10.0).fit(X, y)
    res = plot.decision_boundary(model, X, y, resolution=120)
    assert res.margins is None
    xx, yy, idx = res.grid
    assert set(np.unique(idx)) == {0, 1, 2}
    # the regions image shows the predicted class of every grid point
    pred = model.predict(np.column_stack([xx.ravel(), yy.ravel()])).reshape(xx.shape)
    np.testing.assert_array_equal(model.classes_[idx], pred)
    # every border vertex separates two classes: predictions on either side differ
    v = np.vstack([vertices(cs) for cs in res.boundary])
    assert len(v) > 20
    eps = 2 * grid_step(res)
    around = np.stack([model.predict(v + d) for d in ([eps, 0], [-eps, 0], [0, eps], [0, -eps])])
    assert np.mean([len(set(col)) > 1 for col in around.T]) > 0.95
    assert len(res.train) == 3


def test_higher_dimensional_data_through_a_plane():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(90, 4))
    y = np.where(X[:, 0] + 0.5 * X[:, 2] > 0, 1, -1)
    model = SVC(kernel="linear", C=10.0).fit(X, y)
    for projection, labels in (("pca", ("PC1", "PC2")), ((0, 2), ("x1", "x3"))):
        res = plot.decision_boundary(model, X, y, projection=projection)
        proj = res.projection
        assert (res.ax.get_xlabel(), res.ax.get_ylabel()) == labels
        # plane coordinates and input space agree
        U = proj.to_plane(X)
        np.testing.assert_allclose(proj.to_plane(proj.from_plane(U)), U, atol=1e-9)
        # the boundary lies where the model's f is 0 on the plane
        v = vertices(res.boundary)
        assert np.median(np.abs(model.decision_function(proj.from_plane(v)))) < 0.02
        np.testing.assert_allclose(res.support.get_offsets(), proj.to_plane(model.support_vectors_))
    fixed = plot.Projection(X, (0, 2))
    Z = fixed.from_plane(np.array([[0.3, -0.7]]))
    np.testing.assert_allclose(Z[0], [0.3, X[:, 1].mean(), -0.7, X[:, 3].mean()])
    with pytest.raises(ValueError):
        plot.Projection(X, (1, 1))
    with pytest.raises(ValueError):
        plot.Projection(X[:, :1])


def test_compare_side_by_side(tmp_path):
    X, y = xor(60)
    linear_only = getattr(formulations, "LINEAR_ONLY", ())
    pairs = sorted(p for p in formulations.VALID if p[0] not in ("hard", "zero-one") and p[1] not in linear_only)[:3]
    specs = [(f, s, {"kernel": "rbf", "C": 10.0}) for f, s in pairs]
    specs.append(SVC(kernel="linear").fit(X, y))  # fitted: drawn as it is
    specs.append(("l1", "no-such-solver"))  # error shown in its panel
    fig, results = plot.compare(specs, X, y, ncols=3)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == len(specs)
    assert all(isinstance(r, plot.BoundaryPlot) for r in results[:-1])
    assert isinstance(results[-1], ValueError)
    assert "no-such-solver" in " ".join(t.get_text() for t in visible[-1].texts)
    f, s, _ = specs[0]
    assert visible[0].get_title().startswith(f"{f} / {s}")
    assert visible[-1].get_title() == "l1 / no-such-solver"
    out = tmp_path / "compare.png"
    fig.savefig(out, dpi=60)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError):
        plot.compare([("l1", "no-such-solver")], X, y, errors="raise")


def test_plot_model_file_writes_an_image(tmp_path):
    from maxmargin.io.model import save_model

    X, y = blobs(40)
    model = SVC(kernel="rbf", C=3.0).fit(X, y)
    model_path = tmp_path / "m.mmz"
    save_model(model, model_path)
    data_path = tmp_path / "d.csv"
    data_path.write_text("y,x1,x2\n" + "".join(f"{lab},{a},{b}\n" for (a, b), lab in zip(X, y)))
    for name in ("fig.png", "fig.svg"):
        out = plot.plot_model_file(model_path, data_path, tmp_path / name, resolution=60)
        assert (tmp_path / name).stat().st_size > 1000
        assert str(out).endswith(name)
    assert (tmp_path / "fig.png").read_bytes()[:4] == b"\x89PNG"


def test_refuses_precomputed_and_uses_existing_axes():
    X, y = blobs(30)
    K = X @ X.T
    model = SVC(kernel="precomputed").fit(K, y)
    with pytest.raises(ValueError, match="precomputed"):
        plot.decision_boundary(model, X, y)
    fig, ax = plt.subplots()
    res = plot.decision_boundary(
        SVC(kernel="linear").fit(X, y), X, y, ax=ax, title=False, show_support=False, show_margins=False
    )
    assert res.ax is ax and res.support is None and res.margins is None and ax.get_title() == ""


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("pair", sorted(formulations.VALID), ids="/".join)
def test_every_formulation_and_solver_draws(pair):
    X, y = blobs(40, seed=4, gap=1.8)
    model = SVC(formulation=pair[0], solver=pair[1], kernel="linear", C=10.0, random_state=0).fit(X, y)
    res = plot.decision_boundary(model, X, y, resolution=60)
    v = vertices(res.boundary)
    assert len(v) > 5
    assert np.median(np.abs(model.decision_function(v))) < 0.05 * np.max(np.abs(res.grid[2]))
    level = plot.margin_level(model)
    if pair[0] == "zero-one":
        assert level is None and res.margins is None
    else:
        assert list(res.margins.levels) == [-level, level]
    assert res.stats["n_sv"] == len(model.support_)


def test_l2_simplex_margin_lines_pass_through_its_support_vectors():
    pairs = [p for p in formulations.VALID if p[0] == "l2-simplex"]
    assert pairs
    X, y = blobs(60, seed=6, gap=1.2)
    solvers = [s for _, s in pairs]
    solver = "qp" if "qp" in solvers else sorted(solvers)[0]  # an exact solver if there is one
    model = SVC(formulation="l2-simplex", solver=solver, kernel="linear", C=1.0).fit(X, y)
    rho = plot.margin_level(model)
    assert 0 < rho < 1
    # KKT of the simplex form: y_i f(x_i) = rho - mu_i / C on every support vector
    ysv = np.where(y[model.support_] == model.classes_[1], 1.0, -1.0)
    f = model.decision_function(model.support_vectors_)
    np.testing.assert_allclose(ysv * f + np.abs(model.dual_coef_[0]) / model.C, rho, rtol=1e-2)
    res = plot.decision_boundary(model, X, y)
    for level, segs in zip(res.margins.levels, res.margins.allsegs):
        pts = np.vstack([s for s in segs if len(s)])
        assert np.median(np.abs(model.decision_function(pts) - level)) < 0.05 * rho


# --------------------------------------------------------------------------- issue 14


def test_models_trained_on_sparse_libsvm_data_draw(tmp_path):
    """Issue 14.6: heart_scale (LIBSVM format, sparse) is the first thing a user plots."""
    from click.testing import CliRunner

    from maxmargin.cli import cli
    from maxmargin.datasets import heart_scale_path, load_heart_scale

    X, y = load_heart_scale(sparse=True)
    model = SVC(C=2.0).fit(X, y)
    res = plot.decision_boundary(model, X, y, X[:20], y[:20], resolution=40)
    assert res.support is not None and res.stats["n_sv"] == model.support_.shape[0]
    runner = CliRunner()
    r = runner.invoke(cli, ["train", str(heart_scale_path()), "-q", "-o", str(tmp_path / "h.mm")])
    assert r.exit_code == 0, r.output
    r = runner.invoke(
        cli,
        ["plot", str(tmp_path / "h.mm"), str(heart_scale_path()), "-o", str(tmp_path / "h.png"), "-O", "resolution=40"],
    )
    assert r.exit_code == 0, r.output
    assert (tmp_path / "h.png").read_bytes()[:4] == b"\x89PNG"


def test_boundary_plot_follows_the_display_convention(tmp_path):
    """Issue 14.10: ax_, figure_, from_estimator and plot(ax=...) as scikit-learn's Displays."""
    X, y = blobs(40)
    model = SVC(kernel="linear").fit(X, y)
    disp = plot.BoundaryPlot.from_estimator(model, X, y, resolution=50)
    assert disp.ax_.figure is disp.figure_ and disp.ax is disp.ax_
    assert disp.margins is not None and disp.estimator is model
    fig, (a1, a2) = plt.subplots(1, 2)
    again = disp.plot(ax=a2, show_margins=False, title="restyled")
    assert again is disp and disp.ax_ is a2 and disp.figure_ is fig and disp.margins is None
    assert a2.get_title().startswith("restyled") and not a1.has_data()
    disp.figure_.savefig(tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 1000
    old = plot.decision_boundary(model, X, y, resolution=50)
    assert isinstance(old, plot.BoundaryPlot) and old.ax_ is old.ax
