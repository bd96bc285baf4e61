"""Two browser sessions on one server run the same cached model with different routing iterations
at the same time (the Routing page's "Routing iterations at inference"): each sees what its setting
shows when run alone, and the shared model is left as it was for everyone after them.

The model is a tiny CapsNet whose capsule weights are scaled up so that routing visibly moves
its couplings and lengths (the fixture's untrained tiny models print 0.000 and 2.303 for every
iteration count). The pages cache traces per image and iteration count (st.cache_data), so the
references "run alone" come from a second server process that never saw the concurrent runs, and
the check after them also routes an image that the shared server has not routed yet. (Checked by
hand: a page that scales the shared model's weights during its 10-iteration run fails this test.)

The same for the Routing lab: two sessions press "Run the lab" at the same time for the same model,
one with uniform couplings and one with dynamic routing, on a server with no stored lab results.
Each table shows its own routing's row with the numbers `lab.measure` gives in the test process,
and a third session, whose settings key rows that are not stored, measures both routings again on
the shared model afterwards and gets the same."""

import math
import re
import time
from urllib.parse import urlencode

import pytest
import torch
from playwright.sync_api import expect
from st_helpers import start_streamlit, stop_streamlit, wait_for_app_run

from capsviz import checkpoint as ckpt
from capsviz.analysis import lab
from capsviz.config import preset
from capsviz.data import load_split
from capsviz.models import build_model

pytestmark = pytest.mark.e2e

NAME = "loud-capsnet.safetensors"
DEFAULT_T = 3  # the preset's routing iterations: what a link without ?iterations= runs


def loud_capsnet(path, seed=0):
    """A capsnet-small whose prediction weights are 100x their initial size: its couplings move."""
    torch.manual_seed(seed)
    model = build_model(preset("capsnet-small", conv1_channels=16, primary_types=4))
    assert model.config.routing_iterations == DEFAULT_T
    with torch.no_grad():
        model.digits.W.mul_(100)
    ckpt.save_checkpoint(path, model, {"dataset": "mnist", "metrics": {"test_error": 50.0, "n_test": 100, "how": "fixture"}})


@pytest.fixture(scope="module")
def servers(tmp_path_factory, synthetic_root):
    """'shared': the server whose cached model two sessions use at once; 'alone': a second process
    (its own caches) that gives each setting's figures with one session at a time."""
    folder = tmp_path_factory.mktemp("loud-checkpoints")
    loud_capsnet(folder / NAME)
    started = {}
    try:
        for name in ("shared", "alone"):
            env = {
                "CAPSVIZ_CHECKPOINTS": str(folder),
                "CAPSVIZ_DATA_DIR": str(synthetic_root),
                "XDG_CACHE_HOME": str(tmp_path_factory.mktemp(f"cache-{name}")),
            }
            log = tmp_path_factory.mktemp(f"streamlit-{name}") / "server.log"
            proc, url = start_streamlit(env, log)
            started[name] = (proc, url, log)
        yield {name: {"url": url, "log": log} for name, (_, url, log) in started.items()}
    finally:
        codes = {name: stop_streamlit(proc) for name, (proc, _, _) in started.items()}
    for name, (_, _, log) in started.items():
        assert codes[name] == 0, log.read_text()[-2000:]


@pytest.fixture
def new_page(browser):
    """Pages, each in a browser context of its own: separate cookies, so separate Streamlit sessions."""
    contexts = []

    def make():
        ctx = browser.new_context(viewport={"width": 1400, "height": 2400})
        contexts.append(ctx)
        pg = ctx.new_page()
        pg.set_default_timeout(60_000)
        pg.errors = []
        pg.on("pageerror", lambda e: pg.errors.append(str(e)))
        return pg

    yield make
    for ctx in contexts:
        ctx.close()


def link(url, image, iterations=None):
    return f"{url}/routing?model={NAME}&image={image}" + ("" if iterations is None else f"&iterations={iterations}")


def figures(page):
    """What the Routing page prints about its image routed with its iterations T: the prediction,
    the winner's length after iteration 1 and T, and the couplings' mean evenness at 1 and T."""
    caption = page.get_by_test_id("stImageCaption").filter(has_text=re.compile(r"^input \(label"))
    lengths = page.get_by_test_id("stCaptionContainer").filter(has_text="A digit capsule's length is")
    entropy = page.get_by_test_id("stCaptionContainer").filter(has_text="The chart shows how evenly")
    for part in (caption, lengths, entropy):
        # a cold server's first run, beside another test worker's, took over 30 s once in CI
        expect(part).to_have_count(1, timeout=90_000)
    return caption.inner_text(), lengths.inner_text(), entropy.inner_text()


