"""A live class (issue 54): 30 students, each a browser session of its own with the identity the
server minted for it, spread over `capsviz app --replicas 2` behind nginx, answer the guided tour's
questions (a mix of choices, some skips) at the protocol level (tests/load/protocol.py). The
teacher, on another machine with the teacher key, then finds on the Teacher page exactly the
counts the students sent; reveals one question (the students see the class's split); asks it
again, and a revote by some students keeps first and final answers both; the counts survive a
restart of the replicas. Once on SQLite in the model folder, once on PostgreSQL (tests/classdb.py).

Students and teacher connect to nginx by this machine's network address, as browsers on other
machines do (a school's NAT: one address for the class). The students open the teacher's link on
replicas that have served no one yet, at nearly the same moment, as a lesson starts."""

import asyncio
import os
import random
import re
import sys
import time
import urllib.parse
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "load"))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
import protocol  # noqa: E402
from st_helpers import outward_address, run_async, stop_streamlit  # noqa: E402
from test_class_serve import need_nginx  # noqa: E402

from capsviz import store  # noqa: E402

MODEL = "efficient-capsnet-mnist.safetensors"  # the chapter's three questions, then five of its own
IMAGE = 1234  # the teacher's link: every student follows this test image
STEPS = 3 + 8 + 1  # the chapter, the model's steps, "Where I stand"
QUESTIONS = 8
STUDENTS = 30
KEY = "live-class-teacher-key"
REVOTED = 1  # the question (by its place in the tour) the teacher asks again
REVOTERS = 10  # students who answer it again
SEE_REVEAL = 3  # students who come back to see the revealed split


def unescaped(text: str) -> str:
    """A label as the radio shows it (capsviz.text.plain's Markdown escapes) read as plain text."""
    return re.sub(r"\\(.)", r"\1", text.replace("\u200b", ""))


class Browser(protocol.Student):
    """One browser at the protocol level: its cookies (nginx's replica, and the signed identity
    the page sets with a script, as a browser runs it) and the page's elements after each rerun."""

    def __init__(self, k: int, url: str, stats: protocol.Stats):
        super().__init__(k, url, stats, 0, MODEL, fetch_media=False)
        self.identity = ""  # the capsviz_id cookie's value, once the page has set it
        self.seen_ids: set[str] = set()  # identities this browser was given (must stay one)

    async def rerun(self, kind, page=None, query=None, widgets=(), fragment="", since=None):
        run = await super().rerun(kind, page, query, widgets, fragment, since)
        for what, el in run.elements:
            if what == "html" and (m := re.search(r"capsviz_id=([0-9a-f.]+);", el.body)):
                self.identity = m.group(1)
                self.seen_ids.add(self.identity)
                self.cookie = "; ".join(
                    [c for c in self.cookie.split("; ") if c and not c.startswith("capsviz_id=")] + [f"capsviz_id={m.group(1)}"]
                )
        assert not run.exceptions, (self.k, kind, run.exceptions)
        return run

    async def reload(self, page: str, query: str) -> protocol.Run:
        """A reload (or the link opened again): a new session of the same browser, its cookies kept."""
        await self.leave()
        self.session_id = ""
        await self.connect()
        return await self.rerun("reload", page=page, query=query)


def texts(run: protocol.Run, what: str) -> list[str]:
    return [el.text if what == "progress" else el.body for kind, el in run.elements if kind == what]


def step_of(run: protocol.Run) -> int | None:
    found = [int(m.group(1)) for text in texts(run, "progress") for m in [re.match(r"Step (\d+) of (\d+)", text)] if m]
    return found[-1] if found else None


def question_in(run: protocol.Run):
    """(qid, the question's words, its choices as shown) of the question on the page, or None."""
    for what, el in run.elements:
        if what == "radio" and (m := re.search(r"-answer_(.+)$", el.id)):
            words = next(b for b in texts(run, "markdown") if b.startswith("**Predict first.**"))
            return m.group(1), unescaped(words.removeprefix("**Predict first.** ")), list(el.options)
    return None


