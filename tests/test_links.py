"""A link's numbers brought within what a page shows, with a note saying so (capsviz.analysis.links);
a link's named choices found in any language, and written back by their stable keys."""

import re

import pytest
from test_app import app, link_notes, router_mode  # noqa: F401 - fixtures: the app on tiny checkpoints, st.navigation in charge
from test_i18n import english_left

from capsviz.analysis.lab import LAB_ROUTINGS
from capsviz.analysis.links import chosen, linked, linked_numbers, linked_offsets, named, several, unread
from capsviz.i18n import speaking, t


@pytest.mark.parametrize("raw", ["0", "5", "9", " 7 "])
def test_a_value_in_range_is_shown_as_it_is_without_a_note(raw):
    got = linked(raw, 0, 9, 3, "test image")
    assert got.value == int(raw) and got.note is None


@pytest.mark.parametrize(
    ("raw", "shown", "bound"), [("10", 9, "the largest is 9"), ("99999999", 9, "the largest is 9"), ("-5", 0, "the smallest is 0")]
)
def test_a_value_out_of_range_is_brought_to_the_nearest_end_and_said(raw, shown, bound):
    got = linked(raw, 0, 9, 3, "test image")
    assert got.value == shown
    assert f"asks for test image {int(raw):,}" in got.note and bound in got.note and got.note.endswith(f"shows test image {shown}.")


@pytest.mark.parametrize("raw", ["abc", "", "nan", "inf", "1e400"])
def test_no_number_gives_the_default_and_says_so(raw):
    got = linked(raw, 1, 10, 3, "routing iterations")
    assert got.value == 3 and isinstance(got.value, int)
    assert f"“{raw}”" in got.note and "which is not a number" in got.note and got.note.endswith("shows routing iterations 3.")


@pytest.mark.parametrize(("raw", "shown"), [("2.5", 2), ("-0.5", 1), ("99.5", 10)])
def test_a_fraction_for_a_whole_number_gives_its_whole_part_as_streamlit_reads_it(raw, shown):
    got = linked(raw, 1, 10, 3, "routing iterations")
    assert (
        got.value == shown and f"routing iterations {float(raw):g}" in got.note and got.note.endswith(f"shows routing iterations {shown}.")
    )
    assert ("not a whole number" in got.note) == (raw == "2.5")


def test_numbers_that_need_not_be_whole():
    assert linked("0.35", -0.6, 0.6, 0.0, "shear", whole=False) == (0.35, None)
    got = linked("2", -0.6, 0.6, 0.0, "shear", whole=False)
    assert got.value == 0.6 and "the largest is 0.6" in got.note
    assert "not a number" in linked("x", -0.6, 0.6, 0.0, "shear", whole=False).note


def test_offsets_in_range_on_the_steps_say_nothing_and_missing_ones_are_zero():
    got = linked_offsets("0.25,-0.05,0", 16, 0.25, 0.05)
    assert got.value == (0.25, -0.05, 0.0) + (0.0,) * 13 and got.note is None
    assert linked_offsets("", 16, 0.25, 0.05) == ((0.0,) * 16, None)


def test_offsets_out_of_range_off_the_steps_malformed_or_too_many_are_each_said():
    got = linked_offsets("0.9,0.03,x," + ",".join(["0"] * 15), 16, 0.25, 0.05)
    assert got.value[:3] == (0.25, 0.05, 0.0) and len(got.value) == 16
    note = got.note
    assert "d0 0.9, but here the largest is 0.25" in note
    assert "d1 0.03; the sliders move in steps of 0.05, so this page shows d1 0.05" in note
    assert "d2 “x”, which is not a number" in note
    assert "The link gives 18 offsets; a capsule has 16 dimensions, so the last 2 are left out." in note


def test_a_choice_the_page_offers_is_kept_and_any_other_is_said():
    assert chosen("0.1", [0.05, 0.1, 0.2], 0.1, "epsilon") == (0.1, None)
    assert chosen("3", range(1, 6), 3, "routing iterations") == (3, None)
    got = chosen("0.7", [0.05, 0.1, 0.2], 0.1, "epsilon")
    assert got.value == 0.1
    assert got.note == "The link asks for epsilon “0.7”, which this page does not offer (0.05, 0.1, 0.2); this page shows “0.1”."


def test_numbers_of_a_pair_are_each_brought_within_their_range_or_all_replaced_when_the_count_is_wrong():
    parts = [(0, 99, "first digit"), (0, 99, "second digit"), (-4, 4, "dy 1")]
    assert linked_numbers("3,7,-2", parts, (0, 1, 0)) == ((3, 7, -2), None)
    got = linked_numbers("300,x,9", parts, (0, 1, 0))
    assert got.value == (99, 1, 4)
    assert "first digit 300, but here the largest is 99" in got.note and "second digit “x”" in got.note and "dy 1 9" in got.note
    short = linked_numbers("3,7", parts, (0, 1, 0))
    assert (
        short.value == (0, 1, 0)
        and "“3,7”, which is not 3 numbers (first digit, second digit, dy 1); this page shows 0, 1, 0." in short.note
    )


