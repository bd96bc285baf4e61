"""The chapter's sweeps kept on disk (capsviz.analysis.stored): which models it shows, the CNN set
beside a capsule model, each sweep read where stored and run otherwise, and every shipped model's
sweeps run (`precompute`) or put into words (`stored_sentences`)."""

from __future__ import annotations

from pathlib import Path

import torch

from capsviz import registry
from capsviz.analysis import rules, stored
from capsviz.analysis.why.changes import ANGLES, SCHEMES, SHIFTS
from capsviz.analysis.why.measuring import invariance_sweep, parts_sweep, viewpoint_sweep
from capsviz.analysis.why.sentences import invariance_words, parts_words, viewpoint_words

WHY_IMAGES = 1000  # test images per sweep: a rate on 1,000 has a chance band of about ±1 point at 99%


def chapter_kind(config) -> str:
    """Which of the chapter's arguments a model of `config` is measured on, as its family's entry
    says (capsviz.entries.Family.why): "vector", "matrix", or "" (none, and for an unregistered family)."""
    entry = registry.FAMILIES.get(getattr(config, "family", None))
    return entry.why if entry is not None else ""


def vector_fits(meta) -> bool:
    """Whether a checkpoint is a vector-capsule model the chapter can show: class capsules with a
    decoder (the reconstruction following the digit) on single 28x28 digits or clothes."""
    cfg = meta.config
    return chapter_kind(cfg) == "vector" and bool(getattr(cfg, "decodes", False)) and cfg.in_size == 28


def matrix_fits(meta) -> bool:
    """Whether a checkpoint is a matrix-capsule model on 28x28 single images."""
    return chapter_kind(meta.config) == "matrix" and meta.config.in_size == 28


def baseline_for(meta, listing) -> Path | None:
    """The baseline CNN to set beside a capsule model: the first model of a baseline family
    (capsviz.entries.Family.baseline) in `listing` ((path, meta) pairs; a meta may be an error
    string) trained on the same images at the same size, else None."""
    for path, other in listing:
        if isinstance(other, str):
            continue
        entry = registry.FAMILIES.get(other.config.family)
        if entry is None or not entry.baseline:
            continue
        if other.image_dataset == meta.image_dataset and other.config.in_size == meta.config.in_size:
            return path
    return None


SWEEP_VERSION = 1  # raised whenever a sweep measures differently: stored results of an older one are not read


def _settings(dataset: str, n: int, cnn_path: Path | None = None) -> dict:
    settings = {
        "version": SWEEP_VERSION,
        "dataset": dataset,
        "images": int(n),
        "shifts": list(SHIFTS),
        "angles": list(ANGLES),
        "step": rules.DIM_STEP,
    }
    if cnn_path is not None:
        settings["cnn"] = stored.file_digest(cnn_path)
    return settings


def kept_sweep(kind: str, path: Path, model, data, n: int = WHY_IMAGES, cnn_path: Path | None = None, cnn=None) -> dict:
    """A sweep of the chapter ("invariance", "parts" or "viewpoint") of the model in `path` (and
    the CNN in `cnn_path`) on the first `n` images of the test set `data`: read from disk where a
    run with these files and settings is stored (shipped ones in checkpoints/sweeps), else run
    and stored."""
    n = min(n, len(data))
    key = stored.sweep_key(path, f"why-{kind}", _settings(data.name, n, cnn_path))
    return stored.remembered(key, lambda: _run(kind, model, cnn, data.images[:n], data.labels[:n]))[0]


def _run(kind: str, model, cnn, images: torch.Tensor, labels: torch.Tensor) -> dict:
    if kind == "invariance":
        return invariance_sweep(model, cnn, images)
    if kind == "parts":
        return parts_sweep(model, cnn, images, labels)
    return viewpoint_sweep(model, images)


def precompute(folder: Path, out: Path, data_dir=None, n: int = WHY_IMAGES, only=None) -> list[str]:
    """The chapter's sweeps for every model in `folder` it can show, stored in `out`: what
    `python -m capsviz.analysis.why` ships in checkpoints/sweeps."""
    import sys
    import time

    from capsviz.checkpoint import list_checkpoints, load_checkpoint
    from capsviz.data import load_split

    listing = list_checkpoints(folder)
    done = []
    for path, meta in listing:
        if isinstance(meta, str) or not (vector_fits(meta) or matrix_fits(meta)) or (only and path.stem not in only):
            continue
        model, _ = load_checkpoint(path)
        model.eval()
        data = load_split(meta.image_dataset, "test", data_dir)
        start = time.perf_counter()
        if matrix_fits(meta):
            jobs = {"viewpoint": (None, None)}
        else:
            cnn_path = baseline_for(meta, listing)
            if cnn_path is None:
                continue
            cnn = load_checkpoint(cnn_path)[0].eval()
            jobs = {"invariance": (cnn_path, cnn), "parts": (cnn_path, cnn)}
        for kind, (cnn_path, cnn) in jobs.items():
            key = stored.sweep_key(path, f"why-{kind}", _settings(data.name, min(n, len(data)), cnn_path))
            if stored.read(key, [out]) is None:
                stored.write(key, _run(kind, model, cnn, data.images[:n], data.labels[:n]), out)
            done.append(key)
        print(f"{path.name}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    return done


def stored_sentences(folder: Path, data_dir=None, n: int = WHY_IMAGES) -> list[str]:
    """The chapter's sentences for every model in `folder` whose sweeps are stored, at the largest
    shift and turns and for every scheme: the numbers RESULTS.md and the README quote."""
    from capsviz.checkpoint import list_checkpoints

    listing = list_checkpoints(folder)
    lines = []
    for path, meta in listing:
        if isinstance(meta, str):
            continue
        cnn_path = baseline_for(meta, listing) if vector_fits(meta) else None
        kinds = ["invariance", "parts"] if cnn_path is not None else ["viewpoint"] if matrix_fits(meta) else []
        for kind in kinds:
            got = stored.read(stored.sweep_key(path, f"why-{kind}", _settings(meta.image_dataset, n, cnn_path)))
            if got is None:
                continue
            lines.append(f"== {path.stem} ({kind}, {got['images']} test images)")
            if kind == "parts":
                lines += [s for scheme in SCHEMES for s in parts_words(got, scheme)]
            else:
                say = invariance_words if kind == "invariance" else viewpoint_words
                lines += [s for change, a in (("shift", 4), ("rotate", -30), ("rotate", 30)) for s in say(got, change, a)]
    return lines