class Pupil(Browser):
    """A student: follows the teacher's link through the tour; at each question commits a choice
    or skips, as its plan says; remembers what it sent."""

    def __init__(self, k, url, stats):
        super().__init__(k, url, stats)
        self.rng = random.Random(k)
        self.sent: dict[tuple[str, int], str | None] = {}  # (qid, round) -> the label committed; None: skipped
        self.verdicts: dict[str, str] = {}  # qid -> what the reveal said first ("Right." or "Not this time")
        self.summary = ""

    def plan(self, i: int, options: list[str]) -> str | None:
        if (self.k + 3 * i) % 6 == 0:
            return None  # a skip, now and then
        return self.rng.choices(options, [4, 2, 1, 1][: len(options)])[0]  # a class leans to some answers

    async def answer(self, qid: str, options: list[str], choice: str | None, rnd: int = 1) -> protocol.Run:
        """Commit `choice` (one of `options`, the choices as the radio shows them; None: skip)."""
        if choice is None:
            run = await self.rerun("skip", widgets=[(f"skip_{qid}", "trigger_value", True)])
        else:
            await self.rerun("pick", widgets=[(f"answer_{qid}", "string_value", choice)])
            run = await self.rerun("commit", widgets=[(f"commit_{qid}", "trigger_value", True)])
        self.sent[qid, rnd] = None if choice is None else unescaped(choice)
        verdict = [b for b in texts(run, "alert") if re.match(r"(Right|Not this time|You skipped)", b)]
        assert verdict, (self.k, qid, texts(run, "alert"))
        self.verdicts.setdefault(qid, verdict[0])
        return run

    async def lesson(self, arrive: float, asked: dict) -> None:
        """The teacher's link, then every step: a question is answered (or skipped) before Next."""
        await asyncio.sleep(arrive)
        await self.connect()
        self.first_replica = self.replica
        run = await self.rerun("first page", page="tour", query=urllib.parse.urlencode({"model": MODEL, "image": IMAGE}))
        i = 0
        for k in range(1, STEPS):
            assert step_of(run) == k, (self.k, k, texts(run, "progress"))
            q = question_in(run)
            if q is not None:
                qid, words, options = q
                asked.setdefault(qid, (k, words, [unescaped(o) for o in options]))
                await self.answer(qid, options, self.plan(i, options))
                i += 1
            run = await self.rerun("next", widgets=[("tour_next", "trigger_value", True)])
        assert step_of(run) == STEPS and i == QUESTIONS, (self.k, i)
        self.summary = next(b for b in texts(run, "markdown") if b.startswith("You got "))


class Teacher(Browser):
    async def enter_key(self) -> None:
        """The sidebar's Class panel: the key typed (the field tries it once and empties)."""
        run = await self.rerun("key", widgets=[("teacher_key_typed", "string_value", KEY)])
        assert "You are the teacher on this server." in texts(run, "toast"), texts(run, "toast")
        assert "teacher" in self.pages

    async def board(self, query: str = "") -> dict:
        """The Teacher page as it shows now: students connected, and per question its words, its
        caption(s), its table (answer -> students; the right one marked ✓)."""
        run = await self.rerun("teacher page", page="teacher", query=query)
        assert "Teacher" in [el.body for what, el in run.elements if what == "heading"], "not the Teacher page"
        metric = next(el.body for what, el in run.elements if what == "metric")
        where = pa.ipc.open_stream(next(el for what, el in run.elements if what == "table").arrow_data.data).read_all().to_pandas()
        questions, recent = {}, []
        for what, el in run.elements:
            recent.append((what, el))
            if what == "button" and (m := re.search(r"-teacher_reveal_(.+)$", el.id)):
                table = next(e for w, e in recent if w == "table")
                frame = pa.ipc.open_stream(table.arrow_data.data).read_all().to_pandas()
                questions[m.group(1)] = {
                    "text": next(e.body for w, e in recent if w == "markdown" and e.element_type == e.NATIVE),
                    "model": [
                        e.body for w, e in recent if w == "markdown" and e.element_type == e.CAPTION and e.body.startswith("Model: ")
                    ],
                    "captions": [
                        e.body for w, e in recent if w == "markdown" and e.element_type == e.CAPTION and not e.body.startswith("Model: ")
                    ],
                    "pictures": sum(1 for w, _ in recent if w == "imgs"),
                    "table": dict(zip(frame.iloc[:, 0], frame.iloc[:, 1].astype(int), strict=True)),
                    "reveal": el.label,
                }
                recent = []
            elif (what == "button" and "-teacher_again_" in el.id) or (what == "heading" and el.body == "Questions"):
                recent = []
        return {
            "connected": int(metric),
            "pages": dict(zip(where.iloc[:, 0], where.iloc[:, 1].astype(int), strict=True)),
            "questions": questions,
        }

    async def press(self, key: str) -> None:
        await self.rerun("teacher button", widgets=[(key, "trigger_value", True)])


