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

from capsviz.analysis import rules
from capsviz.glossary import label
from capsviz.registry import ROUTINGS
from capsviz.routing import squash
from capsviz.text import plain

SHOWN = 6  # primary capsules followed by name through routing: few enough to read their numbers
MAPS = 16  # Conv1 feature maps drawn


@dataclass
class Step:
    """One step of the tour as the page shows it: a figure drawn from `data`, and the sentences
    about it, computed here from the very numbers in `data` (tests check every number they quote).

    figure: which picture the page draws from `data` ("image", "maps", "arrows", "grid", "routing",
    "bars", "em_primary", "votes", "em", "lab", or "" for none); caption: under it, as plain text
    (the page escapes it); text: paragraphs of Markdown and measured: the boxed "Measured here"
    sentence (a warning when `warn`), with every user-given name already made plain; table: a few
    numbers as a table; terms: the glossary entries whose help goes under the step."""

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


def two(x: float) -> str:
    """The tour's numbers as its figures write them: two decimals."""
    return f"{x:.2f}"


def share_words(x: np.ndarray) -> str:
    """'0.14 to 0.23', or '1.00 each' when they are all the same at two decimals."""
    lo, hi = two(x.min()), two(x.max())
    return f"{lo} each" if lo == hi else f"{lo} to {hi}"


def squash_words(s_name: str, v_name: str, s_len: float, v_len: float, length: Callable[[float], float]) -> str:
    """'|s_7| = 2.38 squashes to |v_7| = 0.85', both as the figure writes them; when squashing the
    rounded |s| does not give the rounded |v| (`length`: the squash on a length), it says so."""
    said = f"|{s_name}| = {two(s_len)} squashes to |{v_name}| = {two(v_len)}"
    if two(length(float(two(s_len)))) != two(v_len):
        said += " (both rounded to two decimals: the squash acts on the unrounded length)"
    return said


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
    verdict = f"{who} are {rules.uniform_words(entropy_ratio, share, uniform_share)}."
    if stated_at:
        return f"By the routing lab's near-uniform rule (stated in full at {stated_at}), {verdict}"
    return f"By the routing lab's rule, {verdict} {rules.RULES['near uniform']}"


def long_share(lengths: np.ndarray) -> float:
    """The share of primary capsules longer than SATURATED."""
    return float((lengths > SATURATED).mean())


def pose_words(pose: np.ndarray) -> str:
    """What a learned 4x4 pose matrix's entries show, as its table writes them: their range; whether
    any lies beyond -1 to 1, where a rotation matrix's entries all lie (so it is not one); within,
    that this alone does not make it one. Meaning is claimed for no entry."""
    lo, hi = float(pose.min()), float(pose.max())
    said = f"Measured here: the 16 entries of this pose run from {lo:.3f} to {hi:.3f}"  # as its table writes them
    if max(abs(lo), abs(hi)) > 1:
        return said + (
            "; a rotation matrix keeps every entry between -1 and 1, so this is not one: the paper means the matrix to hold "
            "the pose, and what each entry encodes is learned, not given."
        )
    return said + (
        ", all between -1 and 1 as a rotation matrix's would be, though that alone does not make it one: what each entry "
        "encodes is learned, not given."
    )


def ordinal(n: int) -> str:
    return {1: "first", 2: "second", 3: "third"}.get(n, f"{n}th")


