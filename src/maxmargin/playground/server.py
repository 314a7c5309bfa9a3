r"""The playground's web server: a Starlette ASGI application served by uvicorn.

Routes
------
``GET /``
    the page (``static/index.html``; plain JavaScript, nothing from the network).
``GET /static/...``
    its script and style sheet.
``GET /api/options``
    what the page may ask for, read from :mod:`maxmargin.formulations` at each
    call (formulations, solvers, the valid pairs, the solvers limited to the
    linear kernel, kernels), the class labels, the limits below and the
    defaults.
``POST /api/fit``
    a JSON body (``application/json``)::

        {"client": "tab-4f2a", "seq": 17,
         "points": [[x1, x2, label], ...]        # or [x1, x2, label, u]
         "params": {"formulation": "l1", "solver": "smo", "kernel": "rbf",
                    "C": 10, "sigma": 0.5, "degree": 3, "coef0": 1},
         "train_percent": 30, "seed": 0,
         "grid": {"xmin": -3, "xmax": 3, "ymin": -3, "ymax": 3, "nx": 100, "ny": 100}}

    Labels are integers from :data:`CLASS_LABELS`.  A point goes to the
    training set when its split key ``u`` (a number in [0, 1) the page draws
    once per point, so the split stays put while points are added) is below
    ``train_percent / 100``; without keys a permutation seeded by ``seed``
    takes the first ``round(n * train_percent / 100)`` points.  ``gamma`` may
    be given instead of ``sigma`` (rbf: ``gamma = 1 / (2 sigma^2)``);
    ``"sigma": "median"`` takes sigma from the training points (the median
    pairwise distance, seed 002's ``gaussianKernel[fTr]``).

    The answer (200) is a JSON object:

    ``ok`` true; ``seq``; ``classes`` (the labels of the training set,
    sorted); ``train`` (0/1 per point); ``support`` (indices of the points
    that are support vectors); ``grid`` (the request's grid plus ``kind``:
    ``"binary"`` with ``values`` = f row by row, y rising, and
    ``margin_level`` r, the margin lines being f = +-r: 1, rho for
    l2-simplex, null for zero-one; or ``"multiclass"`` with ``values`` = the
    index into ``classes`` of the predicted class and ``borders`` = per class
    the smallest one-vs-one value in its favour, whose 0 levels are the region
    borders); ``numbers`` (train_error, test_error, margin, n_sv, loo_bound,
    objective, n_iter, fit_time, n_train, n_test, converged, gamma);
    ``warnings`` (words); ``elapsed`` (seconds on the server).

    A fit that fails for a reason of the data or the formulation (a hard
    margin on points that are not separable, a training set with one class,
    a solver that needs the linear kernel) answers 200 with
    ``{"ok": false, "error": words}``.

Validation
----------
Every request is checked before any work: body size (``max_body_bytes``),
JSON, known fields only, at most ``max_points`` points (5000 by default) of
finite coordinates within ``max_abs_coord`` and known labels, parameters inside
:data:`LIMITS`, a (formulation, solver) pair the library supports.  A bad
request gets a 4xx (400 invalid, 413 too large, 415 not JSON) with
``{"ok": false, "error": message, "field": where}``.  Host headers other than
loopback names are refused (400), which keeps other web sites from reaching
the server through DNS rebinding.

Staying responsive
------------------
Fits run in a thread pool, one at a time (a lock).  Each request carries the
page's ``client`` id and a rising ``seq``; the server remembers the newest
``seq`` per client.  A request older than that is answered 409 at once, a
queued one is skipped when it reaches the lock, and a running fit is stopped
through the estimator's ``callback`` as soon as a newer request arrives.  Every
fit also stops after ``fit_time_limit`` seconds (3 by default).  The page
aborts its own stale requests too, so a dragged slider costs at most one fit
in flight plus the newest.
"""
from __future__ import annotations

