"""How fast the static site answers in chromium, and what it costs to download (BENCH.md).

    python -m capsviz.site.bench [--site DIR]
    python -m capsviz.site.bench --site DIR --before OTHER_DIR [--repeat N]

Builds the default site into DIR (a temporary folder without --site; an existing DIR is used as
built), serves it from 127.0.0.1 with every other request aborted, and measures in headless
chromium (Debian's, through Playwright), printing the machine's load average beside the figures:
- the first view (the explorer drawn; ask=0, its question left out) with a cold cache, from navigation start, for the site's
  own first model (a link without model=) and for a link to the paper CapsNet, and where its time
  goes: the page's marks (performance.mark "capsviz: ...": the program running, onnxruntime's
  WebAssembly fetched, the first session open, the model open, the first view);
- once the page is kept for offline use (its service worker installed, as after a student's first
  minute), a dimension slider's arrow key until the reconstruction is redrawn, and a change of
  routing iterations until the routing view is drawn (the page's own performance.now() timings);
- per model: its ONNX files' size, and one image's forward pass (encoder, routing and decoder) in
  the browser beside PyTorch's on the same CPU;
- the site's size on disk and gzip-compressed (what a host that compresses sends).
"""

from __future__ import annotations

import argparse
import functools
import gzip
import http.server
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch

# The page's marks (site.js, js/runtime.js), each at its first occurrence; "first session" is the earliest session opened
MARKS = """(() => {
  const first = (name) => performance.getEntriesByName(name, "mark")[0]?.startTime;
  const at = (prefix) => performance.getEntriesByType("mark").filter((m) => m.name.startsWith(prefix)).map((m) => m.startTime);
  const sessions = at("capsviz: session ");
  const fetched = at("capsviz: fetched ");
  return Object.entries({
    "program running": first("capsviz: start"),
    "runtime fetched": first("capsviz: runtime fetched"),
    "graphs fetched": fetched.length ? Math.max(...fetched) : undefined,
    "first session": sessions.length ? Math.min(...sessions) : undefined,
    "model open": first("capsviz: model open"),
    "first inference": first("capsviz: computed"),
    "first view": first("capsviz: first view"),
  }).filter(([, v]) => v !== undefined);
})()"""
# graphs fetched: the model's graphs and weights downloaded and inflated (the last of them); model open: every
# session of the model made; first inference: the encoder and routing run on the first image; first view: drawn
FIRST_VIEW_STAGES = ("program running", "runtime fetched", "graphs fetched", "first session", "model open", "first inference", "first view")


def _p(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def _serve(folder: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *_):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_port}/"


def _pytorch_ms(path: Path, runs: int) -> float:
    from capsviz.checkpoint import load_checkpoint

    model, _ = load_checkpoint(path)
    x = torch.rand(1, model.config.in_channels, model.config.in_size, model.config.in_size)
    times = []
    with torch.no_grad():
        model(x)
        for _ in range(runs):
            t = time.perf_counter()
            model(x)
            times.append(1000 * (time.perf_counter() - t))
    return statistics.median(times)


def _local(url: str):
    """A route handler that lets requests to `url` through and aborts every other."""
    return lambda r: r.continue_() if r.request.url.startswith(url) else r.abort()


