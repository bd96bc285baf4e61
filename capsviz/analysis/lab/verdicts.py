"""The routing lab's verdicts: the sentences the page says about its rows (`report`, `short_answer`,
`hidden`), each verb decided by capsviz.analysis.rules, and the published results it quotes."""

from __future__ import annotations

from dataclasses import dataclass

from capsviz.analysis import rule_words, rules
from capsviz.analysis.lab.measuring import (
    COMPARED,
    COUPLING_IMAGES,
    Row,
    architecture_words,
    routing_name,
    run_with_words,
    vote_based,
)
from capsviz.analysis.lab.seeds import SeedStudy
from capsviz.analysis.reproduction import PAPER
from capsviz.analysis.rules import noise
from capsviz.i18n import N_, t, tn
from capsviz.registry import ROUTINGS, vector_routings


def time_rule() -> str:
    """The speed rules, said beside the times: "faster" and "busy" (capsviz.analysis.rules)."""
    return t("{said} {more}", said=rules.rule_words("faster"), more=rules.rule_words("busy"))


MASKING = N_(
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
        if (said_time := _time(name, rs)) is not None:
            said.append(said_time)
        models[name] = said
    across = _trained_with(rows, studies) + ([t(MASKING)] if masked else [])
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


def _pct(x: float) -> str:
    """A measure as the table and the sentences quote it: two decimals."""
    return f"{x:.2f}"


def _listed(items: list[str]) -> str:
    """Items in a list as the reader's language separates them."""
    return t(", ").join(items)


def _against(name: str, r: Row, own: Row) -> str:
    """A model run with another routing than its own, measure by measure, and what differs beyond chance."""
    parts, better, worse = [], [], []
    for field_, count, words, higher in COMPARED:
        a, b = getattr(r, field_), getattr(own, field_)
        if a is None or b is None:
            continue
        measure = r.error_words if field_ == "test_error" else t(words)
        v = dict(measure=measure, a=_pct(a), b=_pct(b), band=f"{noise(a, getattr(r, count), b, getattr(own, count)):.2f}")
        verdict = _verdict(r, own, field_, count, higher)
        if verdict is None:
            parts.append(t("{measure} {a}% against {b}% (within chance, ±{band})", **v))
        elif verdict == "better":
            better.append(measure)
            parts.append(t("{measure} {a}% against {b}% (better, beyond ±{band})", **v))
        else:
            worse.append(measure)
            parts.append(t("{measure} {a}% against {b}% (worse, beyond ±{band})", **v))
    v = dict(name=name, trained=own.trained_name, run=routing_name(r.run_with), own=routing_name(own.run_with), parts=t("; ").join(parts))
    if better and worse:
        return t(
            "**{name}** (trained with {trained}) run with **{run}** instead: {parts}. So better on {better}; worse on {worse}.",
            better=_listed(better),
            worse=_listed(worse),
            **v,
        )
    if better:
        return t(
            "**{name}** (trained with {trained}) run with **{run}** instead: {parts}. So better on {better}.", better=_listed(better), **v
        )
    if worse:
        return t("**{name}** (trained with {trained}) run with **{run}** instead: {parts}. So worse on {worse}.", worse=_listed(worse), **v)
    return t(
        "**{name}** (trained with {trained}) run with **{run}** instead: {parts}. So no measure differs beyond chance: on these "
        "test images, {run} and {own} cannot be told apart on this model (a smaller difference than chance gives may still be there).",
        **v,
    )


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
        gaps = _gap(rs, "test_error", "n_test", higher=False)
        if all(r.pair_accuracy is not None for r in rs):
            gaps = t("{said} {more}", said=gaps, more=_gap(rs, "pair_accuracy", "n_pairs", higher=True))
        study = next((st for st in studies if st.preset_and_data == arch.split(",")[0]), None)
        if study is None:
            seeds = t(
                "One training seed each; how far the seed alone moves these models was not measured, so a gap here may be the seed's."
            )
        else:
            seeds = t(
                "One training seed each; how far the seed alone moves such models is measured below ({k} seeds per routing, a "
                "shorter schedule).",
                k=len(study.seeds),
            )
        head = t(
            "The models of one architecture and schedule ({arch}) trained with different routings, each run with its own: {gaps}",
            arch=architecture_words(arch),
            gaps=gaps,
        )
        said.append(t("{said} {more}", said=head, more=seeds))
    return said


def _ranked(rs: list[Row], field_: str, count: str, higher: bool) -> tuple[list[Row], bool, float]:
    """The rows from best to worst on `field_`, whether the best and the worst differ beyond chance,
    and the chance band of that difference."""
    rs = sorted(rs, key=lambda r: getattr(r, field_), reverse=higher)
    best, worst = rs[0], rs[-1]
    a, b, na, nb = getattr(best, field_), getattr(worst, field_), getattr(best, count), getattr(worst, count)
    return rs, rules.beyond_chance(a, na, b, nb), noise(a, na, b, nb)


def _ranking(rs: list[Row], field_: str) -> str:
    """'dynamic 0.55%, uniform 0.58%': each model by what it was trained with, in the order given."""
    return _listed([t("{routing} {value}%", routing=r.trained_name, value=_pct(getattr(r, field_))) for r in rs])


def _gap(rs: list[Row], field_: str, count: str, higher: bool) -> str:
    """The models' `field_` (test error, or pair accuracy) from best to worst, and whether the
    largest gap is beyond chance."""
    rs, beyond, band = _ranked(rs, field_, count, higher)
    best, worst = rs[0], rs[-1]
    v = dict(
        n=f"{getattr(best, count):,}",
        listing=_ranking(rs, field_),
        best=best.trained_name,
        worst=worst.trained_name,
        gap=_pct(abs(getattr(best, field_) - getattr(worst, field_))),
        band=f"{band:.2f}",
    )
    if field_ == "pair_accuracy":
        if beyond:
            return t(
                "MultiMNIST pair accuracy on {n} pairs, best first: {listing}; trained with {best} is best, {gap} points ahead of "
                "{worst}, more than the ±{band} chance gives.",
                **v,
            )
        return t(
            "MultiMNIST pair accuracy on {n} pairs, best first: {listing}; the largest gap, {gap} points, is within the ±{band} "
            "chance gives: on this measure, none of these routings trained a model better than another beyond chance.",
            **v,
        )
    if beyond:
        return t(
            "{measure} on {n} test images, best first: {listing}; trained with {best} is best, {gap} points ahead of {worst}, "
            "more than the ±{band} chance gives.",
            measure=rs[0].error_words,
            **v,
        )
    return t(
        "{measure} on {n} test images, best first: {listing}; the largest gap, {gap} points, is within the ±{band} chance "
        "gives: on this measure, none of these routings trained a model better than another beyond chance.",
        measure=rs[0].error_words,
        **v,
    )


def _coupling(r: Row) -> str:
    """How far a routing that computes the couplings from the votes moves them from uniform, by
    both parts of the near-uniform rule (rule_words.uniform_words)."""
    return t(
        "With {routing}, **{model}**'s couplings, set beside the uniform split (each class 1/{classes} of a vote), are "
        "{verdict} (averaged over {n} images).",
        routing=t(ROUTINGS[r.run_with].words),
        model=r.model,
        classes=r.classes,
        verdict=rule_words.uniform_words(r.entropy_ratio, r.coupling_to_prediction, 1 / r.classes),
        n=COUPLING_IMAGES,
    )


def _time(name: str, rs: dict[str, Row]) -> str | None:
    """What dynamic routing costs in time against uniform couplings: a speed is claimed only from
    repeated timings on one machine that was not busy (rules.faster, rules.busy), else the times
    are given and why nothing is said about them."""
    if "dynamic" not in rs or "uniform" not in rs:
        return None
    d, u = rs["dynamic"], rs["uniform"]
    load, cores = max(d.load, u.load), min(d.cores, u.cores)
    v = dict(name=name, d=rule_words.timing_words(d.timing), u=rule_words.timing_words(u.timing), load=f"{load:.1f}", cores=cores)
    if d.hardware != u.hardware:
        return t(
            "On **{name}**, dynamic routing takes {d} per image against {u} for one pass with uniform couplings; they were timed "
            "on different machines, so nothing is said about which is faster.",
            **v,
        )
    if min(len(d.timing.samples), len(u.timing.samples)) < rules.MIN_TIMINGS:
        return t(
            "On **{name}**, dynamic routing takes {d} per image against {u} for one pass with uniform couplings; a speed is "
            "claimed only from {timings} timings or more of each, so nothing is said about which is faster.",
            timings=rules.MIN_TIMINGS,
            **v,
        )
    if cores < 1:
        return t(
            "On **{name}**, dynamic routing takes {d} per image against {u} for one pass with uniform couplings; the machine's "
            "number of cores was not recorded, so whether it was busy is not known, so nothing is said about which is faster.",
            **v,
        )
    if rules.busy(load, cores):
        return t(
            "On **{name}**, dynamic routing takes {d} per image against {u} for one pass with uniform couplings; the machine "
            "was busy while timing them (load {load} on {cores} cores), so nothing is said about which is faster.",
            **v,
        )
    said = rule_words.time_words(t("dynamic routing"), d.timing, t("one pass with uniform couplings"), u.timing)
    return t("On **{name}**, {said} (Load {load} on {cores} cores.)", said=said, **v)


def _of(k: int, n: int) -> str:
    return t("this model") if n == 1 else t("{k} of {n} models", k=k, n=n)


def _routings(keys=(), labels=()) -> str:
    """The routings `keys` in the lab's order, by their names: "dynamic, uniform or self-attention";
    `labels`, names of their own (one iteration of dynamic routing, Row.trained), after them."""
    given = set(keys)
    ordered = [routing_name(r) for r in vector_routings() if r in given] + sorted(set(labels))
    if len(ordered) == 1:
        return ordered[0]
    return t("{names} or {last}", names=_listed(ordered[:-1]), last=ordered[-1])


def _judged(r: Row, own: Row) -> tuple[str, str, str, bool]:
    """The measure a model run with another routing is judged by in the short answer, as COMPARED
    gives it: pair accuracy for a model that reads MultiMNIST pairs (the task it was trained for),
    else the test error."""
    if r.pair_accuracy is not None and own.pair_accuracy is not None:
        return "pair_accuracy", "n_pairs", N_("pair accuracy"), True
    return "test_error", "n_test", N_("test error"), False


# A verdict of the short answer, as a label in brackets
VERDICT_WORDS = {"worse": N_("worse beyond chance"), "better": N_("better beyond chance"), None: N_("within chance")}


def _quoted(pairs: list[tuple[Row, Row]], field_: str) -> str:
    """The first two of `pairs` as the table gives them ("**m** 0.60% against 0.55%"), and how many more."""
    quoted = _listed(
        [
            t("**{model}** {a}% against {b}%", model=r.model, a=_pct(getattr(r, field_)), b=_pct(getattr(own, field_)))
            for r, own in pairs[:2]
        ]
    )
    return t("{listed} and {n} more", listed=quoted, n=len(pairs) - 2) if len(pairs) > 2 else quoted


def _outcomes(pairs: list[tuple[Row, Row]], field_: str, count: str, higher: bool) -> str:
    """How many of `pairs` (a model run with another routing, and with its own) stay within chance on
    `field_`, how many do better or worse beyond it, each with the largest changes quoted as the
    table gives them."""
    outcome: dict[str | None, list[tuple[Row, Row]]] = {"worse": [], "better": [], None: []}
    for r, own in pairs:
        outcome[_verdict(r, own, field_, count, higher)].append((r, own))
    parts = []
    for verdict in VERDICT_WORDS:
        got = sorted(outcome[verdict], key=lambda p: -abs(getattr(p[0], field_) - getattr(p[1], field_)))
        if not got:
            continue
        v = dict(models=_of(len(got), len(pairs)), quoted=_quoted(got, field_))
        if verdict == "worse":
            said = t("worse beyond chance on {models} ({quoted})", **v)
        elif verdict == "better":
            said = t("better beyond chance on {models} ({quoted})", **v)
        elif len(got) > 1:
            said = t("within chance on {models} (largest changes first: {quoted})", **v)
        else:
            said = t("within chance on {models} ({quoted})", **v)
        parts.append((len(got), said))
    parts.sort(key=lambda p: -p[0])
    return t("; ").join(p for _, p in parts)


def _digit_differs(pairs: list[tuple[Row, Row]]) -> str:
    """For models judged by pair accuracy: where their digit error (one digit alone) gives another
    verdict, said with its numbers; "" where it gives none."""
    differ = []
    for r, own in pairs:
        digit = _verdict(r, own, "test_error", "n_test", False)
        if digit != _verdict(r, own, "pair_accuracy", "n_pairs", True):
            differ.append(
                t(
                    "on **{model}**: {verdict}, {a}% against {b}%",
                    model=r.model,
                    verdict=t(VERDICT_WORDS[digit]),
                    a=_pct(r.test_error),
                    b=_pct(own.test_error),
                )
            )
    return t("By digit error alone (one digit in the frame), the verdict differs {where}.", where=t("; ").join(differ)) if differ else ""


def _pair_counts(pairs: list[tuple[Row, Row]]) -> str:
    counts = {r.n_pairs for r, own in pairs} | {own.n_pairs for _, own in pairs}
    return t("{n} test pairs", n=f"{counts.pop():,}") if len(counts) == 1 else t("their test pairs")


def _swap(by_model: dict[str, dict[str, Row]], routing: str, headline: str, trained: tuple[str, ...]) -> str | None:
    """How the models trained with one of `trained` fare when they are run with `routing` instead:
    by test error, or by pair accuracy for the models that read MultiMNIST pairs (`_judged`), how
    many stay within chance, how many do better or worse beyond it. `headline`: the sentence's bold title."""
    pairs = [(rs[routing], own) for rs in by_model.values() if (own := _own(rs)) and own.trained_with in trained and routing in rs]
    if not pairs:
        return None
    single = [(r, own) for r, own in pairs if _judged(r, own)[0] == "test_error"]
    paired = [(r, own) for r, own in pairs if _judged(r, own)[0] == "pair_accuracy"]
    owns = [own for _, own in pairs]
    trained = _routings([o.trained_with for o in owns if not o.trained_label], [o.trained for o in owns if o.trained_label])
    v = dict(headline=headline, routing=run_with_words(routing), trained=trained)
    if single:
        v["errors"] = _outcomes(single, "test_error", "n_test", False)
    if paired:
        v |= dict(pair_counts=_pair_counts(paired), accuracies=_outcomes(paired, "pair_accuracy", "n_pairs", True))
    if single and paired:
        said = tn(
            "{headline} Run with {routing} instead of what they were trained with ({trained}), for the {k} that read one image "
            "at a time, the test error is {errors}; for the {n} that read MultiMNIST pairs, judged by pair accuracy on "
            "{pair_counts} (the task it was trained for), the pair accuracy is {accuracies}.",
            "{headline} Run with {routing} instead of what they were trained with ({trained}), for the {k} that read one image "
            "at a time, the test error is {errors}; for the {n} that read MultiMNIST pairs, judged by pair accuracy on "
            "{pair_counts} (the task they were trained for), the pair accuracy is {accuracies}.",
            len(paired),
            k=len(single),
            **v,
        )
    elif single:
        said = tn(
            "{headline} Run with {routing} instead of what it was trained with ({trained}), the test error is {errors}.",
            "{headline} Run with {routing} instead of what they were trained with ({trained}), the test error is {errors}.",
            len(pairs),
            **v,
        )
    else:
        said = tn(
            "{headline} Run with {routing} instead of what it was trained with ({trained}), judged by pair accuracy on "
            "{pair_counts} (the task it was trained for, reading MultiMNIST pairs), the pair accuracy is {accuracies}.",
            "{headline} Run with {routing} instead of what they were trained with ({trained}), judged by pair accuracy on "
            "{pair_counts} (the task they were trained for, reading MultiMNIST pairs), the pair accuracy is {accuracies}.",
            len(pairs),
            **v,
        )
    differs = _digit_differs(paired)
    return t("{said} {more}", said=said, more=differs) if differs else said


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
                    t(
                        "**{model}** (trained with {trained}) run with {run}: {measure} {a}% against {b}%",
                        model=r.model,
                        trained=own.trained_name,
                        run=routing_name(r.run_with),
                        measure=t(words),
                        a=_pct(getattr(r, field_)),
                        b=_pct(getattr(own, field_)),
                    )
                )
            elif field_ == "pair_accuracy" and _verdict(r, own, "test_error", "n_test", False) == "better":
                digit.setdefault((r.model, own.trained_name), []).append(
                    t(
                        "run with {run}, digit error {a}% against {b}% but pair accuracy {c}% against {d}% ({verdict})",
                        run=routing_name(r.run_with),
                        a=_pct(r.test_error),
                        b=_pct(own.test_error),
                        c=_pct(r.pair_accuracy),
                        d=_pct(own.pair_accuracy),
                        verdict=t(VERDICT_WORDS[_verdict(r, own, field_, count, higher)]),
                    )
                )
    if not compared:
        return None
    if better:
        said = t(
            "**Better with another routing.** Beyond chance, by test error, or pair accuracy for a model that reads MultiMNIST "
            "pairs: {models}.",
            models=t("; ").join(better),
        )
    else:
        said = t(
            "**Better with another routing.** No model does better beyond chance run with another routing than with its own, "
            "by test error, or pair accuracy for a model that reads MultiMNIST pairs."
        )
    for (model, trained), runs in digit.items():
        more = t(
            "By digit error alone (one digit in the frame), **{model}** (trained with {trained}) would look better: {runs}.",
            model=model,
            trained=trained,
            runs=t("; ").join(runs),
        )
        said = t("{said} {more}", said=said, more=more)
    return said


