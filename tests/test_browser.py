"""The playground in a real headless Chromium, driven by Playwright.

Needs Debian's ``chromium`` package (``apt-get install -y chromium``) and the
``playwright`` Python package; Playwright's own browser download is never used:
the browser is the system binary found on PATH.  Skips only where no Chromium
binary exists or playwright cannot be imported.
"""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
try:
    from playwright.sync_api import sync_playwright

    PLAYWRIGHT_ERROR = None
except Exception as exc:  # noqa: BLE001 - any import problem means: skip
    sync_playwright = None
    PLAYWRIGHT_ERROR = f"{type(exc).__name__}: {exc}"

CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--mute-audio",
]
TIMEOUT_MS = 20_000
#: where screenshots for people to look at go
SHOTS = Path(os.environ.get("MAXMARGIN_SHOTS", tempfile.gettempdir()))


@pytest.fixture(scope="module")
def browser_page():
    if CHROMIUM is None:
        pytest.skip("no Chromium binary on PATH (Debian: apt-get install -y chromium)")
    if sync_playwright is None:
        pytest.skip(f"the playwright package cannot be imported ({PLAYWRIGHT_ERROR}); pip install playwright")
    from maxmargin.playground.server import run_in_thread

    with run_in_thread() as srv, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=60_000)
        try:
            context = browser.new_context(viewport={"width": 1080, "height": 800})
            page = context.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            errors = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(srv.url)
            page.wait_for_function("() => document.body.dataset.status === 'idle'")
            yield page, errors
        finally:
            browser.close()


def settle(page):
    """Wait until the newest fit request has been answered (or needed none)."""
    page.wait_for_function(
        "() => { const s = window.maxmarginPlayground.state;"
        " return !!s.options && !s.queued && document.body.dataset.done === String(s.seq)"
        " && document.body.dataset.status !== 'fitting'; }",
        timeout=60_000,
    )
    return page.evaluate("() => document.body.dataset.status")


def numbers(page):
    ids = [
        "num-train-error",
        "num-test-error",
        "num-margin",
        "num-sv",
        "num-loo",
        "num-objective",
        "num-iter",
        "num-time",
    ]
    return {i: page.inner_text(f"#{i}") for i in ids}


def test_click_points_move_C_and_see_the_boundary_change(browser_page, tmp_path):
    page, errors = browser_page
    page.click("#clear")
    page.fill("#split", "100")  # every point trains: a few clicks are enough
    page.select_option("#kernel", "rbf")
    box = page.locator("#canvas").bounding_box()

    def click(fx, fy):
        page.mouse.click(box["x"] + fx * box["width"], box["y"] + fy * box["height"])

    page.click("#class-1")
    for fx, fy in ((0.25, 0.30), (0.30, 0.45), (0.22, 0.55), (0.40, 0.35)):
        click(fx, fy)
    page.click("#class-m1")
    for fx, fy in ((0.70, 0.60), (0.62, 0.75), (0.80, 0.50), (0.55, 0.55), (0.75, 0.80)):
        click(fx, fy)
    assert settle(page) == "ok", page.inner_text("#message")
    canvas = page.locator("#canvas")
    assert canvas.get_attribute("data-points") == "9"
    assert int(canvas.get_attribute("data-support")) >= 2
    before = numbers(page)
    assert before["num-train-error"] == "0.0%"
    assert before["num-sv"] not in ("—", "0")
    boundary_before = canvas.get_attribute("data-boundary")
    assert boundary_before not in ("none", "0:0.0")
    pixels_before = canvas.screenshot()

    page.fill("#C", "-2.5")  # C = 10^-2.5: a much softer margin
    assert settle(page) == "ok", page.inner_text("#message")
    after = numbers(page)
    assert page.inner_text("#C-value") == "0.00316"
    assert after["num-margin"] != before["num-margin"]
    assert after["num-objective"] != before["num-objective"]
    assert canvas.get_attribute("data-boundary") != boundary_before
    assert canvas.screenshot() != pixels_before
    shot = tmp_path / "playground.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
    assert not errors


