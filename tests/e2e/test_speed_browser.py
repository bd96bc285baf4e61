"""How fast each page answers a person, with the shipped models and the real test sets, in chromium.

Every action is timed from the key press or click to the end of the rerun it starts (Streamlit's
script state back to idle) plus two painted frames. The figures are printed (BENCH.md keeps them);
the assertions only guard against large regressions, since CI machines vary."""

import statistics
import time

import pytest
from st_helpers import wait_for_app_run

pytestmark = pytest.mark.e2e

WATCH_RUNS = """() => {
  const app = document.querySelector("[data-testid=stApp]");
  window.__states = [];
  new MutationObserver(() => window.__states.push(app.getAttribute("data-test-script-state")))
    .observe(app, { attributes: true, attributeFilter: ["data-test-script-state"] });
}"""
RUN_ENDED = """() => {
  const s = window.__states;
  return s.includes("running") && s[s.length - 1] !== "running"
    && document.querySelectorAll("[data-testid=stSkeleton]").length === 0;
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


def report(name: str, seconds: list[float]) -> float:
    ms = sorted(round(1000 * s) for s in seconds)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    print(f"speed: {name}: ms {ms}, median {statistics.median(ms):.0f}, p95 {p95}")
    return p95


# page link, then (what, action maker, repetitions); keys alternate so every press changes the view
CASES = {
    "explorer": (
        "/explorer?model=capsnet-mnist.safetensors&image=10",
        [
            ("new image", new_image, 4),
            ("capsule dimension slider", lambda pg: press(pg, "slider", "d3", "ArrowRight"), 4),
            ("misclassified image", lambda pg: lambda: pg.get_by_role("button", name="Misclassified").click(), 3),
        ],
    ),
    "routing": (
        "/routing?model=capsnet-mnist.safetensors&image=10",
        [
            ("new image", new_image, 4),
            ("iteration", lambda pg: press(pg, "slider", "Show iteration", "ArrowLeft"), 2),
        ],
    ),
    "em": (
        "/em?model=matrix-small-mnist.safetensors&image=10&iterations=3",
        [
            ("new image", new_image, 4),
            ("iteration", lambda pg: press(pg, "slider", "Show iteration", "ArrowLeft"), 2),
            ("zoom", lambda pg: lambda: pg.get_by_text("Zoom in on the nearest votes").first.click(), 2),
        ],
    ),
    "multimnist": (
        "/multimnist?model=capsnet-multimnist.safetensors",
        [("new pair", lambda pg: press(pg, "spinbutton", "First digit (test index)", "ArrowUp"), 4)],
    ),
    "robustness": (
        "/robustness?model=capsnet-mnist.safetensors&image=10",
        [
            ("new image", new_image, 4),
            ("rotate", lambda pg: press(pg, "slider", "rotate (degrees)", "ArrowRight"), 4),
        ],
    ),
    "tour": (
        "/tour?model=capsnet-mnist.safetensors&image=10",
        [("next step", lambda pg: lambda: pg.get_by_role("button", name="Next").first.click(), 4)],
    ),
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