NO_ANSWER = N_(
    "Nothing shown here answers it: the short answer sets a model run with uniform or fixed random couplings beside its "
    "own routing, models trained with different routings beside one another, and dynamic routing's couplings beside "
    "the uniform split, and none of these is among the rows shown."
)


def _trained_with_group(arch: str, rs: list[Row]) -> str:
    """One architecture's models trained with different routings, in the short answer: test error
    (and pair accuracy), best first, and whether the gap is beyond chance."""
    said = []
    for field_, count, higher in (("test_error", "n_test", False), ("pair_accuracy", "n_pairs", True)):
        if field_ == "pair_accuracy" and not all(r.pair_accuracy is not None for r in rs):
            continue
        ranked, beyond, _ = _ranked(rs, field_, count, higher)
        if beyond:
            verdict = t(
                "{best} ahead of {worst} beyond chance, but with one training seed each this gap may be the seed's",
                best=ranked[0].trained_name,
                worst=ranked[-1].trained_name,
            )
        else:
            verdict = t("no gap beyond chance")
        measure = rs[0].error_words if field_ == "test_error" else t("pair accuracy")
        said.append(t("{measure} {listing} ({verdict})", measure=measure, listing=_ranking(ranked, field_), verdict=verdict))
    return t("{what}: {said}", what=architecture_words(arch.split(",")[0]), said=t("; ").join(said))


