"""The class's shared store: what every app process of a server (`capsviz app --replicas`) must
agree on, kept so that it outlives a restart.

- **identities** the server minted (capsviz.access), with the address each came from and when its
  browser was last seen (the Teacher page's "students connected", and which page they are on);
- **wrong teacher-key guesses**, per address, for their limits, and the identities that entered
  the right key (the teacher on every app process, after a restart too);
- **training runs** of every app process, in the order they were started: one trains at a time
  on the server, the rest wait, the teacher sees and stops any of them (capsviz.jobs);
- **questions and answers** (capsviz.analysis.questions asks them): each student's answer per
  question and round, whether the teacher has revealed the class's split.

One machine: SQLite in WAL mode in the model folder (`.capsviz-class.sqlite`): readers never wait
for the writer, and every write is one short transaction. Several machines serving one class:
`CAPSVIZ_CLASS_DB=postgresql://user:password@host/db` puts the same tables in a PostgreSQL
database (through psycopg 3, installed separately: `pip install "psycopg[binary]"`).

Nothing here imports Streamlit, and nothing here decides who may do what: capsviz.access and the
pages do; this module keeps the rows.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from capsviz.errors import CapsvizError
from capsviz.i18n import t, tn

DB_FILE = ".capsviz-class.sqlite"
URL_SETTING = "CAPSVIZ_CLASS_DB"
BUSY_MS = 10_000  # a writer waits this long for another process's write before giving up
# A run whose app process has not said it is alive for this long is over (the process died): it
# neither trains nor holds a place in the queue. Live processes say so every RUN_BEAT_S.
RUN_BEAT_S = 1.0
RUN_DEAD_S = 20.0
ACTIVE = ("queued", "running")

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS identities (who TEXT PRIMARY KEY, address TEXT NOT NULL, made DOUBLE PRECISION NOT NULL,"
    " seen DOUBLE PRECISION NOT NULL, page TEXT NOT NULL DEFAULT '', teacher INTEGER NOT NULL DEFAULT 0)",
    "CREATE INDEX IF NOT EXISTS identities_by_address ON identities (address, made)",
    "CREATE TABLE IF NOT EXISTS guesses (address TEXT NOT NULL, at DOUBLE PRECISION NOT NULL)",
    "CREATE INDEX IF NOT EXISTS guesses_by_time ON guesses (at)",
    "CREATE TABLE IF NOT EXISTS teachers (who TEXT PRIMARY KEY, at DOUBLE PRECISION NOT NULL)",
    "CREATE TABLE IF NOT EXISTS runs (rid TEXT PRIMARY KEY, seq INTEGER NOT NULL, owner TEXT NOT NULL, address TEXT NOT NULL,"
    " name TEXT NOT NULL, state TEXT NOT NULL, beat DOUBLE PRECISION NOT NULL, stop INTEGER NOT NULL DEFAULT 0,"
    " teacher INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS questions (qid TEXT PRIMARY KEY, page TEXT NOT NULL, text TEXT NOT NULL, choices TEXT NOT NULL,"
    " labels TEXT NOT NULL, answer TEXT NOT NULL, round INTEGER NOT NULL DEFAULT 1, revealed INTEGER NOT NULL DEFAULT 0, asked DOUBLE PRECISION NOT NULL)",
    "CREATE TABLE IF NOT EXISTS subjects (qid TEXT PRIMARY KEY, model TEXT NOT NULL, picture TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS answers (qid TEXT NOT NULL, who TEXT NOT NULL, round INTEGER NOT NULL, choice TEXT NOT NULL,"
    " reason TEXT NOT NULL DEFAULT '', correct INTEGER NOT NULL, at DOUBLE PRECISION NOT NULL, PRIMARY KEY (qid, who, round))",
)
FORGET_S = 180 * 86400  # an identity not seen for half a year is forgotten (its browser gets a new one)
MAX_REASON = 200  # characters of a student's optional reason: one line
MAX_SUBJECT = 20_000  # characters of a question's model name and picture (base64 PNG); a larger picture is not kept
MAX_QUESTIONS = 10_000  # distinct questions kept per class; beyond, new ones are not recorded (a hostile flood)


@dataclass(frozen=True)
class Run:
    rid: str
    seq: int
    owner: str
    address: str
    name: str
    state: str
    stop: bool
    teacher: bool


@dataclass(frozen=True)
class Split:
    """How a question's current round was answered: choice -> count, and how many answered."""

    qid: str
    page: str
    text: str  # the question, in no one language (capsviz.analysis.questions.Words.dump; `said` shows it)
    choices: tuple[str, ...]  # the choices' keys, as answers are stored and counted
    labels: tuple[str, ...]  # what each choice says, kept as its text is
    answer: str
    round: int
    revealed: bool
    counts: dict[str, int]
    answered: int
    students: int  # who answered it in any round


