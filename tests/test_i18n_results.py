"""The zoo, the routing lab and the reproduction page in Chinese and Japanese: each opens over the
shipped models (and the lab's stored rows) without an exception, leaves no English but the allowed
terms and what files hold (model and file names, machines, the records of how a model was measured),
and quotes the same numbers as in English. The lab's, the zoo's and the reproduction's sentences,
made from numbers on both sides of their rules, say the same numbers in every language too."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from streamlit.testing.v1 import AppTest
from test_app import (
    APP,
    router_mode,  # noqa: F401 - an autouse fixture: st.navigation in charge, as served
)
from test_i18n import english_left

from capsviz.analysis import lab, rules, stored
from capsviz.analysis.reproduction import Gap, tables
from capsviz.analysis.zoo import card, epochs_note, paper_words
from capsviz.checkpoint import list_checkpoints, total_training
from capsviz.config import preset
from capsviz.i18n import speaking, t
from capsviz.paths import shipped_checkpoints
from capsviz.registry import FAMILIES, vector_routings
from capsviz.schema import Metrics

# A number as the pages quote it: decimals, and counts with thousands separators
NUMBER = re.compile(r"\d+\.\d+|\d{1,3}(?:,\d{3})+")
SHIPPED = [(p, m) for p, m in list_checkpoints(shipped_checkpoints()) if not isinstance(m, str)]
LANGS = ("zh-Hans", "ja")


def from_files() -> list[str]:
    """What the pages show as the files hold it, longest first: model and file names, presets,
    datasets, machines and the records of how each model was measured."""
    found: set[str] = set()
    entries = [(p, m) for p, m in SHIPPED if lab.fits(m.config)]
    rows = lab.stored_rows(entries, vector_routings(), folders=[stored.shipped_folder()])
    found |= {r.hardware for r in rows.values()} | {s.hardware for s in lab.stored_studies([stored.shipped_folder()])}
    for path, meta in SHIPPED:
        found |= {path.name, path.stem, meta.metrics.how, meta.dataset, meta.image_dataset, meta.config.family}
        found |= {(meta.run or {}).get("model") or "", *total_training(meta)["hardware"]}
    return sorted((f for f in found if f), key=len, reverse=True)


def without_files(text: str, names: list[str]) -> str:
    for name in names:
        text = text.replace(name, " ")
    return text


def chart_words(spec: dict) -> list[str]:
    """A plotly chart's words: its title, axis titles and the names of its traces."""
    layout = spec.get("layout", {})
    said = [layout.get("title"), (layout.get("xaxis") or {}).get("title"), (layout.get("yaxis") or {}).get("title")]
    said += [(layout.get("legend") or {}).get("title")] + [d.get("name") for d in spec.get("data", [])]
    return [s.get("text", "") if isinstance(s, dict) else s for s in said if s]


def shown(page: str, lang: str, **params) -> tuple[list[str], list[str]]:
    """The page opened in `lang`: (its sentences, from which the numbers are read; every other word
    it shows: headings, labels, help, column headers, charts)."""
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params.update({"lang": lang, **params})
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, (page, lang, at.exception)
    m = at.main
    sentences = [e.value for kind in ("markdown", "caption", "info", "warning", "error") for e in getattr(m, kind)]
    sentences += [e.value for e in m.metric]
    words = [e.value for kind in ("title", "header", "subheader") for e in getattr(m, kind)]
    words += [e.label for e in m.expander] + [e.label for e in m.metric] + [b.label for b in m.button]
    for kind in ("slider", "select_slider", "multiselect"):
        words += [w.label for w in getattr(m, kind)] + [w.help or "" for w in getattr(m, kind)]
    for frame in m.dataframe:
        for column in json.loads(frame.proto.columns).values():
            words += [column.get("label", ""), column.get("help", "")]
    for chart in at.get("plotly_chart"):
        words += chart_words(json.loads(chart.proto.spec))
    return sentences, words


PAGES = [("zoo", "capsviz: watch capsules route"), ("lab", "Routing lab: does routing matter?"), ("reproduction", None)]


