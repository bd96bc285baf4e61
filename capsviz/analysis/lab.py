"""The routing lab: the same capsules run with each routing, measured side by side.

Two axes: the routing a model was *trained with* (its checkpoint's couplings) and the routing it
is *run with* here (any of `capsviz.routing.ROUTINGS`, for the call only: the shared model is not
changed). Every measure is on fixed test images, so a stored result equals a fresh run, except the
time per image, which belongs to the machine that measured it.

    python -m capsviz.analysis.lab           # the lab's default results for every shipped model
    python -m capsviz.analysis.lab --table   # the stored ones as a markdown table and sentences
    python -m capsviz.analysis.lab --retime  # their time per image again (on a quiet machine)
    python -m capsviz.analysis.lab --seeds RUN.safetensors ...  # a seed study of finished runs, stored
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from capsviz.analysis import rules, stored
from capsviz.analysis.multimnist import pair_accuracy
from capsviz.analysis.reproduction import EFFICIENT_MNIST, PAPER
from capsviz.analysis.robustness import attack_sweep, attack_test_images, predict_scores
from capsviz.analysis.routing import coupling_summary
from capsviz.analysis.rules import noise, spread
from capsviz.data.affine import transform
from capsviz.routing import ROUTINGS

# The page's defaults, shared with the stored results
TEST_IMAGES = 10_000  # test error decides the sentences: the whole test set
IMAGES = 1_000  # shifted, attacked and MultiMNIST images, and the timing batch
COUPLING_IMAGES = 200  # images whose couplings are averaged
FGSM_EPSILON = 0.1  # one step of 0.1 on pixels in [0, 1]
SHIFT_PX = 3  # each test digit moved up to 3 px in x and y ...
ROTATE_DEG = 20  # ... and turned up to 20 degrees either way, by a seeded draw
ITERATIONS = 3  # dynamic routing's, as in Sabour et al.
TIME_BATCH = 100
FAMILIES = ("capsnet", "efficient")  # vector capsules: every routing in ROUTINGS fits them

LAB_ROUTINGS = {
    "dynamic": "dynamic routing, 3 iterations",
    "uniform": "uniform couplings (no routing)",
    "random": "fixed random couplings",
    "self-attention": "self-attention routing (one pass)",
}


@dataclass(frozen=True)
class Settings:
    test_images: int = TEST_IMAGES
    images: int = IMAGES
    epsilon: float = FGSM_EPSILON
    iterations: int = ITERATIONS

    def as_dict(self) -> dict:
        return asdict(self) | {"shift_px": SHIFT_PX, "rotate_deg": ROTATE_DEG, "coupling_images": COUPLING_IMAGES}


NAMES = ("model", "trained_with", "run_with", "extra")


@dataclass
class Row:
    """One model run with one routing. Accuracies and errors in %, None where the measure does not
    apply (pair accuracy needs a model that reads MultiMNIST's 36x36 pairs)."""

    model: str
    trained_with: str
    run_with: str
    test_error: float
    n_test: int
    shifted_accuracy: float
    fgsm_accuracy: float
    n_images: int
    entropy_ratio: float  # mean coupling entropy / log J: 1 is uniform, 0 all of a vote to one class
    coupling_to_prediction: float  # mean coupling of a primary capsule to the predicted class (uniform: 1/J)
    ms_per_image: float  # at batch TIME_BATCH on the machine named in `hardware` ...
    pair_accuracy: float | None = None
    n_pairs: int = 0
    classes: int = 10  # J: the uniform coupling is 1/J
    hardware: str = ""
    load: float = 0.0  # ... while this many processes were running on average (os.getloadavg)
    extra: dict = field(default_factory=dict)

    def stored(self) -> dict:
        """What is stored: the numbers and the machine's name (the names come from the model)."""
        return {k: v for k, v in asdict(self).items() if k not in NAMES and v is not None}

    @classmethod
    def from_stored(cls, d: dict, model: str, trained: str, run_with: str, arch: str) -> Row:
        """The row stored as `d`; TypeError or ValueError where `d` is not one (a field missing,
        text where a number belongs, a count of no images)."""
        numbers = {k: d[k] for k in cls.__dataclass_fields__ if k not in NAMES and k in d}
        for k, v in numbers.items():
            if k != "hardware" and not (v is None or (isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v))):
                raise ValueError(f"{k} is not a number")
        if "hardware" in numbers and not isinstance(numbers["hardware"], str):
            raise ValueError("hardware is not text")
        row = cls(model=model, trained_with=trained, run_with=run_with, extra={"architecture": arch}, **numbers)
        if row.n_test < 1 or row.n_images < 1 or row.classes < 2:
            raise ValueError("a row measured on no images")
        return row

    @property
    def label(self) -> str:
        return f"{self.model} run with {self.run_with}"


