"""Where the app, the shipped models and the user's models are, in a checkout and when installed.

A checkout keeps the card's layout: app.py, pages/ and checkpoints/ beside capsviz/. An installed
package carries the same files inside itself, under capsviz/_app/ (pyproject.toml maps them
there), since site-packages has no room for top-level folders named pages/ or checkpoints/.

The app shows one folder of models (pages/common.checkpoint_dir reads $CAPSVIZ_CHECKPOINTS):
in a checkout checkpoints/ as before; installed, the user folder, into which `capsviz app`
copies the shipped models the first time, so trained models sit beside them and the installed
package is never written to.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
CHECKOUT = PACKAGE.parent
SEEDED = ".shipped"  # in the user folder: the shipped models already copied once


def app_dir() -> Path:
    """The folder holding app.py, pages/ and checkpoints/."""
    return PACKAGE / "_app" if (PACKAGE / "_app").is_dir() else CHECKOUT  # only an install has _app/


def is_checkout() -> bool:
    return app_dir() == CHECKOUT


def shipped_checkpoints() -> Path:
    return app_dir() / "checkpoints"


def user_dir() -> Path:
    """$CAPSVIZ_HOME, else the platform's folder for a user's application data."""
    if os.environ.get("CAPSVIZ_HOME"):
        return Path(os.environ["CAPSVIZ_HOME"])
    home = Path.home()
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local") / "capsviz"
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "capsviz"
    return Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share") / "capsviz"


def cache_dir() -> Path:
    """Downloads and built kernels: $CAPSVIZ_CACHE, else $XDG_CACHE_HOME/capsviz, else ~/.cache/capsviz."""
    if os.environ.get("CAPSVIZ_CACHE"):
        return Path(os.environ["CAPSVIZ_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "capsviz"


def partial_files(path: Path) -> list[Path]:
    """What an interrupted `atomic_write` of `path` may have left beside it: its private folder,
    with whatever the writer had put there (the serialiser's own temporary file included)."""
    path = Path(path)
    return list(path.parent.glob(f".{path.name}.*.part"))


def remove_partial(part: Path) -> None:
    """Remove one of `partial_files` (a folder, or a file left by an older capsviz)."""
    if part.is_dir() and not part.is_symlink():
        shutil.rmtree(part, ignore_errors=True)
    else:
        part.unlink(missing_ok=True)


def atomic_write(path: Path, write: Callable[[str], object]) -> None:
    """write(tmp_path) then rename over `path`: a crash never leaves a half-written file, and a
    reader sees the old file or the new one. `tmp_path` lies in a private folder beside `path` (a
    rename across filesystems is not atomic), so any temporary file the writer makes next to it
    (safetensors writes its own, then renames) is in that folder too, and one removal of the
    folder clears everything a killed write left (`partial_files`). The file is synced before
    the rename, so a power cut keeps old or new too."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part"))
    tmp = folder / path.name
    try:
        write(str(tmp))
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # a temporary file's 0600 would hide the model from other users
        os.replace(tmp, path)
    finally:
        remove_partial(folder)


def lock_file(fd: int, wait: bool) -> None:
    """An exclusive lock on the open file `fd`, kept until it is closed (the kernel drops it when
    the process dies). `wait`: until another holder lets go; else BlockingIOError at once. fcntl is
    Unix only and msvcrt Windows only: each is imported where it exists."""
    if sys.platform == "win32":
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_LOCK if wait else msvcrt.LK_NBLCK, 1)  # the first byte stands for the file
        except PermissionError as e:  # Windows reports a held lock as EACCES (LK_LOCK gives up after about 10 s)
            raise BlockingIOError(e.errno, e.strerror) from None
    else:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)


@contextmanager
def exclusive(lock: Path):
    """Hold an exclusive lock on the file `lock` (made if missing) until the block ends, waiting
    for any other process that holds it."""
    lock = Path(lock)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        lock_file(fd, wait=True)
        yield
    finally:
        os.close(fd)


def checkpoint_dir() -> Path:
    """The models the app and `capsviz list` show: $CAPSVIZ_CHECKPOINTS, else checkpoints/ in a
    checkout, else <user folder>/checkpoints."""
    if os.environ.get("CAPSVIZ_CHECKPOINTS"):
        return Path(os.environ["CAPSVIZ_CHECKPOINTS"])
    return shipped_checkpoints() if is_checkout() else user_dir() / "checkpoints"


def model_folder() -> Path:
    """`checkpoint_dir()`, with the shipped models copied in first where it is the user folder of
    an installed capsviz, so every command finds them right after `pip install`."""
    folder = checkpoint_dir()
    if not os.environ.get("CAPSVIZ_CHECKPOINTS") and not is_checkout():
        seed_user_checkpoints(folder)
    return folder


def seed_user_checkpoints(folder: Path) -> list[str]:
    """Copy the shipped models into `folder` once each (a model the user deleted stays deleted);
    returns the names copied. Nothing to do where `folder` is the shipped folder itself."""
    shipped = shipped_checkpoints()
    if folder.resolve() == shipped.resolve():
        return []
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / SEEDED
    done = set(marker.read_text().split()) if marker.is_file() else set()
    copied = []
    for src in sorted(shipped.glob("*.safetensors")):
        if src.name in done or (folder / src.name).exists():
            continue
        atomic_write(folder / src.name, lambda tmp, src=src: shutil.copyfile(src, tmp))  # never half a model in the zoo
        copied.append(src.name)
    marker.write_text("\n".join(sorted(done | {p.name for p in shipped.glob("*.safetensors")})) + "\n")
    return copied
