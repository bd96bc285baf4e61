"""Who may do what on a served app: the one place the host's choices are read and kept.

- The **teacher** is whoever opens the app in a browser on the server's own machine, or enters
  the teacher key (`$CAPSVIZ_TEACHER_KEY`, else a key made once and kept in the model folder,
  printed in the server's log when the app starts; entered on the sidebar or with a link's
  `?teacher=KEY`, which the page then removes from the address).
- **Students** are everyone else. They explore (every page, their own pictures and drawings),
  and, when the teacher allows it, also train and upload within the class's bounds. Exploring
  only is the default (`$CAPSVIZ_STUDENTS`: explore | train); the teacher changes it on the
  sidebar for the whole class, every app process of the server included.
- Only the teacher clears the server's caches, replaces a model someone else trained (or one
  that came with the app or was copied into the folder), or changes the class settings.

A student is one browser, not one tab: `identity` keys them by a cookie the browser keeps
(nginx's `capsviz_replica` behind `capsviz app --replicas`, else Streamlit's XSRF cookie), so
a reload or a second tab is the same student, owning the same runs and models.

Nothing here imports Streamlit: the pages pass in what the request carried.
"""

from __future__ import annotations

import binascii
import contextlib
import hashlib
import hmac
import ipaddress
import json
import os
import secrets
import sys
import threading
from pathlib import Path

from capsviz.paths import atomic_write, exclusive

MODES = {
    "explore": "explore only: every page, their own pictures and drawings; no training or uploads of data",
    "train": "explore, and train models and upload data within the class's bounds",
}
DEFAULT_MODE = "explore"
KEY_FILE = ".capsviz-teacher-key"
SETTINGS_FILE = ".capsviz-class.json"
OWNERS_FILE = ".capsviz-owners.json"
REPLICA_COOKIE = "capsviz_replica"  # set by serve.py's nginx, one random key per browser
XSRF_COOKIE = "_streamlit_xsrf"  # Streamlit's own: its token stays the same for a browser
MAX_OWNERS = 100_000  # entries of the owners file kept; beyond, a damaged or hostile file is refused
_PROCESS_KEY = secrets.token_urlsafe(12)  # where the model folder cannot keep one
_printed = False


def teacher_key(folder: Path) -> str:
    """$CAPSVIZ_TEACHER_KEY; else the key kept in the model folder (made there once, readable by
    the server's user only, so every app process of one server and every restart share it); else,
    where the folder cannot be written, one for this process."""
    if os.environ.get("CAPSVIZ_TEACHER_KEY"):
        return os.environ["CAPSVIZ_TEACHER_KEY"].strip()
    path = Path(folder) / KEY_FILE
    try:
        return _read_key(path)
    except (OSError, ValueError):
        pass
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first
        try:
            return _read_key(path)
        except (OSError, ValueError):
            return _PROCESS_KEY
    except OSError:
        return _PROCESS_KEY
    with os.fdopen(fd, "w") as f:
        f.write(_PROCESS_KEY)
    return _PROCESS_KEY


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
            f"capsviz: teacher key {teacher_key(folder)} (enter it in the sidebar's Class panel, or open the app with ?teacher=<key>)",
            file=sys.stderr,
            flush=True,
        )


def key_matches(folder: Path, given: str | None) -> bool:
    return bool(given) and hmac.compare_digest(str(given).strip().encode(), teacher_key(folder).encode())


def is_local(peer: str | None, forwarded: list[str]) -> bool:
    """Whether the browser runs on the server's own machine. `peer`: the address the connection
    came from (None or a loopback address when local); `forwarded`: the X-Forwarded-For values. A
    proxy on this machine (nginx of --replicas) appends the browser's address as the last value:
    that one decides. A connection from elsewhere is never local, whatever it claims."""
    if not _loopback(peer):
        return False
    last = ",".join(forwarded).split(",")[-1].strip() if forwarded else None
    return _loopback(last)


def _loopback(address: str | None) -> bool:
    if address in (None, "", "localhost"):
        return True
    try:
        return ipaddress.ip_address(address.split("%")[0]).is_loopback
    except ValueError:
        return False


def identity(cookies) -> str | None:
    """A student's id from the cookies their browser sent (a mapping of name to value): 16 hex
    digits of a digest, never the cookie itself; None when the browser sent neither cookie."""
    replica, xsrf = cookies.get(REPLICA_COOKIE), cookies.get(XSRF_COOKIE)
    value = (replica if isinstance(replica, str) else None) or _xsrf_token(xsrf if isinstance(xsrf, str) else None)
    if not value:
        return None
    return hashlib.sha256(f"capsviz-student:{value}".encode()).hexdigest()[:16]


def _xsrf_token(cookie: str | None) -> str | None:
    """The token inside Streamlit's XSRF cookie ("2|mask|masked token|time"): the mask changes
    whenever the cookie is sent anew, the token stays the browser's."""
    if not cookie:
        return None
    parts = cookie.split("|")
    if len(parts) == 4 and parts[0] == "2":
        try:
            mask, masked = binascii.unhexlify(parts[1]), binascii.unhexlify(parts[2])
        except (binascii.Error, ValueError):
            return None
        if not mask:
            return None
        return bytes(b ^ mask[i % len(mask)] for i, b in enumerate(masked)).hex()
    return cookie


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
    whose = "another student's" if owner else "the teacher's"
    return f"{stem} is {whose} model: only the person who trained it (or the teacher) can replace it; choose a new name."


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
                raise PermissionError("this server's model folder has too many models; ask the teacher to clear some")
            table[stem] = who
        text = json.dumps(table, sort_keys=True)
        atomic_write(folder / OWNERS_FILE, lambda tmp: Path(tmp).write_text(text))


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
