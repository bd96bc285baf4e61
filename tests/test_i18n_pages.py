"""The routing, EM, MultiMNIST, robustness, train, zoo, lab and reproduction pages in Chinese and Japanese, and the rules'
sentences: each outcome of a rule is one catalog message, the same numbers quoted in every language."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest
from test_app import (
    APP,
    router_mode,  # noqa: F401 - an autouse fixture: st.navigation in charge, as served
    tiny_checkpoints,
)

from capsviz.analysis import rule_words, rules
from capsviz.i18n import speaking, t


@pytest.fixture
def app(synthetic_data, tmp_path, monkeypatch):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    tiny_checkpoints(folder)
    monkeypatch.setenv("CAPSVIZ_CHECKPOINTS", str(folder))
    return AppTest.from_file(APP, default_timeout=120)


PAGES = [
    ("routing", "tiny-capsnet.safetensors", "Dynamic routing, iteration by iteration"),
    ("em", "tiny-matrix.safetensors", "EM routing, iteration by iteration"),
    ("multimnist", "tiny-multimnist.safetensors", "MultiMNIST: two digits on top of each other"),
    ("robustness", "tiny-capsnet.safetensors", "Robustness: affine transforms and adversarial attacks"),
    ("train", None, "Train"),
    ("zoo", None, "capsviz: watch capsules route"),
    ("lab", "tiny-capsnet.safetensors", "Routing lab: does routing matter?"),
    ("reproduction", None, "Reproduction: our checkpoints beside the papers"),
]


@pytest.mark.parametrize("lang", ["ja", "zh-Hans"])
@pytest.mark.parametrize("page, model, title", PAGES, ids=[p[0] for p in PAGES])
def test_each_page_opens_in_the_readers_language(app, page, model, title, lang):
    app.query_params["lang"] = lang
    if model:
        app.query_params["model"] = model
    app.switch_page(f"pages/{page}.py").run()
    assert not app.exception, app.exception
    with speaking(lang):
        want = t(title)
    assert want != title  # the catalog has it
    assert app.title[0].value == want
    words = " ".join(m.value for m in [*app.markdown, *app.caption, *app.info])
    assert any("\u3040" <= c <= "\u30ff" or "\u4e00" <= c <= "\u9fff" for c in words)  # kana or han in the page's sentences


def test_a_rule_outcome_is_one_message_with_the_same_numbers_in_every_language():
    ratio, share, uniform = 0.991, 0.123, 0.1  # near uniform: evenness above 95%, share under 1.5 times uniform
    assert rules.near_uniform(ratio, share, uniform)
    said = {}
    for lang in ("en", "zh-Hans", "ja"):
        with speaking(lang):
            said[lang] = rule_words.uniform_words(ratio, share, uniform)
    assert said["en"] == (
        "near uniform: their evenness is 99.1% (100% = spread evenly over all 10 classes), more than 95%, and the predicted "
        "class gets 0.12 on average, less than 1.5 times the uniform 0.10"
    )
    assert said["zh-Hans"].startswith("接近均匀") and said["ja"].startswith("ほぼ一様")
    for text in said.values():
        assert all(number in text for number in ("99.1%", "95%", "0.12", "1.5", "0.10"))
    with speaking("ja"):  # the other side of the rule is another message
        assert rule_words.uniform_words(0.9, share, uniform).startswith("一様から離れている")


def test_the_trend_words_english_is_the_rules_own():
    """rule_words.trend_words writes, in English, exactly what rules.path_trend writes (the playground's words)."""
    for values in ([1, 1, 1], [1, 2, 3], [3, 2, 1], [1, 3, 1], [3, 1, 3], [0.5, 0.9, 0.55]):
        for bounded in (False, True):
            assert rule_words.trend_words(values, "{:.2f}", 2, bounded) == rules.path_trend(values, "{:.2f}", 2, bounded)
