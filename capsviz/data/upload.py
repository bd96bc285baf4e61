"""A zip of a folder of class folders, uploaded on the Train page, read safely and summed up.

The zip comes from a browser, so it is treated as hostile: its size, its number of files (read
from the end-of-archive record and counted again in the central directory before any entry is
parsed) and its total decompressed size (the headers' sum) are bounded before anything is
decompressed, and every byte is counted again while reading, so a header that lies cannot expand
past the limits. No member may name a path outside the folder (absolute, `..`, a drive, a symbolic
link): such a zip is refused whole. Each picture's width and height are read from its header
before it is decoded, and bounded each and in all, so decoding time is bounded too. A picture is
stored re-encoded as PNG, at most MAX_SIZE on its shorter side, without what else its file held
(a 1 KB picture with 1 MB of ancillary chunks takes about 1 KB); anything else is skipped and
counted. The folder is then read as `folder:PATH` (capsviz.data.user), exactly as the CLI reads it.

On a class server uploads are bounded on disk per student (`owner`) and in all: when a new upload
would pass either quota, the least recently used uploads go first: a student's own for their
quota; for the server's, their own and then another student's only when it has not been used
for `ZipLimits.others_idle_s` (an hour: a lesson), so that one machine making new identities
cannot push a classmate's upload out during the lesson. One that cannot fit even then is refused. The same zip sent by several students at once is unpacked
once: under a lock per zip, into a private folder renamed into place only when complete; a folder
left half-written by a crash is removed by the next upload.

The zip's file name, cleaned to printable text, is kept beside the folder (`<digest>.name`,
capsviz.data.names) as the name the pages show for the dataset; it is only ever displayed, never used as a path.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import stat
import struct
import tempfile
import threading
import time
import zipfile
import zlib
from collections import Counter, OrderedDict
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from capsviz.config import MAX_SIZE
from capsviz.data.names import clean_name, is_digest, name_file, recorded_name
from capsviz.data.user import (
    GREY_MODES,
    IMAGE_SUFFIXES,
    NOT_IMAGE,
    NOT_IN_CLASS,
    UNREADABLE,
    SkippedNote,
    UserData,
    load_user,
    reason_words,
    skipped_words,
    too_large,
)
from capsviz.errors import CapsvizError
from capsviz.i18n import N_, language, said, t
from capsviz.paths import exclusive, lock_file

MiB = 2**20
READ_CHUNK = MiB
STATE_DIR = ".state"  # uploads/.state/: the locks, and who uploaded each zip (<digest>.owners, its mtime the last use)
PART = ".part-"  # uploads/.part-<digest>-XXXX/: a zip being unpacked
CENTRAL = b"PK\x01\x02"  # a central directory entry's signature
LOCAL_OWNER = "local"  # the owner of uploads where no student identity is given (the CLI, one user on localhost)
HIDDEN_MEMBER = N_("hidden")  # why a member was skipped: a dot file, a folder starting with a dot or macOS's __MACOSX


@dataclass(frozen=True)
class ZipLimits:
    """What an upload may be: the zip's bytes, its files, their decompressed bytes in all and each,
    the pictures' pixels (width x height, from their headers) each and in all; and what all the
    uploads of one student (`student_bytes`) and of everyone (`server_bytes`) may take on disk, as
    stored. The defaults suit a class of 30 on a laptop: a student's 200 MiB hold about 50,000
    MNIST-sized pictures or 2,000 photos at 512 pixels; 2 GiB in all."""

    compressed: int = 50 * MiB  # as Streamlit's server.maxUploadSize in .streamlit/config.toml
    files: int = 20_000
    total: int = 512 * MiB
    member: int = 32 * MiB
    picture_pixels: int = 24_000_000  # a 24-megapixel photo; larger ones are skipped undecoded
    pixels: int = 256_000_000  # every picture of the zip together: about 2 s of decoding
    student_bytes: int = 200 * MiB
    server_bytes: int = 2048 * MiB
    others_idle_s: float = 3600.0  # another student's upload is removed for room only when unused this long

    @classmethod
    def from_env(cls) -> ZipLimits:
        """The defaults, with the host's quotas from $CAPSVIZ_UPLOAD_MB_PER_STUDENT and
        $CAPSVIZ_UPLOAD_MB_TOTAL (MiB) where set."""
        quotas = {}
        for name, field_ in (("CAPSVIZ_UPLOAD_MB_PER_STUDENT", "student_bytes"), ("CAPSVIZ_UPLOAD_MB_TOTAL", "server_bytes")):
            text = os.environ.get(name, "").strip()
            if text:
                if not text.isdigit() or int(text) < 1:
                    raise CapsvizError(t("${name} must be a whole number of MiB, at least 1; found {found}", name=name, found=repr(text)))
                quotas[field_] = int(text) * MiB
        return cls(**quotas)


class QuotaError(CapsvizError):
    """An upload that the quotas leave no room for (the zip itself may be fine)."""


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


def mib(n: int) -> str:
    return f"{n / MiB:,.0f} MiB"  # a unit, the same in every language


def _directory(data: bytes) -> tuple[int, int, int]:
    """(entries declared, central directory's offset, its size) from the end records."""
    end = data.rfind(b"PK\x05\x06", max(0, len(data) - 65_557))
    if end < 0 or end + 22 > len(data):
        raise CapsvizError(t("not a zip file (no end-of-archive record); zip a folder of class folders and upload that"))
    count, size, offset = struct.unpack_from("<HLL", data, end + 10)
    locator = end - 20
    if 0xFFFF in (count,) or 0xFFFFFFFF in (size, offset):
        if locator >= 0 and data[locator : locator + 4] == b"PK\x06\x07":
            at = struct.unpack_from("<Q", data, locator + 8)[0]
            if at + 56 <= len(data) and data[at : at + 4] == b"PK\x06\x06":
                count, size, offset = struct.unpack_from("<QQQ", data, at + 32)
    return count, offset, size


def check_directory(data: bytes, limits: ZipLimits) -> None:
    """Refuse, before any entry is parsed, a zip that declares more entries than `limits.files`
    or whose central directory holds more entries than its end record declares (a lie that
    would have Python's zipfile parse every one of them first). The entries are counted by their
    signature, a scan of the directory's bytes: milliseconds for a 100,000-entry one."""
    declared, _, size = _directory(data)
    if declared > limits.files:
        raise CapsvizError(t("the zip holds {n} entries; at most {most}", n=f"{declared:,}", most=f"{limits.files:,}"))
    # what zipfile parses: `size` bytes before the end records (zip64's 76 bytes of them included)
    end = data.rfind(b"PK\x05\x06", max(0, len(data) - 65_557))
    found = data.count(CENTRAL, max(0, end - size - 76), end)
    if found > limits.files:
        raise CapsvizError(t("the zip holds {n} entries; at most {most}", n=f"{found:,}", most=f"{limits.files:,}"))
    if found > declared:
        raise CapsvizError(
            t(
                "the zip's end record declares {declared} entries, its directory holds {found}; refused (a damaged or crafted zip)",
                declared=f"{declared:,}",
                found=f"{found:,}",
            )
        )


def _parts(name: str) -> list[str]:
    """A member's path, split on either slash; refused when it could land outside the folder."""
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or (len(parts[0]) == 2 and parts[0][1] == ":") or ".." in parts:
        raise CapsvizError(t("the zip's member {name} points outside its folder; refused (zip the folder itself)", name=repr(name[:200])))
    return [p for p in parts if p not in ("", ".")]


def _check(zf: zipfile.ZipFile, limits: ZipLimits) -> list[tuple[zipfile.ZipInfo, list[str]]]:
    """Every file entry with its path parts, after the limits the headers can be held to."""
    infos = zf.infolist()
    if len(infos) > limits.files:
        raise CapsvizError(t("the zip holds {n} entries; at most {most}", n=f"{len(infos):,}", most=f"{limits.files:,}"))
    total = sum(i.file_size for i in infos)
    if total > limits.total:
        raise CapsvizError(t("the zip expands to {size}; at most {most} (use smaller pictures)", size=mib(total), most=mib(limits.total)))
    files = []
    for info in infos:
        parts = _parts(info.filename)
        if stat.S_ISLNK(info.external_attr >> 16):
            raise CapsvizError(t("the zip's member {name} is a symbolic link; refused", name=repr(info.filename[:200])))
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
    name = repr(info.filename[:200])
    if info.file_size > limits.member:
        raise CapsvizError(
            t("{name} expands to {size}; at most {most} a file", name=name, size=mib(info.file_size), most=mib(limits.member))
        )
    chunks, got = [], 0
    try:
        with zf.open(info) as f:
            while chunk := f.read(READ_CHUNK):
                got += len(chunk)
                if got > cap or got > budget[0]:
                    raise CapsvizError(t("{name} expands beyond what its header declares; refused (a damaged or crafted zip)", name=name))
                chunks.append(chunk)
    except (zipfile.BadZipFile, EOFError, OSError, NotImplementedError, RuntimeError) as e:
        if "encrypted" in str(e) or "password" in str(e):
            raise CapsvizError(t("the zip is encrypted; upload one without a password")) from None
        raise CapsvizError(
            t("{name} does not match its header ({why}); refused (a damaged or crafted zip)", name=name, why=str(e)[:100])
        ) from None
    budget[0] -= got
    content = b"".join(chunks)
    if zlib.crc32(content) != info.CRC:  # zipfile stops at the declared size: more data behind it shows here
        raise CapsvizError(t("{name} does not match its header's checksum; refused (a damaged or crafted zip)", name=name))
    return content


def compact_picture(content: bytes, limits: ZipLimits, pixels_left: int) -> tuple[bytes | None, int, str]:
    """(PNG bytes, pixels decoded, "") for a picture file: its size read from the header first,
    then decoded, turned upright by its EXIF, made grey (L) or RGB as the dataset reader would
    read it, shrunk to MAX_SIZE on its shorter side, and re-encoded without anything else the file
    held. (None, 0, why) for one that is skipped. CapsvizError when its pixels would pass what is
    left of the zip's budget (`pixels_left`): decoding time is bounded before decoding starts."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(content)) as im:
            w, h = im.size
            if w * h > limits.picture_pixels:
                return None, 0, too_large(limits.picture_pixels / 1e6)
            if w * h > pixels_left:
                raise CapsvizError(
                    t(
                        "the zip's pictures hold more than {most} megapixels in all; upload smaller pictures or fewer of them",
                        most=f"{limits.pixels / 1e6:,.0f}",
                    )
                )
            grey = im.mode in GREY_MODES
            short = min(w, h)
            if short > MAX_SIZE:  # JPEGs decode straight at a reduced size
                im.draft("L" if grey else "RGB", (-(-w * MAX_SIZE // short), -(-h * MAX_SIZE // short)))
            pic = ImageOps.exif_transpose(im).convert("L" if grey else "RGB")
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError, struct.error):
        return None, 0, UNREADABLE
    short = min(pic.size)
    if short > MAX_SIZE:
        pic = pic.resize((round(pic.width * MAX_SIZE / short), round(pic.height * MAX_SIZE / short)), Image.BILINEAR)
    out = io.BytesIO()
    pic.save(out, "PNG", compress_level=3)
    return out.getvalue(), w * h, ""


def _safe_class(name: str) -> str:
    """A class folder's name as it will be written: printable characters only."""
    return "".join(ch for ch in name if ch.isprintable()).strip()[:100]


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


# Zips refused for what they hold, by digest: the page's every rerun sends the same zip again,
# and is answered without parsing it again
_REFUSED: OrderedDict[tuple, str] = OrderedDict()
_REFUSED_LOCK = threading.Lock()
REFUSALS_KEPT = 256


def _refused(key: tuple, message: str | None = None) -> str | None:
    """The refusal recorded for `key` (a zip's digest and limits, and the size asked for when it was
    its dataset that was refused); records `message` when given."""
    with _REFUSED_LOCK:
        if message is not None:
            _REFUSED[key] = message
            while len(_REFUSED) > REFUSALS_KEPT:
                _REFUSED.popitem(last=False)
        elif key in _REFUSED:
            _REFUSED.move_to_end(key)
        return _REFUSED.get(key)


def owner_key(owner: str) -> str:
    """How an owner is written on disk: a digest of the identity, never the identity (a cookie) itself."""
    return hashlib.sha256(str(owner).encode("utf-8", "replace")).hexdigest()[:16]


def receive_zip(
    data: bytes,
    uploads: Path,
    limits: ZipLimits = ZipLimits(),
    resize: int | None = None,
    filename: str = "",
    *,
    owner: str = LOCAL_OWNER,
) -> UploadSummary:
    """Check and unpack an uploaded zip into `uploads`/<its digest>/ (the same zip again reuses
    it) and sum it up; `filename`, the zip's name in the browser, becomes the dataset's display
    name (`clean_name`); `owner`, the student's identity, is who the upload counts against
    (`limits.student_bytes`). Raises CapsvizError for a zip refused whole (QuotaError when the
    quotas leave no room for it); skips and counts the rest. Safe to call from several threads
    and processes at once, for the same zip or others."""
    if len(data) > limits.compressed:
        raise CapsvizError(t("the zip is {size}; at most {most} can be uploaded", size=mib(len(data)), most=mib(limits.compressed)))
    digest = hashlib.sha256(data).hexdigest()[:16]
    lang = language()  # a refusal is kept in the words it was said in
    if refusal := _refused((digest, limits, lang)) or _refused((digest, limits, lang, resize)):
        raise CapsvizError(refusal)
    uploads = Path(uploads)
    dest = uploads / digest
    if not (dest / ".complete").is_file():
        try:  # before anything is written or parsed
            check_directory(data, limits)
        except CapsvizError as e:
            _refused((digest, limits, lang), str(e))
            raise
    state = uploads / STATE_DIR
    state.mkdir(parents=True, exist_ok=True)
    with exclusive(state / f"{digest}.lock"):
        skipped: Counter = Counter()
        if (dest / ".complete").is_file():
            skipped.update(_read_skipped(dest))
        else:
            for stale in [dest, *uploads.glob(f"{PART}{digest}-*")]:  # a crash's leftovers: this lock is ours
                shutil.rmtree(stale, ignore_errors=True)
            try:
                skipped = _unpack(data, dest, limits)
            except QuotaError:
                raise
            except CapsvizError as e:
                _refused((digest, limits, lang), str(e))
                raise
        _record_name(dest, filename)
        removed = _claim(uploads, digest, owner, limits)
        try:
            summary = summarize(load_user(f"folder:{dest}", resize), skipped)
        except CapsvizError as e:  # a dataset that cannot be trained on (one class): said again at once on a rerun
            _refused((digest, limits, lang, resize), str(e))
            raise
    return replace(summary, notes=summary.notes + removed) if removed else summary


def _unpack(data: bytes, dest: Path, limits: ZipLimits) -> Counter:
    """Unpack the pictures into a private folder beside `dest`, renamed to `dest` once complete
    (the caller holds the zip's lock)."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise CapsvizError(t("not a readable zip file ({why}); zip a folder of class folders and upload that", why=e)) from None
    skipped: Counter = Counter()
    with zf:
        files = []
        for info, parts in _check(zf, limits):
            if any(p.startswith(".") or p == "__MACOSX" for p in parts):
                skipped[HIDDEN_MEMBER] += 1
            else:
                files.append((info, parts))
        files = _strip_top(files)
        work = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f"{PART}{dest.name}-"))
        budget, pixels, stored = [limits.total], limits.pixels, 0
        made: Counter = Counter()
        try:
            for info, parts in files:
                if parts[0] in ("train", "test") and len(parts) > 2:
                    split, cls = parts[0], _safe_class(parts[1])
                elif len(parts) > 1 and parts[0] not in ("train", "test"):
                    split, cls = "", _safe_class(parts[0])
                else:
                    skipped[NOT_IN_CLASS] += 1
                    continue
                suffix = Path(parts[-1]).suffix.lower()
                if suffix not in IMAGE_SUFFIXES or not cls or cls in (".", ".."):
                    skipped[NOT_IMAGE] += 1
                    continue
                if info.flag_bits & 0x1:
                    raise CapsvizError(t("the zip is encrypted; upload one without a password"))
                picture, used, why = compact_picture(_read(zf, info, limits, budget), limits, pixels)
                if picture is None:
                    skipped[why] += 1
                    continue
                pixels -= used
                stored += len(picture)
                if stored > limits.student_bytes:
                    raise QuotaError(
                        t(
                            "the zip's pictures take more than {most} stored, all one student's uploads may take on this server; "
                            "upload fewer or smaller pictures",
                            most=mib(limits.student_bytes),
                        )
                    )
                folder = work / split / cls if split else work / cls
                folder.mkdir(parents=True, exist_ok=True)
                made[folder] += 1
                (folder / f"{made[folder]:06d}.png").write_bytes(picture)
            if not made and skipped:
                raise CapsvizError(
                    t(
                        "the zip holds no readable PNG, JPEG or BMP pictures in class folders (skipped: {files})",
                        files=skipped_words(skipped),
                    )
                )
            if not made:
                raise CapsvizError(t("the zip holds no readable PNG, JPEG or BMP pictures in class folders (skipped: nothing)"))
            (work / ".skipped").write_text("\n".join(f"{n}\t{why}" for why, n in skipped.items()))
            (work / ".bytes").write_text(str(stored))
            (work / ".complete").touch()
            os.rename(work, dest)  # atomic: readers see no folder or the whole one
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


# -- quotas ---------------------------------------------------------------------------------------


@dataclass
class _Upload:
    digest: str
    bytes: int
    owners: set[str]
    used: float  # when it was last uploaded


def _stored_bytes(folder: Path) -> int:
    """What an unpacked upload takes, as recorded when it was unpacked (counted where it was not)."""
    try:
        return int((folder / ".bytes").read_text())
    except (OSError, ValueError):
        return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def _uploads(uploads: Path) -> list[_Upload]:
    found = []
    for folder in uploads.iterdir():
        if is_digest(folder.name) and (folder / ".complete").is_file():
            owners_file = uploads / STATE_DIR / f"{folder.name}.owners"
            try:
                owners, used = set(owners_file.read_text().split()), owners_file.stat().st_mtime
            except OSError:
                owners, used = set(), folder.stat().st_mtime
            found.append(_Upload(folder.name, _stored_bytes(folder), owners, used))
    return sorted(found, key=lambda u: u.used)


def _write_owners(uploads: Path, digest: str, owners: set[str]) -> None:
    target = uploads / STATE_DIR / f"{digest}.owners"
    tmp = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text("".join(f"{o}\n" for o in sorted(owners)))
    os.replace(tmp, target)


def _try_remove(uploads: Path, digest: str) -> bool:
    """Remove an upload's pictures unless its zip is being received right now (its lock is held)."""
    fd = os.open(uploads / STATE_DIR / f"{digest}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            lock_file(fd, wait=False)
        except BlockingIOError:
            return False
        shutil.rmtree(uploads / digest, ignore_errors=True)
        (uploads / STATE_DIR / f"{digest}.owners").unlink(missing_ok=True)
        return True  # its name stays (a few bytes): the models trained on it still say which upload they need
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Stored:
    """One upload on the server, as the Teacher page lists it."""

    digest: str
    name: str  # the zip's file name, cleaned
    bytes: int
    owners: frozenset[str]  # owner_key digests of the students who sent it
    used: float


def stored_uploads(uploads: Path) -> list[Stored]:
    """Every upload on the server, the most recently used first."""
    uploads = Path(uploads)
    if not uploads.is_dir():
        return []
    found = _uploads(uploads)
    return [
        Stored(u.digest, recorded_name(uploads / u.digest) or u.digest[:8], u.bytes, frozenset(u.owners), u.used) for u in reversed(found)
    ]


def remove_upload(uploads: Path, digest: str) -> bool:
    """The teacher removes an upload (False when it is being received right now, or not a digest)."""
    if not is_digest(digest):
        return False
    with exclusive(Path(uploads) / STATE_DIR / "quota.lock"):
        return _try_remove(Path(uploads), digest)


def _sweep_parts(uploads: Path) -> None:
    """Remove the private folders of unpacks that a crash left (their zip's lock is free)."""
    for part in uploads.glob(f"{PART}*"):
        digest = part.name[len(PART) :].split("-", 1)[0]
        if not is_digest(digest):
            continue
        fd = os.open(uploads / STATE_DIR / f"{digest}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            lock_file(fd, wait=False)
            shutil.rmtree(part, ignore_errors=True)
        except BlockingIOError:
            pass
        finally:
            os.close(fd)


def _claim(uploads: Path, digest: str, owner: str, limits: ZipLimits) -> tuple[str, ...]:
    """Count the upload `digest` against `owner` and make room for it within both quotas, the
    least recently used uploads first (the owner's own for their quota, anyone's for the
    server's); the notes saying what was removed. QuotaError, and the upload removed unless
    someone else has it too, when it cannot fit. The caller holds the upload's lock."""
    me, notes = owner_key(owner), []
    with exclusive(uploads / STATE_DIR / "quota.lock"):
        _sweep_parts(uploads)
        found = _uploads(uploads)
        this = next(u for u in found if u.digest == digest)
        this.owners.add(me)
        this.used = time.time()
        _write_owners(uploads, digest, this.owners)
        others = [u for u in found if u is not this]

        def refuse(why: str) -> None:
            this.owners.discard(me)
            if this.owners:
                _write_owners(uploads, digest, this.owners)
            else:
                shutil.rmtree(uploads / digest, ignore_errors=True)
                (uploads / STATE_DIR / f"{digest}.owners").unlink(missing_ok=True)
            raise QuotaError(why)

        if this.bytes > limits.student_bytes:
            refuse(
                t(
                    "this upload takes {size} stored; one student's uploads may take {most} on this server",
                    size=mib(this.bytes),
                    most=mib(limits.student_bytes),
                )
            )
        mine = [u for u in others if me in u.owners]
        while this.bytes + sum(u.bytes for u in mine) > limits.student_bytes and mine:
            old = mine.pop(0)  # least recently used first
            name = recorded_name(uploads / old.digest) or old.digest[:8]
            old.owners.discard(me)
            if old.owners:  # someone else's upload too: it stays for them
                _write_owners(uploads, old.digest, old.owners)
            elif _try_remove(uploads, old.digest):
                others.remove(old)
            notes.append(
                t("your older upload {name} was removed to keep your uploads within {most}", name=name, most=mib(limits.student_bytes))
            )
        total = this.bytes + sum(u.bytes for u in others)
        idle_since = time.time() - limits.others_idle_s
        for old in sorted(others, key=lambda u: me not in u.owners):  # the uploader's own first, each by last use
            if total <= limits.server_bytes:
                break
            if me not in old.owners and old.used > idle_since:
                continue  # a classmate's, used during this lesson: kept
            name = recorded_name(uploads / old.digest) or old.digest[:8]
            if _try_remove(uploads, old.digest):
                total -= old.bytes
                if me in old.owners:
                    notes.append(
                        t(
                            "your older upload {name} was removed: this server keeps {most} of uploads",
                            name=name,
                            most=mib(limits.server_bytes),
                        )
                    )
        if total > limits.server_bytes:
            refuse(
                t(
                    "this server's uploads are full ({used} of {most} in use, all of them in use now); try again later or ask the "
                    "teacher (the Teacher page removes uploads)",
                    used=mib(total - this.bytes),
                    most=mib(limits.server_bytes),
                )
            )
    return tuple(notes)


def summarize(data: UserData, skipped: Counter | None = None, per_class: int = 2) -> UploadSummary:
    """The page's summary of a dataset read, in the reader's language: counts, skipped files (by
    their reasons' words), shape, a few pictures per class."""
    total = Counter(skipped or {})
    total.update(data.skipped)
    samples = []
    labels = data.train.labels
    for k, name in enumerate(data.classes):
        for i in (labels == k).nonzero().flatten()[:per_class].tolist():
            a = data.train.images[i].numpy()  # (C, S, S)
            samples.append((name, a[0] if a.shape[0] == 1 else np.ascontiguousarray(a.transpose(1, 2, 0))))
    notes = tuple(said(n) for n in data.notes if not isinstance(n, SkippedNote))  # the skipped files are listed on their own
    reasons = {reason_words(why): n for why, n in total.items()}
    return UploadSummary(
        data.spec, data.classes, data.counts("train"), data.counts("test"), reasons, data.size, data.channels, notes, samples
    )
