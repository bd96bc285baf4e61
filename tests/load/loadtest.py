"""A class on one server: N browser sessions (chromium contexts) use one local capsviz server at
once, for a fixed time, each with its own image, slider moves and routing iterations.

    python tests/load/loadtest.py --sessions 20 --seconds 60       # starts its own server
    python tests/load/loadtest.py --url http://127.0.0.1:8501      # or drives a running one

Students arrive one after another over --arrive seconds (all at once is --arrive 0). Each session
opens the explorer on its own test image (timed: "open page"), then for --seconds loops, looking
0.5-1.5 s before each move: a slider key press (its own dimension), a new image (its own sequence), or the routing
page's iteration. Every interaction is
timed from the key press to the end of the rerun it starts (the page's script state back to idle),
and after each one the session checks that the page shows its own image index, its own slider
values and its own model. A page showing another session's image, model or slider is a **leak**;
a page still showing the session's *own* earlier state (a press not answered in 60 s) is an error
("stale"), after which the session reloads its page. Prints p50 / p95 / max per interaction, the
errors, and the leaks (always expected 0). Exit status 1 on any leak or error."""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "e2e"))
from st_helpers import CHROMIUM, CHROMIUM_ARGS, cpu_name, start_streamlit, stop_streamlit  # noqa: E402

ROOT = HERE.parents[1]
MODEL = "capsnet-mnist.safetensors"
IDLE = """() => {
  const app = document.querySelector("[data-testid=stApp]");
  return app?.getAttribute("data-test-connection-state") === "CONNECTED" && app.getAttribute("data-test-script-state") === "notRunning"
    && document.querySelectorAll("[data-testid=stSkeleton]").length === 0;
}"""


class Session:
    def __init__(self, k: int, page, url: str, model: str, timings, problems):
        self.k, self.page, self.url, self.model = k, page, url, model
        self.image = 100 + 37 * k  # this session's own test images: 100 + 37k, 101 + 37k, ...
        self.shown_before = {self.image}  # every image this session has asked for
        self.dim = k % 16
        self.offsets = {0}  # every offset this session has set its slider to
        self.offset = 0  # this session's slider value, in steps of 0.05
        self.timings, self.problems = timings, problems

    async def open(self, path: str) -> None:
        t0 = time.perf_counter()
        await self.page.goto(f"{self.url}/{path}?model={self.model}&image={self.image}", timeout=180_000)
        await self.page.get_by_role("spinbutton", name="Test image index").wait_for(timeout=180_000)
        await self.page.wait_for_function(IDLE, timeout=180_000)
        self.timings["open page"].append(time.perf_counter() - t0)
        self.offset = 0
        self.stale = False

    async def timed(self, name: str, act, shown) -> None:
        """Seconds from `act()` to `shown` on screen (a locator, or a JS condition): what the person
        waits for. A fast rerun may leave no trace in the page's script state (React batches its two
        changes), so the end is what the page shows, not the script state."""
        for _ in range(2):  # idle, and still idle a moment later: a second rerun may follow the first (a number input's blur)
            await self.page.wait_for_function(IDLE, timeout=120_000)
            await asyncio.sleep(0.3)
        t0 = time.perf_counter()
        await act()
        try:
            if isinstance(shown, str):
                await self.page.wait_for_function(shown, timeout=60_000, polling="raf")
            else:
                await shown.first.wait_for(timeout=60_000)
        except Exception as e:  # noqa: BLE001 - a timeout is reported, not raised: the other sessions go on
            self.problems["error"].append(f"session {self.k}, {name}: {type(e).__name__} ({self.page.url})")
            self.stale = True  # what the page shows may lag behind what this session asked for
            return
        self.timings[name].append(time.perf_counter() - t0)
        await self.page.wait_for_function(IDLE, timeout=120_000)

    def judge(self, what: str, shown, own, own_before: bool) -> None:
        """Another session's value is a leak; this session's own earlier value is stale (an error)."""
        if shown == own:
            return
        kind = "error" if own_before else "leak"
        self.problems[kind].append(
            f"session {self.k}: shows {what} {shown!r}, its own is {own!r}" + (" (its own earlier one: stale)" if own_before else "")
        )
        self.stale = True

    async def check(self) -> None:
        """The page must show this session's own state."""
        url = self.page.url
        if f"model={self.model}" not in url:
            self.problems["leak"].append(f"session {self.k}: URL {url} is not its model {self.model}")
        shown = int(await self.page.get_by_role("spinbutton", name="Test image index").input_value() or -1)
        self.judge("image", shown, self.image, shown in self.shown_before)
        if "/explorer" in url:
            caption = (await self.page.get_by_text("perturbed:").first.inner_text()).split("perturbed:", 1)[1].strip()
            want = f"d{self.dim} {self.offset * 0.05:+.2f}" if self.offset else "none"
            mine = caption == "none" or caption in {f"d{self.dim} {o * 0.05:+.2f}" for o in self.offsets}
            self.judge("sliders", caption, want, mine)
        if await self.page.get_by_test_id("stException").count():
            self.problems["error"].append(f"session {self.k}: an exception on {url}")

    async def slider(self) -> None:
        key = "ArrowRight" if self.offset < 5 else "Home"  # up to +0.25, then Home: -0.25

        thumb = self.page.get_by_role("slider", name=f"d{self.dim}", exact=True)
        # the 16 sliders are a component whose script attaches its handlers after the page has drawn
        # it: a key press before that moves the slider without telling the server
        for _ in range(600):
            if await thumb.evaluate("(el) => typeof el.onchange === 'function'"):
                break
            await asyncio.sleep(0.1)

        async def act():
            await thumb.press(key)

        self.offset = self.offset + 1 if key == "ArrowRight" else -5
        self.offsets.add(self.offset)
        await self.timed("slider key press", act, self.page.get_by_text(f"perturbed: d{self.dim} {self.offset * 0.05:+.2f}", exact=True))

    async def new_image(self) -> None:
        self.image += 1
        self.shown_before.add(self.image)
        box = self.page.get_by_role("spinbutton", name="Test image index")

        async def act():
            await box.fill(str(self.image))
            await box.press("Enter")

        self.offset = 0  # the sliders start again at 0 for a new image
        await self.timed("new image", act, f"() => location.search.includes('image={self.image}&') && ({IDLE})()")

    async def iteration(self) -> None:
        slider = self.page.get_by_role("slider", name="Show iteration")
        key = "End" if await slider.get_attribute("aria-valuetext") == "1" else "Home"  # every press changes the view

        async def act():
            await slider.press(key)

        want = "Iteration 3" if key == "End" else "Iteration 1"  # the coupling maps' title (3 iterations: the model's own)
        await self.timed("routing iteration", act, self.page.locator("[data-testid=stPlotlyChart] .gtitle", has_text=want))

    async def run(self, arrive: float, seconds: float) -> None:
        rng = random.Random(self.k)
        await asyncio.sleep(arrive)
        await self.open("explorer")
        until = time.perf_counter() + seconds  # each student works this long once the page is open
        while time.perf_counter() < until:
            await asyncio.sleep(rng.uniform(0.5, 1.5))  # a person looks before the next move
            if self.stale:  # a press went unanswered: start again from the page, as a student would reload
                await self.open("routing" if "/routing" in self.page.url else "explorer")
            elif "/routing" in self.page.url:
                await (self.iteration() if rng.random() < 0.7 else self.open("explorer"))
            else:
                r = rng.random()
                await (self.slider() if r < 0.6 else self.new_image() if r < 0.85 else self.open("routing"))
            await self.check()


