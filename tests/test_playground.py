"""The playground's server: fits, validation, staleness, serving on loopback."""

import json
import threading
import time
import warnings

import numpy as np
import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from maxmargin import SVC, formulations  # noqa: E402
from maxmargin.playground import server  # noqa: E402

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def client():
    app = server.create_app(warm_up=False)
    with TestClient(app, base_url="http://127.0.0.1") as c:
        yield c


def xor_points(n=120, seed=0, keys=True):
    rng = np.random.default_rng(seed)
    centres = np.array([[1.3, 1.3], [-1.3, -1.3], [-1.3, 1.3], [1.3, -1.3]])
    lab = np.array([1, 1, -1, -1])
    k = np.arange(n) % 4
    X = centres[k] + rng.normal(0, 0.4, (n, 2))
    u = rng.random(n)
    pts = [[float(a), float(b), int(c)] + ([float(v)] if keys else []) for (a, b), c, v in zip(X, lab[k], u)]
    return pts, X, lab[k], u


SEQ = iter(range(1, 10**9))


def fit(client, points, **body):
    body = {"points": points, "seq": next(SEQ), **body}
    return client.post("/api/fit", json=body)


def test_options_follow_the_library(client):
    r = client.get("/api/options")
    assert r.status_code == 200
    o = r.json()
    assert o["formulations"] == list(formulations.FORMULATIONS)
    assert o["solvers"] == list(formulations.SOLVERS)
    assert sorted(map(tuple, o["valid"])) == sorted(formulations.VALID)
    assert set(o["kernels"]) == {"linear", "poly", "rbf", "sigmoid"}
    assert o["limits"]["max_points"] == 5000
    assert "hard" in o["no_C"]


def test_page_and_static_files(client):
    r = client.get("/")
    assert r.status_code == 200 and "<canvas" in r.text
    assert "default-src 'self'" in r.headers["content-security-policy"]
    for name in ("app.js", "style.css"):
        s = client.get(f"/static/{name}")
        assert s.status_code == 200 and len(s.text) > 500
    # nothing from the network: no absolute URLs in the page or its script
    for text in (r.text, client.get("/static/app.js").text):
        assert "http://" not in text and "https://" not in text and "//cdn" not in text


def test_binary_fit_matches_a_direct_fit(client):
    pts, X, y, u = xor_points()
    params = {"formulation": "l1", "solver": "smo", "kernel": "rbf", "C": 10.0, "sigma": 0.7}
    grid = {"xmin": -3, "xmax": 3, "ymin": -2.5, "ymax": 2.5, "nx": 40, "ny": 30}
    r = fit(client, pts, params=params, train_percent=30, grid=grid)
    assert r.status_code == 200
    d = r.json()
    assert d["ok"] is True and d["grid"]["kind"] == "binary"
    train = u < 0.3
    assert d["train"] == train.astype(int).tolist()
    ref = SVC(kernel="rbf", C=10.0, sigma=0.7).fit(X[train], y[train])
    n = d["numbers"]
    assert n["n_sv"] == len(ref.support_)
    assert sorted(d["support"]) == sorted(np.flatnonzero(train)[ref.support_].tolist())
    assert n["train_error"] == pytest.approx(np.mean(ref.predict(X[train]) != y[train]))
    assert n["test_error"] == pytest.approx(np.mean(ref.predict(X[~train]) != y[~train]))
    assert n["margin"][0] == pytest.approx(1 / ref.w_norm_[0], rel=1e-6)  # 1/||w||, as the CLI
    assert n["min_yf_margin"][0] == pytest.approx(ref.margin_[0], rel=1e-5)  # min y f / ||w||
    assert n["loo_bound"] == pytest.approx(ref.loo_bound_)
    assert n["n_train"] == train.sum() and n["n_test"] == (~train).sum()
    for key in ("objective", "n_iter", "fit_time", "converged"):
        assert key in n
    vals = np.array(d["grid"]["values"], dtype=float).reshape(30, 40)
    gx, gy = np.meshgrid(np.linspace(-3, 3, 40), np.linspace(-2.5, 2.5, 30))
    ref_f = ref.decision_function(np.column_stack([gx.ravel(), gy.ravel()])).reshape(30, 40)
    np.testing.assert_allclose(vals, ref_f, atol=2e-4)
    assert d["classes"] == [-1, 1]