def prediction_words(name: str, lengths: np.ndarray, names: list[str], W: int, thing: str, own: float | None = None) -> str:
    """What one primary capsule's prediction lengths (J,), the table's first column, say about class W: the longest of its
    predictions, where W's stands among them, and the shortest, each as the grid beside writes it; with `own`, the
    capsule's own length |u_i|, that W alone makes them differ; where W's is not the longest, that a longer vote does
    not count for more by its length (its coupling decides)."""
    order = [int(j) for j in np.argsort(-lengths, kind="stable")]
    rank, top, low = order.index(W) + 1, order[0], order[-1]
    whose = f", whose own length |u_i| is {two(own)}," if own is not None else ""
    said = f"Measured here: the first column, {name}{whose} predicts {names[W]} with length {two(lengths[W])}"
    if rank == 1:
        nxt = order[1]
        said += f", its longest prediction; the next longest is for {names[nxt]} ({two(lengths[nxt])})"
    else:
        said += f", only its {ordinal(rank)} longest: its longest prediction is for {names[top]} ({two(lengths[top])})" + (
            f", then {names[order[1]]} ({two(lengths[order[1]])})" if rank > 2 else ""
        )
    said += f"; its shortest is for {names[low]} ({two(lengths[low])}): one capsule predicts every {thing}, some louder than others"
    said += ", from one vector and a different W for each." if own is not None else "."
    if rank == 1:
        return said + f" Here its longest vote is for {names[W]}, the {thing} routing picks; a vote's weight still comes from its coupling."
    return said + (
        f" Its vote for {names[top]} is longer than its vote for {names[W]}, yet {names[W]} is the {thing} routing picks: "
        f"length alone does not decide, the couplings and the other capsules' votes do."
    )


MARGIN_PRESENT, MARGIN_ABSENT = 0.9, 0.1  # the margin loss's targets m+ and m- (Eq. 4 of Sabour et al.)


def margin_words(lengths: np.ndarray, names: list[str], right: int | None) -> str:
    """Whether the lengths (J,) meet the margin loss's targets: the capsule of the label `right`
    (the longest where the label is unknown) longer than MARGIN_PRESENT, every other shorter than
    MARGIN_ABSENT; the numbers that decide it, as the bars beside write them."""
    j = int(np.argmax(lengths)) if right is None else right
    who = f"the label's capsule, {names[j]}," if right is not None else f"the longest capsule, {names[j]},"
    others = [k for k in range(len(lengths)) if k != j]
    top = max(others, key=lambda k: lengths[k])
    loud = [k for k in others if lengths[k] >= MARGIN_ABSENT]
    present = lengths[j] > MARGIN_PRESENT
    said = f"on this image {who} has {two(lengths[j])}, {'above' if present else 'not above'} {MARGIN_PRESENT}; "
    if not loud:
        said += f"every other is shorter than {MARGIN_ABSENT} (the longest of them, {names[top]}, {two(lengths[top])})"
    else:
        said += (
            f"{len(loud)} of the other {len(others)} {'is' if len(loud) == 1 else 'are'} not shorter than {MARGIN_ABSENT} "
            f"(the longest, {names[top]}, {two(lengths[top])})"
        )
    met = present and not loud
    return said + (
        ": this image meets both targets." if met else ": this image does not meet the targets, so the loss would still push these lengths."
    )


def saturation_words(lengths: np.ndarray, shown: str) -> tuple[str, bool]:
    """What the primary capsules' lengths say, and whether it is a warning (most of them long)."""
    long = long_share(lengths)
    said = (
        f"Measured here: {long:.0%} of the {lengths.size} primary capsules are longer than {SATURATED} "
        f"(lengths {two(lengths.min())} to {two(lengths.max())})"
    )
    if long > 0.5:
        return (
            said + f". Most of them are then nearly equally long, so in this trained model a primary capsule's length hardly "
            f"tells where the {shown} is; what differs between them is their direction, and so the predictions they make (next step).",
            True,
        )
    return said + ".", False


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
    few, loud = len(shown_c), share_words(shown_c)
    said = f"Measured here: the {few} loudest predictions for {name} are coupled to it by {loud}"
    every = f"averaged over all {capsules:,} primary capsules the coupling to {name} is {mean:.3f} (uniform {u:.3f})"
    reach = "All" if (shown_c >= factor * u).all() else str(int((shown_c >= factor * u).sum()))
    if float(shown_c.max()) >= factor * u and mean < factor * u:
        return (
            f"{said}, but they are {few} of {capsules:,}: {every}. {reach} of the {few} loudest {'reaches' if reach == '1' else 'reach'} {factor} times "
            f"uniform or more (up to {two(shown_c.max())}), yet the mean over all {capsules:,}, which the near-uniform "
            f"rule reads, stays below {factor} times uniform."
        )
    if mean >= factor * u:
        return f"{said}; {every}: the mean has moved to {factor} times uniform or more, not only the loudest few."
    return f"{said}; {every}: neither the loudest few nor the mean has reached {factor} times uniform."


