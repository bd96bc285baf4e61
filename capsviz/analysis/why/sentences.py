"""The chapter's sentences, each verdict decided by a rule of capsviz.analysis.rules from the
numbers it quotes, which are the numbers its charts draw."""

from __future__ import annotations

import numpy as np

from capsviz.analysis import rules
from capsviz.analysis.why.changes import SCHEME_NAMES, SCHEMES
from capsviz.analysis.why.measuring import column
from capsviz.i18n import N_, t, tn


def _then(said: str, more: str) -> str:
    """Two sentences one after the other, as the language writes them: a space between them in
    English, none after a Chinese or Japanese full stop."""
    # i18n: two sentences in a row; Chinese and Japanese write them without a space between
    return t("{said} {more}", said=said, more=more)


def _amount_words(kind: str, amount: float) -> str:
    """The change, as a sentence's opening words: "Moved 4 pixels to the right", "Turned -30 degrees"."""
    if kind == "shift":
        return tn("Moved {n} pixel to the right", "Moved {n} pixels to the right", int(amount))
    return t("Turned {a} degrees", a=int(amount))


def invariance_words(sweep: dict, kind: str, amount: float) -> list[str]:
    """The sentences beside the sweep's charts at one change (`amount` of `kind`, not 0): what the
    CNN keeps, what the winning capsule does, whether its reconstruction follows; each verdict
    decided by the rules from the numbers quoted, which are the charts' numbers."""
    if float(amount) == 0.0:
        return [t("Pick a shift or a turn other than 0 to compare the digit with itself unchanged.")]
    n = sweep["images"]
    c = column(sweep, kind, amount)
    base = column(sweep, kind, 0)
    said = _amount_words(kind, amount)
    cnn = t(
        "{change}, the CNN keeps its answer on {kept:.1f}% of the {n} test images; its class scores move by {scores:.1f}% "
        "of their size and its pooled features by {features:.1f}%.",
        change=said,
        kept=c["cnn_kept"],
        n=n,
        scores=c["cnn_scores"],
        features=c["cnn_features"],
    )
    if rules.nearly_invariant(c["cnn_features"] / 100):
        cnn = _then(cnn, t("Pooling kept its features nearly invariant, as the story says."))
    elif rules.answer_stays(c["cnn_kept"] / 100):
        cnn = _then(
            cnn,
            t(
                "Pooling did not make its features invariant: they change with the input too, and only the answer stays. "
                "What the CNN lacks is not change but a readable pose."
            ),
        )
    else:
        cnn = _then(cnn, t("Pooling did not make its features invariant, and its answer changes too, on more than a tenth of the images."))
    caps = t(
        "The winning capsule keeps its answer on {kept:.1f}%; its length goes from {l0:.2f} to {l1:.2f}, its vector moves by "
        "{vector:.1f}% of its size, turning through {angle:.1f} degrees, and {dims:.1f} of its dimensions move by a slider "
        "step ({step}) or more.",
        kept=c["caps_kept"],
        l0=base["caps_length"],
        l1=c["caps_length"],
        vector=c["caps_vector"],
        angle=c["caps_angle"],
        dims=c["caps_dims"],
        step=rules.DIM_STEP,
    )
    level = rules.bounded_trend(base["caps_length"], c["caps_length"])
    if rules.nearly_invariant(c["caps_vector"] / 100):
        caps = _then(caps, t("The capsule barely changes: here it is nearly invariant, like a pooled feature, not equivariant."))
    elif level == "falls":
        caps = _then(
            caps, t("Not what the story says: its length falls by more than a tenth, so the capsule loses presence too, not only pose.")
        )
    elif level == "rises":
        caps = _then(caps, t("Its length rises by more than a tenth: the change is not in its pose alone."))
    elif not rules.answer_stays(c["caps_kept"] / 100):
        caps = _then(
            caps,
            t(
                "Its length stays on average, but its answer changes on more than a tenth of the images: the change is not in its pose alone."
            ),
        )
    else:
        caps = _then(caps, t("Its presence stays while its pose changes: what the story calls equivariance."))
    share = c["follows"]
    if rules.follows(share / 100):
        rec = t(
            "Its reconstruction is closer to the moved digit than to the digit where it was on {share:.1f}% of the images: "
            "the drawing follows the digit.",
            share=share,
        )
    else:
        rec = t(
            "Its reconstruction is closer to the moved digit than to the digit where it was on only {share:.1f}% of the "
            "images: the drawing does not follow the digit.",
            share=share,
        )
    return [cnn, caps, rec]