def test_split_without_keys_and_other_kernels(client):
    pts, X, y, _ = xor_points(keys=False)
    for params in (
        {"kernel": "linear", "C": 1.0},
        {"kernel": "poly", "degree": 2, "gamma": 1.0, "coef0": 1.0},
        {"kernel": "sigmoid", "gamma": 0.1, "coef0": 0.0},
        {"kernel": "rbf", "gamma": 2.0},
        {"kernel": "rbf", "sigma": "median"},
    ):
        d = fit(client, pts, params=params, train_percent=50, seed=3).json()
        assert d["ok"], d
        assert sum(d["train"]) == 60
        assert len(d["grid"]["values"]) == server.DEFAULTS["grid"] ** 2


def test_sigma_from_the_data(client):
    pts, X, y, u = xor_points()
    d = fit(client, pts, params={"kernel": "rbf", "sigma": "median"}, train_percent=30).json()
    ref = SVC(kernel="rbf", gamma="median").fit(X[u < 0.3], y[u < 0.3])
    assert d["numbers"]["gamma"] == pytest.approx(ref._gamma)


def test_multiclass_fit(client):
    rng = np.random.default_rng(1)
    centres = {1: (-1.5, -1), -1: (1.5, -1), 2: (0, 1.5), 3: (2.5, 2.5)}
    pts = [[c[0] + 0.4 * rng.normal(), c[1] + 0.4 * rng.normal(), lab] for lab, c in centres.items() for _ in range(15)]
    d = fit(client, pts, params={"kernel": "rbf", "sigma": 1.0}, train_percent=100).json()
    assert d["ok"] and d["grid"]["kind"] == "multiclass"
    assert d["classes"] == [-1, 1, 2, 3]
    assert set(d["grid"]["values"]) <= {0, 1, 2, 3}
    # per-class border fields: positive where that class wins all its duels (= predicted)
    fields = np.array(d["grid"]["borders"], dtype=float)
    assert fields.shape == (4, len(d["grid"]["values"]))
    agree = np.argmax(fields, axis=0) == np.array(d["grid"]["values"])
    assert agree.mean() > 0.97
    assert len(d["numbers"]["margin"]) == 6
    assert d["numbers"]["test_error"] is None


def test_fit_failures_are_reported_in_words(client):
    pts, *_ = xor_points(40)
    d = fit(client, pts, params={"formulation": "hard", "kernel": "linear"}, train_percent=100).json()
    assert d["ok"] is False and "not linearly separable" in d["error"]
    # 10 points per class (a test share is held out) and every -1 point in the test share
    one_class = [[0.1 * i, 0.0, 1, 0.05 * i] for i in range(10)] + [[2.0, 0.1 * i, -1, 0.9] for i in range(10)]
    d = fit(client, one_class, train_percent=50).json()
    assert d["ok"] is False and "only class +1" in d["error"]


def test_nonconvergence_is_a_warning(client):
    pts, *_ = xor_points(200)
    app = server.create_app(warm_up=False, fit_time_limit=0.05)
    with TestClient(app, base_url="http://127.0.0.1") as c:
        # a hard margin with a narrow polynomial kernel cannot separate XOR: the solver runs
        # until the time limit; the server answers in words instead of hanging
        t = time.perf_counter()
        d = fit(
            c, pts, params={"formulation": "hard", "kernel": "poly", "degree": 1, "gamma": 1.0}, train_percent=100
        ).json()
        assert time.perf_counter() - t < 5
        assert d["ok"] is False and "hard margin" in d["error"]
        d = fit(c, pts, params={"kernel": "rbf", "sigma": 0.05, "C": 1e6}, train_percent=100).json()
        if d["ok"] and not d["numbers"]["converged"]:
            assert any("time limit" in w or "stopped" in w for w in d["warnings"])


