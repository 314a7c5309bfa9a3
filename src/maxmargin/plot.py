r"""Pictures of a fitted classifier: decision regions, boundary, margins, support vectors.

The pictures are those of the source documents: the notebook of seed 002
(``runSVMExperiment``: training points large, test points small, the title
giving training error, test error and the geometric margin) and the blog post
of seed 004 (the boundary ``f = 0`` with the ``f = +-1`` margin contours and the
support vectors marked).

Functions
---------
:func:`decision_boundary`
    one model, one axes.
:func:`compare`
    several (formulation, solver) pairs side by side on the same data.
:func:`plot_model_file`
    a saved model and a data file to an image file (``maxmargin plot``).
:func:`summarize`, :func:`geometric_margin`
    the numbers of the title, without matplotlib (the playground uses them too).

matplotlib is an optional dependency (``pip install maxmargin[plot]``); it is
imported only when a function that draws is called.

Data with more than two features
--------------------------------
A decision function of ``d > 2`` variables is drawn on a *plane* of the input
space, chosen by ``projection``:

``'pca'`` (the default for ``d > 2``)
    the plane through the mean of the training points spanned by their first
    two principal axes.  The axes are the coordinates along those axes
    (``PC1``, ``PC2``), centred at the mean; points are drawn at their
    orthogonal projections onto the plane.
``(i, j)`` (or the string ``"i,j"``)
    features ``i`` and ``j`` vary, every other feature is fixed at its mean over
    the training points.  Points are drawn at ``(x_i, x_j)``.

Regions, boundary and margins are the model's decision function *on that
plane*; a point off the plane may lie on the other side of the drawn boundary,
so errors in the title are always those of the full model, never read off the
picture.  For ``d == 2`` the plane is the input space itself.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "decision_boundary",
    "compare",
    "plot_model_file",
    "summarize",
    "geometric_margin",
    "margin_level",
    "Projection",
    "BoundaryPlot",
    "CLASS_COLORS",
]

#: Colours of the classes: for two classes the negative class (``classes_[0]``)
#: is blue and the positive one (``classes_[1]``, where f > 0) is red.
CLASS_COLORS = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)


# --------------------------------------------------------------------------- numbers


def _final(model):
    """The last step of a scikit-learn Pipeline, else the model itself."""
    steps = getattr(model, "steps", None)
    return steps[-1][1] if steps else model


def _support_in_input_space(model):
    """Support vectors in the coordinates of the data given to ``model``
    (a Pipeline's preprocessing is undone with ``inverse_transform``); None if unknown."""
    final = _final(model)
    sv = getattr(final, "support_vectors_", None)
    if sv is not None and hasattr(sv, "toarray"):  # a model trained on sparse (LIBSVM-format) data
        sv = sv.toarray()
    if sv is None or final is model:
        return sv
    try:
        return model[:-1].inverse_transform(np.asarray(sv, dtype=float))
    except Exception:  # noqa: BLE001 - a step without inverse_transform
        return None


def _n_support(model):
    model = _final(model)
    sv = getattr(model, "support_", None)
    if sv is None:
        sv = getattr(model, "support_vectors_", None)
    return None if sv is None else int(sv.shape[0])


def _error(model, X, y):
    if X is None or y is None or len(y) == 0:
        return None
    return float(np.mean(np.asarray(model.predict(X)) != np.asarray(y)))


def geometric_margin(model, X, y):
    r"""Geometric margin of a fitted model over ``(X, y)``, one value per binary subproblem.

    If the model has ``margin_`` (every maxmargin estimator does), that is
    returned as a 1-D array.  Otherwise, for a two-class model with
    ``dual_coef_`` (or ``coef_``), the notebook's definition is computed:
    :math:`\min_i y_i f(x_i) / \|w\|` with
    :math:`\|w\|^2 = \sum_i c_i (f(s_i) - b)` over the support vectors ``s_i``,
    ``c = dual_coef_`` and ``b = intercept_`` (negative when the points are not
    separated).  Returns None when neither is available.
    """
    m = getattr(_final(model), "margin_", None)
    if m is not None:
        return np.atleast_1d(np.asarray(m, dtype=float))
    if _final(model) is not model:
        return None
    classes = getattr(model, "classes_", None)
    if classes is None or len(classes) != 2 or X is None or len(y) == 0:
        return None
    try:
        coef = getattr(model, "coef_", None)
    except (AttributeError, ValueError):  # sklearn raises for non-linear kernels
        coef = None
    try:
        if coef is not None:
            w2 = float(np.sum(np.asarray(coef, dtype=float) ** 2))
        else:
            c = np.asarray(model.dual_coef_, dtype=float).ravel()
            b = float(np.ravel(model.intercept_)[0])
            fs = np.asarray(model.decision_function(model.support_vectors_), dtype=float).ravel()
            w2 = float(c @ (fs - b))
        if not np.isfinite(w2) or w2 <= 0:
            return None
        ypm = np.where(np.asarray(y) == classes[1], 1.0, -1.0)
        f = np.asarray(model.decision_function(X), dtype=float).ravel()
        return np.array([float(np.min(ypm * f)) / np.sqrt(w2)])
    except Exception:  # a model without the needed attributes: no margin
        return None


def margin_level(model):
    """The value r of the decision function on the margin lines f = +-r of a two-class model.

    1 for the formulations whose constraints read ``y_i f(x_i) >= 1 - xi_i``
    (hard, l1, l2: the documents' canonical form).  For ``'l2-simplex'``
    (seed 000) the margin is ``y_i f(x_i) >= rho - xi_i`` with
    ``rho = mu' H mu``; by the KKT conditions every support vector has
    ``y_i f(x_i) + mu_i / C = rho``, which gives rho from the model (the median
    over the support vectors, ignoring sample and class weights).
    ``'zero-one'`` has no margin: None.
    """
    final = _final(model)
    form = getattr(final, "formulation", None)
    if form == "zero-one":
        return None
    if form == "l2-simplex":
        try:
            c = np.asarray(final.dual_coef_, dtype=float).ravel()
            sv = _support_in_input_space(model)
            classes = np.asarray(model.classes_)
            ysv = np.where(np.asarray(final.dual_coef_).ravel() > 0, 1.0, -1.0)
            f = np.asarray(model.decision_function(sv), dtype=float).ravel()
            if len(classes) != 2 or not len(c):
                return None
            rho = float(np.median(ysv * f + np.abs(c) / float(final.C)))
            return rho if np.isfinite(rho) and rho > 0 else None
        except Exception:  # noqa: BLE001 - no margin lines rather than wrong ones
            return None
    return 1.0


def summarize(model, X, y, X_test=None, y_test=None):
    """The numbers of a fitted model (no matplotlib needed).

    Returns a dict with ``train_error``, ``test_error`` (None without test
    points), ``margin`` (list, one per binary subproblem, or None), ``n_sv``,
    ``loo_bound`` (``loo_bound_`` if the model has it, else #SV / n),
    ``objective`` and ``n_iter`` (None where the model lacks them).
    """
    n_sv = _n_support(model)
    final = _final(model)
    loo = getattr(final, "loo_bound_", None)
    if loo is None and n_sv is not None and X is not None and len(X):
        loo = n_sv / len(X)
    margin = geometric_margin(model, X, y)
    obj = getattr(final, "objective_", None)
    n_iter = getattr(final, "n_iter_", None)
    return {
        "train_error": _error(model, X, y),
        "test_error": _error(model, X_test, y_test),
        "margin": None if margin is None else [float(v) for v in margin],
        "n_sv": n_sv,
        "loo_bound": None if loo is None else float(loo),
        "objective": None if obj is None else [float(v) for v in np.atleast_1d(obj)],
        "n_iter": None if n_iter is None else [int(v) for v in np.atleast_1d(n_iter)],
    }


def _fmt_title(stats, n_classes):
    parts = [f"train err {100 * stats['train_error']:.1f}%"]
    if stats["test_error"] is not None:
        parts.append(f"test err {100 * stats['test_error']:.1f}%")
    if stats["margin"]:
        if n_classes == 2 or len(stats["margin"]) == 1:
            parts.append(f"margin {stats['margin'][0]:.3g}")
        else:
            parts.append(f"min margin {min(stats['margin']):.3g}")
    if stats["n_sv"] is not None:
        parts.append(f"#SV {stats['n_sv']}")
    return "  ".join(parts)


# --------------------------------------------------------------------------- projection


class Projection:
    """A plane of the input space on which the decision function is drawn.

    ``to_plane(X)`` gives the 2-D coordinates of points (their orthogonal
    projection), ``from_plane(U)`` the points of the input space at plane
    coordinates ``U``.  See the module documentation for the choices.
    """

    def __init__(self, X, projection=None, feature_names=None):
        X = np.asarray(X, dtype=float)
        if X.ndim != 2 or X.shape[1] < 2:
            raise ValueError(f"plots need 2-D data (n_samples, n_features >= 2), got shape {X.shape}")
        d = X.shape[1]
        names = list(feature_names) if feature_names is not None else [f"x{i + 1}" for i in range(d)]
        if projection is None:
            projection = (0, 1) if d == 2 else "pca"
        if isinstance(projection, str) and projection.strip().lower() != "pca":
            # "i,j" (from the command line: maxmargin plot -O projection=0,2)
            parts = projection.strip("()[] ").replace(";", ",").split(",")
            try:
                projection = tuple(int(p) for p in parts)
            except ValueError:
                raise ValueError(
                    f"projection must be 'pca' or a pair of feature indices such as '0,2', got {projection!r}"
                ) from None
        self.n_features = d
        if isinstance(projection, str):
            self.kind = "pca"
            self.origin = X.mean(axis=0)
            _, _, vt = np.linalg.svd(X - self.origin, full_matrices=False)
            basis = vt[:2]
            if basis.shape[0] < 2:  # fewer than 2 points: any orthonormal pair
                basis = np.eye(d)[:2]
            self.basis = basis
            self.labels = ("PC1", "PC2")
            self.offset = np.zeros(2)
        else:
            if len(projection) != 2:
                raise ValueError(f"projection needs two feature indices, got {projection!r}")
            i, j = (int(k) for k in projection)
            if not (0 <= i < d and 0 <= j < d) or i == j:
                raise ValueError(f"projection needs two distinct feature indices in [0, {d}), got {projection!r}")
            self.kind = "features"
            self.origin = X.mean(axis=0)
            self.basis = np.eye(d)[[i, j]]
            self.labels = (names[i], names[j])
            # plane coordinates are the feature values themselves
            self.offset = self.basis @ self.origin
        self.projection = projection

    def to_plane(self, X):
        X = np.asarray(X, dtype=float)
        return (X - self.origin) @ self.basis.T + self.offset

    def from_plane(self, U):
        U = np.asarray(U, dtype=float)
        return self.origin + (U - self.offset) @ self.basis


# --------------------------------------------------------------------------- drawing


class BoundaryPlot:
    """The picture of a fitted classifier, after scikit-learn's Display objects
    (like :class:`sklearn.inspection.DecisionBoundaryDisplay`).

    Make one with :meth:`from_estimator` (or :func:`decision_boundary`); :meth:`plot`
    draws it again, on another Axes or with other options, so a figure can be
    restyled and saved: ``BoundaryPlot.from_estimator(clf, X, y).figure_.savefig("f.png")``.

    Attributes: ``ax_`` and ``figure_`` (the matplotlib Axes and Figure drawn on;
    ``ax`` is ``ax_``); ``estimator``, ``X``, ``y``, ``X_test``, ``y_test`` and
    ``options`` (the keyword arguments of :func:`decision_boundary`); and the artists of
    the last drawing: ``regions`` (filled ContourSet); ``boundary`` (the f = 0
    ContourSet, or the class-region borders for more than two classes); ``margins``
    (the f = +-r ContourSet, r from :func:`margin_level`, or None); ``support`` (the
    PathCollection marking the support vectors, or None); ``train`` and ``test``
    (lists of PathCollections, one per class); ``grid`` (``xx``, ``yy``, values);
    ``projection`` (:class:`Projection`); ``stats`` (:func:`summarize`).
    """

    def __init__(self, estimator, X, y, X_test=None, y_test=None, **options):
        self.estimator = estimator
        self.X, self.y, self.X_test, self.y_test = X, y, X_test, y_test
        self.options = options

    @classmethod
    def from_estimator(cls, estimator, X, y, X_test=None, y_test=None, *, ax=None, **options):
        """Draw the fitted classifier ``estimator`` over ``X, y`` (and test points); the
        keyword arguments are those of :func:`decision_boundary`.  Returns the display."""
        return cls(estimator, X, y, X_test, y_test, **options).plot(ax=ax)

    def plot(self, ax=None, **options):
        """Draw on ``ax`` (a new figure when None); ``options`` override those given before.
        Returns ``self``, with ``ax_``, ``figure_`` and the artists set."""
        self.options = {**self.options, **options}
        drawn = _draw(self.estimator, self.X, self.y, self.X_test, self.y_test, ax, **self.options)
        self.__dict__.update(drawn)
        self.ax_ = drawn["ax"]
        self.figure_ = self.ax_.figure
        return self

    def __repr__(self):  # pragma: no cover - cosmetic
        return f"BoundaryPlot(stats={getattr(self, 'stats', None)!r})"


def _plt():
    import matplotlib.pyplot as plt

    return plt


def _grid_limits(points, padding):
    lo = points.min(axis=0)
    hi = points.max(axis=0)
    span = np.where(hi - lo > 0, hi - lo, 1.0)
    return lo - padding * span, hi + padding * span


def _decision_on(model, Z):
    if hasattr(model, "decision_function"):
        return np.asarray(model.decision_function(Z), dtype=float)
    return None


def _pairwise_scores(model, Z):
    """One-vs-one decision values (n, k(k-1)/2), or None if the model cannot give them."""
    target = _final(model)
    if "decision_function_shape" not in getattr(target, "__dict__", {}):
        return None
    saved = target.decision_function_shape
    try:
        target.decision_function_shape = "ovo"
        return np.asarray(model.decision_function(Z), dtype=float)
    except Exception:  # noqa: BLE001 - fall back to the class indicator
        return None
    finally:
        target.decision_function_shape = saved


def _class_borders(ax, model, Z, xx, yy, idx, k):
    """Borders between predicted class regions.

    Between classes a and b the border is the 0 level of their pairwise
    decision value, kept only where a or b is predicted: a smooth curve (the
    one-vs-rest scores jump where votes change).  Without pairwise values, the
    0.5 level of each class indicator.
    """
    ovo = _pairwise_scores(model, Z)
    pairs = [(a, b) for a in range(k) for b in range(a + 1, k)]
    flat = idx.ravel()
    out = []
    if ovo is not None and ovo.ndim == 2 and ovo.shape[1] == len(pairs):
        for p, (a, b) in enumerate(pairs):
            ina, inb = flat == a, flat == b
            if not ina.any() or not inb.any():
                continue
            f = ovo[:, p]
            # orientation: positive where a is predicted (conventions differ)
            if np.mean(f[ina] > 0) < np.mean(f[inb] > 0):
                f = -f
            field = np.ma.masked_where(~(ina | inb), f).reshape(xx.shape)
            out.append(ax.contour(xx, yy, field, levels=[0.0], colors="k", linewidths=1.2, zorder=2))
        return out
    for c in range(k):
        if np.any(flat == c):
            out.append(ax.contour(xx, yy, (idx == c).astype(float), levels=[0.5], colors="k", linewidths=1.2, zorder=2))
    return out


def decision_boundary(model, X, y, X_test=None, y_test=None, ax=None, **options):
    """Draw a fitted classifier on 2-D data (or on a plane of higher-dimensional data).

    The same as ``BoundaryPlot.from_estimator(model, X, y, X_test, y_test, ax=ax, **options)``.

    Parameters
    ----------
    model : fitted classifier with ``predict`` and ``decision_function``
        (``maxmargin.SVC`` or any scikit-learn SVC-like estimator).
    X, y : training points and labels; drawn large, with a black edge.
    X_test, y_test : optional test points; drawn small, without edge.
    ax : matplotlib Axes; a new figure is made when None.
    projection : None, ``'pca'`` or ``(i, j)``; see the module documentation.
    resolution : grid points per axis for the regions and contours.
    show_margins : draw the margin lines f = -r and f = +r (dashed) for two
        classes; r = 1 but for 'l2-simplex' (see :func:`margin_level`), none
        for 'zero-one'.
    show_support : circle the support vectors (``model.support_vectors_``).
    title : True for the notebook's title (training error, test error,
        geometric margin, #SV), a string to prefix it with, or False.

    Two classes: the filled regions show f (blue negative, red positive,
    clipped where ``|f|`` is large), the boundary is the contour f = 0 and the
    margins the contours f = +-1.  More classes: each class's predicted region
    is filled with its colour and the borders between regions are drawn; no
    margin lines.

    Returns
    -------
    BoundaryPlot
    """
    return BoundaryPlot.from_estimator(model, X, y, X_test, y_test, ax=ax, **options)


def _draw(
    model,
    X,
    y,
    X_test=None,
    y_test=None,
    ax=None,
    *,
    projection=None,
    resolution=200,
    padding=0.08,
    show_regions=True,
    show_margins=True,
    show_support=True,
    title=True,
    feature_names=None,
    train_size=46,
    test_size=14,
    cmap="RdBu_r",
    alpha=0.55,
    legend=False,
):
    """The drawing of :func:`decision_boundary`: a dict of the Axes and the artists."""
    plt = None
    if ax is None:
        plt = _plt()
        _, ax = plt.subplots(figsize=(5.5, 5))
    X = np.asarray(X.toarray() if hasattr(X, "toarray") else X, dtype=float)  # sparse (LIBSVM) data too
    y = np.asarray(y)
    if X_test is not None:
        X_test = np.asarray(X_test.toarray() if hasattr(X_test, "toarray") else X_test, dtype=float)
        y_test = np.asarray(y_test)
    if str(getattr(_final(model), "kernel", "")) == "precomputed":
        raise ValueError("a model with kernel='precomputed' cannot be drawn: it needs the input points")
    if feature_names is None and getattr(model, "feature_names_in_", None) is not None:
        feature_names = list(model.feature_names_in_)
    proj = Projection(X, projection, feature_names)
    P = proj.to_plane(X)
    Pt = proj.to_plane(X_test) if X_test is not None and len(X_test) else None
    allp = P if Pt is None else np.vstack([P, Pt])
    lo, hi = _grid_limits(allp, padding)
    gx = np.linspace(lo[0], hi[0], int(resolution))
    gy = np.linspace(lo[1], hi[1], int(resolution))
    xx, yy = np.meshgrid(gx, gy)
    Z = proj.from_plane(np.column_stack([xx.ravel(), yy.ravel()]))

    classes = np.asarray(model.classes_)
    k = len(classes)
    colors = [CLASS_COLORS[i % len(CLASS_COLORS)] for i in range(k)]
    if k == 2:
        colors = [CLASS_COLORS[0], CLASS_COLORS[1]]

    regions = boundary = margins = None
    if k == 2:
        f = _decision_on(model, Z).ravel().reshape(xx.shape)
        level = margin_level(model)
        lim = float(np.nanpercentile(np.abs(f), 98)) if np.isfinite(f).any() else 1.0
        lim = max(lim, 1.05 * level if level else 1e-12)
        if show_regions:
            levels = np.linspace(-lim, lim, 23)
            regions = ax.contourf(
                xx, yy, np.clip(f, -lim, lim), levels=levels, cmap=cmap, alpha=alpha, antialiased=True, zorder=0
            )
        boundary = ax.contour(xx, yy, f, levels=[0.0], colors="k", linewidths=1.8, zorder=2)
        if show_margins and level:
            margins = ax.contour(
                xx, yy, f, levels=[-level, level], colors="k", linewidths=1.0, linestyles="--", zorder=2
            )
        values = f
    else:
        from matplotlib.colors import to_rgba

        pred = np.asarray(model.predict(Z)).reshape(xx.shape)
        idx = np.searchsorted(classes, pred)
        if show_regions:
            rgba = np.array([to_rgba(c, alpha * 0.7) for c in colors])
            regions = ax.imshow(
                rgba[idx],
                origin="lower",
                extent=(lo[0], hi[0], lo[1], hi[1]),
                aspect="auto",
                interpolation="nearest",
                zorder=0,
            )
        boundary = _class_borders(ax, model, Z, xx, yy, idx, k)
        values = idx

    train_art, test_art = [], []
    for c, cls in enumerate(classes):
        m = y == cls
        train_art.append(
            ax.scatter(
                P[m, 0],
                P[m, 1],
                s=train_size,
                c=colors[c],
                edgecolors="k",
                linewidths=0.7,
                zorder=3,
                label=f"{cls} (train)",
            )
        )
        if Pt is not None:
            mt = y_test == cls
            test_art.append(
                ax.scatter(
                    Pt[mt, 0], Pt[mt, 1], s=test_size, c=colors[c], linewidths=0, zorder=3, label=f"{cls} (test)"
                )
            )
    support = None
    sv = _support_in_input_space(model) if show_support else None
    if sv is not None and len(sv):
        S = proj.to_plane(np.asarray(sv, dtype=float))
        support = ax.scatter(
            S[:, 0],
            S[:, 1],
            s=train_size * 3.2,
            facecolors="none",
            edgecolors="k",
            linewidths=1.3,
            zorder=4,
            label="support vectors",
        )
    stats = summarize(model, X, y, X_test, y_test)
    if title:
        text = _fmt_title(stats, k)
        if isinstance(title, str):
            text = f"{title}\n{text}"
        ax.set_title(text, fontsize=9)
    ax.set_xlim(lo[0], hi[0])
    ax.set_ylim(lo[1], hi[1])
    ax.set_xlabel(proj.labels[0])
    ax.set_ylabel(proj.labels[1])
    if legend:
        ax.legend(loc="best", fontsize=7)
    return {
        "ax": ax,
        "regions": regions,
        "boundary": boundary,
        "margins": margins,
        "support": support,
        "train": train_art,
        "test": test_art,
        "grid": (xx, yy, values),
        "projection": proj,
        "stats": stats,
    }


# --------------------------------------------------------------------------- comparison


def _is_fitted(model):
    return hasattr(model, "classes_") and (hasattr(model, "support_") or hasattr(model, "coef_"))


def _label_of(model):
    p = model.get_params() if hasattr(model, "get_params") else {}
    bits = [str(p[k]) for k in ("formulation", "solver") if k in p]
    if "kernel" in p:
        bits.append(str(p["kernel"]))
    return " / ".join(bits) if bits else type(model).__name__


def _build(spec, base_params):
    """An estimator from a spec: estimator, dict of params, or (formulation, solver[, params])."""
    if hasattr(spec, "fit"):
        return spec
    if isinstance(spec, dict):
        params = dict(spec)
    elif isinstance(spec, (tuple, list)) and 2 <= len(spec) <= 3:
        params = {"formulation": spec[0], "solver": spec[1]}
        if len(spec) == 3:
            params.update(spec[2])
    else:
        raise TypeError(
            f"cannot make a model from {spec!r}: give an estimator, a dict of "
            "parameters or a (formulation, solver[, params]) tuple"
        )
    from . import SVC  # lazily: plot must import without the estimators

    return SVC(**{**base_params, **params})


def compare(
    models_or_specs, X, y, X_test=None, y_test=None, *, ncols=None, panel_size=3.6, errors="show", fig=None, **options
):
    """Several models side by side on the same data, one :func:`decision_boundary` each.

    Parameters
    ----------
    models_or_specs : iterable of estimators (fitted ones are drawn as they are,
        unfitted ones are fitted on ``X, y``), dicts of ``maxmargin.SVC``
        parameters, or ``(formulation, solver)`` / ``(formulation, solver,
        params)`` tuples.
    ncols : panels per row (default: all in one row up to 4).
    errors : ``'show'`` writes a failed fit's message in its panel (say, a hard
        margin on points that are not separable), ``'raise'`` re-raises it.
    fig : an existing Figure to draw into (cleared); else a new pyplot figure.
    options : passed to :func:`decision_boundary`; ``params`` (a dict) is
        applied to every spec (e.g. ``params={'kernel': 'rbf', 'C': 10}``).

    Returns
    -------
    (Figure, list of BoundaryPlot or Exception, one per panel)
    """
    base = dict(options.pop("params", {}) or {})
    specs = list(models_or_specs)
    if not specs:
        raise ValueError("nothing to compare")
    n = len(specs)
    ncols = int(ncols or min(n, 4))
    nrows = -(-n // ncols)
    size = (panel_size * ncols, panel_size * nrows + 0.3)
    if fig is None:
        fig = _plt().figure(figsize=size)
    else:
        fig.clear()
        fig.set_size_inches(*size)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    results = []
    for ax, spec in zip(axes, specs):
        try:
            model = _build(spec, base)
            label = _label_of(model)
            if not _is_fitted(model):
                model.fit(X, y)
            results.append(decision_boundary(model, X, y, X_test, y_test, ax=ax, title=label, **options))
        except Exception as exc:  # noqa: BLE001 - shown in the panel
            if errors == "raise":
                raise
            results.append(exc)
            ax.set_title(_spec_label(spec, base), fontsize=9)
            ax.text(
                0.5,
                0.5,
                f"{type(exc).__name__}:\n{_wrap(str(exc))}",
                ha="center",
                va="center",
                fontsize=8,
                color="#a00",
                transform=ax.transAxes,
                wrap=True,
            )
            ax.set_xticks([])
            ax.set_yticks([])
    for ax in axes[n:]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig, results


def _spec_label(spec, base):
    if hasattr(spec, "fit"):
        return _label_of(spec)
    if isinstance(spec, dict):
        p = {**base, **spec}
    elif isinstance(spec, (tuple, list)) and len(spec) >= 2:
        p = {**base, "formulation": spec[0], "solver": spec[1], **(spec[2] if len(spec) > 2 else {})}
    else:
        return repr(spec)
    return " / ".join(str(p[k]) for k in ("formulation", "solver", "kernel") if k in p)


def _wrap(text, width=40):
    import textwrap

    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False)[:8])


