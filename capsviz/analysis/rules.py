"""The rules that turn a number into a word, each defined once.

Every sentence the app writes about a number decides its verb here: whether couplings are "near
uniform", whether a gap between two error rates is "beyond chance", whether a series "rises" or
"falls", whether one thing is "faster" than another. The glossary names each rule in the same
words (`RULES`), and the sentence tests feed numbers on both sides of each threshold. The
sentences that quote a rule's outcome are capsviz.analysis.rule_words, one catalog message each.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from capsviz.i18n import N_, t

# Near uniform: the couplings keep more than this share of the uniform split's entropy ...
NEAR_UNIFORM_ENTROPY = 0.95
# ... and give the predicted class less than this many times the uniform share.
NEAR_UNIFORM_SHARE = 1.5
# A series "rises" or "falls" only when its last value differs from its first by more than this
# share of the larger of the two; otherwise it "stays about level".
LEVEL = 0.10
# For a number confined to 0..1 (a capsule's length), the same LEVEL is taken of the whole range: it
# rises or falls only when it moves by more than LEVEL in absolute terms (bounded_trend).
# A coupling map's colours exaggerate small differences when every square lies within
# NEAR_UNIFORM_SHARE times uniform either way (small_span): a narrow span stretched over the colour scale.
# A reconstruction "draws almost nothing" when it keeps less than this share of the unperturbed
# reconstruction's ink (the sum of its pixel values): the decoder's units mostly switch off there.
FAINT = 0.20
# An offset "changes the drawing almost nothing" when the mean change per pixel is less than this
# share of the unperturbed reconstruction's mean pixel value.
SMALL_CHANGE = 0.10
# A speed claim needs at least this many timings of each side, and one side's slowest timing
# faster than the other's fastest.
MIN_TIMINGS = 5
# "Why capsules" (capsviz.analysis.why). A representation (a CNN's pooled features, its class
# scores, a capsule's vector) is nearly invariant to a change of the input when it moves by less
# than this share of its own size: the same tenth as LEVEL, so "stays" means one thing everywhere.
NEARLY_INVARIANT = 0.10
# A capsule's dimension "moves" when it changes by at least one step of the explorer's sliders
# (capsviz.analysis.STEPS are 0.05 apart): a change the explorer shows as a different drawing.
DIM_STEP = 0.05
# A reconstruction "follows the digit" when, on more than this share of the images, it is closer
# to the moved digit than to the digit where it was: more often than not, not by a coin's toss.
FOLLOWS = 0.5
# Votes "move together" under a change of viewpoint when their spread stays about level (trend,
# LEVEL) while their mean moves by more than LEVEL of the spread they had: the cloud travels, it
# does not scatter.
# A machine is busy when its load average (processes running or waiting for a core, over the last
# minute) is above its number of cores: timings taken then say more about the others than the code.


# The rules in the glossary's words, each one whole message of the catalog (capsviz.i18n) whose numbers
# are named placeholders filled from the constants above: `rule_words(name)` says it in the reader's
# language, RULES holds the English.
RULE_MESSAGES: dict[str, tuple[str, dict[str, str]]] = {
    "near uniform": (
        N_(
            "Couplings are called near uniform when their evenness is more than {entropy} and the coupling to the predicted "
            "class is less than {share} times the uniform share, the coupling being a primary capsule's plain mean coupling "
            "to the predicted class (every capsule counted once, however long its prediction). Evenness says how evenly a "
            "capsule spreads its vote over the capsules it can send it to: 100% when each gets the same share, 0% when one "
            "gets all of it (the entropy of its couplings as a share of an even split's). Both must hold: a capsule can "
            "spread its vote almost evenly while still favouring one class."
        ),
        {"entropy": f"{NEAR_UNIFORM_ENTROPY:.0%}", "share": f"{NEAR_UNIFORM_SHARE}"},
    ),
    "long votes": (
        N_(
            "The length-weighted share is the same mean coupling to the predicted class with each primary capsule counted by "
            "the length of its prediction: the long predictions are the ones that count in the sum s. When it is at least "
            "{share} times the uniform share, the pages say so: routing then moves mainly the capsules with long "
            "predictions. It does not decide whether the couplings are near uniform; the plain mean does."
        ),
        {"share": f"{NEAR_UNIFORM_SHARE}"},
    ),
    "beyond chance": (
        N_(
            "A difference between two error rates is beyond chance when it is larger than two standard errors of the "
            "difference: smaller gaps are what a different set of test images alone could give."
        ),
        {},
    ),
    "chance": (
        N_(
            "Chance is how far a rate measured on some test images could move on as many other test images alone: two "
            "standard errors of it, the ± the pages show beside a number. A gap smaller than that (two standard errors of the "
            "difference, for two rates) is said to be within chance."
        ),
        {},
    ),
    "guessing": (
        N_(
            "Guessing at random is the error a model is first set against: 1 - 1/J wrong for one class among J (90% for the "
            "10 digits, 66.67% for 3 classes); for two digits at once, as MultiMNIST asks, 1 - 1/(J(J-1)/2), the share of "
            "pairs a guess misses. A model is said to do better than guessing only when its error is below guessing's by "
            "more than chance: two standard errors of its own error on the test images it was measured on."
        ),
        {},
    ),
    "rises / falls": (
        N_(
            "A number is said to rise or fall only when its last value differs from its first by more than {level}; "
            "otherwise it stays about level. A number that can only lie between 0 and 1 (a capsule's length) rises or falls "
            "only when it moves by more than {step}, a tenth of its whole range."
        ),
        {"level": f"{LEVEL:.0%}", "step": f"{LEVEL:.2f}"},
    ),
    "peaks / dips": (
        N_(
            "Over the iterations a number is read along its whole path, not only from its first and last value: when a value "
            "in between lies above both ends, or below both, by more than the same {level} (for a number between 0 and 1, "
            "by more than {step}), the pages say so (it rises to that value, then falls; or falls to it, then rises) "
            "instead of a single rise, fall or level."
        ),
        {"level": f"{LEVEL:.0%}", "step": f"{LEVEL:.2f}"},
    ),
    "small span": (
        N_(
            "A coupling map's span is called small when every square lies between 1/{share} and "
            "{share} times the uniform coupling: its colours, stretched over so narrow a range, exaggerate the "
            "differences."
        ),
        {"share": f"{NEAR_UNIFORM_SHARE}"},
    ),
    "draws almost nothing": (
        N_(
            "A redrawn capsule is said to draw almost nothing when its reconstruction keeps less than {faint} of the ink "
            "(the sum of its pixel values) of the capsule's own, unperturbed reconstruction."
        ),
        {"faint": f"{FAINT:.0%}"},
    ),
    "changes almost nothing": (
        N_(
            "How much an offset changes the drawing is the mean change per pixel between the two reconstructions. It is "
            "said to change the drawing almost nothing when that is less than {change} of the unperturbed "
            "reconstruction's mean pixel value."
        ),
        {"change": f"{SMALL_CHANGE:.0%}"},
    ),
    "faster": (
        N_(
            "One computation is called faster than another only from at least {timings} timings of each, when even its "
            "slowest timing beats the other's fastest. Otherwise the times are shown and nothing is claimed."
        ),
        {"timings": f"{MIN_TIMINGS}"},
    ),
    "nearly invariant": (
        N_(
            "A representation (a CNN's pooled features or class scores, a capsule's vector) is called nearly invariant to a "
            "change of its input when it moves by less than {share} of its own size (the length of the difference over the "
            "length of the original, averaged over the test images); otherwise it changes with the input. In the same words, "
            "an answer is said to stay when it changes on fewer than {share} of the test images."
        ),
        {"share": f"{NEARLY_INVARIANT:.0%}"},
    ),
    "dimension moves": (
        N_(
            "A capsule's dimension is said to move when it changes by at least {step}, one step of the explorer's "
            "sliders: a change the decoder draws."
        ),
        {"step": f"{DIM_STEP}"},
    ),
    "follows the digit": (
        N_(
            "A capsule's reconstruction is said to follow the digit when, on more than {share} of the test images, the "
            "drawing made from the moved digit's capsule is closer (in squared pixel differences) to the moved digit than "
            "to the digit where it was."
        ),
        {"share": f"{FOLLOWS:.0%}"},
    ),
    "move together": (
        N_(
            "Votes are said to move together under a change of viewpoint when their spread (the root mean square distance "
            "of the votes from their mean) stays about level, within {level}, while their mean moves by more than "
            "{level} of the spread they had: the cloud of votes travels without scattering."
        ),
        {"level": f"{LEVEL:.0%}"},
    ),
    "busy": (
        N_(
            "A machine is called busy when its load average (how many processes were running or waiting for a core, over "
            "the last minute) was above its number of cores while it timed something. Timings from a busy machine, or from "
            "one whose load was not recorded, are shown but no speed is claimed from them."
        ),
        {},
    ),
}
# The rules in English, as the sentences and their tests quote them.
RULES = {name: message.format(**values) for name, (message, values) in RULE_MESSAGES.items()}


def rule_words(name: str) -> str:
    """The rule `name` (a key of RULES) in the reader's language, its numbers filled in."""
    message, values = RULE_MESSAGES[name]
    return t(message, **values)


