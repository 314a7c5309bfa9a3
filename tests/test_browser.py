"""The playground in a real headless Chromium, driven by Playwright.

Needs Debian's ``chromium`` package (``apt-get install -y chromium``) and the
``playwright`` Python package; Playwright's own browser download is never used:
the browser is the system binary found on PATH.  Skips only where no Chromium
binary exists or playwright cannot be imported.
"""
import shutil

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
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
    "--no-first-run", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--disable-extensions", "--mute-audio",
]
TIMEOUT_MS = 20_000


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
        " && document.body.dataset.status !== 'fitting'; }", timeout=60_000)
    return page.evaluate("() => document.body.dataset.status")


def numbers(page):
    ids = ["num-train-error", "num-test-error", "num-margin", "num-sv", "num-loo", "num-objective",
           "num-iter", "num-time"]
    return {i: page.inner_text(f"#{i}") for i in ids}


def test_click_points_move_C_and_see_the_boundary_change(browser_page, tmp_path):
    page, errors = browser_page
    page.click("#clear")
    page.fill("#split", "100")         # every point trains: a few clicks are enough
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

    page.fill("#C", "-2.5")            # C = 10^-2.5: a much softer margin
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
    assert page.locator("#C").is_disabled()          # a hard margin has no C
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
        f"{1 if row.split(',')[2] == '1' else 0},{row.split(',')[0]},{row.split(',')[1]}\n" for row in lines[1:])
    page.set_input_files("#import", files=[{"name": "pts.csv", "mimeType": "text/csv",
                                            "buffer": flipped.encode()}])
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
    page.keyboard.press("3")                       # third class (label 2)
    assert page.evaluate("() => window.maxmarginPlayground.state.current") == 2
    page.mouse.move(x0, y0)
    page.mouse.down()
    for k in range(1, 21):                         # a 200 px stroke paints a row of points
        page.mouse.move(x0 + 10 * k, y0)
    page.mouse.up()
    painted = int(page.locator("#canvas").get_attribute("data-points"))
    assert 10 <= painted <= 21
    labels = page.evaluate("() => window.maxmarginPlayground.state.points.map(p => p.label)")
    assert set(labels) == {2}
    page.mouse.click(x0 + 100, y0, button="right")  # right-click deletes what is under it
    assert int(page.locator("#canvas").get_attribute("data-points")) < painted
    page.keyboard.press("z")                        # undo brings it back
    assert int(page.locator("#canvas").get_attribute("data-points")) == painted
    page.keyboard.press("x")                        # x swaps between +1 and -1
    assert page.evaluate("() => window.maxmarginPlayground.state.current") == 1
    assert settle(page) == "idle"                   # one class only: a hint, no fit
    assert "two classes" in page.inner_text("#message")
    assert not errors