import asyncio
import ipaddress
import json
import math
import re
import socket
import sys
import threading
import time
import warnings
import webbrowser
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["create_app", "serve", "run_in_thread", "LIMITS", "CLASS_LABELS", "KERNELS",
           "RequestError", "parse_fit_request"]

STATIC_DIR = Path(__file__).resolve().parent / "static"

#: Class labels the page uses: +1 and -1 first, then three more classes.
CLASS_LABELS = (1, -1, 2, 3, 4)
#: Kernels offered (precomputed and callables make no sense for drawn points).
KERNELS = ("linear", "poly", "rbf", "sigmoid")
#: Formulations that ignore C (the page disables the C slider for them).
NO_C = ("hard",)

#: Limits on requests (``create_app`` takes overrides as keyword arguments).
LIMITS = {
    "max_points": 5000,
    "max_body_bytes": 1_000_000,
    "max_abs_coord": 1e6,
    "C": (1e-4, 1e6),
    "sigma": (1e-4, 1e4),
    "gamma": (1e-8, 1e4),
    "degree": (1, 10),
    "coef0": (-100.0, 100.0),
    "grid": (2, 300),
    "train_percent": (1.0, 100.0),
    "fit_time_limit": 3.0,
}

DEFAULTS = {
    "formulation": "l1", "solver": "smo", "kernel": "rbf", "C": 10.0, "sigma": 0.7,
    "gamma": 1.0, "degree": 3, "coef0": 1.0, "train_percent": 30, "grid": 100,
}

_CLIENT_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_TOP_KEYS = {"client", "seq", "points", "params", "train_percent", "seed", "grid"}
_PARAM_KEYS = {"formulation", "solver", "kernel", "C", "sigma", "gamma", "degree", "coef0"}
_GRID_KEYS = {"xmin", "xmax", "ymin", "ymax", "nx", "ny"}


class RequestError(Exception):
    """A request the server refuses: HTTP ``status``, a message, the offending field."""

    def __init__(self, message, status=400, field=None):
        super().__init__(message)
        self.status = status
        self.field = field


# --------------------------------------------------------------------------- validation

def _real(value, name, lo=None, hi=None, integer=False):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        kind = "an integer" if integer else "a number"
        raise RequestError(f"{name} must be {kind}, got {json.dumps(value)[:40]}", field=name)
    if integer and not (isinstance(value, int) or float(value).is_integer()):
        raise RequestError(f"{name} must be an integer, got {value!r}", field=name)
    if not math.isfinite(value):
        raise RequestError(f"{name} must be finite", field=name)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise RequestError(f"{name} must be between {lo:g} and {hi:g}, got {value:g}", field=name)
    return int(value) if integer else float(value)


def _unknown(keys, allowed, where):
    extra = sorted(set(keys) - allowed)
    if extra:
        raise RequestError(f"unknown field{'s' if len(extra) > 1 else ''} in {where}: "
                           f"{', '.join(map(repr, extra))}; allowed: {', '.join(sorted(allowed))}",
                           field=where)


@dataclass
class FitRequest:
    """A validated ``/api/fit`` request."""

    client: str
    seq: int
    X: np.ndarray           # (n, 2)
    labels: np.ndarray      # (n,) int
    keys: np.ndarray | None  # (n,) split keys in [0, 1) or None
    params: dict
    train_percent: float
    seed: int
    grid: dict | None


def _formulation_lists():
    from .. import formulations as F

    return tuple(F.FORMULATIONS), tuple(F.SOLVERS), set(map(tuple, F.VALID))


def _linear_only():
    from .. import formulations as F

    return tuple(getattr(F, "LINEAR_ONLY", ()))


