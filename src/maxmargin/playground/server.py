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
    linear kernel, kernels), ``unavailable`` (``{solver: reason}`` for the
    solvers whose packages are not installed here, e.g. qp and primal-qp
    without qpsolvers), the class labels, the limits below and the defaults.
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
    takes the first ``round(n * train_percent / 100)`` points.  While some
    class has fewer than ``min_class_for_test`` points (10) every point trains,
    as in svm-toy, and ``split_note`` says so.  ``gamma`` may
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
    borders; values are rounded to about 1e-6 of their range, whatever the
    scale of f); ``numbers``: train_error, test_error, ``margin`` (per pair
    1/||w||, rho/||w|| for l2-simplex: the half-width of the margin band, as
    the CLI prints it; null for zero-one), ``min_yf_margin`` (min y f / ||w||
    over the training points: negative with training errors), margin_rule,
    n_sv, ``sv_rule`` (null, or words when the solver has no dual coefficients
    (subgradient, random search) and the support vectors are the training
    points with y f <= 1), loo_bound (#SV / n_train), objective, n_iter,
    fit_time, n_train, n_test, converged, ``stopped`` ("time" when the time
    limit stopped the solver), gamma; ``warnings`` (words); ``split_note``;
    ``elapsed`` (seconds on the server).

    A fit that fails for a reason of the data or the formulation (a hard
    margin on points that are not separable, a training set with one class,
    a solver that needs the linear kernel) answers 200 with
    ``{"ok": false, "error": words}``.

Validation
----------
Every request is checked before any work: body size (``max_body_bytes``),
JSON, known fields only, at most ``max_points`` points (5000 by default) of
finite coordinates within ``max_abs_coord`` (integers too large for a float
included) and known labels, parameters inside :data:`LIMITS`, a (formulation,
solver) pair the library supports and whose packages are installed.  A bad
request gets a 4xx (400 invalid, 413 too large, 415 not JSON) with
``{"ok": false, "error": message, "field": where}``; unknown paths and methods
answer JSON too, and a failure the server did not foresee answers a JSON 500
naming the exception (and logs one line), never a traceback.  A client that
disconnects while sending its body gets no error logged.  Host headers other than
loopback names are refused (400), which keeps other web sites from reaching
the server through DNS rebinding.

Staying responsive
------------------
Fits run in a thread pool, one at a time (a lock).  Each request carries the
page's ``client`` id and a rising ``seq``; the server remembers the newest
``seq`` per client.  A request older than that is answered 409 at once, a
queued one is skipped when it reaches the lock, and a running fit is stopped
through the estimator's ``callback`` as soon as a newer request arrives or its
client disconnects (the server polls ``request.is_disconnected()`` while the
fit runs; a queued request of a gone client is dropped).  Every fit also stops
after ``fit_time_limit`` seconds (3 by default); the whole request, the
numbers and the picture included, stays within ``request_time_limit`` (8 s):
after the fit the server times the evaluation at the points, estimates the
grid's cost from it (grid points x support vectors x pairs), makes the grid
coarser (down to ``min_grid``) or refuses in words, and checks the clock and
the client between chunks.  The page aborts its own stale requests too, so a
dragged slider costs at most one fit in flight plus the newest.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
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

__all__ = [
    "create_app",
    "serve",
    "run_in_thread",
    "LIMITS",
    "CLASS_LABELS",
    "KERNELS",
    "RequestError",
    "parse_fit_request",
]

STATIC_DIR = Path(__file__).resolve().parent / "static"
_log = logging.getLogger("maxmargin.playground")

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
    # the whole request (fit, then the numbers and the picture); the grid is made coarser, down
    # to min_grid x min_grid, or the request refused in words, to stay inside it
    "request_time_limit": 8.0,
    "min_grid": 20,
    # with fewer points than this in some class, every point trains (svm-toy trains on all)
    "min_class_for_test": 10,
}

