"""The routing playgrounds' sentences: built in capsviz.analysis.playground from the numbers the
tables beside them draw. Builders on both sides of each rule; every preset, every number of upper
capsules, iteration and routing rule quotes only numbers its own tables (or the figure's lambda) show;
the page shows what the core says."""

import itertools
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest
from test_i18n import english_left

from capsviz import i18n
from capsviz.analysis import coupling_entropy, rules
from capsviz.analysis.links import chosen
from capsviz.analysis.playground import (
    DYNAMIC_PRESETS,
    EM_PRESETS,
    POSE,
    PRESET_NAMES,
    TABLE,
    TOY_RULE,
    attention_toy,
    attention_view,
    dynamic_toy,
    dynamic_try,
    dynamic_view,
    em_toy,
    em_try,
    em_view,
    since_words,
    split_words,
)
from capsviz.routing import lambda_schedule

NUMBER = re.compile(r"(?<![\w.])-?\d+\.\d+")
RULE_TEXT = [TOY_RULE, rules.RULES["near uniform"], rules.RULES["rises / falls"], rules.RULES["peaks / dips"]]


def quoted(text: str) -> list[str]:
    for rule in RULE_TEXT:  # the rules' own thresholds are definitions, not measurements
        text = text.replace(rule, "")
    return NUMBER.findall(text)


def shown(view) -> set[str]:
    """Every number the view's two tables draw, as the page formats them (TABLE decimals; text columns as written)."""
    out = set()
    for table in (view.lower, view.upper):
        for values in table.values():
            for x in values:
                out |= set(NUMBER.findall(x)) if isinstance(x, str) else {f"{x:.{TABLE}f}"}
    return out


# ---------- builders, both sides of each rule ----------


def near(row) -> bool:
    row = np.asarray(row)
    return rules.near_uniform(float(coupling_entropy(row) / np.log(len(row))), float(row.max()), 1 / len(row))


def test_split_words_near_uniform_on_both_sides_of_the_rule():
    split, leaning = [0.6, 0.4], [0.65, 0.35]  # entropy ratio 0.971 (above 0.95) and 0.934 (below)
    assert near(split) and not near(leaning)
    said = split_words(np.array([split, leaning, [0.1, 0.9]]))
    assert "lower capsule 1 (largest 0.600) is still near uniform" in said
    assert "lower capsule 2 (0.650) sends most of its prediction to upper 1" in said
    assert "lower capsule 3 (0.900) sends most of its prediction to upper 2" in said
    said = split_words(np.array([leaning, leaning]))
    assert "lower capsules 1 (0.650), 2 (0.650) send most of their prediction to upper 1" in said and "near uniform" not in said


def test_since_words_rise_fall_or_stay_level_by_the_rule():
    first = np.full((3, 2), 0.5)
    now = np.array([[0.56, 0.44], [0.54, 0.46], [0.9, 0.1]])  # +12% (rises), +8% (level), +80%
    assert rules.trend(0.5, 0.56) == "rises" and rules.trend(0.5, 0.54) == "stays about level"
    said = since_words(np.stack([first, now]))
    assert "when the couplings were 0.500" in said
    assert "rises for lower capsules 1, 3" in said and "stays about level for lower capsule 2" in said


def test_since_words_follow_each_path_not_only_its_ends():
    """A largest coupling that peaks in between is said to peak, with the peak the table showed."""
    c = np.full((3, 3, 2), 0.5)
    c[1:, :, 0] = [[0.9, 0.52, 0.3], [0.54, 0.56, 0.52]]  # capsule 1: 0.5 -> 0.9 -> 0.54; 2: monotone; 3: dips
    c[..., 1] = 1 - c[..., 0]
    said = since_words(c)
    assert "rises to 0.900 at iteration 2, then falls for lower capsule 1" in said
    assert "rises for lower capsule 2" in said
    assert "falls to 0.300 at iteration 2, then rises for lower capsule 3" in said


