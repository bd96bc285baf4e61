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