# --------------------------------------------------------------------------- CLI entry


def _xy_from(data):
    """(X, y) from what ``maxmargin.io.data.load_data`` returns (a pair or an object)."""
    if isinstance(data, tuple) and len(data) >= 2:
        return data[0], data[1]
    for xa, ya in (("X", "y"), ("data", "target")):
        if hasattr(data, xa) and hasattr(data, ya):
            return getattr(data, xa), getattr(data, ya)
    if isinstance(data, dict) and "X" in data and "y" in data:
        return data["X"], data["y"]
    raise TypeError(f"cannot read points and labels from {type(data).__name__}")


def plot_model_file(model_path, data_path, out_path, *, test_path=None, dpi=120, figsize=(6, 5.4), **opts):
    """Draw a saved model over a data file and write the picture (``maxmargin plot``).

    ``model_path`` is read with ``maxmargin.load_model``, ``data_path`` (and
    ``test_path``, drawn as small test points) with
    ``maxmargin.io.data.load_data``.  The format of ``out_path`` follows its
    suffix (png, svg, pdf, ...).  ``opts`` go to :func:`decision_boundary`.
    Uses matplotlib's Agg canvas directly, so no display is needed.
    Returns ``out_path``.
    """
    import scipy.sparse as sp
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from .io import load_any_model
    from .io.data import load_data

    model, _ = load_any_model(model_path)
    n_features = getattr(model, "n_features_in_", None)  # sparse data files may omit trailing features
    X, y = _xy_from(load_data(data_path, n_features=n_features))
    if sp.issparse(X):
        X = X.toarray()
    Xt = yt = None
    if test_path is not None:
        Xt, yt = _xy_from(load_data(test_path, n_features=n_features))
        if sp.issparse(Xt):
            Xt = Xt.toarray()
    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    decision_boundary(model, X, y, Xt, yt, ax=ax, **opts)
    fig.tight_layout()
    fig.savefig(out_path, dpi=dpi)
    return out_path
