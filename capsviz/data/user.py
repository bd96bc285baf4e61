"""A user's own images as a dataset: a folder of class folders, a .npz, or binary CIFAR-10.

`load_user("folder:/path", resize)` gives both splits as uint8 (N, C, S, S) tensors with the class
names and what was done to get there (`notes`: the split, a conversion to colour, the size chosen,
files skipped). Whatever a file holds, a bad one is skipped and counted, or the whole dataset is
refused with one CapsvizError saying what was expected; never a traceback.
"""

from __future__ import annotations

import os
import re
import threading
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from capsviz.config import MAX_SIZE, MIN_SIZE, USER_KINDS, user_dataset, what_path
from capsviz.data.mnist import ImageSet
from capsviz.data.names import hide_paths, recorded_name
from capsviz.errors import CapsvizError
from capsviz.i18n import N_, Sentence, said, sentence, sentence_n, t, tn
from capsviz.text import bare

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp")
# Without a test/ folder, 1 image in TEST_EVERY of each class is held out, always the same ones
TEST_EVERY = 6
SPLIT_SEED = 0
# A picture larger than this (width x height) is skipped before it is decoded (as for uploads)
MAX_PICTURE_PIXELS = 40_000_000
# Every picture of a folder together (width x height, from their headers): about 15 s of decoding
MAX_DATASET_PIXELS = 2_000_000_000
# The decoded dataset is held in memory as bytes; beyond this it is refused with a smaller --resize
MAX_DATASET_BYTES = 4 << 30
MAX_CLASSES = 100  # a model's class capsules (capsviz.schema)
MAX_CLASS_NAME = 100  # characters of a class name (a checkpoint records at most 200)
# The decoded datasets kept in memory for the pages and runs, all together (MiB: $CAPSVIZ_DATASET_CACHE_MB)
DATASET_CACHE_MB = 1024
GREY_MODES = ("1", "L", "LA", "I", "I;16", "F")
CIFAR10_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
CIFAR_RECORD = 1 + 3 * 32 * 32  # a label byte, then the red, green and blue planes


@dataclass(frozen=True)
class UserData:
    """Both splits of a user's dataset, images (N, C, S, S) uint8, and how they were made."""

    spec: str
    classes: tuple[str, ...]
    train: ImageSet
    test: ImageSet
    size: int
    channels: int
    notes: tuple[Sentence, ...] = ()  # said in each reader's language where shown (capsviz.i18n.said)
    skipped: dict = field(default_factory=dict)  # reason (a SKIPPED message, `reason_words` says it) -> files

    def counts(self, split: str) -> dict[str, int]:
        """Images per class name in one split."""
        labels = (self.train if split == "train" else self.test).labels
        n = torch.bincount(labels, minlength=len(self.classes)).tolist()
        return dict(zip(self.classes, n, strict=True))


# Why a file was skipped, as `UserData.skipped` and an upload's record on disk keep it (English, the
# catalog's message; `reason_words` says it in the reader's language)
HIDDEN_CLASS = N_("hidden class folder (a name starting with a dot)")
HIDDEN = N_("hidden or a link")
NOT_REGULAR = N_("not a regular file")
NOT_IMAGE = N_("not an image (PNG, JPEG, BMP)")
UNREADABLE = N_("unreadable")
NOT_IN_CLASS = N_("not in a class folder")
TOO_LARGE = N_("over {n} megapixels")


def too_large(megapixels: int | float) -> str:
    """The reason a picture over `megapixels` is skipped."""
    return TOO_LARGE.format(n=f"{megapixels:,.0f}")


def reason_words(why: str) -> str:
    """A recorded reason for skipping files, in the reader's language."""
    over = re.fullmatch(r"over ([\d,.]+) megapixels", why)
    return t(TOO_LARGE, n=over[1]) if over else t(why)