def _write_ahead(conn: sqlite3.Connection) -> None:
    """Put the file in WAL mode (it stays so). SQLite does not wait for a lock here as it does for
    a write: two processes opening a new file at once may see "database is locked", so try again."""
    deadline = time.monotonic() + BUSY_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.01 + random.random() * 0.02)


class Store:
    """One connection per thread, to SQLite in `folder` or to the PostgreSQL at `url`."""

    def __init__(self, folder: Path | None = None, url: str | None = None):
        self.url = url if url is not None else os.environ.get(URL_SETTING, "").strip() or None
        self.path = None if self.url else Path(folder) / DB_FILE
        self._local = threading.local()
        self._ready = False
        self._ready_lock = threading.Lock()

    @property
    def postgres(self) -> bool:
        return self.url is not None

    def _connection(self):
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self.postgres:
                try:
                    import psycopg
                except ImportError:
                    raise CapsvizError(
                        t('{setting} names a PostgreSQL database: install its driver, pip install "psycopg[binary]"', setting=URL_SETTING)
                    ) from None
                conn = psycopg.connect(self.url, autocommit=True)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(self.path, timeout=BUSY_MS / 1000, isolation_level=None, check_same_thread=False)
                conn.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
                _write_ahead(conn)
                conn.execute("PRAGMA synchronous = NORMAL")  # WAL: a power cut may lose the last answers, never corrupt the file
            self._local.conn = conn
        if not self._ready:
            with self._ready_lock:
                if not self._ready:
                    with self._write(conn) as c:
                        for statement in SCHEMA:
                            c.execute(statement)
                    self._ready = True
        return conn

    def _sql(self, statement: str) -> str:
        return statement.replace("?", "%s") if self.postgres else statement

    @contextlib.contextmanager
    def _write(self, conn=None):
        """One write transaction, one writer at a time across every process (SQLite's IMMEDIATE
        lock; PostgreSQL's transaction-level advisory lock)."""
        conn = conn or self._connection()
        cur = conn.cursor()
        if self.postgres:
            cur.execute("BEGIN")
            cur.execute("SELECT pg_advisory_xact_lock(5454)")
        else:
            cur.execute("BEGIN IMMEDIATE")
        try:
            yield _Cursor(cur, self._sql)
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        else:
            cur.execute("COMMIT")

    def _read(self, statement: str, args: tuple = ()) -> list[tuple]:
        cur = self._connection().cursor()
        cur.execute(self._sql(statement), args)
        return [tuple(r) for r in cur.fetchall()]

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # -- identities -------------------------------------------------------------------------

    def mint(self, who: str, address: str, window_s: float, most: int, now: float | None = None) -> bool:
        """Record the new identity `who` from `address`, unless `most` identities were already
        made from that address within the last `window_s` seconds: then False, nothing recorded."""
        now = time.time() if now is None else now
        with self._write() as c:
            (made,) = c.one("SELECT COUNT(*) FROM identities WHERE address = ? AND made > ?", (address, now - window_s))
            if made >= most:
                return False
            c.execute(
                "INSERT INTO identities (who, address, made, seen) VALUES (?, ?, ?, ?) ON CONFLICT (who) DO NOTHING",
                (who, address, now, now),
            )
            if random.random() < 0.01:  # now and then: browsers gone for good
                c.execute("DELETE FROM identities WHERE seen < ?", (now - FORGET_S,))
        return True

    def seen(self, who: str, address: str, page: str, teacher: bool, now: float | None = None) -> None:
        """`who` has a page open now (`page`): the Teacher page counts the students seen lately."""
        now = time.time() if now is None else now
        with self._write() as c:
            c.execute(
                "INSERT INTO identities (who, address, made, seen, page, teacher) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (who) DO UPDATE SET seen = excluded.seen, page = excluded.page, teacher = excluded.teacher",
                (who, address, now, now, page, int(teacher)),
            )

    def connected(self, within_s: float, now: float | None = None) -> dict[str, int]:
        """Students (not the teacher) seen within the last `within_s` seconds, per page."""
        now = time.time() if now is None else now
        rows = self._read("SELECT page, COUNT(*) FROM identities WHERE seen > ? AND teacher = 0 GROUP BY page", (now - within_s,))
        return {page: n for page, n in rows}

    # -- teacher-key guesses ------------------------------------------------------------------

    def guesses(self, address: str, window_s: float, now: float | None = None) -> tuple[int, int]:
        """Wrong guesses within the last `window_s` seconds: (from `address`, in all)."""
        now = time.time() if now is None else now
        ((mine,),) = self._read("SELECT COUNT(*) FROM guesses WHERE address = ? AND at > ?", (address, now - window_s))
        ((every,),) = self._read("SELECT COUNT(*) FROM guesses WHERE at > ?", (now - window_s,))
        return mine, every

    def wrong_guess(self, address: str, window_s: float, now: float | None = None) -> None:
        now = time.time() if now is None else now
        with self._write() as c:
            c.execute("DELETE FROM guesses WHERE at <= ?", (now - window_s,))
            c.execute("INSERT INTO guesses (address, at) VALUES (?, ?)", (address, now))

    def keyed(self, who: str, now: float | None = None) -> None:
        """`who` entered the teacher key."""
        now = time.time() if now is None else now
        with self._write() as c:
            c.execute("INSERT INTO teachers (who, at) VALUES (?, ?) ON CONFLICT (who) DO NOTHING", (who, now))

    def is_keyed(self, who: str) -> bool:
        """Whether `who` has entered the teacher key, on any app process, before a restart too."""
        return bool(self._read("SELECT 1 FROM teachers WHERE who = ?", (who,)))

    # -- training runs ------------------------------------------------------------------------

    def add_run(self, rid: str, owner: str, address: str, name: str, teacher: bool, limits: RunLimits, now: float | None = None) -> None:
        """Queue the run `rid` behind every live one, or raise CapsvizError saying why not: the
        owner has a run going or waiting; `name` is being trained; the queue is full (`limits`),
        in all or for one address (the teacher's runs are let in beyond both)."""
        now = time.time() if now is None else now
        with self._write() as c:
            live = [_run(r) for r in c.all(_RUNS + " WHERE state IN ('queued', 'running') AND beat > ?", (now - RUN_DEAD_S,))]
            if any(r.owner == owner for r in live):
                raise CapsvizError(t("You already have a run going or waiting (in this tab or another); stop or cancel it first."))
            if any(r.name == name for r in live):
                raise CapsvizError(t("Another run will save to {name}; choose a new name.", name=name))
            queued = sorted((r for r in live if r.state == "queued"), key=lambda r: r.seq)
            running = any(r.state == "running" for r in live)
            if not running and queued:  # the first in line is about to take its turn: it does not wait
                queued, running = queued[1:], True
            waiting = [r for r in queued if not r.teacher]
            if not teacher and (running or waiting):
                if len(waiting) >= limits.waiting:
                    raise CapsvizError(
                        tn(
                            "The training queue is full: {n} run waits for its turn on this server. Try again when it has finished.",
                            "The training queue is full: {n} runs wait for their turn on this server. Try again when one has finished.",
                            len(waiting),
                        )
                    )
                if sum(r.address == address for r in waiting) >= limits.per_address:
                    raise CapsvizError(
                        tn(
                            "{n} run from your network already waits for its turn; try again when it has finished.",
                            "{n} runs from your network already wait for their turn; try again when one has finished.",
                            limits.per_address,
                        )
                    )
            (seq,) = c.one("SELECT COALESCE(MAX(seq), 0) + 1 FROM runs", ())
            c.execute(
                "INSERT INTO runs (rid, seq, owner, address, name, state, beat, stop, teacher) VALUES (?, ?, ?, ?, ?, 'queued', ?, 0, ?)",
                (rid, seq, owner, address, name, now, int(teacher)),
            )
            c.execute("DELETE FROM runs WHERE state NOT IN ('queued', 'running') AND seq < ?", (seq - 200,))

    def take_turn(self, rid: str, now: float | None = None) -> int | None:
        """Mark `rid` running when nothing else runs and no live run queued before it waits: then 0.
        Else its place: 1 + the live runs before it (the running one included). None when the run
        is no longer queued (stopped, or removed by the teacher)."""
        now = time.time() if now is None else now
        with self._write() as c:
            row = c.one("SELECT seq, state FROM runs WHERE rid = ?", (rid,))
            if row is None or row[1] not in ACTIVE:
                return None
            if row[1] == "running":
                return 0
            (ahead,) = c.one(
                "SELECT COUNT(*) FROM runs WHERE rid <> ? AND beat > ? AND (state = 'running' OR (state = 'queued' AND seq < ?))",
                (rid, now - RUN_DEAD_S, row[0]),
            )
            if ahead:
                return ahead
            c.execute("UPDATE runs SET state = 'running', beat = ? WHERE rid = ?", (now, rid))
            return 0

    def beat(self, rid: str, now: float | None = None) -> bool:
        """The run's process is alive; returns whether the teacher asked it to stop."""
        now = time.time() if now is None else now
        with self._write() as c:
            c.execute("UPDATE runs SET beat = ? WHERE rid = ?", (now, rid))
            row = c.one("SELECT stop FROM runs WHERE rid = ?", (rid,))
        return bool(row and row[0])

    def end_run(self, rid: str, state: str) -> None:
        with self._write() as c:
            c.execute("UPDATE runs SET state = ? WHERE rid = ?", (state, rid))

    def stop_run(self, rid: str) -> None:
        """The teacher stops a run (or takes a waiting one out of the queue) on whichever app process runs it."""
        with self._write() as c:
            c.execute("UPDATE runs SET stop = 1 WHERE rid = ?", (rid,))

    def runs(self, now: float | None = None) -> list[Run]:
        """Live runs, the running one first, then the queue in order."""
        now = time.time() if now is None else now
        rows = self._read(_RUNS + " WHERE state IN ('queued', 'running') AND beat > ? ORDER BY seq", (now - RUN_DEAD_S,))
        found = [_run(r) for r in rows]
        return sorted(found, key=lambda r: (r.state != "running", r.seq))

    def position(self, rid: str, now: float | None = None) -> int | None:
        """0 while it trains, N when N - 1 live runs wait before it (or train), None once over."""
        now = time.time() if now is None else now
        found = self.runs(now)
        for k, r in enumerate(found):
            if r.rid == rid:
                return 0 if r.state == "running" else k + (0 if any(x.state == "running" for x in found) else 1)
        return None

    # -- questions and answers ----------------------------------------------------------------

    def answer(
        self,
        qid: str,
        page: str,
        text: str,
        choices: tuple[str, ...],
        labels: tuple[str, ...],
        key: str,
        who: str,
        choice: str,
        reason: str = "",
        about: tuple[str, str] = ("", ""),
    ) -> int:
        """Record `who`'s answer to the question `qid` (its text and choices' labels as
        capsviz.analysis.questions.Question.kept gives them, in no one language; its choices' keys; the
        right choice's key and `about`, the model it asks about and the image as a base64 PNG, recorded
        with the first answer) in the question's current round (a later answer in the same round
        replaces theirs); returns the round. CapsvizError for a choice the question does not offer."""
        if choice not in choices:
            raise CapsvizError(t("{choice} is not one of the question's choices.", choice=repr(choice)))
        now = time.time()
        with self._write() as c:
            row = c.one("SELECT round FROM questions WHERE qid = ?", (qid,))
            if row is None:
                (n,) = c.one("SELECT COUNT(*) FROM questions", ())
                if n >= MAX_QUESTIONS:
                    raise CapsvizError(t("This class has recorded too many questions; the teacher can start a new class."))
                c.execute(
                    "INSERT INTO questions (qid, page, text, choices, labels, answer, round, revealed, asked) VALUES (?, ?, ?, ?, ?, ?, 1, 0, ?)",
                    (qid, page, text, json.dumps(list(choices)), json.dumps(list(labels)), key, now),
                )
                model, picture = about
                if (model or picture) and len(model) + len(picture) <= MAX_SUBJECT:
                    c.execute(
                        "INSERT INTO subjects (qid, model, picture) VALUES (?, ?, ?) ON CONFLICT (qid) DO NOTHING", (qid, model, picture)
                    )
                rnd = 1
            else:
                rnd = row[0]
            c.execute(
                "INSERT INTO answers (qid, who, round, choice, reason, correct, at) VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (qid, who, round) DO UPDATE SET choice = excluded.choice, reason = excluded.reason,"
                " correct = excluded.correct, at = excluded.at",
                (qid, who, rnd, choice, str(reason)[:MAX_REASON], int(choice == key), now),
            )
        return rnd

    def mine(self, qid: str, who: str) -> tuple[int, str | None, bool]:
        """(the question's current round, `who`'s answer in it or None, whether the teacher revealed the split)."""
        row = self._read("SELECT round, revealed FROM questions WHERE qid = ?", (qid,))
        if not row:
            return 1, None, False
        rnd, revealed = row[0]
        got = self._read("SELECT choice FROM answers WHERE qid = ? AND who = ? AND round = ?", (qid, who, rnd))
        return rnd, (got[0][0] if got else None), bool(revealed)

    def splits(self) -> list[Split]:
        """Every question asked in this class, oldest first, with its current round's split."""
        return self._splits("", ())

    def split(self, qid: str) -> Split | None:
        found = self._splits(" WHERE q.qid = ?", (qid,))
        return found[0] if found else None

    def _splits(self, where: str, args: tuple) -> list[Split]:
        """The questions `where` picks (a clause on `questions q`), each with its split: three
        queries, however many questions."""
        counted: dict[str, dict[str, int]] = {}
        for qid, choice, n in self._read(
            "SELECT a.qid, a.choice, COUNT(*) FROM answers a JOIN questions q ON q.qid = a.qid AND q.round = a.round"
            + where
            + " GROUP BY a.qid, a.choice",
            args,
        ):
            counted.setdefault(qid, {})[choice] = n
        students = dict(
            self._read(
                "SELECT a.qid, COUNT(DISTINCT a.who) FROM answers a JOIN questions q ON q.qid = a.qid" + where + " GROUP BY a.qid", args
            )
        )
        out = []
        for qid, page, text, choices, labels, key, rnd, revealed in self._read(
            "SELECT q.qid, q.page, q.text, q.choices, q.labels, q.answer, q.round, q.revealed FROM questions q"
            + where
            + " ORDER BY q.asked, q.qid",
            args,
        ):
            options = tuple(json.loads(choices))
            counts = dict.fromkeys(options, 0) | counted.get(qid, {})
            n = students.get(qid, 0)
            out.append(
                Split(qid, page, text, options, tuple(json.loads(labels)), key, rnd, bool(revealed), counts, sum(counts.values()), n)
            )
        return out

    def subjects(self, qids: list[str]) -> dict[str, tuple[str, str]]:
        """Of the questions `qids`: the model each asks about and its image (a base64 PNG, "" for none)."""
        if not qids:
            return {}
        marks = ", ".join("?" * len(qids))
        return {
            qid: (model, picture)
            for qid, model, picture in self._read(f"SELECT qid, model, picture FROM subjects WHERE qid IN ({marks})", tuple(qids))
        }

    def reveal(self, qid: str, shown: bool = True) -> None:
        with self._write() as c:
            c.execute("UPDATE questions SET revealed = ? WHERE qid = ?", (int(shown), qid))

    def ask_again(self, qid: str) -> None:
        """A revote: a new round, hidden again; every earlier round's answers are kept."""
        with self._write() as c:
            c.execute("UPDATE questions SET round = round + 1, revealed = 0 WHERE qid = ?", (qid,))

    def new_class(self) -> None:
        """Forget every question and answer (identities, guesses and runs stay)."""
        with self._write() as c:
            c.execute("DELETE FROM answers")
            c.execute("DELETE FROM questions")
            c.execute("DELETE FROM subjects")

    def reasons(self, qid: str, rnd: int, most: int = 20) -> list[tuple[str, str]]:
        """(choice, reason) of the latest `most` answers to `qid` in round `rnd` that gave a reason."""
        return self._read(
            "SELECT choice, reason FROM answers WHERE qid = ? AND round = ? AND reason <> '' ORDER BY at DESC LIMIT ?", (qid, rnd, most)
        )

    def first_and_final(self, qid: str) -> dict[str, tuple[str, str]]:
        """Per student who answered `qid`: (their first answer, their latest), over every round."""
        rows = self._read("SELECT who, round, choice FROM answers WHERE qid = ? ORDER BY who, round", (qid,))
        out: dict[str, tuple[str, str]] = {}
        for who, _, choice in rows:
            out[who] = (out[who][0] if who in out else choice, choice)
        return out

    def answer_rows(self) -> list[tuple]:
        """(qid, page, model, question, who, round, choice, correct, reason, at) of every answer, for
        the export ("" for the model of a question about none)."""
        return self._read(
            "SELECT a.qid, q.page, COALESCE(m.model, ''), q.text, a.who, a.round, a.choice, a.correct, a.reason, a.at FROM answers a"
            " JOIN questions q ON q.qid = a.qid LEFT JOIN subjects m ON m.qid = a.qid ORDER BY q.asked, a.qid, a.who, a.round"
        )


