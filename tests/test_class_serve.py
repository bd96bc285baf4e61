"""A class at the protocol level (tests/load/protocol.py) against one app server, and against
`capsviz app --replicas 2` behind nginx: no session sees another's state, and the students of a
replica that dies reconnect to the other and land on their own view again."""

import asyncio
import os
import shutil
import signal
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "load"))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
import protocol  # noqa: E402
from st_helpers import run_async, start_streamlit, stop_streamlit  # noqa: E402

from capsviz import cli, serve  # noqa: E402

NGINX = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")


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
        first = 1000 + protocol.SPAN * 3  # student 3's own images
        assert "model=capsnet-mnist.safetensors" in s.query and f"image={first}" in s.query and s.steps > 3
        await s.tour_step()
        assert "step=2" in s.query
        await s.new_image()
        assert f"image={first + 1}" in s.query
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

    stats = run_async(visit())
    assert set(stats.latency) >= {"first page", "tour step", "new image", "page change", "slider", "routing iterations", "model change"}
    assert not stats.problems["leak"] and not stats.problems["error"] and not stats.problems["exception"], dict(stats.problems)
    assert stats.media > 5  # the images each rerun names were fetched


def test_a_few_students_at_once(app_server):
    stats = run_async(protocol.run_class(app_server, students=4, arrive=2, seconds=15, think=0.5))
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


def docs_front(prefix: Path, listen: str, ports: list[int]) -> str:
    """docs/class.md's nginx front for several machines, its two machines' addresses made local."""
    import re

    block = re.search(r"```nginx\n(.*?)```", (ROOT / "docs" / "class.md").read_text(), re.S).group(1)
    for host, port in zip(("10.0.0.11", "10.0.0.12"), ports, strict=True):
        block = block.replace(f"{host}:8501", f"127.0.0.1:{port}").replace(f"{re.escape(host)}:8501", rf"127\.0\.0\.1:{port}")
    assert "10.0.0" not in block and r"10\.0" not in block
    temp = "".join(f"{k}_temp_path {prefix}/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return (
        f"daemon off; worker_processes 1; pid {prefix}/nginx.pid; error_log stderr warn; events {{}}\n"
        f"http {{ access_log off; {temp}\n{block.replace('listen 80;', f'listen {listen};')}}}\n"
    )


@pytest.mark.parametrize(
    "front, cookie, names",
    [("capsviz", "capsviz_replica", ["r0", "r1", "r2"]), ("docs/class.md", "capsviz_host", ["a", "b"])],
)
def test_browsers_go_to_the_replicas_in_turn_and_keep_to_theirs(tmp_path, front, cookie, names):
    """nginx with capsviz's configuration (and docs/class.md's front for several machines) in front
    of plain HTTP servers: browsers without the cookie go to the servers in turn (a class splits
    evenly), the answer names the server (r0, r1, ...; never its address), a browser with the
    cookie reaches its own server, and when that server is gone its browsers are answered by the
    others, whose name the answer sets."""
    import http.server
    import subprocess
    import threading
    import urllib.request

    need_nginx()

    class Named(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = str(self.server.server_port).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    backends = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), Named) for _ in names]
    for b in backends:
        threading.Thread(target=b.serve_forever, daemon=True).start()
    ports = [b.server_port for b in backends]
    port = serve.free_port()
    make = serve.nginx_config if front == "capsviz" else docs_front
    (tmp_path / "nginx.conf").write_text(make(tmp_path, f"127.0.0.1:{port}", ports))
    web = subprocess.Popen([NGINX, "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"), "-e", "stderr"], start_new_session=True)

    def get(sent: str = "") -> tuple[int, str]:
        request = urllib.request.Request(f"http://127.0.0.1:{port}/", headers={"Cookie": sent} if sent else {})
        with urllib.request.urlopen(request, timeout=5) as r:
            return int(r.read()), r.headers.get("Set-Cookie") or ""

    try:
        for _ in range(100):
            try:
                get()
                break
            except OSError:
                __import__("time").sleep(0.1)
        first = [get() for _ in range(4 * len(names))]
        assert Counter(answered for answered, _ in first) == dict.fromkeys(ports, 4)
        for answered, said in first:
            name = names[ports.index(answered)]
            assert said.split(";")[0] == f"{cookie}={name}" and str(answered) not in said
            assert get(f"{cookie}={name}") == (answered, "")  # its own server; the cookie stands
        assert get(f"{cookie}=r7")[1].startswith(f"{cookie}=")  # a name from another start
        backends[0].shutdown()
        backends[0].server_close()
        moved = [get(f"{cookie}={names[0]}") for _ in range(4)]
        assert {answered for answered, _ in moved} == set(ports[1:])  # the others, in turn
        for answered, said in moved:
            assert said.split(";")[0] == f"{cookie}={names[ports.index(answered)]}"
    finally:
        web.terminate()
        web.wait(10)
        serve.kill_group(web)
        for b in backends[1:]:
            b.shutdown()


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
        victim, stats = run_async(lesson())
    finally:
        status = stop_streamlit(proc)
    log = (tmp_path / "app.log").read_text()
    crowd = stats.students
    on_victim = [s for s in crowd if s.first_replica == victim]
    others = [s for s in crowd if s.first_replica != victim]
    assert abs(len(on_victim) - len(others)) <= 2, protocol.Counter(s.first_replica for s in crowd)  # in turn, not by a hash
    assert all("capsviz_replica=r" in s.cookie for s in crowd)
    assert not stats.problems["leak"], stats.problems["leak"]
    for s in others:  # not disturbed
        assert s.reconnects == 0 and not [p for p in s.problems if p[0] == "error"], (s.k, s.problems)
    for s in on_victim:  # moved, and on their own view again
        assert s.reconnects >= 1 and s.replica != victim, (s.k, s.replica)
        assert not [p for p in s.problems if p[0] == "error" and "media" not in p[1]], (s.k, s.problems)
    assert stats.latency["reconnect"] and max(stats.latency["reconnect"]) < 30
    assert "exited with status" in log and status == 0, log[-2000:]


