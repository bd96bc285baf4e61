"""Where dataset files come from: the places looked, in order, and the public mirrors.

Looked for, in order: an explicit data_dir, $CAPSVIZ_DATA_DIR, ./data, the user cache
(capsviz.paths.cache_dir), and each dataset's system folders (Debian's
dataset-fashion-mnist). In each place both <place>/<dataset>/ and <place>/ itself are tried,
with or without .gz. Downloads go to the user cache, verified and written atomically.
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from capsviz.data.idx import decode_bytes, read_bytes
from capsviz.errors import CapsvizError
from capsviz.i18n import N_, t
from capsviz.paths import atomic_write, cache_dir

Progress = Callable[[str, int, int], None]  # (file name, bytes so far, total bytes or 0)


@dataclass(frozen=True)
class Source:
    """One downloadable dataset: its files with the MD5 of their decompressed content.

    Where no checksums are published (smallNORB), the MD5 is None and `check` parses the
    decompressed content instead, raising CapsvizError when it is not what it should be."""

    name: str
    files: dict[str, str | None]  # canonical file name (without .gz) -> md5 of decompressed bytes
    mirrors: tuple[str, ...]
    system_dirs: tuple[str, ...] = ()
    remote_suffix: str = ".gz"
    note: str = ""
    check: Callable[[bytes, str], object] | None = None


IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")

SOURCES = {
    "mnist": Source(
        name="mnist",
        files=dict(
            zip(
                IDX_FILES,
                (
                    "6bbc9ace898e44ae57da46a324031adb",
                    "a25bea736e30d166cdddb491f175f624",
                    "2646ac647ad5339dbf082846283269ea",
                    "27ae3e4e09519cfbb04c329615203637",
                ),
                strict=True,
            )
        ),
        mirrors=(
            "https://ossci-datasets.s3.amazonaws.com/mnist/",
            "https://storage.googleapis.com/cvdf-datasets/mnist/",
            "http://yann.lecun.com/exdb/mnist/",
        ),
    ),
    "fashion-mnist": Source(
        name="fashion-mnist",
        files=dict(
            zip(
                IDX_FILES,
                (
                    "f4a8712d7a061bf5bd6d2ca38dc4d50a",
                    "9018921c3c673c538a1fc5bad174d6f9",
                    "8181f5470baa50b63fa0f6fddb340f0a",
                    "15d484375f8d13e6eb1aabb0c3f46965",
                ),
                strict=True,
            )
        ),
        mirrors=(
            "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
            "https://github.com/zalandoresearch/fashion-mnist/raw/master/data/fashion/",
        ),
        system_dirs=("/usr/share/datasets/fashion-mnist",),
        note=N_("Debian users: apt install dataset-fashion-mnist"),
    ),
}


def search_places(source: Source, data_dir: str | os.PathLike | None = None) -> list[Path]:
    """Every folder looked in, in order (a folder may appear as <place>/<name> and <place>)."""
    if data_dir:  # a folder asked for by name is the only place looked in, never silently another
        return [Path(data_dir) / source.name, Path(data_dir)]
    roots: list[Path] = []
    if os.environ.get("CAPSVIZ_DATA_DIR"):
        roots.append(Path(os.environ["CAPSVIZ_DATA_DIR"]))
    roots += [Path("data"), cache_dir()]
    places = []
    for r in roots:
        places += [r / source.name, r]
    places += [Path(d) for d in source.system_dirs]
    return list(dict.fromkeys(places))


def find_file(place: Path, stem: str) -> Path | None:
    for name in (stem + ".gz", stem):
        p = place / name
        if p.is_file():
            return p
    return None


def locate(source: Source, data_dir=None) -> tuple[Path | None, list[Path]]:
    """The first folder holding all of the dataset's files, and every folder looked in."""
    places = search_places(source, data_dir)
    for place in places:
        if all(find_file(place, stem) for stem in source.files):
            return place, places
    return None, places


def missing_message(source: Source, places: list[Path]) -> str:
    """Where a dataset was looked for and how to get it, in the reader's language."""
    said = t(
        "{dataset} not found. Looked in:\n{places}\nFix: run `python -m capsviz data --download` (needs internet), or put the "
        "four IDX files ({files}) in one of those folders, or point CAPSVIZ_DATA_DIR at the folder that holds them.",
        dataset=source.name,
        places="\n".join(f"  - {p}" for p in places),
        files=", ".join(s + ".gz" for s in source.files),
    )
    return f"{said}\n{t(source.note)}" if source.note else said


def md5_of(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def verify(source: Source, place: Path) -> dict[str, str]:
    """'ok', 'changed' (content differs from the published files) or 'missing' per file."""
    status = {}
    for stem, md5 in source.files.items():
        p = find_file(place, stem)
        if p is None:
            status[stem] = "missing"
            continue
        try:
            status[stem] = "ok" if md5_of(read_bytes(p)) == md5 else "changed"
        except CapsvizError:
            status[stem] = "corrupt"
    return status


def download(source: Source, dest: Path | None = None, progress: Progress | None = None, timeout: float = 30) -> Path:
    """Fetch every missing file of `source` into dest (default: the user cache), trying each mirror.

    Each file is checked against its known MD5 (or the source's `check`) and moved into place only
    when complete and correct, so an interrupted or failed download never leaves a half-written file."""
    dest = Path(dest) if dest else cache_dir() / source.name
    dest.mkdir(parents=True, exist_ok=True)
    for stem, md5 in source.files.items():
        if find_file(dest, stem):
            continue
        errors = []
        for mirror in source.mirrors:
            url = mirror + stem + source.remote_suffix
            try:
                raw = _fetch(url, progress, stem, timeout)
                content = decode_bytes(raw, url)
                if md5 is not None and (got := md5_of(content)) != md5:
                    raise CapsvizError(t("checksum mismatch (got {got}, expected {want})", got=got, want=md5))
                if source.check is not None:
                    source.check(content, url)
            except (OSError, urllib.error.URLError, CapsvizError) as e:
                errors.append(f"{url}: {e}")
                continue
            atomic_write(dest / (stem + source.remote_suffix), lambda tmp, raw=raw: Path(tmp).write_bytes(raw))
            break
        else:
            raise CapsvizError(t("could not download {file}:\n{errors}", file=stem, errors="\n".join(f"  - {e}" for e in errors)))
    return dest


def _fetch(url: str, progress: Progress | None, stem: str, timeout: float) -> bytes:
    req = urllib.request.Request(url, headers={"User-Agent": "capsviz"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        total = int(r.headers.get("Content-Length") or 0)
        chunks, got = [], 0
        while True:
            chunk = r.read(1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
            if progress:
                progress(stem, got, total)
    return b"".join(chunks)