def _parse_points(points, limits):
    if not isinstance(points, list):
        raise RequestError("points must be a list of [x1, x2, label] triples", field="points")
    n = len(points)
    if n > limits["max_points"]:
        raise RequestError(f"too many points: {n} (at most {limits['max_points']})", status=413,
                           field="points")
    if n < 2:
        raise RequestError(f"need at least 2 points, got {n}", field="points")
    width = None
    X = np.empty((n, 2))
    labels = np.empty(n, dtype=np.int64)
    keys = np.empty(n)
    bound = limits["max_abs_coord"]
    known = set(CLASS_LABELS)
    for i, p in enumerate(points):
        if not isinstance(p, list) or len(p) not in (3, 4):
            raise RequestError(f"points[{i}] must be [x1, x2, label] or [x1, x2, label, u]",
                               field=f"points[{i}]")
        if width is None:
            width = len(p)
        elif len(p) != width:
            raise RequestError(f"points[{i}] has {len(p)} fields, points[0] has {width}",
                               field=f"points[{i}]")
        for j in (0, 1):
            X[i, j] = _real(p[j], f"points[{i}][{j}]", -bound, bound)
        lab = p[2]
        if isinstance(lab, bool) or not isinstance(lab, (int, float)) or lab not in known:
            raise RequestError(f"points[{i}] has label {json.dumps(lab)[:20]}; known classes are "
                               f"{', '.join(map(str, CLASS_LABELS))}", field=f"points[{i}][2]")
        labels[i] = int(lab)
        if width == 4:
            keys[i] = _real(p[3], f"points[{i}][3]", 0.0, 1.0)
    return X, labels, (keys if width == 4 else None)


def parse_fit_request(body, limits=None):
    """Check a decoded JSON body; return a :class:`FitRequest` or raise :class:`RequestError`."""
    limits = {**LIMITS, **(limits or {})}
    if not isinstance(body, dict):
        raise RequestError("the body must be a JSON object")
    _unknown(body.keys(), _TOP_KEYS, "the request")
    if "points" not in body:
        raise RequestError("missing field 'points'", field="points")
    client = body.get("client", "default")
    if not isinstance(client, str) or not _CLIENT_RE.match(client):
        raise RequestError("client must be 1-64 letters, digits, '.', '_' or '-'", field="client")
    seq = _real(body.get("seq", 0), "seq", 0, 2 ** 53, integer=True)
    X, labels, keys = _parse_points(body["points"], limits)

    params = body.get("params", {})
    if not isinstance(params, dict):
        raise RequestError("params must be an object", field="params")
    _unknown(params.keys(), _PARAM_KEYS, "params")
    forms, solvers, valid = _formulation_lists()
    p = {}
    p["formulation"] = params.get("formulation", DEFAULTS["formulation"])
    p["solver"] = params.get("solver", DEFAULTS["solver"])
    p["kernel"] = params.get("kernel", DEFAULTS["kernel"])
    for name, allowed in (("formulation", forms), ("solver", solvers), ("kernel", KERNELS)):
        if p[name] not in allowed:
            raise RequestError(f"params.{name} must be one of {', '.join(allowed)}; got "
                               f"{json.dumps(p[name])[:40]}", field=f"params.{name}")
    if (p["formulation"], p["solver"]) not in valid:
        ok = sorted(s for f, s in valid if f == p["formulation"])
        raise RequestError(f"solver {p['solver']!r} cannot solve formulation {p['formulation']!r}; "
                           f"it can be solved by: {', '.join(ok) or 'none'}", field="params.solver")
    p["C"] = _real(params.get("C", DEFAULTS["C"]), "params.C", *limits["C"])
    if "sigma" in params and "gamma" in params:
        raise RequestError("give params.sigma or params.gamma, not both", field="params.sigma")
    if params.get("sigma") == "median":    # seed 002's gaussianKernel[fTr]: from the data
        p["sigma"] = "median"
    elif "sigma" in params:
        p["sigma"] = _real(params["sigma"], "params.sigma", *limits["sigma"])
    if "gamma" in params:
        p["gamma"] = _real(params["gamma"], "params.gamma", *limits["gamma"])
    p["degree"] = _real(params.get("degree", DEFAULTS["degree"]), "params.degree",
                        *limits["degree"], integer=True)
    p["coef0"] = _real(params.get("coef0", DEFAULTS["coef0"]), "params.coef0", *limits["coef0"])

    train_percent = _real(body.get("train_percent", DEFAULTS["train_percent"]), "train_percent",
                          *limits["train_percent"])
    seed = _real(body.get("seed", 0), "seed", 0, 2 ** 32 - 1, integer=True)

    grid = body.get("grid")
    if grid is not None:
        if not isinstance(grid, dict):
            raise RequestError("grid must be an object", field="grid")
        _unknown(grid.keys(), _GRID_KEYS, "grid")
        missing = sorted(_GRID_KEYS - set(grid))
        if missing:
            raise RequestError(f"grid needs {', '.join(missing)}", field="grid")
        b = limits["max_abs_coord"]
        g = {k: _real(grid[k], f"grid.{k}", -2 * b, 2 * b) for k in ("xmin", "xmax", "ymin", "ymax")}
        for k in ("nx", "ny"):
            g[k] = _real(grid[k], f"grid.{k}", *limits["grid"], integer=True)
        if not (g["xmax"] > g["xmin"] and g["ymax"] > g["ymin"]):
            raise RequestError("grid needs xmin < xmax and ymin < ymax", field="grid")
        grid = g
    return FitRequest(client, seq, X, labels, keys, p, train_percent, seed, grid)


