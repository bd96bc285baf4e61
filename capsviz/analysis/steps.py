"""The tour's shared step machinery: a step as the page shows it (`Step`), what a family's tour is
(`Tour`: its trace, its steps and its walk), and the words every tour's steps share, each built
from the very numbers the step shows.

Each family's tour lives in its folder (capsviz/families/NAME/tour.py): the trace of one image
through its layers, the titles of its steps and the walk that fills them; capsviz.analysis.tour
finds a model's tour through its family's registry entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from capsviz.analysis import rule_words, rules, tour_questions
from capsviz.analysis.questions import Question, Words, two
from capsviz.glossary import label
from capsviz.i18n import N_, Nn_, gap, t, tn
from capsviz.registry import ROUTINGS
from capsviz.routing import squash
from capsviz.text import plain

SHOWN = 6  # primary capsules followed by name through routing: few enough to read their numbers
MAPS = 16  # Conv1 feature maps drawn

# The sentences of the steps below that depend only on numbers the static site computes too, each once:
# the functions here fill them, and capsviz/site/said.py exports these very tables for web/js/said.js.
MESSAGES = {
    "answer": N_(
        "The answer is the longest {capsule}: **{winner}** with length {length} (label: {truth}); the runner-up, "
        "{second}, has {second_len}."
    ),
    "sat_most": N_(
        "Measured here: {share} of the {n} primary capsules are longer than {limit} (lengths {lo} to {hi}). Most of "
        "them are then nearly equally long, so in this trained model a primary capsule's length hardly tells where the "
        "{shown} is; what differs between them is their direction, and so the predictions they make (next step)."
    ),
    "sat": N_("Measured here: {share} of the {n} primary capsules are longer than {limit} (lengths {lo} to {hi})."),
    "first": N_("first"),
    "second": N_("second"),
    "third": N_("third"),
    "nth": N_("{n}th"),
    "pred_1": N_(
        "Measured here: the first column, {name}, whose own length |u_i| is {own}, predicts {w} with length {w_len}, "
        "its longest prediction; the next longest is for {next} ({next_len}); its shortest is for {low} ({low_len}): "
        "one capsule predicts every {thing}, some louder than others, from one vector and a different W for each."
    ),
    "pred_2": N_(
        "Measured here: the first column, {name}, whose own length |u_i| is {own}, predicts {w} with length {w_len}, "
        "only its {ordinal} longest: its longest prediction is for {top} ({top_len}); its shortest is for {low} "
        "({low_len}): one capsule predicts every {thing}, some louder than others, from one vector and a different W "
        "for each."
    ),
    "pred_n": N_(
        "Measured here: the first column, {name}, whose own length |u_i| is {own}, predicts {w} with length {w_len}, "
        "only its {ordinal} longest: its longest prediction is for {top} ({top_len}), then {next} ({next_len}); its "
        "shortest is for {low} ({low_len}): one capsule predicts every {thing}, some louder than others, from one "
        "vector and a different W for each."
    ),
    "pred_top": N_("Here its longest vote is for {w}, the {thing} routing picks; a vote's weight still comes from its coupling."),
    "pred_other": N_(
        "Its vote for {top} is longer than its vote for {w}, yet {w} is the {thing} routing picks: length alone does "
        "not decide, the couplings and the other capsules' votes do."
    ),
    "squash": N_("|{s}| = {s_len} squashes to |{v}| = {v_len}"),
    "squash_rounded": N_(
        "|{s}| = {s_len} squashes to |{v}| = {v_len} (both rounded to two decimals: the squash acts on the unrounded length)"
    ),
    "coupled_first": N_(
        "Measured here: the {few} loudest predictions for {name} are coupled to it by {loud}; averaged over all "
        "{capsules} primary capsules the coupling to {name} is {mean} (uniform {u}), {weighted} weighted by prediction "
        "length."
    ),
    "loud_all": N_(
        "Measured here: the {few} loudest predictions for {name} are coupled to it by {loud}, but they are {few} of "
        "{capsules}: averaged over all {capsules} primary capsules the coupling to {name} is {mean} (uniform {u}). All "
        "of the {few} loudest reach {factor} times uniform or more (up to {top}), yet the mean over all {capsules}, "
        "which the near-uniform rule reads, stays below {factor} times uniform."
    ),
    "loud_mean": N_(
        "Measured here: the {few} loudest predictions for {name} are coupled to it by {loud}; averaged over all "
        "{capsules} primary capsules the coupling to {name} is {mean} (uniform {u}): the mean has moved to {factor} "
        "times uniform or more, not only the loudest few."
    ),
    "loud_none": N_(
        "Measured here: the {few} loudest predictions for {name} are coupled to it by {loud}; averaged over all "
        "{capsules} primary capsules the coupling to {name} is {mean} (uniform {u}): neither the loudest few nor the "
        "mean has reached {factor} times uniform."
    ),
    "weighted": N_("Weighted by prediction length the mean is {weighted}."),
    "who": N_("all the primary capsules' couplings together"),
    "share_each": N_("{lo} each"),
    "share_range": N_("{lo} to {hi}"),
    "rule_stated": N_("By the routing lab's near-uniform rule (stated in full at {where}), {who} are {verdict}."),
    "rule_full": N_("By the routing lab's rule, {who} are {verdict}. {rule}"),
    "measured": N_("Measured here: {said}"),
    "margin_label_met": N_(
        "on this image the label's capsule, {name}, has {length}, above {present}; every other is shorter than {absent}"
        " (the longest of them, {top}, {top_len}): this image meets both targets."
    ),
    "margin_longest_met": N_(
        "on this image the longest capsule, {name}, has {length}, above {present}; every other is shorter than {absent}"
        " (the longest of them, {top}, {top_len}): this image meets both targets."
    ),
    "margin_label_short": N_(
        "on this image the label's capsule, {name}, has {length}, not above {present}; every other is shorter than "
        "{absent} (the longest of them, {top}, {top_len}): this image does not meet the targets, so the loss would "
        "still push these lengths."
    ),
    "margin_longest_short": N_(
        "on this image the longest capsule, {name}, has {length}, not above {present}; every other is shorter than "
        "{absent} (the longest of them, {top}, {top_len}): this image does not meet the targets, so the loss would "
        "still push these lengths."
    ),
}

COUNTED = {
    "loud_some": Nn_(
        "Measured here: the {few} loudest predictions for {name} are coupled to it by {loud}, but they are {few} of "
        "{capsules}: averaged over all {capsules} primary capsules the coupling to {name} is {mean} (uniform {u}). {n} "
        "of the {few} loudest reaches {factor} times uniform or more (up to {top}), yet the mean over all {capsules}, "
        "which the near-uniform rule reads, stays below {factor} times uniform.",
        "Measured here: the {few} loudest predictions for {name} are coupled to it by {loud}, but they are {few} of "
        "{capsules}: averaged over all {capsules} primary capsules the coupling to {name} is {mean} (uniform {u}). {n} "
        "of the {few} loudest reach {factor} times uniform or more (up to {top}), yet the mean over all {capsules}, "
        "which the near-uniform rule reads, stays below {factor} times uniform.",
    ),
    "margin_label_loud_met": Nn_(
        "on this image the label's capsule, {name}, has {length}, above {present}; {n} of the other {others} is not "
        "shorter than {absent} (the longest, {top}, {top_len}): this image does not meet the targets, so the loss would"
        " still push these lengths.",
        "on this image the label's capsule, {name}, has {length}, above {present}; {n} of the other {others} are not "
        "shorter than {absent} (the longest, {top}, {top_len}): this image does not meet the targets, so the loss would"
        " still push these lengths.",
    ),
    "margin_longest_loud_met": Nn_(
        "on this image the longest capsule, {name}, has {length}, above {present}; {n} of the other {others} is not "
        "shorter than {absent} (the longest, {top}, {top_len}): this image does not meet the targets, so the loss would"
        " still push these lengths.",
        "on this image the longest capsule, {name}, has {length}, above {present}; {n} of the other {others} are not "
        "shorter than {absent} (the longest, {top}, {top_len}): this image does not meet the targets, so the loss would"
        " still push these lengths.",
    ),
    "margin_label_loud_short": Nn_(
        "on this image the label's capsule, {name}, has {length}, not above {present}; {n} of the other {others} is not"
        " shorter than {absent} (the longest, {top}, {top_len}): this image does not meet the targets, so the loss "
        "would still push these lengths.",
        "on this image the label's capsule, {name}, has {length}, not above {present}; {n} of the other {others} are "
        "not shorter than {absent} (the longest, {top}, {top_len}): this image does not meet the targets, so the loss "
        "would still push these lengths.",
    ),
    "margin_longest_loud_short": Nn_(
        "on this image the longest capsule, {name}, has {length}, not above {present}; {n} of the other {others} is not"
        " shorter than {absent} (the longest, {top}, {top_len}): this image does not meet the targets, so the loss "
        "would still push these lengths.",
        "on this image the longest capsule, {name}, has {length}, not above {present}; {n} of the other {others} are "
        "not shorter than {absent} (the longest, {top}, {top_len}): this image does not meet the targets, so the loss "
        "would still push these lengths.",
    ),
}


def _say(key: str, /, **values) -> str:
    """MESSAGES[key] in this run's language, filled (a function of its own: the catalog takes its messages from MESSAGES)."""
    return t(MESSAGES[key], **values)


