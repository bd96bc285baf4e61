"""The routing lab's table: its columns and their decimals, the words that define them, and the whole
report as Markdown (`markdown`)."""

from __future__ import annotations

from capsviz.analysis import rules
from capsviz.analysis.lab.measuring import COUPLING_IMAGES, ROTATE_DEG, SHIFT_PX, Row, routing_name
from capsviz.analysis.lab.seeds import SeedStudy, seed_sentences
from capsviz.analysis.lab.verdicts import report
from capsviz.analysis.rules import spread
from capsviz.i18n import N_, t

# The table's columns with the decimals they are shown with (the sentences quote them so); short
# headers, so that every column fits a laptop's width (TABLE_WORDS defines each)
DECIMALS = {
    "error %": 2,
    "± chance": 2,
    "shifted acc. %": 1,
    "FGSM acc. %": 1,
    "entropy %": 1,
    "c to pred.": 2,
    "ms / image": 2,
}
# Each column's header in the reader's language (a catalog message; the keys stay English)
COLUMNS = {
    "model": N_("model"),
    "trained with": N_("trained with"),
    "run with": N_("run with"),
    "error %": N_("error %"),
    "± chance": N_("± chance"),
    "shifted acc. %": N_("shifted acc. %"),
    "FGSM acc. %": N_("FGSM acc. %"),
    "pair acc. %": N_("pair acc. %"),
    "entropy %": N_("entropy %"),
    "c to pred.": N_("c to pred."),
    "ms / image": N_("ms / image"),
    "ms range": N_("ms range"),
}
# The page shows the table as two, so that each fits a laptop's width: what the routings score, and
# what they do to the couplings and cost in time (each row keeps its model and routing)
SPLIT = (
    ("model", "trained with", "run with", "error %", "± chance", "shifted acc. %", "FGSM acc. %", "pair acc. %"),
    ("model", "run with", "entropy %", "c to pred.", "ms / image", "ms range"),
)
# Of the uniform split's entropy; random couplings route nothing either, yet sit lower
ENTROPY_TITLE = N_("Entropy, % (100 = uniform)")


def table_words(rows: list[Row]) -> str:
    """What each of the table's columns counts, said under it."""
    pairs = max((r.n_pairs for r in rows), default=0)
    first = rows[0]
    v = dict(
        n_test=f"{first.n_test:,}",
        n_images=f"{first.n_images:,}",
        shift=SHIFT_PX,
        turn=ROTATE_DEG,
        coupling_images=COUPLING_IMAGES,
        uniform=f"{1 / first.classes:.2f}",
        classes=first.classes,
    )
    if pairs:
        return t(
            "error: the share of the first {n_test} test images whose longest capsule is not their label (a MultiMNIST model "
            "reads one MNIST digit alone in its 36x36 frame here: its digit error, not the pair error its zoo card quotes); "
            "± chance: two standard errors of that error, what the test images alone can move it; shifted: accuracy on "
            "{n_images} test images each moved up to {shift} px and turned up to {turn}° (the same draw for every model); "
            "FGSM: accuracy under the FGSM attack on {n_images} images; pair acc.: the share of {pairs} MultiMNIST test pairs "
            "whose two digits are both among the two longest capsules (100 minus it is the pair error), '-' for a model that "
            "does not read 36x36 pairs; entropy: the couplings' mean entropy as a % of the uniform split's, over "
            "{coupling_images} images (100% = uniform couplings); c to pred.: a primary capsule's mean coupling to the "
            "predicted class (uniform: {uniform} with {classes} classes).",
            pairs=f"{pairs:,}",
            **v,
        )
    return t(
        "error: the share of the first {n_test} test images whose longest capsule is not their label; ± chance: two "
        "standard errors of that error, what the test images alone can move it; shifted: accuracy on {n_images} test images "
        "each moved up to {shift} px and turned up to {turn}° (the same draw for every model); FGSM: accuracy under the FGSM "
        "attack on {n_images} images; entropy: the couplings' mean entropy as a % of the uniform split's, over "
        "{coupling_images} images (100% = uniform couplings); c to pred.: a primary capsule's mean coupling to the predicted "
        "class (uniform: {uniform} with {classes} classes).",
        **v,
    )


def table(rows: list[Row]) -> list[dict]:
    """The rows as the page's table shows them (and the markdown table below): numbers rounded to
    `DECIMALS`, "-" where a measure does not apply (pair accuracy: its own decimals, as text), the
    routings by their names in the reader's language."""
    return [
        {
            "model": r.model,
            "trained with": r.trained_name,
            "run with": routing_name(r.run_with),
            "error %": round(r.test_error, 2),
            "± chance": round(spread(r.test_error, r.n_test), 2),
            "shifted acc. %": round(r.shifted_accuracy, 1),
            "FGSM acc. %": round(r.fgsm_accuracy, 1),
            "pair acc. %": "-" if r.pair_accuracy is None else f"{r.pair_accuracy:.2f}",
            "entropy %": round(100 * r.entropy_ratio, 1),
            "c to pred.": round(r.coupling_to_prediction, 2),
            "ms / image": round(r.timing.median, 2),
            "ms range": _range(r.timing),
        }
        for r in rows
    ]


def _range(timing: rules.Timing) -> str:
    lo, hi = timing.range
    if len(timing.samples) == 1:
        return t("one timing")
    return t("{lo}-{hi} ({n} timings)", lo=f"{lo:.2f}", hi=f"{hi:.2f}", n=len(timing.samples))


def markdown(rows: list[Row], studies: list[SeedStudy] = ()) -> str:
    """The rows as a markdown table, then the sentences the page prints (the short answer, each
    model's details, what compares models), then the seed studies'."""
    cells = table(rows)
    head = list(cells[0]) if cells else []
    lines = ["| " + " | ".join(t(COLUMNS[k]) for k in head) + " |", "|" + "---|" * len(head)]
    shown = lambda k, v: f"`{v}`" if k == "model" else f"{v:.{DECIMALS[k]}f}" if k in DECIMALS else str(v)  # noqa: E731
    lines += ["| " + " | ".join(shown(k, v) for k, v in c.items()) + " |" for c in cells]
    rep = report(rows, studies)
    out = lines + ["", t("In short:"), ""] + [f"- {line}" for line in rep.short + rep.hidden]
    for name, said in rep.models.items():
        out += ["", t("{model}:", model=f"`{name}`"), ""] + [f"- {line}" for line in said]
    across = rep.across + [line for st in studies for line in seed_sentences(st)]
    out += ["", t("Across models:"), ""] + [f"- {line}" for line in across]
    return "\n".join(out)