# --------------------------------------------------------------------------- fitting

class FitFailed(Exception):
    """The request was fine but no model comes out (words for the page)."""


class Stale(Exception):
    """A newer request of the same client arrived."""


def _split(req):
    n = len(req.labels)
    share = req.train_percent / 100.0
    if req.keys is not None:
        train = req.keys < share
    else:
        order = np.random.default_rng(req.seed).permutation(n)
        train = np.zeros(n, dtype=bool)
        train[order[: max(1, int(round(n * share)))]] = True
    return train


def _label(v):
    """A class label as the page shows it: +1, -1, 2, 3, 4."""
    v = int(v)
    return f"{v:+d}" if v in (1, -1) else str(v)


def _linearly_separable(X, y):
    """Whether some (w, b) has y_i (w.x_i + b) >= 1 for all i (a small LP)."""
    from scipy.optimize import linprog

    ypm = np.where(y == y[0], 1.0, -1.0)
    A = -ypm[:, None] * np.column_stack([X, np.ones(len(X))])
    res = linprog(np.zeros(X.shape[1] + 1), A_ub=A, b_ub=-np.ones(len(X)),
                  bounds=[(None, None)] * (X.shape[1] + 1), method="highs")
    return res.status != 2


def _finite_list(a, digits=None):
    a = np.asarray(a, dtype=float)
    if digits is not None:
        a = np.round(a, digits)
    if np.all(np.isfinite(a)):
        return a.tolist()
    return [v if math.isfinite(v) else None for v in a.tolist()]


def _clean(obj):
    """JSON-safe: non-finite floats become None, numpy scalars plain numbers."""
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        v = float(obj)
        return v if math.isfinite(v) else None
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