def summary_line(data: UserData) -> str:
    """One line on what was read, in the reader's language: classes, images per split, shape, and
    what was done to them."""
    names = ", ".join(data.classes[:10])
    if len(data.classes) > 10:
        names = t("{names} and {n} more", names=names, n=len(data.classes) - 10)
    values = dict(name=short_name(data.spec), names=names, train=f"{len(data.train):,}", test=f"{len(data.test):,}", size=data.size)
    if data.channels == 3:
        line = tn(
            "{name}: {n} class ({names}), {train} training and {test} test images, {size}x{size} colour",
            "{name}: {n} classes ({names}), {train} training and {test} test images, {size}x{size} colour",
            len(data.classes),
            **values,
        )
    else:
        line = tn(
            "{name}: {n} class ({names}), {train} training and {test} test images, {size}x{size} grey",
            "{name}: {n} classes ({names}), {train} training and {test} test images, {size}x{size} grey",
            len(data.classes),
            **values,
        )
    for note in data.notes:
        line = t("{line}; {note}", line=line, note=said(note))
    return line


def short_name(spec: str) -> str:
    """ "folder:photos" for "folder:/home/me/photos", and for a zip uploaded on the Train page the
    name it was uploaded under ("shapes" for shapes.zip): what titles and metrics say of a dataset."""
    user = user_dataset(spec)
    if not user:
        return spec
    folder = Path(user[1])
    return (user[0] == "folder" and recorded_name(folder)) or f"{user[0]}:{folder.name}"


def load_user(spec: str, resize: int | None = None) -> UserData:
    """The dataset `spec` (KIND:PATH) names, read once per version of its files. Its refusals
    name an upload by its name, never by its folder on the server (capsviz.data.names.hide_paths)."""
    kind, path = _parse(spec)
    p = Path(path).expanduser()
    try:  # a changed file, or a file or class folder changed inside the folder, reads the dataset anew
        inside = sorted((c.name, c.stat().st_mtime_ns, c.stat().st_size) for c in p.iterdir()) if p.is_dir() else []
        stamp = (p.stat().st_mtime_ns, p.stat().st_size, *inside)
    except OSError:
        if kind == "folder" and (name := recorded_name(p)):
            raise CapsvizError(
                t("the upload {name} is no longer on this server (removed to make room for newer ones); upload its zip again", name=name)
            ) from None
        raise CapsvizError(
            hide_paths(t("{spec}: {path} does not exist; {kind}:PATH takes {what}", spec=spec, path=path, kind=kind, what=what_path(kind)))
        ) from None
    try:
        return _load(kind, str(p), resize, stamp, spec)
    except CapsvizError as e:
        raise CapsvizError(hide_paths(str(e))) from None


def _parse(spec: str) -> tuple[str, str]:
    user = user_dataset(spec)
    if user is None or not user[1]:
        raise CapsvizError(
            t(
                "{spec} is not one of your own datasets; write KIND:PATH with KIND one of {kinds}",
                spec=repr(spec),
                kinds=", ".join(USER_KINDS),
            )
        )
    return user


def cache_budget() -> int:
    """Bytes of decoded datasets kept in memory in all: $CAPSVIZ_DATASET_CACHE_MB, else DATASET_CACHE_MB."""
    text = os.environ.get("CAPSVIZ_DATASET_CACHE_MB", "").strip()
    return (int(text) if text.isdigit() else DATASET_CACHE_MB) << 20


def nbytes(data: UserData) -> int:
    return sum(x.element_size() * x.nelement() for s in (data.train, data.test) for x in (s.images, s.labels))


_CACHE: OrderedDict[tuple, UserData] = OrderedDict()  # least recently used first
_CACHE_LOCK = threading.Lock()
_READING = threading.Lock()  # one dataset decoded at a time: the memory of two at once is never needed


def _cached(key: tuple) -> UserData | None:
    with _CACHE_LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    return None


