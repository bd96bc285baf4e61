"""One checkpoint file: safetensors weights with everything needed to rebuild and judge the model
in their metadata, written (`save_checkpoint`), read and checked (`read_meta`, `load_checkpoint`),
a folder of them listed (`list_checkpoints`), and what a model's record says of its training.
Loading never executes code; every way a file can be wrong is a CapsvizError.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import struct
from contextlib import contextmanager
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from capsviz import __version__
from capsviz.config import to_dict
from capsviz.errors import CapsvizError
from capsviz.i18n import language, t, tn
from capsviz.models import build_model, count_parameters
from capsviz.paths import atomic_write
from capsviz.schema import MAX_META_BYTES, CheckpointMeta, Invalid

META_KEY = "capsviz"


# A safetensors header is the metadata plus ~100 bytes per tensor; anything larger is refused
# before it is read, so a file cannot make a page or `capsviz list` parse megabytes of JSON.
MAX_HEADER_BYTES = MAX_META_BYTES + 1_000_000


def weights_digest(tensors: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    for name in sorted(tensors):
        tensor = tensors[name].detach().contiguous().cpu()
        h.update(name.encode())
        h.update(str(tensor.dtype).encode())
        # flattened first: a 0-d tensor (BatchNorm's num_batches_tracked) cannot be viewed as bytes
        h.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return h.hexdigest()


def save_checkpoint(path: Path, model: torch.nn.Module, meta: dict, half: bool = False) -> str:
    """Weights (float16 when `half`) plus meta: config, dataset, epochs, metrics, time, hardware.
    Returns the weights' digest. A failed write leaves the previous file as it was."""
    tensors = {k: (v.half() if half and v.is_floating_point() else v).detach().contiguous().cpu() for k, v in model.state_dict().items()}
    digest = weights_digest(tensors)
    full = dict(meta, config=to_dict(model.config), parameters=count_parameters(model), capsviz_version=__version__, weights_sha256=digest)
    with saving(path):
        atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata={META_KEY: json.dumps(full)}))
    return digest


@contextmanager
def saving(path: Path):
    """An OSError while writing (disk full, permission, folder gone) as one CapsvizError that says
    the previous file is untouched (atomic_write has removed its partial file)."""
    try:
        yield
    except OSError as e:
        raise CapsvizError(
            t("could not save {path} ({why}); the previous checkpoint there is unchanged", path=path, why=e.strerror or e)
        ) from None


def read_meta(path: Path) -> CheckpointMeta:
    """The metadata alone (reads the header only). Checked once per version of the file: the app
    lists every checkpoint on every rerun, and the schema's checks cost ~3 ms a file."""
    return _by_version(path, _checked_meta)


def _by_version(path: Path, checked) -> CheckpointMeta:
    """`checked(path, mtime_ns, size)`, an lru_cache'd check, for the file as it is now (a copy:
    callers may change what they get)."""
    path = Path(path)
    try:
        st = path.stat()
    except OSError:
        return _open(path)[0]  # says why in one line
    return copy.deepcopy(checked(str(path), st.st_mtime_ns, st.st_size))


@functools.lru_cache(maxsize=256)
def _checked_meta(path: str, mtime_ns: int, size: int) -> CheckpointMeta:  # mtime and size key a rewritten file anew
    return _open(Path(path))[0]


def load_checkpoint(path: Path, device="cpu") -> tuple[torch.nn.Module, CheckpointMeta]:
    """Rebuild the model from the file alone, in float32 and eval mode, and its metadata."""
    path = Path(path)
    meta, tensors = _open_checked(path)
    model = build_model(meta.config)  # the schema has checked that it builds, at a bounded size
    model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in tensors.items()}, strict=True)
    return model.to(device).eval(), meta