def coupling_words(t: int, numbers: dict, shown_c: np.ndarray, capsules: int, J: int, name: str, stated_at: str = "") -> str:
    """Iteration t's couplings to class `name`: the shown capsules' (`shown_c`) beside the mean over
    all `capsules` (loudest_words), the mean weighted by prediction length (`numbers`, from
    coupling_numbers), and after iteration 1 near uniform or not by the rule (said in full unless
    an earlier step did, `stated_at`)."""
    mean, weighted = numbers["mean"], numbers["weighted"]
    if t == 0:
        return (
            f"Measured here: the {len(shown_c)} loudest predictions for {name} are coupled to it by {share_words(shown_c)}; "
            f"averaged over all {capsules:,} primary capsules the coupling to {name} is {mean:.3f} (uniform {1 / J:.3f}), "
            f"{weighted:.3f} weighted by prediction length."
        )
    said = loudest_words(shown_c, mean, capsules, J, name) + f" Weighted by prediction length the mean is {weighted:.3f}."
    said += " " + near_uniform_words(numbers["entropy_mean"], mean, 1 / J, "all the primary capsules' couplings together", stated_at)
    long = rules.long_votes_words(name, weighted, 1 / J, mean)
    return said + (f" {long}" if long else "")


def _verdict(gap: float, band: float, beyond: bool, up: str) -> str:
    """The end of a lab-step sentence on a gap between two rates: within chance, or `up` ("worse"
    for errors, "better" for accuracies) when positive beyond chance."""
    if not beyond:
        return f"a gap of {two(abs(gap))} points, within the ±{two(band)} chance gives, so no better or worse."
    down = "better" if up == "worse" else "worse"
    return f"{two(abs(gap))} points {up if gap > 0 else down}, more than the ±{two(band)} chance gives."


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
        gap, band = r.test_error - own.test_error, rules.noise(r.test_error, r.n_test, own.test_error, own.n_test)
        gaps[r.run_with] = (abs(gap), band)
        images = "test images" if r.pair_accuracy is None else "single test digits"
        head = (
            f"Run with {routing_words.get(r.run_with, r.run_with)}, the model misclassifies {two(r.test_error)}% of "
            f"{r.n_test:,} {images}, against {two(own.test_error)}% with its own {mine}: "
        )
        said.append(head + _verdict(gap, band, rules.beyond_chance(r.test_error, r.n_test, own.test_error, own.n_test), "worse"))
        if r.pair_accuracy is not None and own.pair_accuracy is not None and r.n_pairs and own.n_pairs:
            pair_gap = r.pair_accuracy - own.pair_accuracy
            pair_band = rules.noise(r.pair_accuracy, r.n_pairs, own.pair_accuracy, own.n_pairs)
            gaps[r.run_with + " pairs"] = (abs(pair_gap), pair_band)
            said.append(
                f"On pairs of overlapping digits, the task it was trained for (and what the routing lab judges it by), it gets "
                f"{two(r.pair_accuracy)}% of {r.n_pairs:,} test pairs right, against {two(own.pair_accuracy)}% with its own {mine}: "
                + _verdict(pair_gap, pair_band, rules.beyond_chance(r.pair_accuracy, r.n_pairs, own.pair_accuracy, own.n_pairs), "better")
            )
    tallest = max(rows, key=lambda r: r.test_error)
    if tallest is not own and rules.beyond_chance(tallest.test_error, tallest.n_test, own.test_error, own.n_test):
        why = ROUTINGS[tallest.run_with].about if tallest.run_with in ROUTINGS else "the couplings are set another way"
        said.append(
            f"The tallest {'test-error ' if own.pair_accuracy is not None else ''}bar is "
            f"{routing_words.get(tallest.run_with, tallest.run_with)} ({two(tallest.test_error)}%): {why}, "
            f"while this model was trained with {mine}: its weights W learned to make "
            "predictions for those couplings, not for these."
        )
    if own.run_with in ROUTINGS and ROUTINGS[own.run_with].from_votes:
        said.append(
            f"Averaged over the lab's test images, a primary capsule gives the predicted class {two(own.coupling_to_prediction)} "
            f"of its vote with {routing_words.get(own.run_with, own.run_with)} (uniform: {two(1 / own.classes)}). "
            + near_uniform_words(own.entropy_ratio, own.coupling_to_prediction, 1 / own.classes, "its couplings", stated_at)
        )
    return said, {"gaps": [g for pair in gaps.values() for g in pair]}