def _load(kind: str, path: str, resize: int | None, stamp: tuple, spec: str) -> UserData:
    """A dataset read, kept while the datasets kept stay within `cache_budget()` (the least
    recently used let go first; one larger than the whole budget is read, not kept)."""
    if resize is not None and not MIN_SIZE <= resize <= MAX_SIZE:
        raise CapsvizError(t("--resize {resize}: must be {lo} to {hi}", resize=resize, lo=MIN_SIZE, hi=MAX_SIZE))
    key = (kind, path, resize, stamp, spec)
    if (found := _cached(key)) is not None:
        return found
    with _READING:
        if (found := _cached(key)) is not None:  # read by another session meanwhile
            return found
        reader = {"folder": read_folder, "npz": read_npz, "cifar10": read_cifar10}[kind]
        data = reader(Path(path), resize, spec)
        budget, size = cache_budget(), nbytes(data)
        with _CACHE_LOCK:
            if size <= budget:
                _CACHE[key] = data
                while sum(nbytes(d) for d in _CACHE.values()) > budget:
                    _CACHE.popitem(last=False)
    return data


def _image_set(spec: str, split: str, images: torch.Tensor, labels: torch.Tensor, origin: str) -> ImageSet:
    return ImageSet(spec, split, images, labels, origin)


def _check_classes(spec: str, classes: tuple[str, ...]) -> None:
    if len(classes) < 2:
        raise CapsvizError(
            tn(
                "{spec}: found {n} class; a classifier needs at least 2",
                "{spec}: found {n} classes; a classifier needs at least 2",
                len(classes),
                spec=spec,
            )
        )
    if len(classes) > MAX_CLASSES:
        raise CapsvizError(
            t("{spec}: {n} classes; a model here has at most {most} class capsules", spec=spec, n=len(classes), most=MAX_CLASSES)
        )
    for name in classes:
        if not name.strip():
            raise CapsvizError(t("{spec}: an empty class name; every class needs a name", spec=spec))
        if len(name) > MAX_CLASS_NAME:
            raise CapsvizError(
                t(
                    "{spec}: a class name of {n} characters ({start}...); names must be 1 to {most} characters",
                    spec=spec,
                    n=len(name),
                    start=repr(name[:40]),
                    most=MAX_CLASS_NAME,
                )
            )


def _check_bytes(spec: str, n: int, c: int, s: int) -> None:
    need = n * c * s * s
    if need > MAX_DATASET_BYTES:
        fit = int((MAX_DATASET_BYTES / (n * c)) ** 0.5)
        raise CapsvizError(
            t(
                "{spec}: {n} images of {c}x{s}x{s} take {need} GiB; capsviz holds at most {most} GiB of images: try --resize {fit}",
                spec=spec,
                n=f"{n:,}",
                c=c,
                s=s,
                need=f"{need / 2**30:.1f}",
                most=f"{MAX_DATASET_BYTES / 2**30:.0f}",
                fit=max(MIN_SIZE, min(fit, 256)),
            )
        )


# -- a folder of class folders --------------------------------------------------------------------


@dataclass
class _Scan:
    """What the first pass over a folder found: each image's path, class, split, size and mode."""

    files: list = field(default_factory=list)  # (path, label, split, (w, h), grey)
    skipped: Counter = field(default_factory=Counter)


def _visible(p: Path) -> bool:
    return not p.name.startswith(".") and p.name != "__MACOSX"


def class_folders(root: Path) -> tuple[dict[str, Path | None], tuple[str, ...]]:
    """The split folders ({"train": root/train, "test": root/test}, or {"train": root, "test": None})
    and the class names: the subfolders' names, sorted."""
    if (root / "train").is_dir() and (root / "test").is_dir():
        splits: dict[str, Path | None] = {"train": root / "train", "test": root / "test"}
    else:
        splits = {"train": root, "test": None}
    names = set()
    for folder in splits.values():
        if folder is not None:
            names |= {c.name for c in folder.iterdir() if c.is_dir() and _visible(c)}
    return splits, tuple(sorted(names))