class RunWith:
    """A shared model called with another routing: each call passes the routing and iterations,
    so the model (cached for every session) is never changed."""

    def __init__(self, model, routing: str, iterations: int | None = None):
        self.model, self.routing, self.iterations = model, routing, iterations
        self.config, self.decoder = model.config, model.decoder

    def __call__(self, x, *args, **kw):
        return self.model(x, *args, routing=self.routing, iterations=self.iterations, **kw)

    def classify(self, x):
        return self(x, reconstruct=False)


def trained_with(config) -> str:
    """The routing a model was trained with, in `ROUTINGS`' names: dynamic routing with one
    iteration is uniform couplings (b = 0, so softmax(b) is 1/J)."""
    couplings = getattr(config, "couplings", None) or config.routing
    if couplings == "dynamic" and getattr(config, "routing_iterations", 0) == 1:
        return "uniform"
    return couplings


def architecture(meta, seed: bool = True) -> str:
    """What models that differ only in the routing they were trained with share: preset, data and
    schedule (epochs, batch, learning rate, the training images when fewer than all, and the seed
    unless `seed` is False). Only such models are compared as trained with."""
    run = meta.run or {}
    said = [preset_and_data(meta)]
    if meta.epochs is not None:
        said.append(f"{meta.epochs:g} epochs")
    if run.get("batch_size"):
        said.append(f"batch {run['batch_size']}")
    if run.get("lr"):
        said.append(f"lr {run['lr']:g} x{run.get('lr_decay', 1):g} per {run.get('decay_steps')} steps")
    if run.get("train_limit"):
        said.append(f"{run['train_limit']:,} training images")
    if seed and "seed" in run:
        said.append(f"seed {run['seed']}")
    return ", ".join(said)


def preset_and_data(meta) -> str:
    """The first part of `architecture`: which preset on which images (a user's by the name they
    were uploaded under, never by the server's folder)."""
    from capsviz.data.user import short_name

    return f"{(meta.run or {}).get('model') or meta.config.family} on {short_name(meta.image_dataset)}"


def fits(config) -> bool:
    return config.family in FAMILIES


