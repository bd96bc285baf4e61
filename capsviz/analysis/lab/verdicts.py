"""The routing lab's verdicts: the sentences the page says about its rows (`report`, `short_answer`,
`hidden`), each verb decided by capsviz.analysis.rules, and the published results it quotes."""

from __future__ import annotations

from dataclasses import dataclass

from capsviz.analysis import rules
from capsviz.analysis.lab.measuring import COMPARED, COUPLING_IMAGES, Row, run_with_words, vote_based
from capsviz.analysis.lab.seeds import SeedStudy
from capsviz.analysis.reproduction import PAPER
from capsviz.analysis.rules import noise
from capsviz.registry import ROUTINGS, vector_routings

TIME_RULE = rules.RULES["faster"] + " " + rules.RULES["busy"]  # said beside the times

MASKING = (
    "Where a routing does better under FGSM than the one a model was trained with, that can also mean the attack's "
    "gradient passes less well through it (gradient masking) rather than a sturdier model; the Robustness page's BIM "
    "attack tests that more strongly."
)


@dataclass
class Report:
    """What the page says about its rows, in the order it says it. `short`: the short answer to the
    page's question (a few sentences the table supports); `hidden`: what a routing hidden under
    "Run with" leaves out; `models`: each model's details (model -> sentences); `across`: what
    compares models with one another."""

    short: list[str]
    hidden: list[str]
    models: dict[str, list[str]]
    across: list[str]

    def lines(self) -> list[str]:
        return self.short + self.hidden + [line for said in self.models.values() for line in said] + self.across


def sentences(rows: list[Row], studies: list[SeedStudy] = ()) -> list[str]:
    """Every sentence of `report`, in its order."""
    return report(rows, studies).lines()


def report(rows: list[Row], studies: list[SeedStudy] = ()) -> Report:
    """Plain sentences on what `rows` show: the short answer; per model, each routing it was run with
    against the one it was trained with, measure by measure, how far the vote-based routings move
    its couplings from uniform, and what dynamic routing costs in time; across models of one
    architecture trained with different routings, their errors. A difference is called one only
    beyond chance (rules.beyond_chance), a speed only by rules.faster on a machine that was not busy."""
    by_model = _by_model(rows)
    models, masked = {}, False
    for name, rs in by_model.items():
        own = _own(rs)
        said = [_against(name, r, own) for r in rs.values() if own is not None and r is not own]
        masked = masked or any(_verdict(r, own, "fgsm_accuracy", "n_images", True) == "better" for r in rs.values() if own is not None)
        said += [_coupling(r) for r in rs.values() if r.run_with in vote_based()]
        if (t := _time(name, rs)) is not None:
            said.append(t)
        models[name] = said
    across = _trained_with(rows, studies) + ([MASKING] if masked else [])
    return Report(short_answer(rows), hidden(rows), models, across)


def _by_model(rows: list[Row]) -> dict[str, dict[str, Row]]:
    by: dict[str, dict[str, Row]] = {}
    for r in rows:
        by.setdefault(r.model, {})[r.run_with] = r
    return by


def _own(rs: dict[str, Row]) -> Row | None:
    """The row of a model run with the routing it was trained with, if it is shown."""
    return next((r for r in rs.values() if r.run_with == r.trained_with), None)


def _verdict(r: Row, own: Row, field_: str, count: str, higher: bool) -> str | None:
    """ "better" or "worse" where r's `field_` differs from own's beyond chance, else None."""
    a, b = getattr(r, field_), getattr(own, field_)
    if a is None or b is None or not rules.beyond_chance(a, getattr(r, count), b, getattr(own, count)):
        return None
    return "better" if (a > b) == higher else "worse"


def _against(name: str, r: Row, own: Row) -> str:
    parts, better, worse = [], [], []
    for field_, count, words, higher in COMPARED:
        a, b = getattr(r, field_), getattr(own, field_)
        if a is None or b is None:
            continue
        words = r.error_words if field_ == "test_error" else words
        band = noise(a, getattr(r, count), b, getattr(own, count))
        verdict = _verdict(r, own, field_, count, higher)
        if verdict is None:
            parts.append(f"{words} {a:.2f}% against {b:.2f}% (within chance, ±{band:.2f})")
            continue
        (better if verdict == "better" else worse).append(words)
        parts.append(f"{words} {a:.2f}% against {b:.2f}% ({verdict}, beyond ±{band:.2f})")
    if not better and not worse:
        verdict = (
            f"no measure differs beyond chance: on these test images, {r.run_with} and {own.run_with} cannot be told apart "
            "on this model (a smaller difference than chance gives may still be there)."
        )
    else:
        verdict = (
            (f"better on {', '.join(better)}" if better else "")
            + ("; " if better and worse else "")
            + (f"worse on {', '.join(worse)}" if worse else "")
            + "."
        )
    return f"**{name}** (trained with {own.trained}) run with **{r.run_with}** instead: " + "; ".join(parts) + f". So {verdict}"