def go(page, url, image, T=None):
    """Open the Routing page without waiting for it: several pages can load at once."""
    page.goto(link(url, image, T), wait_until="commit")


def read(page, T=None):
    """The figures of a page opened with `go`, once its script run has finished."""
    wait_for_app_run(page)
    expect(page.get_by_role("heading", name="Dynamic routing, iteration by iteration")).to_be_visible()
    if T is not None:
        expect(page).to_have_url(re.compile(rf"iterations={T}(&|$)"))
    return figures(page)


def open_alone(page, url, image, T=None):
    go(page, url, image, T)
    return read(page, T)


WATCH_RUNS = """() => {  // every script state the app passes through, with the time (one clock for all pages)
  window.runs = [];
  const app = document.querySelector("[data-testid='stApp']");
  new MutationObserver((records) => {  // one callback may carry several changes: each record has the state it left
    const now = Date.now();
    for (const r of records) window.runs.push([r.oldValue, now]);
    window.runs.push([app.getAttribute('data-test-script-state'), now]);
  }).observe(app, {attributes: true, attributeOldValue: true, attributeFilter: ['data-test-script-state']});
}"""
RUN_DONE = "() => { const i = runs.findIndex(r => r[0] === 'running'); return i >= 0 && runs.slice(i).some(r => r[0] === 'notRunning'); }"


def run_span(page):
    """(start, end) in ms of the first script run since WATCH_RUNS."""
    runs = page.evaluate("runs")
    i = next(k for k, r in enumerate(runs) if r[0] == "running")
    return runs[i][1], next(t for s, t in runs[i:] if s == "notRunning")


def no_exceptions(page):
    assert page.get_by_test_id("stException").count() == 0
    assert not page.errors, page.errors


def test_two_sessions_route_one_cached_model_differently_at_once(servers, new_page):
    shared, alone = servers["shared"]["url"], servers["alone"]["url"]
    t0 = time.perf_counter()

    # before: a session on the shared server with the model's default (3 iterations), and the same on the
    # server of its own (both servers' first page at once: their first runs are the slow ones)
    before, ref = new_page(), new_page()
    go(before, shared, 5)
    go(ref, alone, 5)
    want = {DEFAULT_T: read(ref)}
    assert read(before) == want[DEFAULT_T]
    # one session at a time, on the server of its own: what each setting shows when run alone; image 6 (for
    # the check after) first, so that a model changed by its own runs with other iterations could not match
    want_image_6 = open_alone(ref, alone, 6)
    for T in (1, 10):
        want[T] = open_alone(ref, alone, 5, T)
    assert len(set(want.values())) == 3, want  # the figures depend on the iterations
    assert "with one iteration nothing is shifted" in want[1][1] and "at iteration 10 its couplings are away from uniform" in want[10][2], (
        want
    )

    # two sessions open the page on the shared server, one with 1 iteration, one with 10, then ask for a new
    # image at the same moment (7 and 8, which this server has not routed yet): both route at once. (The page
    # keeps each image's 10-iteration trace and shows its first T, so an iterations change alone routes nothing.)
    want_new = {1: open_alone(ref, alone, 7, 1), 10: open_alone(ref, alone, 8, 10)}
    a, b = new_page(), new_page()
    for pg, T in ((a, 1), (b, 10)):
        go(pg, shared, 5, T)
    for pg, T in ((a, 1), (b, 10)):
        assert read(pg, T) == want[T]
        pg.evaluate(WATCH_RUNS)
    boxes = [pg.get_by_role("spinbutton", name="Test image index") for pg in (a, b)]
    for box, image in zip(boxes, (7, 8), strict=True):
        box.fill(str(image))
    for box in boxes:
        box.press("Enter")
    for pg, image in ((a, 7), (b, 8)):
        expect(pg).to_have_url(re.compile(rf"image={image}(&|$)"))
        # two routings at once on a shared 2-core machine, beside the other test worker's load (a
        # model's test-set evaluation): twice took over a minute in a full run, never alone
        pg.wait_for_function(RUN_DONE, timeout=180_000)
        wait_for_app_run(pg, timeout=180_000)
    (a0, a1), (b0, b1) = run_span(a), run_span(b)
    print(f"the two reruns: A {a1 - a0} ms, B {b1 - b0} ms, at once for {min(a1, b1) - max(a0, b0)} ms")
    assert a0 < b1 and b0 < a1, f"the two reruns did not overlap: A {a0}-{a1}, B {b0}-{b1}"
    got_a, got_b = figures(a), figures(b)
    assert got_a == want_new[1]
    assert got_b == want_new[10]
    assert got_a != got_b

    # after: fresh sessions with the default see the model as before; the page caches its traces per image
    # and iterations, so an image this server has not routed yet shows that the model itself is unchanged
    after = new_page()
    assert open_alone(after, shared, 5) == want[DEFAULT_T]
    assert open_alone(after, shared, 6) == want_image_6

    for pg in (before, ref, a, b, after):
        no_exceptions(pg)
    for name in ("shared", "alone"):
        log = servers[name]["log"].read_text()
        assert "Traceback" not in log and "Error" not in log, log[-3000:]
        assert log.count(f"capsviz: loaded model {NAME}") == 1, log[-3000:]  # loaded once, shared by every session
    print(f"two sessions routing one model at once: {time.perf_counter() - t0:.1f} s")