def compare(before: Path, after: Path, repeat: int, model: str = "capsnet-mnist") -> None:
    """Cold first views of `model` from two built sites, served side by side and taken in turn
    (before, after, before, ...) so both see the same load: each stage's median and the slowest view."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "e2e"))
    from playwright.sync_api import sync_playwright
    from st_helpers import CHROMIUM, CHROMIUM_ARGS, cpu_name

    servers = {name: _serve(folder) for name, folder in (("before", before), ("after", after))}
    print(f"CPU: {cpu_name()}; chromium {CHROMIUM}; {repeat} cold first views of {model} from each site, in turn")
    marks = {name: {} for name in servers}
    loads = [os.getloadavg()[0]]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for _ in range(repeat):
            for name, (_, url) in servers.items():
                ctx = browser.new_context(viewport={"width": 1280, "height": 1400})  # a cold cache
                pg = ctx.new_page()
                pg.route("**/*", _local(url))
                pg.goto(f"{url}?view=explore&ask=0&model={model}.safetensors")
                pg.evaluate("window.capsviz.ready")
                for k, v in pg.evaluate(MARKS):
                    marks[name].setdefault(k, []).append(v)
                ctx.close()
                loads.append(os.getloadavg()[0])
        browser.close()
    for srv, _ in servers.values():
        srv.shutdown()
    print(f"load average (1 min) during the runs: {min(loads):.1f} to {max(loads):.1f}")
    print("\n| stage (median ms from navigation start) | before | after |\n|---|---:|---:|")
    for k in FIRST_VIEW_STAGES:
        cells = [f"{statistics.median(marks[n][k]):,.0f}" if k in marks[n] else "-" for n in servers]
        print(f"| {k} | " + " | ".join(cells) + " |")
    print("| first view, slowest | " + " | ".join(f"{max(marks[n]['first view']):,.0f}" for n in servers) + " |")


def main(argv=None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "e2e"))
    from playwright.sync_api import sync_playwright
    from st_helpers import CHROMIUM, CHROMIUM_ARGS, cpu_name

    from capsviz.paths import model_folder
    from capsviz.site import DEFAULT_MODELS, build

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--site", type=Path)
    ap.add_argument("--repeat", type=int, default=5, help="cold first views (default 5)")
    ap.add_argument(
        "--before", type=Path, help="another built site: only compare the paper CapsNet's cold first views, in turn with --site's"
    )
    args = ap.parse_args(argv)
    if args.before:
        compare(args.before, args.site, args.repeat)
        return 0
    site = args.site or Path(tempfile.mkdtemp()) / "site"
    if not (site / "site.json").exists():
        build(site, [model_folder() / f"{m}.safetensors" for m in DEFAULT_MODELS], log=lambda _: None)
    srv, url = _serve(site)
    print(f"CPU: {cpu_name()}, {torch.get_num_threads()} threads; torch {torch.__version__}; chromium {CHROMIUM}")
    loads = [os.getloadavg()[0]]
    rows = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)

        def page(query: str):
            ctx = browser.new_context(viewport={"width": 1280, "height": 1400})  # a new context: a cold cache
            pg = ctx.new_page()
            pg.route("**/*", lambda r: r.continue_() if r.request.url.startswith(url) else r.abort())
            pg.goto(url + query)
            pg.evaluate("window.capsviz.ready")
            return ctx, pg

        marks = {}
        for model in (None, "capsnet-mnist"):
            first = []
            for _ in range(args.repeat):
                ctx, pg = page("?view=explore&ask=0" + (f"&model={model}.safetensors" if model else ""))
                got = dict(pg.evaluate(MARKS))
                first.append(got["first view"])
                for k, v in got.items():
                    marks.setdefault((model, k), []).append(v)
                ctx.close()
                loads.append(os.getloadavg()[0])
            name = model or f"{DEFAULT_MODELS[0]} (the site's first)"
            rows.append((f"first view, {name}, cold cache", len(first), statistics.median(first), max(first), "3,000 max"))

        def presses(pg, control: str, timing: str, n: int) -> list[float]:
            """Arrow keys on `control`, five right then five left, each waited for until its view is drawn."""
            pg.focus(control)
            for k in range(n):
                pg.keyboard.press("ArrowRight" if k % 10 < 5 else "ArrowLeft")
                pg.wait_for_function(f"window.capsviz.timings.{timing}.length > {k}")
            return pg.evaluate(f"window.capsviz.timings.{timing}")

        for model in [m for m in DEFAULT_MODELS if not m.startswith("matrix")]:  # the EM view has neither control
            ctx, pg = page(f"?view=explore&ask=0&model={model}.safetensors")
            pg.evaluate("window.capsviz.offline")
            slider = presses(pg, "#dim3", "slider", 40)
            rows.append((f"slider move, {model}", len(slider), statistics.median(slider), _p(slider, 0.95), "50 p95"))
            if model != "efficient-capsnet-mnist":
                pg.click("nav button[data-view=routing]")
                its = presses(pg, "#iterations", "iterations", 20)
                rows.append((f"routing iterations change, {model}", len(its), statistics.median(its), _p(its, 0.95), "100 p95"))
            ctx.close()
            loads.append(os.getloadavg()[0])

        print("\nWhere the first view's time goes: the median ms from navigation start at which each mark fell")
        print("\n| link | " + " | ".join(FIRST_VIEW_STAGES) + " |\n|---|" + "---:|" * len(FIRST_VIEW_STAGES))
        for model in (None, "capsnet-mnist"):
            cells = [f"{statistics.median(marks[(model, k)]):,.0f}" if (model, k) in marks else "-" for k in FIRST_VIEW_STAGES]
            print(f"| {model or DEFAULT_MODELS[0]} | " + " | ".join(cells) + " |")
        print(f"\nload average (1 min) during the runs: {min(loads):.1f} to {max(loads):.1f}")

        print("\n| interaction | n | median ms | p95 (max for the first view) ms | target ms |\n|---|---:|---:|---:|---:|")
        for name, n, med, p95, target in rows:
            print(f"| {name} | {n} | {med:,.0f} | {p95:,.0f} | {target} |")

        print(
            "\n| model | MB (graphs, packed weights) | browser forward ms (median of 20) | PyTorch forward ms (median of 20) |\n|---|---:|---:|---:|"
        )
        ctx, pg = page("?view=explore&ask=0")
        for model in DEFAULT_MODELS:
            onnx = sum(f.stat().st_size for f in (site / "models" / model).iterdir()) / 2**20  # graphs and packed weights
            ms = pg.evaluate(
                """async (name) => { const run = (k) => name.startsWith("matrix") ? window.capsviz.computeEM(k) : window.capsviz.compute(name, k, 3);
                   await run(0); const t = [];
                   for (let k = 0; k < 20; k++) { const t0 = performance.now(); await run(k); t.push(performance.now() - t0); }
                   t.sort((a, b) => a - b); return t[10]; }""",
                f"{model}.safetensors",
            )
            print(f"| {model} | {onnx:.1f} | {ms:.0f} | {_pytorch_ms(model_folder() / f'{model}.safetensors', 20):.0f} |")
        ctx.close()
        browser.close()
    srv.shutdown()
    files = [f for f in site.rglob("*") if f.is_file()]
    raw = sum(f.stat().st_size for f in files)
    zipped = sum(len(gzip.compress(f.read_bytes(), 6)) for f in files)
    print(f"\nsite: {len(files)} files, {raw / 2**20:.1f} MB on disk, {zipped / 2**20:.1f} MB gzip-compressed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
