"""`capsviz app --replicas N`: N Streamlit processes behind nginx, so a class uses every core.

One Streamlit process runs every session's script under one GIL: on a machine with several cores
it cannot use them all. Here N app processes listen on internal ports (127.0.0.1), and nginx
listens where the app would (--server.address / --server.port, default all addresses, 8501).

Stickiness. A Streamlit session lives in one process: its websocket (one long connection, so it
stays where it was opened) and the HTTP requests that belong to it: /media/ images the session's
script made (kept in that process's memory), uploads (/_stcore/upload_file). So every request of
one browser must reach the same replica. nginx's `hash $remote_addr` would send a whole class
behind one school NAT (or every simulated student of a load test) to one replica, and a hash of a
random key per browser splits a class unevenly (a consistent hash gave one of two replicas 117 of
200 simulated students). Instead a browser's first request goes to the replicas in turn, and the
answer sets a cookie (`capsviz_replica`) naming the replica that answered (r0, r1, ...: never its
address); the browser's later requests go to that replica. A replica that dies loses its sessions;
its browsers reconnect (Streamlit's frontend does so by itself), nginx passes them to the other
replicas (each replica's `backup` servers), the answer names the new one in the cookie, and their
URL (?model=&image=...) rebuilds their view there. The replicas share one cookie secret, so
Streamlit's XSRF cookie from one is valid on another after such a move.

Each replica gets cores / N torch threads (OMP_NUM_THREADS, unless set): N processes each with a
thread per core would fight over the cores. N is at most one per core and one per REPLICA_MEMORY of
free memory.

Stopping. Ctrl-C, SIGTERM and SIGHUP (the terminal closed) stop nginx, every replica and remove
nginx's temporary folder, so the port is free at once. nginx runs in a process group of its own,
and the whole group is killed when it stops: a worker left by a killed master never keeps the
port. An nginx that dies is started again, unless it dies again within NGINX_RETRY_S of being
started again: then everything stops with a message. Every child is told to stop if this process dies
(Linux's parent-death signal), so not even a SIGKILL leaves them serving.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from capsviz.errors import CapsvizError
from capsviz.i18n import N_, t, tn

NGINX_MISSING = N_("install nginx (Debian: apt-get install nginx) or run without --replicas")
REPLICA_MEMORY = 1 << 30  # what one replica may come to hold: torch, the shipped models, a class's test sets
READY_S = 180  # a replica's start: importing torch and streamlit on a busy machine
NGINX_RETRY_S = 10  # an nginx started again that dies again sooner than this is not started a third time
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))

CONFIG = """\
# written by capsviz app --replicas; nginx runs with -p {prefix}
daemon off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log stderr warn;
events {{ worker_connections 8192; }}
http {{
  access_log off;
  client_body_temp_path {prefix}/client_body;
  proxy_temp_path {prefix}/proxy;
  fastcgi_temp_path {prefix}/fastcgi;
  uwsgi_temp_path {prefix}/uwsgi;
  scgi_temp_path {prefix}/scgi;

  map $http_upgrade $connection_upgrade {{ default upgrade; "" ""; }}
  # A browser's replica: the one its cookie names; without the cookie (its first request), the
  # replicas in turn. The answer sets the cookie when it names no replica or another than the one
  # that answered (the last address nginx tried).
  map $cookie_capsviz_replica $capsviz_group {{
    default capsviz;
{groups}
  }}
  map "$cookie_capsviz_replica $upstream_addr" $capsviz_cookie {{
    default "";
{cookies}
  }}

  upstream capsviz {{
{servers}
    keepalive 16;
    keepalive_timeout 4s;
  }}
{replicas}
  server {{
    listen {listen};
    client_max_body_size {upload_mb}m;
    location / {{
      proxy_pass http://$capsviz_group;
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      # Streamlit compares the websocket's Origin with Host: pass the browser's own
      proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      # a session's websocket is open as long as the tab is, quiet while the student reads
      proxy_read_timeout 1d;
      proxy_send_timeout 1d;
      proxy_request_buffering off;
      proxy_max_temp_file_size 0;
      add_header Set-Cookie $capsviz_cookie always;
{replica_header}    }}
  }}
}}
"""


def local_browser(ip_address: str | None, headers) -> bool:
    """Whether a session's browser runs on the server itself (`st.context.ip_address` and
    `.headers`): Streamlit gives no address for a loopback connection, and nginx (--replicas)
    adds X-Forwarded-For to every request it passes, a local one included. Only such a browser
    is shown tracebacks (app.py)."""
    return ip_address is None and not headers.get("X-Forwarded-For")


def nginx_binary() -> str:
    """nginx on PATH or in /usr/sbin (not on a normal user's PATH), or the one-line error."""
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    if not found:
        raise CapsvizError(t(NGINX_MISSING))
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def split_address(streamlit_args: list[str]) -> tuple[str | None, int, list[str]]:
    """(--server.address, --server.port, the other options): nginx takes the public address
    and port, the replicas listen on internal ones."""
    address, port, rest, i = None, 8501, [], 0
    while i < len(streamlit_args):
        arg = streamlit_args[i]
        name, eq, value = arg.partition("=")
        if name in ("--server.address", "--server.port"):
            if not eq:
                if i + 1 >= len(streamlit_args):
                    raise CapsvizError(t("{name} needs a value", name=name))
                value, i = streamlit_args[i + 1], i + 1
            if name == "--server.address":
                address = value
            else:
                try:
                    port = int(value)
                except ValueError:
                    raise CapsvizError(t("--server.port must be a port number, found {found}", found=repr(value))) from None
        else:
            rest.append(arg)
        i += 1
    return address, port, rest


def nginx_config(prefix: Path, listen: str, ports: list[int], upload_mb: int = 200, replica_header: bool = False) -> str:
    """nginx's configuration. No response says which internal address answered, unless
    `replica_header` ($CAPSVIZ_REPLICA_HEADER=1: the load tests on one's own machine, which kill
    one replica): a browser has no business knowing the replicas' ports."""
    # max_fails=0: one failed request never takes a replica out for everyone; a dead one refuses
    # connections at once, and nginx tries the next (proxy_next_upstream's default): in a
    # replica's own group, its backups (the other replicas, in turn)
    names = [f"r{i}" for i in range(len(ports))]
    groups = "\n".join(f"    {name} capsviz_{name};" for name in names)
    cookies = []
    for name, p in zip(names, ports, strict=True):
        answered = rf"(.*, )?127\.0\.0\.1:{p}$"
        cookies.append(f'    "~^{name} {answered}" "";')  # the cookie already names it
        cookies.append(f'    "~ {answered}" "capsviz_replica={name}; Path=/; HttpOnly; SameSite=Lax";')
    servers = "\n".join(f"    server 127.0.0.1:{p} max_fails=0;" for p in ports)
    # below uvicorn's 5 s: nginx must never reuse a connection the replica is closing (a reset there
    # is retried on the next server, which does not have the session's /media/ files: 404)
    keepalive = "    keepalive 16;\n    keepalive_timeout 4s;\n"
    replicas = "".join(
        f"  upstream capsviz_{name} {{\n    server 127.0.0.1:{p} max_fails=0;\n"
        + "".join(f"    server 127.0.0.1:{q} backup max_fails=0;\n" for q in ports if q != p)
        + keepalive
        + "  }\n"
        for name, p in zip(names, ports, strict=True)
    )
    header = "      add_header X-Capsviz-Replica $upstream_addr always;\n" if replica_header else ""
    return CONFIG.format(
        prefix=prefix,
        listen=listen,
        groups=groups,
        cookies="\n".join(cookies),
        servers=servers,
        replicas=replicas,
        upload_mb=upload_mb,
        replica_header=header,
    )


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def max_replicas(cores: int, free: int | None) -> int:
    """Replicas this machine can run: one per core, and one per REPLICA_MEMORY of `free` bytes."""
    by_memory = cores if free is None else max(free // REPLICA_MEMORY, 1)
    return max(min(cores, by_memory), 1)


def replica_count(asked: int, cores: int, free: int | None) -> int:
    """`asked` replicas (0: one per core, as many as fit), or CapsvizError when more than fit."""
    most = max_replicas(cores, free)
    if asked > most:
        said = dict(asked=asked, cores=cores, free=f"{(free or 0) / 2**30:.1f}", most=most, each=REPLICA_MEMORY >> 30)
        if free is None:
            raise CapsvizError(
                t(
                    "--replicas {asked}: this machine has {cores} cores, enough for {most} (one per core, each with about {each} GiB); "
                    "ask for at most {most}",
                    **said,
                )
            )
        raise CapsvizError(
            t(
                "--replicas {asked}: this machine has {cores} cores and {free} GiB of free memory, enough for {most} (one per core, "
                "each with about {each} GiB); ask for at most {most}",
                **said,
            )
        )
    return asked or most


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def replicas_for(asked: int) -> int:
    """`replica_count` on this machine: its cores and its free memory now."""
    from capsviz.estimate import available_memory

    return replica_count(asked, cores(), available_memory("cpu"))


def die_with_parent() -> None:
    """In a child before exec: SIGTERM when the process that started it dies (Linux only)."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def kill_group(p: subprocess.Popen) -> None:
    """SIGKILL to whatever is left of the process group `p` leads (nginx's workers)."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def stop(procs: list[subprocess.Popen], timeout: float = 15.0, groups: tuple[subprocess.Popen, ...] = ()) -> None:
    """SIGTERM to every child still running (Streamlit and nginx both stop cleanly on it), then
    SIGKILL to any that has not stopped within `timeout`, and to the rest of each of `groups`."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.wait(max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    for p in groups:
        kill_group(p)


def serve(command: list[str], env: dict[str, str], replicas: int, streamlit_args: list[str]) -> int:
    """Run `command` (streamlit run app.py, without the address and port options) `replicas`
    times on internal ports and nginx in front, until Ctrl-C, SIGTERM or SIGHUP, or until every
    replica has stopped (or nginx, twice in a row). `replicas` 0: one per core (as memory allows)."""
    nginx = nginx_binary()
    n = replicas_for(replicas)
    address, port, _ = split_address(streamlit_args)
    listen = f"{f'[{address}]' if address and ':' in address else address}:{port}" if address else str(port)
    with socket.socket(socket.AF_INET6 if address and ":" in address else socket.AF_INET) as s:
        try:  # a port already taken: say so now, not in nginx's words after the replicas have started
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((address or "", port))
        except OSError as e:
            raise CapsvizError(t("cannot listen on {address}:{port}: {why}", address=address or "*", port=port, why=e.strerror)) from None
    env = dict(env)
    env.setdefault("STREAMLIT_SERVER_COOKIE_SECRET", secrets.token_hex(32))  # one secret: XSRF cookies valid on every replica
    env.setdefault("STREAMLIT_SERVER_HEADLESS", "true")
    env.setdefault("OMP_NUM_THREADS", str(max(cores() // n, 1)))
    env["CAPSVIZ_REPLICAS"] = str(n)  # each replica's model cache takes its share of the machine's budget (capsviz.model_cache)
    upload_mb = int(env.get("STREAMLIT_SERVER_MAX_UPLOAD_SIZE", "200"))

    prefix = Path(tempfile.mkdtemp(prefix="capsviz-nginx-"))
    ports = [free_port() for _ in range(n)]
    (prefix / "nginx.conf").write_text(nginx_config(prefix, listen, ports, upload_mb, env.get("CAPSVIZ_REPLICA_HEADER") == "1"))
    procs: list[subprocess.Popen] = []
    webs: list[subprocess.Popen] = []  # every nginx started, each the leader of its own process group
    stopping = []

    def on_signal(signum, frame):
        stopping.append(signum)

    def start_nginx() -> subprocess.Popen:
        web = subprocess.Popen(
            [nginx, "-p", str(prefix), "-c", str(prefix / "nginx.conf"), "-e", "stderr"],
            env=env,
            start_new_session=True,  # its own group: a terminal's signals reach this process, which stops it
            preexec_fn=die_with_parent,
        )
        webs.append(web)
        procs.append(web)
        return web

    previous = {s: signal.signal(s, on_signal) for s in STOP_SIGNALS}
    try:
        test = subprocess.run(
            [nginx, "-t", "-q", "-p", str(prefix), "-c", str(prefix / "nginx.conf"), "-e", "stderr"], capture_output=True, text=True
        )
        if test.returncode:
            raise CapsvizError(
                t(
                    "nginx refused its configuration: {why}",
                    why=test.stderr.strip().splitlines()[-1] if test.stderr.strip() else test.returncode,
                )
            )
        replicas_ = []
        for p in ports:
            replicas_.append(
                subprocess.Popen([*command, "--server.address", "127.0.0.1", "--server.port", str(p)], env=env, preexec_fn=die_with_parent)
            )
        procs += replicas_
        deadline = time.monotonic() + READY_S
        waiting = set(ports)
        while waiting and not stopping:
            for r, p in zip(replicas_, ports, strict=True):
                if r.poll() is not None:
                    raise CapsvizError(
                        t(
                            "replica on port {port} exited with status {status} before it was ready (its output is above)",
                            port=p,
                            status=r.returncode,
                        )
                    )
                if p in waiting and healthy(f"http://127.0.0.1:{p}/_stcore/health"):
                    waiting.discard(p)
            if time.monotonic() > deadline:
                raise CapsvizError(tn("{n} replica not ready after {s} s", "{n} replicas not ready after {s} s", len(waiting), s=READY_S))
            time.sleep(0.3)
        if stopping:
            return 130 if stopping[0] == signal.SIGINT else 0
        web, restarted = start_nginx(), None
        shown = "localhost" if address in (None, "", "0.0.0.0", "::") else address
        print(
            t(
                "capsviz: {n} replicas behind nginx at {url} (replicas on 127.0.0.1:{ports})",
                n=n,
                url=f"http://{shown}:{port}",
                ports=", ".join(map(str, ports)),
            ),
            file=sys.stderr,
            flush=True,
        )
        dead = set()
        while True:
            time.sleep(0.5)
            if stopping:  # a terminal's Ctrl-C (or `timeout`) reaches the whole group: nginx may have stopped already
                break
            if web.poll() is not None:
                kill_group(web)  # a worker a killed master left would keep the port
                if restarted is not None and time.monotonic() - restarted < NGINX_RETRY_S:
                    raise CapsvizError(
                        t(
                            "nginx exited with status {status} again, {s} s after it was started again (its messages are above); "
                            "every replica is stopped",
                            status=web.returncode,
                            s=f"{time.monotonic() - restarted:.0f}",
                        )
                    )
                print(
                    t("capsviz: nginx exited with status {status}; starting it again", status=web.returncode), file=sys.stderr, flush=True
                )
                web, restarted = start_nginx(), time.monotonic()
            for r, p in zip(replicas_, ports, strict=True):
                if r.poll() is not None and p not in dead:
                    dead.add(p)
                    left = n - len(dead)
                    print(
                        t(
                            "capsviz: the replica on port {port} exited with status {status}; {left} left, its students reconnect to them",
                            port=p,
                            status=r.returncode,
                            left=left,
                        ),
                        file=sys.stderr,
                        flush=True,
                    )
            if len(dead) == n:
                raise CapsvizError(t("every replica has exited"))
        return 130 if stopping[0] == signal.SIGINT else 0
    finally:
        stop(procs, groups=tuple(webs))  # with this process's handlers still on: a second Ctrl-C cannot cut it short
        shutil.rmtree(prefix, ignore_errors=True)
        for s, handler in previous.items():
            signal.signal(s, handler)