# The Routing lab. Seed 1: a loud model whose test error differs between uniform couplings and dynamic
# routing (seed 0's is 100% with both on the synthetic test images)
LAB_SEED = 1
LAB_TEST = 1000  # the page's smallest "Test images for the error" (the synthetic test set has 200: all of them)
# what the page shows of a row, from a lab.Row, rounded as the table rounds it ("ms / image" differs between runs)
SHOWN = {
    "error %": (lambda r: r.test_error, 2),
    "shifted %": (lambda r: r.shifted_accuracy, 1),  # the lab page's short headers (their long form is their help)
    f"FGSM {lab.FGSM_EPSILON:g} %": (lambda r: r.fgsm_accuracy, 1),
    "entropy %": (lambda r: 100 * r.entropy_ratio, 1),
    "c to pred.": (lambda r: r.coupling_to_prediction, 2),
}


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory, synthetic_root):
    """A server whose model folder holds one loud CapsNet and whose cache folder is empty: no lab row is stored."""
    folder, cache = tmp_path_factory.mktemp("lab-checkpoints"), tmp_path_factory.mktemp("cache-lab")
    loud_capsnet(folder / NAME, seed=LAB_SEED)
    env = {
        "CAPSVIZ_CHECKPOINTS": str(folder),
        "CAPSVIZ_DATA_DIR": str(synthetic_root),
        "XDG_CACHE_HOME": str(cache),
        "CAPSVIZ_CACHE": str(cache / "capsviz"),  # where the lab stores its rows: cache/capsviz/sweeps
    }
    log = tmp_path_factory.mktemp("streamlit-lab") / "server.log"
    proc, url = start_streamlit(env, log)
    try:
        yield {"url": url, "log": log, "model": folder / NAME, "sweeps": cache / "capsviz" / "sweeps", "data": synthetic_root}
    finally:
        code = stop_streamlit(proc)
    assert code == 0, log.read_text()[-2000:]


def lab_link(url, routings, test=LAB_TEST):
    """The lab with this model and these routings: the multiselect's parameter repeated, each routing
    named by its words (?lab_routings=uniform+couplings+%28no+routing%29), as a link written before
    the page wrote the stable keys (?lab_routings=uniform) names them; the page reads either."""
    query = [("model", NAME), ("lab_models", NAME.removesuffix(".safetensors"))]
    return f"{url}/lab?" + urlencode(query + [("lab_routings", lab.LAB_ROUTINGS[r]) for r in routings] + [("lab_test", test)])


def lab_ready(page, routings):
    """A lab page opened with `lab_link`, its script run finished: these routings chosen, none of their rows stored."""
    wait_for_app_run(page)
    chosen = page.get_by_test_id("stMultiSelect").filter(has_text="Run with")
    for r in lab.LAB_ROUTINGS:
        expect(chosen.get_by_text(lab.LAB_ROUTINGS[r], exact=True)).to_have_count(int(r in routings))
    n = len(routings)
    expect(page.get_by_text(f"{n} of the {n} rows are not stored for these settings yet")).to_be_visible()
    return page.get_by_role("button", name="Run the lab")


def lab_page(new_page):
    """A page wide enough for every column of the lab's table: its grid's accessible table holds the columns in view."""
    pg = new_page()
    pg.set_viewport_size({"width": 1900, "height": 2400})
    return pg


def lab_table(page, n):
    """The `n` rows of the lab's table, by "run with": {column: text}."""
    expect(page.get_by_text("Does routing matter? The short answer")).to_be_visible()
    wait_for_app_run(page)
    rows = [{} for _ in range(n)]  # the page splits the table in two (lab.SPLIT), rows in the same order
    for k in range(len(lab.SPLIT)):
        grid = page.get_by_test_id("stDataFrame").nth(k).locator("table[role=grid]")
        expect(grid.locator("tbody tr")).to_have_count(n)
        heads = grid.locator("th").all_inner_texts()
        for row, tr in zip(rows, grid.locator("tbody tr").all(), strict=True):
            row.update(zip(heads, tr.locator("td").all_inner_texts(), strict=True))
    assert list(rows[0])[-2:] == ["ms / image", "ms range"], rows[0]  # the last column: all of them in view
    return {row["run with"]: row for row in rows}