class Fitter:
    """Runs fits one at a time and skips or stops those a newer request superseded."""

    def __init__(self, time_limit=3.0, max_clients=1000):
        self.time_limit = float(time_limit)
        self.lock = threading.Lock()
        self._latest = OrderedDict()
        self._latest_lock = threading.Lock()
        self._max_clients = max_clients

    def register(self, client, seq):
        """Note a request; False if a newer one of the same client is already known."""
        with self._latest_lock:
            last = self._latest.get(client, -1)
            if seq < last:
                return False
            self._latest[client] = seq
            self._latest.move_to_end(client)
            while len(self._latest) > self._max_clients:
                self._latest.popitem(last=False)
            return True

    def is_stale(self, client, seq):
        with self._latest_lock:
            return self._latest.get(client, -1) > seq

    def newest(self, client):
        with self._latest_lock:
            return self._latest.get(client, -1)

    def warm_up(self):
        with self.lock:
            _warm_up()

    def run(self, req):
        """Fit under the lock; returns the JSON payload or raises Stale / FitFailed."""
        if self.is_stale(req.client, req.seq):
            raise Stale()
        with self.lock:
            if self.is_stale(req.client, req.seq):
                raise Stale()
            return self._fit(req)

    def _fit(self, req):
        from ..plot import margin_level, summarize
        from ..svm import SVC

        t0 = time.perf_counter()
        train = _split(req)
        Xtr, ytr = req.X[train], req.labels[train]
        Xte, yte = req.X[~train], req.labels[~train]
        present = np.unique(ytr)
        if present.size < 2:
            if present.size == 0:
                raise FitFailed("the training set is empty: raise the training share")
            raise FitFailed(f"the training set has only class {_label(present[0])}: add points of "
                            "another class or raise the training share")
        p = req.params
        if p["formulation"] == "hard" and p["kernel"] == "linear":
            pairs = [(a, b) for i, a in enumerate(present) for b in present[i + 1:]]
            for a, b in pairs:
                m = (ytr == a) | (ytr == b)
                if not _linearly_separable(Xtr[m], ytr[m]):
                    raise FitFailed(
                        f"hard margin: the training points of classes {_label(a)} and {_label(b)} are not "
                        "linearly separable, so no hard-margin solution exists; choose a soft "
                        "margin (l1 or l2), another kernel, or move the points")

        deadline = t0 + self.time_limit
        stop = {"reason": None}

        def callback(info):
            if self.is_stale(req.client, req.seq):
                stop["reason"] = "stale"
                return False
            if time.perf_counter() > deadline:
                stop["reason"] = "time"
                return False
            return True

        kw = dict(formulation=p["formulation"], solver=p["solver"], kernel=p["kernel"], C=p["C"],
                  degree=p["degree"], coef0=p["coef0"], callback=callback,
                  time_limit=self.time_limit)
        if p["kernel"] == "rbf" and p.get("sigma") == "median":
            kw["gamma"] = "median"
        elif p["kernel"] == "rbf" and "sigma" in p:
            kw["sigma"] = p["sigma"]
        elif "gamma" in p:
            kw["gamma"] = p["gamma"]
        elif isinstance(p.get("sigma"), float):
            kw["gamma"] = 1.0 / (2.0 * p["sigma"] ** 2)
        model = SVC(**kw)
        t_fit = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                model.fit(Xtr, ytr)
            except Exception as exc:  # noqa: BLE001 - every failure goes to the page in words
                if stop["reason"] == "stale" or self.is_stale(req.client, req.seq):
                    raise Stale() from exc
                raise FitFailed(_describe_failure(exc, p)) from exc
        fit_time = time.perf_counter() - t_fit
        if stop["reason"] == "stale" or self.is_stale(req.client, req.seq):
            raise Stale()
        messages = []
        for w in caught:
            text = str(w.message)
            if stop["reason"] == "time" and issubclass(w.category, Warning) and "callback" in text:
                continue
            if text not in messages:
                messages.append(text)
        if stop["reason"] == "time":
            messages.insert(0, f"the solver was stopped at the playground's time limit "
                               f"({self.time_limit:g} s); the picture shows where it got to")
        converged = getattr(model, "fit_status_", 0) == 0 and stop["reason"] is None
        stats = summarize(model, Xtr, ytr, Xte if len(yte) else None, yte if len(yte) else None)
        if p["formulation"] == "hard" and stats["train_error"] and stats["train_error"] > 0:
            raise FitFailed(
                f"hard margin: the training points are not separable with the {p['kernel']} "
                f"kernel (the solver ended with {100 * stats['train_error']:.1f}% training "
                "error), so no hard-margin solution exists; choose a soft margin (l1 or l2) or "
                "a more flexible kernel")

        grid = req.grid or _default_grid(req.X)
        gx = np.linspace(grid["xmin"], grid["xmax"], grid["nx"])
        gy = np.linspace(grid["ymin"], grid["ymax"], grid["ny"])
        xx, yy = np.meshgrid(gx, gy)
        G = np.column_stack([xx.ravel(), yy.ravel()])
        classes = model.classes_
        level = borders = None
        if len(classes) == 2:
            if p["kernel"] == "linear":  # f = w.x + b exactly: skips the kernel block
                f = G @ np.asarray(model.coef_, dtype=float)[0] + float(model.intercept_[0])
            else:
                f = model.decision_function(G)
            level = margin_level(model)
            # round to a 1e-4 share of the margin scale (l2-simplex values are small)
            scale = level if level else max(float(np.nanmax(np.abs(f))), 1e-300)
            digits = int(min(12, max(4, 4 - np.floor(np.log10(scale)))))
            values = _finite_list(f, digits)
            kind = "binary"
        else:
            values = np.searchsorted(classes, model.predict(G)).tolist()
            kind = "multiclass"
            borders = _class_fields(model, G)
        train_idx = np.flatnonzero(train)
        support = train_idx[np.asarray(model.support_, dtype=int)].tolist()
        numbers = dict(stats)
        numbers.update(fit_time=fit_time, n_train=int(train.sum()), n_test=int((~train).sum()),
                       converged=bool(converged), gamma=getattr(model, "_gamma", None))
        payload = _clean({
            "ok": True,
            "seq": req.seq,
            "classes": classes.tolist(),
            "train": train.astype(int).tolist(),
            "support": support,
            "grid": {**grid, "kind": kind, "margin_level": level},
            "numbers": numbers,
            "warnings": messages,
        })
        # the big lists are JSON-safe already (_finite_list)
        payload["grid"].update(values=values, borders=borders)
        payload["elapsed"] = time.perf_counter() - t0
        return payload


