"""scikit-learn's callbacks (set_callbacks, ProgressBar, ScoringMonitor), callback= and watchers: one mechanism."""

import subprocess
import sys
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs, make_classification, make_regression
from sklearn.exceptions import ConvergenceWarning

import maxmargin
from maxmargin import callbacks

callback_api = pytest.importorskip("sklearn.callback")
pytest.importorskip("rich")
ProgressBar, ScoringMonitor = callback_api.ProgressBar, callback_api.ScoringMonitor


class Recorder:
    """A FitCallback that records the task tree (begin/end per task path)."""

    def __init__(self, stop_at=None):
        self.events = []
        self.stop_at = stop_at

    def setup(self, estimator, context):
        self.events.append(("setup", context.estimator_name))

    def teardown(self, estimator, context):
        self.events.append(("teardown", context.estimator_name))

    @staticmethod
    def _path(context):
        out = []
        while context is not None:
            out.append((context.task_name, context.task_id))
            context = context.parent
        return tuple(reversed(out))

    def on_fit_task_begin(self, estimator, context):
        self.events.append(("begin", self._path(context)))

    def on_fit_task_end(self, estimator, context):
        path = self._path(context)
        self.events.append(("end", path))
        return self.stop_at is not None and path[-1][0] == self.stop_at

    def ends(self, name):
        return [p for e, p in self.events if e == "end" and p[-1][0] == name]

    def balanced(self):
        begins = sorted(p for e, p in self.events if e == "begin")
        ends = sorted(p for e, p in self.events if e == "end")
        return begins == ends


def _data(kind):
    if kind == "binary":
        X, y = make_classification(300, 6, random_state=0)
    elif kind == "multi":
        X, y = make_blobs(240, 4, centers=4, cluster_std=2.5, random_state=0)
    else:
        X, y = make_regression(300, 6, noise=5.0, random_state=0)
        y = y / 50
    return X, y


ESTIMATORS = [
    (lambda: maxmargin.SVC(C=10), "binary", "accuracy"),
    (lambda: maxmargin.SVC(C=10), "multi", "accuracy"),
    (lambda: maxmargin.NuSVC(nu=0.3), "multi", "accuracy"),
    (lambda: maxmargin.SVR(C=10), "reg", "r2"),
    (lambda: maxmargin.NuSVR(C=10), "reg", "r2"),
    (lambda: maxmargin.OneClassSVM(nu=0.1), "binary", None),
    (lambda: maxmargin.LinearSVC(), "multi", "accuracy"),
    (lambda: maxmargin.LinearSVR(max_iter=20000), "reg", "r2"),
]
IDS = ["SVC-2", "SVC-4", "NuSVC-4", "SVR", "NuSVR", "OneClassSVM", "LinearSVC-4", "LinearSVR"]


