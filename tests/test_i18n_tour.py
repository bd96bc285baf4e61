"""The guided tour in Chinese and Japanese: every step of the CapsNet tour opens without an
exception in the reader's language, its titles translated, and a step's measured sentence quotes
the same numbers as in English."""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest
from test_app import (
    APP,
    router_mode,  # noqa: F401 - an autouse fixture: st.navigation in charge, as served
    tiny_checkpoints,
)

from capsviz.i18n import speaking, t

NUMBER = re.compile(r"\d+\.\d+")


@pytest.fixture
def app(synthetic_data, tmp_path, monkeypatch):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    tiny_checkpoints(folder)
    monkeypatch.setenv("CAPSVIZ_CHECKPOINTS", str(folder))
    return lambda: AppTest.from_file(APP, default_timeout=120)


def walk(app, lang: str) -> list[tuple[str, list[str]]]:
    """Each step's progress text and the numbers its boxed sentences quote, in `lang`."""
    at = app()
    at.query_params.update({"lang": lang, "model": "tiny-capsnet.safetensors"})
    at.switch_page("pages/tour.py").run()
    assert not at.exception, (lang, at.exception)
    with speaking(lang):
        assert at.title[0].value == t("A guided tour of a capsule network")
    seen = []
    for k in range(1, 20):
        assert not at.exception, (lang, k, at.exception)
        boxed = " ".join(b.value for b in [*at.info, *at.warning])
        seen.append((at.get("progress")[0].proto.text, sorted(NUMBER.findall(boxed))))
        if at.button(key="tour_next").disabled:
            break
        at.button(key="tour_next").click().run()
    return seen


@pytest.mark.parametrize("lang", ["zh-Hans", "ja"])
def test_the_tour_steps_through_in_the_readers_language_with_the_same_numbers(app, lang):
    english, there = walk(app, "en"), walk(app, lang)
    assert len(there) == len(english)
    with speaking(lang):
        title = t("A guided tour of a capsule network")
        assert t("The input") != "The input"
    assert any("\u3040" <= c <= "\u30ff" or "\u4e00" <= c <= "\u9fff" for c in title)
    for (en_text, en_numbers), (text, numbers) in zip(english, there, strict=True):
        assert text != en_text  # the step's title and "Step k of N" translated
        assert numbers == en_numbers, (text, numbers, en_numbers)
    assert any(numbers for _, numbers in english)  # some step quotes measured numbers


def _rows(trained: str) -> list:
    from capsviz.analysis.lab import Row

    def row(run_with, error, share):
        return Row("m", trained, run_with, error, 10_000, 0, 0, 1000, 0.9, share, 0.0)

    return [row(trained, 0.33, 0.26), row("uniform", 0.39, 0.1), row("random", 82.18, 0.1)]


@pytest.mark.parametrize("family", ["capsnet", "efficient", "matrix"])
def test_every_familys_tour_says_the_same_numbers_in_every_language(family):
    """Each family's tour, walked in English, Chinese and Japanese (the lab step with stored rows):
    every step's words are made without an error and quote the same numbers."""
    import numpy as np
    import torch
    from synthetic import synthetic_digits

    from capsviz.analysis.tour import tour_of, walk
    from capsviz.config import preset
    from capsviz.glossary import DIGIT_WORDS
    from capsviz.models import build_model

    torch.manual_seed(0)
    config = {
        "capsnet": preset("capsnet-small"),
        "efficient": preset("efficient-capsnet", conv_channels=(8, 16, 16, 32), primary_caps=4, decoder_hidden=(32, 64)),
        "matrix": preset("matrix-small", in_size=28, num_classes=10, A=8, B=4, C=4, D=4),
    }[family]
    model = build_model(config).eval()
    images, _ = synthetic_digits(4, seed=3)
    image = images[0].astype(np.float32) / 255.0
    rows = _rows("self-attention" if family == "efficient" else "dynamic")
    said = {}
    for lang in ("en", "zh-Hans", "ja"):
        with speaking(lang):
            trace = tour_of(model.config).follow(model, image)
            steps = walk(trace, [str(k) for k in range(10)], DIGIT_WORDS, "tiny", "3", t("the input"), rows, model.config)
            said[lang] = [(s.title, " ".join([*s.text, s.measured, s.caption])) for s in steps]
    for lang in ("zh-Hans", "ja"):
        assert len(said[lang]) == len(said["en"])
        for (en_title, en_words), (title, words) in zip(said["en"], said[lang], strict=True):
            assert title != en_title
            assert sorted(NUMBER.findall(words)) == sorted(NUMBER.findall(en_words)), (lang, title)
    for lang in said:  # "predictions u_hat_j|i (prediction)": a symbol's plain word is said once, by its label
        assert not [said_twice(words, lang) for _, words in said[lang] if said_twice(words, lang)], lang


def said_twice(words: str, lang: str) -> list[str]:
    """The glossary labels in `words` ("c_ij (coupling)") that follow their own plain word, in `lang`."""
    from capsviz import glossary

    found = []
    with speaking(lang):
        for term in glossary.TERMS.values():
            word, named = term.word_in(), term.named_in()
            if word and named != term.symbol_in():
                twice = re.escape(word) + r"(?:s|es)?\s*(?:（[^）]*）|\([^)]*\))?\s*" + re.escape(named)
                found += re.findall(twice, words, flags=re.IGNORECASE)
    return found
