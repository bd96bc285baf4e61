"""The catalog: every message the code shows is in Chinese and Japanese with the English's
placeholders, the language is chosen per session (link, browser, switch), and one session's
choice never changes another's."""

from __future__ import annotations

import re
import threading

import pytest
from babel.messages.pofile import read_po, write_po
from streamlit.testing.v1 import AppTest
from test_app import (
    APP,
    app,  # noqa: F401 - the fixture: an AppTest of app.py over the tiny models
    router_mode,  # noqa: F401 - an autouse fixture: st.navigation in charge, as served
)

from capsviz import i18n, translations
from capsviz.i18n import FOLDERS, LANGUAGES, best, normalise, speaking, t, tn


def test_every_message_of_the_code_is_translated_with_its_placeholders():
    found = translations.problems()
    assert not found, "\n".join(found[:40]) + "\n(run `python -m capsviz translations` and fill the empty msgstr)"


def test_the_check_names_a_translation_whose_placeholders_differ(tmp_path, monkeypatch):
    (tmp_path / "capsviz").mkdir()
    (tmp_path / "capsviz" / "m.py").write_text('from capsviz.i18n import t\nt("{n} images of {digit}", n=1, digit=2)\n')
    monkeypatch.setattr(translations, "catalog_path", lambda lang: tmp_path / lang / "capsviz.po")
    assert all("no catalog" in p for p in translations.problems(tmp_path))
    for lang in FOLDERS:
        (tmp_path / lang).mkdir()
        (tmp_path / lang / "capsviz.po").write_bytes(b"")
    for lang, folder in FOLDERS.items():
        path = tmp_path / lang / "capsviz.po"
        catalog = translations.template(tmp_path)
        catalog.locale = folder
        for m in catalog:
            if m.id:
                m.string = "{n} 张 {digit}" if lang == "zh-Hans" else "{n} 枚の {dgt}"
        with path.open("wb") as f:
            write_po(f, catalog)
    found = translations.problems(tmp_path)
    assert len(found) == 1 and found[0].startswith("ja: placeholders ['dgt', 'n'] instead of ['digit', 'n']"), found


def test_update_keeps_translations_and_adds_new_messages(tmp_path, monkeypatch):
    (tmp_path / "capsviz").mkdir()
    source = tmp_path / "capsviz" / "m.py"
    source.write_text('from capsviz.i18n import t\nt("Glossary")\n')
    monkeypatch.setattr(translations, "catalog_path", lambda lang: tmp_path / lang / "capsviz.po")
    assert translations.update(tmp_path) == {"zh-Hans": 1, "ja": 1}
    path = tmp_path / "ja" / "capsviz.po"
    catalog = read_po(path.open("rb"), locale="ja")
    catalog["Glossary"].string = "用語集"
    write_po(path.open("wb"), catalog)
    source.write_text('from capsviz.i18n import t, tn\nt("Glossary")\ntn("{n} image", "{n} images", 2)\n')
    assert translations.update(tmp_path) == {"zh-Hans": 2, "ja": 1}
    assert read_po(path.open("rb"), locale="ja")["Glossary"].string == "用語集"


@pytest.mark.parametrize(
    "tag, want",
    [
        ("zh-CN", "zh-Hans"),
        ("zh_Hans", "zh-Hans"),
        ("zh-TW", "zh-Hans"),
        ("ja-JP", "ja"),
        ("EN-gb", "en"),
        ("fr", None),
        ("", None),
        (None, None),
    ],
)
def test_language_tags_as_browsers_and_links_write_them(tag, want):
    assert normalise(tag) == want


@pytest.mark.parametrize(
    "env, want",
    [
        ({"LANG": "ja_JP.UTF-8"}, "ja"),
        ({"LANGUAGE": "fr:zh_CN", "LANG": "en_US.UTF-8"}, "zh-Hans"),  # gettext's order: LANGUAGE's list first
        ({"LC_ALL": "C.UTF-8", "LANG": "ja_JP.UTF-8"}, "en"),  # the first one set decides, as gettext reads it
        ({}, "en"),
    ],
)
def test_a_command_line_speaks_the_language_of_its_shell(env, want, monkeypatch):
    for name in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert i18n.environment() == want


def test_the_first_spoken_language_of_the_browser_wins():
    assert best(["fr-FR", "de", "ja", "zh"]) == "ja"
    assert best(["fr-FR"]) == "en"


def test_words_follow_the_language_of_the_run():
    assert t("Glossary") == "Glossary"
    with speaking("zh-CN"):
        assert t("Glossary") == "术语表"
        with speaking("ja"):
            assert t("Glossary") == "用語集"
        assert i18n.language() == "zh-Hans"
    assert i18n.language() == "en"
    assert tn("{n} image", "{n} images", 1) == "1 image" and tn("{n} image", "{n} images", 2) == "2 images"


def test_two_threads_speak_their_own_languages():
    seen = {}

    def run(lang):
        i18n.set_language(lang)
        threading.Event().wait(0.05)
        seen[lang] = t("Glossary")

    threads = [threading.Thread(target=run, args=(lang,)) for lang in LANGUAGES]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert seen == {"en": "Glossary", "zh-Hans": "术语表", "ja": "用語集"}


