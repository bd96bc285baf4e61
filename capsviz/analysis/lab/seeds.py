"""The routing lab's seed studies: models trained alike but for their seed, what their spread says
(`seed_study`, `seed_sentences`), stored and read back."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from capsviz.analysis import stored
from capsviz.analysis.lab.measuring import architecture, architecture_words, routing_name, trained_with
from capsviz.i18n import t
from capsviz.registry import vector_routings


@dataclass(frozen=True)
class SeedStudy:
    """Models of one preset, data and schedule trained with each routing from several seeds: how
    much of a gap between routings the seeds alone make. `errors`: trained-with routing -> test
    error % per seed, in the order of `seeds`."""

    architecture: str  # what every model shares, the seed left out
    seeds: tuple[int, ...]
    errors: dict[str, list[float]]
    n_test: int
    hardware: str = ""
    models: tuple[str, ...] = ()  # made of these models in the model folder; () for a stored study
    shipped: bool = False  # stored with the app (checkpoints/sweeps), not made on this server

    @property
    def preset_and_data(self) -> str:
        return self.architecture.split(",")[0]

    def title(self, say=str) -> str:
        """Whose study it is: one that came with the app is the preset's; one made of models in
        the model folder (a student's runs, say) is named by them, never by the preset alone.
        `say`: how a name from a file is written (the pages make it plain)."""
        v = dict(k=len(self.seeds), what=architecture_words(say(self.preset_and_data)))
        if self.shipped:
            return t("Trained with, over {k} seeds: {what}", **v)
        if self.models:
            listed = t(", ").join(say(m) for m in self.models[:4])
            if len(self.models) > 4:
                listed = t("{listed} and {n} more", listed=listed, n=len(self.models) - 4)
            return t("Trained here, over {k} seeds: {what} (the models {listed})", listed=listed, **v)
        return t("Stored on this machine, over {k} seeds: {what}", **v)

    def stored(self) -> dict:
        return {"architecture": self.architecture, "seeds": list(self.seeds), "n_test": self.n_test, "hardware": self.hardware} | {
            r: list(e) for r, e in self.errors.items()
        }

    @classmethod
    def from_stored(cls, d: dict, shipped: bool = False) -> SeedStudy:
        """The study stored as `d`; KeyError, TypeError or ValueError where it is not one."""
        seeds = tuple(int(s) for s in d["seeds"])
        errors = {r: [float(e) for e in d[r]] for r in vector_routings() if r in d}
        if len(seeds) < 2 or len(set(seeds)) != len(seeds):
            raise ValueError("a seed study needs two seeds or more, each once")
        if not errors or any(len(e) != len(seeds) or not all(0 <= x <= 100 for x in e) for e in errors.values()):
            raise ValueError("a seed study needs one error (0 to 100%) per seed for every routing")
        if not isinstance(d["architecture"], str) or int(d["n_test"]) < 1:
            raise ValueError("a seed study names its schedule and was tested on some images")
        return cls(d["architecture"], seeds, errors, int(d["n_test"]), str(d.get("hardware", "")), shipped=shipped)


def seed_study(metas) -> SeedStudy:
    """The study made of checkpoints' metadata: every routing must have the same seeds, and every
    model the same preset, data and schedule; raise ValueError naming what differs."""
    metas = list(metas)
    shared = {architecture(m, seed=False) for m in metas}
    if len(shared) != 1 or len({m.image_dataset for m in metas}) != 1:
        raise ValueError(t("the models differ in more than routing and seed: {found}", found=sorted(shared)))
    errors: dict[str, dict[int, float]] = {}
    for m in metas:
        seed = (m.run or {}).get("seed")
        if seed is None or m.metrics.test_error is None:
            raise ValueError(t("every model needs its training seed and test error recorded"))
        errors.setdefault(trained_with(m.config), {})[int(seed)] = m.metrics.test_error
    seeds = sorted(next(iter(errors.values())))
    if len(seeds) < 2 or any(sorted(e) != seeds for e in errors.values()):
        raise ValueError(t("every routing needs the same seeds, at least two"))
    n_test = {m.metrics.n_test for m in metas}
    if len(n_test) != 1:
        raise ValueError(t("the models were tested on different numbers of images: {found}", found=sorted(n_test)))
    hardware = sorted({m.hardware or "" for m in metas})
    ordered = {r: [errors[r][s] for s in seeds] for r in vector_routings() if r in errors}  # the lab's order of routings
    return SeedStudy(shared.pop(), tuple(seeds), ordered, n_test.pop(), "; ".join(hardware)[:MAX_HARDWARE])


MAX_HARDWARE = 200


def studies_in(metas, names=None) -> list[SeedStudy]:
    """The seed studies a model folder holds: models of one preset, data and schedule trained with
    the same seeds for every routing they were trained with (trained from the Train page, say).
    `names`: the models' names, in the order of `metas`, which each study then lists."""
    metas = list(metas)
    names = list(names) if names is not None else [""] * len(metas)
    groups: dict[str, list] = {}
    for m, name in zip(metas, names, strict=True):
        if m.metrics.test_error is not None and "seed" in (m.run or {}):
            groups.setdefault((architecture(m, seed=False), m.image_dataset), []).append((m, name))
    found = []
    for group in groups.values():
        try:
            study = seed_study(m for m, _ in group)
        except ValueError:  # one seed, or routings with different seeds: not a study
            continue
        found.append(replace(study, models=tuple(sorted(n for _, n in group if n))))
    return found


def seeds_key(study: SeedStudy) -> str:
    slug = "-".join("".join(ch if ch.isalnum() else " " for ch in study.architecture.lower()).split())[:80]
    return f"seeds-{slug}"


def stored_studies(folders: list[Path] | None = None, skipped: list[str] | None = None) -> list[SeedStudy]:
    """Every seed study stored in `folders` (the shipped sweeps, then this machine's), those of the
    shipped folder marked as shipped. A file that is not a study is left out, its name added to
    `skipped` (for the page's note)."""
    studies, seen = [], set()
    shipped = stored.shipped_folder().resolve()
    for folder in folders or [stored.shipped_folder(), stored.local_folder()]:
        for path in sorted(folder.glob("seeds-*.json")) if folder.is_dir() else []:
            value = stored.read(path.stem, [folder])
            try:
                if value is None:
                    raise ValueError("not a stored result")
                study = SeedStudy.from_stored(value, shipped=folder.resolve() == shipped)
            except (KeyError, TypeError, ValueError, OverflowError):
                if skipped is not None:
                    skipped.append(path.name)
                continue
            if study.architecture not in seen:
                seen.add(study.architecture)
                studies.append(study)
    return studies


def mean_sd(values: list[float]) -> tuple[float, float]:
    m = sum(values) / len(values)
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / max(len(values) - 1, 1))