# ---------- the rules as data ----------
# Each rule that decides a caption's words is declared here once, as data: its inputs, its cases in
# order (the first whose tests all hold decides; the last has none), each case's message id and
# words, and the placeholders its words fill. The functions below decide through `decide`; the
# static site exports the table (capsviz.site) and evaluates it with web/js/rules.js, and
# tests/test_site_rules.py feeds both the same numbers on both sides of every threshold.
OPS = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}
# How a placeholder is written: both languages write these the same (100 x, then fixed digits)
FORMATS = {"pct1": lambda x: f"{100 * x:.1f}%", "f2": lambda x: f"{x:.2f}", "f3": lambda x: f"{x:.3f}"}


@dataclass(frozen=True)
class Test:
    """`left` OP `factor` x `right` / `divisor`: inputs by name, or `right` a number."""

    left: str
    op: str
    right: str | float
    factor: float = 1.0
    divisor: float = 1.0

    def holds(self, values: dict[str, float]) -> bool:
        right = values[self.right] if isinstance(self.right, str) else self.right
        return OPS[self.op](values[self.left], self.factor * right / self.divisor)


@dataclass(frozen=True)
class Case:
    id: str  # the message id
    words: str  # English, with {placeholders}: the rule's formatted inputs and its constants
    when: tuple[Test, ...] = ()  # all must hold; none: otherwise