def _scan(root: Path, spec: str) -> tuple[_Scan, tuple[str, ...], bool]:
    """Every image file's header (size and mode, nothing decoded); other files counted as skipped."""
    from PIL import Image, UnidentifiedImageError

    if not root.is_dir():
        raise CapsvizError(t("{spec}: {path} is not a folder; folder:PATH takes {what}", spec=spec, path=root, what=what_path("folder")))
    splits, classes = class_folders(root)
    _check_classes(spec, classes)
    scan = _Scan()
    for folder in splits.values():  # a class folder left out is said, not lost in silence
        if folder is not None:
            hidden = sum(1 for c in folder.iterdir() if c.is_dir() and c.name.startswith("."))
            if hidden:
                scan.skipped[HIDDEN_CLASS] += hidden
    for split, folder in splits.items():
        if folder is None:
            continue
        for label, name in enumerate(classes):
            if not (folder / name).is_dir():
                continue
            for dirpath, dirnames, filenames in os.walk(folder / name):
                dirnames[:] = sorted(d for d in dirnames if _visible(Path(d)))
                for f in sorted(filenames):
                    p = Path(dirpath) / f
                    if not _visible(p) or p.is_symlink():
                        scan.skipped[HIDDEN] += 1
                    elif not p.is_file():  # a FIFO or a device would block or never end
                        scan.skipped[NOT_REGULAR] += 1
                    elif p.suffix.lower() not in IMAGE_SUFFIXES:
                        scan.skipped[NOT_IMAGE] += 1
                    else:
                        try:
                            with Image.open(p) as im:
                                size, grey = im.size, im.mode in GREY_MODES
                        except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError):
                            scan.skipped[UNREADABLE] += 1
                            continue
                        if size[0] * size[1] > MAX_PICTURE_PIXELS:
                            scan.skipped[too_large(MAX_PICTURE_PIXELS // 1_000_000)] += 1
                            continue
                        scan.files.append((p, label, split, size, grey))
    return scan, classes, splits["test"] is not None


def _decode(path: Path, size: int, colour: bool) -> np.ndarray | None:
    """One picture as (C, S, S) uint8 (`picture_array`); None when it cannot be decoded after all
    (a truncated file)."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            return picture_array(im, size, colour)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):
        return None


def picture_array(im, size: int, colour: bool) -> np.ndarray:
    """An open PIL picture as (C, S, S) uint8, made as the dataset's images are: upright by its
    EXIF, grey or RGB, centre-cropped to a square and resized (uploads on the pages use it too)."""
    from PIL import Image, ImageOps

    im.draft("RGB" if colour else "L", (size, size))  # JPEGs decode straight at a reduced size
    im = ImageOps.exif_transpose(im)
    im = im.convert("RGB" if colour else "L")
    if im.size != (size, size):
        im = ImageOps.fit(im, (size, size), Image.BILINEAR)
    a = np.asarray(im, dtype=np.uint8)
    return a.transpose(2, 0, 1) if colour else a[None]


def _choose_shape(files: list, resize: int | None) -> tuple[int, bool, list[Sentence]]:
    """The side S and colour of the dataset, and sentences saying why."""
    notes = []
    grey = sum(1 for f in files if f[4])
    colour = grey < len(files)
    if colour and grey:
        notes.append(
            sentence("{grey} grey images of {n} made colour (3 channels) to match the colour ones", grey=f"{grey:,}", n=f"{len(files):,}")
        )
    sizes = Counter(f[3] for f in files)
    if resize is not None:
        return resize, colour, notes + [sentence("every image made {size}x{size} (--resize)", size=resize)]
    (w, h), _ = sizes.most_common(1)[0]
    side = max(MIN_SIZE, min(w, h, MAX_SIZE))
    if len(sizes) > 1 or w != h or side != w:
        notes.append(
            sentence_n(
                "images of {n} size made {side}x{side} (the most common, {w}x{h}, centre-cropped to a square); --resize N chooses another size",
                "images of {n} sizes made {side}x{side} (the most common, {w}x{h}, centre-cropped to a square); --resize N chooses another size",
                len(sizes),
                side=side,
                w=w,
                h=h,
            )
        )
    return side, colour, notes


def read_folder(root: Path, resize: int | None, spec: str) -> UserData:
    scan, classes, has_test = _scan(root, spec)
    if not scan.files:
        raise CapsvizError(t("{spec}: no readable PNG, JPEG or BMP images in the class folders of {path}", spec=spec, path=root))
    pixels = sum(w * h for _, _, _, (w, h), _ in scan.files)
    if pixels > MAX_DATASET_PIXELS:
        raise CapsvizError(
            t(
                "{spec}: the pictures hold {n} megapixels in all; at most {most} are decoded (shrink them first, or use fewer)",
                spec=spec,
                n=f"{pixels / 1e6:,.0f}",
                most=f"{MAX_DATASET_PIXELS / 1e6:,.0f}",
            )
        )
    side, colour, notes = _choose_shape(scan.files, resize)
    channels = 3 if colour else 1
    _check_bytes(spec, len(scan.files), channels, side)
    images, labels, splits = [], [], []
    for path, label, split, _, _ in scan.files:
        a = _decode(path, side, colour)
        if a is None:
            scan.skipped[UNREADABLE] += 1
            continue
        images.append(a)
        labels.append(label)
        splits.append(split)
    if not images:
        raise CapsvizError(t("{spec}: none of the images in {path} could be decoded", spec=spec, path=root))
    x = torch.from_numpy(np.stack(images))  # (N, C, S, S)
    y = torch.tensor(labels, dtype=torch.int64)
    if has_test:
        is_test = torch.tensor([s == "test" for s in splits])
    else:
        is_test = held_out(y, len(classes))
        notes.insert(0, split_note(int(is_test.sum()), len(y)))
    skipped = dict(scan.skipped)
    if skipped:
        notes.append(skipped_note(skipped))
    return _finish(spec, classes, x, y, is_test, notes, skipped, str(root))


def held_out(labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """The fixed test split: 1 in TEST_EVERY images of each class (at least one of a class with 2
    or more), drawn by a generator seeded with SPLIT_SEED, so every run holds out the same images."""
    g = np.random.default_rng(SPLIT_SEED)
    test = np.zeros(len(labels), dtype=bool)
    y = labels.numpy()
    for k in range(num_classes):
        idx = np.flatnonzero(y == k)
        n = len(idx) // TEST_EVERY or (1 if len(idx) >= 2 else 0)
        test[g.permutation(idx)[:n]] = True
    return torch.from_numpy(test)


def split_note(n_test: int, n: int) -> Sentence:
    return sentence(
        "no test folder: {test} of {n} images held out by a fixed split (1 in {every} of each class, seed {seed})",
        test=f"{n_test:,}",
        n=f"{n:,}",
        every=TEST_EVERY,
        seed=SPLIT_SEED,
    )


def skipped_words(counts: dict[str, int]) -> str:
    """How many files were skipped for each reason, in the reader's language."""
    return t(", ").join(t("{n} {why}", n=f"{n:,}", why=reason_words(why)) for why, n in counts.items())


class SkippedNote(Sentence):
    """The note on the files a dataset's reading skipped, said with each reason in the reader's language."""

    def words(self) -> str:
        return t("skipped {files}", files=skipped_words(self.values["counts"]))


def skipped_note(counts: dict[str, int]) -> SkippedNote:
    return SkippedNote("skipped {files}", files=", ".join(f"{n:,} {why}" for why, n in counts.items()), counts=counts)


def kept_classes(spec: str, classes) -> tuple[str, ...]:
    """The class names as every page shows them (from folder names, an npz's class_names, any
    source): without bidirectional, zero-width or control characters (capsviz.text.bare). Names
    that become empty, or the same as another, are refused."""
    kept = tuple(bare(n, MAX_CLASS_NAME * 2) for n in classes)
    if any(not k for k in kept):
        raise CapsvizError(
            t("{spec}: a class name is empty once its invisible characters are removed; every class needs a visible name", spec=spec)
        )
    if len(set(kept)) < len(kept):
        twice = next(k for k in kept if kept.count(k) > 1)
        raise CapsvizError(
            t("{spec}: two classes are both named {name} once their invisible characters are removed", spec=spec, name=repr(twice))
        )
    return kept


def _finish(spec, classes, x, y, is_test, notes, skipped, origin) -> UserData:
    classes = kept_classes(spec, classes)
    if not bool((~is_test).any()):
        raise CapsvizError(t("{spec}: no training images", spec=spec))
    if not bool(is_test.any()):
        raise CapsvizError(t("{spec}: no test images; give each class at least 2 images, or a test/ folder", spec=spec))
    train = _image_set(spec, "train", x[~is_test], y[~is_test], origin)
    test = _image_set(spec, "test", x[is_test], y[is_test], origin)
    return UserData(spec, tuple(classes), train, test, x.shape[-1], x.shape[1], tuple(notes), skipped)


# -- arrays: .npz and CIFAR-10 --------------------------------------------------------------------


def fit_arrays(x: torch.Tensor, side: int, chunk: int = 512) -> torch.Tensor:
    """uint8 (N, C, H, W) centre-cropped to a square and resized to (N, C, side, side), in chunks
    (bilinear with antialiasing, as Pillow shrinks the pictures of a folder)."""
    N, C, H, W = x.shape
    s = min(H, W)
    top, left = (H - s) // 2, (W - s) // 2
    x = x[:, :, top : top + s, left : left + s]  # (N, C, s, s)
    if s == side:
        return x.contiguous()
    out = torch.empty(N, C, side, side, dtype=torch.uint8)
    for i in range(0, N, chunk):
        part = x[i : i + chunk].float()
        out[i : i + chunk] = (
            F.interpolate(part, size=(side, side), mode="bilinear", antialias=True, align_corners=False)
            .round()
            .clamp(0, 255)
            .to(torch.uint8)
        )
    return out


def _as_uint8(images: np.ndarray, name: str) -> np.ndarray:
    """Images (N, H, W) or (N, H, W, C) of uint8, or floats in [0, 1] or [0, 255] -> (N, C, H, W) uint8."""
    if images.ndim == 3:
        images = images[..., None]
    if images.ndim != 4 or images.shape[-1] not in (1, 3, 4):
        raise CapsvizError(
            t("{name}: must have shape (N, H, W) or (N, H, W, C) with C 1, 3 or 4; found {shape}", name=name, shape=images.shape)
        )
    if images.shape[-1] == 4:
        images = images[..., :3]  # alpha dropped
    if images.dtype == np.uint8:
        out = images
    elif np.issubdtype(images.dtype, np.floating) or np.issubdtype(images.dtype, np.integer):
        f = images.astype(np.float32)
        if not np.isfinite(f).all():
            raise CapsvizError(t("{name}: holds NaN or infinite values", name=name))
        scale = 255.0 if f.size and float(f.max()) <= 1.0 else 1.0
        out = np.clip(np.rint(f * scale), 0, 255).astype(np.uint8)
    else:
        raise CapsvizError(t("{name}: must be uint8 or float numbers, found {dtype}", name=name, dtype=images.dtype))
    return np.ascontiguousarray(out.transpose(0, 3, 1, 2))


def _labels(labels: np.ndarray, n: int, name: str) -> np.ndarray:
    if labels.ndim != 1 or len(labels) != n:
        raise CapsvizError(
            t("{name}: must be a list (N,) of {n} class numbers, one per image; found shape {shape}", name=name, n=n, shape=labels.shape)
        )
    if not np.issubdtype(labels.dtype, np.integer) or (len(labels) and int(labels.min()) < 0):
        raise CapsvizError(t("{name}: must be class numbers 0, 1, 2, ...; found {dtype} values", name=name, dtype=labels.dtype))
    if len(labels) and int(labels.max()) >= MAX_CLASSES:  # compared as Python ints: uint64's 2**64-1 is not -1
        raise CapsvizError(
            t(
                "{name}: class numbers go up to {top}; a model here has at most {most} classes",
                name=name,
                top=f"{int(labels.max()):,}",
                most=MAX_CLASSES,
            )
        )
    return labels.astype(np.int64)


def _from_arrays(spec, origin, x_train, y_train, x_test, y_test, classes, resize, notes) -> UserData:
    """Both splits from arrays (N, C, H, W) uint8; the test split drawn from the training one when absent."""
    _check_classes(spec, classes)
    top = max(int(y_train.max(initial=0)), int(y_test.max(initial=0)) if y_test is not None else 0)
    if top >= len(classes):
        raise CapsvizError(t("{spec}: labels go up to {top}, but there are {n} class names", spec=spec, top=top, n=len(classes)))
    if x_test is not None and x_test.shape[1:] != x_train.shape[1:]:
        raise CapsvizError(
            t(
                "{spec}: test images are {test}, training images {train}; they must match",
                spec=spec,
                test=x_test.shape[1:],
                train=x_train.shape[1:],
            )
        )
    C, H, W = x_train.shape[1:]
    side = resize or max(MIN_SIZE, min(H, W, MAX_SIZE))
    if resize:
        notes.append(sentence("every image made {size}x{size} (--resize)", size=side))
    elif H != W or side != H:
        notes.append(
            sentence(
                "images of {w}x{h} made {side}x{side} (centre-cropped to a square); --resize N chooses another size", w=W, h=H, side=side
            )
        )
    n = len(x_train) + (len(x_test) if x_test is not None else 0)
    _check_bytes(spec, n, C, side)
    x = torch.from_numpy(x_train)
    y = torch.from_numpy(y_train)
    if x_test is None:
        is_test = held_out(y, len(classes))
        notes.insert(0, split_note(int(is_test.sum()), len(y)))
    else:
        x, y = torch.cat([x, torch.from_numpy(x_test)]), torch.cat([y, torch.from_numpy(y_test)])
        is_test = torch.arange(len(y)) >= len(x_train)
    return _finish(spec, classes, fit_arrays(x, side), y, is_test, notes, {}, origin)


def read_npz(path: Path, resize: int | None, spec: str) -> UserData:
    """Arrays `images`, `labels`, optional `class_names`, `test_images` and `test_labels`; read
    without unpickling (allow_pickle=False), so a file cannot run code."""
    import zipfile

    if not path.is_file():
        raise CapsvizError(t("{spec}: {path} is not a file; npz:PATH takes {what}", spec=spec, path=path, what=what_path("npz")))
    _check_npy_headers(path, spec)
    try:
        with np.load(path, allow_pickle=False) as z:
            keys = set(z.files)
            if not {"images", "labels"} <= keys:
                raise CapsvizError(
                    t("{spec}: {path} holds {found}; it needs arrays named images and labels", spec=spec, path=path, found=sorted(keys))
                )
            if ("test_images" in keys) != ("test_labels" in keys):
                raise CapsvizError(t("{spec}: give both test_images and test_labels, or neither", spec=spec))
            x = _as_uint8(z["images"], f"{spec}: images")
            y = _labels(z["labels"], len(x), f"{spec}: labels")
            x_test = y_test = None
            if "test_images" in keys:
                x_test = _as_uint8(z["test_images"], f"{spec}: test_images")
                y_test = _labels(z["test_labels"], len(x_test), f"{spec}: test_labels")
            names = z["class_names"] if "class_names" in keys else None
    except CapsvizError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise CapsvizError(t("{spec}: not a readable .npz file ({why})", spec=spec, why=f"{type(e).__name__}: {str(e)[:200]}")) from None
    except MemoryError:
        raise CapsvizError(t("{spec}: its arrays do not fit in this machine's memory", spec=spec)) from None
    if len(x) == 0:
        raise CapsvizError(t("{spec}: images is empty", spec=spec))
    count = max(int(y.max()), int(y_test.max()) if y_test is not None and len(y_test) else 0) + 1
    if names is None:
        classes = tuple(str(k) for k in range(count))
    elif names.ndim != 1 or names.dtype.kind not in "US":
        raise CapsvizError(
            t(
                "{spec}: class_names must be a list of strings, found {dtype} of shape {shape}",
                spec=spec,
                dtype=names.dtype,
                shape=names.shape,
            )
        )
    else:
        classes = tuple(str(n.decode() if isinstance(n, bytes) else n) for n in names.tolist())
    return _from_arrays(spec, str(path), x, y, x_test, y_test, classes, resize, [])


def _check_npy_headers(path: Path, spec: str) -> None:
    """Each array's declared shape and type, read from its header before any array is: an array
    larger than MAX_DATASET_BYTES as uint8 images (or than its own member of the file) is refused
    before memory is asked for it."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                with z.open(info) as f:
                    fmt = np.lib.format
                    read = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}.get(fmt.read_magic(f))
                    if read is None:  # a newer format: np.load reads it, and a MemoryError is still one line
                        continue
                    shape, _, dtype = read(f, max_header_size=10_000)
                    need = int(np.prod(shape, dtype=object)) * dtype.itemsize
                    if need > info.file_size or int(np.prod(shape, dtype=object)) > MAX_DATASET_BYTES:
                        name = info.filename.removesuffix(".npy")[:100]
                        raise CapsvizError(
                            t(
                                "{spec}: its array {name} declares shape {shape} ({need} GiB), but the file holds {size} bytes "
                                "for it (at most {most} GiB of images)",
                                spec=spec,
                                name=name,
                                shape=shape,
                                need=f"{need / 2**30:,.1f}",
                                size=f"{info.file_size:,}",
                                most=MAX_DATASET_BYTES >> 30,
                            )
                        )
    except CapsvizError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, TypeError, SyntaxError) as e:
        raise CapsvizError(t("{spec}: not a readable .npz file ({why})", spec=spec, why=f"{type(e).__name__}: {str(e)[:200]}")) from None


def read_cifar10(root: Path, resize: int | None, spec: str) -> UserData:
    """The binary version: data_batch_1.bin ... data_batch_5.bin (those present) and test_batch.bin,
    each a run of 3073-byte records (a label, then 32x32 red, green and blue), and batches.meta.txt
    with the class names (CIFAR-10's own when it is missing)."""
    if (root / "cifar-10-batches-bin").is_dir():
        root = root / "cifar-10-batches-bin"
    train_files = sorted(root.glob("data_batch_*.bin"))
    if not root.is_dir() or not train_files or not (root / "test_batch.bin").is_file():
        raise CapsvizError(
            t(
                "{spec}: no data_batch_N.bin and test_batch.bin in {path}; cifar10:PATH takes {what}",
                spec=spec,
                path=root,
                what=what_path("cifar10"),
            )
        )

    def records(files) -> tuple[np.ndarray, np.ndarray]:
        parts = []
        for f in files:
            if not f.is_file():  # a FIFO named data_batch_1.bin would never end
                raise CapsvizError(t("{spec}: {name} is not a regular file", spec=spec, name=f.name))
            if f.stat().st_size % CIFAR_RECORD or f.stat().st_size > MAX_DATASET_BYTES:
                raise CapsvizError(
                    t(
                        "{spec}: {name} is {size} bytes, not a whole number of {record}-byte records",
                        spec=spec,
                        name=f.name,
                        size=f"{f.stat().st_size:,}",
                        record=CIFAR_RECORD,
                    )
                )
            parts.append(np.fromfile(f, dtype=np.uint8).reshape(-1, CIFAR_RECORD))
        r = np.concatenate(parts)
        return r[:, 1:].reshape(-1, 3, 32, 32), r[:, 0].astype(np.int64)

    x, y = records(train_files)
    x_test, y_test = records([root / "test_batch.bin"])
    meta = root / "batches.meta.txt"
    classes = tuple(n.strip() for n in meta.read_text(errors="replace").splitlines() if n.strip()) if meta.is_file() else CIFAR10_NAMES
    notes = [
        sentence_n(
            "{n} training batch ({files})", "{n} training batches ({files})", len(train_files), files=", ".join(f.name for f in train_files)
        )
    ]
    return _from_arrays(spec, str(root), x, y, x_test, y_test, classes, resize, notes)