# -- stopping: every signal a terminal or a service manager sends, and a dead nginx -------------------


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def port_free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def served(proc) -> tuple[list[int], list[int], Path]:
    """(every process under `capsviz app --replicas`, nginx's of them, nginx's temporary folder)."""
    every = [p for p in protocol.descendants(proc.pid) if p != proc.pid]
    web = [p for p in every if protocol.cmdline(p).startswith("nginx")]
    master = next(p for p in web if " -p " in protocol.cmdline(p))
    return every, web, Path(protocol.cmdline(master).split(" -p ", 1)[1].split()[0])


def gone_and_free(pids, port: int, prefix: Path) -> None:
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and ([p for p in pids if alive(p)] or not port_free(port)):
        time.sleep(0.2)
    assert not [(p, protocol.cmdline(p)) for p in pids if alive(p)]
    assert port_free(port) and not prefix.exists()


@pytest.mark.parametrize("sig", ["SIGHUP", "SIGTERM", "SIGINT"])
def test_replicas_stop_everything_on_a_signal(tmp_path, sig):
    """The terminal closed (SIGHUP), a service manager (SIGTERM), Ctrl-C: nginx, its worker, the
    replica and the temporary folder are gone, and the port is free for the next start."""
    need_nginx()
    proc, url = protocol.start_app(1, tmp_path / "app.log")
    port = int(url.rsplit(":", 1)[1])
    try:
        pids, web, prefix = served(proc)
        assert len(web) >= 2 and prefix.is_dir()  # nginx's master and worker
        os.kill(proc.pid, getattr(signal, sig))
        status = proc.wait(30)
    finally:
        stop_streamlit(proc)
    assert status == (130 if sig == "SIGINT" else 0), (tmp_path / "app.log").read_text()[-2000:]
    gone_and_free(pids, port, prefix)


def test_a_killed_nginx_is_started_again_and_a_second_death_stops_everything(tmp_path):
    """SIGKILL to nginx's master leaves its worker holding the port unless it is killed too: the
    port is served again by a new nginx; killed again at once, everything stops with a message."""
    import urllib.request

    need_nginx()
    log = tmp_path / "app.log"
    proc, url = protocol.start_app(1, log)
    port = int(url.rsplit(":", 1)[1])
    try:
        pids, web, prefix = served(proc)
        master = next(p for p in web if " -p " in protocol.cmdline(p))
        os.kill(master, signal.SIGKILL)
        for _ in range(100):
            again = [p for p in protocol.descendants(proc.pid) if protocol.cmdline(p).startswith("nginx") and p not in web]
            if again and "starting it again" in log.read_text():
                try:
                    with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
            __import__("time").sleep(0.2)
        else:
            pytest.fail(f"nginx not serving again: {log.read_text()[-2000:]}")
        assert not [p for p in web if alive(p)]  # the first master's worker went with it
        pids += again
        os.kill(next(p for p in again if " -p " in protocol.cmdline(p)), signal.SIGKILL)
        status = proc.wait(30)
    finally:
        stop_streamlit(proc)
    assert status == 2 and "error: nginx exited with status -9 again" in log.read_text(), log.read_text()[-2000:]
    gone_and_free(pids, port, prefix)


def test_replicas_are_bounded_by_cores_and_memory(monkeypatch, capsys):
    assert serve.max_replicas(8, 24 << 30) == 8 and serve.max_replicas(8, 3 << 30) == 3 and serve.max_replicas(2, 100) == 1
    assert serve.replica_count(0, 4, None) == 4
    monkeypatch.setattr(serve, "nginx_binary", lambda: "/usr/sbin/nginx")
    assert cli.main(["app", "--replicas", "1000"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --replicas 1000: this machine has") and "ask for at most" in err and "\n" not in err
