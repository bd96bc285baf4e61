"""A class at the protocol level: simulated students speak Streamlit's own websocket protocol to a
capsviz server (one process, or replicas behind nginx), with no browser, so that a hundred of them
cost the machine little and every CPU second measured is the server's.

    python tests/load/protocol.py --students 20 40 --arrive 60 --minutes 3        # starts `capsviz app`
    python tests/load/protocol.py --replicas 2 --students 40 80                    # ... with 2 replicas behind nginx
    python tests/load/protocol.py --url http://HOST:8501 --pid 1234 --students 30  # drives a running server

A student does what a browser does: GET / (the page, and nginx's sticky cookie), then a websocket to
/_stcore/stream whose first BackMsg is a rerun of the page it opens (its URL path and query string,
as a link from the teacher carries them). The server answers with ForwardMsgs: the page list, the
deltas (elements; a widget's id ends in its key, `$$ID-<hash>-<key>`), the query string the script
writes (page_info_changed), then script_finished. The student reads the widget ids it needs from
the deltas and then, looking --think seconds (0.5x to 1.5x) before each move, does a class's mix:
Next/Back through the tour, page changes, the explorer's dimension sliders (a fragment rerun, as
the browser sends it), new test images, the routing page's iterations, the EM page with a matrix
model (switching models with the page's own "Use ..." buttons). Each move is one rerun BackMsg
carrying only the widget it changes (the server keeps the others) and is timed from sending it
to script_finished; the images the rerun names (/media/...) are then fetched as a browser would.

Leak check: every student has its own image indices (1000 + 40k onwards), its own model and its
own dimension and slider values. After each move the query string its script wrote and the
explorer's caption must show its own state: another student's value is a **leak**, its own
earlier value is an error ("stale").

When its websocket closes (a replica killed) a student reconnects (through nginx: to a live
replica), reruns its page and query string, and checks that it landed on its own view again.

Prints per move kind: count, p50 / p95 / max latency, errors, and the server's CPU seconds per
move (from /proc/PID/stat of the server processes); with --calibrate first, one student alone
measures each kind's CPU. Exit status 1 on any leak or error."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from st_helpers import cpu_name, stop_streamlit  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MODELS = ("capsnet-mnist.safetensors", "capsnet-small-mnist.safetensors", "capsnet-one-iteration-mnist.safetensors")
MATRIX = "matrix-small-mnist.safetensors"
EARLY_FOR_RERUN = ForwardMsg.DESCRIPTOR.fields_by_name["script_finished"].enum_type.values_by_name["FINISHED_EARLY_FOR_RERUN"].number
COMPILE_ERROR = ForwardMsg.DESCRIPTOR.fields_by_name["script_finished"].enum_type.values_by_name["FINISHED_WITH_COMPILE_ERROR"].number
WIDGET_ID = re.compile(r"^\$\$ID-[0-9a-f]{32}-(.*)$")  # Streamlit's widget ids end in the user's key
PAGES = ("tour", "explorer", "routing", "em")
# How a class moves, per page: (kind, weight). A page change picks its page from NEXT_PAGE.
MIX = {
    "tour": (("tour step", 0.6), ("new image", 0.1), ("page change", 0.3)),
    "explorer": (("slider", 0.6), ("new image", 0.2), ("page change", 0.2)),
    "routing": (("routing iterations", 0.5), ("new image", 0.2), ("page change", 0.3)),
    "em": (("em iterations", 0.5), ("page change", 0.5)),
}
NEXT_PAGE = {"tour": 0.25, "explorer": 0.35, "routing": 0.25, "em": 0.15}
COMMITS = 0.7  # a page waiting on a question: the student commits an answer (else skips it) before its other moves
TIMEOUT = 120.0  # seconds a rerun may take before the move counts as an error


class Closed(Exception):
    """The websocket closed under a move (its server went away)."""


SPAN = 40  # test images of a student's own (a class of 225 fits in MNIST's 10,000; a student looks at a few)


@dataclass
class Run:
    """What one rerun sent back, from the BackMsg to script_finished."""

    ids: dict = field(default_factory=dict)  # widget key -> (widget id, fragment id)
    query: str | None = None  # the last query string the script wrote
    captions: list = field(default_factory=list)
    texts: list = field(default_factory=list)  # progress bars' texts
    slider_max: dict = field(default_factory=dict)  # slider key -> its maximum
    media: list = field(default_factory=list)
    exceptions: list = field(default_factory=list)
    elements: list = field(default_factory=list)  # (element type, its proto) of every element, in the order sent
    fragments: set = field(default_factory=set)  # the fragments the elements were drawn in
    fragment: bool = False
    done: asyncio.Future | None = None


@dataclass
class Stats:
    """Everything a class run records, shared by its students."""

    latency: dict = field(default_factory=lambda: defaultdict(list))  # kind -> seconds
    problems: dict = field(default_factory=lambda: defaultdict(list))  # "error" / "leak" -> lines
    replicas: Counter = field(default_factory=Counter)  # upstream address -> students (behind nginx)
    moves: Counter = field(default_factory=Counter)
    timeline: list = field(default_factory=list)  # (start, kind, seconds) of every move
    reconnects: int = 0
    interrupted: int = 0  # moves whose websocket closed under them (a reconnect follows)
    media: int = 0
    students: list = field(default_factory=list)


async def http_get(url: str, cookie: str = "", timeout: float = 30.0) -> tuple[int, dict, bytes]:
    """A plain HTTP/1.1 GET (the page, a /media/ image): (status, headers lower-cased, body).
    Set-Cookie values are joined with '\\n'."""
    u = urllib.parse.urlsplit(url)
    reader, writer = await asyncio.wait_for(asyncio.open_connection(u.hostname, u.port or 80), timeout)
    try:
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        head = f"GET {path} HTTP/1.1\r\nHost: {u.netloc}\r\nConnection: close\r\nAccept-Encoding: identity\r\n"
        writer.write((head + (f"Cookie: {cookie}\r\n" if cookie else "") + "\r\n").encode())
        raw = await asyncio.wait_for(reader.read(-1), timeout)
    finally:
        writer.close()
    header, _, body = raw.partition(b"\r\n\r\n")
    lines = header.decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name = name.strip().lower()
        headers[name] = f"{headers[name]}\n{value.strip()}" if name in headers else value.strip()
    return int(lines[0].split()[1]), headers, body


class Student:
    """One simulated student: one Streamlit session, its own image, model and slider values."""

    def __init__(self, k: int, url: str, stats: Stats, think: float, model: str, fetch_media: bool = True, remote: bool = False):
        self.k, self.url, self.stats, self.think, self.fetch_media = k, url.rstrip("/"), stats, think, fetch_media
        # remote: the websocket says it comes from another machine (X-Forwarded-For, as a proxy in
        # front of one process would send it), so the server treats this student as a student,
        # never as the teacher at the server's own keyboard
        self.forwarded = f"10.0.{k // 250}.{k % 250 + 1}" if remote else None
        self.rng = random.Random(k)
        self.home_model = model  # its CapsNet; the EM page switches to the matrix model and back
        self.model = model
        # its own test images: 1000 + 40k, 1001 + 40k, ... (never another's; k < 225 keeps them in MNIST's 10,000)
        self.images = [1000 + SPAN * k]
        self.dim = k % 16
        self.dims = [0.0] * 16
        self.dims_seen = {self._caption(self.dims)}
        self.step = 1  # tour step
        self.steps = None  # the tour's length, read from its progress bar
        self.T: dict[str, int] = {}  # routing / EM iterations set on each page
        self.bound: dict[str, str] = {}  # widgets bound to the URL (bind="query-params"): the browser writes them there
        self.page = "tour"
        self.query = ""
        self.cookie = ""
        self.ws = None
        self.session_id = ""
        self.pages: dict[str, str] = {}  # url path -> page script hash
        self.ids: dict = {}
        self.run: Run | None = None
        self.reader = None
        self.replica = None
        self.first_replica = None
        self.reconnects = 0
        self.problems: list[tuple[str, str]] = []  # (kind, line), this student's own
        self.closed = False
        self.doing = "connect"  # the move under way, for the problem lines
        self.fetched: set[str] = set()  # the /media/ addresses this student's page has loaded
        self.last: Run | None = None  # the last rerun's answer

    @property
    def image(self) -> int:
        return self.images[-1]

    def _caption(self, dims) -> str:
        return "perturbed: " + (", ".join(f"d{d} {v:+.2f}" for d, v in enumerate(dims) if v) or "none")

    # ------------------------------------------------------------------ the wire
    async def connect(self) -> None:
        """GET / (nginx sets its sticky cookie there, as for a browser), then the websocket. A
        reconnect offers the old session id, as the browser does."""
        if not self.cookie:
            status, headers, _ = await http_get(self.url + "/")
            if status != 200:
                raise RuntimeError(f"GET / answered {status}")
            self.cookie = "; ".join(c.split(";", 1)[0] for c in headers.get("set-cookie", "").split("\n") if c)
        ws_url = "ws" + self.url.removeprefix("http") + "/_stcore/stream"
        # Streamlit reads the subprotocol list as: "streamlit", an XSRF token (checked only when an
        # Origin header is sent: this client sends none), an earlier session's id to resume.
        protocols = ["streamlit", "xsrf"] + ([self.session_id] if self.session_id else [])
        self.ws = await websockets.connect(
            ws_url,
            subprotocols=protocols,
            additional_headers={
                **({"Cookie": self.cookie} if self.cookie else {}),
                **({"X-Forwarded-For": self.forwarded} if self.forwarded else {}),
            }
            or None,
            max_size=None,
            open_timeout=30,
            ping_interval=None,
            compression=None,
        )
        tried = self.ws.response.headers.get("X-Capsviz-Replica")  # nginx: every replica tried, the one that answered last
        self.replica = tried.split(",")[-1].strip() if tried else None
        self.closed = False
        self.reader = asyncio.create_task(self._read(self.ws))

    async def _read(self, ws) -> None:
        try:
            async for raw in ws:
                self._handle(raw)
        except websockets.ConnectionClosed:
            pass
        finally:
            if ws is self.ws:
                self.closed = True
                if self.run is not None and not self.run.done.done():
                    self.run.done.set_exception(Closed())

    def _handle(self, raw: bytes) -> None:
        msg = ForwardMsg()
        msg.ParseFromString(raw)
        kind = msg.WhichOneof("type")
        run = self.run
        if kind == "new_session":
            self.session_id = msg.new_session.initialize.session_id or self.session_id
        elif kind == "navigation":
            self.pages = {p.url_pathname: p.page_script_hash for p in msg.navigation.app_pages}
        if run is None:
            return
        if kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
            el = msg.delta.new_element
            what = el.WhichOneof("type")
            sub = getattr(el, what) if what else None
            run.elements.append((what, sub))
            if msg.delta.fragment_id:
                run.fragments.add(msg.delta.fragment_id)
            if sub is not None and "id" in sub.DESCRIPTOR.fields_by_name and (m := WIDGET_ID.match(sub.id)):
                run.ids[m.group(1)] = (sub.id, msg.delta.fragment_id)
                if what == "slider":
                    run.slider_max[m.group(1)] = sub.max
            if what == "imgs":
                for img in el.imgs.imgs:
                    run.captions.append(img.caption)
                    if img.url.startswith("/media/"):
                        run.media.append(img.url)
            elif what == "progress":
                run.texts.append(el.progress.text)
            elif what == "exception":
                run.exceptions.append(f"{el.exception.type}: {el.exception.message[:200]}")
        elif kind == "page_info_changed":
            run.query = msg.page_info_changed.query_string
        elif kind == "script_finished" and msg.script_finished == EARLY_FOR_RERUN:  # st.rerun(): the page is sent again
            run.ids, run.elements, run.captions, run.texts, run.slider_max = {}, [], [], [], {}
            run.fragment = False  # a student's page reruns whole (a question's commit from its fragment too)
        elif kind == "script_finished":
            if msg.script_finished == COMPILE_ERROR:
                run.exceptions.append("the script did not compile")
            if not run.done.done():
                run.done.set_result(None)

    async def rerun(
        self, kind: str, page: str | None = None, query: str | None = None, widgets=(), fragment: str = "", since: float | None = None
    ) -> Run:
        """One rerun BackMsg, timed to script_finished (from `since` when given). `widgets`: (key,
        WidgetState field, value) triples: only what this move changes, the server keeps the rest."""
        if self.closed:
            raise Closed()
        msg = BackMsg()
        cs = msg.rerun_script
        cs.query_string = self.query if query is None else query
        path = page or self.page
        cs.page_name = path
        cs.page_script_hash = self.pages.get(path, "")
        # a widget inside a fragment reruns only its fragment, as the browser sends it
        inside = {self.ids[key][1] for key, _, _ in widgets}
        cs.fragment_id = fragment or (inside.pop() if len(inside) == 1 else "")
        if not cs.fragment_id and "model_pick" in self.ids and all(key != "model_pick" for key, _, _ in widgets):
            # a browser sends every widget's value with a page's rerun: the sidebar's model among them
            widgets = [*widgets, ("model_pick", "string_value", self.model)]
        for key, kind_of, value in widgets:
            w = cs.widget_states.widgets.add()
            w.id = self.ids[key][0]
            if kind_of == "double_array_value":
                w.double_array_value.data.extend(value)
            else:
                setattr(w, kind_of, value)
        self.doing = kind
        run = Run(fragment=bool(cs.fragment_id), done=asyncio.get_running_loop().create_future())
        self.run = run
        t0 = since or time.perf_counter()
        await self.ws.send(msg.SerializeToString())
        try:
            await asyncio.wait_for(asyncio.shield(run.done), TIMEOUT)
        except TimeoutError:
            self.problem("error", f"{kind}: no script_finished in {TIMEOUT:.0f} s")
            raise
        except Closed:
            self.stats.interrupted += 1
            raise
        finally:
            self.run = None
        self.stats.latency[kind].append(time.perf_counter() - t0)
        self.stats.timeline.append((t0, kind, time.perf_counter() - t0))
        self.stats.moves[kind] += 1
        self.page = path
        if run.query is not None:  # the browser's URL: what the script wrote, and the bound widgets' values
            q = dict(urllib.parse.parse_qsl(run.query))
            self.query = urllib.parse.urlencode({**q, **{k: v for k, v in self.bound.items() if k not in q}})
        self.ids = {**self.ids, **run.ids} if run.fragment else run.ids
        self.last = run
        for e in run.exceptions:
            self.problem("exception", f"{kind}: an exception on {path}: {e}")
        if self.fetch_media:
            await self._media(run.media)
        return run

    async def _media(self, urls) -> None:
        """The images a browser fetches after a rerun: served by the replica that made them. Only
        those it has not fetched before: a page keeps the images it has loaded by their address
        (the HTML standard's list of available images), and Streamlit's address of an image is
        made from its bytes, so an image that a rerun draws again is not fetched again."""
        for u in dict.fromkeys(urls):
            if u in self.fetched:
                continue
            self.fetched.add(u)
            try:
                status, _, _ = await http_get(self.url + u, self.cookie)
            except (OSError, TimeoutError) as e:
                status = type(e).__name__
            self.stats.media += 1
            if status != 200:
                self.problem("error", f"media {u}: {status} (served by another replica than the one that made it?)")

    def problem(self, kind: str, line: str) -> None:
        self.problems.append((kind, line))
        self.stats.problems[kind].append(f"student {self.k} ({self.replica or 'direct'}, {self.doing}): {line}")

    # ------------------------------------------------------------------ what it checks
    def judge(self, what: str, shown, own, own_before, anothers: bool = False) -> bool:
        """Whether the page shows this student's own value. Another student's value (`anothers`)
        is a leak; its own earlier value is stale (an error); any other value (the app forgot
        this student's value and shows a default) is "lost"."""
        if shown == own:
            return True
        kind = "leak" if anothers else "error" if shown in own_before else "lost"
        self.problem(kind, f"shows {what} {shown!r}, its own is {own!r}" + (" (its own earlier: stale)" if kind == "error" else ""))
        return False

    def check(self, run: Run) -> None:
        """The page shows this student's own state (the query string its script wrote, captions)."""
        q = dict(urllib.parse.parse_qsl(self.query))
        # models are shared by many students: only one no student of this class uses is provably
        # another's; the app's default (the first model) in place of this student's is "lost"
        shown = q.get("model")
        # the default in place of this student's model is "lost" even where it is also the model this
        # student had before (a student whose own CapsNet is the default, now on the matrix model)
        before = {self.home_model, MATRIX} - {MODELS[0]}
        self.judge("model", shown, self.model, before, anothers=shown not in (self.home_model, MATRIX, MODELS[0]))
        if "image" in q:
            shown = int(q["image"])
            owner = (shown - 1000) // SPAN if shown >= 1000 else None  # students' images: 1000 + 40k onwards
            own_before = {i for i in self.images if i >= 1000}
            if not self.judge("image", shown, self.image, own_before, anothers=owner not in (None, self.k)):
                self.images.append(shown)  # what the page shows now; the next new image is this student's own again
        if self.page == "tour" and "step" in q:
            self.judge("tour step", int(q["step"]), self.step, set(range(1, 40)) - {self.step})
        if self.page in ("routing", "em") and self.page in self.T and "t" in run.slider_max and not run.exceptions:
            # the "Show iteration" slider goes up to the iterations run
            self.judge(f"{self.page} iterations", int(run.slider_max["t"]), self.T[self.page], set(range(1, 11)))
        if self.page == "explorer":
            shown = next((c for c in run.captions if c.startswith("perturbed:")), None)
            if shown is not None:  # only this student moves its own dimension d(k % 16) away from 0
                own = re.fullmatch(r"perturbed: (none|d(\d+) [-+][\d.]+)", shown)
                theirs = not own or (own.group(2) is not None and int(own.group(2)) != self.dim)
                self.judge("sliders", shown, self._caption(self.dims), self.dims_seen, anothers=theirs)

    # ------------------------------------------------------------------ the moves
    def has(self, key: str) -> bool:
        return key in self.ids

    async def open(self, since: float | None = None) -> None:
        """The teacher's link: the tour on this student's model and image."""
        query = urllib.parse.urlencode({"model": self.model, "image": self.image})
        run = await self.rerun("first page", page="tour", query=query, since=since)
        self.read_tour(run)
        self.check(run)

    async def connect_and_open(self, page: str) -> Run:
        """A new session's first page, as a link opens it: the page, this student's model and image."""
        await self.connect()
        return await self.rerun("first page", page=page, query=urllib.parse.urlencode({"model": self.model, "image": self.image}))

    async def refresh(self, fragments, kind: str = "refresh") -> None:
        """What a page's live parts (`st.fragment(run_every=...)`) ask for when their time comes: a
        rerun of each, as the browser sends them."""
        for f in fragments:
            await self.rerun(kind, fragment=f)

    def read_tour(self, run: Run) -> None:
        for text in run.texts:
            if m := re.match(r"Step (\d+) of (\d+)", text):
                self.step, self.steps = int(m.group(1)), int(m.group(2))

    async def tour_step(self) -> None:
        forward = self.steps is None or self.step < self.steps
        key = "tour_next" if forward else "tour_back"
        if not self.has(key):
            return await self.change_page()
        self.step += 1 if forward else -1
        run = await self.rerun("tour step", widgets=[(key, "trigger_value", True)])
        self.check(run)

    async def new_image(self) -> None:
        if not self.has("image"):
            return await self.change_page()
        self.images.append(max(i for i in self.images if i >= 1000 + SPAN * self.k) + 1)
        self.dims = [0.0] * 16  # a new image starts the sliders again at 0
        run = await self.rerun("new image", widgets=[("image", "double_value", float(self.image))])
        self.check(run)

    async def slider(self) -> None:
        key = next((k for k in self.ids if k.startswith("sliders:")), None)
        if key is None:
            return await self.change_page()
        v = self.dims[self.dim]
        self.dims[self.dim] = round(v + 0.05, 2) if v < 0.25 else -0.25  # its own dimension, one step at a time
        self.dims_seen.add(self._caption(self.dims))
        widget = (key, "json_value", json.dumps({"deltas": self.dims}))
        run = await self.rerun("slider", widgets=[widget], fragment=self.ids[key][1])
        self.check(run)

    async def iterations(self, kind: str, hi: int) -> None:
        if not self.has("iterations"):
            return await self.change_page()
        T = self.rng.choice([t for t in range(1, hi + 1) if t != self.T.get(self.page)])
        self.T[self.page] = T
        self.bound["iterations"] = str(T)  # the browser writes a bound widget's value into its URL before the rerun
        self.query = urllib.parse.urlencode({**dict(urllib.parse.parse_qsl(self.query)), "iterations": str(T)})
        run = await self.rerun(kind, widgets=[("iterations", "double_array_value", [float(T)])])
        self.check(run)

    def _question(self) -> tuple[str, str, list[str]] | None:
        """The question the page waits on: (its choice's key, its commit button's key, the choices as shown)."""
        pick = next((k for k in reversed(self.ids) if k.startswith("answer_") and f"commit_{k.removeprefix('answer_')}" in self.ids), None)
        if pick is None or self.last is None:
            return None
        radios = [list(sub.options) for what, sub in self.last.elements if what == "radio" and sub.id == self.ids[pick][0]]
        if not radios:  # a question this page asked before, answered or skipped: its choices are gone
            return None
        return pick, f"commit_{pick.removeprefix('answer_')}", radios[-1]

    async def answer(self, commit: bool = True) -> bool:
        """Answer the question the page waits on with its first choice: the choice (one rerun), then
        "Commit my answer" (measured as "question answered"); or, with
        commit=False, "Skip: just show me". False where the page asks nothing."""
        asked = self._question()
        if asked is None:
            return False
        pick, button, options = asked
        if not commit:
            await self.rerun("question skipped", widgets=[(f"skip_{pick.removeprefix('answer_')}", "trigger_value", True)])
            return True
        await self.rerun("question choice", widgets=[(pick, "string_value", options[0])])
        if button not in self.ids:
            self.problem("error", f"question {pick}: no commit button after a choice")
            return False
        await self.rerun("question answered", widgets=[(button, "trigger_value", True)])
        return True

    async def switch_language(self, label: str) -> None:
        """The sidebar's language switch set to `label` (as it shows it: "简体中文")."""
        await self.rerun("language switch", widgets=[("lang", "string_value", label)])

    async def change_page(self, target: str | None = None) -> None:
        if target is None:
            pages = [p for p in NEXT_PAGE if p != self.page]
            target = self.rng.choices(pages, [NEXT_PAGE[p] for p in pages])[0]
        self.bound = {}
        run = await self.rerun("page change", page=target, query="")  # a sidebar link: the page, no query string
        self.T.pop(target, None)  # a page's sliders start again at their defaults
        if target == "tour":
            self.read_tour(run)
        if target == "explorer":
            self.dims = [0.0] * 16
        fits = MATRIX if target == "em" else self.home_model if target in ("explorer", "routing") else None
        switch = f"switch_{Path(fits or '').stem}"
        if fits and self.model != fits and switch in run.ids:  # the page offers "Use <model>": press it
            self.model = fits
            run = await self.rerun("model change", widgets=[(switch, "trigger_value", True)])
            if target == "tour":
                self.read_tour(run)
        self.check(run)

    async def reconnect(self, first: bool = False) -> None:
        """The websocket closed: connect again (through nginx, to a live replica) and rerun the
        page and query string the browser's URL holds; the student must land on its own view."""
        self.stats.reconnects += 1
        self.reconnects += 1
        for _ in range(30):
            try:
                await self.connect()
                break
            except (OSError, websockets.InvalidHandshake, TimeoutError, RuntimeError):
                await asyncio.sleep(1)
        else:
            raise Closed()
        self.stats.replicas[self.replica or "direct"] += 0  # listed, even if it hosts no one at the start
        if first:  # the link again: nothing of this student's was on the page yet
            return await self.open()
        # What the URL holds is the view to land on: a move the close interrupted never reached it
        q = dict(urllib.parse.parse_qsl(self.query))
        if q.get("image", "").isdigit():
            self.images.append(int(q["image"]))
        if "dims" in q:
            self.dims = [float(v) for v in q["dims"].split(",")]
        if q.get("step", "").isdigit():
            self.step = int(q["step"])
        if q.get("iterations", "").isdigit():
            self.T[self.page] = int(q["iterations"])
        self.model = q.get("model", self.model)
        run = await self.rerun("reconnect", query=self.query)
        if self.page == "tour":
            self.read_tour(run)
        self.check(run)

    async def move(self) -> None:
        if self._question() is not None:  # predict, then see: a student answers (or skips) before the page's figures
            await self.answer(commit=self.rng.random() < COMMITS)
            return
        kinds, weights = zip(*MIX[self.page], strict=True)
        kind = self.rng.choices(kinds, weights)[0]
        act = {
            "tour step": self.tour_step,
            "new image": self.new_image,
            "slider": self.slider,
            "routing iterations": lambda: self.iterations("routing iterations", 10),
            "em iterations": lambda: self.iterations("em iterations", 5),
            "page change": self.change_page,
        }[kind]
        await act()

    async def attend(self, arrive: float, until: float) -> None:
        """Arrive, open the link, then move with think time until `until` (perf_counter)."""
        await asyncio.sleep(arrive)
        t0 = time.perf_counter()
        await self.connect()
        self.first_replica = self.replica
        self.stats.replicas[self.replica or "direct"] += 1
        try:
            await self.open(since=t0)  # timed with the page's GET and the websocket's handshake
        except Closed:
            await self.reconnect(first=True)
        while time.perf_counter() < until:
            await asyncio.sleep(self.think * self.rng.uniform(0.5, 1.5))
            if time.perf_counter() >= until:
                break
            try:
                if self.closed:
                    raise Closed()
                await self.move()
            except Closed:
                await self.reconnect()
            except TimeoutError:
                pass  # counted; the next move goes on from the page as it is

    async def leave(self) -> None:
        if self.ws is not None:
            ws, self.ws = self.ws, None
            await ws.close()
            if self.reader:
                await self.reader


class Hostile(Student):
    """One student out to spoil the class, from another machine, in several tabs of one browser
    (one cookie: one student to the server). Each tab sends Streamlit's "clear cache" message
    twice a second, opens crafted links (Markdown in ?model=, out-of-range images, steps and
    iterations, a path in place of a model), and reruns the dearest pages with a new, uncached
    image each time, without a pause, sometimes sending ten reruns at once. Its images are
    0-999 (no class student's). What it records goes to its own Stats: the class's figures are
    the other students' only."""

    CLEAR_EVERY = 0.5  # seconds between two clear-cache messages of one tab
    ODD = (
        ("explorer", "model=%21%5Bx%5D%28http%3A%2F%2F203.0.113.9%2Fx.png%29&image=-5"),  # ?model=![x](http://...)
        ("routing", "image=99999999&iterations=999"),
        ("tour", "step=-3&model=..%2F..%2Fcheckpoints%2Fcapsnet-mnist"),
        ("em", "iterations=nan&image=1e9"),
        ("explorer", "dims=nan,inf,1e308&dim=99"),
    )
    HEAVY = ("routing", "robustness", "multimnist", "em", "explorer", "tour")

    def __init__(self, url: str, stats: Stats, tab: int, cookie: str = ""):
        super().__init__(199, url, stats, 0, MODELS[0], fetch_media=False, remote=True)
        self.forwarded = "198.51.100.66"  # every tab: the same machine
        self.tab, self.cookie, self.n = tab, cookie, 0
        self.cleared = 0

    async def spam_clear_cache(self, until: float) -> None:
        msg = BackMsg()
        msg.clear_cache = True
        while time.perf_counter() < until and not self.closed:
            await self.ws.send(msg.SerializeToString())
            self.cleared += 1
            await asyncio.sleep(self.CLEAR_EVERY)

    def next_link(self) -> tuple[str, str, str]:
        self.n += 1
        if self.n % 3 == 0:
            page, query = self.ODD[(self.n // 3) % len(self.ODD)]
            return "odd link", page, query
        image = (self.tab * 331 + self.n * 7) % 1000
        page = self.HEAVY[self.n % len(self.HEAVY)]
        model = MATRIX if page == "em" else MODELS[self.n % len(MODELS)]
        query = {"model": model, "image": image}
        if page in ("routing", "em"):
            query["iterations"] = 10 if page == "routing" else 5
        return "dear page", page, urllib.parse.urlencode(query)

    async def burst(self, n: int = 10) -> None:
        """n reruns sent at once, each interrupting the last; then one that is waited for."""
        for _ in range(n - 1):
            _, page, query = self.next_link()
            msg = BackMsg()
            msg.rerun_script.page_name, msg.rerun_script.query_string = page, query
            msg.rerun_script.page_script_hash = self.pages.get(page, "")
            await self.ws.send(msg.SerializeToString())
        kind, page, query = self.next_link()
        await self.rerun("burst", page=page, query=query)

    async def attack(self, until: float) -> None:
        await self.connect()
        spam = asyncio.create_task(self.spam_clear_cache(until))
        try:
            while time.perf_counter() < until:
                try:
                    if self.n % 20 == 19:
                        await self.burst()
                    else:
                        kind, page, query = self.next_link()
                        await self.rerun(kind, page=page, query=query)
                except TimeoutError:
                    pass  # counted
        except Closed:
            self.problem("error", "the server closed the hostile student's websocket")
        finally:
            spam.cancel()
            await self.leave()


async def hostile_student(url: str, seconds: float, tabs: int = 3, delay: float = 0.0) -> tuple[Stats, int]:
    """One hostile student (Hostile) in `tabs` tabs for `seconds`: its Stats and its clear-cache messages."""
    await asyncio.sleep(delay)
    stats = Stats()
    status, headers, _ = await http_get(url.rstrip("/") + "/")
    cookie = "; ".join(c.split(";", 1)[0] for c in headers.get("set-cookie", "").split("\n") if c)
    crowd = [Hostile(url, stats, t, cookie) for t in range(tabs)]
    until = time.perf_counter() + seconds
    results = await asyncio.gather(*(h.attack(until) for h in crowd), return_exceptions=True)
    for h, r in zip(crowd, results, strict=True):
        if isinstance(r, BaseException):
            h.problem("error", f"{type(r).__name__}: {str(r)[:200]}")
    return stats, sum(h.cleared for h in crowd)


# ---------------------------------------------------------------------- the server's CPU
def cpu_seconds(pids) -> float:
    """User + system CPU seconds of these processes (all their threads), from /proc/PID/stat."""
    tick, total = os.sysconf("SC_CLK_TCK"), 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime (fields 14 and 15 of stat)
        except (OSError, IndexError, ValueError):
            pass
    return total


def descendants(pid: int) -> list[int]:
    """The process and every process under it (the replicas and nginx under `capsviz app`)."""
    children = defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    children[int(f.read().rsplit(")", 1)[1].split()[1])].append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# ---------------------------------------------------------------------- a class
async def run_class(
    url: str,
    students: int,
    arrive: float,
    seconds: float,
    think: float,
    models=MODELS,
    first: int = 0,
    stats: Stats | None = None,
    remote: bool = False,
    teacher: bool = False,
) -> Stats:
    """`students` students arriving evenly over `arrive` s, each working `seconds` s from its
    arrival. `stats`: where to record (the caller may watch `stats.students` meanwhile).
    `teacher`: the teacher follows the class on the Teacher page throughout (`teach`)."""
    stats = stats or Stats()
    gap = arrive / max(students - 1, 1)
    start = time.perf_counter()
    crowd = [Student(first + k, url, stats, think, models[(first + k) % len(models)], remote=remote) for k in range(students)]
    stats.students = crowd
    teaching = asyncio.create_task(teach(url, stats, start + arrive + seconds)) if teacher else None
    results = await asyncio.gather(*(s.attend(k * gap, start + k * gap + seconds) for k, s in enumerate(crowd)), return_exceptions=True)
    if teaching is not None:
        await teaching
    for s, r in zip(crowd, results, strict=True):
        if isinstance(r, BaseException):
            s.problem("error", f"{type(r).__name__}: {str(r)[:200]}")
    await asyncio.gather(*(s.leave() for s in crowd), return_exceptions=True)
    return stats


async def teach(url: str, stats: Stats, until: float, every: float = 5.0) -> None:
    """The teacher at the server's own keyboard (a connection without X-Forwarded-For: one process,
    not behind nginx) on the Teacher page until `until`: its live parts (the class, the questions)
    rerun every `every` s, as the browser asks ("teacher refresh")."""
    teacher = Student(-1, url, stats, 0, MODELS[0])
    try:
        await teacher.connect()
        live = sorted((await teacher.rerun("teacher page", page="teacher", query="")).fragments)
        while time.perf_counter() + every < until:
            await asyncio.sleep(every)
            await teacher.refresh(live, "teacher refresh")
    except Exception as e:  # noqa: BLE001 - said as the class's problem, as a student's are
        teacher.problem("error", f"the teacher: {type(e).__name__}: {str(e)[:200]}")
    finally:
        await teacher.leave()


async def server_cost(pids, act) -> float:
    """The server's CPU seconds for `act()` (a move), its images and writes included: measured
    from a settled server to a moment after the answer."""
    await asyncio.sleep(0.3)  # the last move's media and writes settle
    before = cpu_seconds(pids)
    await act()
    await asyncio.sleep(0.1)
    return cpu_seconds(pids) - before


async def calibrate(url: str, pids, repeats: int = 6) -> dict[str, float]:
    """One student alone: the server's CPU seconds per move kind (median over `repeats`)."""
    stats = Stats()
    s = Student(150, url, stats, 0, MODELS[0], fetch_media=True)  # its images, 8500 onwards, are in the test set
    cost = defaultdict(list)

    async def measure(kind, act):
        cost[kind].append(await server_cost(pids, act))

    await s.connect()
    await measure("first page", s.open)
    for _ in range(repeats):
        await measure("tour step", s.tour_step)
    for _ in range(repeats):
        await measure("new image", s.new_image)
    for target in ("explorer", "routing", "em", "tour", "explorer"):
        await measure("page change", lambda: s.change_page(target))  # noqa: B023 - awaited at once
        if target == "explorer":
            for _ in range(repeats):
                await measure("slider", s.slider)
            for _ in range(repeats):
                await measure("new image", s.new_image)
        if target == "routing":
            for _ in range(repeats):
                await measure("routing iterations", lambda: s.iterations("routing iterations", 10))
        if target == "em":
            for _ in range(repeats):
                await measure("em iterations", lambda: s.iterations("em iterations", 5))
    await s.leave()
    for kind, lines in stats.problems.items():
        for line in lines:
            print(f"calibration {kind}: {line}", file=sys.stderr)
    return {k: statistics.median(v) for k, v in cost.items()}


FIRST_OPEN = {  # each page as a teacher's link opens it: the model a class would use there
    "tour": "capsnet-mnist.safetensors",
    "zoo": "capsnet-mnist.safetensors",
    "playground": "capsnet-mnist.safetensors",
    "explorer": "capsnet-mnist.safetensors",
    "routing": "capsnet-mnist.safetensors",
    "em": MATRIX,
    "multimnist": "capsnet-multimnist.safetensors",
    "robustness": "capsnet-mnist.safetensors",
    "lab": "capsnet-mnist.safetensors",
    "reproduction": "capsnet-mnist.safetensors",
    "glossary": "capsnet-mnist.safetensors",
    "train": "capsnet-mnist.safetensors",
}


async def first_opens(url: str, pids, students: int = 6) -> dict[str, list[float]]:
    """The server's CPU seconds for a new session's first page, each page in turn, opened by
    `students` new students with the same link (a class following the teacher's link: the first
    computes what the others find cached)."""
    cost: dict[str, list[float]] = defaultdict(list)
    for page, model in FIRST_OPEN.items():
        for k in range(students):
            s = Student(170 + k, url, Stats(), 0, model, fetch_media=True)

            async def first(s=s, page=page, model=model):
                await s.connect()
                await s.rerun("first page", page=page, query=urllib.parse.urlencode({"model": model}))

            cost[page].append(await server_cost(pids, first))
            await s.leave()
    return cost


async def warm_up(url: str, replicas: int, models: tuple[str, ...] = ()) -> None:
    """A visit to every replica first: loading the test set and the first model is not a student's
    wait; then one first page with each of `models` (each load of a model, once, before the class)."""
    seen = set()
    for k in range(20 * replicas):  # numbered below the class's students: its images (under 1000) are none of theirs
        s = Student(-1 - k % 24, url, Stats(), 0, MODELS[0], fetch_media=False)
        await s.connect()
        if s.replica not in seen:
            seen.add(s.replica)
            await s.open()
        await s.leave()
        if len(seen) >= replicas:
            break
    for k, model in enumerate(models):
        s = Student(-1 - k, url, Stats(), 0, model, fetch_media=False)
        await s.connect()
        await s.open()
        await s.leave()


def model_links(root: Path = ROOT) -> Path:
    """A new folder of links to the checkout `root`'s shipped models: a server given it as its model
    folder keeps its class's store (kept beside the models) there, its own."""
    models = Path(tempfile.mkdtemp(prefix="capsviz-models-"))
    for f in (root / "checkpoints").iterdir():
        if not f.name.startswith("."):
            (models / f.name).symlink_to(f)
    return models


def start_app(
    replicas: int | None,
    log: Path,
    root: Path = ROOT,
    how: str = "capsviz",
    port: int = 0,
    env: dict | None = None,
    address: str = "127.0.0.1",
) -> tuple[subprocess.Popen, str]:
    """`capsviz app` (with --replicas N behind nginx) on `port` (0: a free one), the shipped models,
    from the checkout `root`; with `how="streamlit"`, `streamlit run app.py` as a checkout starts it.
    The model folder: links to the checkout's shipped models, in a new folder, so the class's
    store (kept beside the models) is this server's alone and the checkout's stays as it was.
    `env`: settings over the defaults (another model folder, the class's database). `address`:
    where it listens (0.0.0.0: every interface, for students who come as from other machines); the
    URL returned is on 127.0.0.1 either way."""
    import socket

    if not port:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
    env = {
        **os.environ,
        "CAPSVIZ_CHECKPOINTS": str(model_links(root)),
        "XDG_CACHE_HOME": tempfile.mkdtemp(),
        "CAPSVIZ_REPLICA_HEADER": "1",
        "CAPSVIZ_IDENTITIES_PER_ADDRESS": "100000",
        **(env or {}),
    }
    data = ROOT.parent / "shared" / "data"
    if "CAPSVIZ_DATA_DIR" not in env and (data / "mnist").is_dir():
        env["CAPSVIZ_DATA_DIR"] = str(data)
    if how == "streamlit":
        cmd = [sys.executable, "-m", "streamlit", "run", "app.py"]
    elif how == "profiled":  # every script run profiled (tests/load/profiled_app.py; CAPSVIZ_PROFILE_DIR in env)
        cmd = [sys.executable, str(Path(__file__).resolve().parent / "profiled_app.py")]
    else:
        cmd = [sys.executable, "-m", "capsviz", "app", *(["--replicas", str(replicas)] if replicas else [])]
    cmd += ["--server.address", address, "--server.port", str(port), "--server.headless", "true"]
    cmd += ["--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false"]
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"capsviz app exited with status {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                if r.status == 200 and (not replicas or "replicas behind nginx" in log.read_text()):
                    return proc, url
        except OSError:
            pass
        time.sleep(0.3)
    stop_streamlit(proc)
    raise TimeoutError("capsviz app not healthy after 120 s")


def server_pids(root: int | None, pids) -> tuple[list[int], list[int]]:
    """(Streamlit processes, nginx processes) to account CPU to."""
    every = list(pids) + (descendants(root) if root else [])
    app = [p for p in every if "streamlit" in cmdline(p) or "profiled_app" in cmdline(p) or (pids and p in pids)]
    web = [p for p in every if cmdline(p).startswith("nginx")]
    return app, web


def percentile(values, q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, round(q * (len(v) - 1)))]


TARGETS = {"slider": 1.0, "new image": 2.0, "page change": 2.0, "first page": 3.0}


def summary(stats: Stats, elapsed: float, cpu_app: float, cpu_web: float, cores: int) -> dict:
    kinds = {}
    for kind, values in sorted(stats.latency.items()):
        kinds[kind] = {
            "n": len(values),
            "p50_ms": round(1000 * statistics.median(values)),
            "p95_ms": round(1000 * percentile(values, 0.95)),
            "max_ms": round(1000 * max(values)),
        }
    met = all(kinds[k]["p95_ms"] <= 1000 * t for k, t in TARGETS.items() if k in kinds)
    start = min((t for t, _, _ in stats.timeline), default=0.0)
    periods: dict[int, list[float]] = defaultdict(list)  # when in the class the waits were: every move's, by 10 s
    for t, _, seconds in stats.timeline:
        periods[int((t - start) // 10)].append(seconds)
    return {
        "kinds": kinds,
        "errors": stats.problems["error"],
        "leaks": stats.problems["leak"],
        "lost": stats.problems["lost"],
        "exceptions": stats.problems["exception"],
        "interrupted": stats.interrupted,
        "reconnects": stats.reconnects,
        "media_fetched": stats.media,
        "replicas": dict(stats.replicas),
        "moves": sum(stats.moves.values()),
        "elapsed_s": round(elapsed, 1),
        "server_cpu_s": round(cpu_app, 1),
        "nginx_cpu_s": round(cpu_web, 2),
        "server_cores_busy": round(cpu_app / elapsed, 2) if elapsed else 0,
        "server_cpu_ms_per_move": round(1000 * cpu_app / max(sum(stats.moves.values()), 1), 1),
        "cores": cores,
        "targets_met": met and not stats.problems["error"] and not stats.problems["leak"],
        "p95_ms_by_10s": {10 * k: round(1000 * percentile(v, 0.95)) for k, v in sorted(periods.items())},
    }


def print_step(n, s: dict) -> None:
    print(
        f"{n} students: {s['moves']} moves in {s['elapsed_s']:.0f} s; server CPU {s['server_cpu_s']:.0f} s "
        f"({s['server_cores_busy']:.2f} of {s['cores']} cores busy, {s['server_cpu_ms_per_move']:.0f} ms per move), "
        f"nginx {s['nginx_cpu_s']:.1f} s; students per replica {s['replicas']}; reconnects {s['reconnects']}"
    )
    for kind, k in s["kinds"].items():
        target = TARGETS.get(kind)
        mark = "" if target is None else ("  ok" if k["p95_ms"] <= 1000 * target else f"  over the {target:g} s target")
        print(f"  {kind:19} n={k['n']:5}  p50 {k['p50_ms']:6} ms  p95 {k['p95_ms']:6} ms  max {k['max_ms']:6} ms{mark}")
    for kind in ("leaks", "errors", "lost", "exceptions"):
        print(f"  {kind}: {len(s[kind])}")
        for line in s[kind][:5]:
            print(f"    {line}")


def reloads(log: Path | None) -> int | None:
    """Model loads the server logged (pages/common.py prints one line per load)."""
    if log is None or not log.exists():
        return None
    return log.read_text(errors="replace").count("capsviz: loaded model")


async def compare(a) -> int:
    """Every class on this checkout's app and on commit `a.against`'s (a git worktree of it, with
    the models it shipped), one after the other and in turn (this, that; then that, this), so
    both are measured in one run on one machine under the same conditions."""
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", a.against], capture_output=True, text=True)
    if rev.returncode:
        print(f"--against {a.against}: not a commit of this repository ({rev.stderr.strip()})")
        return 2
    here = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout
    old = Path(tempfile.mkdtemp()) / "against"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old), a.against], check=True, capture_output=True)
    servers = {}
    status = 0
    try:
        for name, root in ((here + ("+changes" if dirty else ""), ROOT), (rev.stdout.strip(), old)):
            log = Path(tempfile.mkdtemp()) / "server.log"
            proc, url = start_app(a.replicas, log, root, a.how)
            servers[name] = (proc, url, server_pids(proc.pid, [])[0], log)
            print(f"{name}: {a.how} app{f' --replicas {a.replicas}' if a.replicas else ''} from {root} at {url}")
        cores = len(os.sched_getaffinity(0))
        print(f"{cpu_name()}, {cores} cores; think {a.think:g} s, arrivals over {a.arrive:g} s, {a.rounds} round(s) each")
        report = {"cpu": cpu_name(), "cores": cores, "replicas": a.replicas or 1, "how": a.how, "think_s": a.think, "steps": {}}
        for _, url, _, _ in servers.values():
            await warm_up(url, a.replicas or 1)
        names = list(servers)
        for n in a.students:
            for r in range(a.rounds):
                for name in names if r % 2 == 0 else names[::-1]:
                    proc, url, pids, _ = servers[name]
                    before, t0 = cpu_seconds(pids), time.perf_counter()
                    stats = await run_class(url, n, a.arrive, 60 * a.minutes, a.think, a.models, remote=a.remote, teacher=a.teacher)
                    elapsed = time.perf_counter() - t0
                    s = summary(stats, elapsed, cpu_seconds(pids) - before, 0.0, cores)
                    report["steps"][f"{name} {n} round {r + 1}"] = s
                    print(f"--- {name}, round {r + 1}:")
                    print_step(n, s)
                    status |= 1 if s["errors"] or s["leaks"] else 0
        if a.json:
            Path(a.json).write_text(json.dumps(report, indent=1))
    finally:
        for proc, *_ in servers.values():
            stop_streamlit(proc)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], capture_output=True)
    return status