def one_image_words(view: dict, names, amount: float) -> str:
    """One sentence on the single digit at one value: what its capsule and the CNN did there."""
    k = view["values"].index(float(amount))
    zero = view["values"].index(0.0)
    moves = int((np.abs(view["vectors"][k] - view["vectors"][zero]) >= rules.DIM_STEP).sum())
    return t(
        "On this digit, the {name} capsule's length goes from {l0:.2f} to {l1:.2f} and it turns through {angle:.1f} degrees "
        "({moves} of its {dims} dimensions move by {step} or more); the CNN's score for {cnn_name} goes from {s0:.2f} to "
        "{s1:.2f} and its pooled features move by {features:.1f}% of their size.",
        name=names[view["capsule"]],
        l0=float(view["lengths"][zero]),
        l1=float(view["lengths"][k]),
        angle=float(view["angles"][k]),
        moves=moves,
        dims=view["vectors"].shape[1],
        step=rules.DIM_STEP,
        cnn_name=names[view["cnn_answer"]],
        s0=float(view["cnn_score"][zero]),
        s1=float(view["cnn_score"][k]),
        features=float(view["cnn_features"][k]),
    )


def parts_words(sweep: dict, scheme: str) -> list[str]:
    """Two sentences on one scheme: who still names the true class (and whether capsules are
    more sensitive to the arrangement, beyond chance), and how the scores fall."""
    k = 1 + SCHEMES.index(scheme)
    n = sweep["both_right"]
    cnn, caps = sweep["cnn_right"][k], sweep["caps_right"][k]
    said = t(
        "With the {scheme}, the CNN still names the true class on {cnn:.1f}% of the {n} test images both models get right "
        "unchanged, the capsule network on {caps:.1f}%.",
        scheme=t(SCHEME_NAMES[scheme]),
        cnn=cnn,
        n=n,
        caps=caps,
    )
    band = rules.noise(cnn, n, caps, n)
    if not rules.beyond_chance(cnn, n, caps, n):
        said = _then(
            said,
            t(
                "The gap is within chance (±{band:.1f} points): capsules are not more sensitive to where the parts are than the CNN here.",
                band=band,
            ),
        )
    elif caps < cnn:
        said = _then(
            said,
            t(
                "Capsules are more sensitive to where the parts are: they give up the true class more often, a gap beyond "
                "chance (±{band:.1f} points).",
                band=band,
            ),
        )
    else:
        said = _then(
            said,
            t(
                "Capsules are less sensitive to where the parts are than the CNN here, a gap beyond chance (±{band:.1f} "
                "points): on this measurement the story's scrambled face fools the capsules more, not less.",
                band=band,
            ),
        )
    scores = t(
        "The CNN's score for the true class goes from {c0:.2f} to {c1:.2f}; the capsule's length from {l0:.2f} to {l1:.2f}, "
        "and its votes' agreement from {a0:.2f} to {a1:.2f}.",
        c0=sweep["cnn_score"][0],
        c1=sweep["cnn_score"][k],
        l0=sweep["caps_length"][0],
        l1=sweep["caps_length"][k],
        a0=sweep["agreement"][0],
        a1=sweep["agreement"][k],
    )
    return [said, scores]