def expected_table(options: list[str], answers: list[str], right: str) -> dict[str, int]:
    counts = Counter(answers)
    return {o + (" ✓" if o == right else ""): counts[o] for o in options}


def right_label(board_q: dict) -> str:
    return next(label.removesuffix(" ✓") for label in board_q["table"] if label.endswith(" ✓"))


def caption(n: int, rnd: int, revealed: bool) -> str:
    who = "1 student" if n == 1 else f"{n} students"
    sees = "the students see the class's answers" if revealed else "the students do not see the class's answers"
    return f"{who} answered in round {rnd}; {sees}."


def check_board(board: dict, asked: dict, pupils: list[Pupil], revealed: set, rounds: dict) -> None:
    assert board["connected"] == STUDENTS, board["connected"]
    assert set(board["questions"]) == set(asked)
    for qid, (_, words, options) in asked.items():
        got = board["questions"][qid]
        rnd = rounds.get(qid, 1)
        answers = [p.sent[qid, rnd] for p in pupils if p.sent.get((qid, rnd)) is not None]
        assert unescaped(got["text"]) == words
        assert got["table"] == expected_table(options, answers, right_label(got)), (qid, got["table"])
        assert got["captions"][0] == caption(len(answers), rnd, qid in revealed)
        assert got["model"] == ["Model: " + MODEL.removesuffix(".safetensors")]  # the model and image each question is about
        assert got["pictures"] == (0 if qid.startswith(("tour-parts", "tour-votes", "tour-coordinates", "tour-lab")) else 1), qid
        assert got["reveal"] == ("Hide from the students" if qid in revealed else "Reveal to the students")