BAD_REQUESTS = [
    ("not an object", [1, 2, 3], 400, "JSON object"),
    ("unknown field", {"points": [], "extra": 1}, 400, "unknown field"),
    ("missing points", {"_drop": ["points"]}, 400, "missing field 'points'"),
    ("points not a list", {"points": {"a": 1}}, 400, "points must be a list"),
    ("too few points", {"points": [[0, 0, 1]]}, 400, "at least 2"),
    ("short point", {"points": [[0, 0, 1], [1, 1]]}, 400, "points[1]"),
    ("mixed widths", {"points": [[0, 0, 1], [1, 1, -1, 0.5]]}, 400, "fields"),
    ("string coordinate", {"points": [[0, "1", 1], [1, 1, -1]]}, 400, "must be a number"),
    ("bool coordinate", {"points": [[0, True, 1], [1, 1, -1]]}, 400, "must be a number"),
    ("huge coordinate", {"points": [[0, 1e300, 1], [1, 1, -1]]}, 400, "between"),
    ("unknown class", {"points": [[0, 0, 7], [1, 1, -1]]}, 400, "known classes"),
    ("fractional class", {"points": [[0, 0, 1.5], [1, 1, -1]]}, 400, "known classes"),
    ("bool class", {"points": [[0, 0, True], [1, 1, -1]]}, 400, "known classes"),
    ("split key out of range", {"points": [[0, 0, 1, 1.5], [1, 1, -1, 0.2]]}, 400, "between"),
    ("params not object", {"params": [1]}, 400, "params must be an object"),
    ("unknown param", {"params": {"nu": 0.5}}, 400, "unknown field"),
    ("unknown formulation", {"params": {"formulation": "nope"}}, 400, "params.formulation"),
    ("unknown solver", {"params": {"solver": "nope"}}, 400, "params.solver"),
    ("unknown kernel", {"params": {"kernel": "precomputed"}}, 400, "params.kernel"),
    ("C zero", {"params": {"C": 0}}, 400, "params.C"),
    ("C huge", {"params": {"C": 1e12}}, 400, "params.C"),
    ("C string", {"params": {"C": "10"}}, 400, "params.C"),
    ("sigma negative", {"params": {"sigma": -1}}, 400, "params.sigma"),
    ("sigma and gamma", {"params": {"sigma": 1, "gamma": 1}}, 400, "not both"),
    ("sigma unknown word", {"params": {"sigma": "auto"}}, 400, "params.sigma"),
    ("gamma zero", {"params": {"gamma": 0}}, 400, "params.gamma"),
    ("degree fractional", {"params": {"degree": 2.5}}, 400, "integer"),
    ("degree too high", {"params": {"degree": 50}}, 400, "params.degree"),
    ("coef0 huge", {"params": {"coef0": 1e9}}, 400, "params.coef0"),
    ("train percent zero", {"train_percent": 0}, 400, "train_percent"),
    ("train percent over 100", {"train_percent": 150}, 400, "train_percent"),
    ("negative seed", {"seed": -1}, 400, "seed"),
    ("negative seq", {"seq": -5}, 400, "seq"),
    ("bad client id", {"client": "a b<script>"}, 400, "client"),
    ("grid not object", {"grid": 5}, 400, "grid"),
    ("grid missing keys", {"grid": {"xmin": 0, "xmax": 1}}, 400, "grid needs"),
    ("grid too fine", {"grid": {"xmin": 0, "xmax": 1, "ymin": 0, "ymax": 1, "nx": 5000, "ny": 10}}, 400, "grid.nx"),
    ("grid empty", {"grid": {"xmin": 1, "xmax": 1, "ymin": 0, "ymax": 1, "nx": 10, "ny": 10}}, 400, "xmin < xmax"),
]


@pytest.mark.parametrize("name,patch,status,needle", BAD_REQUESTS, ids=[b[0] for b in BAD_REQUESTS])
def test_invalid_requests_are_refused_with_a_message(client, name, patch, status, needle):
    base = {"points": [[0.0, 0.0, 1], [1.0, 1.0, -1]], "seq": next(SEQ)}
    if isinstance(patch, dict):
        body = {**base, **patch}
        for key in body.pop("_drop", []):
            del body[key]
    else:
        body = patch
    r = client.post("/api/fit", json=body)
    assert r.status_code == status, r.text
    d = r.json()
    assert d["ok"] is False and needle in d["error"], d