@pytest.mark.parametrize("make, kind, scoring", ESTIMATORS, ids=IDS)
def test_progress_bar_and_scoring_monitor_on_each_estimator(make, kind, scoring, capsys):
    X, y = _data(kind)
    est = make()
    one_class = isinstance(est, maxmargin.OneClassSVM)
    rec = Recorder()
    monitor = ScoringMonitor(scoring=scoring) if not one_class else None
    est.set_callbacks(ProgressBar(), rec, *([monitor] if monitor else []))
    est.fit(X, None if one_class else y)
    out = capsys.readouterr().out
    name = type(est).__name__
    assert f"{name} - fit" in out and "100%" in out
    assert rec.events[0] == ("setup", name) and rec.events[-1] == ("teardown", name)
    assert rec.balanced()
    root = rec.ends("fit")
    assert root == [(("fit", 0),)]
    if monitor is not None:
        (row,) = monitor.get_logs().data
        assert row["task_name"] == "fit"
        assert row[scoring] == pytest.approx(est.score(X, y))
    # the task tree: one task per sub-problem, kkt-steps where a solver reported its chunks
    n_classes = np.unique(y).shape[0]
    if isinstance(est, (maxmargin.SVC, maxmargin.NuSVC)) and n_classes > 2:
        assert sorted(p[-1][1] for p in rec.ends("pair")) == list(range(n_classes * (n_classes - 1) // 2))
    elif isinstance(est, maxmargin.LinearSVC):
        assert sorted(p[-1][1] for p in rec.ends("pair")) == list(range(n_classes))
    else:
        assert [p[-1][1] for p in rec.ends("kkt-step")] == list(range(callbacks.STEPS))
    # the estimator is left as it was: no report, no context
    assert not hasattr(est, "_fit_report") and not hasattr(est, "_callback_fit_ctx")


def test_pairs_one_by_one_report_kkt_steps_in_order():
    X, y = _data("multi")
    rec = Recorder()
    est = maxmargin.SVC(C=10, formulation="l1", solver="smo", warm_start=True)  # warm start: the pair-by-pair route
    est.set_callbacks(rec).fit(X, y)
    steps = rec.ends("kkt-step")
    assert len(steps) == 6 * callbacks.STEPS
    for p in range(6):
        mine = [s[-1][1] for s in steps if s[1] == ("pair", p)]
        assert mine == list(range(callbacks.STEPS))


def test_probability_task():
    X, y = _data("multi")
    rec = Recorder()
    maxmargin.SVC(probability=True, random_state=0).set_callbacks(rec).fit(X, y)
    prob = [p for p in rec.ends("pair") if p[1][0] == "probability"]
    assert sorted(p[-1][1] for p in prob) == list(range(6))
    assert (("fit", 0), ("probability", 6)) in rec.ends("probability")
    assert rec.balanced()


def test_stop_from_a_callback():
    X, y = make_classification(800, 10, flip_y=0.3, random_state=1)  # some 70,000 SMO iterations
    rec = Recorder(stop_at="kkt-step")
    est = maxmargin.SVC(C=1e4, gamma=0.1, tol=1e-8).set_callbacks(rec)
    with pytest.warns(ConvergenceWarning):
        est.fit(X, y)
    assert est.fit_status_ == 1 and est.n_iter_[0] < 70000
    assert est.predict(X).shape == (800,)


def test_grid_search_propagates(capsys):
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = _data("binary")
    monitor = ScoringMonitor(scoring="accuracy")
    svc = maxmargin.SVC().set_callbacks(monitor)  # not auto-propagated: set on the inner estimator
    grid = GridSearchCV(make_pipeline(StandardScaler(), svc), {"svc__C": [0.1, 1.0, 10.0]}, cv=2)
    grid.set_callbacks(ProgressBar(max_propagation_depth=None))
    grid.fit(X, y)
    out = capsys.readouterr().out
    assert "GridSearchCV - fit" in out and "SVC - fit" in out and "SVC - kkt-step" not in out
    log = monitor.get_logs()  # one run: the search
    assert log.estimator_name == "GridSearchCV"
    assert len(log.data) == 3 * 2 + 1  # every fit inside the search, then the refit
    assert all(r["estimator_name"] == "SVC" and r["accuracy"] > 0.5 for r in log.data)


def test_callback_parameter_and_watchers_share_the_mechanism():
    X, y = make_classification(1200, 10, n_informative=5, n_classes=4, flip_y=0.3, random_state=1)
    seen = []  # every pair takes more than one chunk (2000 iterations) of SMO here
    est = maxmargin.SVC(C=1e3, gamma=0.1, callback=lambda info: seen.append(info))
    est.fit(X, y)
    assert {i["subproblem"] for i in seen} == set(range(6)) and all("violation" in i for i in seen)
    # a watcher keeps the compiled one-vs-one route and hears of every pair's end
    heard = []
    with callbacks.watching(heard.append):
        est2 = maxmargin.SVC(C=1e3, gamma=0.1).fit(X, y)
    done = [i for i in heard if "done" in i]
    assert sorted(i["subproblem"] for i in done) == list(range(6)) and max(i["done"] for i in done) == 6
    np.testing.assert_allclose(est2.objective_, est.objective_, rtol=1e-3)  # another route, the same optimum
    # returning False stops, as callback= does
    with callbacks.watching(lambda info: False), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        stopped = maxmargin.SVC(C=1e3, gamma=0.1, warm_start=True).fit(X, y)
    assert stopped.fit_status_ == 1


def test_set_callbacks_without_sklearn_callback_module():
    code = (
        "import sys, sklearn.base, sklearn.linear_model, sklearn.model_selection, sklearn.pipeline\n"
        "for name in [m for m in sys.modules if m.startswith('sklearn.callback')]:\n"
        "    sys.modules[name] = None  # scikit-learn < 1.9: no sklearn.callback\n"
        "import maxmargin\n"
        "X = [[0.0], [1.0], [2.0], [3.0]]; y = [0, 0, 1, 1]\n"
        "assert maxmargin.SVC().fit(X, y).predict([[3.0]])[0] == 1\n"
        "try:\n"
        "    maxmargin.SVC().set_callbacks(object())\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "set_callbacks needs scikit-learn >= 1.9" in out


def test_cli_progress_line_is_a_watcher():
    import io

    from maxmargin.cli import Progress

    X, y = _data("multi")
    stream = io.StringIO()
    with callbacks.watching(Progress("log", stream=stream)):
        maxmargin.SVC().fit(X, y)  # the compiled one-vs-one route: one line per finished pair
    lines = stream.getvalue().splitlines()
    assert any("problems 6/6 [##########]" in line for line in lines)
    assert sum("problems " in line for line in lines) == 6


def test_probe_pairs_solved_before_the_rest_report_each_pair_once():
    from sklearn.datasets import make_blobs

    # four well-separated classes of 400 rows: probe pairs first, then the rest (ovo.lazy_plan); each reported once
    X, y = make_blobs(1600, centers=4, n_features=5, cluster_std=1.0, random_state=3)
    rec = Recorder()
    maxmargin.SVC().set_callbacks(rec).fit(X, y)
    assert sorted(p[-1][1] for p in rec.ends("pair")) == list(range(6))
    assert rec.balanced()


def test_unwatched_fit_shares_the_quiet_report_and_watched_ones_do_not():
    """A fit nothing watches runs with the shared no-op report (no FitReport made) and leaves nothing behind; a
    ``callback=``, a watcher or scikit-learn callbacks each make it a full report again."""
    X, y = make_classification(300, 8, random_state=3)
    reports = []
    original = callbacks.FitReport.__init__

    def counting(self, *args, **kwargs):
        reports.append(self)
        original(self, *args, **kwargs)

    callbacks.FitReport.__init__ = counting
    try:
        est = maxmargin.LinearSVC(random_state=0).fit(X, y)
        assert reports == [] and "_fit_report" not in est.__dict__
        assert callbacks._unwatched(est)
        seen = []
        maxmargin.LinearSVC(random_state=0, callback=seen.append, tol=1e-8).fit(X, y)
        assert len(reports) == 1 and seen
        heard = []
        X3, y3 = make_classification(300, 8, n_informative=4, n_classes=3, random_state=3)
        with callbacks.watching(heard.append):
            maxmargin.LinearSVC(random_state=0).fit(X3, y3)
        assert len(reports) == 2 and sorted(i["subproblem"] for i in heard if "done" in i) == [0, 1, 2]
    finally:
        callbacks.FitReport.__init__ = original