def split_sentence(table: dict) -> str:
    n = sum(table.values())
    parts = "; ".join(f"{label.removesuffix(' ✓')}: {count}" for label, count in table.items())
    return f"How the class answered: {n} student{'s' if n != 1 else ''} answered. {parts}."


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """One cache folder for every start here: the native EM kernel is compiled once."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(params=["sqlite", "postgresql"])
def class_server(request, tmp_path, cache):
    """`capsviz app --replicas 2` on every interface over the shipped models in a folder of its own
    (its class store beside them, or a fresh PostgreSQL database): (url for the class, start again)."""
    data = ROOT.parent / "shared" / "data"
    if not (data / "mnist").is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"CI must have the real data at {data}")
        pytest.skip("real data not present (../shared/data)")
    need_nginx()
    address = outward_address()
    if address is None:
        pytest.skip("this machine has no network address besides loopback: every browser would be the teacher's")
    models = tmp_path / "checkpoints"
    models.mkdir()
    for f in (ROOT / "checkpoints").glob("*.safetensors"):
        (models / f.name).symlink_to(f)
    (models / "sweeps").symlink_to(ROOT / "checkpoints" / "sweeps")
    db = request.getfixturevalue("postgres_server").database() if request.param == "postgresql" else ""
    env = {
        "CAPSVIZ_CHECKPOINTS": str(models),
        "CAPSVIZ_DATA_DIR": str(data),
        "XDG_CACHE_HOME": str(cache),
        "CAPSVIZ_TEACHER_KEY": KEY,
        store.URL_SETTING: db,
    }
    running = {}

    def start():
        if "proc" in running:
            stop_streamlit(running["proc"])
        port = running.get("port", 0)
        proc, url = protocol.start_app(2, tmp_path / f"app-{len(running)}.log", port=port, env=env, address="0.0.0.0")
        running.update(proc=proc, port=int(url.rsplit(":", 1)[1]))
        return f"http://{address}:{running['port']}", url

    try:
        yield start, request.param, models
    finally:
        if "proc" in running:
            stop_streamlit(running["proc"])


def test_thirty_students_answer_the_tour_and_the_teacher_counts_reveals_and_asks_again(class_server):
    start, backend, models = class_server
    t0 = time.perf_counter()
    url, _ = start()
    took = {"started": time.perf_counter() - t0}
    stats = protocol.Stats()
    pupils = [Pupil(k, url, stats) for k in range(STUDENTS)]
    teacher = Teacher(100, url, protocol.Stats())
    asked: dict = {}  # qid -> (its step, its words, its choices), as the students saw them

    async def lesson():
        t = time.perf_counter()
        await asyncio.gather(*(p.lesson(0.1 * k, asked) for k, p in enumerate(pupils)))
        took["answering"] = time.perf_counter() - t
        assert len(asked) == QUESTIONS
        assert len({p.identity for p in pupils}) == STUDENTS and all(len(p.seen_ids) == 1 for p in pupils)  # each its own, kept
        spread = Counter(p.first_replica for p in pupils)
        assert len(spread) == 2 and min(spread.values()) >= 5, spread
        order = sorted(asked, key=lambda q: asked[q][0])

        await teacher.connect()
        await teacher.rerun("first page", page="tour", query=urllib.parse.urlencode({"model": MODEL, "image": IMAGE}))
        assert "teacher" not in teacher.pages  # on another machine: a student until the key
        await teacher.enter_key()
        board = await teacher.board()
        check_board(board, asked, pupils, set(), {})
        assert board["pages"] == {f"guided tour, step {STEPS}": STUDENTS}, board["pages"]  # where each one is now

        # every student's verdicts and "Where I stand" agree with the answers the teacher sees marked right
        right = {qid: right_label(board["questions"][qid]) for qid in asked}
        for p in pupils:
            got = sum(p.sent.get((qid, 1)) == right[qid] for qid in asked)
            skipped = sum(p.sent.get((qid, 1)) is None for qid in asked)
            assert p.summary.startswith(f"You got {got} of {QUESTIONS} questions right"), (p.k, p.summary, got)
            assert (f"; {skipped} of them you skipped" in p.summary) == bool(skipped), (p.k, p.summary, skipped)
            for qid in asked:
                said = "You skipped" if p.sent[qid, 1] is None else "Right" if p.sent[qid, 1] == right[qid] else "Not this time"
                assert p.verdicts[qid].startswith(said), (p.k, p.verdicts[qid], said)

        # the reveal: students who answered see the class's split, exactly
        q = order[REVOTED]
        step = asked[q][0]
        await teacher.press(f"teacher_reveal_{q}")
        board = await teacher.board()
        check_board(board, asked, pupils, {q}, {})
        link = urllib.parse.urlencode({"model": MODEL, "image": IMAGE, "step": step})
        for p in [p for p in pupils if p.sent[q, 1] is not None][:SEE_REVEAL]:
            run = await p.reload("tour", link)
            shown = [unescaped(c) for c in texts(run, "markdown")]
            assert split_sentence(board["questions"][q]["table"]) in shown, (p.k, shown)

        # asked again: a new round, hidden; some students answer again (some change, some keep theirs)
        await teacher.press(f"teacher_again_{q}")
        for n, p in enumerate(pupils[:REVOTERS]):
            run = await p.reload("tour", link)
            assert "Your teacher asks again: answer once more after the discussion." in texts(run, "markdown")
            qid, _, options = question_in(run)
            assert qid == q
            keep = p.sent[q, 1]
            pick = right[q] if n % 2 == 0 or keep is None else keep
            await p.answer(q, options, next(o for o in options if unescaped(o) == pick), rnd=2)
        board = await teacher.board()
        check_board(board, asked, pupils, set(), {q: 2})
        changed = sum(p.sent[q, 1] not in (None, p.sent[q, 2]) for p in pupils[:REVOTERS])  # first and final differ
        assert changed > 0
        changed_words = f"{changed} student{'s' if changed != 1 else ''} changed their answer since round 1."
        assert changed_words in board["questions"][q]["captions"], board["questions"][q]["captions"]

        # the replicas restart: the same counts, rounds and reveals; the teacher is still the teacher
        for b in (teacher, *pupils):
            await b.leave()
        t = time.perf_counter()
        teacher.url, _ = await asyncio.to_thread(start)
        took["restart"] = time.perf_counter() - t
        await teacher.reload("teacher", "")  # its browser: the same cookies, the same address
        again = await teacher.board()
        assert again["questions"] == board["questions"]
        check_board(again, asked, pupils, set(), {q: 2})

    async def held():
        try:
            await lesson()
        finally:
            await asyncio.gather(*(b.leave() for b in (teacher, *pupils)), return_exceptions=True)

    run_async(held())
    if backend == "sqlite":
        assert (models / store.DB_FILE).is_file()
    latency = sorted(x for v in stats.latency.values() for x in v)
    print(
        f"live class on {backend}: started in {took['started']:.0f} s; {STUDENTS} students opened the link on the fresh replicas and answered "
        f"{QUESTIONS} questions in {took['answering']:.0f} s ({len(latency)} reruns, p95 {protocol.percentile(latency, 0.95):.2f} s); "
        f"restart {took['restart']:.0f} s; {time.perf_counter() - t0:.0f} s in all ({protocol.cpu_name()})"
    )