def _say_n(key: str, n: int, /, **values) -> str:
    """COUNTED[key]'s form for n in this run's language, filled."""
    return tn(*COUNTED[key], n, **values)


@dataclass
class Step:
    """One step of the tour as the page shows it: a figure drawn from `data`, and the sentences
    about it, computed here from the very numbers in `data` (tests check every number they quote).

    figure: which picture the page draws from `data` ("image", "maps", "arrows", "grid", "routing",
    "bars", "em_primary", "votes", "em", "lab", or "" for none); caption: under it, as plain text
    (the page escapes it); text: paragraphs of Markdown and measured: the boxed "Measured here"
    sentence (a warning when `warn`), with every user-given name already made plain; table: a few
    numbers as a table; terms: the glossary entries whose help goes under the step; question: what a
    student predicts before the step shows (capsviz.analysis.tour_questions)."""

    key: str  # stable name (tests, the URL stays a number)
    title: str
    figure: str = ""
    data: dict = field(default_factory=dict)
    caption: str = ""
    text: list[str] = field(default_factory=list)
    measured: str = ""
    warn: bool = False
    table: dict | None = None
    terms: tuple[str, ...] = ()
    link: tuple[str, str] | None = None  # (an app page, its label): where the step sends a student to see more
    # asked before the step is shown (predict, then see), answered from the very numbers in `data`
    question: Question | None = None


