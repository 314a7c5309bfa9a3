"""The ``maxmargin`` command, end to end: subprocesses for the real thing, CliRunner where faster."""

import gzip
import io
import json
import lzma
import os
import signal
import subprocess
import sys
import threading
import types

import numpy as np
import pytest
from click.testing import CliRunner

import maxmargin
from maxmargin import cli as cli_mod
from maxmargin.cli import Progress, cli
from maxmargin.datasets import heart_scale_path, load_heart_scale
from maxmargin.io import load_model
from maxmargin.io import model as model_io

SEED_003 = "y,x1,x2\n1,1,5\n1,2,4\n-1,2,2\n-1,4,4\n"
HEART = os.fspath(heart_scale_path())
SRC = os.path.dirname(os.path.dirname(os.path.abspath(maxmargin.__file__)))


def run_cli(*args, cwd=None, **kwargs):
    """``python -m maxmargin ARGS`` in a subprocess (finds this checkout's maxmargin)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "maxmargin", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        **kwargs,
    )


def invoke(*args, **kwargs):
    return CliRunner().invoke(cli, [str(a) for a in args], **kwargs)


@pytest.fixture
def seed_csv(tmp_path):
    p = tmp_path / "seed.csv"
    p.write_text(SEED_003)
    return p


@pytest.fixture(scope="module")
def heart_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("heart")
    r = invoke("train", HEART, "-c", "2", "-o", d / "heart.mm")
    assert r.exit_code == 0, r.output
    return d / "heart.mm"


def files_in(path):
    return sorted(p.name for p in path.iterdir())


# --------------------------------------------------------------------------- subprocess end to end


def test_seed_003_predicts_1_1_m1_m1(tmp_path, seed_csv):
    r = run_cli("train", seed_csv, "-o", tmp_path / "seed.mm", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Model written to" in r.stdout
    r = run_cli("predict", tmp_path / "seed.mm", seed_csv, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "1", "-1", "-1"]
    assert "Accuracy = 100.0000% (4/4)" in r.stderr


def test_xz_svmlight_train_subprocess_and_predict(tmp_path):
    data = tmp_path / "heart.xz"
    data.write_bytes(lzma.compress(open(HEART, "rb").read()))
    r = run_cli("train", data, cwd=tmp_path)  # default model name: heart.model, in the current directory
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "heart.model").exists()
    assert r.stderr == ""  # not a terminal: no progress display
    r = invoke("predict", tmp_path / "heart.model", data, "-o", tmp_path / "pred.txt")  # in-process: faster
    assert r.exit_code == 0, r.output
    X, y = load_heart_scale()
    clf = maxmargin.SVC().fit(X, y)
    np.testing.assert_array_equal(np.loadtxt(tmp_path / "pred.txt"), clf.predict(X))
    assert "Accuracy = " in r.stdout


def test_error_is_short_and_on_stderr_subprocess(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("y,x1,x2\n1,1,5\n1,oops,4\n")
    r = run_cli("train", bad, "-o", tmp_path / "m.mm")
    assert r.returncode == 1
    assert r.stdout == ""
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) <= 2
    assert lines[0] == f"Error: {bad}, line 3: value in column 2 'oops' is not a number"
    assert files_in(tmp_path) == ["bad.csv"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_stops_training_and_writes_nothing(tmp_path):
    rng = np.random.default_rng(0)
    n = 2000
    X = rng.normal(size=(n, 5))
    y = np.where(rng.random(n) > 0.5, 1, -1)  # random labels: a long fit with a large C
    data = tmp_path / "rand.csv"
    np.savetxt(data, np.column_stack([y, X]), delimiter=",", fmt="%.5g")
    model = tmp_path / "m.mm"
    model.write_bytes(b"old model")  # an existing model must survive
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "maxmargin",
            "train",
            str(data),
            "-c",
            "1e6",
            "-g",
            "0.5",
            "-o",
            str(model),
            "--verbose",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(90, proc.kill)  # never hang the test run
    watchdog.start()
    try:
        first = proc.stderr.readline()  # the first progress line: the solver is running
        assert "KKT violation" in first, first
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert "Interrupted: training stopped; nothing was written" in err
    assert "Traceback" not in err
    assert model.read_bytes() == b"old model"
    assert files_in(tmp_path) == ["m.mm", "rand.csv"]


# --------------------------------------------------------------------------- round trips (CliRunner)


def test_csv_gz_round_trip(tmp_path):
    X, y = load_heart_scale()
    csv = (
        "label,"
        + ",".join(f"f{j}" for j in range(13))
        + "\n"
        + "\n".join(",".join([f"{yi:g}"] + [f"{v:g}" for v in xi]) for xi, yi in zip(X, y))
        + "\n"
    )
    data = tmp_path / "heart.csv.gz"
    data.write_bytes(gzip.compress(csv.encode()))
    model = tmp_path / "h.mm"
    r = invoke("train", data, "-o", model, "-k", "linear", "-c", "0.5")
    assert r.exit_code == 0, r.output
    assert "support vectors" in r.stdout and "Model written to" in r.stdout
    clf = maxmargin.SVC(kernel="linear", C=0.5).fit(X, y)
    r = invoke("predict", model, data)
    assert r.exit_code == 0, r.output
    np.testing.assert_array_equal(np.array(r.stdout.split(), dtype=float), clf.predict(X))
    r = invoke("evaluate", model, data, "--json")
    res = json.loads(r.stdout)
    assert res["accuracy"] == pytest.approx(np.mean(clf.predict(X) == y))
    assert res["labels"] == ["-1", "1"] and np.sum(res["confusion_matrix"]) == 270
    r = invoke("info", model)
    assert r.exit_code == 0
    for text in (
        "format version 1",
        "SVC (c-svc, classification)",
        "Kernel           linear",
        "Support vectors",
        "Margin",
        "LOO bound",
        "Objective",
        "Training",
        "heart.csv.gz",
    ):
        assert text in r.stdout


def test_evaluate_text(heart_model):
    r = invoke("evaluate", heart_model, HEART)
    assert r.exit_code == 0, r.output
    assert "Accuracy = " in r.stdout and "Confusion matrix" in r.stdout
    assert "precision" in r.stdout and "recall" in r.stdout


def test_info_json(heart_model):
    r = invoke("info", heart_model, "--json")
    d = json.loads(r.stdout)
    assert d["file_format"] == "maxmargin" and d["format_version"] == 1
    assert d["class"] == "SVC" and d["params"]["C"] == 2.0
    assert d["n_support_total"] == sum(d["n_support"])
    assert 0 < d["loo_bound"] <= 1 and d["fit_time"] > 0
    assert isinstance(d["margin"], float) and d["half_width"] > 0


def test_predict_decision_values_and_unlabelled_csv(tmp_path, seed_csv):
    model = tmp_path / "s.mm"
    assert invoke("train", seed_csv, "-o", model).exit_code == 0
    r = invoke("predict", model, seed_csv, "--decision")
    lines = r.stdout.splitlines()
    assert lines[0] == "label decision(positive=1)"
    clf = load_model(model)
    X = np.array([[1, 5], [2, 4], [2, 2], [4, 4]], dtype=float)
    np.testing.assert_allclose([float(s.split()[1]) for s in lines[1:]], clf.decision_function(X), rtol=1e-5)
    nolab = tmp_path / "x.csv"
    nolab.write_text("x1,x2\n1,5\n4,4\n")
    r = invoke("predict", model, nolab)
    assert r.exit_code == 0, r.output
    assert r.stdout.split() == ["1", "-1"] and "Accuracy" not in r.output
    r = invoke("predict", model, seed_csv, "--proba")
    assert r.exit_code == 1 and "gives no probabilities" in r.stderr


def test_train_libsvm_model_format(tmp_path):
    r = invoke("train", HEART, "-o", tmp_path / "h.model", "--model-format", "libsvm", "-q")
    assert r.exit_code == 0 and r.stdout == ""
    assert (tmp_path / "h.model").read_text().startswith("svm_type c_svc\n")
    r = invoke("predict", tmp_path / "h.model", HEART, "-q")
    X, y = load_heart_scale()
    np.testing.assert_array_equal(np.array(r.stdout.split(), dtype=float), maxmargin.SVC().fit(X, y).predict(X))


def test_scale_stores_the_scaler(tmp_path):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(1)
    X = rng.normal(size=(80, 3)) * [1, 100, 0.01] + [0, 50, 3]
    y = np.where(X[:, 0] + (X[:, 1] - 50) / 100 > 0, 1, -1)
    data = tmp_path / "d.csv"
    np.savetxt(data, np.column_stack([y, X]), delimiter=",")
    r = invoke("train", data, "--scale", "-o", tmp_path / "d.mm")
    assert r.exit_code == 0, r.output
    loaded = load_model(tmp_path / "d.mm")
    assert type(loaded[0]).__name__ == "StandardScaler"
    ref = make_pipeline(StandardScaler(), maxmargin.SVC()).fit(X, y)
    r = invoke("predict", tmp_path / "d.mm", data)
    np.testing.assert_array_equal(np.array(r.stdout.split(), dtype=float), ref.predict(X))
    r = invoke("info", tmp_path / "d.mm")
    assert "StandardScaler" in r.stdout


def test_class_weights_libsvm_style(tmp_path):
    r = invoke("train", HEART, "-w1", "5", "-w-1", "0.5", "-o", tmp_path / "w.mm")
    assert r.exit_code == 0, r.output
    assert load_model(tmp_path / "w.mm").class_weight == {1: 5.0, -1: 0.5}
    r = invoke("train", HEART, "--class-weight", "1=2", "-w", "-1=3", "-o", tmp_path / "w2.mm")
    assert load_model(tmp_path / "w2.mm").class_weight == {1: 2.0, -1: 3.0}
    r = invoke("train", HEART, "-w", "balanced", "-o", tmp_path / "w3.mm")
    assert load_model(tmp_path / "w3.mm").class_weight == "balanced"
    r = invoke("train", HEART, "-w7", "2", "-o", tmp_path / "w4.mm")
    assert r.exit_code == 2 and "label 7 is not in the training data" in r.stderr


def test_all_svc_parameters_reach_the_estimator(tmp_path):
    r = invoke(
        "train",
        HEART,
        "-o",
        tmp_path / "p.mm",
        "-k",
        "poly",
        "-c",
        "3",
        "-g",
        "0.25",
        "-d",
        "2",
        "-r",
        "1",
        "-e",
        "0.01",
        "-m",
        "50",
        "--max-iter",
        "100000",
        "--time-limit",
        "60",
        "--no-shrinking",
        "--formulation",
        "l2",
        "--solver",
        "smo",
    )
    assert r.exit_code == 0, r.output
    p = load_model(tmp_path / "p.mm").get_params()
    assert (
        p["kernel"],
        p["C"],
        p["gamma"],
        p["degree"],
        p["coef0"],
        p["tol"],
        p["cache_size"],
        p["max_iter"],
        p["time_limit"],
        p["shrinking"],
        p["formulation"],
        p["solver"],
    ) == ("poly", 3.0, 0.25, 2, 1.0, 0.01, 50.0, 100000, 60.0, False, "l2", "smo")
    r = invoke("train", HEART, "-o", tmp_path / "s.mm", "-t", "2", "--sigma", "2", "-s", "0")
    assert r.exit_code == 0, r.output
    m = load_model(tmp_path / "s.mm")
    assert m.sigma == 2.0 and m._gamma == pytest.approx(1 / 8)


def test_convergence_warning_is_one_line(tmp_path):
    r = invoke("train", HEART, "--max-iter", "5", "-c", "100", "-o", tmp_path / "m.mm")
    assert r.exit_code == 0, r.output
    assert r.stderr.startswith("Warning: the solver stopped before reaching tol")
    assert "stopped before convergence" in r.stdout
    assert load_model(tmp_path / "m.mm").fit_status_ == 1


# --------------------------------------------------------------------------- cross-validation


def test_cv_matches_cross_val_score(tmp_path):
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    X, y = load_heart_scale()
    r = invoke("train", HEART, "--cv", "5", "-c", "2")
    assert r.exit_code == 0, r.output
    ref = cross_val_score(maxmargin.SVC(C=2.0), X, y, cv=StratifiedKFold(5, shuffle=True, random_state=0))
    line = next(s for s in r.stdout.splitlines() if s.startswith("Mean fold accuracy"))
    ours = float(line.split("=")[1].split("%")[0]) / 100
    assert abs(ours - ref.mean()) < 0.01
    pooled = next(s for s in r.stdout.splitlines() if s.startswith("Cross Validation Accuracy"))
    assert abs(float(pooled.split("=")[1].split("%")[0]) / 100 - ref.mean()) < 0.01
    assert files_in(tmp_path) == []  # no model
    r = invoke("train", HEART, "--cv", "5", "-o", tmp_path / "m.mm")
    assert r.exit_code == 2 and "writes no model" in r.stderr
    r = invoke("train", HEART, "--cv", "1")
    assert r.exit_code == 2


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "content, code, message",
    [
        ("y,x1,x2\n1,1,5\n1,2,zz\n", 1, "line 3: value in column 3 'zz' is not a number"),
        ("y,x1,x2\n1,1,5\n1,2\n", 1, "line 3: expected 3 fields separated by ',', found 2"),
        ("", 1, "no data: the file is empty"),
        ("y,x1,x2\n1,1,5\nyes,2,4\n", 1, "line 3: label 'yes' is not a number"),
        ("1 1:2\n-1 1:2 x:3\n", 1, "line 2: feature index 'x' in 'x:3' is not an integer"),
        (None, 2, "does not exist"),
        ("DIR", 2, "is a directory"),
    ],
    ids=["bad-token", "column-count", "empty", "non-numeric-label", "libsvm-bad-token", "missing", "directory"],
)
def test_malformed_inputs(tmp_path, content, code, message):
    work = tmp_path / "work"
    work.mkdir()
    data = work / "data.txt"
    if content == "DIR":
        data.mkdir()
    elif content is not None:
        data.write_text(content)
    before = files_in(work)
    r = invoke("train", data, "-o", work / "m.mm")
    assert r.exit_code == code, r.output
    assert message in r.stderr
    assert "Traceback" not in r.output
    assert files_in(work) == before  # no model written


def test_damaged_models_are_refused(tmp_path, heart_model):
    raw = bytearray(heart_model.read_bytes())
    flipped = tmp_path / "flipped.mm"
    raw[len(raw) // 2] ^= 0x10
    flipped.write_bytes(bytes(raw))
    r = invoke("predict", flipped, HEART)
    assert r.exit_code == 1 and "checksum mismatch" in r.stderr and r.stdout == ""
    r = invoke("info", flipped)
    assert r.exit_code == 1 and "checksum mismatch" in r.stderr

    with np.load(heart_model, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    meta = json.loads(arrays.pop("__maxmargin__").tobytes())
    meta["format_version"] = 99
    meta["sha256"] = model_io._digest(meta, arrays)
    arrays["__maxmargin__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    newer = tmp_path / "newer.mm"
    newer.write_bytes(model_io._seal(buf.getvalue()))
    r = invoke("evaluate", newer, HEART)
    assert r.exit_code == 1 and "format version 99" in r.stderr and "upgrade maxmargin" in r.stderr

    notmodel = tmp_path / "n.mm"
    notmodel.write_text("1,2,3\n")
    r = invoke("predict", notmodel, HEART)
    assert r.exit_code == 1 and "not a maxmargin model file" in r.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["train", HEART, "--bogus"], "No such option"),
        (["train", HEART, "-g", "abc"], "is not a number, 'scale', 'auto' or 'median'"),
        (["train", HEART, "-k", "cubic"], "'cubic' is not one of linear, poly, rbf, sigmoid"),
        (["train", HEART, "--nu", "0.5"], "does not apply to --type c-svc"),
        (["train", HEART, "-w", "1:5"], "write LABEL=WEIGHT"),
        (["train", HEART, "-o", "/no/such/dir/m.mm"], "does not exist"),
        (["predict", HEART], "Missing argument"),
        (["frobnicate"], "No such command"),
    ],
)
def test_usage_errors_exit_2(tmp_path, args, message):
    r = invoke(*args)
    assert r.exit_code == 2, r.output
    assert message in r.stderr


def test_estimator_errors_exit_1(tmp_path):
    r = invoke("train", HEART, "-c", "-1", "-o", tmp_path / "m.mm")
    assert r.exit_code == 1 and "C must be a positive" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert files_in(tmp_path) == []


def test_debug_shows_the_exception(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2\n1\n")
    r = invoke("--debug", "train", bad)
    assert r.exit_code == 1 and isinstance(r.exception, maxmargin.io.DataFormatError)


def test_interrupt_in_process(tmp_path, monkeypatch):
    def interrupted_fit(self, X, y, sample_weight=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(maxmargin.SVC, "fit", interrupted_fit)
    r = invoke("train", HEART, "-o", tmp_path / "m.mm")
    assert r.exit_code == 130
    assert "Interrupted: training stopped; nothing was written" in r.stderr
    assert files_in(tmp_path) == []


# --------------------------------------------------------------------------- progress


def test_progress_line_format_and_stop():
    stream = io.StringIO()
    p = Progress("tty", stream=stream, width=200)
    info = {
        "iteration": 12345,
        "objective": -3.5,
        "violation": 0.01,
        "tol": 1e-3,
        "subproblem": 1,
        "n_subproblems": 3,
        "elapsed": 0.5,
    }
    assert p(dict(info, violation=1.0)) is None
    text = stream.getvalue()
    assert text.startswith("\r") and "problem 2/3" in text and "iter 12,345" in text
    assert "KKT violation 1.00e+00 (tol 1e-03)" in text and "objective -3.5" in text
    p._last = 0
    p(info)
    assert "[#######...]" in stream.getvalue()  # 1e-2 is 2/3 of the way from 1 to 1e-3 on a log scale
    p.close()
    assert stream.getvalue().endswith("\r\x1b[K")
    p.stop()
    assert p(info) is False
    quiet = Progress(None, stream=io.StringIO())
    assert quiet(info) is None and quiet.stream.getvalue() == ""


@pytest.fixture(scope="module")
def long_fit_data(tmp_path_factory):
    rng = np.random.default_rng(0)
    n = 600
    X = rng.normal(size=(n, 5))
    y = np.where(rng.random(n) > 0.5, 1, -1)
    p = tmp_path_factory.mktemp("long") / "rand.csv"
    np.savetxt(p, np.column_stack([y, X]), delimiter=",", fmt="%.5g")
    return p


def test_progress_on_a_terminal_only(tmp_path, long_fit_data, monkeypatch):
    args = ["train", long_fit_data, "-c", "1e5", "-g", "1", "-o", tmp_path / "m.mm"]
    monkeypatch.setattr(cli_mod, "_stderr_is_tty", lambda: True)
    r = invoke(*args)
    assert r.exit_code == 0, r.output
    assert "\r" in r.stderr and "KKT violation" in r.stderr and "(tol 1e-03)" in r.stderr
    r = invoke(*args, "--quiet")
    assert r.stderr == "" and r.stdout == ""
    monkeypatch.setattr(cli_mod, "_stderr_is_tty", lambda: False)
    r = invoke(*args)
    assert r.stderr == ""
    r = invoke(*args, "--verbose")
    assert "\r" not in r.stderr and "KKT violation" in r.stderr


# --------------------------------------------------------------------------- quickstart, plot, playground


def test_quickstart(tmp_path):
    r = invoke("quickstart", "-o", tmp_path / "q.mm")
    assert r.exit_code == 0, r.output
    for text in (
        "heart_scale",
        "test accuracy",
        "support vectors",
        "margin",
        "band half-width",
        "LOO bound",
        "dual objective",
        "fit time",
        "maxmargin train",
    ):
        assert text in r.stdout
    acc = float(r.stdout.split("test accuracy")[1].split("%")[0])
    assert 70 < acc <= 100
    assert load_model(tmp_path / "q.mm").n_features_in_ == 13


def test_plot_calls_plot_model_file(tmp_path, heart_model, monkeypatch):
    calls = []
    fake = types.ModuleType("maxmargin.plot")
    fake.plot_model_file = lambda *a, **k: calls.append((a, k))
    monkeypatch.setitem(sys.modules, "maxmargin.plot", fake)
    r = invoke(
        "plot",
        heart_model,
        HEART,
        "-o",
        tmp_path / "p.png",
        "-O",
        "resolution=50",
        "-O",
        "show_margins=false",
        "--dpi",
        "80",
    )
    assert r.exit_code == 0, r.output
    ((args, kwargs),) = calls
    assert args == (str(heart_model), HEART, str(tmp_path / "p.png"))
    assert kwargs == {"resolution": 50, "show_margins": False, "dpi": 80}


def test_plot_and_playground_missing(monkeypatch, heart_model):
    monkeypatch.setitem(sys.modules, "maxmargin.playground", None)
    r = invoke("playground", "--no-browser")
    assert r.exit_code == 1 and "maxmargin.playground is missing" in r.stderr

    fake = types.ModuleType("maxmargin.plot")

    def needs_matplotlib(*a, **k):
        raise ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib")

    fake.plot_model_file = needs_matplotlib
    monkeypatch.setitem(sys.modules, "maxmargin.plot", fake)
    r = invoke("plot", heart_model, HEART)
    assert r.exit_code == 1 and "needs matplotlib" in r.stderr and "maxmargin[plot]" in r.stderr


def test_playground_calls_serve(monkeypatch):
    calls = []
    fake = types.ModuleType("maxmargin.playground")
    fake.serve = lambda **k: calls.append(k)
    monkeypatch.setitem(sys.modules, "maxmargin.playground", fake)
    r = invoke("playground", "--port", "8123", "--no-browser")
    assert r.exit_code == 0, r.output
    assert calls == [{"host": "127.0.0.1", "port": 8123, "open_browser": False}]
    invoke("playground")
    assert calls[-1] == {"host": "127.0.0.1", "port": 0, "open_browser": True}


def test_version_and_help():
    r = invoke("--version")
    assert r.exit_code == 0 and r.stdout.startswith("maxmargin ")
    r = invoke("--help")
    assert r.exit_code == 0 and "quickstart" in r.stdout
    r = invoke("train", "-h")
    assert r.exit_code == 0 and "--class-weight" in r.stdout


def test_stdin_and_csv_options(tmp_path):
    model = tmp_path / "s.mm"
    r = invoke("train", "-", "-o", model, input=SEED_003)
    assert r.exit_code == 0, r.output
    r = invoke("train", "-", input=SEED_003)
    assert r.exit_code == 2 and "give -o/--output" in r.stderr
    swapped = tmp_path / "swapped.txt"
    swapped.write_text("1;5;1\n2;4;1\n2;2;-1\n4;4;-1\n")
    r = invoke("predict", model, swapped, "--label-column", "last", "--delimiter", ";")
    assert r.exit_code == 0, r.output
    assert r.stdout.split() == ["1", "1", "-1", "-1"] and "(4/4)" in r.stderr
    r = invoke("predict", model, "-", "--format", "csv", "--no-header", input="1,1,5\n-1,4,4\n")
    assert r.stdout.split() == ["1", "-1"]
    r = invoke("predict", model, swapped, "--label-column", "0")
    assert r.exit_code == 2 and "columns count from 1" in r.stderr


def test_missing_estimator_type_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.delattr(maxmargin, "NuSVR", raising=False)
    r = invoke("train", HEART, "-s", "nu-svr", "-o", tmp_path / "m.mm")
    assert r.exit_code == 2 and "nu-svr needs maxmargin.NuSVR" in r.stderr


@pytest.fixture(scope="module")
def regression_csv(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 3))
    z = X[:, 0] - 2 * X[:, 1] + 0.1 * rng.normal(size=150)
    p = tmp_path_factory.mktemp("reg") / "reg.csv"
    np.savetxt(p, np.column_stack([z, X]), delimiter=",", header="z,a,b,c", comments="")
    return p, X, z


def test_regression_types(tmp_path, regression_csv):
    from sklearn.model_selection import KFold, cross_val_score

    data, X, z = regression_csv
    r = invoke("train", data, "-s", "epsilon-svr", "-p", "0.05", "-c", "5", "-o", tmp_path / "svr.mm")
    assert r.exit_code == 0, r.output
    svr = load_model(tmp_path / "svr.mm")
    assert type(svr).__name__ == "SVR" and svr.epsilon == 0.05 and svr.C == 5.0
    ref = maxmargin.SVR(epsilon=0.05, C=5.0).fit(X, z)
    r = invoke("predict", tmp_path / "svr.mm", data)
    np.testing.assert_allclose(np.array(r.stdout.split(), dtype=float), ref.predict(X), rtol=1e-5, atol=1e-6)
    assert "Mean squared error = " in r.stderr
    r = invoke("evaluate", tmp_path / "svr.mm", data, "--json")
    res = json.loads(r.stdout)
    assert res["r2"] > 0.9 and res["mse"] == pytest.approx(np.mean((ref.predict(X) - z) ** 2), rel=1e-6)
    r = invoke("evaluate", tmp_path / "svr.mm", data)
    assert "R^2" in r.stdout
    r = invoke("info", tmp_path / "svr.mm")
    assert "SVR (epsilon-svr, regression)" in r.stdout
    r = invoke("train", data, "-s", "nu-svr", "-n", "0.3", "-o", tmp_path / "nusvr.mm")
    assert r.exit_code == 0 and load_model(tmp_path / "nusvr.mm").nu == 0.3
    r = invoke("train", data, "-s", "3", "--cv", "3")
    assert r.exit_code == 0, r.output
    mse = float(r.stdout.split("Cross Validation Mean squared error = ")[1].split()[0])
    ref_cv = -cross_val_score(
        maxmargin.SVR(), X, z, cv=KFold(3, shuffle=True, random_state=0), scoring="neg_mean_squared_error"
    )
    assert mse == pytest.approx(ref_cv.mean(), rel=0.05)
    r = invoke("train", data, "-s", "epsilon-svr", "-w", "1=2")
    assert r.exit_code == 2 and "does not apply to --type epsilon-svr" in r.stderr


def test_nu_svc_one_class_and_probabilities(tmp_path):
    r = invoke("train", HEART, "-s", "nu-svc", "-n", "0.4", "-o", tmp_path / "nu.mm")
    assert r.exit_code == 0, r.output
    assert type(load_model(tmp_path / "nu.mm")).__name__ == "NuSVC"
    r = invoke("train", HEART, "-s", "one-class", "-n", "0.2", "-o", tmp_path / "oc.mm")
    assert r.exit_code == 0, r.output
    r = invoke("predict", tmp_path / "oc.mm", HEART)
    assert set(r.stdout.split()) <= {"1", "-1"}
    r = invoke("info", tmp_path / "oc.mm")
    assert "OneClassSVM (one-class" in r.stdout
    r = invoke("train", HEART, "-s", "one-class", "--cv", "3")
    assert r.exit_code == 2 and "--cv needs a classifier or a regressor" in r.stderr
    r = invoke("train", HEART, "--probability", "-o", tmp_path / "p.mm")
    assert r.exit_code == 0, r.output
    r = invoke("predict", tmp_path / "p.mm", HEART, "--proba")
    lines = r.stdout.splitlines()
    assert lines[0] == "labels -1 1"
    P = np.array([[float(v) for v in line.split()[1:]] for line in lines[1:]])
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(P, load_model(tmp_path / "p.mm").predict_proba(load_heart_scale()[0]), atol=1e-5)


# --------------------------------------------------------------------------- issue 14


def test_output_may_not_overwrite_an_input(tmp_path, heart_model, monkeypatch):
    """Issue 14.3: -o naming an input file (also relatively or through a link) is refused."""
    data = tmp_path / "d.svm"
    data.write_bytes(open(HEART, "rb").read())
    before = data.read_bytes()
    monkeypatch.chdir(tmp_path)
    r = invoke("train", "d.svm", "-o", "./d.svm")
    assert r.exit_code == 2 and "would overwrite it" in r.stderr and "training data" in r.stderr
    os.symlink(data, tmp_path / "link.svm")
    r = invoke("predict", heart_model, data, "-o", "link.svm")
    assert r.exit_code == 2 and "data file DATA" in r.stderr
    r = invoke("predict", heart_model, data, "-o", heart_model)
    assert r.exit_code == 2 and "model file MODEL" in r.stderr
    r = invoke("plot", heart_model, data, "-o", "d.svm")
    assert r.exit_code == 2 and "would overwrite it" in r.stderr
    assert data.read_bytes() == before


def test_broken_pipe_exits_quietly(heart_model, monkeypatch, capsys):
    """Issue 14.20: `maxmargin predict ... | head` ends without an error message."""
    import errno

    class ClosedPipe(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    with pytest.raises(SystemExit) as info:
        cli.main(["predict", str(heart_model), HEART], prog_name="maxmargin")
    assert info.value.code == 1
    assert "Error" not in capsys.readouterr().err


def test_write_errors_name_the_target_not_the_temporary_file(tmp_path, monkeypatch):
    from maxmargin.io import _atomic

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(tmp_path / ".m.mm.x1y2.tmp"))

    monkeypatch.setattr(_atomic.tempfile, "mkstemp", refuse)
    r = invoke("train", HEART, "-o", tmp_path / "m.mm")
    assert r.exit_code == 1
    assert f"{tmp_path / 'm.mm'}: Permission denied" in r.stderr and ".tmp" not in r.stderr


def test_info_of_a_libsvm_model_says_what_is_unknown(tmp_path):
    r = invoke("train", HEART, "--model-format", "libsvm", "-o", tmp_path / "h.model")
    assert r.exit_code == 0, r.output
    r = invoke("info", tmp_path / "h.model")
    assert r.exit_code == 0
    line = next(x for x in r.output.splitlines() if x.startswith("1/||w||"))
    assert "inf" not in line and "not stored in LIBSVM model files" in line


def test_cli_errors_give_cli_advice(tmp_path):
    """Issue 14.20: continuous labels, non-separable hard margin and hopeless nu-SVC say what to do
    in command-line terms."""
    half = tmp_path / "half.csv"
    half.write_text("y,a\n0.5,1\n1.5,2\n0.5,3\n1.5,4\n")
    r = invoke("train", half, "-o", tmp_path / "m.mm")
    assert r.exit_code == 1 and "continuous" in r.stderr and "--type epsilon-svr" in r.stderr
    assert "Unknown label type" not in r.stderr
    clash = tmp_path / "clash.svm"
    clash.write_text("1 1:1\n1 1:2\n-1 1:1\n-1 1:2\n")
    r = invoke("train", clash, "--formulation", "hard", "-k", "linear", "-o", tmp_path / "m.mm")
    assert r.exit_code == 1 and "--formulation l1" in r.stderr and "formulation='l1'" not in r.stderr
    r = invoke("train", clash, "-s", "nu-svc", "-o", tmp_path / "m.mm")
    assert r.exit_code == 1 and "same mean in feature space" in r.stderr and "smaller nu" not in r.stderr
    wide = tmp_path / "many.csv"
    rows = np.random.default_rng(0).normal(size=(3100, 2))
    wide.write_text("".join(f"{1 if a > 0 else -1},{a},{b}\n" for a, b in rows))
    r = invoke("train", wide, "--solver", "qp", "-k", "linear", "-o", tmp_path / "m.mm")
    assert r.exit_code == 1 and "--solver smo" in r.stderr and "max_n=None" not in r.stderr
    assert files_in(tmp_path) == ["clash.svm", "half.csv", "many.csv"]


def test_bundled_data_sets_are_addressable_by_name(tmp_path, monkeypatch):
    """Issue 14.7: the README's `maxmargin train heart_scale -c 2 --cv 5` works in any directory."""
    monkeypatch.chdir(tmp_path)
    readme = open(os.path.join(os.path.dirname(SRC), "README.md"), encoding="utf-8").read()
    line = next(x for x in readme.splitlines() if x.startswith("$ maxmargin train heart_scale"))
    args = line[2:].split("#")[0].split()[1:]
    r = invoke(*args)
    assert r.exit_code == 0, r.output
    assert "Cross Validation Accuracy = 81.1111% (219/270)" in r.output
    r = invoke("datasets")
    assert r.exit_code == 0 and "builtin:heart_scale" in r.output
    r = invoke("train", "builtin:heart_scale", "-q", "-o", "h.mm")
    assert r.exit_code == 0 and files_in(tmp_path) == ["h.mm"]
    r = invoke("train", "builtin:nope")
    assert r.exit_code == 2 and "no bundled data set named 'nope'" in r.stderr
    (tmp_path / "heart_scale").write_text("y,a\n1,1\n-1,2\n1,3\n-1,4\n")  # a file of that name wins
    r = invoke("train", "heart_scale", "--cv", "2")
    assert r.exit_code == 0 and "4 samples" in r.output