def _open_checked(path: Path) -> tuple[CheckpointMeta, dict]:
    """Metadata and weights, the weights checked against what was saved (digest), against the
    architecture the metadata names (every tensor's name, shape and kind of number) and for
    NaN or infinite values."""
    meta, tensors = _open(path, with_tensors=True)
    if weights_digest(tensors) != meta.weights_sha256:
        raise CapsvizError(
            t("{path}: weights do not match the digest recorded when it was saved (the file was modified or damaged)", path=path)
        )
    expected = _architecture(meta.config)
    for name in sorted(expected.keys() | tensors.keys()):
        said = dict(path=path, family=meta.family, name=name)
        if name not in tensors:
            raise CapsvizError(t("{path}: weights do not fit a {family} model with this config: {name} is missing", **said))
        if name not in expected:
            raise CapsvizError(t("{path}: weights do not fit a {family} model with this config: {name} is not part of it", **said))
        shape, dtype = expected[name]
        found = tensors[name]
        if tuple(found.shape) != tuple(shape):
            raise CapsvizError(
                t(
                    "{path}: weights do not fit a {family} model with this config: {name} has shape {shape}, the model needs {need}",
                    shape=tuple(found.shape),
                    need=tuple(shape),
                    **said,
                )
            )
        # floats may be stored at any float precision (export writes float16); anything else exactly as the model keeps it
        stored = str(found.dtype).removeprefix("torch.")
        if dtype.is_floating_point and found.dtype not in FLOAT_STORAGE:
            raise CapsvizError(
                t(
                    "{path}: weights do not fit a {family} model with this config: {name} is stored as {stored}, "
                    "the model needs a float tensor",
                    stored=stored,
                    **said,
                )
            )
        if not dtype.is_floating_point and found.dtype != dtype:
            raise CapsvizError(
                t(
                    "{path}: weights do not fit a {family} model with this config: {name} is stored as {stored}, the model needs {need}",
                    stored=stored,
                    need=str(dtype).removeprefix("torch."),
                    **said,
                )
            )
    bad = [k for k, v in tensors.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        raise CapsvizError(
            t(
                "{path}: weights hold NaN or infinite values ({names}); the model it holds diverged and cannot be used",
                path=path,
                names=", ".join(bad[:3]),
            )
        )
    return meta, tensors


FLOAT_STORAGE = (torch.float32, torch.float16, torch.bfloat16)


@functools.lru_cache(maxsize=64)
def _architecture(config) -> dict[str, tuple[torch.Size, torch.dtype]]:
    """The name, shape and dtype of every tensor a model of `config` holds, from a model built on
    the meta device (no memory, no initialisation)."""
    with torch.device("meta"):
        model = build_model(config)
    return {k: (v.shape, v.dtype) for k, v in model.state_dict().items()}


@functools.lru_cache(maxsize=256)
def _checked_file(path: str, mtime_ns: int, size: int) -> CheckpointMeta:  # mtime and size key a rewritten file anew
    return _open_checked(Path(path))[0]


def _open(path: Path, with_tensors: bool = False) -> tuple[CheckpointMeta, dict]:
    if not path.exists():
        raise CapsvizError(t("checkpoint {path} does not exist", path=path))
    if not path.is_file():
        raise CapsvizError(t("{path} is not a checkpoint file", path=path))
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as e:
        raise CapsvizError(t("{path}: cannot be read ({why})", path=path, why=e.strerror or e)) from None
    if len(head) < 8:
        raise CapsvizError(
            tn(
                "{path}: not a readable safetensors checkpoint (only {n} byte)",
                "{path}: not a readable safetensors checkpoint (only {n} bytes)",
                len(head),
                path=path,
            )
        )
    header = struct.unpack("<Q", head)[0]
    if header > path.stat().st_size - 8:
        raise CapsvizError(t("{path}: not a readable safetensors checkpoint (its header claims more bytes than the file has)", path=path))
    if header > MAX_HEADER_BYTES:
        raise CapsvizError(
            t("{path}: header of {size} bytes; capsviz reads at most {most}", path=path, size=f"{header:,}", most=f"{MAX_HEADER_BYTES:,}")
        )
    try:
        with safe_open(str(path), framework="pt") as f:
            raw = (f.metadata() or {}).get(META_KEY)
            tensors = {k: f.get_tensor(k) for k in f.keys()} if with_tensors else {}
    except (SafetensorError, OSError, ValueError) as e:
        raise CapsvizError(t("{path}: not a readable safetensors checkpoint ({why})", path=path, why=e)) from None
    if raw is None:
        raise CapsvizError(t("{path}: safetensors file without capsviz metadata; it was not written by capsviz", path=path))
    if len(raw) > MAX_META_BYTES:
        raise CapsvizError(
            t("{path}: capsviz metadata of {n} characters; at most {most}", path=path, n=f"{len(raw):,}", most=f"{MAX_META_BYTES:,}")
        )
    try:
        meta = json.loads(raw, parse_constant=_no_constant)
    except (json.JSONDecodeError, ValueError):
        raise CapsvizError(t("{path}: capsviz metadata is not valid JSON", path=path)) from None
    except RecursionError:
        raise CapsvizError(t("{path}: capsviz metadata is nested too deeply", path=path)) from None
    if not isinstance(meta, dict) or not isinstance(meta.get("config"), dict):
        raise CapsvizError(t("{path}: capsviz metadata has no model config", path=path))
    try:
        found = CheckpointMeta.from_dict(meta)
    except Invalid as e:
        raise CapsvizError(t("{path}: unusable metadata: {why}", path=path, why=e)) from None
    if found.classes:  # class names recorded in a file from anywhere: no bidirectional or zero-width characters
        from dataclasses import replace

        from capsviz.text import bare

        found = replace(found, classes=tuple(bare(c) or "?" for c in found.classes))
    return found, tensors


def _no_constant(name: str):
    """NaN and Infinity are not JSON; Python's parser accepts them unless told not to."""
    raise ValueError(name)


def lineage(path: Path, meta: CheckpointMeta | None = None) -> dict:
    """What a fine-tuning run records about the checkpoint it started from (`meta`, read from
    `path` if not given): its file, digest, run, epochs, time, hardware, metrics, history and,
    for a chain, where that one started."""
    m = (read_meta(path) if meta is None else meta).raw
    keys = ("weights_sha256", "run", "epochs", "training_time_s", "hardware", "metrics", "history", "started_from")
    return {"file": Path(path).name, **{k: m[k] for k in keys if k in m}}


def total_training(meta: CheckpointMeta | dict) -> dict:
    """A checkpoint's training summed over every run it was fine-tuned from (`started_from`),
    oldest first: epochs, seconds, the hardware used, the stages, and one test-error history with
    epochs counted from the very first run. The records of a chain are plain, as stored."""
    chain, m = [], meta.raw if isinstance(meta, CheckpointMeta) else meta
    while isinstance(m, dict) and len(chain) < 100:
        chain.append(m)
        m = m.get("started_from")
    epochs, seconds, hardware, history = 0.0, 0.0, [], []
    for m in reversed(chain):
        for h in m.get("history") or []:
            if isinstance(h, dict) and isinstance(h.get("epoch"), int | float):
                history.append(dict(h, epoch=epochs + h["epoch"]))
        epochs += float(m.get("epochs") or 0)
        seconds += float(m.get("training_time_s") or 0)
        said = m.get("hardware")
        imported = m.get("imported")
        if isinstance(imported, dict) and isinstance(imported.get("file"), str):  # said in the reader's language, not the import's
            said = t("trained outside capsviz (imported from {file})", file=imported["file"])
        if said and said not in hardware:
            hardware.append(said)
    stages = [float(m.get("epochs") or 0) for m in reversed(chain)]
    return {"epochs": epochs, "training_time_s": seconds, "hardware": hardware, "history": history, "stages": stages}


def training_labels(total: dict, unit: bool = False) -> tuple[str, str]:
    """(epochs, hardware) of a `total_training` result as the zoo and `capsviz list` print them, in
    the reader's language: "10 (8 + 2, fine-tuned)" ("10 epochs (8 + 2, fine-tuned)" with `unit`)
    and "<first machine>, then <second>"."""
    said = dict(epochs=f"{round(total['epochs'], 1):g}", stages=" + ".join(f"{round(e, 1):g}" for e in total["stages"]))
    if len(total["stages"]) > 1:
        epochs = t("{epochs} epochs ({stages}, fine-tuned)", **said) if unit else t("{epochs} ({stages}, fine-tuned)", **said)
    else:
        one = 1 if said["epochs"] == "1" else 2  # "1 epoch", "0.5 epochs", "12 epochs"
        epochs = tn("{epochs} epoch", "{epochs} epochs", one, **said) if unit else said["epochs"]
    return epochs, functools.reduce(
        lambda first, then: t("{first}, then {then}", first=first, then=then), total["hardware"] or [t("machine not recorded")]
    )


def list_checkpoints(folder: Path) -> list[tuple[Path, CheckpointMeta | str]]:
    """Every *.safetensors under folder with its metadata, or the error that stops it loading
    (everything `load_checkpoint` checks short of building the model). The app lists the folder
    several times on every rerun of every session: the listing is made once per state of the
    folder (its files' names, times and sizes), and its metadata objects are shared, not to be
    changed by callers."""
    files = []
    try:
        with os.scandir(folder) as entries:  # a third of Path.glob's time: this runs on every page run
            found = sorted((e.name, e) for e in entries if e.name.endswith(".safetensors"))
    except OSError:
        found = []
    for name, entry in found:
        path = os.path.join(folder, name)
        try:
            st = entry.stat()
            files.append((path, st.st_mtime_ns, st.st_size))
        except OSError:
            files.append((path, 0, -1))  # gone, or unreadable: _listing says which
    return list(_listing(tuple(files), language()))


@functools.lru_cache(maxsize=32)
def _listing(files: tuple[tuple[str, int, int], ...], lang: str) -> tuple[tuple[Path, CheckpointMeta | str], ...]:
    """The listing of `files`, its reasons in `lang` (the language they are made in: a key of the cache)."""
    out = []
    for name, mtime_ns, size in files:
        p = Path(name)
        try:
            out.append((p, _checked_file(name, mtime_ns, size) if size >= 0 else _open(p)[0]))
        except CapsvizError as e:
            out.append((p, str(e)))
    return tuple(out)
