"""Checkpoints: safetensors weights with everything needed to rebuild and judge the model in
their metadata. Loading never executes code; every way a file can be wrong is a CapsvizError.

Beside each `model.safetensors` a resumable run keeps `model.safetensors.train.pt` (optimizer,
schedule position, RNG state), read back with `torch.load(weights_only=True)` and validated. The
two are one unit: the state records the digest of the weights saved with it, and `save_run`
writes them so that a crash at any point leaves a pair that belongs together (see there).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import math
import os
import pickle
import shutil
import struct
import tempfile
import unicodedata
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from capsviz import __version__, paths
from capsviz.config import to_dict
from capsviz.errors import CapsvizError
from capsviz.i18n import t
from capsviz.models import build_model, count_parameters
from capsviz.paths import atomic_write, lock_file, partial_files, remove_partial
from capsviz.schema import MAX_META_BYTES, CheckpointMeta, Invalid, check_train_state

META_KEY = "capsviz"
# A safetensors header is the metadata plus ~100 bytes per tensor; anything larger is refused
# before it is read, so a file cannot make a page or `capsviz list` parse megabytes of JSON.
MAX_HEADER_BYTES = MAX_META_BYTES + 1_000_000


def weights_digest(tensors: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        h.update(name.encode())
        h.update(str(t.dtype).encode())
        # flattened first: a 0-d tensor (BatchNorm's num_batches_tracked) cannot be viewed as bytes
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def save_checkpoint(path: Path, model: torch.nn.Module, meta: dict, half: bool = False) -> str:
    """Weights (float16 when `half`) plus meta: config, dataset, epochs, metrics, time, hardware.
    Returns the weights' digest. A failed write leaves the previous file as it was."""
    tensors = {k: (v.half() if half and v.is_floating_point() else v).detach().contiguous().cpu() for k, v in model.state_dict().items()}
    digest = weights_digest(tensors)
    full = dict(meta, config=to_dict(model.config), parameters=count_parameters(model), capsviz_version=__version__, weights_sha256=digest)
    with _saving(path):
        atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata={META_KEY: json.dumps(full)}))
    return digest