def same_as_shown(row, want):
    """A shown row has `want`'s names and numbers (a lab.Row), each as the table rounds it."""
    assert (row["model"], row["trained with"], row["run with"]) == (want.model, want.trained_with, want.run_with), row
    for column, (value, digits) in SHOWN.items():
        assert column in row, f"{column!r} not in view: {row}"
        assert math.isclose(float(row[column]), round(value(want), digits), abs_tol=1e-9), (column, row, want)


def test_two_sessions_run_the_lab_with_different_routings_at_once(lab_server, new_page):
    url, path = lab_server["url"], lab_server["model"]
    settings = lab.Settings(test_images=LAB_TEST)
    t0 = time.perf_counter()

    # two sessions open the lab for the same model, one with uniform couplings and one with dynamic routing
    a, b = lab_page(new_page), lab_page(new_page)
    sessions = ((a, "uniform"), (b, "dynamic"))
    for pg, r in sessions:
        pg.goto(lab_link(url, [r]), wait_until="commit")
    # meanwhile, in the test process: what each routing gives when run alone, on the same file, images and settings
    model, meta = ckpt.load_checkpoint(path)
    images = load_split(meta.image_dataset, "test", lab_server["data"])
    want = {r: lab.measure(model, path.stem, r, images, settings) for r in ("uniform", "dynamic")}
    assert want["uniform"].test_error != want["dynamic"].test_error, want  # the routing changes the answers
    assert round(100 * want["uniform"].entropy_ratio, 1) == 100.0 and 100 * want["dynamic"].entropy_ratio < 95, want

    # both press "Run the lab" at the same moment
    for pg, r in sessions:
        button = lab_ready(pg, [r])
        pg.evaluate(WATCH_RUNS)
        button.focus()
    for pg, _ in sessions:
        pg.keyboard.press("Enter")
    for pg, _ in sessions:
        pg.wait_for_function(RUN_DONE)
        expect(pg.get_by_text("Does routing matter? The short answer")).to_be_visible()
        wait_for_app_run(pg)
    (a0, a1), (b0, b1) = run_span(a), run_span(b)
    print(f"the two lab runs: A {a1 - a0} ms, B {b1 - b0} ms, at once for {min(a1, b1) - max(a0, b0)} ms")
    assert a0 < b1 and b0 < a1, f"the two lab runs did not overlap: A {a0}-{a1}, B {b0}-{b1}"

    # each table holds its own routing's row alone, with the numbers that routing gives run alone
    got = {}
    for pg, r in sessions:
        table = lab_table(pg, 1)
        assert list(table) == [r], table
        same_as_shown(table[r], want[r])
        got[r] = table[r]
    assert got["uniform"]["entropy %"] == "100" and float(got["dynamic"]["entropy %"]) < 95, got
    assert got["uniform"]["error %"] != got["dynamic"]["error %"], got
    # what was stored for the next session equals it (every measure, unrounded; the time is the machine's)
    kept = lab.stored_rows([(path, meta)], list(want), settings, folders=[lab_server["sweeps"]])
    assert sorted(kept) == [(path.stem, "dynamic"), (path.stem, "uniform")], kept
    for (_, r), row in kept.items():
        for m in lab.MEASURES:  # pair accuracy: None, for a model that does not read MultiMNIST
            v = getattr(want[r], m)
            assert getattr(row, m) == (v if v is None else pytest.approx(v, rel=1e-6, abs=1e-9)), (r, m, row, want[r])

    # after: a fresh session whose settings key rows that are not stored (2000 test images: still all 200)
    # measures both routings again on the shared cached model, and gets what they gave before
    after = lab_page(new_page)
    after.goto(lab_link(url, ["uniform", "dynamic"], test=2000))
    lab_ready(after, ["uniform", "dynamic"]).click()
    table = lab_table(after, 2)
    assert sorted(table) == ["dynamic", "uniform"], table
    for r, row in table.items():
        same_as_shown(row, want[r])

    for pg in (a, b, after):
        no_exceptions(pg)
    log = lab_server["log"].read_text()
    assert "Traceback" not in log and "Error" not in log, log[-3000:]
    assert log.count(f"capsviz: loaded model {NAME}") == 1, log[-3000:]  # loaded once, shared by every session
    assert log.count("capsviz lab: loud-capsnet with") == 4, log[-3000:]  # uniform and dynamic, each twice
    print(f"two sessions running the lab at once: {time.perf_counter() - t0:.1f} s")