DEFAULTS = {
    "formulation": "l1",
    "solver": "smo",
    "kernel": "rbf",
    "C": 10.0,
    "sigma": 0.7,
    "gamma": 1.0,
    "degree": 3,
    "coef0": 1.0,
    "train_percent": 30,
    "grid": 100,
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
    if isinstance(value, int) and abs(value) > 2**1000:  # beyond a float: no OverflowError later
        where = f"between {lo:g} and {hi:g}" if lo is not None and hi is not None else "a smaller number"
        raise RequestError(f"{name} must be {where}, got an integer of {len(str(abs(value)))} digits", field=name)
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
        raise RequestError(
            f"unknown field{'s' if len(extra) > 1 else ''} in {where}: "
            f"{', '.join(map(repr, extra))}; allowed: {', '.join(sorted(allowed))}",
            field=where,
        )


@dataclass
class FitRequest:
    """A validated ``/api/fit`` request."""

    client: str
    seq: int
    X: np.ndarray  # (n, 2)
    labels: np.ndarray  # (n,) int
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


def _qp_missing():
    """Why the QP solvers cannot run here (None when they can)."""
    try:
        from ..solvers import qp as _qp

        backends = tuple(getattr(_qp, "BACKENDS", ("clarabel", "osqp", "cvxopt")))
    except Exception:  # noqa: BLE001 - the module is being reworked: fall back to the usual list
        backends = ("clarabel", "osqp", "cvxopt")
    try:
        import qpsolvers
    except ImportError:
        return (
            "the qpsolvers package and a QP backend (one of "
            + ", ".join(backends)
            + ") are not installed (pip install qpsolvers clarabel)"
        )
    found = set(getattr(qpsolvers, "available_solvers", ())) & set(backends)
    if not found:
        return f"qpsolvers has no QP backend installed (one of {', '.join(backends)}; pip install clarabel)"
    return None


def solver_availability():
    """``{solver: reason}`` for the solvers that cannot run on this machine (a package is missing)."""
    missing = {}
    why = _qp_missing()
    if why:
        missing.update({"qp": why, "primal-qp": why})
    return missing


def _parse_points(points, limits):
    if not isinstance(points, list):
        raise RequestError("points must be a list of [x1, x2, label] triples", field="points")
    n = len(points)
    if n > limits["max_points"]:
        raise RequestError(f"too many points: {n} (at most {limits['max_points']})", status=413, field="points")
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
            raise RequestError(f"points[{i}] must be [x1, x2, label] or [x1, x2, label, u]", field=f"points[{i}]")
        if width is None:
            width = len(p)
        elif len(p) != width:
            raise RequestError(f"points[{i}] has {len(p)} fields, points[0] has {width}", field=f"points[{i}]")
        for j in (0, 1):
            X[i, j] = _real(p[j], f"points[{i}][{j}]", -bound, bound)
        lab = p[2]
        if isinstance(lab, bool) or not isinstance(lab, (int, float)) or lab not in known:
            raise RequestError(
                f"points[{i}] has label {json.dumps(lab)[:20]}; known classes are {', '.join(map(str, CLASS_LABELS))}",
                field=f"points[{i}][2]",
            )
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
    seq = _real(body.get("seq", 0), "seq", 0, 2**53, integer=True)
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
            raise RequestError(
                f"params.{name} must be one of {', '.join(allowed)}; got {json.dumps(p[name])[:40]}",
                field=f"params.{name}",
            )
    if (p["formulation"], p["solver"]) not in valid:
        ok = sorted(s for f, s in valid if f == p["formulation"])
        raise RequestError(
            f"solver {p['solver']!r} cannot solve formulation {p['formulation']!r}; "
            f"it can be solved by: {', '.join(ok) or 'none'}",
            field="params.solver",
        )
    why = solver_availability().get(p["solver"])
    if why:
        raise RequestError(f"solver {p['solver']!r} is not available on this server: {why}", field="params.solver")
    p["C"] = _real(params.get("C", DEFAULTS["C"]), "params.C", *limits["C"])
    if "sigma" in params and "gamma" in params:
        raise RequestError("give params.sigma or params.gamma, not both", field="params.sigma")
    if params.get("sigma") == "median":  # seed 002's gaussianKernel[fTr]: from the data
        p["sigma"] = "median"
    elif "sigma" in params:
        p["sigma"] = _real(params["sigma"], "params.sigma", *limits["sigma"])
    if "gamma" in params:
        p["gamma"] = _real(params["gamma"], "params.gamma", *limits["gamma"])
    p["degree"] = _real(params.get("degree", DEFAULTS["degree"]), "params.degree", *limits["degree"], integer=True)
    p["coef0"] = _real(params.get("coef0", DEFAULTS["coef0"]), "params.coef0", *limits["coef0"])

    train_percent = _real(
        body.get("train_percent", DEFAULTS["train_percent"]), "train_percent", *limits["train_percent"]
    )
    seed = _real(body.get("seed", 0), "seed", 0, 2**32 - 1, integer=True)

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


class Cancelled(Exception):
    """The client disconnected: nobody waits for the answer."""


#: solvers that find (w, b) in the primal and have no dual coefficients (no support vectors of their own)
PRIMAL_SOLVERS = ("subgradient", "random-search")


def _split(req, min_per_class=0):
    """Training mask and, when every point trains because a class is small, words saying so."""
    n = len(req.labels)
    share = req.train_percent / 100.0
    if share < 1.0 and min_per_class > 0:
        labs, counts = np.unique(req.labels, return_counts=True)
        if counts.min() < min_per_class:
            small = labs[np.argmin(counts)]
            return np.ones(n, dtype=bool), (
                f"all {n} points train (no test points): a test share of {100 - req.train_percent:g}% is "
                f"held out once every class has {min_per_class} points; class {_label(small)} has "
                f"{counts.min()}"
            )
    if req.keys is not None:
        train = req.keys < share
    else:
        order = np.random.default_rng(req.seed).permutation(n)
        train = np.zeros(n, dtype=bool)
        train[order[: max(1, round(n * share))]] = True
    return train, None


def _label(v):
    """A class label as the page shows it: +1, -1, 2, 3, 4."""
    v = int(v)
    return f"{v:+d}" if v in (1, -1) else str(v)


def _linearly_separable(X, y):
    """Whether some (w, b) has y_i (w.x_i + b) >= 1 for all i (a small LP)."""
    from scipy.optimize import linprog

    ypm = np.where(y == y[0], 1.0, -1.0)
    A = -ypm[:, None] * np.column_stack([X, np.ones(len(X))])
    res = linprog(
        np.zeros(X.shape[1] + 1),
        A_ub=A,
        b_ub=-np.ones(len(X)),
        bounds=[(None, None)] * (X.shape[1] + 1),
        method="highs",
    )
    return res.status != 2


def _finite_list(a, digits=None):
    a = np.asarray(a, dtype=float)
    if digits is not None:
        a = np.round(a, digits)
    if np.all(np.isfinite(a)):
        return a.tolist()
    return [v if math.isfinite(v) else None for v in a.tolist()]


def _field_list(a, significant=6):
    """Grid values for the page, rounded relative to their range (max - min): steps of about
    1e-6 of the range whatever the scale of f, so contours stay smooth at C = 0.001 as at 1000."""
    a = np.asarray(a, dtype=float)
    finite = a[np.isfinite(a)]
    span = float(finite.max() - finite.min()) if finite.size else 0.0
    if not span > 1e-290:
        span = float(np.max(np.abs(finite))) if finite.size else 0.0
    if not span > 1e-290:
        return _finite_list(a)
    digits = int(significant - np.floor(np.log10(span)))
    with np.errstate(over="ignore", invalid="ignore"):
        r = np.round(a, digits)
    if not np.array_equal(np.isfinite(r), np.isfinite(a)):  # absurd magnitudes: send as they are
        r = a
    return _finite_list(r)


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


def _ovo_values(model, Z):
    """Decision values (m, n_pairs) through the estimator's public API; for two classes
    positive means ``classes_[1]``, else pair (a, b) (a < b, LIBSVM's order) favours a."""
    if len(model.classes_) == 2:
        return np.asarray(model.decision_function(Z), dtype=float).reshape(-1, 1)
    saved = model.decision_function_shape
    try:
        model.decision_function_shape = "ovo"
        return np.asarray(model.decision_function(Z), dtype=float)
    finally:
        model.decision_function_shape = saved


def _resolved_solver(formulation, solver, n):
    """The solver 'auto' stands for (random search for zero-one, ...)."""
    if solver != "auto":
        return solver
    try:
        from ..formulations import resolve_solver

        return resolve_solver(formulation, "auto", n)
    except Exception:  # noqa: BLE001 - the dispatch is being reworked: the one case that matters here
        return "random-search" if formulation == "zero-one" else solver


def _pairs(k):
    return [(a, b) for a in range(k) for b in range(a + 1, k)]


def _vote(dec, k):
    """Indices into ``classes_`` predicted from one-vs-one values (ties: the class listed first)."""
    if k == 2:
        return (dec[:, 0] > 0).astype(np.int64)
    votes = np.zeros((dec.shape[0], k), dtype=np.int64)
    rows = np.arange(dec.shape[0])
    for col, (a, b) in enumerate(_pairs(k)):
        votes[rows, np.where(dec[:, col] > 0, a, b)] += 1
    return np.argmax(votes, axis=1)


def _pair_yf(dec, idx, k):
    """y f per pair for points of class index ``idx`` (NaN where a point is not in the pair)."""
    if k == 2:
        return (np.where(idx == 1, 1.0, -1.0) * dec[:, 0]).reshape(-1, 1)
    out = np.full(dec.shape, np.nan)
    for col, (a, b) in enumerate(_pairs(k)):
        out[idx == a, col] = dec[idx == a, col]
        out[idx == b, col] = -dec[idx == b, col]
    return out


def _border_fields(dec, k):
    """Per class c, min over the other classes b of the one-vs-one value that favours c.

    Positive where c wins every duel (its region when the votes have no cycle);
    its 0 level is a smooth border between regions, which the page draws.
    """
    fields = np.full((k, dec.shape[0]), np.inf)
    for col, (a, b) in enumerate(_pairs(k)):
        fields[a] = np.minimum(fields[a], dec[:, col])
        fields[b] = np.minimum(fields[b], -dec[:, col])
    return fields


class Fitter:
    """Runs fits one at a time, skips or stops those a newer request superseded or whose
    client went away, and keeps each request (fit and pictures) inside its time limit."""

    def __init__(
        self, time_limit=3.0, max_clients=1000, *, request_time_limit=None, min_class_for_test=None, min_grid=None
    ):
        self.time_limit = float(time_limit)
        if request_time_limit is None:
            request_time_limit = max(LIMITS["request_time_limit"], self.time_limit + 2.0)
        self.request_time_limit = max(float(request_time_limit), self.time_limit)
        self.min_class_for_test = int(
            LIMITS["min_class_for_test"] if min_class_for_test is None else min_class_for_test
        )
        self.min_grid = int(LIMITS["min_grid"] if min_grid is None else min_grid)
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

    def run(self, req, cancel=None):
        """Fit under the lock; returns the JSON payload or raises Stale / Cancelled / FitFailed.

        ``cancel`` (a :class:`threading.Event`) is set by the server when the client
        disconnects: a queued request is dropped and a running one stops.
        """
        cancel = cancel if cancel is not None else threading.Event()

        def check():
            if cancel.is_set():
                raise Cancelled()
            if self.is_stale(req.client, req.seq):
                raise Stale()

        check()
        while not self.lock.acquire(timeout=0.05):  # waiting: leave as soon as nobody wants it
            check()
        try:
            check()
            return self._fit(req, check, cancel)
        finally:
            self.lock.release()

    def _fit(self, req, check=lambda: None, cancel=None):
        from ..plot import margin_level
        from ..svm import SVC

        t0 = time.perf_counter()
        request_deadline = t0 + self.request_time_limit
        train, split_note = _split(req, self.min_class_for_test)
        Xtr, ytr = req.X[train], req.labels[train]
        present = np.unique(ytr)
        if present.size < 2:
            if present.size == 0:
                raise FitFailed("the training set is empty: raise the training share")
            raise FitFailed(
                f"the training set has only class {_label(present[0])}: add points of "
                "another class or raise the training share"
            )
        p = req.params
        if p["formulation"] == "hard" and p["kernel"] == "linear":
            pairs = [(a, b) for i, a in enumerate(present) for b in present[i + 1 :]]
            for a, b in pairs:
                m = (ytr == a) | (ytr == b)
                if not _linearly_separable(Xtr[m], ytr[m]):
                    raise FitFailed(
                        f"hard margin: the training points of classes {_label(a)} and {_label(b)} are not "
                        "linearly separable, so no hard-margin solution exists; choose a soft "
                        "margin (l1 or l2), another kernel, or move the points"
                    )

        deadline = min(t0 + self.time_limit, request_deadline)
        stop = {"reason": None}

        def callback(info):
            if cancel is not None and cancel.is_set():
                stop["reason"] = "gone"
                return False
            if self.is_stale(req.client, req.seq):
                stop["reason"] = "stale"
                return False
            if time.perf_counter() > deadline:
                stop["reason"] = "time"
                return False
            return True

        kw = {
            "formulation": p["formulation"],
            "solver": p["solver"],
            "kernel": p["kernel"],
            "C": p["C"],
            "degree": p["degree"],
            "coef0": p["coef0"],
            "callback": callback,
            "time_limit": self.time_limit,
        }
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
            except Exception as exc:  # every failure goes to the page in words
                check()
                if stop["reason"] == "stale":
                    raise Stale() from exc
                raise FitFailed(_describe_failure(exc, p)) from exc
        fit_time = time.perf_counter() - t_fit
        if stop["reason"] == "gone":
            raise Cancelled()
        if stop["reason"] == "stale":
            raise Stale()
        check()
        messages = []
        for w in caught:
            text = str(w.message)
            if stop["reason"] == "time" and issubclass(w.category, Warning) and "callback" in text:
                continue
            if text not in messages:
                messages.append(text)
        if stop["reason"] == "time":
            messages.insert(
                0,
                f"the solver was stopped at the playground's time limit "
                f"({self.time_limit:g} s) before it converged; the picture shows where it got to",
            )
        converged = getattr(model, "fit_status_", 0) == 0 and stop["reason"] is None

        # ---- the model at the points (errors, support vectors, margins)
        classes = np.asarray(model.classes_)
        k = len(classes)
        n_pairs = k * (k - 1) // 2
        n_sv_model = len(getattr(model, "support_", ()))
        what = f"{n_sv_model} support vectors, {n_pairs} pair{'s' if n_pairs > 1 else ''}"
        t_pts = time.perf_counter()
        dec = self._evaluate(model, req.X, request_deadline, check, f"the {len(req.X)} points ({what})")
        per_point = (time.perf_counter() - t_pts) / max(len(req.X), 1)
        pred = _vote(dec, k)
        idx = np.searchsorted(classes, req.labels)
        wrong = classes[pred] != req.labels
        train_error = float(wrong[train].mean())
        test_error = float(wrong[~train].mean()) if (~train).any() else None
        yf = _pair_yf(dec[train], idx[train], k)
        train_idx = np.flatnonzero(train)
        n_train = int(train.sum())
        solver = _resolved_solver(p["formulation"], p["solver"], n_train)
        primal = solver in PRIMAL_SOLVERS or (n_sv_model == 0 and getattr(model, "_linear_w", None) is not None)
        sv_rule = None
        if primal:
            # no dual coefficients: the points on or inside the margin (y f <= 1) play their part
            with np.errstate(invalid="ignore"):
                on_margin = np.any(yf <= 1.0 + 1e-9, axis=1)
            support = train_idx[on_margin].tolist()
            sv_rule = (
                "points with y·f ≤ 1 (on or inside the margin, margin violators included): "
                f"the {solver.replace('-', ' ')} solver works on the primal (w, b) and has no dual "
                "coefficients"
            )
        else:
            support = train_idx[np.asarray(model.support_, dtype=int)].tolist()
        w_norm = getattr(model, "w_norm_", None)
        w_norm = None if w_norm is None else np.atleast_1d(np.asarray(w_norm, dtype=float))
        level = margin_level(model) if k == 2 else 1.0
        margin = min_yf = None
        if w_norm is not None and len(w_norm) == n_pairs and p["formulation"] != "zero-one":
            with np.errstate(divide="ignore", invalid="ignore"):
                margin = ((level or 1.0) / w_norm).tolist()
                min_yf = (np.nanmin(yf, axis=0) / w_norm).tolist()
        if p["formulation"] == "hard" and train_error > 0:
            raise FitFailed(
                f"hard margin: the training points are not separable with the {p['kernel']} "
                f"kernel (the solver ended with {100 * train_error:.1f}% training "
                "error), so no hard-margin solution exists; choose a soft margin (l1 or l2) or "
                "a more flexible kernel"
            )
        obj = getattr(model, "objective_", None)
        n_iter = getattr(model, "n_iter_", None)
        numbers = {
            "train_error": train_error,
            "test_error": test_error,
            "margin": margin,
            "min_yf_margin": min_yf,
            "margin_rule": (
                "ρ/‖w‖ (half-width of the band |f| < ρ)"
                if level not in (None, 1.0)
                else "1/‖w‖ (half-width of the band |f| < 1)"
            ),
            "n_sv": len(support),
            "sv_rule": sv_rule,
            "loo_bound": len(support) / max(n_train, 1),
            "objective": None if obj is None else [float(v) for v in np.atleast_1d(obj)],
            "n_iter": None if n_iter is None else [int(v) for v in np.atleast_1d(n_iter)],
            "fit_time": fit_time,
            "n_train": n_train,
            "n_test": int((~train).sum()),
            "converged": bool(converged),
            "stopped": stop["reason"],
            "gamma": getattr(model, "_gamma", None),
        }

        # ---- the picture: grid x support vectors x pairs must fit in what is left of the request
        grid = dict(req.grid or _default_grid(req.X))
        asked = (grid["nx"], grid["ny"])
        linear_fast = k == 2 and p["kernel"] == "linear"
        if linear_fast:  # f = w.x + b exactly: skips the kernel block
            w = np.asarray(model.coef_, dtype=float)[0]
            b = float(np.ravel(model.intercept_)[0])
            per_point = 0.0
        elif len(req.X) < 512:  # too few points to time: time a piece of the grid
            piece = np.column_stack([np.linspace(grid["xmin"], grid["xmax"], 512), np.full(512, grid["ymin"])])
            t_piece = time.perf_counter()
            self._evaluate(model, piece, request_deadline, check, f"the picture ({what})")
            per_point = max(per_point, (time.perf_counter() - t_piece) / 512)
        left = request_deadline - time.perf_counter() - 0.05
        need = 1.3 * per_point * grid["nx"] * grid["ny"]
        if need > left:
            shrink = math.sqrt(max(left, 0.0) / need)
            grid["nx"] = max(self.min_grid, int(grid["nx"] * shrink))
            grid["ny"] = max(self.min_grid, int(grid["ny"] * shrink))
            need_min = 1.3 * per_point * grid["nx"] * grid["ny"]
            if need_min > left:
                raise FitFailed(
                    f"the model is fitted, but drawing it would take about {need_min:.1f} s even on a "
                    f"{grid['nx']}x{grid['ny']} grid ({what}), more than the {max(left, 0):.1f} s left of the "
                    f"playground's {self.request_time_limit:g} s per request; use fewer points, a larger σ "
                    "or a larger C (fewer support vectors)"
                )
            messages.append(
                f"the picture uses a coarser {grid['nx']}x{grid['ny']} grid instead of {asked[0]}x{asked[1]} "
                f"to answer within the playground's {self.request_time_limit:g} s per request ({what})"
            )
        gx = np.linspace(grid["xmin"], grid["xmax"], grid["nx"])
        gy = np.linspace(grid["ymin"], grid["ymax"], grid["ny"])
        xx, yy = np.meshgrid(gx, gy)
        G = np.column_stack([xx.ravel(), yy.ravel()])
        borders = None
        if linear_fast:
            gdec = (G @ w + b).reshape(-1, 1)
        else:
            gdec = self._evaluate(model, G, request_deadline, check, f"the picture ({what})")
        if k == 2:
            level = margin_level(model)
            values = _field_list(gdec[:, 0])
            kind = "binary"
        else:
            level = None
            values = _vote(gdec, k).tolist()
            kind = "multiclass"
            borders = [_field_list(f) for f in _border_fields(gdec, k)]
        check()
        payload = _clean(
            {
                "ok": True,
                "seq": req.seq,
                "classes": classes.tolist(),
                "train": train.astype(int).tolist(),
                "support": support,
                "grid": {**grid, "kind": kind, "margin_level": level},
                "numbers": numbers,
                "warnings": messages,
                "split_note": split_note,
            }
        )
        # the big lists are JSON-safe already (_finite_list)
        payload["grid"].update(values=values, borders=borders)
        payload["elapsed"] = time.perf_counter() - t0
        return payload

    def _evaluate(self, model, Z, deadline, check, what, chunk=2048):
        """Decision values at Z in chunks, checking the client and the clock between chunks."""
        out = np.empty((len(Z), max(1, len(model.classes_) * (len(model.classes_) - 1) // 2)))
        for s in range(0, len(Z), chunk):
            check()
            if time.perf_counter() > deadline:
                raise FitFailed(
                    f"the model is fitted, but evaluating it at {what} went past the playground's "
                    f"{self.request_time_limit:g} s per request; use fewer points, a larger σ or a larger C "
                    "(fewer support vectors)"
                )
            out[s : s + chunk] = _ovo_values(model, Z[s : s + chunk])
        return out


def _describe_failure(exc, params):
    """Words for the page about a fit that raised."""
    text = _ANSI.sub("", str(exc)).strip() or type(exc).__name__
    if len(text) > 600:
        text = text[:600].rstrip() + " …"
    if type(exc).__name__ == "NotSeparableError" or params["formulation"] == "hard" and "separab" in text.lower():
        return (
            f"hard margin: {text}. No hard-margin solution exists for these training points "
            f"with the {params['kernel']} kernel; choose a soft margin (l1 or l2), a more "
            "flexible kernel, or move the points"
        )
    if isinstance(exc, ImportError):
        return f"the {params['solver']!r} solver needs a package that is not installed: {text}"
    if isinstance(exc, (ValueError, TypeError, NotImplementedError)):
        return f"{params['formulation']} / {params['solver']} / {params['kernel']}: {text}"
    return f"the fit failed ({type(exc).__name__}): {text}"


def _default_grid(X, n=DEFAULTS["grid"]):
    lo, hi = X.min(axis=0), X.max(axis=0)
    pad = np.where(hi > lo, 0.1 * (hi - lo), 1.0)
    lo, hi = lo - pad, hi + pad
    return {"xmin": float(lo[0]), "xmax": float(hi[0]), "ymin": float(lo[1]), "ymax": float(hi[1]), "nx": n, "ny": n}


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
    return _clean(
        {
            "formulations": list(forms),
            "solvers": list(solvers),
            "valid": sorted([list(v) for v in valid]),
            "kernels": list(KERNELS),
            "no_C": [f for f in forms if f in NO_C],
            "linear_only": [s for s in _linear_only() if s in solvers],
            # solvers that cannot run here, with the reason (the page disables them)
            "unavailable": {s: why for s, why in solver_availability().items() if s in solvers},
            "classes": list(CLASS_LABELS),
            "limits": {k: (list(v) if isinstance(v, tuple) else v) for k, v in limits.items()},
            "defaults": DEFAULTS,
        }
    )


def create_app(*, warm_up=True, allowed_hosts=("127.0.0.1", "localhost", "::1", "[::1]"), **limits):
    """The playground as a Starlette application.

    ``limits`` override entries of :data:`LIMITS` (``max_points``,
    ``max_body_bytes``, ``fit_time_limit``, ...).  ``allowed_hosts`` are the
    Host header values accepted (loopback names; ``"*"`` accepts any).
    ``warm_up`` compiles the solvers in the background at start-up.
    """
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware
    from starlette.requests import ClientDisconnect
    from starlette.responses import FileResponse, JSONResponse
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    unknown = set(limits) - set(LIMITS)
    if unknown:
        raise TypeError(f"unknown limits: {', '.join(sorted(unknown))}")
    limits = {**LIMITS, **limits}
    fitter = Fitter(
        limits["fit_time_limit"],
        request_time_limit=limits["request_time_limit"],
        min_class_for_test=limits["min_class_for_test"],
        min_grid=limits["min_grid"],
    )
    pool = {}  # the thread pool, made at start-up (or at the first fit) and shut at the end

    def executor():
        if "executor" not in pool:
            pool["executor"] = ThreadPoolExecutor(max_workers=4, thread_name_prefix="maxmargin-fit")
        return pool["executor"]

    no_cache = {"Cache-Control": "no-cache"}

    def error(exc):
        return JSONResponse({"ok": False, "error": str(exc), "field": exc.field}, status_code=exc.status)

    async def index(request):
        return FileResponse(
            STATIC_DIR / "index.html",
            headers={
                **no_cache,
                "Content-Security-Policy": "default-src 'self'; img-src 'self' data: blob:; "
                "style-src 'self'; object-src 'none'",
            },
        )

    async def options(request):
        return JSONResponse(options_payload(limits), headers=no_cache)

    async def read_fit_request(request):
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
        return parse_fit_request(body, limits)

    def stale(req):
        return JSONResponse(
            {"ok": False, "stale": True, "seq": req.seq, "error": f"superseded by request {fitter.newest(req.client)}"},
            status_code=409,
        )

    async def fit(request):
        try:
            req = await read_fit_request(request)
        except RequestError as exc:
            return error(exc)
        except ClientDisconnect:  # the page went away mid-upload (reload, closed tab): nothing to answer
            return JSONResponse(
                {"ok": False, "error": "the client disconnected while sending the request"}, status_code=400
            )
        if not fitter.register(req.client, req.seq):
            return stale(req)
        loop = asyncio.get_running_loop()
        cancel = threading.Event()
        job = loop.run_in_executor(executor(), fitter.run, req, cancel)
        try:
            while True:  # wait for the fit; stop it when the client goes away
                done, _ = await asyncio.wait({job}, timeout=0.1)
                if done:
                    break
                if await request.is_disconnected():
                    cancel.set()
            payload = job.result()
        except Stale:
            return stale(req)
        except Cancelled:
            return JSONResponse(
                {"ok": False, "seq": req.seq, "error": "the client disconnected; its fit was stopped"}, status_code=400
            )
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

    def guarded(handler):
        """Any failure the handler did not foresee becomes a JSON 500 in words, never a traceback."""

        async def run(request):
            try:
                return await handler(request)
            except Exception as exc:  # noqa: BLE001 - a bug: say so in words and log one line
                return internal_error(request, exc)

        return run

    def internal_error(request, exc):
        text = _ANSI.sub("", str(exc)).strip()[:300]
        _log.error("playground: %s %s failed: %s: %s", request.method, request.url.path, type(exc).__name__, text)
        return JSONResponse(
            {
                "ok": False,
                "error": f"the playground server failed on {request.url.path} "
                f"({type(exc).__name__}: {text or 'no message'}); this is a bug in maxmargin, "
                "please report it with the points and settings that caused it",
            },
            status_code=500,
        )

    async def http_error(request, exc):  # 404, 405, ... as JSON in words
        words = {404: "no such page or file", 405: f"{request.method} is not allowed here"}
        return JSONResponse(
            {
                "ok": False,
                "error": f"{request.url.path}: {words.get(exc.status_code, exc.detail)} (HTTP {exc.status_code})",
            },
            status_code=exc.status_code,
            headers=getattr(exc, "headers", None),
        )

    routes = [
        Route("/", guarded(index)),
        Route("/api/options", guarded(options)),
        Route("/api/fit", guarded(fit), methods=["POST"]),
        Mount("/static", app=StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))]
    app = Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={HTTPException: http_error, Exception: lambda request, exc: internal_error(request, exc)},
    )
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
        raise ValueError(
            f"the playground binds to loopback only; {host!r} is not a loopback "
            "address (use 127.0.0.1, ::1 or localhost)"
        ) from None
    if not addr.is_loopback:
        raise ValueError(
            f"the playground binds to loopback only; {host!r} is not a loopback "
            "address (use 127.0.0.1, ::1 or localhost)"
        )
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

    config = uvicorn.Config(create_app(**app_options), log_level=log_level, lifespan="on", access_log=False)
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
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="maxmargin-playground")
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