@dataclass(frozen=True)
class Tour:
    """How to follow an image through one family: its trace's type, the function that traces an
    image (`follow(model, image)`), the steps' keys and titles (`steps(iterations, words, grid)`:
    from the tour's routing iterations, the model's class words and its primary grid's side) and
    the walk that fills them (`walk(trace, names, words, model_name, truth, looks, lab_rows, config)`)."""

    trace: type
    follow: Callable
    steps: Callable[..., list[Step]]
    walk: Callable[..., list[Step]]


def plane(vectors: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
    """(2, D): an orthonormal basis whose first axis is `first` (so a dot product with it is
    exact in the picture) and whose second is the main remaining direction of `vectors` (N, D)."""
    e1 = first / first.norm().clamp_min(1e-12)
    rest = vectors - (vectors @ e1).unsqueeze(-1) * e1
    _, _, Vt = torch.linalg.svd(rest, full_matrices=False)
    e2 = Vt[0] - (Vt[0] @ e1) * e1
    return torch.stack([e1, e2 / e2.norm().clamp_min(1e-12)])


def squashed(s: np.ndarray) -> np.ndarray:
    return squash(torch.as_tensor(s)).numpy()


# ---------- the steps as the page shows them: figure data and the sentences about it ----------

SATURATED = 0.9  # a primary capsule longer than this is called long (the margin loss's own target for "present")
MOST = 0.5  # "most" primary capsules are long when more than half of them are


def share_words(x: np.ndarray) -> str:
    """'0.14 to 0.23', or '1.00 each' when they are all the same at two decimals."""
    lo, hi = two(x.min()), two(x.max())
    return _say("share_each", lo=lo) if lo == hi else _say("share_range", lo=lo, hi=hi)


def squash_words(s_name: str, v_name: str, s_len: float, v_len: float, length: Callable[[float], float]) -> str:
    """'|s_7| = 2.38 squashes to |v_7| = 0.85', both as the figure writes them; when squashing the
    rounded |s| does not give the rounded |v| (`length`: the squash on a length), it says so."""
    v = dict(s=s_name, v=v_name, s_len=two(s_len), v_len=two(v_len))
    if two(length(float(two(s_len)))) != two(v_len):
        return _say("squash_rounded", **v)
    return _say("squash", **v)


def capsnet_length(n: float) -> float:
    """Eq. 1 of Sabour et al. on a length: |v| = |s|^2 / (1 + |s|^2)."""
    return n * n / (1 + n * n)


def efficient_length(n: float) -> float:
    """Efficient-CapsNet's squash on a length: |v| = 1 - e^-|s|."""
    return 1 - float(np.exp(-n))


def near_uniform_words(entropy_ratio: float, share: float, uniform_share: float, who: str, stated_at: str = "") -> str:
    """`who` ('the couplings of this image') near or away from uniform by the rules' one rule, with
    the part that decided it, and the whole rule; or, where an earlier step said it (`stated_at`,
    'iteration 2'), a pointer to that step instead of the same four lines again."""
    verdict = rule_words.uniform_words(entropy_ratio, share, uniform_share)
    if stated_at:
        return _say(
            "rule_stated",
            where=stated_at,
            who=who,
            verdict=verdict,
        )
    return _say("rule_full", who=who, verdict=verdict, rule=rules.rule_words("near uniform"))


def long_share(lengths: np.ndarray) -> float:
    """The share of primary capsules longer than SATURATED."""
    return float((lengths > SATURATED).mean())


def pose_words(pose: np.ndarray) -> str:
    """What a learned 4x4 pose matrix's entries show, as its table writes them: their range; whether
    any lies beyond -1 to 1, where a rotation matrix's entries all lie (so it is not one); within,
    that this alone does not make it one. Meaning is claimed for no entry."""
    lo, hi = float(pose.min()), float(pose.max())
    v = dict(lo=f"{lo:.3f}", hi=f"{hi:.3f}")  # as its table writes them
    if max(abs(lo), abs(hi)) > 1:
        return t(
            "Measured here: the 16 entries of this pose run from {lo} to {hi}; a rotation matrix keeps every entry between -1 and 1, "
            "so this is not one: the paper means the matrix to hold the pose, and what each entry encodes is learned, not given.",
            **v,
        )
    return t(
        "Measured here: the 16 entries of this pose run from {lo} to {hi}, all between -1 and 1 as a rotation matrix's would be, "
        "though that alone does not make it one: what each entry encodes is learned, not given.",
        **v,
    )


def ordinal(n: int) -> str:
    if n == 1:
        return _say("first")
    if n == 2:
        return _say("second")
    if n == 3:
        return _say("third")
    return _say("nth", n=n)


def prediction_words(name: str, lengths: np.ndarray, names: list[str], W: int, thing: str, own: float | None = None) -> str:
    """What one primary capsule's prediction lengths (J,), the table's first column, say about class W: the longest of its
    predictions, where W's stands among them, and the shortest, each as the grid beside writes it; with `own`, the
    capsule's own length |u_i|, that W alone makes them differ; where W's is not the longest, that a longer vote does
    not count for more by its length (its coupling decides)."""
    order = [int(j) for j in np.argsort(-lengths, kind="stable")]
    rank, top, low = order.index(W) + 1, order[0], order[-1]
    v = dict(name=name, w=names[W], w_len=two(lengths[W]), low=names[low], low_len=two(lengths[low]), thing=thing)
    v |= dict(top=names[top], top_len=two(lengths[top]), next=names[order[1]], next_len=two(lengths[order[1]]), ordinal=ordinal(rank))
    if own is not None:
        v["own"] = two(own)
        if rank == 1:
            said = _say(
                "pred_1",
                **v,
            )
        elif rank == 2:
            said = _say(
                "pred_2",
                **v,
            )
        else:
            said = _say(
                "pred_n",
                **v,
            )
    elif rank == 1:
        said = t(
            "Measured here: the first column, {name} predicts {w} with length {w_len}, its longest prediction; the next longest is "
            "for {next} ({next_len}); its shortest is for {low} ({low_len}): one capsule predicts every {thing}, some louder than others.",
            **v,
        )
    elif rank == 2:
        said = t(
            "Measured here: the first column, {name} predicts {w} with length {w_len}, only its {ordinal} longest: its longest "
            "prediction is for {top} ({top_len}); its shortest is for {low} ({low_len}): one capsule predicts every {thing}, some "
            "louder than others.",
            **v,
        )
    else:
        said = t(
            "Measured here: the first column, {name} predicts {w} with length {w_len}, only its {ordinal} longest: its longest "
            "prediction is for {top} ({top_len}), then {next} ({next_len}); its shortest is for {low} ({low_len}): one capsule "
            "predicts every {thing}, some louder than others.",
            **v,
        )
    if rank == 1:
        return said + gap() + _say("pred_top", **v)
    return (
        said
        + gap()
        + _say(
            "pred_other",
            **v,
        )
    )


MARGIN_PRESENT, MARGIN_ABSENT = 0.9, 0.1  # the margin loss's targets m+ and m- (Eq. 4 of Sabour et al.)


def margin_words(lengths: np.ndarray, names: list[str], right: int | None) -> str:
    """Whether the lengths (J,) meet the margin loss's targets: the capsule of the label `right`
    (the longest where the label is unknown) longer than MARGIN_PRESENT, every other shorter than
    MARGIN_ABSENT; the numbers that decide it, as the bars beside write them."""
    j = int(np.argmax(lengths)) if right is None else right
    others = [k for k in range(len(lengths)) if k != j]
    top = max(others, key=lambda k: lengths[k])
    loud = [k for k in others if lengths[k] >= MARGIN_ABSENT]
    present = lengths[j] > MARGIN_PRESENT
    v = dict(name=names[j], length=two(lengths[j]), present=MARGIN_PRESENT, absent=MARGIN_ABSENT, top=names[top], top_len=two(lengths[top]))
    v |= dict(others=len(others))
    label_known = right is not None
    if not loud:
        if present and label_known:
            return _say(
                "margin_label_met",
                **v,
            )
        if present:
            return _say(
                "margin_longest_met",
                **v,
            )
        if label_known:
            return _say(
                "margin_label_short",
                **v,
            )
        return _say(
            "margin_longest_short",
            **v,
        )
    if present and label_known:
        return _say_n(
            "margin_label_loud_met",
            len(loud),
            **v,
        )
    if present:
        return _say_n(
            "margin_longest_loud_met",
            len(loud),
            **v,
        )
    if label_known:
        return _say_n(
            "margin_label_loud_short",
            len(loud),
            **v,
        )
    return _say_n(
        "margin_longest_loud_short",
        len(loud),
        **v,
    )


def saturation_words(lengths: np.ndarray, shown: str) -> tuple[str, bool]:
    """What the primary capsules' lengths say, and whether it is a warning (most of them long)."""
    long = long_share(lengths)
    v = dict(share=f"{long:.0%}", n=lengths.size, limit=SATURATED, lo=two(lengths.min()), hi=two(lengths.max()), shown=shown)
    if long > MOST:
        return (
            _say(
                "sat_most",
                **v,
            ),
            True,
        )
    return _say("sat", **v), False


def coupling_numbers(c: np.ndarray, entropy: np.ndarray, weights: np.ndarray, j: int) -> dict:
    """What the text says of one iteration's couplings to class j: c (I, J); entropy (I,) over log J;
    weights (I,) each capsule's prediction length for j. -> the mean coupling to j, the same weighted
    by prediction length, each as a multiple of uniform (1/J), and the mean entropy ratio."""
    J = c.shape[1]
    mean, weighted = float(c[:, j].mean()), float((c[:, j] * weights).sum() / max(weights.sum(), 1e-12))
    return {
        "mean": mean,
        "weighted": weighted,
        "mean_times": mean * J,
        "weighted_times": weighted * J,
        "entropy_mean": float(entropy.mean()),
    }


def loudest_words(shown_c: np.ndarray, mean: float, capsules: int, J: int, name: str) -> str:
    """The shown (loudest) capsules' couplings to class `name` and the mean over all `capsules` in one
    sentence that reconciles them: by the near-uniform rule's factor, whether the loudest few moved
    while the mean, which the rule reads, stayed below it; or neither moved; or the mean moved too."""
    u, factor = 1 / J, rules.NEAR_UNIFORM_SHARE
    v = dict(few=len(shown_c), loud=share_words(shown_c), name=name, capsules=f"{capsules:,}", mean=f"{mean:.3f}", u=f"{u:.3f}")
    v |= dict(factor=factor, top=two(shown_c.max()))
    reached = int((shown_c >= factor * u).sum())
    if float(shown_c.max()) >= factor * u and mean < factor * u:
        if reached == len(shown_c):
            return _say(
                "loud_all",
                **v,
            )
        return _say_n(
            "loud_some",
            reached,
            **v,
        )
    if mean >= factor * u:
        return _say(
            "loud_mean",
            **v,
        )
    return _say(
        "loud_none",
        **v,
    )


def coupling_words(it: int, numbers: dict, shown_c: np.ndarray, capsules: int, J: int, name: str, stated_at: str = "") -> str:
    """Iteration it's couplings to class `name`: the shown capsules' (`shown_c`) beside the mean over
    all `capsules` (loudest_words), the mean weighted by prediction length (`numbers`, from
    coupling_numbers), and after iteration 1 near uniform or not by the rule (said in full unless
    an earlier step did, `stated_at`)."""
    mean, weighted = numbers["mean"], numbers["weighted"]
    if it == 0:
        return _say(
            "coupled_first",
            few=len(shown_c),
            name=name,
            loud=share_words(shown_c),
            capsules=f"{capsules:,}",
            mean=f"{mean:.3f}",
            u=f"{1 / J:.3f}",
            weighted=f"{weighted:.3f}",
        )
    said = loudest_words(shown_c, mean, capsules, J, name) + gap() + _say("weighted", weighted=f"{weighted:.3f}")
    who = _say("who")
    said += gap() + near_uniform_words(numbers["entropy_mean"], mean, 1 / J, who, stated_at)
    long = rule_words.long_votes_words(name, weighted, 1 / J, mean)
    return said + (gap() + long if long else "")


def _verdict(gap: float, band: float, beyond: bool, up: str) -> str:
    """The end of a lab-step sentence on a gap between two rates: within chance, or `up` ("worse"
    for errors, "better" for accuracies) when positive beyond chance."""
    v = dict(gap=two(abs(gap)), band=two(band))
    if not beyond:
        return t("a gap of {gap} points, within the ±{band} chance gives, so no better or worse.", **v)
    if (up == "worse") == (gap > 0):
        return t("{gap} points worse, more than the ±{band} chance gives.", **v)
    return t("{gap} points better, more than the ±{band} chance gives.", **v)


def lab_words(rows: list, routing_words: dict[str, str], stated_at: str = "") -> tuple[list[str], dict]:
    """The lab step's answer from the lab's stored rows for one model (capsviz.analysis.lab.Row, one
    per routing it was run with): each other routing's test error against the model's own, beyond
    chance or not; the tallest bar; how far its own routing moves the couplings from uniform (the
    near-uniform rule in full unless an earlier step said it, `stated_at`). -> (sentences, the
    numbers they quote beside the figure's)."""
    own = next((r for r in rows if r.run_with == r.trained_with), None)
    if own is None:
        return [], {}
    said, gaps = [], {}
    # its own routing by the lab's words, except one iteration of dynamic routing, which keeps its own name
    mine = own.trained if own.trained != own.trained_with else routing_words.get(own.run_with, own.run_with)
    for r in rows:
        if r is own:
            continue
        diff, band = r.test_error - own.test_error, rules.noise(r.test_error, r.n_test, own.test_error, own.n_test)
        gaps[r.run_with] = (abs(diff), band)
        v = dict(routing=routing_words.get(r.run_with, r.run_with), error=two(r.test_error), n=f"{r.n_test:,}", own=two(own.test_error))
        v |= dict(mine=mine, verdict=_verdict(diff, band, rules.beyond_chance(r.test_error, r.n_test, own.test_error, own.n_test), "worse"))
        if r.pair_accuracy is None:
            said.append(
                t(
                    "Run with {routing}, the model misclassifies {error}% of {n} test images, against {own}% with its own {mine}: {verdict}",
                    **v,
                )
            )
        else:
            said.append(
                t(
                    "Run with {routing}, the model misclassifies {error}% of {n} single test digits, against {own}% with its own {mine}: {verdict}",
                    **v,
                )
            )
        if r.pair_accuracy is not None and own.pair_accuracy is not None and r.n_pairs and own.n_pairs:
            pair_gap = r.pair_accuracy - own.pair_accuracy
            pair_band = rules.noise(r.pair_accuracy, r.n_pairs, own.pair_accuracy, own.n_pairs)
            gaps[r.run_with + " pairs"] = (abs(pair_gap), pair_band)
            said.append(
                t(
                    "On pairs of overlapping digits, the task it was trained for (and what the routing lab judges it by), it gets "
                    "{accuracy}% of {n} test pairs right, against {own}% with its own {mine}: {verdict}",
                    accuracy=two(r.pair_accuracy),
                    n=f"{r.n_pairs:,}",
                    own=two(own.pair_accuracy),
                    mine=mine,
                    verdict=_verdict(
                        pair_gap, pair_band, rules.beyond_chance(r.pair_accuracy, r.n_pairs, own.pair_accuracy, own.n_pairs), "better"
                    ),
                )
            )
    tallest = max(rows, key=lambda r: r.test_error)
    if tallest is not own and rules.beyond_chance(tallest.test_error, tallest.n_test, own.test_error, own.n_test):
        why = t(ROUTINGS[tallest.run_with].about) if tallest.run_with in ROUTINGS else t("the couplings are set another way")
        v = dict(routing=routing_words.get(tallest.run_with, tallest.run_with), error=two(tallest.test_error), why=why, mine=mine)
        if own.pair_accuracy is not None:
            said.append(
                t(
                    "The tallest test-error bar is {routing} ({error}%): {why}, while this model was trained with {mine}: its weights W "
                    "learned to make predictions for those couplings, not for these.",
                    **v,
                )
            )
        else:
            said.append(
                t(
                    "The tallest bar is {routing} ({error}%): {why}, while this model was trained with {mine}: its weights W learned to "
                    "make predictions for those couplings, not for these.",
                    **v,
                )
            )
    if own.run_with in ROUTINGS and ROUTINGS[own.run_with].from_votes:
        said.append(
            t(
                "Averaged over the lab's test images, a primary capsule gives the predicted class {share} of its vote with {routing} "
                "(uniform: {uniform}).",
                share=two(own.coupling_to_prediction),
                routing=routing_words.get(own.run_with, own.run_with),
                uniform=two(1 / own.classes),
            )
            + gap()
            + near_uniform_words(own.entropy_ratio, own.coupling_to_prediction, 1 / own.classes, t("its couplings"), stated_at)
        )
    return said, {"gaps": [g for pair in gaps.values() for g in pair]}


def lab_routing_said(name: str) -> Words:
    """A routing as the lab runs it (capsviz.analysis.lab's `run_with_words`), said in each reader's
    language: its registry words, with the lab's iterations for an iterative one."""
    from capsviz.analysis.lab.measuring import ITERATIONS

    entry = ROUTINGS[name]
    if entry.iterative:
        return Words.tn("{routing}, {n} iteration", "{routing}, {n} iterations", ITERATIONS, routing=Words.t(entry.words))
    return Words.t(entry.words)


def lab_routing_words(name: str) -> str:
    """lab_routing_said in the reader's language."""
    return str(lab_routing_said(name))


def lab_question(rows: list, model_name: str) -> Question | None:
    """The lab step's question: the model run with uniform couplings (or, for a model trained with
    them, the first other routing the lab ran) against its own routing, as lab_words judges it."""
    own = next((r for r in rows if r.run_with == r.trained_with), None)
    others = sorted((r for r in rows if r is not own), key=lambda r: r.run_with != "uniform")
    if own is None or not others:
        return None
    other = others[0]
    routing = lab_routing_said(other.run_with) if other.run_with in ROUTINGS else Words.as_is(other.run_with)
    return tour_questions.lab_gap(model_name, own, other, routing)


def lab_step(step: Step, rows: list, routing: str, model_name: str, iterations: int = 1, classes: int = 10, stated_at: str = "") -> Step:
    """The last step of a vector-capsule tour: the lab's stored test errors for this model, each routing a bar.
    `iterations`: the routing iterations the tour showed; `classes`: J; `stated_at`: the step that said the
    near-uniform rule in full, if one did."""
    from capsviz.analysis.lab import LAB_ROUTINGS

    if routing == "self-attention":
        asked = t("You have watched self-attention set each {c} in one pass.", c=label("c"))
    elif iterations == 1:
        asked = t(
            "You have watched every {c} stay at 1/{classes}: with one iteration, routing never updates them.", c=label("c"), classes=classes
        )
    else:
        asked = t("You have watched {c} change from one routing iteration to the next.", c=label("c"))
    text = [
        asked
        + gap()
        + t(
            "The field's own question is whether that matters: would the same capsules do as well with every vote split "
            "evenly (uniform couplings, no routing), or split at random?"
        )
    ]
    if not rows:
        return replace(
            step,
            text=text,
            measured=t("The routing lab has not measured this model yet: open it and press **Run the lab** (a minute or two)."),
            terms=("uniform", "random_couplings"),
        )
    said, quoted = lab_words(rows, {name: lab_routing_words(name) for name in LAB_ROUTINGS}, stated_at)
    from capsviz.analysis.lab.measuring import routing_name

    data = {
        "routings": [r.run_with for r in rows],
        "routing_names": [routing_name(r.run_with) for r in rows],  # as the chart names them, in the reader's language
        "error": [r.test_error for r in rows],
        "spread": [rules.spread(r.test_error, r.n_test) for r in rows],
        "n_test": rows[0].n_test,
        "entropy": [r.entropy_ratio for r in rows],
        "share": [r.coupling_to_prediction for r in rows],
        "uniform": [1 / r.classes for r in rows],
        **quoted,
    }
    if all(r.pair_accuracy is not None and r.n_pairs for r in rows):  # a model that reads pairs: its own task beside
        data |= {
            "pairs": [r.pair_accuracy for r in rows],
            "pair_spread": [rules.spread(r.pair_accuracy, r.n_pairs) for r in rows],
            "n_pairs": rows[0].n_pairs,
        }
    return replace(
        step,
        figure="lab",
        data=data,
        caption=(
            t(
                "{model} run with each routing: test error (%) on {n} test images (single digits), and pair accuracy (%) on {pairs} "
                "test pairs. Error bars: two standard errors, how far the test images alone can move each number.",
                model=model_name,
                n=f"{rows[0].n_test:,}",
                pairs=f"{rows[0].n_pairs:,}",
            )
            if "pairs" in data
            else t(
                "{model} run with each routing: test error (%) on {n} test images. Error bars: two standard errors, how far the test "
                "images alone can move each number.",
                model=model_name,
                n=f"{rows[0].n_test:,}",
            )
        ),
        text=text + said,
        terms=("uniform", "random_couplings"),
        question=lab_question(rows, model_name),
    )


def input_step(step: Step, image: np.ndarray, truth: str, looks: str, text: list[str]) -> Step:
    return replace(step, figure="image", data={"images": [image], "labels": [t("label: {truth}", truth=truth)]}, caption=looks, text=text)


def lengths_step(
    step: Step, lengths: np.ndarray, names: list[str], W: int, R: int, truth: str, capsule: str, title: str, text: list[str]
) -> Step:
    right = names.index(truth) if truth in names else None  # an image without a known label: the longest capsule
    lines = {f"{MARGIN_PRESENT}": MARGIN_PRESENT, f"{MARGIN_ABSENT}": MARGIN_ABSENT}
    return replace(
        step,
        figure="bars",
        data={"values": lengths, "names": names, "highlight": W, "title": title, "axis": t("length"), "lines": lines}
        | ({} if right is None else {"label": right}),  # the capsule the margin loss wants long
        caption=t("dotted: the margin loss's targets"),
        text=[
            _say(
                "answer",
                capsule=capsule,
                winner=plain(names[W]),
                length=two(lengths[W]),
                truth=plain(truth),
                second=plain(names[R]),
                second_len=two(lengths[R]),
            ),
            *text,
        ],
        measured=_say("measured", said=margin_words(lengths, [plain(n) for n in names], right)),
        terms=("margin_loss", "length"),
    )


def reconstruction_step(step: Step, image: np.ndarray, rec: np.ndarray | None, name: str, D: int, family: str, text: list[str]) -> Step:
    if rec is None:
        return replace(
            step, measured=t("This {family} was trained without a decoder, so there is nothing to redraw.", family=family), text=text
        )
    return replace(
        step,
        figure="image",
        data={"images": [image, rec], "labels": [t("input"), t("redrawn from capsule {name}", name=name)]},
        caption=t("the decoder sees only the winning capsule's {d} numbers", d=D),
        text=text,
    )