@dataclass(frozen=True)
class Rule:
    name: str
    inputs: tuple[str, ...]
    cases: tuple[Case, ...]
    formats: dict = field(default_factory=dict)  # input -> a FORMATS key: a placeholder of that name
    constants: dict = field(default_factory=dict)  # placeholder -> its words, from the thresholds
    examples: dict = field(default_factory=dict)  # input -> typical values (tests feed these and each threshold)


TABLE: dict[str, Rule] = {
    r.name: r
    for r in (
        Rule(
            "near uniform",
            ("evenness", "share", "uniform"),
            (
                Case(
                    "couplings_away_evenness",
                    N_("The couplings are away from uniform: their evenness is {evenness}, not more than {evenness_limit}."),
                    (Test("evenness", "<=", NEAR_UNIFORM_ENTROPY),),
                ),
                Case(
                    "couplings_away_share",
                    N_(
                        "The couplings are away from uniform: their evenness is {evenness}, more than {evenness_limit}, but the "
                        "predicted class gets {share} on average, at least {factor} times the uniform {uniform}."
                    ),
                    (Test("share", ">=", "uniform", NEAR_UNIFORM_SHARE),),
                ),
                Case(
                    "couplings_near_uniform",
                    N_(
                        "The couplings are near uniform: their evenness is {evenness}, more than {evenness_limit}, and the "
                        "predicted class gets {share} on average, less than {factor} times the uniform {uniform}."
                    ),
                ),
            ),
            formats={"evenness": "pct1", "share": "f2", "uniform": "f2"},
            constants={"evenness_limit": f"{NEAR_UNIFORM_ENTROPY:.0%}", "factor": f"{NEAR_UNIFORM_SHARE}"},
            examples={"evenness": (0.5, 0.99), "share": (0.05, 0.9), "uniform": (0.1, 1 / 3)},
        ),
        Rule(
            "long votes",
            ("weighted", "uniform"),
            (
                Case("long_votes", N_("long votes move"), (Test("weighted", ">=", "uniform", NEAR_UNIFORM_SHARE),)),
                Case("long_votes_not", ""),
            ),
            examples={"weighted": (0.05, 0.5), "uniform": (0.1, 1 / 3)},
        ),
        Rule(
            "rises / falls",
            ("change", "scale"),
            (
                Case("rises", N_("rises"), (Test("change", ">", "scale", LEVEL),)),
                Case("falls", N_("falls"), (Test("change", "<", "scale", -LEVEL),)),
                Case("level", N_("stays about level")),
            ),
            examples={"change": (0.0, -0.5, 0.5), "scale": (0.0, 1.0, 3.0)},
        ),
        Rule(
            "rises / falls, 0 to 1",
            ("change",),
            (
                Case("rises", N_("rises"), (Test("change", ">", LEVEL),)),
                Case("falls", N_("falls"), (Test("change", "<", -LEVEL),)),
                Case("level", N_("stays about level")),
            ),
            examples={"change": (0.0, -0.5, 0.5)},
        ),
        Rule(
            "small span",
            ("lo", "hi", "uniform"),
            (
                Case(
                    "span_none",
                    N_("Every square is {lo}: the map has no differences to show, only one colour."),
                    (Test("hi", "<=", "lo"),),
                ),
                Case(
                    "span_small",
                    N_(
                        "Every square lies between 1/{factor} and {factor} times the uniform {uniform} (from {lo} to {hi}): "
                        "the colours, stretched over so narrow a span, exaggerate the differences."
                    ),
                    (Test("hi", "<", "uniform", NEAR_UNIFORM_SHARE), Test("lo", ">", "uniform", divisor=NEAR_UNIFORM_SHARE)),
                ),
                Case("span_wide", ""),
            ),
            formats={"lo": "f3", "hi": "f3", "uniform": "f3"},
            constants={"factor": f"{NEAR_UNIFORM_SHARE}"},
            examples={"lo": (0.0, 0.09, 0.1), "hi": (0.1, 0.11, 0.9), "uniform": (0.1, 1 / 3)},
        ),
        Rule(
            "draws almost nothing",
            ("ink_share",),
            (Case("faint", N_("draws almost nothing"), (Test("ink_share", "<", FAINT),)), Case("not_faint", "")),
            examples={"ink_share": (0.0, 1.0)},
        ),
        Rule(
            "changes almost nothing",
            ("change_share",),
            (
                Case("small_change", N_("changes the drawing almost nothing"), (Test("change_share", "<", SMALL_CHANGE),)),
                Case("changes", ""),
            ),
            examples={"change_share": (0.0, 1.0)},
        ),
    )
}