def _class_fields(model, G):
    """Per class c, min over the other classes b of the one-vs-one value that favours c.

    Positive where c wins every duel (its region when the votes have no cycle);
    its 0 level is a smooth border between regions, which the page draws.
    """
    k = len(model.classes_)
    saved = model.decision_function_shape
    try:
        model.decision_function_shape = "ovo"
        ovo = np.asarray(model.decision_function(G), dtype=float)
    except Exception:  # noqa: BLE001 - the page falls back to the class indicator
        return None
    finally:
        model.decision_function_shape = saved
    if ovo.ndim != 2 or ovo.shape[1] != k * (k - 1) // 2:
        return None
    fields = np.full((k, G.shape[0]), np.inf)
    col = 0
    for a in range(k):
        for b in range(a + 1, k):  # positive for the first class of the pair (a)
            fields[a] = np.minimum(fields[a], ovo[:, col])
            fields[b] = np.minimum(fields[b], -ovo[:, col])
            col += 1
    return [_finite_list(f, 3) for f in fields]


def _describe_failure(exc, params):
    """Words for the page about a fit that raised."""
    text = _ANSI.sub("", str(exc)).strip() or type(exc).__name__
    if len(text) > 600:
        text = text[:600].rstrip() + " …"
    if type(exc).__name__ == "NotSeparableError" or params["formulation"] == "hard" and \
            "separab" in text.lower():
        return (f"hard margin: {text}. No hard-margin solution exists for these training points "
                f"with the {params['kernel']} kernel; choose a soft margin (l1 or l2), a more "
                "flexible kernel, or move the points")
    if isinstance(exc, ImportError):
        return f"the {params['solver']!r} solver needs a package that is not installed: {text}"
    if isinstance(exc, (ValueError, TypeError, NotImplementedError)):
        return f"{params['formulation']} / {params['solver']} / {params['kernel']}: {text}"
    return f"the fit failed ({type(exc).__name__}): {text}"


def _default_grid(X, n=DEFAULTS["grid"]):
    lo, hi = X.min(axis=0), X.max(axis=0)
    pad = np.where(hi > lo, 0.1 * (hi - lo), 1.0)
    lo, hi = lo - pad, hi + pad
    return {"xmin": float(lo[0]), "xmax": float(hi[0]), "ymin": float(lo[1]),
            "ymax": float(hi[1]), "nx": n, "ny": n}