def test_a_link_sets_the_language_and_another_session_keeps_its_own(app):  # noqa: F811

    app.query_params["lang"] = "ja"
    app.switch_page("pages/glossary.py").run()
    assert not app.exception
    assert app.session_state["lang"] == "ja"
    switch = app.sidebar.selectbox(key="lang")
    assert switch.value == "ja" and switch.help == "capsviz が表示するすべての言葉の言語です。ほかの学生の選択はそれぞれのままです。"
    assert app.query_params["lang"] == "ja"

    other = AppTest.from_file(APP, default_timeout=60)
    other.switch_page("pages/glossary.py").run()
    assert other.session_state["lang"] == "en"
    assert other.sidebar.selectbox(key="lang").help.startswith("The language of every word")

    switch.set_value("zh-Hans").run()
    assert app.session_state["lang"] == "zh-Hans" and app.query_params["lang"] == "zh-Hans"
    other.run()
    assert other.session_state["lang"] == "en"


def test_a_link_asking_for_a_language_capsviz_lacks_says_so(app):  # noqa: F811
    app.query_params["lang"] = "fr"
    app.switch_page("pages/glossary.py").run()
    assert not app.exception
    assert app.session_state["lang"] == "en"
    assert any("'fr'" in i.value and "English" in i.value for i in app.sidebar.info)


def test_every_character_of_every_catalog_has_a_glyph_in_its_export_font():
    from fontTools.ttLib import TTFont

    from capsviz.viz.teach import export_font

    for lang in FOLDERS:
        path = export_font(lang)
        assert path is not None, f"no export font for {lang}: run `python -m capsviz translations --fonts`"
        covered = set(TTFont(path).getBestCmap())
        lacking = sorted({c for c in translations.characters(lang) if ord(c) not in covered})
        assert not lacking, f"{lang}: no glyph for {''.join(lacking)!r} (run `python -m capsviz translations --fonts`)"


def test_figures_draw_chinese_and_japanese_in_real_glyphs():
    """Each character drawn is its own shape, not the one empty box of a font without it."""
    import numpy as np
    from PIL import Image, ImageDraw

    from capsviz.viz.teach import font, font_note

    def drawn(text):
        im = Image.new("L", (60, 40))
        ImageDraw.Draw(im).text((4, 4), text, fill=255, font=font(24))
        return np.asarray(im)

    for lang, text in (("zh-Hans", "术语"), ("ja", "用語")):
        with speaking(lang):
            assert font_note(lang) is None
            a, b = drawn(text[0]), drawn(text[1])
            assert a.any() and b.any() and not np.array_equal(a, b)
    with speaking("en"):
        a, b = drawn("术"), drawn("语")  # Pillow's own font has no CJK: the same empty box twice
        assert np.array_equal(a, b)


# What may stay English on a Chinese or Japanese page: the papers' symbols and layer names, dataset
# and model family names, file formats and units (TERMS.md's conventions), the names of the papers'
# authors and where they published, and whatever stands in
# brackets after a term's first use (耦合系数（coupling coefficient）) or in `code`. A word with an
# underscore is a symbol of the papers (u_hat_j, a_ji, beta_u, sum_i), and so is a Greek letter written
# out (epsilon, delta) or a function of the formulas (log, max); "Language" is the language switch's
# label, which names itself in each of the three languages so a lost reader finds it; hardware and its
# units are named as their makers name them (Intel AMX, NVIDIA CUDA, GiB).
KEPT_ENGLISH = set(
    "Adam affnist affNIST al AMD AMX arXiv BatchNorm BIM CapsNet capsviz Chiaberge ClassCaps CNN Conv1 "
    "ConvCaps CPU CSV CUDA CVPR delta DigitCaps Efficient EM English epsilon et Fashion FGSM GiB GIF GPU "
    "Gu Hinton IDX Intel JPEG KiB Kim lambda Language Lee log max Mazzia MiB mnist MNIST MPS mu "
    "multimnist MultiMNIST NVIDIA ONNX Paik PNG PrimaryCaps QR ReLU Sabour safetensors Salvetti sigma "
    "smallNORB softmax sqrt squash squashing Tresp".split()
)
_BRACKETED = re.compile(
    r"（[^）]*）|`[^`]*`|\([^)]*[a-z][^)]*\)|https?://\S+|\S+\.safetensors|[\w-]*\d[\w-]*|[a-z0-9]+(?:-[a-z0-9]+)+"
    r"|[A-Za-z]+(?:_[A-Za-z0-9]+)+"
)
_WORD = re.compile(r"[A-Za-z][A-Za-z_']{2,}")


def english_left(text: str) -> list[str]:
    """The English words of a Chinese or Japanese text that are not allowed to stay English, read
    as Markdown shows it: a link's label without its address, an escaped character as itself."""
    text = re.sub(r"\\(.)", r"\1", re.sub(r"\]\([^)\s]*\)", "]", text))
    return [w for w in _WORD.findall(_BRACKETED.sub(" ", text)) if w not in KEPT_ENGLISH and w.strip("'") not in KEPT_ENGLISH]


def test_the_english_left_check_keeps_symbols_and_bracketed_terms_and_finds_the_rest():
    assert english_left("耦合系数（coupling coefficient）c_ij 在 DigitCaps 上，见 `python -m capsviz data`。") == []
    assert english_left("模型 capsnet-small-mnist 的 3 次迭代") == []
    assert english_left("c_i = softmax(r_i)，a_ji 与 sum_k") == []
    assert english_left("device: CPU · 已找到 MNIST 数据") == ["device"]
    assert english_left("Loading model ...") == ["Loading", "model"]
    assert english_left("a_ji = sum_k u_hat_j|i . u_hat_j|k / sqrt(D)，beta_u 与 W_ij") == []
    assert english_left("sum of the predictions") == ["sum", "the", "predictions"]
    assert english_left("[u\\_hat\\_j\\|i（预测向量）](glossary?term=prediction%20vector&lang=zh-Hans)") == []  # as shown
    assert english_left("[the model](glossary?term=x)") == ["the", "model"]