def test_playground_says_the_near_uniform_rule_in_the_toys_terms():
    view = dynamic_view(dynamic_toy(DYNAMIC_PRESETS["outliers"][:, :2].copy(), 3), 2)
    assert f"(Near uniform: {TOY_RULE}" in view.said
    assert "lower capsule's couplings" in TOY_RULE and "its largest coupling" in TOY_RULE and "upper capsule" in TOY_RULE
    assert f"{rules.NEAR_UNIFORM_ENTROPY:.0%}" in TOY_RULE and f"{rules.NEAR_UNIFORM_SHARE} times" in TOY_RULE
    for text in (view.said, attention_view(attention_toy(DYNAMIC_PRESETS["outliers"][:, :2].copy())).said):
        assert "primary capsule" not in text and "predicted class" not in text


def test_a_flat_toy_stays_near_uniform_and_level():
    view = dynamic_view(dynamic_toy(np.zeros((6, 2, 2)), 3), 2)  # no prediction agrees with anything
    assert "are still near uniform" in view.said and "stays about level for lower capsules 1, 2, 3, 4, 5, 6" in view.said
    assert "rises" not in view.said.replace(rules.RULES["rises / falls"], "")


@pytest.mark.parametrize("T, verb", [(1, "0.30 (one iteration)"), (3, "0.10, 0.20, 0.30 (it rises over the iterations)")])
def test_em_says_lambda_rises_only_when_it_does(T, verb):
    votes, a_in = EM_PRESETS["two clusters"]
    assert rules.trend(0.1, 0.3) == "rises"
    assert f"Inverse temperature per iteration: {verb}" in em_view(em_toy(votes[:, :2], a_in, T), 0, 0.0).said


def test_em_two_equal_clusters_are_not_called_a_fixed_pair():
    votes = np.zeros((6, 2, 2))
    votes[:, :, 0] = np.arange(6)[:, None] * 0.3  # both upper capsules get the very same votes
    view = em_view(em_toy(votes, np.ones(6), 3), 2, 0.0)
    assert "cost the same, so both activations are equal" in view.said and "whatever the votes" not in view.said
    assert view.upper["a (activation)"][0] == view.upper["a (activation)"][1]


@pytest.mark.parametrize("beta_a", [-1.0, 0.0, 0.7])
def test_em_two_capsules_pair_is_what_the_table_shows(beta_a):
    for name, (votes, a_in) in EM_PRESETS.items():
        toy = em_toy(votes[:, :2], a_in, 3, 0.0, beta_a, 1.0)
        for t in range(3):
            view = em_view(toy, t, beta_a)
            pair = re.search(r"= (\S+) and (\S+) whatever the votes", view.said).groups()
            assert list(pair) == sorted(f"{x:.{TABLE}f}" for x in view.upper["a (activation)"]), (name, t)
    assert "graded" not in em_view(em_toy(votes, a_in, 3), 2, 0.0).said.split("the others")[1]


# ---------- the try-it captions: the numbers are what the student gets ----------


def test_dynamic_try_quotes_the_couplings_the_table_will_show():
    u = DYNAMIC_PRESETS["outliers"][:, :2].copy()
    moved = u.copy()
    moved[4, 0] = [1.9, 0.5]
    said = dynamic_try()
    for toy, verb in ((dynamic_toy(moved, 3), "rises"), (dynamic_toy(u, 3), "stays about level")):
        c = [f"{dynamic_view(toy, t).lower['c to 1'][4]:.{TABLE}f}" for t in range(3)]
        assert f"{verb} over the iterations ({', '.join(c)})" in said or f"{verb} ({', '.join(c)})" in said
        assert verb == rules.path_trend(toy.c[:, 4, 0], f"{{:.{TABLE}f}}")