def _groups(rows: list[Row]) -> dict[str, list[Row]]:
    """Models of one architecture and schedule trained with two routings or more, each run with its own."""
    groups: dict[str, list[Row]] = {}
    for r in rows:
        if r.run_with == r.trained_with:
            groups.setdefault(r.extra.get("architecture", r.model), []).append(r)
    return {arch: rs for arch, rs in groups.items() if len({r.trained_with for r in rs}) > 1}


def _trained_with(rows: list[Row], studies: list[SeedStudy] = ()) -> list[str]:
    """Models of one architecture trained with different routings, each run with its own, on test
    error and (models that read MultiMNIST) pair accuracy; the seed study of the same preset and
    data, where there is one, says how far seeds alone move them."""
    said = []
    for arch, rs in _groups(rows).items():
        parts = [_gap(rs, "test_error", "n_test", rs[0].error_words, "test images", higher=False)]
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


def _ranked(rs: list[Row], field_: str, count: str, higher: bool) -> tuple[list[Row], bool, float]:
    """The rows from best to worst on `field_`, whether the best and the worst differ beyond chance,
    and the chance band of that difference."""
    rs = sorted(rs, key=lambda r: getattr(r, field_), reverse=higher)
    best, worst = rs[0], rs[-1]
    a, b, na, nb = getattr(best, field_), getattr(worst, field_), getattr(best, count), getattr(worst, count)
    return rs, rules.beyond_chance(a, na, b, nb), noise(a, na, b, nb)


def _gap(rs: list[Row], field_: str, count: str, words: str, unit: str, higher: bool) -> str:
    """The models' `field_` from best to worst, and whether the largest gap is beyond chance."""
    rs, beyond, band = _ranked(rs, field_, count, higher)
    best, worst = rs[0], rs[-1]
    gap = abs(getattr(best, field_) - getattr(worst, field_))
    listing = ", ".join(f"{r.trained} {getattr(r, field_):.2f}%" for r in rs)
    if beyond:
        verdict = f"trained with {best.trained} is best, {gap:.2f} points ahead of {worst.trained}, more than the ±{band:.2f} chance gives"
    else:
        verdict = (
            f"the largest gap, {gap:.2f} points, is within the ±{band:.2f} chance gives: on this measure, none of these "
            "routings trained a model better than another beyond chance"
        )
    return f"{words} on {getattr(best, count):,} {unit}, best first: {listing}; {verdict}."


def _coupling(r: Row) -> str:
    """How far a routing that computes the couplings from the votes moves them from uniform, by
    both parts of the near-uniform rule (rules.uniform_words)."""
    what = ROUTINGS[r.run_with].words
    return (
        f"With {what}, **{r.model}**'s couplings, set beside the uniform split (each class 1/{r.classes} of a vote), are "
        f"{rules.uniform_words(r.entropy_ratio, r.coupling_to_prediction, 1 / r.classes)} (averaged over {COUPLING_IMAGES} images)."
    )


def _time(name: str, rs: dict[str, Row]) -> str | None:
    """What dynamic routing costs in time against uniform couplings: a speed is claimed only from
    repeated timings on one machine that was not busy (rules.faster, rules.busy), else the times
    are given and why nothing is said about them."""
    if "dynamic" not in rs or "uniform" not in rs:
        return None
    d, u = rs["dynamic"], rs["uniform"]
    load, cores = max(d.load, u.load), min(d.cores, u.cores)
    other = "one pass with uniform couplings"
    if d.hardware != u.hardware:
        why = "they were timed on different machines"
    elif min(len(d.timing.samples), len(u.timing.samples)) < rules.MIN_TIMINGS:
        why = f"a speed is claimed only from {rules.MIN_TIMINGS} timings or more of each"
    elif cores < 1:
        why = "the machine's number of cores was not recorded, so whether it was busy is not known"
    elif rules.busy(load, cores):
        why = f"the machine was busy while timing them (load {load:.1f} on {cores} cores)"
    else:
        return f"On **{name}**, " + rules.time_words("dynamic routing", d.timing, other, u.timing) + f" (Load {load:.1f} on {cores} cores.)"
    return (
        f"On **{name}**, dynamic routing takes {d.timing.words()} per image against {u.timing.words()} for {other}; {why}, "
        "so nothing is said about which is faster."
    )