def _couplings(rows: list[Row]) -> str | None:
    """How far dynamic routing moves the couplings from uniform, by the near-uniform rule, on each
    model run with it: the evenness range of those it leaves near uniform, and the numbers of the
    first two it moves away."""
    dynamic = [r for r in rows if r.run_with == "dynamic"]
    if not dynamic:
        return None
    near = [r for r in dynamic if rules.near_uniform(r.entropy_ratio, r.coupling_to_prediction, 1 / r.classes)]
    away = sorted((r for r in dynamic if r not in near), key=lambda r: r.entropy_ratio)
    v = dict(
        rule=t(
            "more than {entropy} of the uniform split's entropy and less than {share} times the uniform share of a vote to the "
            "predicted class",
            entropy=f"{rules.NEAR_UNIFORM_ENTROPY:.0%}",
            share=rules.NEAR_UNIFORM_SHARE,
        )
    )
    if near:
        lo, hi = f"{100 * min(r.entropy_ratio for r in near):.1f}", f"{100 * max(r.entropy_ratio for r in near):.1f}"
        v |= dict(near_models=_of(len(near), len(dynamic)), kept=f"{lo}%" if lo == hi else t("{lo}% to {hi}%", lo=lo, hi=hi))
    if away:
        quoted = _listed(
            [
                t(
                    "**{model}**: {entropy}% of the entropy, {share} to the predicted class against the uniform {uniform}",
                    model=r.model,
                    entropy=f"{100 * r.entropy_ratio:.1f}",
                    share=f"{r.coupling_to_prediction:.2f}",
                    uniform=f"{1 / r.classes:.2f}",
                )
                for r in away[:2]
            ]
        )
        if len(away) > 2:
            quoted = t("{listed} and {n} more", listed=quoted, n=len(away) - 2)
        v |= dict(away_models=_of(len(away), len(dynamic)), quoted=quoted)
    if near and away:
        return t(
            "**Couplings.** By the near-uniform rule ({rule}), dynamic routing leaves the couplings near uniform on {near_models} "
            "(they keep {kept} of the uniform split's entropy); it moves them away from uniform on {away_models} ({quoted}).",
            **v,
        )
    if near:
        return t(
            "**Couplings.** By the near-uniform rule ({rule}), dynamic routing leaves the couplings near uniform on {near_models} "
            "(they keep {kept} of the uniform split's entropy).",
            **v,
        )
    return t(
        "**Couplings.** By the near-uniform rule ({rule}), dynamic routing moves the couplings away from uniform on {away_models} "
        "({quoted}).",
        **v,
    )