def test_overflowing_data_is_an_error_not_a_constant_model(tmp_path):
    """Issue 14.1: values near 1e308 used to train (exit 0) a model with 0 SVs and margin inf."""
    big = tmp_path / "big.csv"
    big.write_text("y,a,b\n1,1e308,1e308\n1,9e307,1e308\n-1,-1e308,-1e308\n-1,-9e307,-1e308\n")
    r = invoke("train", big, "-k", "linear", "-o", tmp_path / "m.mm")
    assert r.exit_code == 1 and "non-finite kernel values" in r.stderr and "--scale" in r.stderr
    assert "Warning" not in r.stderr and files_in(tmp_path) == ["big.csv"]


def test_precompile_runs_every_route(monkeypatch):
    """Issue 11.6: `maxmargin precompile` compiles (or loads) each common route, so that a later
    process's first fit only loads the cache; each route is named with its time."""
    from maxmargin import warmup

    seen = []
    original = warmup._routes

    def spied():
        return [(name, (lambda run=run, name=name: (seen.append(name), run()))) for name, run in original()]

    monkeypatch.setattr(warmup, "_routes", spied)
    r = invoke("precompile")
    assert r.exit_code == 0, r.output
    assert len(seen) == 6 and all(name in r.output for name in seen)
    assert "Done in" in r.output
