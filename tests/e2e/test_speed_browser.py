"""How fast each page answers a person, with the shipped models and the real test sets, in chromium.

Every action is timed from the key press or click to the end of the rerun it starts (Streamlit's
script state back to idle) plus two painted frames. The figures are printed (BENCH.md keeps them);
the assertions only guard against large regressions, since CI machines vary."""

import statistics
import time

import pytest
from st_helpers import wait_for_app_run

pytestmark = pytest.mark.e2e

# What the page shows, leaving out the widgets (a slider shows its new value before the rerun):
# text, metrics, chart titles and images. A fast rerun may leave no trace in the script state the
# page reports (React can batch "running" and "notRunning" into one update), so a run also counts
# as ended once the app is idle and what it shows has changed.
SHOWN = """() => {
  const main = document.querySelector("[data-testid=stMain]") || document.body;
  const parts = main.querySelectorAll(
    "[data-testid=stMarkdownContainer], [data-testid=stMetricValue], .gtitle, img, svg image, [data-testid=stAlert]");
  return [...parts].filter((el) => !el.closest("[data-testid=stWidgetLabel], [data-baseweb=slider], label"))
    .map((el) => el.src || el.getAttribute("href") || el.textContent).join("|");
}"""
WATCH_RUNS = (
    """() => {
  const app = document.querySelector("[data-testid=stApp]");
  window.__states = [];
  window.__shownNow = """
    + SHOWN
    + """;
  window.__shown = window.__shownNow();
  new MutationObserver(() => window.__states.push(app.getAttribute("data-test-script-state")))
    .observe(app, { attributes: true, attributeFilter: ["data-test-script-state"] });
}"""
)
RUN_ENDED = """() => {
  const app = document.querySelector("[data-testid=stApp]");
  const s = window.__states;
  const idle = app.getAttribute("data-test-script-state") !== "running";
  const ran = (s.includes("running") && s[s.length - 1] !== "running") || (idle && window.__shownNow() !== window.__shown);
  return ran && document.querySelectorAll("[data-testid=stSkeleton]").length === 0;
}"""
PAINTED = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"


def timed(page, act) -> float:
    """Seconds from `act()` to the end of the rerun it starts, painted."""
    page.evaluate(WATCH_RUNS)
    t0 = time.perf_counter()
    act()
    page.wait_for_function(RUN_ENDED, timeout=120_000)
    page.evaluate(PAINTED)
    took = time.perf_counter() - t0
    wait_for_app_run(page)
    return took


def press(page, role, name, key):
    def act():
        page.get_by_role(role, name=name).first.focus()
        page.keyboard.press(key)

    return act


def new_image(page):
    return press(page, "spinbutton", "Test image index", "ArrowUp")


def keys(name, *sequence):
    """A slider moved by these keys in turn, one per action."""
    left = iter(sequence)
    return lambda page: press(page, "slider", name, next(left))


def both_ends(name):
    """A slider sent to its first and last value in turn: every press changes the view."""
    return keys(name, *["Home", "End"] * 4)


def click(role, name):
    return lambda page: lambda: page.get_by_role(role, name=name).first.click()


def report(name: str, seconds: list[float]) -> float:
    ms = sorted(round(1000 * s) for s in seconds)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    in_order = [round(1000 * s) for s in seconds]
    print(f"speed: {name}: ms {ms}, median {statistics.median(ms):.0f}, p95 {p95} (in order: {in_order})")
    return p95


# page link, then (what, action maker, repetitions): every action changes the view. A single
# control is pressed 8 times, a new image 4 times, a search 3 times; the tours step through to their last step (10 and 6 steps).
CASES = {
    "explorer": (
        "/explorer?model=capsnet-mnist.safetensors&image=10",
        [
            ("new image", new_image, 4),
            ("capsule dimension slider", keys("d3", *["ArrowRight"] * 5 + ["ArrowLeft"] * 3), 8),
            ("misclassified image", click("button", "Misclassified"), 3),
        ],
    ),
    "routing": (
        "/routing?model=capsnet-mnist.safetensors&image=10",
        [("new image", new_image, 4), ("iteration", both_ends("Show iteration"), 8)],
    ),
    "em": (
        "/em?model=matrix-small-mnist.safetensors&image=10&iterations=3",
        [
            ("new image", new_image, 4),
            ("iteration", both_ends("Show iteration"), 8),
            ("zoom", lambda pg: lambda: pg.get_by_text("Zoom in on the nearest votes").first.click(), 8),
        ],
    ),
    "multimnist": (
        "/multimnist?model=capsnet-multimnist.safetensors",
        [("new pair", lambda pg: press(pg, "spinbutton", "First digit (test index)", "ArrowUp"), 4)],
    ),
    "playground": (
        "/playground?toy=dynamic&preset=outliers&cap=5",
        [
            ("point slider", keys("prediction u_hat for upper 1: x", *["ArrowRight", "ArrowLeft"] * 4), 8),
            ("iteration", both_ends("Show iteration"), 8),
        ],
    ),
    "playground-em": (
        "/playground?toy=em",
        [
            ("beta_a slider", keys("beta_a (activation bias)", *["ArrowRight", "ArrowLeft"] * 4), 8),
            ("iteration", both_ends("Show iteration"), 8),
        ],
    ),
    "robustness": (
        "/robustness?model=capsnet-mnist.safetensors&image=10",
        [("new image", new_image, 4), ("rotate", lambda pg: press(pg, "slider", "rotate (degrees)", "ArrowRight"), 8)],
    ),
    "tour": ("/tour?model=capsnet-mnist.safetensors&image=10", [("next step", click("button", "Next"), 9)]),
    "tour-matrix": ("/tour?model=matrix-small-mnist.safetensors&image=10", [("next step", click("button", "Next"), 5)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_interaction_is_timed_with_the_shipped_models(page, shipped_server, name):
    link, actions = CASES[name]
    page.goto(shipped_server + link)
    wait_for_app_run(page, timeout=120_000)
    for what, make, times in actions:
        seconds = [timed(page, make(page)) for _ in range(times)]
        p95 = report(f"{name}, {what}", seconds)
        assert p95 < 15_000, f"{name}, {what}: {p95} ms"
    assert page.get_by_test_id("stException").count() == 0
