import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from st_helpers import CHROMIUM, CHROMIUM_ARGS, start_streamlit, stop_streamlit  # noqa: E402

try:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=30_000)  # assertions wait out a busy CI machine's slower reruns
except ImportError:
    sync_playwright = None


def pytest_collection_modifyitems(config, items):
    reason = None
    if sync_playwright is None:
        reason = "python package 'playwright' not installed"
    elif not CHROMIUM:
        reason = "chromium not found (apt-get install chromium)"
    if reason is None:
        return
    if os.environ.get("E2E_REQUIRED") == "1":
        raise pytest.UsageError(f"E2E_REQUIRED=1 but {reason}")
    for item in items:
        if "e2e" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def app_env(tmp_path_factory, synthetic_root):
    """Checkpoints written by the fixture, synthetic data, an empty cache."""
    from test_app import tiny_checkpoints

    folder = tmp_path_factory.mktemp("checkpoints")
    tiny_checkpoints(folder)
    cache = tmp_path_factory.mktemp("cache")
    return {"CAPSVIZ_CHECKPOINTS": str(folder), "CAPSVIZ_DATA_DIR": str(synthetic_root), "XDG_CACHE_HOME": str(cache)}


def _server(tmp_path_factory, env, name, **kwargs):
    log = tmp_path_factory.mktemp(name) / "server.log"
    proc, url = start_streamlit(env, log, **kwargs)
    return proc, url, log


@pytest.fixture(scope="session")
def server(tmp_path_factory, app_env):
    proc, url, log = _server(tmp_path_factory, app_env, "streamlit")
    yield {"url": url, "log": log, "checkpoints": Path(app_env["CAPSVIZ_CHECKPOINTS"])}
    assert stop_streamlit(proc) == 0, log.read_text()[-2000:]


@pytest.fixture
def own_server(tmp_path_factory, app_env):
    """A server of its own, for a test that interrupts a computation. Its exit status is reported,
    not asserted: after a run interrupted mid-computation, the process sometimes aborts while
    exiting ("terminate called without an active exception", SIGABRT) in the OpenMP thread pool's
    teardown (measured: about half the time; never with OMP_NUM_THREADS=1, never after normal runs).
    Serving is unaffected; the session-wide `server` fixture keeps asserting a clean exit."""
    proc, url, log = _server(tmp_path_factory, app_env, "streamlit-own")
    yield {"url": url}
    print(f"own_server exit status: {stop_streamlit(proc)}")


@pytest.fixture(scope="session")
def server_without_data(tmp_path_factory, app_env):
    empty = tmp_path_factory.mktemp("nodata")
    env = dict(app_env, CAPSVIZ_DATA_DIR=str(empty))
    # run from an empty folder too: the app also looks in ./data, which a developer's checkout may have
    proc, url, log = _server(tmp_path_factory, env, "streamlit-nodata", cwd=empty)
    yield {"url": url}
    stop_streamlit(proc)


@pytest.fixture(scope="session")
def shipped_server(tmp_path_factory):
    """The app as a newcomer runs it: the shipped checkpoints, the real data where it is."""
    root, data = Path(__file__).resolve().parents[2], Path(__file__).resolve().parents[3] / "shared" / "data"
    if not (data / "mnist").is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"CI must have the real data at {data}")
        pytest.skip("real data not present (../shared/data)")
    folder = tmp_path_factory.mktemp("shipped")
    env = {"CAPSVIZ_CHECKPOINTS": str(root / "checkpoints"), "CAPSVIZ_DATA_DIR": str(data), "XDG_CACHE_HOME": str(folder)}
    proc, url = start_streamlit(env, folder / "server.log")
    yield url
    stop_streamlit(proc)


@pytest.fixture(scope="session")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1400, "height": 2400})  # tall: Streamlit scrolls inside its own container
    pg = ctx.new_page()
    pg.set_default_timeout(60_000)
    errors = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.errors = errors
    yield pg
    ctx.close()


@pytest.fixture(scope="session")
def shots(tmp_path_factory):
    d = os.environ.get("E2E_SCREENSHOT_DIR")
    if d:
        os.makedirs(d, exist_ok=True)
        return Path(d)
    return tmp_path_factory.mktemp("screenshots")