def short_answer(rows: list[Row]) -> list[str]:
    """Does routing matter? The few sentences the table supports: the test error (pair accuracy for a
    model that reads MultiMNIST pairs) with uniform couplings (no routing) and with fixed random
    couplings in place of a model's own routing; every model that does better with another routing; models
    of one architecture trained with different routings; how far dynamic routing moves the couplings.
    Each quotes the table's own numbers."""
    by_model = _by_model(rows)
    said = [
        _swap(by_model, "uniform", t("**Run without routing.**"), vote_based()),
        _swap(by_model, "random", t("**Random couplings.**"), tuple(r for r in vector_routings() if r != "random")),
        _better(by_model),
    ]
    groups = [_trained_with_group(arch, rs) for arch, rs in _groups(rows).items()]
    if groups:
        said.append(
            t(
                "**Trained with.** Models of one preset and schedule trained with different routings, each run with its own (one "
                "training seed each, so a gap may be the seed's): {groups}.",
                groups=t("; ").join(groups),
            )
        )
    said.append(_couplings(rows))
    return [s for s in said if s] or [t(NO_ANSWER)]


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
            untied.setdefault(r.trained_name, set()).add(r.model)
    for routing, names in untied.items():
        lost.append(
            t(
                "how {models}, trained with {routing}, fare with other routings than their own (in the short answer and in their "
                "details) and beside models trained otherwise",
                models=_listed([f"**{n}**" for n in sorted(names)]),
                routing=routing,
            )
        )
    if "uniform" in off:
        lost.append(t("the short answer on running without routing (uniform couplings)"))
    if "random" in off:
        lost.append(t("the short answer on fixed random couplings"))
    lost.append(t("whether a model does better run with {routings} than with its own (the short answer)", routings=_routings(off)))
    lost += [t("how far {routing} moves the couplings from uniform", routing=t(ROUTINGS[r].words)) for r in off if ROUTINGS[r].from_votes]
    if "dynamic" in off or "uniform" in off:
        lost.append(t("the time of dynamic routing against uniform couplings"))
    return [
        tn(
            "Hidden under *{label}*: {off}. Left out with it: {lost}. Choose every routing to see them.",
            "Hidden under *{label}*: {off}. Left out with them: {lost}. Choose every routing to see them.",
            len(off),
            label=t("Run with"),
            off=_listed([routing_name(r) for r in off]),
            lost=t("; ").join(lost),
        )
    ]


EFFICIENT_MNIST = ("efficient", "mnist", None, True)  # the published result the lab quotes beside Sabour et al.'s
# What others found, each a catalog message; `published()` says them with the papers' numbers
PUBLISHED = (
    N_(
        "Paik, Lee and Kim (2019, arXiv 1907.13327): on their benchmarks dynamic and EM routing were not better than "
        "uniform or random couplings, and routing mainly made the couplings more extreme."
    ),
    N_(
        "Gu and Tresp (2020, CVPR): routing contributed neither to generalisation nor to affine robustness; their "
        "capsule networks without routing reached 93.21% on affNIST after MNIST training, against 79% for CapsNet."
    ),
    N_(
        "Mazzia, Salvetti and Chiaberge (2021, Efficient-CapsNet): {error}% MNIST test error with one pass of self-attention "
        "routing and about 161,000 parameters, after 150 epochs with augmentation."
    ),
)


def published() -> list[str]:
    """What others found (not measured here), in the reader's language."""
    return [t(p, error=PAPER[EFFICIENT_MNIST]) for p in PUBLISHED]  # a message without {error} ignores it