def decide(name: str, **values: float) -> tuple[str, dict[str, str]]:
    """Rule `name` of TABLE on `values` (its inputs by name): the id of the first case whose tests
    all hold, and the placeholders its words fill (the formatted inputs and the rule's constants)."""
    rule = TABLE[name]
    case = next(c for c in rule.cases if all(test.holds(values) for test in c.when))
    filled = {k: FORMATS[f](values[k]) for k, f in rule.formats.items()}
    return case.id, {**filled, **rule.constants}


def case_words(name: str, **values: float) -> str:
    """The English words of rule `name`'s case for `values`, its placeholders filled."""
    found, filled = decide(name, **values)
    return next(c for c in TABLE[name].cases if c.id == found).words.format(**filled)


def near_uniform(entropy_ratio: float, share: float | None = None, uniform_share: float | None = None) -> bool:
    """The "near uniform" rule. `entropy_ratio`: the couplings' entropy over the uniform split's (1 is
    uniform); `share`: the coupling given to the predicted class, `uniform_share` what uniform gives
    it (1/J for a softmax over the classes). Without a share, the entropy alone decides."""
    if share is None or uniform_share is None:  # the share part holds: the entropy alone decides
        share, uniform_share = 0.0, 1.0
    return decide("near uniform", evenness=entropy_ratio, share=share, uniform=uniform_share)[0] == "couplings_near_uniform"