def _of(k: int, n: int) -> str:
    return "this model" if n == 1 else f"{k} of {n} models"


def _routings(names) -> str:
    """The routings among `names`, in the lab's order: "dynamic, uniform or self-attention"; a
    label of its own (one iteration of dynamic routing, trained_label) after them."""
    given = set(names)
    names = [r for r in vector_routings() if r in given] + sorted(given - set(vector_routings()))
    return ", ".join(names[:-1]) + (" or " if len(names) > 1 else "") + names[-1]


def _judged(r: Row, own: Row) -> tuple[str, str, str, bool]:
    """The measure a model run with another routing is judged by in the short answer, as COMPARED
    gives it: pair accuracy for a model that reads MultiMNIST pairs (the task it was trained for),
    else the test error."""
    if r.pair_accuracy is not None and own.pair_accuracy is not None:
        return "pair_accuracy", "n_pairs", "pair accuracy", True
    return "test_error", "n_test", "test error", False


VERDICT_WORDS = {"worse": "worse beyond chance", "better": "better beyond chance", None: "within chance"}


def _outcomes(pairs: list[tuple[Row, Row]], field_: str, count: str, higher: bool) -> str:
    """How many of `pairs` (a model run with another routing, and with its own) stay within chance on
    `field_`, how many do better or worse beyond it, each with the largest changes quoted as the
    table gives them."""
    outcome: dict[str | None, list[tuple[Row, Row]]] = {"worse": [], "better": [], None: []}
    for r, own in pairs:
        outcome[_verdict(r, own, field_, count, higher)].append((r, own))
    parts = []
    for verdict, words in VERDICT_WORDS.items():
        got = sorted(outcome[verdict], key=lambda p: -abs(getattr(p[0], field_) - getattr(p[1], field_)))
        if not got:
            continue
        quoted = ", ".join(f"**{r.model}** {getattr(r, field_):.2f}% against {getattr(own, field_):.2f}%" for r, own in got[:2])
        more = f" and {len(got) - 2} more" if len(got) > 2 else ""
        largest = "largest changes first: " if verdict is None and len(got) > 1 else ""
        parts.append((len(got), f"{words} on {_of(len(got), len(pairs))} ({largest}{quoted}{more})"))
    parts.sort(key=lambda p: -p[0])
    return "; ".join(p for _, p in parts)


def _digit_differs(pairs: list[tuple[Row, Row]]) -> str:
    """For models judged by pair accuracy: where their digit error (one digit alone) gives another verdict, said with its numbers."""
    differ = []
    for r, own in pairs:
        digit = _verdict(r, own, "test_error", "n_test", False)
        if digit != _verdict(r, own, "pair_accuracy", "n_pairs", True):
            differ.append(f"on **{r.model}**: {VERDICT_WORDS[digit]}, {r.test_error:.2f}% against {own.test_error:.2f}%")
    return f" By digit error alone (one digit in the frame), the verdict differs {'; '.join(differ)}." if differ else ""


def _pair_counts(pairs: list[tuple[Row, Row]]) -> str:
    counts = {r.n_pairs for r, own in pairs} | {own.n_pairs for _, own in pairs}
    return f"{counts.pop():,} test pairs" if len(counts) == 1 else "their test pairs"


