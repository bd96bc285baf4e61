"""Run a Streamlit server and drive Debian's chromium with Playwright (never `playwright install`)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = next(
    (p for p in (os.environ.get("CHROMIUM_PATH"), shutil.which("chromium"), shutil.which("chromium-browser")) if p and os.path.exists(p)),
    None,
)
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def cpu_name() -> str:
    """The CPU's model name, as `lscpu` prints it (figures name the machine they were measured on)."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown CPU"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def outward_address() -> str | None:
    """This machine's address on its network (not loopback): a browser here that opens the app by
    it is, to the server, a browser on another machine. None where there is no such address."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outward interface
            address = s.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def server_options(port: int) -> list[str]:
    """Streamlit's options for a test server: headless, this port, no file watcher, no usage stats."""
    return [
        "--server.headless",
        "true",
        "--server.port",
        str(port),
        "--server.fileWatcherType",
        "none",
        "--browser.gatherUsageStats",
        "false",
    ]


def start_streamlit(env: dict, log_path: Path, timeout: float = 90.0, cwd: Path = ROOT, address: str = "127.0.0.1"):
    """A headless server on a free port, run from `cwd` (the app is found by its absolute path),
    listening on `address` (0.0.0.0: on every interface, for a browser that comes as from another
    machine); its URL is on 127.0.0.1 either way."""
    port = free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.address", address, *server_options(port)]
    log = open(log_path, "wb")
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, **env})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited early with code {proc.returncode}: {log_path.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=1) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            pass
        if time.monotonic() > deadline:
            stop_streamlit(proc)
            raise TimeoutError(f"streamlit not healthy after {timeout}s")
        time.sleep(0.2)


def stop_streamlit(proc: subprocess.Popen) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
    return proc.returncode


def new_page(ctx, timeout: float = 60_000):
    """A page of browser context `ctx` that records the page errors it meets in `page.errors`."""
    page = ctx.new_page()
    page.set_default_timeout(timeout)
    page.errors = []
    page.on("pageerror", lambda e, page=page: page.errors.append(str(e)))
    return page


def titles_cut_off(chart) -> list[str]:
    """A plotly chart's titles and axis titles that reach outside its frame (an axis title also
    when it is taller than the chart): each with where it lies."""
    found = []
    chart.scroll_into_view_if_needed()
    frame = chart.bounding_box()
    for text in chart.locator(".gtitle, .xtitle, .ytitle").all():
        box = text.bounding_box()
        if box is None:
            continue
        if box["x"] < frame["x"] - 1 or box["x"] + box["width"] > frame["x"] + frame["width"] + 1:
            found.append(
                f"{text.text_content()!r} ({box['x']:.0f}..{box['x'] + box['width']:.0f} in {frame['x']:.0f}..{frame['x'] + frame['width']:.0f})"
            )
        if text.evaluate("e => e.classList.contains('ytitle')"):
            if box["y"] < frame["y"] - 1 or box["y"] + box["height"] > frame["y"] + frame["height"] + 1:
                found.append(f"{text.text_content()!r} (taller than its chart)")
    return found


def wait_for_app_run(page, timeout: float = 60_000) -> None:
    """The websocket is connected and the script run (or rerun) has finished."""
    page.wait_for_selector("[data-testid='stApp'][data-test-connection-state='CONNECTED']", state="attached", timeout=timeout)
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", state="attached", timeout=timeout)
    page.wait_for_function("document.querySelectorAll('[data-testid=stSkeleton]').length === 0", timeout=timeout)


def run_async(coro):
    """asyncio.run on a thread of its own: the browser tests' Playwright keeps an event loop
    running on the test thread for the whole session, where asyncio.run refuses to start another."""
    with ThreadPoolExecutor(1) as worker:
        return worker.submit(asyncio.run, coro).result()
