"""A class at the protocol level (tests/load/protocol.py) against one app server, and against
`capsviz app --replicas 2` behind nginx: no session sees another's state, and the students of a
replica that dies reconnect to the other and land on their own view again."""

import asyncio
import os
import shutil
import signal
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "load"))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
import protocol  # noqa: E402
from st_helpers import start_streamlit, stop_streamlit  # noqa: E402

from capsviz import cli, serve  # noqa: E402

NGINX = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")


def run(coro):
    """asyncio.run on a thread of its own: the browser tests' Playwright keeps an event loop
    running on the test thread, where asyncio.run refuses to start another."""
    with ThreadPoolExecutor(1) as worker:
        return worker.submit(asyncio.run, coro).result()


def need_nginx():
    if NGINX is None:
        if os.environ.get("CI"):
            pytest.fail("CI must have nginx (.ci/run installs it)")
        pytest.skip("nginx is not installed here (Debian: apt-get install nginx); capsviz app --replicas needs it")


@pytest.fixture(scope="module")
def app_server(tmp_path_factory):
    data = ROOT.parent / "shared" / "data"
    if not (data / "mnist").is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"CI must have the real data at {data}")
        pytest.skip("real data not present (../shared/data): the students' test images are 1000 onwards")
    folder = tmp_path_factory.mktemp("class")
    env = {"CAPSVIZ_CHECKPOINTS": str(ROOT / "checkpoints"), "CAPSVIZ_DATA_DIR": str(data), "XDG_CACHE_HOME": str(folder)}
    proc, url = start_streamlit(env, folder / "server.log")
    yield url
    stop_streamlit(proc)


def test_a_student_sees_script_finished_and_its_own_values(app_server):
    """One student, move by move: each rerun ends in script_finished, and what the server sends
    back (the widget ids, the query string its script writes, the explorer's caption) is what it set."""

    async def visit():
        stats = protocol.Stats()
        s = protocol.Student(3, app_server, stats, 0, protocol.MODELS[0])
        await s.connect()
        await s.open()
        assert s.session_id and {"tour", "explorer", "routing", "em"} <= set(s.pages)
        assert {"tour_next", "image", "model_pick"} <= set(s.ids)
        assert "model=capsnet-mnist.safetensors" in s.query and "image=1150" in s.query and s.steps > 3
        await s.tour_step()
        assert "step=2" in s.query
        await s.new_image()
        assert "image=1151" in s.query
        await s.change_page("explorer")
        await s.new_image()  # a page change forgets the image (pages/common.py): set its own again
        for _ in range(3):
            await s.slider()
        assert s.dims[s.dim] == pytest.approx(0.15)
        assert "dims=" in s.query and s.query.count("0.15") == 1
        await s.change_page("routing")
        await s.iterations("routing iterations", 10)
        assert f"iterations={s.T['routing']}" in s.query
        await s.change_page("em")  # offers the matrix model: the student presses "Use ..."
        assert s.model == protocol.MATRIX and f"model={protocol.MATRIX}" in s.query
        await s.leave()
        return stats

    stats = run(visit())
    assert set(stats.latency) >= {"first page", "tour step", "new image", "page change", "slider", "routing iterations", "model change"}
    assert not stats.problems["leak"] and not stats.problems["error"] and not stats.problems["exception"], dict(stats.problems)
    assert stats.media > 5  # the images each rerun names were fetched


def test_a_few_students_at_once(app_server):
    stats = run(protocol.run_class(app_server, students=4, arrive=2, seconds=15, think=0.5))
    assert sum(stats.moves.values()) > 40
    assert not stats.problems["leak"] and not stats.problems["error"], dict(stats.problems)


def test_split_address_and_the_config_nginx_accepts(tmp_path):
    assert serve.split_address(["--server.port", "9000", "--server.address=0.0.0.0", "--theme.base", "dark"]) == (
        "0.0.0.0",
        9000,
        ["--theme.base", "dark"],
    )
    assert serve.split_address([]) == (None, 8501, [])
    need_nginx()
    (tmp_path / "nginx.conf").write_text(serve.nginx_config(tmp_path, f"127.0.0.1:{serve.free_port()}", [9001, 9002]))
    import subprocess

    r = subprocess.run(
        [NGINX, "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"), "-e", "stderr"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr


def test_replicas_without_nginx_say_what_to_do(monkeypatch, capsys):
    monkeypatch.setattr(serve.shutil, "which", lambda *a, **k: None)
    assert cli.main(["app", "--replicas", "2"]) == 2
    assert capsys.readouterr().err.strip() == f"error: {serve.NGINX_MISSING}"


def replica_pid(root: int, address: str) -> int:
    port = address.rsplit(":", 1)[1]
    return next(p for p in protocol.descendants(root) if f"--server.port {port}" in protocol.cmdline(p))


def test_two_replicas_forty_students_and_one_replica_dies(app_server, tmp_path):
    """40 students over 2 replicas behind nginx; 15 s in, one replica is killed. Its students
    reconnect to the other and land on their own view (the URL holds it); the other replica's
    students are not disturbed; no student ever sees another's state."""
    need_nginx()
    proc, url = protocol.start_app(2, tmp_path / "app.log")

    async def lesson():
        stats = protocol.Stats()
        await protocol.warm_up(url, 2)
        run = asyncio.create_task(protocol.run_class(url, students=40, arrive=8, seconds=25, think=3, stats=stats))
        await asyncio.sleep(15)
        victim = Counter(s.first_replica for s in stats.students if s.first_replica).most_common(1)[0][0]
        os.kill(replica_pid(proc.pid, victim), signal.SIGKILL)
        return victim, await run

    try:
        victim, stats = run(lesson())
    finally:
        status = stop_streamlit(proc)
    log = (tmp_path / "app.log").read_text()
    crowd = stats.students
    on_victim = [s for s in crowd if s.first_replica == victim]
    others = [s for s in crowd if s.first_replica != victim]
    assert len(on_victim) >= 5 and len(others) >= 5, protocol.Counter(s.first_replica for s in crowd)
    assert not stats.problems["leak"], stats.problems["leak"]
    for s in others:  # not disturbed
        assert s.reconnects == 0 and not [p for p in s.problems if p[0] == "error"], (s.k, s.problems)
    for s in on_victim:  # moved, and on their own view again
        assert s.reconnects >= 1 and s.replica != victim, (s.k, s.replica)
        assert not [p for p in s.problems if p[0] == "error" and "media" not in p[1]], (s.k, s.problems)
    assert stats.latency["reconnect"] and max(stats.latency["reconnect"]) < 30
    assert "exited with status" in log and status == 0, log[-2000:]