def test_rapid_slider_moves_end_on_the_last_value(browser_page):
    page, errors = browser_page
    page.select_option("#preset", "xor")
    settle(page)
    sent = page.evaluate("""async () => {
        const s = document.getElementById('sigma');
        for (let v = -1.5; v <= 0.5001; v += 0.1) {
            s.value = v.toFixed(2);
            s.dispatchEvent(new Event('input'));
            await new Promise(r => setTimeout(r, 8));
        }
        // the last move's fit is sent on the next animation frame: wait for it
        while (window.maxmarginPlayground.state.queued) { await new Promise(r => setTimeout(r, 5)); }
        return window.maxmarginPlayground.state.seq;
    }""")
    assert settle(page) == "ok"
    state_seq = page.evaluate("() => window.maxmarginPlayground.state.seq")
    assert state_seq == sent
    assert page.evaluate("() => document.body.dataset.seq") == str(sent)
    assert page.inner_text("#sigma-value").startswith("3.16")
    assert page.locator("#canvas").get_attribute("data-points") == "200"
    assert not errors


def test_errors_appear_in_words_and_the_page_recovers(browser_page):
    page, errors = browser_page
    formulations = page.eval_on_selector("#formulation", "s => Array.from(s.options).map(o => o.value)")
    assert "hard" in formulations
    page.select_option("#preset", "xor")
    page.select_option("#kernel", "linear")
    page.select_option("#formulation", "hard")
    assert settle(page) == "error"
    assert "not linearly separable" in page.inner_text("#message")
    assert page.locator("#C").is_disabled()  # a hard margin has no C
    page.select_option("#formulation", "l1")
    page.select_option("#kernel", "rbf")
    assert settle(page) == "ok"
    assert page.inner_text("#message").strip() == ""
    assert not errors


def test_csv_round_trip(browser_page):
    page, errors = browser_page
    page.select_option("#preset", "moons")
    settle(page)
    csv = page.evaluate("() => window.maxmarginPlayground.exportCsv()")
    lines = csv.strip().splitlines()
    assert lines[0] == "x1,x2,label" and len(lines) == 201
    page.click("#clear")
    settle(page)
    assert page.locator("#canvas").get_attribute("data-points") == "0"
    # seed 003's layout (label first, 0/1 labels) is read too
    flipped = "y,x1,x2\n" + "".join(
        f"{1 if row.split(',')[2] == '1' else 0},{row.split(',')[0]},{row.split(',')[1]}\n" for row in lines[1:]
    )
    page.set_input_files("#import", files=[{"name": "pts.csv", "mimeType": "text/csv", "buffer": flipped.encode()}])
    # the file is read asynchronously: wait for the points before waiting for their fit
    page.wait_for_function("() => document.querySelector('#canvas').dataset.points === '200'", timeout=60_000)
    assert settle(page) == "ok"
    assert page.locator("#canvas").get_attribute("data-points") == "200"
    assert page.evaluate("() => window.maxmarginPlayground.exportCsv()").splitlines()[1:] == lines[1:]
    assert not errors


def test_paint_erase_keys_and_undo(browser_page):
    page, errors = browser_page
    page.click("#clear")
    settle(page)
    box = page.locator("#canvas").bounding_box()
    x0, y0 = box["x"] + 100, box["y"] + 300
    page.keyboard.press("3")  # third class (label 2)
    assert page.evaluate("() => window.maxmarginPlayground.state.current") == 2
    page.mouse.move(x0, y0)
    page.mouse.down()
    for k in range(1, 21):  # a 200 px stroke paints a row of points
        page.mouse.move(x0 + 10 * k, y0)
    page.mouse.up()
    painted = int(page.locator("#canvas").get_attribute("data-points"))
    assert 10 <= painted <= 21
    labels = page.evaluate("() => window.maxmarginPlayground.state.points.map(p => p.label)")
    assert set(labels) == {2}
    page.mouse.click(x0 + 100, y0, button="right")  # right-click deletes what is under it
    assert int(page.locator("#canvas").get_attribute("data-points")) < painted
    page.keyboard.press("z")  # undo brings it back
    assert int(page.locator("#canvas").get_attribute("data-points")) == painted
    page.keyboard.press("x")  # x swaps between +1 and -1
    assert page.evaluate("() => window.maxmarginPlayground.state.current") == 1
    assert settle(page) == "idle"  # one class only: a hint, no fit
    assert "two classes" in page.inner_text("#message")
    assert not errors


