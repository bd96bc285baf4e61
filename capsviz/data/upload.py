"""A zip of a folder of class folders, uploaded on the Train page, read safely and summed up.

The zip comes from a browser, so it is treated as hostile: its size, its number of files (read
from the end-of-archive record before any entry is parsed) and its total decompressed size (the
headers' sum) are bounded before anything is decompressed, and every byte is counted again while
reading, so a header that lies cannot expand past the limits. No member may name a path outside
the folder (absolute, `..`, a drive, a symbolic link): such a zip is refused whole. Only files
that decode as pictures are written, under names capsviz makes; anything else is skipped and
counted. The folder is then read as `folder:PATH` (capsviz.data.user), exactly as the CLI reads it.
The zip's file name, cleaned to printable text, is kept beside the folder (`<digest>.name`) as the
name the pages show for the dataset; it is only ever displayed, never used as a path.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import stat
import struct
import zipfile
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from capsviz.config import DATASETS
from capsviz.data.user import IMAGE_SUFFIXES, MAX_PICTURE_PIXELS, UserData, load_user
from capsviz.errors import CapsvizError

MiB = 2**20
READ_CHUNK = MiB
MAX_NAME = 60  # characters of an upload's display name: a sidebar entry, not a paragraph
NAME_SUFFIX = ".name"  # the display name's file beside the unpacked folder: <digest>.name
MARKUP = frozenset("[]<>`*$|")  # characters of a display name that the pages' Markdown would act on


@dataclass(frozen=True)
class ZipLimits:
    """What an upload may be: the zip's bytes, its files, their decompressed bytes in all and each."""

    compressed: int = 200 * MiB
    files: int = 20_000
    total: int = 1024 * MiB
    member: int = 50 * MiB


@dataclass(frozen=True)
class UploadSummary:
    """What the Train page shows before Start, and the dataset it trains on (`spec`)."""

    spec: str  # folder:PATH of the extracted pictures
    classes: tuple[str, ...]
    train_counts: dict[str, int]
    test_counts: dict[str, int]
    skipped: dict[str, int]  # reason -> files, from the zip and from decoding
    size: int
    channels: int
    notes: tuple[str, ...]
    samples: list = field(default_factory=list)  # (class name, (S, S) or (S, S, 3) uint8) a few per class


def uploads_dir() -> Path:
    """Where uploaded zips are unpacked, one folder per zip's digest: the user folder's uploads/."""
    from capsviz.paths import user_dir

    return user_dir() / "uploads"


def entry_count(data: bytes) -> int:
    """The number of entries the end-of-central-directory record declares (zip64's when it says
    0xFFFF), read without parsing a single entry: a zip of 100,000 files is refused at once."""
    end = data.rfind(b"PK\x05\x06", max(0, len(data) - 65_557))
    if end < 0 or end + 22 > len(data):
        raise CapsvizError("not a zip file (no end-of-archive record); zip a folder of class folders and upload that")
    count = struct.unpack_from("<H", data, end + 10)[0]
    locator = end - 20
    if count == 0xFFFF and locator >= 0 and data[locator : locator + 4] == b"PK\x06\x07":
        offset = struct.unpack_from("<Q", data, locator + 8)[0]
        if offset + 56 <= len(data) and data[offset : offset + 4] == b"PK\x06\x06":
            count = struct.unpack_from("<Q", data, offset + 32)[0]
    return count


def _parts(name: str) -> list[str]:
    """A member's path, split on either slash; refused when it could land outside the folder."""
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or (len(parts[0]) == 2 and parts[0][1] == ":") or ".." in parts:
        raise CapsvizError(f"the zip's member {name[:200]!r} points outside its folder; refused (zip the folder itself)")
    return [p for p in parts if p not in ("", ".")]


def _check(zf: zipfile.ZipFile, limits: ZipLimits) -> list[tuple[zipfile.ZipInfo, list[str]]]:
    """Every file entry with its path parts, after the limits the headers can be held to."""
    infos = zf.infolist()
    if len(infos) > limits.files:
        raise CapsvizError(f"the zip holds {len(infos):,} entries; at most {limits.files:,}")
    total = sum(i.file_size for i in infos)
    if total > limits.total:
        raise CapsvizError(f"the zip expands to {total / MiB:,.0f} MiB; at most {limits.total / MiB:,.0f} MiB (use smaller pictures)")
    files = []
    for info in infos:
        parts = _parts(info.filename)
        if stat.S_ISLNK(info.external_attr >> 16):
            raise CapsvizError(f"the zip's member {info.filename[:200]!r} is a symbolic link; refused")
        if not info.is_dir() and parts:
            files.append((info, parts))
    return files


