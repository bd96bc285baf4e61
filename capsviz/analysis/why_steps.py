"""The "Why capsules" chapter as the guided tour's first steps, before the mechanics.

Every family's tour opens with the papers' argument, measured on the model it follows
(capsviz.analysis.why, whose public functions this reads and never changes): for a vector-capsule
model with a decoder, invariance against equivariance, parts in the wrong places and pose, not just
presence, each beside the baseline CNN trained on the same images; for matrix capsules, the votes
under a change of viewpoint and what coordinate addition adds. Each step shows the image the tour
follows moved to the right by the chapter's largest shift, and, where the chapter has measured the
model over the test set (the shipped models' sweeps ship with them), its figures and sentences for
the whole test set. A model the chapter cannot measure gets one step that says why.

Each step's question (capsviz.analysis.tour_questions) is answered from the numbers in its `data`,
which the page draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from capsviz import registry
from capsviz.analysis import rules, why
from capsviz.analysis import tour_questions as ask
from capsviz.analysis.steps import Step, gap
from capsviz.data.user import short_name
from capsviz.i18n import N_, t
from capsviz.text import plain

CHANGE = "shift"  # the change the tour's steps make: a move to the right, the simplest to see
SHIFT = 4.0  # pixels: the chapter's largest shift (a stored sweep's own last value is read where there is one)
SCHEME = "halves"  # the scrambled digit its question asks about: the story's face with eyes and mouth swapped
OTHER_SCHEMES = ("sides", "quadrants")
VECTOR_SWEEPS = ("invariance", "parts")
MATRIX_SWEEPS = ("viewpoint",)
VECTOR_TITLES = (
    N_("Why capsules: invariance against equivariance"),
    N_("Why capsules: parts in the wrong places"),
    N_("Why capsules: pose, not just presence"),
)
MATRIX_TITLES = (N_("Why capsules: votes under a change of viewpoint"), N_("Why capsules: coordinate addition"))


@dataclass(frozen=True)
class Chapter:
    """What the chapter can measure on a model: `kind` "vector" (beside the baseline CNN in
    `cnn_path`), "matrix", or "" with the `reason` it cannot; `sweeps`: the test-set sweeps it reads."""

    kind: str
    cnn_path: Path | None = None
    reason: str = ""

    @property
    def sweeps(self) -> tuple[str, ...]:
        return VECTOR_SWEEPS if self.kind == "vector" else MATRIX_SWEEPS if self.kind == "matrix" else ()


def chapter_for(meta, listing, model_name: str) -> Chapter:
    """The chapter for the model `meta` (named `model_name`): the argument its family's entry names
    (capsviz.entries.Family.why), with the baseline CNN from `listing` ((path, meta) pairs of the
    model folder) that a vector-capsule model is set beside; else the reason it cannot measure it."""
    cfg = meta.config
    if getattr(cfg, "in_channels", 1) != 1:
        return Chapter(
            "",
            reason=t("The chapter moves grey images, and {model} reads colour images.", model=plain(model_name)),
        )
    if why.matrix_fits(meta):
        return Chapter("matrix")
    if why.vector_fits(meta):
        cnn = why.baseline_for(meta, listing)
        if cnn is not None:
            return Chapter("vector", cnn)
        return Chapter(
            "",
            reason=t(
                "The chapter sets a capsule network beside a baseline CNN trained on the same images, and the model folder has "
                "no CNN trained on {dataset}.",
                dataset=plain(short_name(meta.image_dataset)),
            ),
        )
    if not why.chapter_kind(cfg):
        entry = registry.FAMILIES.get(cfg.family)
        return Chapter(
            "",
            reason=t(
                "The chapter has no measurements for {family} models such as {model}.",
                family=t(entry.short) if entry is not None else plain(cfg.family),
                model=plain(model_name),
            ),
        )
    if cfg.in_size != 28:
        return Chapter(
            "",
            reason=t(
                "The chapter moves single 28x28 images, and {model} reads {size}x{size} images.",
                model=plain(model_name),
                size=cfg.in_size,
            ),
        )
    return Chapter(
        "",
        reason=t("The chapter watches a digit redrawn from its winning capsule, and {model} has no decoder.", model=plain(model_name)),
    )


def titles(chapter: Chapter) -> list[str]:
    """The titles of the chapter's steps in the tour, in the reader's language."""
    if chapter.kind == "vector":
        return [t(x) for x in VECTOR_TITLES]
    if chapter.kind == "matrix":
        return [t(x) for x in MATRIX_TITLES]
    return [t("Why capsules")]


class _NotStored(Exception):
    """A sweep that is not stored: reading it must not run it."""


class _Absent:
    """Stands for a model in a sweep that must only be read: any use of it raises _NotStored."""

    def __getattr__(self, name):
        raise _NotStored(name)

    def __call__(self, *args, **kwargs):
        raise _NotStored("call")


def stored_sweep(kind: str, path: Path, data, cnn_path: Path | None = None) -> dict | None:
    """The chapter's sweep `kind` of the model in `path` (beside the CNN in `cnn_path`) on the test
    set `data`, where it is stored (shipped, or run once on this server), else None: read through
    why.kept_sweep with stand-ins for the models, which stop it before it could run."""
    try:
        return why.kept_sweep(kind, path, _Absent(), data, cnn_path=cnn_path, cnn=None if cnn_path is None else _Absent())
    except _NotStored:
        return None


def measure(chapter: Chapter, path: Path, model, data, cnn=None) -> None:
    """Run and store every sweep of the chapter that is not stored yet (about a minute each)."""
    for kind in chapter.sweeps:
        if stored_sweep(kind, path, data, chapter.cnn_path) is None:
            why.kept_sweep(kind, path, model, data, cnn_path=chapter.cnn_path, cnn=cnn)


def _unmeasured(here: bool) -> str:
    """Said where a step has no test-set sweep: `here`, whether the test images are on this server."""
    if here:
        return t(
            "The chapter has not measured this model over the test set yet: press **Measure over the test set** below "
            "(once per server, a minute or more), or open **Why capsules**. Until then, this image alone."
        )
    return t("The test images are not on this server, so the chapter's measurements over the test set cannot be shown: this image alone.")


def vector_chapter(
    caps, cnn, image: np.ndarray, names: list[str], model_name: str, invariance: dict | None, parts: dict | None, here: bool = True
) -> list[Step]:
    """The chapter's three steps for a vector-capsule model `caps` beside the baseline `cnn`, on
    `image` (H, W) and, where stored, the test-set sweeps `invariance` and `parts` (`here`: whether
    the test images are on this server, so they can be measured)."""
    pn = [plain(n) for n in names]
    view = why.one_image(caps, cnn, image, CHANGE)
    amount = view["values"][-1]  # the chapter's largest shift
    k = view["values"].index(amount)
    zero = view["values"].index(0.0)
    base = view["vectors"][zero]  # (D,) the winning capsule on the unchanged digit
    change = 100 * np.linalg.norm(view["vectors"] - base, axis=-1) / max(float(np.linalg.norm(base)), 1e-8)  # (V,) % of its size
    name = pn[view["capsule"]]
    moved = t("this digit moved 0 to {n} pixels to the right", n=int(amount))
    shown = {"view": view, "amount": amount, "caps_change": change}
    steps = []

    # invariance against equivariance
    text = [
        t(
            "Every introduction to capsules starts from one argument. A CNN's pooling is said to keep *whether* a feature is "
            "there and throw away *where*, so its output stays the same when the digit moves (invariance). A capsule's vector "
            "should instead change with the pose, in a way that can be read back, while its answer stays (equivariance). Here "
            "this digit is moved up to {n} pixels to the right.",
            n=int(amount),
        )
    ]
    text += why.invariance_words(invariance, CHANGE, amount) if invariance is not None else [_unmeasured(here)]
    steps.append(
        Step(
            "why_invariance",
            t(VECTOR_TITLES[0]),
            figure="why_invariance",
            data=shown | {"sweep": invariance},
            caption=moved,
            text=text,
            measured=why.one_image_words(view, pn, amount),
            terms=("invariance", "equivariance", "pooling"),
            question=ask.changes_more(model_name, image, float(view["cnn_features"][k]), float(change[k]), int(amount)),
        )
    )

    # parts in the wrong places (the pictures, `why.parts_views`, are drawn by the page when the step is shown)
    text = [
        t(
            "The story's second claim is the scrambled face: every part present, in the wrong places. A network that only asks "
            "whether the parts are there should still see the digit; one whose parts must agree on one pose should not. Here the "
            "halves or the quadrants of the digit trade places."
        )
    ]
    bands = []  # how far chance alone moves each scheme's gap, as its sentence quotes it
    if parts is None:
        text.append(_unmeasured(here))
        question = None
    else:
        n = parts["both_right"]
        bands = [rules.noise(parts["cnn_right"][k], n, parts["caps_right"][k], n) for k in range(1, len(parts["cnn_right"]))]
        said, scores = why.parts_words(parts, SCHEME)
        text.append(said + gap() + scores)  # the scores sentence tells of the scheme just named
        text += [why.parts_words(parts, scheme)[0] for scheme in OTHER_SCHEMES]
        question = ask.parts_who(model_name, parts, SCHEME)
    steps.append(
        Step(
            "why_parts",
            t(VECTOR_TITLES[1]),
            figure="why_parts",
            data={"sweep": parts, "bands": bands},
            caption=t("each picture: what the CNN answers (its score) and what the capsules answer (the length)"),
            text=text,
            terms=("pooling", "parse_tree"),
            question=question,
        )
    )

    # pose, not just presence
    lengths = view["lengths"]
    steps.append(
        Step(
            "why_pose",
            t(VECTOR_TITLES[2]),
            figure="why_pose",
            data=shown | {"captions": (moved, t("the same, redrawn by the {name} capsule from its numbers alone", name=name))},
            text=why.inverse_graphics_words(),
            terms=("pose", "inverse_graphics", "dimension_moves"),
            link=("pages/explorer.py", t("Open the DigitCaps explorer")),
            question=ask.presence_or_pose(model_name, image, float(lengths[zero]), float(lengths[k]), float(change[k]), int(amount), name),
        )
    )
    return steps


def matrix_chapter(matrix, image: np.ndarray, model_name: str, viewpoint: dict | None, here: bool = True) -> list[Step]:
    """The chapter's two steps for a matrix-capsule model on `image` (H, W) and, where stored, its
    test-set sweep `viewpoint` (`here`: whether the test images are on this server)."""
    amount = viewpoint[f"{CHANGE}_values"][-1] if viewpoint is not None else SHIFT
    votes = why.one_image_votes(matrix, image, CHANGE, amount)
    said = why.viewpoint_words(viewpoint, CHANGE, amount) if viewpoint is not None else None
    data = {"votes": votes, "amount": amount, "sweep": viewpoint}
    together = Step(
        "why_viewpoint",
        t(MATRIX_TITLES[0]),
        figure="why_viewpoint",
        data=data,
        caption=t("the winning class's votes, their two position entries, before and after the move; a dot's size is its weight"),
        text=[
            t(
                "In matrix capsules each part votes for the pose of the whole, a 4x4 matrix. When the viewpoint changes, every "
                "part's pose changes the same way, so the votes should move together: their mean moves, their spread stays, and "
                "their agreement survives. Here the digit moves {n} pixels to the right.",
                n=int(amount),
            ),
            *([said[0]] if said else [_unmeasured(here)]),
        ],
        terms=("viewpoint", "vote", "move_together"),
        question=None if viewpoint is None else ask.votes_together(model_name, viewpoint, amount),
    )
    coordinates = Step(
        "why_coordinates",
        t(MATRIX_TITLES[1]),
        figure="why_coordinates",
        data=data,
        caption=t("the same votes computed without coordinate addition, on the same weights"),
        text=[
            t(
                "A vote made from a part's pose alone does not say where the part sits in the picture. Coordinate addition adds "
                "to each vote the scaled row and column of its part's place, so the whole's pose can follow the part's position."
            ),
            *([said[1]] if said else [_unmeasured(here)]),
        ],
        terms=("coordinate_addition",),
        question=None if viewpoint is None or not viewpoint["coordinates"] else ask.coordinates_more(model_name, viewpoint, amount),
    )
    return [together, coordinates]


def unmeasured_steps(chapter: Chapter, image: np.ndarray) -> list[Step]:
    """One step for a model the chapter cannot measure: the argument in words, why not here, and
    the image the tour is about to follow."""
    return [
        Step(
            "why",
            t("Why capsules"),
            figure="image",
            data={"images": [image], "labels": [t("the image the tour follows")]},
            text=[
                t(
                    "Every introduction to capsules starts from one argument: a CNN's pooling keeps whether a part is present and "
                    "throws away where it is; a capsule's length says whether a thing is there and its direction how it is posed, so "
                    "when the image moves the capsule should change with it while its answer stays. The chapter **Why capsules** "
                    "measures each claim on real models."
                )
                + gap()
                + chapter.reason
            ],
            terms=("invariance", "equivariance", "pooling", "pose"),
            link=("pages/why.py", t("Why capsules")),
        )
    ]
