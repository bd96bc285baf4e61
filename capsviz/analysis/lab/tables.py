"""The routing lab's table: its columns and their decimals, the words that define them, and the whole
report as Markdown (`markdown`)."""

from __future__ import annotations

from capsviz.analysis import rules
from capsviz.analysis.lab.measuring import COUPLING_IMAGES, ROTATE_DEG, SHIFT_PX, Row
from capsviz.analysis.lab.seeds import SeedStudy, seed_sentences
from capsviz.analysis.lab.verdicts import report
from capsviz.analysis.rules import spread

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
# The page shows the table as two, so that each fits a laptop's width: what the routings score, and
# what they do to the couplings and cost in time (each row keeps its model and routing)
SPLIT = (
    ("model", "trained with", "run with", "error %", "± chance", "shifted acc. %", "FGSM acc. %", "pair acc. %"),
    ("model", "run with", "entropy %", "c to pred.", "ms / image", "ms range"),
)
ENTROPY_TITLE = "Entropy, % (100 = uniform)"  # of the uniform split's; random couplings route nothing either, yet sit lower


def table_words(rows: list[Row]) -> str:
    """What each of the table's columns counts, said under it."""
    pairs = max((r.n_pairs for r in rows), default=0)
    first = rows[0]
    said = (
        f"error: the share of the first {first.n_test:,} test images whose longest capsule is not their label"
        + (
            " (a MultiMNIST model reads one MNIST digit alone in its 36x36 frame here: its digit error, not the pair error its zoo card quotes)"
            if pairs
            else ""
        )
        + f"; ± chance: two standard errors of that error, what the test images alone can move it; shifted: accuracy on {first.n_images:,} "
        f"test images each moved up to {SHIFT_PX} px and turned up to {ROTATE_DEG}° (the same draw for every model); FGSM: accuracy under "
        f"the FGSM attack on {first.n_images:,} images; "
    )
    if pairs:
        said += (
            f"pair acc.: the share of {pairs:,} MultiMNIST test pairs whose two digits are both among the two longest capsules "
            "(100 minus it is the pair error), '-' for a model that does not read 36x36 pairs; "
        )
    return said + (
        f"entropy: the couplings' mean entropy as a % of the uniform split's, over {COUPLING_IMAGES} images (100% = uniform couplings); "
        f"c to pred.: a primary capsule's mean coupling to the predicted class (uniform: {1 / first.classes:.2f} with {first.classes} classes)."
    )


def table(rows: list[Row]) -> list[dict]:
    """The rows as the page's table shows them (and the markdown table below): numbers rounded to
    `DECIMALS`, "-" where a measure does not apply (pair accuracy: its own decimals, as text)."""
    return [
        {
            "model": r.model,
            "trained with": r.trained,
            "run with": r.run_with,
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


def _range(t: rules.Timing) -> str:
    lo, hi = t.range
    return "one timing" if len(t.samples) == 1 else f"{lo:.2f}-{hi:.2f} ({len(t.samples)} timings)"


def markdown(rows: list[Row], studies: list[SeedStudy] = ()) -> str:
    """The rows as a markdown table, then the sentences the page prints (the short answer, each
    model's details, what compares models), then the seed studies'."""
    cells = table(rows)
    head = list(cells[0]) if cells else []
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    shown = lambda k, v: f"`{v}`" if k == "model" else f"{v:.{DECIMALS[k]}f}" if k in DECIMALS else str(v)  # noqa: E731
    lines += ["| " + " | ".join(shown(k, v) for k, v in c.items()) + " |" for c in cells]
    rep = report(rows, studies)
    out = lines + ["", "In short:", ""] + [f"- {line}" for line in rep.short + rep.hidden]
    for name, said in rep.models.items():
        out += ["", f"`{name}`:", ""] + [f"- {line}" for line in said]
    out += ["", "Across models:", ""] + [f"- {line}" for line in rep.across + [line for st in studies for line in seed_sentences(st)]]
    return "\n".join(out)