def _strip_top(files: list) -> list:
    """Paths below the one folder every file is in (a zipped folder holds itself), unless that
    folder is train/ or test/."""
    while files and all(len(p) > 1 for _, p in files) and len({p[0] for _, p in files}) == 1 and files[0][1][0] not in ("train", "test"):
        files = [(i, p[1:]) for i, p in files]
    return files


def _read(zf: zipfile.ZipFile, info: zipfile.ZipInfo, limits: ZipLimits, budget: list[int]) -> bytes:
    """A member's bytes, counted as they come: beyond its declared size, the member limit or what
    is left of the total, the zip is refused (a header that lies, a zip bomb)."""
    cap = min(info.file_size, limits.member)
    if info.file_size > limits.member:
        raise CapsvizError(
            f"{info.filename[:200]!r} expands to {info.file_size / MiB:,.0f} MiB; at most {limits.member / MiB:,.0f} MiB a file"
        )
    chunks, got = [], 0
    try:
        with zf.open(info) as f:
            while chunk := f.read(READ_CHUNK):
                got += len(chunk)
                if got > cap or got > budget[0]:
                    raise CapsvizError(
                        f"{info.filename[:200]!r} expands beyond what its header declares; refused (a damaged or crafted zip)"
                    )
                chunks.append(chunk)
    except (zipfile.BadZipFile, EOFError, OSError, NotImplementedError, RuntimeError) as e:
        if "encrypted" in str(e) or "password" in str(e):
            raise CapsvizError("the zip is encrypted; upload one without a password") from None
        raise CapsvizError(
            f"{info.filename[:200]!r} does not match its header ({str(e)[:100]}); refused (a damaged or crafted zip)"
        ) from None
    budget[0] -= got
    content = b"".join(chunks)
    if zlib.crc32(content) != info.CRC:  # zipfile stops at the declared size: more data behind it shows here
        raise CapsvizError(f"{info.filename[:200]!r} does not match its header's checksum; refused (a damaged or crafted zip)")
    return content


def _is_picture(data: bytes) -> bool:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as im:
            if im.width * im.height > MAX_PICTURE_PIXELS:
                return False
            im.verify()  # the whole file's structure, without decoding the pixels
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError, struct.error):
        return False
    return True


def _safe_class(name: str) -> str:
    """A class folder's name as it will be written: printable characters only."""
    return "".join(ch for ch in name if ch.isprintable()).strip()[:100]


def clean_name(filename: str, fallback: str) -> str:
    """The name a user knows an upload by: its file name's last part without ".zip", printable
    characters only, none that Markdown would read as a link, code or formula, at most MAX_NAME of
    them; `fallback` when nothing usable is left. A built-in dataset's name gets " (upload)", so
    "mnist.zip" is never taken for MNIST. Every session's zoo shows it, so it is plain text."""
    base = str(filename).replace("\\", "/").rsplit("/", 1)[-1]
    if base.lower().endswith(".zip"):
        base = base[:-4]
    kept = "".join(ch if ch.isprintable() and ch not in MARKUP else " " for ch in base)
    name = " ".join(kept.split())[:MAX_NAME].strip()
    if not name.strip("."):
        return fallback
    return f"{name} (upload)" if name.lower() in DATASETS else name


def name_file(folder: Path) -> Path:
    """Where an unpacked upload's display name is kept: beside its folder, <digest>.name."""
    return folder.with_name(folder.name + NAME_SUFFIX)


def recorded_name(folder: Path) -> str | None:
    """The display name recorded for an unpacked upload, cleaned again on reading (the file is
    text on disk, trusted no more than the browser that sent it); None when there is none."""
    folder = Path(folder)
    if len(folder.name) != 16 or any(ch not in "0123456789abcdef" for ch in folder.name):
        return None  # only folders receive_zip made, named by digest, have a name beside them
    try:
        with name_file(folder).open("rb") as f:
            text = f.read(4 * MAX_NAME).decode("utf-8", errors="replace")
    except OSError:
        return None
    return clean_name(text, "") or None


def _record_name(folder: Path, filename: str) -> None:
    """Keep the first name a zip was uploaded under (a model trained on it keeps its dataset's
    name when the same zip comes again as another file); written whole or not at all."""
    target = name_file(folder)
    if target.is_file():
        return
    tmp = target.with_name(target.name + ".tmp")
    try:
        tmp.write_text(clean_name(filename, f"upload {folder.name[:8]}"), encoding="utf-8")
        os.replace(tmp, target)
    except OSError:  # a name is a nicety: the pages then show the folder's digest
        tmp.unlink(missing_ok=True)