@dataclass(frozen=True)
class RunLimits:
    waiting: int  # runs waiting in all
    per_address: int  # runs waiting from one address (a school's NAT is one address: see docs/class.md)


def _run(row: tuple) -> Run:
    return Run(*row[:6], bool(row[6]), bool(row[7]))


_RUNS = "SELECT rid, seq, owner, address, name, state, stop, teacher FROM runs"


class _Cursor:
    """A cursor that writes its SQL with ? and is given it in the database's own style."""

    def __init__(self, cur, sql):
        self._cur, self._sql = cur, sql

    def execute(self, statement: str, args: tuple = ()) -> None:
        self._cur.execute(self._sql(statement), args)

    def one(self, statement: str, args: tuple):
        self.execute(statement, args)
        row = self._cur.fetchone()
        return None if row is None else tuple(row)

    def all(self, statement: str, args: tuple) -> list[tuple]:
        self.execute(statement, args)
        return [tuple(r) for r in self._cur.fetchall()]


_stores: dict[tuple, Store] = {}
_stores_lock = threading.Lock()


def store(folder: Path) -> Store:
    """The store for the model folder `folder` (or $CAPSVIZ_CLASS_DB), one per process."""
    url = os.environ.get(URL_SETTING, "").strip() or None
    key = (url, None if url else str(Path(folder).resolve()))
    with _stores_lock:
        if key not in _stores:
            _stores[key] = Store(folder, url)
        return _stores[key]