async def load(sessions: int, seconds: float, arrive: float, url: str | None, model: str = MODEL, server_first: bool = False):
    """Run the class; returns (timings: name -> seconds, problems: "error"/"leak" -> lines, elapsed s)."""
    from playwright.async_api import async_playwright

    proc = None
    if url is None:
        data = ROOT.parent / "shared" / "data"
        env = {"CAPSVIZ_CHECKPOINTS": str(ROOT / "checkpoints"), "XDG_CACHE_HOME": tempfile.mkdtemp()}
        if (data / "mnist").is_dir():
            env["CAPSVIZ_DATA_DIR"] = str(data)
        proc, url = start_streamlit(env, Path(tempfile.mkdtemp()) / "server.log")
        if server_first:  # the server before the browsers on the shared cores, as when each student has a device
            for thread in os.listdir(f"/proc/{proc.pid}/task"):  # a priority is per thread; later threads inherit it
                os.setpriority(os.PRIO_PROCESS, int(thread), -10)
    timings, problems = defaultdict(list), defaultdict(list)
    try:
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            pages = []
            for _ in range(sessions):  # one context each: its own cookies, its own Streamlit session
                ctx = await browser.new_context(viewport={"width": 1200, "height": 1600})
                pages.append(await ctx.new_page())
            start = time.perf_counter()
            students = [Session(k, pg, url, model, timings, problems) for k, pg in enumerate(pages)]
            gap = arrive / max(sessions - 1, 1)
            results = await asyncio.gather(*(s.run(k * gap, seconds) for k, s in enumerate(students)), return_exceptions=True)
            for k, r in enumerate(results):
                if isinstance(r, Exception):
                    problems["error"].append(f"session {k}: {type(r).__name__}: {str(r).splitlines()[0][:200]}")
            elapsed = time.perf_counter() - start
            await browser.close()
    finally:
        if proc is not None:
            stop_streamlit(proc)
    return timings, problems, elapsed


def report(timings, problems, elapsed: float, args) -> int:
    print(
        f"{args.sessions} browser sessions arriving over {args.arrive:.0f} s, {args.seconds:.0f} s each, {elapsed:.0f} s in all, "
        f"model {args.model}; {cpu_name()}, {os.cpu_count()} cores (server and every browser on this machine"
        + (", the server first)" if args.server_first else ")")
    )
    for name, seconds in sorted(timings.items()):
        ms = sorted(1000 * s for s in seconds)
        p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
        print(f"  {name:18} n={len(ms):4}  p50 {statistics.median(ms):6.0f} ms  p95 {p95:6.0f} ms  max {ms[-1]:6.0f} ms")
    for kind in ("error", "leak"):
        print(f"  {kind}s: {len(problems[kind])}")
        for line in problems[kind][:10]:
            print(f"    {line}")
    return 1 if problems["error"] or problems["leak"] else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=60, help="how long each session works once its page is open")
    ap.add_argument("--arrive", type=float, default=30, help="the sessions open one after another over this many seconds")
    ap.add_argument("--url", help="a running capsviz server (default: start one with the shipped checkpoints)")
    ap.add_argument("--model", default=MODEL)
    ap.add_argument(
        "--server-first",
        action="store_true",
        help="give the server it starts priority over the browsers on this machine's cores (needs the right to raise a priority)",
    )
    a = ap.parse_args()
    sys.exit(report(*asyncio.run(load(a.sessions, a.seconds, a.arrive, a.url, a.model, a.server_first)), a))