def shifted(x: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """x (N, C, S, S) with each image moved by up to SHIFT_PX pixels in x and y and turned by up to
    ROTATE_DEG degrees about the centre (its channels alike), drawn from `seed` (the same for every model)."""
    N, C, S, _ = x.shape
    g = torch.Generator().manual_seed(seed)
    u = lambda: torch.rand(N, generator=g) * 2 - 1  # noqa: E731 - uniform in [-1, 1]
    angle, dx, dy = u() * math.radians(ROTATE_DEG), u() * SHIFT_PX, u() * SHIFT_PX
    cos, sin = torch.cos(angle), torch.sin(angle)
    theta = torch.stack([torch.stack([cos, -sin, -2 * dx / S], -1), torch.stack([sin, cos, -2 * dy / S], -1)], -2)  # (N, 2, 3)
    planes = transform(x.reshape(N * C, S, S), theta.repeat_interleave(C, 0))  # (N*C, S, S)
    return planes.view(N, C, S, S)


def measure(
    model, name: str, routing: str, data, settings: Settings = Settings(), on_progress: Callable[[str], None] | None = None, arch: str = ""
) -> Row:
    """`model` (named `name`, of architecture `arch`) run with `routing` on the test set `data`
    (an ImageSet: 28x28 digits, or the user's images the model was trained on)."""
    say = on_progress or (lambda _: None)
    cfg = model.config
    run = RunWith(model, routing, settings.iterations if routing == "dynamic" else None)
    n = min(settings.test_images, len(data))
    x, y = attack_test_images(data, n, cfg.in_size)
    say("test error")
    right = int((predict_scores(run, x).argmax(1) == y).sum())
    m = min(settings.images, n)
    say("shifted and rotated digits")
    xs = shifted(x[:m])
    shifted_acc = 100.0 * float((predict_scores(run, xs).argmax(1) == y[:m]).float().mean())
    say(f"FGSM at epsilon {settings.epsilon:g}")
    fgsm_acc = attack_sweep(run, x[:m], y[:m], [settings.epsilon]).accuracy[0]
    pairs, n_pairs = None, 0
    if cfg.in_size == 36 and data.images.dim() == 3:  # reads MultiMNIST's 36x36 pairs of MNIST digits
        say("MultiMNIST pairs")
        p = pair_accuracy(run, data.images, data.labels, n)  # as many pairs as test images: where routing is said to matter most
        pairs, n_pairs = p.accuracy, p.n
    say("couplings")
    with torch.no_grad():
        c = coupling_summary(model, x[:COUPLING_IMAGES], settings.iterations, routing=routing)
    say("time per image")
    return Row(
        model=name,
        trained_with=trained_with(cfg),
        run_with=routing,
        test_error=100.0 * (n - right) / n,
        n_test=n,
        shifted_accuracy=shifted_acc,
        fgsm_accuracy=fgsm_acc,
        n_images=m,
        pair_accuracy=pairs,
        n_pairs=n_pairs,
        entropy_ratio=c["entropy"][-1] / c["uniform_entropy"],
        coupling_to_prediction=c["coupling_to_prediction"][-1],
        ms_per_image=time_per_image(run, x[:TIME_BATCH]),
        classes=cfg.num_classes,
        hardware=_hardware(),
        load=os.getloadavg()[0],
        extra={"architecture": arch or cfg.family},
    )


def time_per_image(run, x: torch.Tensor, repeats: int = 3) -> float:
    """Milliseconds per image of the class scores at batch len(x), best of `repeats`."""
    best = math.inf
    with torch.no_grad():
        run.classify(x)  # untimed: the first call lays out weights and wakes the thread pool
        for _ in range(repeats):
            t = time.perf_counter()
            run.classify(x)
            best = min(best, time.perf_counter() - t)
    return 1000.0 * best / len(x)


def _hardware() -> str:
    from capsviz.devices import describe_hardware

    return describe_hardware(torch.device("cpu"))


# What is compared without the time, which depends on the machine
MEASURES = ("test_error", "shifted_accuracy", "fgsm_accuracy", "pair_accuracy", "entropy_ratio", "coupling_to_prediction")


def key(model_path: Path, routing: str, dataset: str, settings: Settings) -> str:
    spec = {"routing": routing, "dataset": dataset, **settings.as_dict()}
    if dataset == "multimnist":
        spec["pairs"] = settings.test_images
    return stored.sweep_key(model_path, "lab", spec)


# The measures a routing is compared on: (field, its count field, words, higher is better)

COMPARED = (
    ("test_error", "n_test", "test error", False),
    ("shifted_accuracy", "n_images", "accuracy on shifted and turned images", True),
    ("fgsm_accuracy", "n_images", "accuracy under FGSM", True),
    ("pair_accuracy", "n_pairs", "MultiMNIST pair accuracy", True),
)


def sentences(rows: list[Row], studies: list[SeedStudy] = ()) -> list[str]:
    """Plain sentences on what `rows` show: per model, each routing it was run with against the one
    it was trained with, measure by measure; across models of one architecture trained with
    different routings, their errors; how far dynamic routing moves the couplings from uniform;
    what it costs in time. A difference is called one only when it is larger than the chance
    spread of the test images (two standard errors)."""
    said: list[str] = []
    by_model: dict[str, list[Row]] = {}
    for r in rows:
        by_model.setdefault(r.model, []).append(r)
    for name, rs in by_model.items():
        own = next((r for r in rs if r.run_with == r.trained_with), None)
        for r in rs if own is not None else []:
            if r is not own:
                said.append(_against(name, r, own))
    if any("better on accuracy under FGSM" in line for line in said):
        said.append(
            "Where a routing does better under FGSM than the one a model was trained with, that can also mean the attack's "
            "gradient passes less well through it (gradient masking) rather than a sturdier model; the Robustness page's BIM "
            "attack tests that more strongly."
        )
    return said + _trained_with(rows, studies) + _couplings(rows) + _time(rows)


def _against(name: str, r: Row, own: Row) -> str:
    parts, better, worse = [], [], []
    for field_, count, words, higher in COMPARED:
        a, b = getattr(r, field_), getattr(own, field_)
        if a is None or b is None:
            continue
        n = getattr(r, count)
        band = noise(a, n, b, getattr(own, count))
        if abs(a - b) <= band:
            parts.append(f"{words} {a:.2f}% against {b:.2f}% (within chance, ±{band:.2f})")
            continue
        good = (a > b) == higher
        (better if good else worse).append(words)
        parts.append(f"{words} {a:.2f}% against {b:.2f}% ({'better' if good else 'worse'}, beyond ±{band:.2f})")
    if not better and not worse:
        verdict = f"no measure differs beyond chance: on this model, {r.run_with} does as well as {own.run_with}."
    else:
        verdict = (
            (f"better on {', '.join(better)}" if better else "")
            + ("; " if better and worse else "")
            + (f"worse on {', '.join(worse)}" if worse else "")
            + "."
        )
    return f"**{name}** (trained with {own.trained_with}) run with **{r.run_with}** instead: " + "; ".join(parts) + f". So {verdict}"


def _trained_with(rows: list[Row], studies: list[SeedStudy] = ()) -> list[str]:
    """Models of one architecture trained with different routings, each run with its own, on test
    error and (models that read MultiMNIST) pair accuracy; the seed study of the same preset and
    data, where there is one, says how far seeds alone move them."""
    own = [r for r in rows if r.run_with == r.trained_with]
    groups: dict[str, list[Row]] = {}
    for r in own:
        groups.setdefault(r.extra.get("architecture", r.model), []).append(r)
    said = []
    for arch, rs in groups.items():
        if len({r.trained_with for r in rs}) < 2:
            continue
        parts = [_gap(rs, "test_error", "n_test", "test error", "test images", higher=False)]
        if all(r.pair_accuracy is not None for r in rs):
            parts.append(_gap(rs, "pair_accuracy", "n_pairs", "MultiMNIST pair accuracy", "pairs", higher=True))
        study = next((st for st in studies if st.preset_and_data == arch.split(",")[0]), None)
        seeds = (
            "One training seed each; how far the seed alone moves these models was not measured, so a gap here may be the seed's."
            if study is None
            else f"One training seed each; how far the seed alone moves such models is measured below ({len(study.seeds)} seeds per routing, a shorter schedule)."
        )
        said.append(
            f"The models of one architecture and schedule ({arch}) trained with different routings, each run with its own: "
            + " ".join(parts)
            + f" {seeds}"
        )
    return said


def _gap(rs: list[Row], field_: str, count: str, words: str, unit: str, higher: bool) -> str:
    """The models' `field_` from best to worst, and whether the largest gap is beyond chance."""
    rs = sorted(rs, key=lambda r: getattr(r, field_), reverse=higher)
    best, worst = rs[0], rs[-1]
    a, b = getattr(best, field_), getattr(worst, field_)
    band = noise(a, getattr(best, count), b, getattr(worst, count))
    listing = ", ".join(f"{r.trained_with} {getattr(r, field_):.2f}%" for r in rs)
    if abs(a - b) <= band:
        verdict = f"the largest gap, {abs(a - b):.2f} points, is within the ±{band:.2f} chance gives: no routing trained these models better on this measure"
    else:
        verdict = f"trained with {best.trained_with} is best, {abs(a - b):.2f} points ahead of {worst.trained_with}, more than the ±{band:.2f} chance gives"
    return f"{words} on {getattr(best, count):,} {unit}, best first: {listing}; {verdict}."


def _couplings(rows: list[Row]) -> list[str]:
    """How far the routings that compute couplings from the votes (dynamic, self-attention) move
    them from uniform: near uniform only when both the entropy and the share given to the predicted
    class say so."""
    said = []
    for r in rows:
        if r.run_with not in ("dynamic", "self-attention"):
            continue
        near = rules.near_uniform(r.entropy_ratio, r.coupling_to_prediction, 1 / r.classes)
        what = "dynamic routing" if r.run_with == "dynamic" else "self-attention routing"
        said.append(
            f"With {what}, **{r.model}**'s couplings keep {100 * r.entropy_ratio:.1f}% of the uniform split's "
            f"entropy (100% is uniform); a primary capsule gives the predicted class {r.coupling_to_prediction:.2f} of its "
            f"vote on average (uniform: {1 / r.classes:.2f})"
            + (": routing leaves the couplings near uniform on this model." if near else ": routing moves them away from uniform.")
        )
    return said


def _time(rows: list[Row]) -> list[str]:
    said = []
    by_model: dict[str, dict[str, Row]] = {}
    for r in rows:
        by_model.setdefault(r.model, {})[r.run_with] = r
    for name, rs in by_model.items():
        if "dynamic" in rs and "uniform" in rs and rs["uniform"].ms_per_image > 0:
            d, u = rs["dynamic"].ms_per_image, rs["uniform"].ms_per_image
            said.append(
                f"On **{name}**, dynamic routing takes {d:.2f} ms per image against {u:.2f} ms with uniform couplings ({d / u:.1f}x)."
            )
    return said


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
        if self.shipped:
            return f"Trained with, over {len(self.seeds)} seeds: {say(self.preset_and_data)}"
        if self.models:
            listed = ", ".join(say(m) for m in self.models[:4]) + (f" and {len(self.models) - 4} more" if len(self.models) > 4 else "")
            return f"Trained here, over {len(self.seeds)} seeds: {say(self.preset_and_data)} (the models {listed})"
        return f"Stored on this machine, over {len(self.seeds)} seeds: {say(self.preset_and_data)}"

    def stored(self) -> dict:
        return {"architecture": self.architecture, "seeds": list(self.seeds), "n_test": self.n_test, "hardware": self.hardware} | {
            r: list(e) for r, e in self.errors.items()
        }

    @classmethod
    def from_stored(cls, d: dict, shipped: bool = False) -> SeedStudy:
        """The study stored as `d`; KeyError, TypeError or ValueError where it is not one."""
        seeds = tuple(int(s) for s in d["seeds"])
        errors = {r: [float(e) for e in d[r]] for r in ROUTINGS if r in d}
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
        raise ValueError(f"the models differ in more than routing and seed: {sorted(shared)}")
    errors: dict[str, dict[int, float]] = {}
    for m in metas:
        seed = (m.run or {}).get("seed")
        if seed is None or m.metrics.test_error is None:
            raise ValueError("every model needs its training seed and test error recorded")
        errors.setdefault(trained_with(m.config), {})[int(seed)] = m.metrics.test_error
    seeds = sorted(next(iter(errors.values())))
    if len(seeds) < 2 or any(sorted(e) != seeds for e in errors.values()):
        raise ValueError("every routing needs the same seeds, at least two")
    n_test = {m.metrics.n_test for m in metas}
    if len(n_test) != 1:
        raise ValueError(f"the models were tested on different numbers of images: {sorted(n_test)}")
    hardware = sorted({m.hardware or "" for m in metas})
    ordered = {r: [errors[r][s] for s in seeds] for r in ROUTINGS if r in errors}  # the lab's order of routings
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
    listing = "; ".join(
        f"trained with {r}: mean {m:.2f}% (from {min(study.errors[r]):.2f} to {max(study.errors[r]):.2f}, standard deviation {sd:.2f})"
        for r, (m, sd) in stats.items()
    )
    said = [f"Over {k} training seeds ({study.architecture}; each model on {study.n_test:,} test images): {listing}."]
    routings = list(stats)
    apart, within = [], []
    for i, a in enumerate(routings):
        for b in routings[i + 1 :]:
            (ma, sa), (mb, sb) = stats[a], stats[b]
            band = 2 * math.sqrt(sa**2 / k + sb**2 / k)
            low, high = (a, b) if ma <= mb else (b, a)
            text = f"{low} against {high}: {abs(ma - mb):.2f} points lower, "
            if abs(ma - mb) > band:
                apart.append(text + f"beyond the ±{band:.2f} the seeds give")
            else:
                within.append(text + f"within the ±{band:.2f} the seeds give")
    verdict = (
        "so on this schedule, which routing a model was trained with made no difference beyond what the training seed makes."
        if not apart
        else "so on this schedule, the routing a model was trained with made a difference beyond the seeds' spread where it says so."
    )
    said.append("Between the means: " + "; ".join(apart + within) + f"; {verdict}")
    gap = 2 * math.sqrt(2) * max(sd for _, sd in stats.values())
    said.append(
        f"Two single training runs that differ only in their seed land up to about {gap:.2f} points apart here (two standard "
        "deviations of the difference of two runs), so one run per routing cannot tell routings apart by less than that at this schedule."
    )
    return said


PUBLISHED = (
    "Paik, Lee and Kim (2019, arXiv 1907.13327): on their benchmarks dynamic and EM routing were not better than "
    "uniform or random couplings, and routing mainly made the couplings more extreme.",
    "Gu and Tresp (2020, CVPR): routing contributed neither to generalisation nor to affine robustness; their "
    "capsule networks without routing reached 93.21% on affNIST after MNIST training, against 79% for CapsNet.",
    f"Mazzia, Salvetti and Chiaberge (2021, Efficient-CapsNet): {PAPER[EFFICIENT_MNIST]}% MNIST test error with one pass of self-attention "
    "routing and about 161 thousand parameters, after 150 epochs with augmentation.",
)


def stored_rows(
    entries, routings, settings: Settings = Settings(), folders: list[Path] | None = None, skipped: list[str] | None = None
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
                rows[path.stem, routing] = Row.from_stored(value, path.stem, trained_with(meta.config), routing, architecture(meta))
            except (TypeError, ValueError):
                if skipped is not None:
                    skipped.append(f"{path.stem} run with {routing}")
    return rows


def run_lab(
    entries,
    routings,
    load: Callable[[Path], object],
    data_for: Callable[[object], object],
    settings: Settings = Settings(),
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
        tell = (lambda what, k=k, name=path.stem, r=routing: on_progress(k, len(todo), f"{name} with {r}: {what}")) if on_progress else None
        t = time.perf_counter()
        row = measure(load(path), path.stem, routing, data_for(meta), settings, tell, architecture(meta))
        print(f"capsviz lab: {path.stem} with {routing} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
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
    return run_lab(entries, ROUTINGS, load, data, folders=[out], into=out)


def markdown(rows: list[Row], studies: list[SeedStudy] = ()) -> str:
    """The rows as a markdown table, then the sentences the page prints under it, then the seed studies'."""
    head = "| model | trained with | run with | test error % | shifted & turned % | FGSM % | MultiMNIST pairs % | entropy, % of uniform | ms / image |"
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        pairs = "-" if r.pair_accuracy is None else f"{r.pair_accuracy:.1f}"
        lines.append(
            f"| `{r.model}` | {r.trained_with} | {r.run_with} | {r.test_error:.2f} ± {spread(r.test_error, r.n_test):.2f} | "
            f"{r.shifted_accuracy:.1f} | {r.fgsm_accuracy:.1f} | {pairs} | {100 * r.entropy_ratio:.1f} | {r.ms_per_image:.2f} |"
        )
    said = sentences(rows, studies) + [line for st in studies for line in seed_sentences(st)]
    return "\n".join(lines + [""] + [f"- {line}" for line in said])


if __name__ == "__main__":
    from capsviz.checkpoint import list_checkpoints, load_checkpoint
    from capsviz.data import load_split
    from capsviz.paths import shipped_checkpoints

    target = stored.shipped_folder()
    if "--retime" in sys.argv:  # the time per image of every stored row again, on a quiet machine
        for path, meta in list_checkpoints(shipped_checkpoints()):
            if isinstance(meta, str) or not fits(meta.config):
                continue
            model = load_checkpoint(path)[0]
            x, _ = attack_test_images(load_split(meta.image_dataset, "test"), TIME_BATCH, meta.config.in_size)
            for routing in ROUTINGS:
                where = key(path, routing, meta.image_dataset, Settings())
                value = stored.read(where, [target])
                if value is not None:
                    run = RunWith(model, routing, ITERATIONS if routing == "dynamic" else None)
                    value.update(ms_per_image=time_per_image(run, x), hardware=_hardware(), load=os.getloadavg()[0])
                    stored.write(where, value, target)
                    print(f"{path.stem} with {routing}: {value['ms_per_image']:.2f} ms per image", file=sys.stderr)
    elif "--seeds" in sys.argv:  # a seed study made of finished training runs (RESULTS.md has the commands)
        from capsviz.checkpoint import read_meta

        files = [Path(a) for a in sys.argv[sys.argv.index("--seeds") + 1 :]]
        try:
            study = seed_study(read_meta(f) for f in files)
        except (OSError, ValueError) as e:
            sys.exit(f"error: {e}")
        stored.write(seeds_key(study), study.stored(), target)
        print("\n".join(f"- {line}" for line in seed_sentences(study)))
    elif "--table" in sys.argv:  # what is stored, as the page shows it: nothing is measured
        entries = [(p, m) for p, m in list_checkpoints(shipped_checkpoints()) if not isinstance(m, str) and fits(m.config)]
        have = stored_rows(entries, ROUTINGS, folders=[target])
        print(markdown([have[p.stem, r] for p, _ in entries for r in ROUTINGS if (p.stem, r) in have], stored_studies([target])))
    else:
        print(f"{len(precompute(shipped_checkpoints(), target))} lab results in {target}")
