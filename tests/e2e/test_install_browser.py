"""Install it anywhere (issue 25): a fresh venv, `pip install .` of this checkout, then `capsviz app`
started from another folder serves the app with the shipped models, and `capsviz --help` lists
every subcommand. About a minute and a half: torch comes from the local wheel cache."""

import json
import os
import re
import subprocess
import time
import urllib.request
import venv
from pathlib import Path

import pytest
from st_helpers import ROOT, free_port, server_options, stop_streamlit, wait_for_app_run

from capsviz.cli import COMMANDS

pytestmark = pytest.mark.e2e
SHIPPED = sorted(p.name for p in (ROOT / "checkpoints").glob("*.safetensors"))


def pinned_torch() -> str:
    return next(line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines() if line.startswith("torch=="))


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """bin/ of a fresh venv with capsviz installed from this checkout (not editable)."""
    env_dir = tmp_path_factory.mktemp("venv")
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    pip = [str(bin_dir / "python"), "-m", "pip", "install", "-q"]
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    for what in ([pinned_torch()], [str(ROOT)]):
        done = subprocess.run(pip + what, capture_output=True, text=True, timeout=900, env=clean)
        assert done.returncode == 0, done.stderr[-3000:]
    return bin_dir, clean


def test_capsviz_help_lists_every_subcommand(installed, tmp_path):
    bin_dir, env = installed
    done = subprocess.run([str(bin_dir / "capsviz"), "--help"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    listed = set(re.search(r"\{([a-z,]+)\}", done.stdout).group(1).split(","))
    assert listed == set(COMMANDS)
    for name in COMMANDS:
        assert re.search(rf"^\s+{name}\s+\S", done.stdout, re.M), f"{name} has no help line"


def test_capsviz_app_from_another_folder_serves_the_shipped_models(installed, tmp_path, page):
    bin_dir, env = installed
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    home = tmp_path / "home"
    env = dict(env, CAPSVIZ_HOME=str(home), XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("CAPSVIZ_CHECKPOINTS", None)
    port = free_port()
    log = open(tmp_path / "server.log", "wb")
    options = server_options(port)
    proc = subprocess.Popen(
        [str(bin_dir / "capsviz"), "app", *options], cwd=elsewhere, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(url + "/_stcore/health", timeout=1) as r:
                    assert r.read() == b"ok"
                    break
            except OSError:
                assert time.monotonic() < deadline, "no health after 120 s"
                time.sleep(0.3)
        with urllib.request.urlopen(url + "/zoo", timeout=10) as r:
            assert r.status == 200 and b'<div id="root">' in r.read()
        # the user folder got the shipped models, and the app shows them: the zoo lists every one
        assert sorted(p.name for p in (home / "checkpoints").glob("*.safetensors")) == SHIPPED
        page.goto(url + "/zoo")
        wait_for_app_run(page, timeout=120_000)
        deadline = time.monotonic() + 120  # a fresh server's first page can still be drawing its cards
        while True:
            text = page.inner_text("body")
            missing = [n for n in SHIPPED if n.removesuffix(".safetensors") not in text]
            if not missing or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert not missing, f"{missing} not in the zoo"
        assert not page.errors
    finally:
        code = stop_streamlit(proc)
    assert code == 0, (tmp_path / "server.log").read_text()[-3000:]


def test_it_runs_beside_this_checkout_not_from_it(installed):
    bin_dir, env = installed
    where = subprocess.run(
        [str(bin_dir / "python"), "-c", "import capsviz, capsviz.paths as p; print(capsviz.__file__); print(p.app_dir())"],
        capture_output=True,
        text=True,
        cwd="/",
        env=env,
        timeout=120,
    )
    package, app = where.stdout.split()
    assert not Path(package).is_relative_to(ROOT) and Path(app).name == "_app"
    # the stored sweeps travel with the shipped models (capsviz.analysis.stored)
    shipped_sweeps = sorted(p.name for p in (ROOT / "checkpoints" / "sweeps").glob("*.json"))
    assert shipped_sweeps and sorted(p.name for p in (Path(app) / "checkpoints" / "sweeps").glob("*.json")) == shipped_sweeps


def test_list_and_evaluate_find_the_shipped_models_right_after_install(installed, tmp_path):
    bin_dir, env = installed
    env = dict(env, CAPSVIZ_HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("CAPSVIZ_CHECKPOINTS", None)
    listed = subprocess.run([str(bin_dir / "capsviz"), "list"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert listed.returncode == 0, listed.stderr
    for name in SHIPPED:
        assert f"{name}: " in listed.stdout and f"{name}: unusable" not in listed.stdout, listed.stdout
    if os.environ.get("CAPSVIZ_DATA_DIR"):  # the real data, where CI has it
        done = subprocess.run(
            [str(bin_dir / "capsviz"), "evaluate", "capsnet-small-mnist", "--limit", "50"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["n_test"] == 50
