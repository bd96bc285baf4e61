"""Chinese and Japanese keep a space between their characters and a value that starts or ends with
Latin letters or digits (a count "3 个模型", a model, routing or dataset name, a number), as the
catalogs write "在 {n} 张": "在3 个模型上" reads badly. Checked on the catalogs' own text, for the
placeholders that hold such values in every message they appear in, and on real sentences."""

from __future__ import annotations

import re

import pytest
from babel.messages.pofile import read_po

from capsviz.i18n import FOLDERS, catalog_path, speaking, t

# Placeholders whose value starts and ends with Latin letters or digits wherever they appear: counts
# ("{k} of {n} models"), numbers and times, model names (CapsNet), the robustness page's x axis
# (epsilon) and its measures (FGSM). A routing's name is most often Chinese or Japanese: it is not here.
LATIN = {
    "n", "models", "near_models", "away_models", "better", "worse", "measure", "x_name", "a_time", "b_time",
    "images", "who",
}  # fmt: skip
CJK = r"[\u3040-\u30ff\u3400-\u9fff]"
GLUED = re.compile(rf"(?<={CJK})\{{+(\w+)[^}}]*\}}+|\{{+(\w+)[^}}]*\}}+(?={CJK})")


def glued(text: str) -> list[str]:
    """The placeholders of `LATIN` in `text` touching a Chinese or Japanese character."""
    return [m.group(1) or m.group(2) for m in GLUED.finditer(text) if (m.group(1) or m.group(2)) in LATIN]


def test_the_check_finds_a_glued_placeholder():
    assert glued("动态路由在{near_models}上") == ["near_models"]
    assert glued("在 {n} 张测试图像上") == glued("{capsule}的长度") == []


@pytest.mark.parametrize("lang", list(FOLDERS))
def test_no_latin_valued_placeholder_touches_a_character(lang):
    with catalog_path(lang).open("rb") as f:
        catalog = read_po(f, locale=FOLDERS[lang])
    found = []
    for m in catalog:
        for text in m.string if isinstance(m.string, tuple) else (m.string,):
            if text and glued(text):
                found.append(f"{glued(text)}: {text[:80]}")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("lang", list(FOLDERS))
def test_a_count_of_models_stands_apart_in_the_labs_sentence(lang):
    """The routing lab's couplings sentence with its real counts: no digit or Latin letter beside a character."""
    with speaking(lang):
        near, away = t("{k} of {n} models", k=5, n=6), t("{k} of {n} models", k=1, n=6)
        said = t(
            "**Couplings.** By the near-uniform rule ({rule}), dynamic routing leaves the couplings near uniform on "
            "{near_models} (they keep {kept} of the uniform split's entropy); it moves them away from uniform on "
            "{away_models} ({quoted}).",
            rule="x",
            near_models=near,
            kept="90%",
            away_models=away,
            quoted="capsnet-mnist",
        )
    assert re.search(CJK, said) and near in said and away in said, said  # translated, both counts in it
    for count in (near, away):
        k = said.index(count)
        # the count's digits stand apart; its own word at an end ("5 个") joins the text
        assert re.match(CJK, count[0]) or not re.match(CJK, said[k - 1]), said
        assert re.match(CJK, count[-1]) or not re.match(CJK, said[k + len(count)]), said


@pytest.mark.parametrize("lang", list(FOLDERS))
def test_a_chinese_or_japanese_value_joins_the_text_a_latin_one_stands_apart(lang):
    """The robustness page's x axis is 'epsilon' for attacks and a translated word for the affine
    sweep: the catalog's spaces beside {x_name} stay for the first and go for the second."""
    message = (
        "Counting the {N} {x_name} values one by one, {capsule} holds up better than {other} beyond chance at {better}, "
        "worse at {worse}, and {close} of the {N} are within chance (two standard errors on {n} test images)."
    )
    v = dict(N=9, capsule="capsnet-mnist", other="cnn-small-mnist", better="1.5", worse="2", close=7, n=500)
    with speaking(lang):
        word = t("strength")
        latin, own = t(message, x_name="epsilon", **v), t(message, x_name=word, **v)
    assert re.match(CJK, word) and re.search(rf"{CJK} epsilon {CJK}", latin), latin
    k = own.index(word)
    assert re.match(CJK, own[k - 1]) and re.match(CJK, own[k + len(word)]), own
