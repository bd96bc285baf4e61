"""Sweep results kept on disk: a sweep over hundreds of images runs once per model file and
settings, then answers at once.

A sweep is a pure function of the model's weights, the test images and its settings, so a stored
result holds the numbers a new run would give. Its key is a digest of the model file and the
settings: a retrained model never meets an old result. Results are read from two folders: the
ones that ship with the shipped models (checkpoints/sweeps/, written by
`python -m capsviz.analysis.stored`), and the ones computed on this machine (the cache folder).
A stored file is data only (JSON of numbers), checked before use; a damaged one is ignored and the
sweep runs again.

    python -m capsviz.analysis.stored          # the pages' default sweeps for every shipped model
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import sys
from pathlib import Path

from capsviz.paths import atomic_write, cache_dir

MAX_BYTES = 1 << 20  # a stored result is a few hundred numbers
MAX_VALUES = 10_000
MAX_TEXT = 200

# The pages' default sweeps, shared with the precomputation below.
ATTACK_EPSILONS = [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3]
ATTACK_IMAGES = 100
AFFINE_STRENGTHS = [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0]
AFFINE_IMAGES = 500


def shipped_folder() -> Path:
    from capsviz.paths import shipped_checkpoints

    return shipped_checkpoints() / "sweeps"


def local_folder() -> Path:
    return cache_dir() / "sweeps"


@functools.lru_cache(maxsize=64)
def _digest(path: str, mtime_ns: int, size: int) -> str:  # mtime and size key a rewritten file anew
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_digest(path: Path) -> str:
    st = os.stat(path)
    return _digest(str(Path(path).resolve()), st.st_mtime_ns, st.st_size)


def sweep_key(model_path: Path, kind: str, settings: dict) -> str:
    """One name per (model file, sweep kind, settings)."""
    spec = json.dumps({"model": file_digest(model_path), "kind": kind, "settings": settings}, sort_keys=True)
    return f"{kind}-{hashlib.sha256(spec.encode()).hexdigest()[:32]}"


def _valid(value) -> bool:
    """A dict of names to finite numbers, lists of finite numbers or short printable text (a
    machine's name), and nothing else."""
    if not isinstance(value, dict) or not value:
        return False
    count = 0
    for name, v in value.items():
        if isinstance(v, str) and len(v) <= MAX_TEXT and v.isprintable():
            continue
        items = v if isinstance(v, list) else [v]
        count += len(items)
        if not isinstance(name, str) or count > MAX_VALUES:
            return False
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in items):
            return False
    return True


def read(key: str, folders: list[Path] | None = None) -> dict | None:
    """The stored result for `key`, or None where there is none or it is not a valid result."""
    for folder in folders or [shipped_folder(), local_folder()]:
        path = folder / f"{key}.json"
        try:
            if path.stat().st_size > MAX_BYTES:
                continue
            value = json.loads(path.read_text())
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        if _valid(value):
            return value
    return None


def write(key: str, value: dict, folder: Path | None = None) -> None:
    """Store a result (never a half-written file); a folder that cannot be written only costs speed."""
    if not _valid(value):
        raise ValueError(f"not a sweep result: {value!r:.200}")
    text = json.dumps(value)
    try:
        atomic_write((folder or local_folder()) / f"{key}.json", lambda tmp: Path(tmp).write_text(text))
    except OSError:
        pass


def remembered(key: str, compute, folders: list[Path] | None = None, into: Path | None = None) -> tuple[dict, bool]:
    """(result, whether it was stored): the stored result for `key`, else compute() stored."""
    value = read(key, folders)
    if value is not None:
        return value, True
    value = compute()
    write(key, value, into)
    return value, False


def attack_settings(dataset: str, method: str, targeted: bool, n: int, epsilons) -> dict:
    return {"dataset": dataset, "method": method, "targeted": bool(targeted), "images": int(n), "epsilons": [float(e) for e in epsilons]}


def affine_settings(dataset: str, size: int, n: int, strengths) -> dict:
    return {"dataset": dataset, "size": int(size), "images": int(n), "strengths": [float(s) for s in strengths]}


def precompute(folder: Path, out: Path, data_dir=None) -> list[str]:
    """The pages' default sweeps (attacks: FGSM and BIM, untargeted and targeted; the affine
    sweep) for every capsule and CNN model in `folder` at 28x28 on MNIST-like data; returns the
    files written."""
    import time

    import torch

    from capsviz.analysis.robustness import affine_sweep, attack_sweep, attack_test_images
    from capsviz.checkpoint import list_checkpoints, load_checkpoint
    from capsviz.data import DATASETS, load_split

    written = []
    for path, meta in list_checkpoints(folder):
        if isinstance(meta, str) or meta.config.in_size != 28 or DATASETS[meta.image_dataset].in_size != 28:
            continue
        dataset = meta.image_dataset
        model, _ = load_checkpoint(path)
        data = load_split(dataset, "test", data_dir)
        for method in ("fgsm", "bim"):
            for targeted in (False, True):
                x, y = attack_test_images(data, ATTACK_IMAGES, 28)
                key = sweep_key(path, "attack", attack_settings(dataset, method, targeted, ATTACK_IMAGES, ATTACK_EPSILONS))
                t = time.perf_counter()
                curve = attack_sweep(model, x, y, ATTACK_EPSILONS, method=method, targeted=targeted)
                write(key, curve.as_dict(), out)
                written.append(key)
                print(f"{path.name}: {method}{' targeted' if targeted else ''}: {time.perf_counter() - t:.1f} s", file=sys.stderr)
        key = sweep_key(path, "affine", affine_settings(dataset, 28, AFFINE_IMAGES, AFFINE_STRENGTHS))
        with torch.no_grad():
            acc = affine_sweep({"m": model}, data.images[:AFFINE_IMAGES], data.labels[:AFFINE_IMAGES], 28, AFFINE_STRENGTHS)["m"]
        write(key, {"accuracy": acc}, out)
        written.append(key)
    return written


if __name__ == "__main__":
    from capsviz.paths import shipped_checkpoints

    target = shipped_folder()
    names = precompute(shipped_checkpoints(), target)
    print(f"{len(names)} results in {target}")