async def main(a) -> int:
    if a.teacher and (a.replicas or not a.remote):
        print("--teacher: the teacher is the connection without X-Forwarded-For, so one process (no --replicas) and --remote students")
        return 2
    if a.against:
        return await compare(a)
    if a.how == "streamlit" and (a.url or a.replicas):
        print("--how streamlit starts one `streamlit run app.py` itself: not with --url or --replicas")
        return 2
    if a.hostile and a.replicas:
        print("--hostile needs one process: behind nginx every simulated student comes from this machine (the teacher's)")
        return 2
    proc, log = None, None
    if a.url:
        url = a.url
    else:
        log = Path(tempfile.mkdtemp()) / "server.log"
        proc, url = start_app(a.replicas, log, how=a.how)
        print(f"server: {a.how} app{f' --replicas {a.replicas}' if a.replicas else ''} at {url} (log {log})")
    status = 0
    try:
        app_pids, web_pids = server_pids(proc.pid if proc else None, a.pid)
        cores = len(os.sched_getaffinity(0))
        print(
            f"{cpu_name()}, {cores} cores; server processes {app_pids}, nginx {web_pids}; think {a.think:g} s, arrivals over {a.arrive:g} s"
        )
        report = {"cpu": cpu_name(), "cores": cores, "replicas": a.replicas or 1, "think_s": a.think, "steps": {}}
        await warm_up(url, a.replicas or 1)
        if a.hostile:  # the pages and models it visits are loaded once before any class: loads in a class are its doing
            await hostile_student(url, 40, tabs=1)
        if a.calibrate:
            report["cpu_ms_per_move_alone"] = {k: round(1000 * v, 1) for k, v in (await calibrate(url, app_pids)).items()}
            print("server CPU per move, one student alone (median):")
            for kind, ms in report["cpu_ms_per_move_alone"].items():
                print(f"  {kind:19} {ms:7.1f} ms")
        if a.first_pages:
            report["cpu_ms_first_page"] = {}
            print("server CPU for a new session's first page (ms): first student, then the median of the others")
            for page, costs in (await first_opens(url, app_pids)).items():
                first, rest = 1000 * costs[0], 1000 * statistics.median(costs[1:])
                report["cpu_ms_first_page"][page] = {"first": round(first, 1), "others_median": round(rest, 1)}
                print(f"  {page:13} {first:7.1f} {rest:7.1f}")
            if a.json:
                Path(a.json).write_text(json.dumps(report, indent=1))
            return status
        # with --hostile each class runs twice on the same server, alone and then beside the hostile
        # student, so the two are compared side by side on one machine
        for n, spoiled in [(n, h) for n in a.students for h in ((False, True) if a.hostile else (False,))]:
            loads = reloads(log)
            before, web_before, t0, own = cpu_seconds(app_pids), cpu_seconds(web_pids), time.perf_counter(), time.process_time()
            seconds = 60 * a.minutes
            if spoiled:  # it spoils a class from the second student's arrival to the last one's leaving
                spoil = hostile_student(url, a.arrive + seconds, tabs=a.hostile, delay=a.arrive / max(n - 1, 1))
                stats, (bad, cleared) = await asyncio.gather(run_class(url, n, a.arrive, seconds, a.think, a.models, remote=True), spoil)
            else:
                stats = await run_class(url, n, a.arrive, seconds, a.think, a.models, remote=a.remote or bool(a.hostile), teacher=a.teacher)
            elapsed = time.perf_counter() - t0
            s = summary(stats, elapsed, cpu_seconds(app_pids) - before, cpu_seconds(web_pids) - web_before, cores)
            if spoiled:
                s["hostile"] = {
                    "tabs": a.hostile,
                    "clear_cache_messages": cleared,
                    "moves": dict(bad.moves),
                    "p50_ms": {k: round(1000 * statistics.median(v)) for k, v in bad.latency.items()},
                    "exceptions": bad.problems["exception"],
                    "errors": bad.problems["error"],
                }
            s["client_cpu_s"] = round(time.process_time() - own, 1)  # this process: every student, on the same machine
            if loads is not None:
                s["model_loads"] = reloads(log) - loads
            report["steps"][f"{n} beside a hostile student" if spoiled else n] = s
            print_step(f"{n} (beside a hostile student)" if spoiled else n, s)
            if spoiled:
                h = s["hostile"]
                print(
                    f"  beside them one hostile student in {h['tabs']} tabs: {sum(h['moves'].values())} reruns {h['moves']}, "
                    f"{h['clear_cache_messages']} clear-cache messages; exceptions it was shown: {len(h['exceptions'])}, "
                    f"errors: {len(h['errors'])}"
                )
                for line in (h["exceptions"] + h["errors"])[:5]:
                    print(f"    {line}")
            print(f"  the students' own CPU (this process): {s['client_cpu_s']:.0f} s", end="")
            print(f"; model loads logged by the server: {s['model_loads']}" if "model_loads" in s else "")
            status |= 1 if s["errors"] or s["leaks"] else 0
            status |= 1 if spoiled and (s["hostile"]["exceptions"] or s.get("model_loads")) else 0
            if a.stop_when_over and not s["targets_met"]:
                break
        if a.json:
            Path(a.json).write_text(json.dumps(report, indent=1))
    finally:
        if proc is not None:
            stop_streamlit(proc)
    return status


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--students", type=int, nargs="+", default=[20], help="one class per number, one after another (default: 20)")
    ap.add_argument("--arrive", type=float, default=60, help="students arrive evenly over this many seconds (default: 60)")
    ap.add_argument("--minutes", type=float, default=3, help="how long each student works after arriving (default: 3)")
    ap.add_argument("--think", type=float, default=5, help="mean seconds a student looks before the next move (default: 5)")
    ap.add_argument("--url", help="a running capsviz server (default: start `capsviz app` with the shipped models)")
    ap.add_argument("--replicas", type=int, help="start `capsviz app --replicas N` (nginx in front)")
    ap.add_argument("--pid", type=int, action="append", default=[], help="with --url: a server process whose CPU to count (repeat)")
    ap.add_argument("--models", type=lambda s: tuple(s.split(",")), default=MODELS, help="the students' CapsNets, comma-separated")
    ap.add_argument("--calibrate", action="store_true", help="first measure the server's CPU per move with one student alone")
    ap.add_argument("--first-pages", action="store_true", help="instead: the server's CPU for a new session's first open of each page")
    ap.add_argument(
        "--hostile",
        type=int,
        nargs="?",
        const=3,
        default=0,
        help="one hostile student beside each class, in this many tabs (default 3): clear-cache messages, crafted links, "
        "the dearest pages without a pause; the class's students then connect as from other machines (one process only)",
    )
    ap.add_argument("--remote", action="store_true", help="the students connect as from other machines (X-Forwarded-For)")
    ap.add_argument(
        "--teacher",
        action="store_true",
        help="the teacher follows each class on the Teacher page, its live parts rerun every 5 s (one process; with --remote)",
    )
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument(
        "--against",
        metavar="REV",
        help="also run every class on this commit's app (a git worktree of it, with its shipped models), in turn with this checkout's",
    )
    ap.add_argument("--rounds", type=int, default=1, help="with --against: classes on each commit, in turn (default: 1)")
    ap.add_argument(
        "--how",
        choices=["capsviz", "streamlit"],
        default="capsviz",
        help="start the app as `capsviz app` (default) or as `streamlit run app.py` from the checkout",
    )
    ap.add_argument("--stop-when-over", action="store_true", help="stop after the first class that misses a target")
    return ap


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parser().parse_args())))