def seed_sentences(study: SeedStudy) -> list[str]:
    """What the study shows: each routing's mean error over the seeds and their spread, and each
    pair of routings compared against what the seeds alone give (two standard errors of the
    difference of two means)."""
    k = len(study.seeds)
    stats = {r: mean_sd(e) for r, e in study.errors.items()}
    listing = t("; ").join(
        t(
            "trained with {routing}: mean {mean}% (from {lo} to {hi}, standard deviation {sd})",
            routing=routing_name(r),
            mean=f"{m:.2f}",
            lo=f"{min(study.errors[r]):.2f}",
            hi=f"{max(study.errors[r]):.2f}",
            sd=f"{sd:.2f}",
        )
        for r, (m, sd) in stats.items()
    )
    said = [
        t(
            "Over {k} training seeds ({what}; each model on {n} test images): {listing}.",
            k=k,
            what=architecture_words(study.architecture),
            n=f"{study.n_test:,}",
            listing=listing,
        )
    ]
    routings = list(stats)
    apart, within = [], []
    for i, a in enumerate(routings):
        for b in routings[i + 1 :]:
            (ma, sa), (mb, sb) = stats[a], stats[b]
            band = 2 * math.sqrt(sa**2 / k + sb**2 / k)
            low, high = (a, b) if ma <= mb else (b, a)
            v = dict(low=routing_name(low), high=routing_name(high), gap=f"{abs(ma - mb):.2f}", band=f"{band:.2f}")
            if abs(ma - mb) > band:
                apart.append(t("{low} against {high}: {gap} points lower, beyond the ±{band} the seeds give", **v))
            else:
                within.append(t("{low} against {high}: {gap} points lower, within the ±{band} the seeds give", **v))
    pairs = t("; ").join(apart + within)
    if not apart:
        said.append(
            t(
                "Between the means: {pairs}; so on this schedule, which routing a model was trained with made no difference "
                "beyond what the training seed makes.",
                pairs=pairs,
            )
        )
    else:
        said.append(
            t(
                "Between the means: {pairs}; so on this schedule, the routing a model was trained with made a difference beyond "
                "the seeds' spread where it says so.",
                pairs=pairs,
            )
        )
    gap = 2 * math.sqrt(2) * max(sd for _, sd in stats.values())
    said.append(
        t(
            "Two single training runs that differ only in their seed land up to about {gap} points apart here (two standard "
            "deviations of the difference of two runs), so one run per routing cannot tell routings apart by less than that at "
            "this schedule.",
            gap=f"{gap:.2f}",
        )
    )
    return said
