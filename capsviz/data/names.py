"""What an uploaded dataset is called: the name its zip was uploaded under, kept beside its
unpacked folder (capsviz.data.upload writes it), cleaned again whenever it is read, and shown in
place of the folder's path on the server.

Both the upload (which records the name) and the dataset readers (capsviz.data.user, which name a
dataset and hide an upload's path in their refusals) use it, so it sits below both.
"""

from __future__ import annotations

import re
from pathlib import Path

from capsviz.config import DATASETS

MAX_DISPLAY_NAME = 60  # characters of an upload's display name: a sidebar entry, not a paragraph
NAME_SUFFIX = ".name"  # the display name's file beside the unpacked folder: <digest>.name
MARKUP = frozenset("[]<>`*$|")  # characters of a display name that the pages' Markdown would act on


def clean_name(filename: str, fallback: str) -> str:
    """The name a user knows an upload by: its file name's last part without ".zip", printable
    characters only, none that Markdown would read as a link, code or formula, at most MAX_DISPLAY_NAME of
    them; `fallback` when nothing usable is left. A built-in dataset's name gets " (upload)", so
    "mnist.zip" is never taken for MNIST. Every session's zoo shows it, so it is plain text."""
    base = str(filename).replace("\\", "/").rsplit("/", 1)[-1]
    if base.lower().endswith(".zip"):
        base = base[:-4]
    kept = "".join(ch if ch.isprintable() and ch not in MARKUP else " " for ch in base)
    name = " ".join(kept.split())[:MAX_DISPLAY_NAME].strip()
    if not name.strip("."):
        return fallback
    return f"{name} (upload)" if name.lower() in DATASETS else name


def name_file(folder: Path) -> Path:
    """Where an unpacked upload's display name is kept: beside its folder, <digest>.name."""
    return folder.with_name(folder.name + NAME_SUFFIX)


def is_digest(name: str) -> bool:
    return len(name) == 16 and all(ch in "0123456789abcdef" for ch in name)


def recorded_name(folder: Path) -> str | None:
    """The display name recorded for an unpacked upload, cleaned again on reading (the file is
    text on disk, trusted no more than the browser that sent it); None when there is none."""
    folder = Path(folder)
    if not is_digest(folder.name):
        return None  # only folders receive_zip made, named by digest, have a name beside them
    try:
        with name_file(folder).open("rb") as f:
            text = f.read(4 * MAX_DISPLAY_NAME).decode("utf-8", errors="replace")
    except OSError:
        return None
    return clean_name(text, "") or None


# an unpacked upload's path (its folder is named by the zip's digest), and any file below it
UPLOAD_PATH = re.compile(r"(?:folder:)?((?:[A-Za-z]:)?[/\\][^\s'\"]*?[/\\]([0-9a-f]{16}))(?![0-9A-Za-z_.-])([/\\][^\s'\"]*)?")


def hide_paths(text: str) -> str:
    """`text` with every upload's server path (folder:/.../uploads/<digest>, or any file below
    it) replaced by the upload's display name: what an error message from reading an upload may
    be shown as in a browser."""

    def named(m: re.Match) -> str:
        return recorded_name(Path(m.group(1))) or f"upload {m.group(2)[:8]}"

    return UPLOAD_PATH.sub(named, text)
