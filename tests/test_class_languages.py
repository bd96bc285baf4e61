"""The class features, the explorer and the playground in Chinese and Japanese (issue 49): the pages
open in each language, and a question is one question for a class whose students read different
languages: its words are said in each reader's own, its answers counted by choice, never by words."""

from __future__ import annotations

import pytest
import test_app
from streamlit.testing.v1 import AppTest

import pages.classroom
from capsviz import jobs, store
from capsviz.analysis import questions
from capsviz.analysis.playground import DYNAMIC_PRESETS, dynamic_toy
from capsviz.i18n import speaking, t

APP = test_app.APP
app, router_mode = test_app.app, test_app.router_mode


def cjk(text: str) -> bool:
    return any("\u3040" <= c <= "\u30ff" or "\u4e00" <= c <= "\u9fff" for c in text)


def words(at) -> str:
    return " ".join(x.value for x in [*at.title, *at.markdown, *at.caption, *at.info, *at.success, *at.subheader])


PAGES = [("explorer", "DigitCaps explorer"), ("playground", "Routing playgrounds")]


@pytest.mark.parametrize("lang", ["ja", "zh-Hans"])
@pytest.mark.parametrize("page, title", PAGES, ids=[p[0] for p in PAGES])
def test_the_explorer_and_playground_open_in_the_readers_language(app, page, title, lang):
    app.query_params["lang"] = lang
    app.switch_page(f"pages/{page}.py").run()  # the teacher (on the server's machine): question, answer and figure
    assert not app.exception, app.exception
    with speaking(lang):
        want = t(title)
        predict = t("**Predict first.** {question}", question="")
    assert want != title and app.title[0].value == want
    assert any(m.value.startswith(predict.strip()) for m in app.markdown)  # the question, in the reader's language
    said = words(app)
    assert cjk(said)
    if page == "explorer":
        with speaking(lang):
            assert t("Perturb one dimension at a time") in [h.value for h in app.subheader]
            assert t("Capsule to decode") in [s.label for s in app.selectbox]
    else:
        with speaking(lang):
            assert app.radio(key="pg_toy").label == t("Playground")
            assert t("Routing by agreement (dynamic routing)") in app.radio(key="pg_toy").options
            numbers = t(
                "**The numbers at iteration {iteration}** (hover a column title for its meaning; b and c are what this iteration used, "
                "u_hat.v is what it adds to b)",
                iteration=3,
            )
            assert numbers in [m.value for m in app.markdown]


def test_a_question_answered_in_japanese_is_the_same_question_in_chinese_with_the_same_counts(app, monkeypatch):
    monkeypatch.setattr(pages.classroom, "address", lambda: "192.0.2.7")  # students, on other machines
    ann = AppTest.from_file(APP, default_timeout=60)
    ann.query_params["lang"] = "ja"
    ann.switch_page("pages/playground.py").run()
    assert not ann.exception, ann.exception
    q = ann.session_state["pg_question"]
    radio = next(r for r in ann.radio if r.key and r.key.startswith("answer_"))
    with speaking("ja"):
        assert radio.options == [q.label(k) for k in q.keys]  # the choices in Japanese
        assert any(str(q.text) in m.value for m in ann.markdown) and cjk(str(q.text))
    pick = q.keys[0]
    radio.set_value(pick).run()
    next(b for b in ann.button if b.key == f"commit_{q.qid}").click().run()
    assert not ann.exception, ann.exception

    kept = store.store(app.folder).split(q.qid)
    assert kept.answered == 1 and kept.counts[pick] == 1
    assert not cjk(kept.text) and not any(cjk(x) for x in kept.labels)  # stored in no one language
    store.store(app.folder).reveal(q.qid)

    bob = AppTest.from_file(APP, default_timeout=60)
    bob.query_params["lang"] = "zh-Hans"
    bob.switch_page("pages/playground.py").run()
    assert not bob.exception, bob.exception
    assert bob.session_state["pg_question"].qid == q.qid  # the same question
    with speaking("zh-Hans"):
        text, label = str(q.text), q.label(pick)
        assert any(text in m.value for m in bob.markdown) and cjk(text)
    next(b for b in bob.button if b.key == f"skip_{q.qid}").click().run()
    assert not bob.exception, bob.exception
    with speaking("zh-Hans"):
        split = t("How the class answered: {split}", split="").strip()
        counted = t("{label}: {count}", label=label, count=1)
    shown = [c.value for c in bob.caption if c.value.startswith(split)]
    assert shown and counted in shown[0] and cjk(shown[0])  # ann's choice, in Chinese, counted once
    assert store.store(app.folder).split(q.qid).counts == kept.counts  # the split is the same for everyone

    # the teacher reads the question and its split in English, counted by the same keys
    monkeypatch.setattr(pages.classroom, "address", lambda: "local")
    teacher = AppTest.from_file(APP, default_timeout=60)
    teacher.switch_page("pages/teacher.py").run()
    assert not teacher.exception, teacher.exception
    with speaking("en"):
        assert any(m.value.startswith(str(q.text)[:20]) for m in teacher.markdown)
        table = teacher.table[-1].value
        counts = dict(zip(table.iloc[:, 0], table.iloc[:, 1], strict=True))
        assert counts[q.label(pick) + (" ✓" if pick == q.answer else "")] == 1


def test_question_words_are_kept_as_messages_and_said_in_each_language(tmp_path):
    toy = dynamic_toy(DYNAMIC_PRESETS[next(iter(DYNAMIC_PRESETS))][:, :2], 3)
    q = questions.routed_split(toy, 0, ("dynamic", "x", 2, 3))
    text, labels = q.kept()
    said = {}
    for lang in ("en", "zh-Hans", "ja"):
        with speaking(lang):
            said[lang] = (questions.said(text), [questions.said(x) for x in labels], str(q.why))
    assert said["en"][0] == "After 3 iterations of routing by agreement, where will lower capsule 1 send its prediction?"
    assert cjk(said["zh-Hans"][0]) and cjk(said["ja"][0]) and said["zh-Hans"][0] != said["ja"][0]
    for lang in said:  # the numbers the reason quotes are the same in every language
        assert all(cjk(x) == (lang != "en") for x in said[lang][1])
    assert questions.Words.load(questions.Words.as_is("T-shirt/top").dump()).message == "T-shirt/top"
    assert questions.said("an old row's plain text {x}") == "an old row's plain text {x}"  # a row from before: as it was


def test_the_progress_line_and_queue_refusal_in_each_language(tmp_path):
    snap = jobs.Snapshot(
        state="running",
        run=None,
        out=tmp_path / "m.safetensors",
        owner="a",
        position=0,
        step=4,
        total=10,
        images_per_s=128.0,
        eta_s=270.0,
        epoch_s=360.0,
    )
    with speaking("en"):
        english = jobs.progress_line(snap)
    assert english == "m: step 4/10 · 128 images/s · 6.0 min per epoch · about 4.5 min left, plus the test after each epoch"
    for lang in ("zh-Hans", "ja"):
        with speaking(lang):
            line = jobs.progress_line(snap)
        assert cjk(line) and all(x in line for x in ("4/10", "128", "6.0", "4.5"))