def _swap(by_model: dict[str, dict[str, Row]], routing: str, lead: str, trained: tuple[str, ...]) -> str | None:
    """How the models trained with one of `trained` fare when they are run with `routing` instead:
    by test error, or by pair accuracy for the models that read MultiMNIST pairs (`_judged`), how
    many stay within chance, how many do better or worse beyond it."""
    pairs = [(rs[routing], own) for rs in by_model.values() if (own := _own(rs)) and own.trained_with in trained and routing in rs]
    if not pairs:
        return None
    single = [(r, own) for r, own in pairs if _judged(r, own)[0] == "test_error"]
    paired = [(r, own) for r, own in pairs if _judged(r, own)[0] == "pair_accuracy"]
    said = []
    if single:
        whose = f"for the {len(single)} that read one image at a time, " if paired else ""
        said.append(whose + "the test error is " + _outcomes(single, "test_error", "n_test", False))
    if paired:
        task = "the task they were trained for" if len(paired) > 1 else "the task it was trained for"
        whose = f"for the {len(paired)} that read MultiMNIST pairs, judged" if single else "judged"
        said.append(
            f"{whose} by pair accuracy on {_pair_counts(paired)} ({task}{'' if single else ', reading MultiMNIST pairs'}), "
            "the pair accuracy is " + _outcomes(paired, "pair_accuracy", "n_pairs", True)
        )
    trained_with = _routings(own.trained for _, own in pairs)
    what = "what it was trained with" if len(pairs) == 1 else "what they were trained with"
    return f"{lead} instead of {what} ({trained_with}), " + "; ".join(said) + "." + _digit_differs(paired)


def _better(by_model: dict[str, dict[str, Row]]) -> str | None:
    """Every model that does better beyond chance run with another routing than with its own, by the
    measure it is judged by (`_judged`); and a model that reads pairs whose digit error alone would
    say so while its pair accuracy does not."""
    compared, better, digit = 0, [], {}
    for rs in by_model.values():
        if (own := _own(rs)) is None:
            continue
        for r in rs.values():
            if r is own:
                continue
            compared += 1
            field_, count, words, higher = _judged(r, own)
            if _verdict(r, own, field_, count, higher) == "better":
                better.append(
                    f"**{r.model}** (trained with {own.trained}) run with {r.run_with}: {words} "
                    f"{getattr(r, field_):.2f}% against {getattr(own, field_):.2f}%"
                )
            elif field_ == "pair_accuracy" and _verdict(r, own, "test_error", "n_test", False) == "better":
                verdict = VERDICT_WORDS[_verdict(r, own, field_, count, higher)]
                digit.setdefault((r.model, own.trained), []).append(
                    f"run with {r.run_with}, digit error {r.test_error:.2f}% against {own.test_error:.2f}% but pair accuracy "
                    f"{r.pair_accuracy:.2f}% against {own.pair_accuracy:.2f}% ({verdict})"
                )
    if not compared:
        return None
    measure = "by test error, or pair accuracy for a model that reads MultiMNIST pairs"
    said = (
        f"**Better with another routing.** Beyond chance, {measure}: " + "; ".join(better) + "."
        if better
        else f"**Better with another routing.** No model does better beyond chance run with another routing than with its own, {measure}."
    )
    for (model, trained), runs in digit.items():
        said += (
            f" By digit error alone (one digit in the frame), **{model}** (trained with {trained}) would look better: "
            + "; ".join(runs)
            + "."
        )
    return said


NO_ANSWER = (
    "Nothing shown here answers it: the short answer sets a model run with uniform or fixed random couplings beside its "
    "own routing, models trained with different routings beside one another, and dynamic routing's couplings beside "
    "the uniform split, and none of these is among the rows shown."
)