def test_pairs_follow_the_library_at_runtime(client, monkeypatch):
    """/api/options and the validation read maxmargin.formulations at each request."""
    f, s = sorted(formulations.VALID)[0]
    monkeypatch.setattr(formulations, "VALID", set(formulations.VALID) - {(f, s)})
    assert [f, s] not in client.get("/api/options").json()["valid"]
    r = fit(client, [[0, 0, 1], [1, 1, -1]], params={"formulation": f, "solver": s})
    assert r.status_code == 400 and "cannot solve" in r.json()["error"]
    monkeypatch.undo()
    assert [f, s] in client.get("/api/options").json()["valid"]


def test_transport_level_refusals(client):
    ok = json.dumps({"points": [[0, 0, 1], [1, 1, -1]]})
    r = client.post("/api/fit", content="{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]
    r = client.post(
        "/api/fit", content=ok.replace("0, 0, 1", "NaN, 0, 1"), headers={"content-type": "application/json"}
    )
    assert r.status_code == 400 and "NaN" in r.json()["error"]
    r = client.post("/api/fit", content=ok, headers={"content-type": "text/plain"})
    assert r.status_code == 415 and "application/json" in r.json()["error"]
    r = client.get("/api/fit")
    assert r.status_code == 405
    r = client.post("/api/fit", content=ok, headers={"content-type": "application/json", "host": "evil.example"})
    assert r.status_code == 400


def test_100000_points_are_refused(client):
    pts = [[0.5, -0.5, 1]] * 50_000 + [[-0.5, 0.5, -1]] * 50_000
    t = time.perf_counter()
    r = fit(client, pts)
    assert r.status_code == 413
    assert "too large" in r.json()["error"] or "too many points" in r.json()["error"]
    assert time.perf_counter() - t < 5


def test_limits_on_count_and_body_size():
    app = server.create_app(warm_up=False, max_points=10, max_body_bytes=2000)
    with TestClient(app, base_url="http://127.0.0.1") as c:
        r = c.post("/api/fit", json={"points": [[0, 0, 1], [1, 1, -1]] * 6})
        assert r.status_code == 413 and "too many points: 12 (at most 10)" in r.json()["error"]
        r = c.post("/api/fit", json={"points": [[0.123456789, 0.123456789, 1]] * 10, "pad": "x" * 3000})
        assert r.status_code == 413 and "too large" in r.json()["error"]
    with pytest.raises(TypeError):
        server.create_app(max_pointz=3)


def test_stale_requests_are_skipped(client):
    pts, *_ = xor_points(40)
    body = {"points": pts, "client": "stale-test"}
    assert client.post("/api/fit", json={**body, "seq": 10}).status_code == 200
    r = client.post("/api/fit", json={**body, "seq": 9})
    assert r.status_code == 409 and r.json()["stale"] is True
    assert client.post("/api/fit", json={**body, "seq": 11}).status_code == 200


class SlowSVC:
    """Stands in for maxmargin.SVC: a fit that runs until its callback says stop."""

    calls = 0

    def __init__(self, callback=None, **params):
        self.callback = callback

    def fit(self, X, y):
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 20:
            SlowSVC.calls += 1
            info = {
                "iteration": SlowSVC.calls,
                "objective": 0.0,
                "violation": 1.0,
                "tol": 1e-3,
                "subproblem": 0,
                "n_subproblems": 1,
                "elapsed": time.perf_counter() - t0,
            }
            if self.callback(info) is False:
                return self
            time.sleep(0.005)
        raise AssertionError("the callback never stopped the fit")


def test_a_running_fit_stops_when_superseded(monkeypatch):
    """The server's Fitter stops a fit in progress once a newer request of its client arrives
    (through the estimator's callback, CONTRACTS.md), and skips queued stale work."""
    import maxmargin.svm

    monkeypatch.setattr(maxmargin.svm, "SVC", SlowSVC)
    pts, *_ = xor_points(40)
    fitter = server.Fitter(time_limit=30)
    req = server.parse_fit_request({"points": pts, "seq": 1, "client": "c", "train_percent": 100})
    assert fitter.register("c", 1)
    out = {}

    def work():
        try:
            out["result"] = fitter.run(req)
        except Exception as exc:  # noqa: BLE001
            out["error"] = exc

    th = threading.Thread(target=work)
    th.start()
    time.sleep(0.3)
    assert th.is_alive() and fitter.lock.locked()
    t = time.perf_counter()
    assert fitter.register("c", 2)
    th.join(5)
    assert not th.is_alive() and time.perf_counter() - t < 1
    assert isinstance(out.get("error"), server.Stale)
    assert not fitter.lock.locked()
    assert not fitter.register("c", 1)  # older than the newest: refused at once
    with pytest.raises(server.Stale):  # and skipped if it reaches the pool anyway
        fitter.run(req)


def test_a_real_fit_can_be_interrupted():
    """The same with the real estimator: a long fit ends soon after it is superseded."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 2))
    pts = [[float(a), float(b), 1 if a * b > 0 else -1] for a, b in X]
    fitter = server.Fitter(time_limit=30)
    req = server.parse_fit_request(
        {
            "points": pts,
            "seq": 1,
            "client": "c",
            "train_percent": 100,
            "params": {"kernel": "rbf", "sigma": 0.02, "C": 1e5},
        }
    )
    fitter.register("c", 1)
    out = {}
    th = threading.Thread(target=lambda: out.update(r=_outcome(fitter, req)))
    th.start()
    time.sleep(0.2)
    fitter.register("c", 2)
    t = time.perf_counter()
    th.join(30)
    # either it finished before noticing (fast machine) or it stopped as stale
    assert out["r"] in ("done", "stale")
    assert time.perf_counter() - t < 5


def _outcome(fitter, req):
    try:
        fitter.run(req)
        return "done"
    except server.Stale:
        return "stale"


def test_serves_on_loopback_only():
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("uvicorn")
    for host in ("0.0.0.0", "192.168.1.10", "example.com", "::"):
        with pytest.raises(ValueError, match="loopback"):
            server.serve(host=host, open_browser=False)
    with server.run_in_thread(warm_up=False) as srv:
        assert srv.url.startswith("http://127.0.0.1:")
        assert srv.sock.getsockname()[0] == "127.0.0.1" and srv.sock.getsockname()[1] > 0
        r = httpx.get(srv.url + "api/options", timeout=10)
        assert r.status_code == 200 and "formulations" in r.json()
        pts, *_ = xor_points(60)
        r = httpx.post(srv.url + "api/fit", json={"points": pts, "seq": 1}, timeout=30)
        assert r.status_code == 200 and r.json()["ok"]


def test_serve_prints_its_address_and_answers():
    """serve() as `maxmargin playground --no-browser` runs it: a free port on 127.0.0.1."""
    import subprocess
    import sys

    httpx = pytest.importorskip("httpx")
    pytest.importorskip("uvicorn")
    code = "from maxmargin.playground import serve; serve(open_browser=False, warm_up=False)"
    proc = subprocess.Popen(
        [sys.executable, "-u", "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        line = proc.stdout.readline()
        assert "maxmargin playground: http://127.0.0.1:" in line, line
        url = line.split()[2]
        deadline = time.monotonic() + 20
        while True:
            try:
                r = httpx.get(url + "api/options", timeout=5)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        assert r.status_code == 200 and r.json()["formulations"]
        assert "<canvas" in httpx.get(url, timeout=5).text
    finally:
        proc.terminate()
        proc.wait(10)


# --------------------------------------------------------------------------- issue 14


def test_a_400_digit_integer_is_refused_in_words(client):
    """Issue 14.11: a coordinate, key or seq too large for a float is a 400 that names it."""
    huge = 10**400
    for body, field in (
        ({"points": [[huge, 0, 1], [1, 1, -1]]}, "points[0][0]"),
        ({"points": [[0, 0, 1, huge], [1, 1, -1, 0.5]]}, "points[0][3]"),
        ({"points": [[0, 0, 1], [1, 1, -1]], "seed": -huge}, "seed"),
    ):
        r = client.post("/api/fit", json={"seq": next(SEQ), **body})
        assert r.status_code == 400, r.text
        d = r.json()
        assert d["ok"] is False and d["field"] == field and "401 digits" in d["error"], d


def test_unexpected_failures_are_json_in_words(monkeypatch, caplog):
    """Issue 14.11: a bug in the server answers a JSON 500 saying what failed, not a traceback page;
    unknown paths and methods answer JSON too."""

    def broken(body, limits=None):
        raise RuntimeError("the parser broke")

    monkeypatch.setattr(server, "parse_fit_request", broken)
    app = server.create_app(warm_up=False)
    with TestClient(app, base_url="http://127.0.0.1") as c:
        r = c.post("/api/fit", json={"points": [[0, 0, 1], [1, 1, -1]]})
        assert r.status_code == 500 and r.headers["content-type"] == "application/json"
        d = r.json()
        assert d["ok"] is False and "RuntimeError: the parser broke" in d["error"] and "Traceback" not in r.text
        for method, path, status in (("GET", "/api/nothing", 404), ("GET", "/api/fit", 405)):
            r = c.request(method, path)
            assert r.status_code == status and r.json()["ok"] is False and path in r.json()["error"]
    assert "the parser broke" in caplog.text


def _call_asgi(app, body, disconnect_after=None, timeout=10.0):
    """Drive the ASGI app by hand: send ``body`` (a list of chunks; the last one ends it unless
    ``disconnect_after`` is None and the list ends with None, meaning the client hangs up there),
    then report a disconnect ``disconnect_after`` seconds later. Returns the response messages."""
    import asyncio

    sent = []

    async def go():
        chunks = list(body)
        t_sent = {}
        never = asyncio.Event()

        async def receive():
            if chunks:
                c = chunks.pop(0)
                if c is None:
                    return {"type": "http.disconnect"}
                if not chunks:
                    t_sent["t"] = time.monotonic()
                return {"type": "http.request", "body": c, "more_body": bool(chunks)}
            if disconnect_after is not None and time.monotonic() - t_sent["t"] >= disconnect_after:
                return {"type": "http.disconnect"}
            await never.wait()

        async def send(message):
            sent.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/api/fit",
            "raw_path": b"/api/fit",
            "query_string": b"",
            "root_path": "",
            "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")],
            "client": ("127.0.0.1", 5000),
            "server": ("127.0.0.1", 80),
            "state": {},
        }
        await asyncio.wait_for(app(scope, receive, send), timeout)

    asyncio.run(go())
    return sent


def test_a_client_disconnecting_mid_upload_is_quiet(caplog):
    """Issue 14.11: ClientDisconnect while reading the body is caught, nothing is logged as an error."""
    app = server.create_app(warm_up=False)
    _call_asgi(app, [b'{"points": [[0, 0, 1], ', None])
    assert "ClientDisconnect" not in caplog.text and not [r for r in caplog.records if r.levelname == "ERROR"]


def test_a_fit_whose_client_disconnected_is_stopped(monkeypatch):
    """Issue 14.12: the server notices a client that went away and stops its fit (the estimator's
    callback), so abandoned fits do not hold the lock for the next request."""
    import maxmargin.svm

    monkeypatch.setattr(maxmargin.svm, "SVC", SlowSVC)
    app = server.create_app(warm_up=False, fit_time_limit=30)
    pts, *_ = xor_points(40)
    body = json.dumps({"points": pts, "seq": 1, "client": "gone", "train_percent": 100}).encode()
    t = time.perf_counter()
    sent = _call_asgi(app, [body], disconnect_after=0.3)
    assert time.perf_counter() - t < 3
    assert sent and sent[0]["status"] == 400 and b"disconnected" in sent[-1]["body"]
    calls = SlowSVC.calls
    time.sleep(0.2)
    assert SlowSVC.calls == calls  # the fit is over, not running on unseen
    assert not app.state.fitter.lock.locked()


def test_the_whole_request_is_bounded():
    """Issue 14.12: many points of 5 classes on a 300 x 300 grid: the answer comes within the
    request's limit (a coarser grid, said in words) instead of evaluating the full grid."""
    rng = np.random.default_rng(0)
    labels = [1, -1, 2, 3, 4]
    pts = [[float(a), float(b), labels[i % 5]] for i, (a, b) in enumerate(rng.normal(0, 2, (1500, 2)))]
    app = server.create_app(warm_up=False, fit_time_limit=0.3, request_time_limit=1.5)
    grid = {"xmin": -6, "xmax": 6, "ymin": -6, "ymax": 6, "nx": 300, "ny": 300}
    with TestClient(app, base_url="http://127.0.0.1") as c:
        t = time.perf_counter()
        r = fit(c, pts, params={"kernel": "rbf", "sigma": 0.05, "C": 1000.0}, train_percent=100, grid=grid)
        took = time.perf_counter() - t
    assert r.status_code == 200
    d = r.json()
    assert took < 1.5 + 1.5, took
    if d["ok"]:
        assert d["elapsed"] < 1.5 + 0.5
        assert len(d["grid"]["values"]) == d["grid"]["nx"] * d["grid"]["ny"]
        if d["grid"]["nx"] < 300:  # (a fast machine may draw it all in time)
            assert any("coarser" in w and "support vectors" in w for w in d["warnings"]), d["warnings"]
    else:
        assert "per request" in d["error"], d["error"]


def test_unavailable_solvers_are_named_and_refused(client, monkeypatch):
    """Issue 14.16: /api/options says which solvers cannot run here and why; a fit asking for
    one is refused in words naming the missing package."""
    import sys
    import types

    monkeypatch.setitem(sys.modules, "qpsolvers", None)  # as if not installed
    o = client.get("/api/options").json()
    assert set(o["unavailable"]) == {"qp", "primal-qp"}
    assert all("qpsolvers" in why for why in o["unavailable"].values())
    r = fit(client, [[0, 0, 1], [1, 1, -1]], params={"formulation": "l1", "solver": "qp"})
    assert r.status_code == 400 and "not available" in r.json()["error"] and "qpsolvers" in r.json()["error"]
    fake = types.SimpleNamespace(available_solvers=["clarabel"])  # installed, with a backend
    monkeypatch.setitem(sys.modules, "qpsolvers", fake)
    assert client.get("/api/options").json()["unavailable"] == {}


def test_the_grid_is_made_coarser_or_refused_by_its_estimated_cost(monkeypatch):
    """Issue 14.12: the cost of the picture is estimated (from timing the model at the points)
    before the grid is evaluated: a grid too slow for the time left is made coarser, and
    refused in words when even the coarsest one would not fit."""
    real = server._ovo_values

    def slow(model, Z):  # 20 µs per point: 300 x 300 would take 1.8 s
        time.sleep(2e-5 * len(Z))
        return real(model, Z)

    monkeypatch.setattr(server, "_ovo_values", slow)
    pts, *_ = xor_points(100)
    grid = {"xmin": -3, "xmax": 3, "ymin": -3, "ymax": 3, "nx": 300, "ny": 300}
    params = {"kernel": "rbf", "sigma": 0.7}
    app = server.create_app(warm_up=False, fit_time_limit=0.5, request_time_limit=1.2)
    with TestClient(app, base_url="http://127.0.0.1") as c:
        d = fit(c, pts, params=params, train_percent=100, grid=grid).json()
    assert d["ok"], d
    assert 20 <= d["grid"]["nx"] < 300 and d["grid"]["nx"] == d["grid"]["ny"]
    assert any("coarser" in w for w in d["warnings"]) and d["elapsed"] < 1.2 + 0.2
    app = server.create_app(warm_up=False, fit_time_limit=0.5, request_time_limit=1.2, min_grid=280)
    with TestClient(app, base_url="http://127.0.0.1") as c:
        t = time.perf_counter()
        d = fit(c, pts, params=params, train_percent=100, grid=grid).json()
    assert d["ok"] is False, d["warnings"]
    assert "drawing it would take about" in d["error"] and "per request" in d["error"]
    assert time.perf_counter() - t < 1.2