def long_votes_move(weighted: float, uniform: float) -> bool:
    """The "long votes" rule: whether the length-weighted mean coupling to the predicted class,
    `weighted`, is at least NEAR_UNIFORM_SHARE times the uniform share `uniform`."""
    return decide("long votes", weighted=weighted, uniform=uniform)[0] == "long_votes"


def faint(ink_share: float) -> bool:
    """The "draws almost nothing" rule: a reconstruction keeping `ink_share` of the unperturbed one's ink."""
    return decide("draws almost nothing", ink_share=ink_share)[0] == "faint"


def small_change(change_share: float) -> bool:
    """The "changes almost nothing" rule: a mean change per pixel of `change_share` times the
    unperturbed reconstruction's mean pixel value."""
    return decide("changes almost nothing", change_share=change_share)[0] == "small_change"


def spread(p: float, n: int) -> float:
    """Two standard errors (in points) of a rate of p% measured on n images: about 95% of the rates n
    other test images would give lie within this of p. The rate is taken as (k + 1) / (n + 2) for k of
    n images, so no errors on a few images is not read as a certain 0%."""
    q = (p / 100 * n + 1) / (n + 2)
    return 200.0 * math.sqrt(q * (1 - q) / max(n, 1))


def noise(p1: float, n1: int, p2: float, n2: int) -> float:
    """Two standard errors of the difference of two rates (in %) measured on n1 and n2 test images."""
    return math.hypot(spread(p1, n1), spread(p2, n2))


def beyond_chance(p1: float, n1: int, p2: float, n2: int) -> bool:
    """Whether rates p1 (on n1 images) and p2 (on n2) differ by more than chance gives."""
    return abs(p1 - p2) > noise(p1, n1, p2, n2)


def chance_error(classes: int, labels: int = 1) -> float:
    """The test error (%) of guessing: 1 - 1/J for one of J classes; for `labels` classes at once
    (MultiMNIST's two digits), 1 - 1/C(J, labels)."""
    return 100.0 * (1 - 1 / math.comb(classes, labels))


def beats_chance(p: float, n: int, classes: int, labels: int = 1) -> bool:
    """Whether an error of p% on n test images is below chance by more than two standard errors."""
    return chance_error(classes, labels) - p > spread(p, n)


def trend(first: float, last: float) -> str:
    """ "rises", "falls" or "stays about level" for a series going from `first` to `last`."""
    return case_words("rises / falls", change=last - first, scale=max(abs(first), abs(last)))


def bounded_trend(first: float, last: float) -> str:
    """ "rises", "falls" or "stays about level" for a number confined to 0..1 (a capsule's length): a
    move of more than LEVEL in absolute terms, a tenth of the whole range, whatever the start."""
    return case_words("rises / falls, 0 to 1", change=last - first)