def test_several_choices_keep_those_offered_once_each_and_name_the_others():
    offered = ["dynamic", "uniform", "random"]
    assert several(["uniform", "dynamic"], offered, offered, "routings") == (("uniform", "dynamic"), None)
    assert several(["uniform", "uniform"], offered, offered, "routings") == (("uniform",), None)
    got = several(["uniform", "magic", "magic", "x"], offered, ["dynamic"], "routings")
    assert got.value == ("uniform",)
    assert got.note == (
        "The link asks for routings “magic”, “x”, which this page does not offer (“dynamic”, “uniform”, “random”); "
        "this page shows routings “uniform”."
    )
    none = several(["magic"], offered, ["dynamic", "random"], "routings")  # none offered: the page's own default
    assert none.value == ("dynamic", "random") and none.note.endswith("shows routings “dynamic”, “random”.")
    assert several(["a"], [], [], "models").note.endswith("shows models none.")


def test_a_value_the_page_cannot_read_is_quoted_with_what_is_shown():
    assert unread(" 1_2_x ", "points", "the preset's points") == (
        "The link asks for points “1_2_x”, which this page cannot read; this page shows the preset's points."
    )


NUMBERS = re.compile(r"\d+(?:\.\d+)?")


def notes() -> list[str]:
    """One note of each kind, made in the language of the run (`what` as a page gives it: translated)."""
    iterations, image = t("routing iterations"), t("test image")
    return [
        linked("x", 1, 10, 3, iterations).note,
        linked("12", 1, 10, 3, iterations).note,
        linked("-5", 0, 9, 3, image).note,
        linked("2.5", 1, 10, 3, iterations).note,
        linked_offsets("0.9,0.03,x," + ",".join(["0"] * 15), 16, 0.25, 0.05).note,
        chosen("0.7", [0.05, 0.1, 0.2], 0.1, t("preset")).note,
        linked_numbers("3,7,9", [(0, 99, t("test image")), (0, 99, t("test image"))], (0, 1)).note,
        several(["4", "5"], ["1", "2", "3"], ["1"], t("preset")).note,
        several(["4"], [], [], t("preset")).note,
        unread("1_2_x", t("points"), t("the preset's points")),
    ]


@pytest.mark.parametrize("lang", ["zh-Hans", "ja"])
def test_every_note_is_said_in_the_readers_language_with_the_same_numbers(lang):
    english = notes()
    with speaking(lang):
        there = notes()
    for en, note in zip(english, there, strict=True):
        assert note != en and re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", note), note
        assert english_left(note) == [], (note, english_left(note))
        assert sorted(NUMBERS.findall(note)) == sorted(NUMBERS.findall(en)), (note, en)


def test_a_choice_is_named_by_its_key_or_its_words_in_any_language():
    words = LAB_ROUTINGS.get
    assert named(" uniform ", list(LAB_ROUTINGS), words) == "uniform"
    for lang in ("en", "zh-Hans", "ja"):
        with speaking(lang):
            said = words("self-attention")
        with speaking("ja" if lang != "ja" else "en"):  # read in another language than it was written in
            assert named(said, list(LAB_ROUTINGS), words) == "self-attention", said
    assert named("magic", list(LAB_ROUTINGS), words) is None


# English links as people share them: an old address's English words, or the stable keys the pages write
ENGLISH = {
    "lab": ({"lab_routings": ["uniform couplings (no routing)", "self-attention"]}, ["uniform", "self-attention"]),
    "robustness": ({"tab": "Adversarial attacks"}, "Adversarial attacks"),
}


@pytest.mark.parametrize("lang", ["zh-Hans", "ja"])
@pytest.mark.parametrize("page", list(ENGLISH))
def test_an_english_link_lands_on_the_same_choice_in_chinese_and_japanese(app, page, lang):  # noqa: F811 - the fixture
    params, key = ENGLISH[page]
    app.query_params.update({"lang": lang, "model": "tiny-capsnet.safetensors", **params})
    app.switch_page(f"pages/{page}.py").run()
    assert not app.exception, app.exception
    assert not link_notes(app) and not [i for i in app.info if "link_off" in str(i.proto)], [i.value for i in app.info]
    param = next(iter(params))
    if page == "lab":
        assert app.multiselect(key="lab_routings").value == key
        assert app.query_params[param] == key  # written by key: the same address in every language
    else:
        with speaking(lang):
            assert app.session_state["tab"] == t(key)  # the tab open, named in the reader's language
        assert app.query_params[param] == key
    app.run()  # and it stays
    assert not app.exception, app.exception
    assert app.query_params[param] == key


@pytest.mark.parametrize("lang", ["zh-Hans", "ja"])
def test_a_chinese_link_lands_on_the_same_choice_in_japanese_and_an_unknown_name_is_said(app, lang):  # noqa: F811
    with speaking("zh-Hans"):
        chinese = LAB_ROUTINGS["random"]
    app.query_params.update({"lang": lang, "model": "tiny-capsnet.safetensors", "lab_routings": [chinese, "magic"]})
    app.switch_page("pages/lab.py").run()
    assert not app.exception, app.exception
    assert app.multiselect(key="lab_routings").value == ["random"]
    assert app.query_params["lab_routings"] == "random"
    (note,) = [i.value.replace("\\", "") for i in app.info if "magic" in i.value]
    with speaking(lang):
        assert t("routings") in note and LAB_ROUTINGS["random"] in note, note  # what it asked for, and what it shows, in their words
    assert english_left(note.replace("magic", "")) == [], note