def _warm_up():
    """Compile the solvers' JIT code before the first request needs it."""
    from ..svm import SVC

    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 2))
    y = np.where(X[:, 0] > 0, 1, -1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kernel in ("rbf", "linear"):
            try:
                SVC(kernel=kernel, time_limit=5).fit(X, y).decision_function(X)
            except Exception:  # noqa: BLE001 - warm-up is best effort
                pass


# --------------------------------------------------------------------------- the app

def options_payload(limits):
    forms, solvers, valid = _formulation_lists()
    return _clean({
        "formulations": list(forms),
        "solvers": list(solvers),
        "valid": sorted([list(v) for v in valid]),
        "kernels": list(KERNELS),
        "no_C": [f for f in forms if f in NO_C],
        "linear_only": [s for s in _linear_only() if s in solvers],
        "classes": list(CLASS_LABELS),
        "limits": {k: (list(v) if isinstance(v, tuple) else v) for k, v in limits.items()},
        "defaults": DEFAULTS,
    })


def create_app(*, warm_up=True, allowed_hosts=("127.0.0.1", "localhost", "::1", "[::1]"),
               **limits):
    """The playground as a Starlette application.

    ``limits`` override entries of :data:`LIMITS` (``max_points``,
    ``max_body_bytes``, ``fit_time_limit``, ...).  ``allowed_hosts`` are the
    Host header values accepted (loopback names; ``"*"`` accepts any).
    ``warm_up`` compiles the solvers in the background at start-up.
    """
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware
    from starlette.responses import FileResponse, JSONResponse
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    unknown = set(limits) - set(LIMITS)
    if unknown:
        raise TypeError(f"unknown limits: {', '.join(sorted(unknown))}")
    limits = {**LIMITS, **limits}
    fitter = Fitter(limits["fit_time_limit"])
    pool = {}  # the thread pool, made at start-up (or at the first fit) and shut at the end

    def executor():
        if "executor" not in pool:
            pool["executor"] = ThreadPoolExecutor(max_workers=4, thread_name_prefix="maxmargin-fit")
        return pool["executor"]
    no_cache = {"Cache-Control": "no-cache"}

    def error(exc):
        return JSONResponse({"ok": False, "error": str(exc), "field": exc.field},
                            status_code=exc.status)

    async def index(request):
        return FileResponse(STATIC_DIR / "index.html", headers={
            **no_cache,
            "Content-Security-Policy": "default-src 'self'; img-src 'self' data: blob:; "
                                       "style-src 'self'; object-src 'none'",
        })

    async def options(request):
        return JSONResponse(options_payload(limits), headers=no_cache)

    async def fit(request):
        try:
            ctype = request.headers.get("content-type", "")
            if ctype.split(";")[0].strip().lower() != "application/json":
                raise RequestError("send the request as application/json", status=415)
            size = request.headers.get("content-length")
            cap = limits["max_body_bytes"]
            if size is not None and (not size.isdigit() or int(size) > cap):
                raise RequestError(f"request body too large (at most {cap} bytes)", status=413)
            chunks, total = [], 0
            async for chunk in request.stream():
                total += len(chunk)
                if total > cap:
                    raise RequestError(f"request body too large (at most {cap} bytes)", status=413)
                chunks.append(chunk)
            try:
                body = json.loads(b"".join(chunks), parse_constant=_reject_constant)
            except (ValueError, RecursionError) as exc:
                raise RequestError(f"the body is not valid JSON: {exc}") from None
            req = parse_fit_request(body, limits)
        except RequestError as exc:
            return error(exc)
        if not fitter.register(req.client, req.seq):
            return JSONResponse({"ok": False, "stale": True, "seq": req.seq,
                                 "error": f"superseded by request {fitter.newest(req.client)}"},
                                status_code=409)
        loop = asyncio.get_running_loop()
        try:
            payload = await loop.run_in_executor(executor(), fitter.run, req)
        except Stale:
            return JSONResponse({"ok": False, "stale": True, "seq": req.seq,
                                 "error": f"superseded by request {fitter.newest(req.client)}"},
                                status_code=409)
        except FitFailed as exc:
            return JSONResponse({"ok": False, "seq": req.seq, "error": str(exc)})
        return JSONResponse(payload)

    @asynccontextmanager
    async def lifespan(app):
        if warm_up:
            executor().submit(fitter.warm_up)
        yield
        ex = pool.pop("executor", None)
        if ex is not None:
            ex.shutdown(wait=False, cancel_futures=True)

    routes = [
        Route("/", index),
        Route("/api/options", options),
        Route("/api/fit", fit, methods=["POST"]),
        Mount("/static", app=StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))]
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    app.state.limits = limits
    app.state.fitter = fitter
    return app