def receive_zip(
    data: bytes, uploads: Path, limits: ZipLimits = ZipLimits(), resize: int | None = None, filename: str = ""
) -> UploadSummary:
    """Check and unpack an uploaded zip into `uploads`/<its digest>/ (the same zip again reuses
    it) and sum it up; `filename`, the zip's name in the browser, becomes the dataset's display
    name (`clean_name`). Raises CapsvizError for a zip refused whole; skips and counts the rest."""
    if len(data) > limits.compressed:
        raise CapsvizError(f"the zip is {len(data) / MiB:,.0f} MiB; at most {limits.compressed / MiB:,.0f} MiB can be uploaded")
    n = entry_count(data)
    if n > limits.files:
        raise CapsvizError(f"the zip holds {n:,} entries; at most {limits.files:,}")
    dest = Path(uploads) / hashlib.sha256(data).hexdigest()[:16]
    skipped: Counter = Counter()
    if not (dest / ".complete").is_file():
        skipped = _unpack(data, dest, limits)
    else:
        skipped.update(_read_skipped(dest))
    _record_name(dest, filename)
    return summarize(load_user(f"folder:{dest}", resize), skipped)


def _unpack(data: bytes, dest: Path, limits: ZipLimits) -> Counter:
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise CapsvizError(f"not a readable zip file ({e}); zip a folder of class folders and upload that") from None
    skipped: Counter = Counter()
    with zf:
        files = []
        for info, parts in _check(zf, limits):
            if any(p.startswith(".") or p == "__MACOSX" for p in parts):
                skipped["hidden"] += 1
            else:
                files.append((info, parts))
        files = _strip_top(files)
        work = dest.with_name(dest.name + ".part")
        shutil.rmtree(work, ignore_errors=True)
        budget = [limits.total]
        made: Counter = Counter()
        try:
            for info, parts in files:
                if parts[0] in ("train", "test") and len(parts) > 2:
                    split, cls = parts[0], _safe_class(parts[1])
                elif len(parts) > 1 and parts[0] not in ("train", "test"):
                    split, cls = "", _safe_class(parts[0])
                else:
                    skipped["not in a class folder"] += 1
                    continue
                suffix = Path(parts[-1]).suffix.lower()
                if suffix not in IMAGE_SUFFIXES or not cls or cls in (".", ".."):
                    skipped["not an image (PNG, JPEG, BMP)"] += 1
                    continue
                if info.flag_bits & 0x1:
                    raise CapsvizError("the zip is encrypted; upload one without a password")
                content = _read(zf, info, limits, budget)
                if not _is_picture(content):
                    skipped["unreadable"] += 1
                    continue
                folder = work / split / cls if split else work / cls
                folder.mkdir(parents=True, exist_ok=True)
                made[folder] += 1
                (folder / f"{made[folder]:06d}{suffix}").write_bytes(content)
            if not made:
                said = ", ".join(f"{n:,} {why}" for why, n in skipped.items())
                raise CapsvizError(f"the zip holds no readable PNG, JPEG or BMP pictures in class folders (skipped: {said or 'nothing'})")
            (work / ".skipped").write_text("\n".join(f"{n}\t{why}" for why, n in skipped.items()))
            (work / ".complete").touch()
            shutil.rmtree(dest, ignore_errors=True)
            work.rename(dest)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
    return skipped


def _read_skipped(dest: Path) -> Counter:
    counts: Counter = Counter()
    for line in (dest / ".skipped").read_text().splitlines() if (dest / ".skipped").is_file() else []:
        n, _, why = line.partition("\t")
        if n.isdigit():
            counts[why] += int(n)
    return counts


def summarize(data: UserData, skipped: Counter | None = None, per_class: int = 2) -> UploadSummary:
    """The page's summary of a dataset read: counts, skipped files, shape, a few pictures per class."""
    total = Counter(skipped or {})
    total.update(data.skipped)
    samples = []
    labels = data.train.labels
    for k, name in enumerate(data.classes):
        for i in (labels == k).nonzero().flatten()[:per_class].tolist():
            a = data.train.images[i].numpy()  # (C, S, S)
            samples.append((name, a[0] if a.shape[0] == 1 else np.ascontiguousarray(a.transpose(1, 2, 0))))
    notes = tuple(n for n in data.notes if not n.startswith("skipped "))
    return UploadSummary(
        data.spec, data.classes, data.counts("train"), data.counts("test"), dict(total), data.size, data.channels, notes, samples
    )