# --------------------------------------------------------------------------- issue 14


def reset(page, split="30"):
    """The model controls back to the defaults the other tests expect."""
    page.select_option("#formulation", "l1")
    page.select_option("#solver", "smo")
    page.select_option("#kernel", "rbf")
    page.fill("#C", "1")
    page.fill("#sigma", "-0.15")
    page.fill("#split", split)


def import_points(page, rows, keys=None):
    """Replace the points (and their train/test split keys, if given) before the page fits them."""
    csv = "x1,x2,label\n" + "".join(f"{x},{y},{lab}\n" for x, y, lab in rows)
    page.evaluate(
        """([csv, keys]) => { const pg = window.maxmarginPlayground;
        pg.importCsv(csv);       // the fit waits for the next animation frame
        if (keys) { pg.state.points.forEach((p, i) => { p.u = keys[i]; }); } }""",
        [csv, keys],
    )


def test_grid_values_keep_their_resolution_at_small_C(browser_page):
    """Issue 14.13: at C = 0.001 f varies over a few thousandths; the values the page draws
    must follow f to a small share of its range (no staircase from absolute rounding)."""
    import numpy as np

    from maxmargin import SVC

    page, errors = browser_page
    reset(page, split="100")
    rows = [
        (-1.2, 0.4, 1),
        (-0.8, -0.6, 1),
        (-1.5, -0.2, 1),
        (-0.4, 0.9, 1),
        (1.1, 0.5, -1),
        (0.7, -0.8, -1),
        (1.4, 0.1, -1),
        (0.3, -1.1, -1),
    ]
    import_points(page, rows)
    page.fill("#sigma", "0")  # sigma = 1
    page.fill("#C", "-3")  # C = 0.001
    assert settle(page) == "ok", page.inner_text("#message")
    g = page.evaluate("() => window.maxmarginPlayground.state.result.grid")
    X = np.array([r[:2] for r in rows], dtype=float)
    y = np.array([r[2] for r in rows])
    ref = SVC(kernel="rbf", C=0.001, sigma=1.0).fit(X, y)
    gx, gy = np.meshgrid(np.linspace(g["xmin"], g["xmax"], g["nx"]), np.linspace(g["ymin"], g["ymax"], g["ny"]))
    exact = ref.decision_function(np.column_stack([gx.ravel(), gy.ravel()]))
    sent = np.array(g["values"], dtype=float)
    span = exact.max() - exact.min()
    assert span < 0.05  # f is small at this C ...
    assert np.max(np.abs(sent - exact)) < 1e-4 * span  # ... and still sent to 1e-4 of its range
    # the f = 0 line the page draws is as long as the exact one (a staircase is longer)
    lengths = page.evaluate(
        """([a, b, nx, ny]) => [a, b].map(v => {
        const lines = window.maxmarginPlayground.contour(v, nx, ny, 0);
        return lines.reduce((s, l) => s + l.slice(1).reduce((t, p, i) =>
            t + Math.hypot(p[0] - l[i][0], p[1] - l[i][1]), 0), 0); })""",
        [g["values"], exact.tolist(), g["nx"], g["ny"]],
    )
    assert lengths[1] > 10 and abs(lengths[0] - lengths[1]) < 0.01 * lengths[1], lengths
    assert not errors


def test_a_fit_stopped_at_the_time_limit_is_marked_on_the_canvas(browser_page):
    """Issue 14.14: a banner over the canvas (and a frame on it) says the solver was stopped at
    the time limit and did not converge; it goes away with a converged fit."""
    from maxmargin.playground.server import run_in_thread

    page0, errors = browser_page
    with run_in_thread(warm_up=False, fit_time_limit=0.02) as srv:
        page = page0.context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        try:
            page.goto(srv.url)
            page.wait_for_function("() => document.body.dataset.status === 'idle'")
            page.fill("#split", "100")
            page.select_option("#kernel", "linear")
            page.fill("#C", "5")  # C = 1e5 on XOR, linear: SMO runs on and on
            page.select_option("#preset", "xor")
            assert settle(page) == "ok", page.inner_text("#message")
            assert page.evaluate("() => window.maxmarginPlayground.state.result.numbers.stopped") == "time"
            banner = page.locator("#canvas-banner")
            assert banner.is_visible()
            text = banner.inner_text()
            assert "time limit" in text and "not converged" in text
            b, c = banner.bounding_box(), page.locator("#canvas").bounding_box()
            assert c["x"] <= b["x"] and b["x"] + b["width"] <= c["x"] + c["width"] + 1
            assert c["y"] <= b["y"] and b["y"] + b["height"] <= c["y"] + c["height"] / 3
            assert page.locator("#canvas").get_attribute("data-banner") == "time-limit"
            page.screenshot(path=str(SHOTS / "playground-time-limit.png"))
            page.fill("#C", "-1")  # C = 0.1: converges at once
            assert settle(page) == "ok"
            assert page.evaluate("() => window.maxmarginPlayground.state.result.numbers.converged")
            assert not banner.is_visible()
        finally:
            page.close()
    assert not errors