def test_em_try_quotes_what_the_tables_will_show():
    said = em_try()
    votes, a_in = EM_PRESETS["two clusters"]
    loose = votes.copy()
    loose[0, 0, 0] = -1.0
    for toy in (em_toy(votes, a_in, 3), em_toy(loose, a_in, 3)):
        view = em_view(toy, 2, 0.0)
        a = view.upper["a (activation)"]
        assert view.upper["sigma (spread)"][0] in said
        side = "above" if a[0] > a[1] else "below"
        assert f"{a[0]:.{TABLE}f} ({side} upper 2's {a[1]:.{TABLE}f})" in said
    ov, oa = EM_PRESETS["outliers"]
    quiet = oa.copy()
    quiet[4] = 0.05
    for acts in (oa, quiet):
        assert em_view(em_toy(ov[:, :2], acts, 3), 2, 0.0).upper["mu (mean pose)"][0] in said
    x, y = ov[:4, 0].mean(0)
    assert f"around ({x:.{POSE}f}, {y:.{POSE}f})" in said


# ---------- every preset, J, iteration, rule: quoted numbers are tabled numbers ----------


def views():
    for name, J, T in itertools.product(DYNAMIC_PRESETS, (2, 3), (1, 3, 5)):
        toy = dynamic_toy(DYNAMIC_PRESETS[name][:, :J], T)
        for t in range(T):
            yield f"dynamic {name} J={J} t={t + 1}/{T}", dynamic_view(toy, t), {f"{x:.{TABLE}f}" for x in toy.c[0].ravel()}
        yield f"attention {name} J={J}", attention_view(attention_toy(DYNAMIC_PRESETS[name][:, :J])), set()
    for name, J, T in itertools.product(EM_PRESETS, (2, 3), (1, 3)):
        votes, a_in = EM_PRESETS[name]
        toy = em_toy(votes[:, :J], a_in, T)
        for t in range(T):
            extra = {f"{x:.2f}" for x in toy.lambdas} | {f"{x:.{TABLE}f}" for x in toy.R[0].ravel()}  # the figure's lambda; iteration 1's R
            yield f"em {name} J={J} t={t + 1}/{T}", em_view(toy, t, 0.0), extra


@pytest.mark.parametrize("where, view, extra", list(views()), ids=lambda x: x if isinstance(x, str) else "")
def test_every_quoted_number_is_drawn(where, view, extra):
    allowed = shown(view) | extra
    for text in (view.intro, view.said):
        numbers = quoted(text)
        assert all(n in allowed for n in numbers), (where, [n for n in numbers if n not in allowed], text)
    assert quoted(view.said), where  # the box does quote the numbers


# ---------- the page shows what the core says ----------

APP = str(Path(__file__).resolve().parents[1] / "app.py")


@pytest.fixture
def app(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPSVIZ_CHECKPOINTS", os.path.abspath(Path(__file__).resolve().parents[1] / "checkpoints"))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/playground.py").run()
    return at


def page_numbers(at) -> set[str]:
    out = set()
    for frame in at.dataframe:
        for col in frame.value.columns:
            for x in frame.value[col]:
                out |= set(NUMBER.findall(x)) if isinstance(x, str) else {f"{x:.{TABLE}f}"}
    return out


def test_the_page_quotes_its_own_tables_for_every_preset(app):
    checked = 0
    for toy_kind in ("dynamic", "em"):
        app.radio(key="pg_toy").set_value(toy_kind).run()
        presets = DYNAMIC_PRESETS if toy_kind == "dynamic" else EM_PRESETS
        rules_ = ("dynamic", "self-attention") if toy_kind == "dynamic" else (None,)
        for preset, J, rule in itertools.product(presets, (2, 3), rules_):
            app.selectbox(key=f"pg_{toy_kind}_preset").set_value(preset).run()
            app.radio(key=f"pg_{toy_kind}_J").set_value(J).run()
            if rule:
                app.radio(key="pg_rule").set_value(rule).run()
            assert not app.exception, (toy_kind, preset, J, rule)
            said = app.info[0].value
            numbers = quoted(said)
            lambdas = set()  # the EM figure's title draws each iteration's lambda at 2 decimals
            if toy_kind == "em":
                lambdas = {f"{x:.2f}" for x in lambda_schedule(app.slider(key="pg_em_T").value, app.slider(key="pg_em_lambda").value)}
            allowed = page_numbers(app) | lambdas | {f"{1 / J:.{TABLE}f}"}
            assert numbers and all(n in allowed for n in numbers), (toy_kind, preset, J, rule, said)
            checked += 1
    assert checked == 3 * 2 * 2 + 3 * 2