@pytest.mark.parametrize("page, title", PAGES, ids=[p for p, _ in PAGES])
def test_each_results_page_speaks_the_readers_language_with_the_same_numbers(page, title, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # the shipped stored rows only, not this machine's
    names = from_files()
    english, _ = shown(page, "en")
    quoted = sorted(NUMBER.findall(" ".join(english)))
    assert quoted  # the page quotes measured numbers
    for lang in LANGS:
        sentences, words = shown(page, lang)
        assert sorted(NUMBER.findall(" ".join(sentences))) == quoted, lang
        left = {w for text in sentences + words for w in english_left(without_files(text, names))}
        assert not left, (lang, sorted(left))
        if title:
            with speaking(lang):
                assert words[0] == t(title) != title


def row(model="m", trained="dynamic", run="dynamic", err=0.5, **kw):
    fields = dict(n_test=10_000, shifted_accuracy=90.0, fgsm_accuracy=50.0, n_images=1000, entropy_ratio=0.99)
    fields |= dict(coupling_to_prediction=0.11, ms_per_image=0.4, extra={"architecture": "capsnet-small on mnist, 3 epochs"})
    return lab.Row(model=model, trained_with=trained, run_with=run, test_error=err, **(fields | kw))


QUICK, SLOW = (0.30, 0.31, 0.29, 0.30, 0.32), (0.60, 0.62, 0.59, 0.61, 0.60)
PAIRS = dict(pair_accuracy=74.0, n_pairs=10_000, extra={"architecture": "capsnet-small on multimnist"})


def lab_cases() -> dict[str, list]:
    """Rows that reach every outcome of the lab's sentences: better, worse and within chance; pair
    models judged by their pairs with their digit error saying otherwise; the speed rule's five
    outcomes; models trained with different routings; a hidden routing; one iteration's own label."""
    band = rules.noise(1.0, 10_000, 1.0, 10_000)
    times = dict(ms_samples=SLOW, cores=2, load=0.5, hardware="cpu")
    mixed = [
        row("a", err=1.0, fgsm_accuracy=40.0, **times),
        row("a", run="uniform", err=round(1.0 + 0.8 * band, 2), fgsm_accuracy=47.0, **(times | {"ms_samples": QUICK})),
        row("a", run="random", err=9.0, entropy_ratio=0.5),
        row("a", run="self-attention", err=round(1.0 - 1.5 * band, 2), coupling_to_prediction=0.3, entropy_ratio=0.96),
        row("b", trained="uniform", run="uniform", err=1.6, **(times | {"load": 8.0})),
        row("b", trained="uniform", run="dynamic", err=1.7, entropy_ratio=0.9, coupling_to_prediction=0.3, **times),
        row("c", trained="random", run="random", err=2.0, trained_label=""),
    ]
    pairs = [
        row("p", err=15.0, **PAIRS),
        row("p", run="uniform", err=round(15.0 + 1.5 * rules.noise(15.0, 10_000, 15.0, 10_000), 2), **(PAIRS | {"pair_accuracy": 74.5})),
        row("q", trained="random", run="random", err=15.0, **PAIRS),
        row("q", trained="random", run="uniform", err=13.0, **(PAIRS | {"pair_accuracy": 74.2})),
        row("m", err=0.5),
        row("m", run="uniform", err=0.55),
    ]
    one = row(
        "m-1", trained="uniform", run="uniform", trained_label=lab.trained_label(replace(preset("capsnet-small"), routing_iterations=1))
    )
    timing = [
        [row("t", ms_samples=SLOW, cores=0), row("t", run="uniform", ms_samples=QUICK, cores=0)],
        [row("t", ms_samples=SLOW[:3], cores=2), row("t", run="uniform", ms_samples=QUICK, cores=2)],
        [row("t", ms_samples=SLOW, cores=2, hardware="a"), row("t", run="uniform", ms_samples=QUICK, cores=2, hardware="b")],
    ]
    return {
        "mixed": mixed,
        "pairs": pairs,
        "hidden": [r for r in mixed if r.run_with != "dynamic"],
        "one iteration": [one, replace(one, run_with="random", test_error=0.9), replace(one, run_with="dynamic", test_error=0.4)],
        **{f"timing {k}": rows for k, rows in enumerate(timing)},
        "nothing": [row(run="self-attention")],
    }


@pytest.mark.parametrize("case", list(lab_cases()))
def test_the_labs_sentences_say_the_same_numbers_in_every_language(case):
    rows = lab_cases()[case]
    studies = [
        lab.SeedStudy("capsnet-small on mnist, 3 epochs", (0, 1, 2), {"dynamic": [0.9, 1.0, 1.1], "random": [2.0, 2.1, 1.9]}, 10_000)
    ]
    said = {}
    for lang in ("en", *LANGS):
        with speaking(lang):
            said[lang] = lab.sentences(rows, studies) + lab.seed_sentences(studies[0]) + [lab.table_words(rows), lab.time_rule()]
            said[lang] += [studies[0].title(), *(str(v) for c in lab.table(rows) for v in c.values())]
    for lang in LANGS:
        assert len(said[lang]) == len(said["en"])
        for en, there in zip(said["en"], said[lang], strict=True):
            assert sorted(NUMBER.findall(there)) == sorted(NUMBER.findall(en)), (lang, en, there)
            assert not english_left(there), (lang, there)


def test_the_zoo_cards_and_the_reproduction_sentences_say_the_same_numbers_in_every_language():
    metas = [m for _, m in SHIPPED] + [
        replace(SHIPPED[0][1], metrics=Metrics()),
        replace(SHIPPED[0][1], metrics=Metrics(89.0, 11.0, 300, "x")),
    ]
    gaps = [Gap(0.30, 10_000, 0.25, 10_000, True), Gap(0.80, 10_000, 0.25, 10_000, False), Gap(0.15, None, 0.25, 10_000, True)]
    gaps.append(Gap(0.251, 10_000, 0.25, 10_000, True))
    found, names = [(p.name, m) for p, m in SHIPPED], from_files()
    said = {}
    for lang in ("en", *LANGS):
        with speaking(lang):
            cards = [card(m) for m in metas]
            said[lang] = [c.size.words() for c in cards] + [
                s for c in cards for s in (c.routing, c.decoder, c.error, c.error_means, c.paper)
            ]
            said[lang] += [c.guessing or "" for c in cards] + [epochs_note(m) or "" for m in metas] + [paper_words(m) for m in metas]
            said[lang] += [g.words() for g in gaps] + [g.words() for _, g in tables(found).gaps] + [t(FAMILIES[f].title) for f in FAMILIES]
    for lang in LANGS:
        for en, there in zip(said["en"], said[lang], strict=True):
            assert sorted(NUMBER.findall(there)) == sorted(NUMBER.findall(en)), (lang, en, there)
            assert not english_left(without_files(there, names)), (lang, there)