def lab_step(step: Step, rows: list, routing: str, model_name: str, iterations: int = 1, classes: int = 10, stated_at: str = "") -> Step:
    """The last step of a vector-capsule tour: the lab's stored test errors for this model, each routing a bar.
    `iterations`: the routing iterations the tour showed; `classes`: J; `stated_at`: the step that said the
    near-uniform rule in full, if one did."""
    from capsviz.analysis.lab import LAB_ROUTINGS

    if routing == "self-attention":
        asked = f"You have watched self-attention set each {label('c')} in one pass."
    elif iterations == 1:
        asked = f"You have watched every {label('c')} stay at 1/{classes}: with one iteration, routing never updates them."
    else:
        asked = f"You have watched {label('c')} change from one routing iteration to the next."
    text = [
        asked + " The field's own question is whether that matters: would the same capsules do as well with every vote split "
        "evenly (uniform couplings, no routing), or split at random?"
    ]
    if not rows:
        return replace(
            step,
            text=text,
            measured="The routing lab has not measured this model yet: open it and press **Run the lab** (a minute or two).",
            terms=("uniform", "random_couplings"),
        )
    said, quoted = lab_words(rows, LAB_ROUTINGS, stated_at)
    data = {
        "routings": [r.run_with for r in rows],
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
            f"{model_name} run with each routing: test error (%) on {rows[0].n_test:,} test images"
            + (f" (single digits), and pair accuracy (%) on {rows[0].n_pairs:,} test pairs" if "pairs" in data else "")
            + ". Error bars: two standard errors, how far the test images alone can move each number."
        ),
        text=text + said,
        terms=("uniform", "random_couplings"),
    )


def input_step(step: Step, image: np.ndarray, truth: str, looks: str, text: list[str]) -> Step:
    return replace(step, figure="image", data={"images": [image], "labels": [f"label: {truth}"]}, caption=looks, text=text)


def lengths_step(
    step: Step, lengths: np.ndarray, names: list[str], W: int, R: int, truth: str, capsule: str, title: str, text: list[str]
) -> Step:
    right = names.index(truth) if truth in names else None  # an image without a known label: the longest capsule
    lines = {f"{MARGIN_PRESENT}": MARGIN_PRESENT, f"{MARGIN_ABSENT}": MARGIN_ABSENT}
    return replace(
        step,
        figure="bars",
        data={"values": lengths, "names": names, "highlight": W, "title": title, "axis": "length", "lines": lines}
        | ({} if right is None else {"label": right}),  # the capsule the margin loss wants long
        caption="dotted: the margin loss's targets",
        text=[
            f"The answer is the longest {capsule}: **{plain(names[W])}** with length "
            f"{two(lengths[W])} (label: {plain(truth)}); the runner-up, {plain(names[R])}, has {two(lengths[R])}.",
            *text,
        ],
        measured="Measured here: " + margin_words(lengths, [plain(n) for n in names], right),
        terms=("margin_loss", "length"),
    )


def reconstruction_step(step: Step, image: np.ndarray, rec: np.ndarray | None, name: str, D: int, family: str, text: list[str]) -> Step:
    if rec is None:
        return replace(step, measured=f"This {family} was trained without a decoder, so there is nothing to redraw.", text=text)
    return replace(
        step,
        figure="image",
        data={"images": [image, rec], "labels": ["input", f"redrawn from capsule {name}"]},
        caption=f"the decoder sees only the winning capsule's {D} numbers",
        text=text,
    )