# ---------- the page in Chinese and Japanese ----------


def opened(monkeypatch, lang: str, **params) -> AppTest:
    monkeypatch.setenv("CAPSVIZ_CHECKPOINTS", os.path.abspath(Path(__file__).resolve().parents[1] / "checkpoints"))
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"lang": lang, **params})
    at.run()
    at.switch_page("pages/playground.py").run()
    assert not at.exception, at.exception
    return at


def page_words(at) -> list[str]:
    """Every word the page shows: its text, boxes, widgets (labels, help, options as shown), the
    tables' column titles, help and text cells, the download buttons and captions of its pictures."""
    out = [e.value for kind in ("title", "markdown", "caption", "info", "warning", "error") for e in getattr(at, kind)]
    for kind in ("radio", "selectbox", "slider", "toggle", "button"):
        for w in getattr(at, kind):
            out += [w.label, w.help or ""] + [str(o) for o in getattr(w, "options", [])]
    for frame in at.dataframe:
        out += [" ".join([c.get("label") or "", c.get("help") or ""]) for c in json.loads(frame.proto.columns).values()]
        out += [x for col in frame.value.columns for x in frame.value[col] if isinstance(x, str)]
    out += [e.proto.label for e in at.get("download_button")]
    out += [c for e in at.get("image") for c in e.captions]
    return out


VIEWS = [("dynamic", "dynamic", 2), ("dynamic", "dynamic", 3), ("dynamic", "self-attention", 3), ("em", None, 2), ("em", None, 3)]


def walk_views(at):
    """Each toy, routing and number of upper capsules in turn (the outliers presets): the boxed
    sentence, the intro and the suggestion under the tables, and every word the page shows."""
    for toy, rule, J in VIEWS:
        if at.radio(key="pg_toy").value != toy:
            at.radio(key="pg_toy").set_value(toy).run()
        at.selectbox(key=f"pg_{toy}_preset").set_value("outliers").run()
        at.radio(key=f"pg_{toy}_J").set_value(J).run()
        if rule:
            at.radio(key="pg_rule").set_value(rule).run()
        assert not at.exception, (toy, rule, J, at.exception)
        said = [at.info[0].value, *(m.value for m in at.markdown if "**" in m.value), *(c.value for c in at.caption)]
        yield (toy, rule, J), said, page_words(at)


@pytest.mark.parametrize("lang", ["zh-Hans", "ja"])
def test_the_page_in_chinese_and_japanese_leaves_no_english_and_quotes_the_same_numbers(monkeypatch, lang):
    english = list(walk_views(opened(monkeypatch, "en")))
    there = list(walk_views(opened(monkeypatch, lang)))
    for (view, en_said, _), (same, said, words) in zip(english, there, strict=True):
        assert view == same
        left = english_left("\n".join(words))
        assert not left, (lang, view, left)
        assert said[0] != en_said[0] and re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", said[0])
        # the same numbers, each as often, in the order the language puts them
        assert sorted(NUMBER.findall(" ".join(said))) == sorted(NUMBER.findall(" ".join(en_said))), (lang, view)
        assert quoted(said[0]), view


def test_a_link_asking_for_a_preset_the_page_lacks_is_said_in_the_readers_language(monkeypatch):
    at = opened(monkeypatch, "ja", preset="magic")
    with i18n.speaking("ja"):
        want = chosen("magic", list(DYNAMIC_PRESETS), "agreeing cluster", i18n.t("preset"), lambda p: i18n.t(PRESET_NAMES[p])).note
        assert i18n.t("agreeing cluster") in want and "agreeing cluster" not in want
    assert want.startswith("リンクは") and "「magic」" in want
    notes = [i.value for i in at.info if "magic" in i.value]
    assert notes and notes[0].replace("\\", "") == want
    assert english_left(want.replace("magic", "")) == []
    assert at.selectbox(key="pg_dynamic_preset").value == "agreeing cluster"
