"""Every way the README starts the app serves a class: no file watching and no tracebacks for
students, on `streamlit run app.py` in a checkout, `capsviz app` from anywhere and `--replicas`;
and a new session's first page costs the server little CPU in a checkout whose .venv is inside
it (Streamlit's watcher would register every module there, torch's included, per session)."""

import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "load"))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
import protocol  # noqa: E402
from st_helpers import cpu_name, free_port, run_async, stop_streamlit  # noqa: E402

from capsviz import cli, serve  # noqa: E402
from capsviz.cli import serving  # noqa: E402


def clean_env(**more) -> dict:
    """This environment without any Streamlit setting of its own."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("STREAMLIT_")}, **more}


def options(cwd: Path, env: dict, *flags: str) -> str:
    """The file watcher and error details a `streamlit run` started in `cwd` with `env` and
    `flags` would use, as `streamlit config show` prints them."""
    shown = subprocess.run(
        [sys.executable, "-m", "streamlit", "config", "show", *flags], cwd=cwd, env=env, capture_output=True, text=True, check=True
    ).stdout
    found = dict(re.findall(r'^#? ?(fileWatcherType|showErrorDetails) = "(\w+)"', shown, re.MULTILINE))
    return f"{found['fileWatcherType']} {found['showErrorDetails']}"


def test_every_start_path_turns_file_watching_and_tracebacks_off(tmp_path, monkeypatch):
    assert options(ROOT, clean_env()) == "none none"  # streamlit run app.py, in the checkout
    assert options(tmp_path, clean_env()) == "auto full"  # elsewhere Streamlit's defaults: the checkout's file is what does it
    _, env = cli.app_command(None, [])  # capsviz app, from any folder
    assert options(tmp_path, {**clean_env(), **{k: v for k, v in env.items() if k.startswith("STREAMLIT_")}}) == "none none"
    assert options(ROOT, clean_env(), "--server.fileWatcherType", "auto") == "auto none"  # a developer turns watching on
    seen = {}  # capsviz app --replicas: the command and environment every replica runs with
    monkeypatch.setattr(serve, "nginx_binary", lambda: "/usr/sbin/nginx")
    monkeypatch.setattr(serving, "build_kernel", lambda: "off")
    monkeypatch.setattr(serve, "serve", lambda command, env, n, args: seen.update(command=command, env=env) or 0)
    assert cli.main(["app", "--replicas", "1"]) == 0
    assert seen["env"]["STREAMLIT_SERVER_FILE_WATCHER_TYPE"] == "none" and seen["env"]["STREAMLIT_CLIENT_SHOW_ERROR_DETAILS"] == "none"
    assert seen["command"][-1].endswith("app.py")  # no flag of its own that would turn them on again


def test_only_a_browser_on_the_server_itself_is_shown_tracebacks():
    assert serve.local_browser(None, {})
    assert not serve.local_browser("10.0.0.7", {})
    assert not serve.local_browser(None, {"X-Forwarded-For": "10.0.0.7"})  # through --replicas' nginx
    assert not serve.local_browser(None, {"X-Forwarded-For": "127.0.0.1"})


def checkout_with_venv_inside(folder: Path) -> Path:
    """A copy of the app in `folder` with this Python's venv inside it as .venv (hard links: no
    copy of the data, made in seconds): the README's one-command start. Its python."""
    for name in ("app.py", "pages", "capsviz", ".streamlit"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(
            src, folder / name, **({"ignore": shutil.ignore_patterns("__pycache__")} if src.is_dir() else {})
        )
    subprocess.run(["cp", "-al", sys.prefix, str(folder / ".venv")], check=True)
    return folder / ".venv" / "bin" / "python"


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="needs a venv to put inside the checkout")
def test_a_new_session_costs_little_cpu_in_a_checkout_with_its_venv_inside(tmp_path):
    data = ROOT.parent / "shared" / "data"
    if not (data / "mnist").is_dir():
        pytest.skip("real data not present (../shared/data)")
    if os.stat(sys.prefix).st_dev != os.stat(tmp_path).st_dev:
        pytest.skip("the venv is on another filesystem than the test's folder: no hard links")
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    python = checkout_with_venv_inside(checkout)
    port = free_port()
    env = clean_env(CAPSVIZ_CHECKPOINTS=str(ROOT / "checkpoints"), CAPSVIZ_DATA_DIR=str(data), XDG_CACHE_HOME=str(tmp_path / "cache"))
    cmd = [str(python), "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port)]
    cmd += ["--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"]  # the README's start, on a test port
    log = tmp_path / "server.log"
    proc = subprocess.Popen(cmd, cwd=checkout, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    model = "capsnet-mnist.safetensors"

    async def arrivals() -> list[float]:
        for _ in range(600):
            try:
                if (await protocol.http_get(url + "/_stcore/health", timeout=2))[0] == 200:
                    break
            except OSError:
                pass
            await asyncio.sleep(0.2)
        cost = []
        for k in range(5):  # the first loads the model and test set: not a new session's own cost
            s = protocol.Student(170 + k, url, protocol.Stats(), 0, model, fetch_media=True)
            await asyncio.sleep(0.3)
            before = protocol.cpu_seconds([proc.pid])
            await s.connect()
            await s.rerun("first page", page="glossary", query=f"model={model}")
            await asyncio.sleep(0.3)
            cost.append(protocol.cpu_seconds([proc.pid]) - before)
            await s.leave()
        return cost

    try:
        cost = run_async(arrivals())
    finally:
        stop_streamlit(proc)
    median = statistics.median(cost[1:])
    print(
        f"new session's first page (glossary): {', '.join(f'{c:.3f}' for c in cost)} s of server CPU; median {median:.3f} s ({cpu_name()})"
    )
    assert median < 0.15, (cost, log.read_text()[-2000:])


@pytest.mark.parametrize("local", [True, False], ids=["on the server", "a student"])
def test_a_page_error_shows_a_traceback_only_on_the_server_itself(monkeypatch, local):
    from streamlit.testing.v1 import AppTest

    import pages.sidebar

    def broken(*a, **k):
        raise RuntimeError("secret detail at /srv/capsviz/uploads")

    monkeypatch.setattr(pages.sidebar, "sidebar", broken)
    monkeypatch.setattr(serve, "local_browser", lambda ip, headers: local)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    if local:
        assert "secret detail" in at.exception[0].message
    else:
        assert not at.exception and "unexpected error" in at.error[0].value
        assert "secret" not in " ".join(e.value for e in at.error)
