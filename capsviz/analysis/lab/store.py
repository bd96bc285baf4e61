"""The routing lab's storage: where a row is kept (`key`), the rows already stored, and `run_lab`,
which measures and stores what is missing."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from capsviz.analysis import stored
from capsviz.analysis.lab.measuring import Row, Settings, architecture, fits, measure, routing_name, trained_label, trained_with
from capsviz.i18n import t
from capsviz.registry import vector_routings

DEFAULTS = Settings()  # the page's settings, which the stored rows were measured with


def key(model_path: Path, routing: str, dataset: str, settings: Settings) -> str:
    spec = {"routing": routing, "dataset": dataset, **settings.as_dict()}
    if dataset == "multimnist":
        spec["pairs"] = settings.test_images
    return stored.sweep_key(model_path, "lab", spec)


def stored_rows(
    entries, routings, settings: Settings = DEFAULTS, folders: list[Path] | None = None, skipped: list[str] | None = None
) -> dict[tuple[str, str], Row]:
    """The rows already stored for (model file, routing) among `entries` ((path, meta) pairs). A
    stored file that is not a row (damaged, or by another version of the lab) is measured again,
    the model and routing added to `skipped` (for the page's note)."""
    rows = {}
    for path, meta in entries:
        for routing in routings:
            value = stored.read(key(path, routing, meta.image_dataset, settings), folders)
            if value is None:
                continue
            try:
                rows[path.stem, routing] = Row.from_stored(
                    value, path.stem, trained_with(meta.config), routing, architecture(meta), trained_label(meta.config)
                )
            except (TypeError, ValueError):
                if skipped is not None:
                    skipped.append(t("{model} run with {routing}", model=path.stem, routing=routing_name(routing)))
    return rows


def run_lab(
    entries,
    routings,
    load: Callable[[Path], object],
    data_for: Callable[[object], object],
    settings: Settings = DEFAULTS,
    on_progress: Callable[[int, int, str], None] | None = None,
    folders: list[Path] | None = None,
    into: Path | None = None,
) -> list[Row]:
    """Every (model, routing) row for `entries` ((checkpoint path, meta) of vector-capsule models):
    the stored one where there is one, else measured (the model loaded by `load(path)`, the test
    images by `data_for(meta)`: the test set of the model's own dataset) and stored."""
    have = stored_rows(entries, routings, settings, folders)
    todo = [(p, m, r) for p, m in entries for r in routings if (p.stem, r) not in have]
    for k, (path, meta, routing) in enumerate(todo):
        said = dict(model=path.stem, routing=routing_name(routing))
        tell = (
            (lambda what, k=k, said=said: on_progress(k, len(todo), t("{model} with {routing}: {what}", what=what, **said)))
            if on_progress
            else None
        )
        start = time.perf_counter()
        row = measure(load(path), path.stem, routing, data_for(meta), settings, tell, architecture(meta))
        print(
            t("capsviz lab: {model} with {routing} in {seconds} s", seconds=f"{time.perf_counter() - start:.0f}", **said), file=sys.stderr
        )
        stored.write(key(path, routing, meta.image_dataset, settings), row.stored(), into)
        have[path.stem, routing] = row
    return [have[p.stem, r] for p, _ in entries for r in routings]


def precompute(folder: Path, out: Path, data_dir=None) -> list[Row]:
    """The lab's default rows for every vector-capsule model in `folder`, stored in `out`."""
    from capsviz.checkpoint import list_checkpoints, load_checkpoint
    from capsviz.data import model_test_set

    entries = [(p, meta) for p, meta in list_checkpoints(folder) if not isinstance(meta, str) and fits(meta.config)]
    load = lambda p: load_checkpoint(p)[0]  # noqa: E731
    data = lambda meta: model_test_set(meta.image_dataset, meta.config.in_size, meta.config.in_channels, data_dir)  # noqa: E731
    return run_lab(entries, vector_routings(), load, data, folders=[out], into=out)
