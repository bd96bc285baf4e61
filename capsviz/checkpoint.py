"""Checkpoints: safetensors weights with everything needed to rebuild and judge the model in
their metadata. Loading never executes code; every way a file can be wrong is a CapsvizError.

Beside each `model.safetensors` a resumable run keeps `model.safetensors.train.pt` (optimizer,
schedule position, RNG state), read back with `torch.load(weights_only=True)`.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from capsviz import __version__
from capsviz.config import config_from_dict, to_dict
from capsviz.errors import CapsvizError
from capsviz.models import build_model, count_parameters

META_KEY = "capsviz"


def weights_digest(tensors: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        h.update(name.encode())
        h.update(str(t.dtype).encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def atomic_write(path: Path, write) -> None:
    """write(tmp_path) then rename over `path`: a crash never leaves a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    os.close(fd)
    try:
        write(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would hide the file from other users
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_checkpoint(path: Path, model: torch.nn.Module, meta: dict, half: bool = False) -> None:
    """Weights (float16 when `half`) plus meta: config, dataset, epochs, metrics, time, hardware."""
    tensors = {k: (v.half() if half and v.is_floating_point() else v).detach().contiguous().cpu() for k, v in model.state_dict().items()}
    full = dict(
        meta,
        config=to_dict(model.config),
        parameters=count_parameters(model),
        capsviz_version=__version__,
        weights_sha256=weights_digest(tensors),
    )
    atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata={META_KEY: json.dumps(full)}))


def read_meta(path: Path) -> dict:
    """The metadata alone (cheap: reads the header only)."""
    return _open(Path(path))[0]


def load_checkpoint(path: Path, device="cpu") -> tuple[torch.nn.Module, dict]:
    """Rebuild the model from the file alone, in float32 and eval mode, and its metadata."""
    path = Path(path)
    meta, tensors = _open(path, with_tensors=True)
    if weights_digest(tensors) != meta.get("weights_sha256"):
        raise CapsvizError(f"{path}: weights do not match the digest recorded when it was saved (the file was modified or damaged)")
    model = build_model(config_from_dict(meta.get("config")))
    state = {k: v.float() if v.is_floating_point() else v for k, v in tensors.items()}
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        first = str(e).strip().splitlines()
        raise CapsvizError(
            f"{path}: weights do not fit a {meta['config'].get('family')} model with this config ({first[0]} {first[1] if len(first) > 1 else ''})"
        ) from None
    return model.to(device).eval(), meta


def _open(path: Path, with_tensors: bool = False) -> tuple[dict, dict]:
    if not path.is_file():
        raise CapsvizError(f"checkpoint {path} does not exist")
    try:
        with safe_open(str(path), framework="pt") as f:
            raw = (f.metadata() or {}).get(META_KEY)
            tensors = {k: f.get_tensor(k) for k in f.keys()} if with_tensors else {}
    except (SafetensorError, OSError, ValueError) as e:
        raise CapsvizError(f"{path}: not a readable safetensors checkpoint ({e})") from None
    if raw is None:
        raise CapsvizError(f"{path}: safetensors file without capsviz metadata; it was not written by capsviz")
    try:
        meta = json.loads(raw)
    except json.JSONDecodeError:
        raise CapsvizError(f"{path}: capsviz metadata is not valid JSON") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("config"), dict):
        raise CapsvizError(f"{path}: capsviz metadata has no model config")
    return meta, tensors


def lineage(path: Path, meta: dict | None = None) -> dict:
    """What a fine-tuning run records about the checkpoint it started from (`meta`, read from
    `path` if not given): its file, digest, run, epochs, time, hardware, metrics, history and,
    for a chain, where that one started."""
    m = read_meta(path) if meta is None else meta
    keys = ("weights_sha256", "run", "epochs", "training_time_s", "hardware", "metrics", "history", "started_from")
    return {"file": Path(path).name, **{k: m[k] for k in keys if k in m}}


def total_training(meta: dict) -> dict:
    """A checkpoint's training summed over every run it was fine-tuned from (`started_from`),
    oldest first: epochs, seconds, the hardware used, the stages, and one test-error history with
    epochs counted from the very first run."""
    chain, m = [], meta
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
        epochs += " (" + " + ".join(f"{round(e, 1):g}" for e in total["stages"]) + ", fine-tuned)"
    return epochs, ", then ".join(total["hardware"]) or "?"


def train_state_path(path: Path) -> Path:
    return Path(str(path) + ".train.pt")


def save_train_state(path: Path, state: dict) -> None:
    atomic_write(train_state_path(path), lambda tmp: torch.save(state, tmp))


def load_train_state(path: Path) -> dict:
    p = train_state_path(path)
    if not p.is_file():
        raise CapsvizError(f"{p} not found: only runs saved by `capsviz train` can be resumed")
    try:
        return torch.load(p, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unpickling failure means a bad file
        raise CapsvizError(f"{p}: cannot be read as a capsviz training state ({type(e).__name__}: {e})") from None


def list_checkpoints(folder: Path) -> list[tuple[Path, dict | str]]:
    """Every *.safetensors under folder with its metadata, or the error that stops it loading."""
    out = []
    for p in sorted(Path(folder).glob("*.safetensors")):
        try:
            out.append((p, read_meta(p)))
        except CapsvizError as e:
            out.append((p, str(e)))
    return out