def test_few_points_all_train_until_each_class_has_enough(browser_page):
    """Issue 14.15: with 3 points per class a 30% share would train on 2 of 6; every point
    trains until each class has the server's minimum, and the page says so."""
    page, errors = browser_page
    reset(page, split="30")
    page.click("#clear")
    box = page.locator("#canvas").bounding_box()
    page.click("#class-1")
    for fx, fy in ((0.25, 0.30), (0.30, 0.45), (0.22, 0.55)):
        page.mouse.click(box["x"] + fx * box["width"], box["y"] + fy * box["height"])
    page.click("#class-m1")
    for fx, fy in ((0.70, 0.60), (0.62, 0.75), (0.80, 0.50)):
        page.mouse.click(box["x"] + fx * box["width"], box["y"] + fy * box["height"])
    assert settle(page) == "ok", page.inner_text("#message")
    assert page.inner_text("#num-points") == "6 / 0"
    assert page.evaluate("() => window.maxmarginPlayground.state.result.train") == [1] * 6
    assert page.locator("#split-note").is_visible()
    assert "once each class has 10 points" in page.inner_text("#split-note")
    assert "all points train" in page.inner_text("#split-value")
    # with 12 points per class the 30% share applies (split keys fixed: 4 of 12 per class train)
    rows = [(-1 + 0.05 * i, 0.1 * i, 1) for i in range(12)] + [(1 + 0.05 * i, -0.1 * i, -1) for i in range(12)]
    import_points(page, rows, keys=[(i % 12) / 12 + 0.01 for i in range(24)])
    assert settle(page) == "ok", page.inner_text("#message")
    assert page.inner_text("#num-points") == "8 / 16"
    assert not page.locator("#split-note").is_visible()
    assert not errors


def test_primal_solvers_count_points_with_yf_at_most_1(browser_page):
    """Issue 14.17: subgradient has no dual coefficients; #SV, the LOO bound and the rings count
    the training points with y·f <= 1 and the page says so.  Issue 14.16 (page): a solver for the
    linear kernel only says so next to the kernel."""
    page, errors = browser_page
    reset(page, split="100")
    page.select_option("#preset", "blobs")
    page.select_option("#solver", "subgradient")
    assert page.eval_on_selector("#kernel", "k => k.value") == "linear"
    assert page.locator("#kernel-note").is_visible() and "linear kernel only" in page.inner_text("#kernel-note")
    assert settle(page) == "ok", page.inner_text("#message")
    n_sv = int(page.inner_text("#num-sv"))
    assert n_sv > 0 and n_sv == int(page.locator("#canvas").get_attribute("data-support"))
    assert page.inner_text("#sv-label") == "#SV (y·f ≤ 1)"
    assert page.inner_text("#num-loo") == f"{100 * n_sv / 200:.1f}%"
    assert "y·f ≤ 1" in page.inner_text("#sv-note") and page.locator("#sv-note").is_visible()
    # the count is the points with y f <= 1 for the (w, b) the page shows
    page.select_option("#formulation", "zero-one")  # 0/1 error: linear only, said in words
    assert settle(page) in ("ok", "error")
    assert "0/1 error" in page.inner_text("#kernel-note") and "linear kernel only" in page.inner_text("#kernel-note")
    reset(page)
    assert settle(page) == "ok"
    assert page.inner_text("#sv-label") == "#SV" and not page.locator("#sv-note").is_visible()
    assert not errors


