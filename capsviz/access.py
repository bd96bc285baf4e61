"""Who may do what on a served app: the one place the host's choices are read and kept.

- The **teacher** is whoever opens the app in a browser on the server's own machine, or enters
  the teacher key (`$CAPSVIZ_TEACHER_KEY`, else a key made once and kept in the model folder,
  printed in the server's log when the app starts; entered on the sidebar's Class panel, never
  in a link). A browser that entered the key stays the teacher on every app process of the
  server, and after a restart (`key_entered`, `keyed`: the class's store keeps its identity).
- **Students** are everyone else. They explore (every page, their own pictures and drawings),
  and, when the teacher allows it, also train and upload within the class's bounds. Exploring
  only is the default (`$CAPSVIZ_STUDENTS`: explore | train); the teacher changes it on the
  sidebar for the whole class, every app process of the server included.
- Only the teacher clears the server's caches, replaces a model someone else trained (or one
  that came with the app or was copied into the folder), or changes the class settings.

A student is one browser, not one tab, and an identity the server made: `mint` makes a random id,
records it in the class's store (capsviz.store) with the address it came from, and signs it with
the server's secret (HMAC-SHA256; `$CAPSVIZ_SECRET`, else a secret made once in the model folder);
the page keeps it in the browser as the `capsviz_id` cookie, so a reload or a second tab is the
same student, owning the same runs and models. A cookie the server did not sign (made up, or
changed) is no identity: that browser gets a new one. New identities from one address are
limited (IDENTITIES_PER_ADDRESS in IDENTITY_WINDOW_S): beyond, its new browsers share one
identity, `crowd-...`, so one machine with a script cannot become a class (a school's NAT, one
address for the whole class, is why the limit is a class's size, not a handful: docs/class.md).

The teacher key has at least MIN_KEY_CHARS characters (`check_teacher_key` refuses a shorter
`$CAPSVIZ_TEACHER_KEY` before the server starts), is entered on the sidebar's Class panel only
(never in a link, which the browser's history would keep), and wrong guesses are limited per
address and in all (`try_key`).

Nothing here imports Streamlit: the pages pass in what the request carried.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import json
import os
import secrets
import sys
import threading
import time
from pathlib import Path

from capsviz.errors import CapsvizError
from capsviz.i18n import N_, t
from capsviz.paths import atomic_write, exclusive
from capsviz.store import store

# What students may do, each said as the Class panel shows it (translated there: t(MODES[mode])).
MODES = {
    "explore": N_("explore only: every page, their own pictures and drawings; no training or uploads of data"),
    "train": N_("explore, and train models and upload data within the class's bounds"),
}
DEFAULT_MODE = "explore"
KEY_FILE = ".capsviz-teacher-key"
SETTINGS_FILE = ".capsviz-class.json"
OWNERS_FILE = ".capsviz-owners.json"
ID_COOKIE = "capsviz_id"  # "<id>.<signature>": the identity the server made for this browser
SECRET_FILE = ".capsviz-secret"
ID_HEX = 16  # an identity: 16 random hex digits (64 bits)
SIGNATURE_HEX = 32  # 128 bits of the HMAC: no guess comes near
# New identities from one address within IDENTITY_WINDOW_S. A whole class behind a school's NAT
# is one address and arrives within minutes: one app process serves 60 to 70 students
# (docs/class.md), plus a few second browsers and private windows; so 80. A script from one
# address gets at most 80 identities a window, and the training queue's share per address
# (capsviz.jobs) bounds what they can queue. $CAPSVIZ_IDENTITIES_PER_ADDRESS changes it.
IDENTITY_WINDOW_S = 600
CROWD = "crowd-"  # the start of an address's shared identity (`crowd`)
IDENTITIES_PER_ADDRESS = int(os.environ.get("CAPSVIZ_IDENTITIES_PER_ADDRESS", "80"))
MIN_KEY_CHARS = 12  # a made key is 16; 12 characters from even 36 symbols are 4.7e18 keys
# Wrong teacher-key guesses: per address and in all, within GUESS_WINDOW_S. Beyond either, every
# guess (the right key too) is refused until the window has passed: at 50 guesses a quarter hour
# a 12-character key stands for longer than the universe has. The teacher at the server's own
# machine needs no key, so a flood of guesses cannot lock them out.
GUESS_WINDOW_S = 900
GUESSES_PER_ADDRESS = 5
GUESSES_IN_ALL = 50
LOCAL = "local"  # the address of a browser on the server's own machine
MAX_OWNERS = 100_000  # entries of the owners file kept; beyond, a damaged or hostile file is refused
_PROCESS_KEY = secrets.token_urlsafe(12)  # where the model folder cannot keep one
_printed = False


def teacher_key(folder: Path) -> str:
    """$CAPSVIZ_TEACHER_KEY; else the key kept in the model folder (made there once, readable by
    the server's user only, so every app process of one server and every restart share it); else,
    where the folder cannot be written, one for this process."""
    if os.environ.get("CAPSVIZ_TEACHER_KEY"):
        check_teacher_key()
        return os.environ["CAPSVIZ_TEACHER_KEY"].strip()
    return _kept(Path(folder) / KEY_FILE)


def check_teacher_key() -> None:
    """CapsvizError when $CAPSVIZ_TEACHER_KEY is set but shorter than MIN_KEY_CHARS: the server
    refuses to start with a key a student could guess."""
    given = os.environ.get("CAPSVIZ_TEACHER_KEY", "").strip()
    if os.environ.get("CAPSVIZ_TEACHER_KEY") and len(given) < MIN_KEY_CHARS:
        raise CapsvizError(
            t(
                "CAPSVIZ_TEACHER_KEY has {count} characters; a teacher key needs at least {least} "
                "(a student could guess a shorter one). Set a longer one, or unset it and capsviz makes one.",
                count=len(given),
                least=MIN_KEY_CHARS,
            )
        )


def secret(folder: Path) -> bytes:
    """The key identities are signed with: $CAPSVIZ_SECRET, else one made once in the model folder
    (readable by the server's user only; every app process and every restart share it)."""
    if os.environ.get("CAPSVIZ_SECRET", "").strip():
        return os.environ["CAPSVIZ_SECRET"].strip().encode()
    path = str(Path(folder) / SECRET_FILE)
    if path not in _secrets:  # read once per process: every page run checks a cookie
        _secrets[path] = _kept(Path(path), 32).encode()
    return _secrets[path]


_secrets: dict[str, bytes] = {}


def _kept(path: Path, nbytes: int = 12) -> str:
    """A random key kept in `path` (made there once, mode 600), else one for this process."""
    try:
        return _read_key(path)
    except (OSError, ValueError):
        pass
    made = secrets.token_urlsafe(nbytes)
    fallback = _PROCESS_KEY if nbytes == 12 else _process_secret(nbytes)  # where the folder cannot keep one
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first
        for _ in range(50):  # it may not have written it yet
            try:
                return _read_key(path)
            except (OSError, ValueError):
                time.sleep(0.01)
        return fallback
    except OSError:
        return fallback
    with os.fdopen(fd, "w") as f:
        f.write(made)
    return made


_process_secrets: dict[int, str] = {}


def _process_secret(nbytes: int) -> str:
    return _process_secrets.setdefault(nbytes, secrets.token_urlsafe(nbytes))


def _read_key(path: Path) -> str:
    key = path.read_text().strip()
    if len(key) < 8:
        raise ValueError("too short to be a key")
    return key


def announce(folder: Path) -> None:
    """Tell the host the teacher key: one line in the server's log, once per process."""
    global _printed
    if not _printed:
        _printed = True
        print(
            f"capsviz: teacher key {teacher_key(folder)} (enter it in the sidebar's Class panel)",  # the host's log: English
            file=sys.stderr,
            flush=True,
        )


def key_matches(folder: Path, given: str | None) -> bool:
    return bool(given) and hmac.compare_digest(str(given).strip().encode(), teacher_key(folder).encode())


def try_key(folder: Path, given: str | None, address: str) -> str:
    """A teacher-key guess from `address`: "teacher" (right), "wrong", or "wait" when the wrong
    guesses from that address, or from everyone, have reached their limit (the guess is then not
    even compared). Counted in the class's store, so every app process shares the limits."""
    try:
        mine, every = store(folder).guesses(address, GUESS_WINDOW_S)
    except Exception:  # noqa: BLE001 - no store, no count: refuse rather than allow unlimited guesses
        return "wait"
    if mine >= GUESSES_PER_ADDRESS or every >= GUESSES_IN_ALL:
        return "wait"
    if key_matches(folder, given):
        return "teacher"
    try:
        store(folder).wrong_guess(address, GUESS_WINDOW_S)
    except Exception:  # noqa: BLE001
        pass
    return "wrong"


# A browser that has not entered the key is asked of the class's store again after this long (a
# page run asks several times): a key entered on another app process counts within it.
KEYED_CHECK_S = 5.0
_keyed: set[str] = set()  # identities known to have entered the key
_not_keyed: dict[str, float] = {}  # identity -> when the store last said it had not (time.monotonic)


def shared(who: str) -> bool:
    """Whether `who` is an address's shared identity (`crowd`): several browsers at once."""
    return who.startswith(CROWD)


def key_entered(folder: Path, who: str) -> None:
    """The browser `who` entered the right teacher key: the teacher from now on, on this app
    process at once, on every other within KEYED_CHECK_S, and after a restart. Never a shared
    identity: every browser behind it would be the teacher (the page says so instead)."""
    if shared(who):
        raise ValueError("a shared identity cannot hold the teacher key")
    _keyed.add(who)
    _not_keyed.pop(who, None)
    try:
        store(folder).keyed(who)
    except Exception:  # noqa: BLE001 - a model folder that cannot hold the store: the teacher on this process only
        pass


def keyed(folder: Path, who: str) -> bool:
    """Whether the browser `who` has entered the teacher key, on this app process or another."""
    if who in _keyed:
        return True
    now = time.monotonic()
    if now - _not_keyed.get(who, -KEYED_CHECK_S) < KEYED_CHECK_S:
        return False
    try:
        found = store(folder).is_keyed(who)
    except Exception:  # noqa: BLE001 - no store: only this process's own knowledge
        found = False
    if found:
        _keyed.add(who)
    else:
        if len(_not_keyed) > 100_000:  # many identities seen: forget the old answers rather than grow
            _not_keyed.clear()
        _not_keyed[who] = now
    return found


def _loopback(address: str | None) -> bool:
    if address in (None, "", "localhost"):
        return True
    try:
        return ipaddress.ip_address(address.split("%")[0]).is_loopback
    except ValueError:
        return False


def client_address(peer: str | None, forwarded: list[str]) -> str:
    """The browser's address: the last X-Forwarded-For value when the connection came from this
    machine's own proxy (nginx of --replicas appends it), else the connection's; LOCAL for a
    browser on the server's own machine."""
    if not _loopback(peer):
        return str(peer)
    last = ",".join(forwarded).split(",")[-1].strip() if forwarded else None
    return LOCAL if _loopback(last) else str(last)


def signed(folder: Path, who: str) -> str:
    """The cookie value for the identity `who`: the id and its signature."""
    mac = hmac.new(secret(folder), f"capsviz-id:{who}".encode(), hashlib.sha256).hexdigest()[:SIGNATURE_HEX]
    return f"{who}.{mac}"


def identity(folder: Path, cookies) -> str | None:
    """The identity in the browser's `capsviz_id` cookie (a mapping of cookie names to values),
    when the server signed it; None for no cookie, a made-up one or one changed."""
    value = cookies.get(ID_COOKIE) if cookies is not None else None
    if not isinstance(value, str) or len(value) != ID_HEX + 1 + SIGNATURE_HEX:
        return None
    who = value[:ID_HEX]
    if any(ch not in "0123456789abcdef" for ch in who):
        return None
    return who if hmac.compare_digest(signed(folder, who).encode(), value.encode()) else None


def mint(folder: Path, address: str) -> tuple[str, str | None]:
    """A new identity for a browser from `address` that brought none: (id, its signed cookie
    value). Beyond IDENTITIES_PER_ADDRESS new ones from that address in IDENTITY_WINDOW_S: the
    address's shared identity and no cookie (every such browser counts as one student)."""
    who = secrets.token_hex(ID_HEX // 2)
    if address == LOCAL:  # the server's own machine: the teacher's
        return who, signed(folder, who)
    try:
        made = store(folder).mint(who, address, IDENTITY_WINDOW_S, IDENTITIES_PER_ADDRESS)
    except Exception:  # noqa: BLE001 - a model folder that cannot hold the store: no limit, but still signed
        made = True
    return (who, signed(folder, who)) if made else (crowd(address), None)


def crowd(address: str) -> str:
    """The identity every browser from `address` shares once it has made its share of new ones."""
    return CROWD + hashlib.sha256(f"capsviz-crowd:{address}".encode()).hexdigest()[:10]


def label(who: str) -> str:
    """An anonymous label for a student, the same on every page and replica, that says nothing of
    who they are (the Teacher page can be projected)."""
    return hashlib.sha256(f"capsviz-label:{who}".encode()).hexdigest()[:4].upper()


def settings(folder: Path) -> dict:
    """The class settings: {"students": mode}, from the model folder (the teacher's last choice),
    else $CAPSVIZ_STUDENTS, else explore only."""
    mode = os.environ.get("CAPSVIZ_STUDENTS", DEFAULT_MODE).strip().lower()
    found = _read_json(Path(folder) / SETTINGS_FILE)
    if found.get("students") in MODES:
        mode = found["students"]
    return {"students": mode if mode in MODES else DEFAULT_MODE}


def set_student_mode(folder: Path, mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"students {mode!r}: choose from {', '.join(MODES)}")
    text = json.dumps({"students": mode})
    atomic_write(Path(folder) / SETTINGS_FILE, lambda tmp: Path(tmp).write_text(text))


def may_train(folder: Path, teacher: bool) -> bool:
    """Whether this person may train and upload data."""
    return teacher or settings(folder)["students"] == "train"


def _read_json(path: Path) -> dict:
    try:
        if path.stat().st_size > 16 << 20:
            return {}
        value = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def owners(folder: Path) -> dict[str, str]:
    """Model name (file stem) -> the id of the student who trained it. A model not listed (one
    that came with the app, one trained from the command line or by the teacher) is the teacher's."""
    found = _read_json(Path(folder) / OWNERS_FILE)
    return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str)}


def may_write(folder: Path, stem: str, who: str | None, teacher: bool) -> str | None:
    """Why `who` may not train into the model `stem` (a new name, or replacing their own model),
    or None when they may. The teacher may write any name."""
    if teacher:
        return None
    folder = Path(folder)
    owner = owners(folder).get(stem)
    exists = (folder / f"{stem}.safetensors").exists()
    if owner is None and not exists:
        return None
    if who is not None and owner == who:
        return None
    if owner:
        return t(
            "{name} is another student's model: only the person who trained it (or the teacher) can replace it; choose a new name.",
            name=stem,
        )
    return t("{name} is the teacher's model: only the person who trained it (or the teacher) can replace it; choose a new name.", name=stem)


def claim(folder: Path, stem: str, who: str | None, teacher: bool) -> None:
    """Record `who` as the owner of the model `stem` (before their run writes it), after checking
    `may_write` again under the owners file's lock, so that two students cannot both take a name.
    The teacher's models are recorded as nobody's (the teacher's). Raises PermissionError."""
    folder = Path(folder)
    with exclusive(folder / f".{OWNERS_FILE}.lock"):
        why = may_write(folder, stem, who, teacher)
        if why:
            raise PermissionError(why)
        table = owners(folder)
        if teacher or who is None:
            if table.pop(stem, None) is None:
                return
        else:
            if table.get(stem) == who:
                return
            if len(table) >= MAX_OWNERS:
                raise PermissionError(t("This server's model folder has too many models; ask the teacher to clear some."))
            table[stem] = who
        text = json.dumps(table, sort_keys=True)
        atomic_write(folder / OWNERS_FILE, lambda tmp: Path(tmp).write_text(text))


SEATS_DEFAULT = 2  # page runs at a time in one app process; $CAPSVIZ_SEATS changes it (BENCH.md)


class Seats:
    """Students' page runs take seats: at most `n` run at once in this app process, the rest wait
    in turn. One interpreter lock runs the process's Python, so a hundred runs at once finish no
    sooner than two at a time, each of them later, and the lock handed round between them costs
    CPU of its own; a run that waits for a seat holds nothing. The teacher never waits.
    Fragment reruns (a slider, a tour step, a question's choice) take no seat: they are what a
    student waits on most, and cost a few milliseconds. `away()` gives the seat back around long
    work inside a run (a sweep over hundreds of images) and takes one again after it."""

    def __init__(self, n: int):
        if n < 1:
            raise ValueError(f"seats must be at least 1, not {n}")
        self.n = n
        self._free = threading.Semaphore(n)
        self._held = threading.local()

    @classmethod
    def from_env(cls) -> Seats:
        text = os.environ.get("CAPSVIZ_SEATS", "").strip()
        try:
            n = int(text) if text else SEATS_DEFAULT
        except ValueError:
            n = SEATS_DEFAULT
        return cls(max(n, 1))

    @contextlib.contextmanager
    def take(self, teacher: bool = False):
        if teacher or getattr(self._held, "seat", False):  # the teacher, or a run already seated
            yield
            return
        self._free.acquire()
        self._held.seat = True
        try:
            yield
        finally:
            self._held.seat = False
            self._free.release()

    @contextlib.contextmanager
    def away(self):
        """Give this run's seat back while the block runs (nothing when it holds none)."""
        if not getattr(self._held, "seat", False):
            yield
            return
        self._held.seat = False
        self._free.release()
        try:
            yield
        finally:
            self._free.acquire()
            self._held.seat = True


class Turns:
    """A student's tabs take turns: one page run of theirs at a time in this app process, so
    three tabs (or a script opening ten sessions with one cookie) weigh on the class as one
    student does. The teacher's runs never wait. `take(who)` is a context manager; `busy(who)`
    says whether a run of theirs is under way (the page says why it waits)."""

    def __init__(self, limit: int = 100_000):
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._limit = limit  # ids kept; beyond, idle ones are forgotten first

    def _lock(self, who: str) -> threading.Lock:
        with self._guard:
            if who not in self._locks and len(self._locks) >= self._limit:
                for k in [k for k, v in self._locks.items() if not v.locked()][: self._limit // 2]:
                    del self._locks[k]
            return self._locks.setdefault(who, threading.Lock())

    def busy(self, who: str) -> bool:
        return self._lock(who).locked()

    @contextlib.contextmanager
    def take(self, who: str, teacher: bool = False):
        if teacher:
            yield
            return
        lock = self._lock(who)
        lock.acquire()
        try:
            yield
        finally:
            lock.release()