def short_answer(rows: list[Row]) -> list[str]:
    """Does routing matter? The few sentences the table supports: the test error (pair accuracy for a
    model that reads MultiMNIST pairs) with uniform couplings (no routing) and with fixed random
    couplings in place of a model's own routing; every model that does better with another routing; models
    of one architecture trained with different routings; how far dynamic routing moves the couplings.
    Each quotes the table's own numbers."""
    by_model = _by_model(rows)
    said = [
        _swap(by_model, "uniform", f"**Run without routing.** Run with {run_with_words('uniform')}", vote_based()),
        _swap(
            by_model,
            "random",
            f"**Random couplings.** Run with {run_with_words('random')}",
            tuple(r for r in vector_routings() if r != "random"),
        ),
        _better(by_model),
    ]
    groups = []
    for arch, rs in _groups(rows).items():
        text = arch.split(",")[0] + ": "
        for field_, count, words, higher in (
            ("test_error", "n_test", rs[0].error_words, False),
            ("pair_accuracy", "n_pairs", "pair accuracy", True),
        ):
            if field_ == "pair_accuracy" and not all(r.pair_accuracy is not None for r in rs):
                continue
            ranked, beyond, _ = _ranked(rs, field_, count, higher)
            listing = ", ".join(f"{r.trained} {getattr(r, field_):.2f}%" for r in ranked)
            verdict = (
                f"{ranked[0].trained} ahead of {ranked[-1].trained} beyond chance, but with one training seed each this gap may be the seed's"
                if beyond
                else "no gap beyond chance"
            )
            text += f"{'' if field_ == 'test_error' else '; '}{words} {listing} ({verdict})"
        groups.append(text)
    if groups:
        said.append(
            "**Trained with.** Models of one preset and schedule trained with different routings, each run with its own "
            "(one training seed each, so a gap may be the seed's): " + "; ".join(groups) + "."
        )
    dynamic = [r for r in rows if r.run_with == "dynamic"]
    if dynamic:
        near = [r for r in dynamic if rules.near_uniform(r.entropy_ratio, r.coupling_to_prediction, 1 / r.classes)]
        away = sorted((r for r in dynamic if r not in near), key=lambda r: r.entropy_ratio)
        rule = (
            f"more than {rules.NEAR_UNIFORM_ENTROPY:.0%} of the uniform split's entropy and less than "
            f"{rules.NEAR_UNIFORM_SHARE} times the uniform share of a vote to the predicted class"
        )
        parts = []
        if near:
            lo, hi = min(r.entropy_ratio for r in near), max(r.entropy_ratio for r in near)
            kept = f"{100 * lo:.1f}%" if f"{100 * lo:.1f}" == f"{100 * hi:.1f}" else f"{100 * lo:.1f}% to {100 * hi:.1f}%"
            parts.append(
                f"leaves the couplings near uniform on {_of(len(near), len(dynamic))} (they keep {kept} of the uniform split's entropy)"
            )
        if away:
            quoted = ", ".join(
                f"**{r.model}**: {100 * r.entropy_ratio:.1f}% of the entropy, {r.coupling_to_prediction:.2f} to the predicted class "
                f"against the uniform {1 / r.classes:.2f}"
                for r in away[:2]
            )
            more = f" and {len(away) - 2} more" if len(away) > 2 else ""
            them = "them" if near else "the couplings"
            parts.append(f"moves {them} away from uniform on {_of(len(away), len(dynamic))} ({quoted}{more})")
        said.append(f"**Couplings.** By the near-uniform rule ({rule}), dynamic routing " + "; it ".join(parts) + ".")
    return [s for s in said if s] or [NO_ANSWER]


def hidden(rows: list[Row]) -> list[str]:
    """A note on what the routings hidden under "Run with" leave out of the sentences (nothing is
    dropped without one)."""
    shown = {r.run_with for r in rows}
    off = [r for r in vector_routings() if r not in shown]
    if not rows or not off:
        return []
    lost = []
    untied: dict[str, set[str]] = {}
    for r in rows:
        if r.trained_with not in shown:
            untied.setdefault(r.trained, set()).add(r.model)
    for routing, names in untied.items():
        listed = ", ".join(f"**{n}**" for n in sorted(names))
        lost.append(
            f"how {listed}, trained with {routing}, fare with other routings than their own (in the short answer and in "
            "their details) and beside models trained otherwise"
        )
    if "uniform" in off:
        lost.append("the short answer on running without routing (uniform couplings)")
    if "random" in off:
        lost.append("the short answer on fixed random couplings")
    lost.append(f"whether a model does better run with {_routings(off)} than with its own (the short answer)")
    lost += [f"how far {ROUTINGS[r].words} moves the couplings from uniform" for r in off if ROUTINGS[r].from_votes]
    if "dynamic" in off or "uniform" in off:
        lost.append("the time of dynamic routing against uniform couplings")
    return [
        f"Hidden under *Run with*: {', '.join(off)}. Left out with {'it' if len(off) == 1 else 'them'}: "
        + "; ".join(lost)
        + ". Choose every routing to see them."
    ]


EFFICIENT_MNIST = ("efficient", "mnist", None, True)  # the published result the lab quotes beside Sabour et al.'s
PUBLISHED = (
    "Paik, Lee and Kim (2019, arXiv 1907.13327): on their benchmarks dynamic and EM routing were not better than "
    "uniform or random couplings, and routing mainly made the couplings more extreme.",
    "Gu and Tresp (2020, CVPR): routing contributed neither to generalisation nor to affine robustness; their "
    "capsule networks without routing reached 93.21% on affNIST after MNIST training, against 79% for CapsNet.",
    f"Mazzia, Salvetti and Chiaberge (2021, Efficient-CapsNet): {PAPER[EFFICIENT_MNIST]}% MNIST test error with one pass of self-attention "
    "routing and about 161 thousand parameters, after 150 epochs with augmentation.",
)