@contextmanager
def _saving(path: Path):
    """An OSError while writing (disk full, permission, folder gone) as one CapsvizError that says
    the previous file is untouched (atomic_write has removed its partial file)."""
    try:
        yield
    except OSError as e:
        raise CapsvizError(f"could not save {path} ({e.strerror or e}); the previous checkpoint there is unchanged") from None


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
        raise CapsvizError(f"{path}: weights do not match the digest recorded when it was saved (the file was modified or damaged)")
    expected = _architecture(meta.config)
    for name in sorted(expected.keys() | tensors.keys()):
        if name not in tensors:
            raise CapsvizError(f"{path}: weights do not fit a {meta.family} model with this config: {name} is missing")
        if name not in expected:
            raise CapsvizError(f"{path}: weights do not fit a {meta.family} model with this config: {name} is not part of it")
        shape, dtype = expected[name]
        t = tensors[name]
        if tuple(t.shape) != tuple(shape):
            raise CapsvizError(
                f"{path}: weights do not fit a {meta.family} model with this config: {name} has shape {tuple(t.shape)}, "
                f"the model needs {tuple(shape)}"
            )
        # floats may be stored at any float precision (export writes float16); anything else exactly as the model keeps it
        if (t.dtype not in FLOAT_STORAGE) if dtype.is_floating_point else t.dtype != dtype:
            need = "a float tensor" if dtype.is_floating_point else str(dtype).removeprefix("torch.")
            raise CapsvizError(
                f"{path}: weights do not fit a {meta.family} model with this config: {name} is stored as "
                f"{str(t.dtype).removeprefix('torch.')}, the model needs {need}"
            )
    bad = [k for k, v in tensors.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        raise CapsvizError(
            f"{path}: weights hold NaN or infinite values ({', '.join(bad[:3])}); the model it holds diverged and cannot be used"
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
        raise CapsvizError(f"checkpoint {path} does not exist")
    if not path.is_file():
        raise CapsvizError(f"{path} is not a checkpoint file")
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as e:
        raise CapsvizError(f"{path}: cannot be read ({e.strerror or e})") from None
    if len(head) < 8:
        raise CapsvizError(f"{path}: not a readable safetensors checkpoint (only {len(head)} bytes)")
    header = struct.unpack("<Q", head)[0]
    if header > path.stat().st_size - 8:
        raise CapsvizError(f"{path}: not a readable safetensors checkpoint (its header claims more bytes than the file has)")
    if header > MAX_HEADER_BYTES:
        raise CapsvizError(f"{path}: header of {header:,} bytes; capsviz reads at most {MAX_HEADER_BYTES:,}")
    try:
        with safe_open(str(path), framework="pt") as f:
            raw = (f.metadata() or {}).get(META_KEY)
            tensors = {k: f.get_tensor(k) for k in f.keys()} if with_tensors else {}
    except (SafetensorError, OSError, ValueError) as e:
        raise CapsvizError(f"{path}: not a readable safetensors checkpoint ({e})") from None
    if raw is None:
        raise CapsvizError(f"{path}: safetensors file without capsviz metadata; it was not written by capsviz")
    if len(raw) > MAX_META_BYTES:
        raise CapsvizError(f"{path}: capsviz metadata of {len(raw):,} characters; at most {MAX_META_BYTES:,}")
    try:
        meta = json.loads(raw, parse_constant=_no_constant)
    except (json.JSONDecodeError, ValueError):
        raise CapsvizError(f"{path}: capsviz metadata is not valid JSON") from None
    except RecursionError:
        raise CapsvizError(f"{path}: capsviz metadata is nested too deeply") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("config"), dict):
        raise CapsvizError(f"{path}: capsviz metadata has no model config")
    try:
        found = CheckpointMeta.from_dict(meta)
    except Invalid as e:
        raise CapsvizError(f"{path}: unusable metadata: {e}") from None
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
        if m.get("hardware") and m["hardware"] not in hardware:
            hardware.append(m["hardware"])
    stages = [float(m.get("epochs") or 0) for m in reversed(chain)]
    return {"epochs": epochs, "training_time_s": seconds, "hardware": hardware, "history": history, "stages": stages}


def training_labels(total: dict, unit: str = "") -> tuple[str, str]:
    """(epochs, hardware) of a `total_training` result as the zoo and `capsviz list` print them:
    "10<unit> (8 + 2, fine-tuned)" and "<first machine>, then <second>"."""
    epochs = f"{round(total['epochs'], 1):g}{unit}"
    if len(total["stages"]) > 1:
        epochs = t("{epochs} ({stages}, fine-tuned)", epochs=epochs, stages=" + ".join(f"{round(e, 1):g}" for e in total["stages"]))
    return epochs, t(", then ").join(total["hardware"]) or "?"


# The models that come with capsviz (checkpoints/; RESULTS.md says how each was trained). No
# writer ever writes a file of these names in the shipped folder or the app's model folder.
SHIPPED = frozenset(
    {
        "capsnet-fashion-mnist",
        "capsnet-mnist",
        "capsnet-multimnist",
        "capsnet-one-iteration-mnist",
        "capsnet-small-mnist",
        "capsnet-small-multimnist",
        "capsnet-small-random-mnist",
        "capsnet-small-random-multimnist",
        "capsnet-small-uniform-mnist",
        "capsnet-small-uniform-multimnist",
        "cnn-small-mnist",
        "efficient-capsnet-mnist",
        "matrix-small-mnist",
    }
)


def is_shipped(path: Path) -> bool:
    """Whether `path` is one of the shipped models: in the shipped folder, or the copy in the app's
    model folder. Names compare without case: on macOS and Windows disks they are the same file."""
    path = Path(path)
    if path.suffix != ".safetensors" or path.stem.lower() not in SHIPPED:
        return False
    folder = path.parent.resolve()
    return folder in (paths.shipped_checkpoints().resolve(), paths.checkpoint_dir().resolve())


MAX_NAME = 64  # characters of a model's name
# Letters that look like Latin ones in most fonts (Cyrillic, Greek), and Latin letters and digits
# that look like each other, each sent to one stand-in: two names with the same `skeleton` are
# confusable. Fullwidth and other compatibility forms are folded by NFKC before this.
_LOOKALIKE = str.maketrans(
    {
        **dict.fromkeys("аɑα", "a"),
        **dict.fromkeys("ьƅв", "b"),
        **dict.fromkeys("сϲ", "c"),
        **dict.fromkeys("ԁ", "d"),
        **dict.fromkeys("еєε", "e"),
        **dict.fromkeys("һ", "h"),
        **dict.fromkeys("іıιї1|ӏ", "l"),
        **dict.fromkeys("јϳ", "j"),
        **dict.fromkeys("кκ", "k"),
        **dict.fromkeys("м", "m"),
        **dict.fromkeys("пη", "n"),
        **dict.fromkeys("оοσ0", "o"),
        **dict.fromkeys("рρ", "p"),
        **dict.fromkeys("ԛ", "q"),
        **dict.fromkeys("ѕ5", "s"),
        **dict.fromkeys("тτ", "t"),
        **dict.fromkeys("υս", "u"),
        **dict.fromkeys("νѵ", "v"),
        **dict.fromkeys("ԝω", "w"),
        **dict.fromkeys("хχ", "x"),
        **dict.fromkeys("уγ", "y"),
        **dict.fromkeys("2", "z"),
        **dict.fromkeys("_", "-"),
        "i": "l",
    }
)


def skeleton(name: str) -> str:
    """What a name looks like: NFKC, casefolded, look-alike letters made one, "rn" as "m",
    "vv" as "w". Two names with one skeleton are confusable."""
    folded = unicodedata.normalize("NFKC", name).casefold().translate(_LOOKALIKE)
    return folded.replace("rn", "m").replace("vv", "w")


def model_stem(text: str, existing=()) -> str:
    """The file stem a "Save as" text gives: NFKC-normalised, letters (any script), digits, '-'
    and '_' only, at most MAX_NAME characters. Raises CapsvizError when nothing usable is left,
    another character is in it, the name is a shipped model's, or it is confusable with one of
    `existing` (stems of the models there) without being that very name. Spaces become '-'."""
    name = "-".join(unicodedata.normalize("NFKC", str(text)).split())
    if not name:
        raise CapsvizError("Give the model a name made of letters, digits, '-' or '_'.")
    odd = sorted({ch for ch in name if not (ch in "-_" or unicodedata.category(ch)[0] == "L" or unicodedata.category(ch) == "Nd")})
    if odd:
        shown = " ".join(repr(ch) if ch.isprintable() and not ch.isspace() else f"U+{ord(ch):04X}" for ch in odd[:5])
        raise CapsvizError(f"A model's name is made of letters, digits, '-' and '_' only, not {shown}.")
    if len(name) > MAX_NAME:
        raise CapsvizError(f"A model's name is at most {MAX_NAME} characters long; this one has {len(name)}.")
    if name.strip("-_") != name or not name.strip("-_"):
        raise CapsvizError("A model's name starts and ends with a letter or a digit.")
    look = skeleton(name)
    for other in sorted(SHIPPED) + sorted(existing):
        if name.lower() in SHIPPED:  # lower: on a case-insensitive disk (macOS, Windows) it is the same file
            raise CapsvizError(f"{name} is one of the models that come with capsviz and cannot be replaced; choose a new name.")
        if other != name and skeleton(other) == look:
            raise CapsvizError(f"{name} looks like {other}, a model already there; choose a name that looks different.")
    return name


def pending_path(target: Path) -> Path:
    """Where a run that is to replace the model at `target` saves until it has finished and been
    evaluated: `name.new.safetensors` beside it."""
    target = Path(target)
    return target.with_name(f"{target.stem}.new{target.suffix}")


def latest_save(target: Path) -> Path:
    """Where the run that writes `target` saved last: the run waiting to replace it, else `target`."""
    pending = pending_path(target)
    return pending if pending.exists() else Path(target)


@dataclass(frozen=True)
class WritePlan:
    """Where a writer saves (`work`) and the model it is for (`target`); the two differ when the
    run is to replace a model already there, which `promote` does once the run is finished."""

    target: Path
    work: Path

    @property
    def replaces(self) -> bool:
        return self.work != self.target


def plan_write(target: Path, *, resume: Path | None = None, replace: bool = False, flag: str = "--out") -> WritePlan:
    """The one rule every writer of a model follows (`capsviz train`, `export`, the Train page):

    - a shipped model is never written;
    - a model already at `target` is replaced only on an explicit request: `replace`, or a resume
      of its own run (`resume` is `target` or the run waiting to replace it, `pending_path`), and
      even then only once the new run has finished and been evaluated: until then the run saves to
      `pending_path(target)` (`work`), and `promote` moves it over the old model at the end;
    - an unfinished run waiting to replace `target` is continued, never started over.
    Raises CapsvizError, in one line saying what to do, when the write is refused."""
    target = Path(target)
    if target.is_dir():
        raise CapsvizError(f"{flag} {target} is a folder; name the checkpoint file to write, e.g. {target / 'model.safetensors'}")
    if is_shipped(target):
        raise CapsvizError(f"{target.name} is a model that comes with capsviz and is never overwritten; choose another {flag}")
    pending = pending_path(target)
    same = resume is not None and Path(resume).resolve() in (target.resolve(), pending.resolve())
    if not target.exists():
        return WritePlan(target, target)
    if not (same or replace):
        raise CapsvizError(
            f"{target} already holds a model ({describe(target)}); add --replace to replace it once the new run has finished "
            f"and been evaluated, or choose another {flag}"
        )
    if pending.exists() and (resume is None or Path(resume).resolve() != pending.resolve()):
        raise CapsvizError(
            f"an unfinished run that is to replace {target.name} is saved at {pending}; continue it with --resume {pending}, "
            "or delete that file to start again"
        )
    return WritePlan(target, pending)


def describe(path: Path) -> str:
    """A few words on the model in a file, for messages: epochs and test error, or why it is unusable."""
    try:
        meta = read_meta(path)
    except CapsvizError:
        return "a file capsviz cannot read"
    m = meta.metrics
    error = f"{m.test_error:.2f}% test error" if m.measured else "not evaluated"
    return f"{meta.family}, {round(meta.epochs or 0, 1):g} epochs, {error}"


def promote(plan: WritePlan) -> None:
    """Move a finished run's pair from `plan.work` over the model at `plan.target`, in the order
    `save_run` uses (state to `.next`, weights, then state), so a crash at any point leaves a pair
    that belongs together and `recover` completes the move. Call with the target's writer lock held."""
    if not plan.replaces:
        return
    work_state, nxt = train_state_path(plan.work), _next_state_path(plan.target)
    if work_state.exists():
        os.replace(work_state, nxt)
    else:
        train_state_path(plan.target).unlink(missing_ok=True)  # a state left there would belong to the old weights
    os.replace(plan.work, plan.target)
    if nxt.exists():
        os.replace(nxt, train_state_path(plan.target))


def train_state_path(path: Path) -> Path:
    return Path(str(path) + ".train.pt")


def _next_state_path(path: Path) -> Path:
    """Where the new training state waits while its weights are renamed into place."""
    return Path(str(path) + ".train.pt.next")


def save_run(path: Path, model: torch.nn.Module, meta: dict, state: dict) -> None:
    """Weights and training state saved as one unit, tied by the weights' digest.

    Order: (1) the state, with the digest of the weights about to be written, to `.train.pt.next`;
    (2) the weights over `path`; (3) `.next` over `.train.pt`. A crash before (2) leaves the
    previous pair (and a `.next` that matches nothing, removed by `recover`); a crash between (2)
    and (3) leaves new weights whose state waits in `.next` (`load_train_state` finds it,
    `recover` completes the rename). Every step is an atomic rename of a synced file."""
    path = Path(path)
    tensors = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    state = dict(state, weights_sha256=weights_digest(tensors))
    nxt = _next_state_path(path)
    with _saving(path):
        try:
            atomic_write(nxt, lambda tmp: torch.save(state, tmp))
            save_checkpoint(path, model, meta)
        except BaseException:
            nxt.unlink(missing_ok=True)
            raise
        os.replace(nxt, train_state_path(path))


def recover(path: Path) -> None:
    """Tidy what an interrupted `save_run` or `promote` left at `path` and at the run waiting to
    replace it (call with the writer lock of `path` held): partial files are removed, and a waiting
    `.next` state is renamed into place if it belongs to the weights there, removed otherwise."""
    path, pending = Path(path), pending_path(path)
    for p in (path, pending):
        for part in partial_files(p):  # the state's partial files too: `.name.train.pt.*.part`
            remove_partial(part)
    _settle(pending, (pending,))
    _settle(path, (path, pending))


def _settle(path: Path, owners: tuple[Path, ...]) -> None:
    """The `.next` state waiting at `path` goes beside the first of `owners` whose weights it belongs to, or away."""
    nxt = _next_state_path(path)
    if not nxt.exists():
        return
    try:
        state = _read_state(nxt)
    except CapsvizError:
        state = {}
    for weights in owners:
        home = train_state_path(weights)
        try:
            digest = read_meta(weights).weights_sha256 if weights.exists() else None
        except CapsvizError:
            digest = None
        if digest is not None and state.get("weights_sha256") == digest:  # a `promote` stopped half-way sends it back
            os.replace(nxt, home)
            return
    nxt.unlink(missing_ok=True)


def _read_state(p: Path) -> dict:
    """A training state file through torch's safe loader and the schema, as one line on failure."""
    try:
        state = torch.load(p, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:  # torch's message quotes advice to load the file unsafely: never shown
        raise CapsvizError(f"{p}: holds Python objects a safe load refuses; it is not a capsviz training state") from None
    except Exception as e:  # noqa: BLE001 - any other failure to read means a bad file
        first = (str(e).strip().splitlines() or [""])[0][:200]
        raise CapsvizError(f"{p}: cannot be read as a capsviz training state ({type(e).__name__}: {first})") from None
    if isinstance(state, dict) and "weights_sha256" not in state and "optimizer" in state:
        raise CapsvizError(
            f"{p}: saved by an older capsviz, without the digest that ties it to its weights, so resuming it "
            f"cannot be checked; start a new run from these weights with --init-from {str(p)[: -len('.train.pt')]}"
        )
    try:
        check_train_state(state)
    except Invalid as e:
        raise CapsvizError(f"{p}: unusable training state: {e}") from None
    return state


def load_train_state(path: Path, weights_sha256: str | None = None) -> dict:
    """The validated training state saved with the weights at `path`. `weights_sha256` (the
    weights' digest, read from the file when not given) must be the one the state records: a
    state from another save would resume with a schedule, optimizer and data position that do
    not belong to these weights."""
    path = Path(path)
    p = train_state_path(path)
    if not p.is_file() and not _next_state_path(path).is_file():
        raise CapsvizError(f"{p} not found: only runs saved by `capsviz train` can be resumed")
    state = _read_state(p) if p.is_file() else None
    digest = weights_sha256 or read_meta(path).weights_sha256
    if state is not None and state["weights_sha256"] == digest:
        return state
    nxt = _next_state_path(path)
    if nxt.is_file():  # a save stopped between renaming the weights and the state
        waiting = _read_state(nxt)
        if waiting["weights_sha256"] == digest:
            return waiting
    raise CapsvizError(
        f"{p} does not belong to the weights in {path} (they were saved by different runs or an interrupted copy); "
        f"resuming would not continue either run exactly. Start a new run from these weights with --init-from {path}"
    )


@contextmanager
def writer_lock(path: Path):
    """One writer per checkpoint: an exclusive lock on `.<name>.lock` beside it, held until the
    block ends. The kernel drops it when the process dies, so a killed run never blocks the next."""
    path = Path(path)
    lock = path.parent / f".{path.name}.lock"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise CapsvizError(f"cannot write in {path.parent} ({e.strerror or e}); choose another --out") from None
    try:
        try:
            lock_file(fd, wait=False)
        except BlockingIOError:
            pid = _read_pid(fd)
            raise CapsvizError(
                f"{path} is being written by another capsviz run (process {pid}); wait for it to finish or choose another --out"
            ) from None
        except OSError as e:  # a filesystem without locks (some network mounts)
            raise CapsvizError(f"cannot lock {lock} ({e.strerror or e}); choose an --out on a local disk") from None
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, str(os.getpid()).encode())
        yield
    finally:
        os.close(fd)


def _read_pid(fd: int) -> str:
    """The holder's process id, as it wrote it ("?" where the lock keeps it from being read)."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        return os.read(fd, 32).decode(errors="replace").strip() or "?"
    except OSError:
        return "?"


def check_room(path: Path, need_bytes: int) -> None:
    """Before an epoch: the folder must take new files and have room for a new pair (the old one
    stays until the new one is complete), so a full disk is found before the work, not after."""
    path = Path(path)
    folder = path.parent
    if path.is_dir():
        raise CapsvizError(f"{path} is a folder; name the checkpoint file to write, e.g. {path / 'model.safetensors'}")
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".part")
        os.close(fd)
        os.unlink(probe)
        free = shutil.disk_usage(folder).free
    except OSError as e:
        raise CapsvizError(f"cannot write in {folder} ({e.strerror or e}); choose another --out") from None
    if free < need_bytes:
        raise CapsvizError(
            f"{folder} has {free / 1e6:.0f} MB free; saving {path.name} needs about {math.ceil(need_bytes / 1e6)} MB. "
            "Free some space or choose another --out"
        )


def pair_bytes(model: torch.nn.Module) -> int:
    """About what `save_run` writes: the weights, the optimizer's two moments (Adam), and a margin."""
    weights = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    return 4 * weights + (1 << 20)


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
    return list(_listing(tuple(files)))


@functools.lru_cache(maxsize=32)
def _listing(files: tuple[tuple[str, int, int], ...]) -> tuple[tuple[Path, CheckpointMeta | str], ...]:
    out = []
    for name, mtime_ns, size in files:
        p = Path(name)
        try:
            out.append((p, _checked_file(name, mtime_ns, size) if size >= 0 else _open(p)[0]))
        except CapsvizError as e:
            out.append((p, str(e)))
    return tuple(out)