def _reject_constant(name):
    raise ValueError(f"{name} is not a number JSON allows")


# --------------------------------------------------------------------------- serving

def _loopback(host):
    """The address to bind for ``host``; refuses anything but loopback."""
    if host == "localhost":
        return "127.0.0.1"
    try:
        addr = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        raise ValueError(f"the playground binds to loopback only; {host!r} is not a loopback "
                         "address (use 127.0.0.1, ::1 or localhost)") from None
    if not addr.is_loopback:
        raise ValueError(f"the playground binds to loopback only; {host!r} is not a loopback "
                         "address (use 127.0.0.1, ::1 or localhost)")
    return str(addr)


def _bind(host, port):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, int(port)))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.setblocking(False)
    return sock


def _url(sock):
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def _server(app_options, log_level):
    import uvicorn

    config = uvicorn.Config(create_app(**app_options), log_level=log_level, lifespan="on",
                            access_log=False)
    return uvicorn.Server(config)


def serve(host="127.0.0.1", port=0, open_browser=True, *, log_level="warning", **app_options):
    """Serve the playground until interrupted (Ctrl+C).

    Binds to ``host`` (loopback only: 127.0.0.1, ::1 or localhost) on ``port``
    (0: a free port), prints the address, and opens it in the default browser
    unless ``open_browser`` is False.  ``app_options`` go to :func:`create_app`.
    """
    bind_host = _loopback(host)
    sock = _bind(bind_host, port)
    url = _url(sock)
    server = _server(app_options, log_level)
    print(f"maxmargin playground: {url}  (Ctrl+C to stop)", flush=True)
    if open_browser:
        def _open():
            while not server.started and not server.should_exit:
                time.sleep(0.05)
            if server.started:
                webbrowser.open(url)
        threading.Thread(target=_open, daemon=True).start()
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # pragma: no cover - interactive
        pass
    finally:
        sock.close()
    return url


class RunningServer:
    """A playground served from a background thread (tests, screenshots)."""

    def __init__(self, server, thread, sock, url):
        self.server, self.thread, self.sock, self.url = server, thread, sock, url

    def stop(self, timeout=10):
        self.server.should_exit = True
        self.thread.join(timeout)
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def run_in_thread(host="127.0.0.1", port=0, *, log_level="warning", timeout=30, **app_options):
    """Start the playground in a daemon thread; returns a :class:`RunningServer`
    (``.url``, ``.stop()``, usable as a context manager) once it accepts requests."""
    bind_host = _loopback(host)
    sock = _bind(bind_host, port)
    server = _server(app_options, log_level)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True,
                              name="maxmargin-playground")
    thread.start()
    t_end = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > t_end:
            server.should_exit = True
            sock.close()
            raise RuntimeError("the playground server did not start")
        time.sleep(0.02)
    return RunningServer(server, thread, sock, _url(sock))


if __name__ == "__main__":  # pragma: no cover
    serve(open_browser="--no-browser" not in sys.argv)