def test_unavailable_solvers_are_disabled_with_the_reason(browser_page, monkeypatch):
    """Issue 14.16 (page): solvers the server cannot run are disabled, marked and explained."""
    import sys

    page0, errors = browser_page
    monkeypatch.setitem(sys.modules, "qpsolvers", None)  # the server (this process) lacks qpsolvers
    page = page0.context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(page0.url)
        page.wait_for_function("() => document.body.dataset.status === 'idle'")
        opts = page.eval_on_selector_all("#solver option", "os => os.map(o => [o.value, o.disabled, o.textContent])")
        for value, disabled, text in opts:
            if value in ("qp", "primal-qp"):
                assert disabled and "not installed" in text
        note = page.locator("#solver-note")
        assert note.is_visible() and "qpsolvers" in note.inner_text() and "QP (dual)" in note.inner_text()
    finally:
        page.close()
    assert not errors


def test_margin_is_one_over_w_and_min_yf_is_named(browser_page):
    """Issue 14.18: with training errors the margin shown is still 1/||w|| (positive), and
    min y·f/||w|| (negative here) is shown under its own name."""
    page, errors = browser_page
    reset(page, split="100")
    page.select_option("#kernel", "linear")
    page.select_option("#preset", "xor")  # a linear SVM cannot separate XOR
    assert settle(page) == "ok", page.inner_text("#message")
    assert page.inner_text("#num-train-error") != "0.0%"
    margin = float(page.inner_text("#num-margin"))
    min_yf = float(page.inner_text("#num-min-yf").replace("−", "-"))
    assert margin > 0 > min_yf
    assert page.inner_text("#margin-label").startswith("margin 1/‖w‖")
    assert "functional → geometric" in page.inner_text("#numbers")
    reset(page)
    assert not errors


def test_shortcuts_work_after_a_slider_and_the_canvas_fits_narrow_windows(browser_page):
    """Issue 14.19: keys switch class / mode while a slider or a menu has the focus (not while
    typing a number); in a 360 px window the canvas fits (no sideways scrolling) and a click
    still lands where it is drawn."""
    page, errors = browser_page
    reset(page)
    settle(page)
    state = "window.maxmarginPlayground.state"
    page.focus("#C")
    page.keyboard.press("ArrowRight")  # the slider moves ...
    page.keyboard.press("3")  # ... and the key still picks class 2
    assert page.evaluate(f"() => {state}.current") == 2
    page.keyboard.press("x")
    assert page.evaluate(f"() => {state}.current") == 1
    page.focus("#kernel")
    page.keyboard.press("e")
    assert page.evaluate(f"() => {state}.mode") == "erase"
    assert page.eval_on_selector("#kernel", "k => k.value") == "rbf"  # the menu did not jump
    page.keyboard.press("d")
    assert page.evaluate(f"() => {state}.mode") == "draw"
    page.select_option("#kernel", "poly")  # coef0 shows
    page.fill("#coef0", "")
    page.focus("#coef0")
    page.keyboard.type("2")  # typing a number is not a shortcut
    assert page.evaluate(f"() => {state}.current") == 1
    page.fill("#coef0", "1")
    page.select_option("#kernel", "rbf")

    page.set_viewport_size({"width": 360, "height": 800})
    try:
        page.wait_for_function(
            "() => { const r = document.querySelector('#canvas').getBoundingClientRect();"
            " return r.left >= 0 && r.right <= window.innerWidth && r.width < 400; }"
        )
        widths = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        assert widths[0] <= widths[1], widths
        page.click("#clear")
        box = page.locator("#canvas").bounding_box()
        page.mouse.click(box["x"] + 0.25 * box["width"], box["y"] + 0.75 * box["height"])
        p, v = page.evaluate(f"() => [{state}.points[0], {state}.view]")
        fx = (p["x"] - v["xmin"]) / (v["xmax"] - v["xmin"])
        fy = (v["ymax"] - p["y"]) / (v["ymax"] - v["ymin"])
        assert abs(fx - 0.25) < 0.01 and abs(fy - 0.75) < 0.01, (fx, fy)
    finally:
        page.set_viewport_size({"width": 1080, "height": 800})
    assert not errors