def viewpoint_words(sweep: dict, kind: str, amount: float) -> list[str]:
    """The sentences beside the votes' charts at one change (not 0): whether the votes move
    together (rules.moves_together) and what coordinate addition adds, with and without it."""
    if float(amount) == 0.0:
        return [t("Pick a shift or a turn other than 0 to see the votes move.")]
    k = sweep[f"{kind}_values"].index(float(amount))
    move, s0, s1 = sweep[f"{kind}_mean_move"][k], sweep[f"{kind}_spread_before"][k], sweep[f"{kind}_spread_after"][k]
    said = t(
        "{change}, the mean of the winning class's votes moves by {move:.3f} while their spread goes from {s0:.3f} to "
        "{s1:.3f} (averages over {n} test images).",
        change=_amount_words(kind, amount),
        move=move,
        s0=s0,
        s1=s1,
        n=sweep["images"],
    )
    if rules.moves_together(move, s0, s1):
        said = _then(said, t("The votes move together: the cloud travels without scattering, so their agreement survives the change."))
    elif rules.trend(s0, s1) == "rises":
        said = _then(
            said,
            t(
                "The votes do not move together: their spread grows by more than a tenth, so the change of viewpoint "
                "scatters them, not only moves them."
            ),
        )
    elif rules.trend(s0, s1) == "falls":
        said = _then(
            said,
            t(
                "The votes do not move together: their spread shrinks by more than a tenth, so the change of viewpoint "
                "gathers them, not only moves them."
            ),
        )
    else:
        said = _then(
            said,
            t(
                "Their spread stays, but their mean moves by less than a tenth of it: the votes barely move, so the pose "
                "carries little of this change."
            ),
        )
    if not sweep["coordinates"]:
        return [said, t("This model was trained without coordinate addition: its votes carry no position of their own.")]
    coords = t(
        "Coordinate addition adds to each vote the scaled row and column of its receptive field's centre. With it, the "
        "mean pose's two position entries move by {with_:.3f}; without it, on the same weights, by {without:.3f}. Without "
        "it the model keeps its answer on {kept_plain:.1f}% of the moved images, against {kept:.1f}% with it, and unchanged "
        "it gives the same answer as with it on {same:.1f}%.",
        with_=sweep[f"{kind}_position_move"][k],
        without=sweep[f"{kind}_position_move_plain"][k],
        kept_plain=sweep[f"{kind}_kept_plain"][k],
        kept=sweep[f"{kind}_kept"][k],
        same=sweep["same_answer"],
    )
    with_, without = sweep[f"{kind}_position_move"][k], sweep[f"{kind}_position_move_plain"][k]
    if rules.trend(without, with_) == "stays about level":
        coords = _then(
            coords,
            t(
                "On this model coordinate addition makes little difference here: the position moves about as much without it (within a tenth)."
            ),
        )
    elif with_ > without:
        coords = _then(coords, t("With coordinate addition the mean pose follows the position more: its position entries move further."))
    else:
        coords = _then(coords, t("With coordinate addition the position entries move less than without it, not more."))
    return [said, coords]


CHAPTER_WORDS = (
    N_("invariance"),
    N_("equivariance"),
    N_("pooling"),
    N_("pose"),
    N_("inverse graphics"),
    N_("viewpoint"),
    N_("coordinate addition"),
    N_("parse tree"),
)


def chapter_words() -> list[tuple[str, str]]:
    """The chapter's words in the order it meets them: (as the reader's language says it, the
    glossary entry's English name, which the glossary's search finds)."""
    return [(t(word), word) for word in CHAPTER_WORDS]


def inverse_graphics_words() -> list[str]:
    """The short step on inverse graphics that leads to the explorer."""
    return [
        t(
            "Rendering turns a description (what is there, at which position, size, slant and thickness) into pixels. A "
            "capsule network is asked to run it backwards: inverse graphics. The winning capsule's 16 numbers are that "
            "description, and the decoder draws from them alone."
        ),
        t(
            "In the explorer, each slider moves one of the 16 numbers: watch which change the drawing (that is the pose) "
            "and which draw almost nothing (the explorer says which)."
        ),
    ]