def turn(values, bounded: bool = False) -> int | None:
    """Where a path turns (the "peaks / dips" rule): the index of the value in between its first and
    last that lies farthest beyond both ends, when that is by more than LEVEL of the larger end
    (absolute LEVEL with `bounded`, for a number in 0..1, as bounded_trend); else None."""
    v = [float(x) for x in values]
    if len(v) < 3:
        return None
    first, last = v[0], v[-1]
    band = LEVEL if bounded else LEVEL * max(abs(first), abs(last))
    lo, hi = min(first, last), max(first, last)
    beyond = [max(x - hi, lo - x) for x in v[1:-1]]
    k = max(range(len(beyond)), key=beyond.__getitem__)
    return k + 1 if beyond[k] > band else None


def path_trend(values, fmt: str = "{:.3g}", start: int = 1, bounded: bool = False) -> str:
    """The trend of a path over iterations (values[k] at iteration start + k): the first-to-last rule
    (trend, or bounded_trend with `bounded`), unless a value in between lies beyond both ends (turn):
    then "rises to <value, by fmt> at iteration k, then falls" or "falls to ... then rises"."""
    v = [float(x) for x in values]
    k = turn(v, bounded)
    if k is None:
        return (bounded_trend if bounded else trend)(v[0], v[-1])
    at = f"{fmt.format(v[k])} at iteration {start + k}"
    return f"rises to {at}, then falls" if v[k] > v[-1] else f"falls to {at}, then rises"


def small_span(lo: float, hi: float, uniform: float) -> bool:
    """Whether couplings from `lo` to `hi` all lie within NEAR_UNIFORM_SHARE times `uniform` either way."""
    return decide("small span", lo=lo, hi=hi, uniform=uniform)[0] == "span_small"


@dataclass(frozen=True)
class Timing:
    """Repeated timings (ms) of one computation."""

    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else math.nan

    @property
    def range(self) -> tuple[float, float]:
        return (min(self.samples), max(self.samples)) if self.samples else (math.nan, math.nan)


def faster(a: Timing, b: Timing) -> float | None:
    """How many times faster `a` is than `b` (median over median) when the timings allow saying so,
    else None: at least MIN_TIMINGS of each and a's slowest below b's fastest."""
    if len(a.samples) < MIN_TIMINGS or len(b.samples) < MIN_TIMINGS:
        return None
    if a.range[1] >= b.range[0]:
        return None
    return b.median / a.median


def busy(load: float, cores: int) -> bool:
    """Whether a machine with `cores` cores was busy at load average `load`; one whose cores are not
    known (0) counts as busy: nothing can be claimed from its timings."""
    return cores < 1 or load > cores


def nearly_invariant(change_share: float) -> bool:
    """The "nearly invariant" rule: a representation that moved by `change_share` of its own size."""
    return change_share < NEARLY_INVARIANT


def answer_stays(kept_share: float) -> bool:
    """The "nearly invariant" rule for answers: the share (0..1) of images whose answer is kept
    leaves fewer than NEARLY_INVARIANT of them changed."""
    return nearly_invariant(1 - kept_share)


def dimension_moves(change: float) -> bool:
    """The "dimension moves" rule: a capsule dimension that changed by `change` (either sign)."""
    return abs(change) >= DIM_STEP


def follows(share: float) -> bool:
    """The "follows the digit" rule: `share` (0..1) of the images whose reconstruction is closer to the moved digit."""
    return share > FOLLOWS


def moves_together(mean_shift: float, spread_before: float, spread_after: float) -> bool:
    """The "move together" rule: the votes' spread stays about level (trend) while their mean
    moves by more than LEVEL times the spread they had."""
    return trend(spread_before, spread_after) == "stays about level" and mean_shift > LEVEL * spread_before
