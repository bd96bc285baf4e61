"""The glossary holds every term, symbol and abbreviation the pages show, and finds each by the
papers' own names and the usual synonyms (capsviz.glossary). The terms are collected from the
pages' texts and help strings and from the sentences capsviz.analysis writes for them."""

import ast
import re
from pathlib import Path

import pytest
from test_app import app, router_mode  # noqa: F401 - the tiny models' AppTest; st.navigation in charge, as served

from capsviz import glossary
from capsviz.analysis import rules
from capsviz.analysis.rules import RULES
from capsviz.i18n import speaking

ROOT = Path(__file__).resolve().parents[1]
# What the pages show: their own texts, and the sentences and chart labels the core writes for them
# (early_learning is a study for RESULTS.md, shown on no page)
SOURCES = [
    *sorted((ROOT / "pages").glob("*.py")),
    *sorted(p for p in (ROOT / "capsviz" / "analysis").glob("*.py") if p.name != "early_learning.py"),
    *sorted((ROOT / "capsviz" / "viz").glob("*.py")),
]
# Symbols: a letter or a short name with subscripts (c_ij, u_hat_j|i, beta_u); Greek letters by name
SYMBOL = re.compile(r"(?<![\w.])([A-Za-z]{1,4}(?:_hat)?_[A-Za-z|]{1,4})(?![\w(])")
GREEK = re.compile(r"\b(mu|sigma|lambda|beta|epsilon|alpha|gamma|theta)\b")
# Abbreviations and names written with capitals inside (CNN, FGSM, DigitCaps, MultiMNIST, affNIST, Conv1)
CAPITALS = re.compile(r"(?<![\w-])([A-Z][a-z]*[A-Z][A-Za-z0-9]*|[A-Z]{2,}[a-z]*|[a-z]+[A-Z]{2,}[A-Za-z]*|[A-Z][a-z]+\d+)(?![\w-])")
# Capitalised words inside a sentence (Gaussian, Procedure)
MIDDLE = re.compile(r"(?<=[a-z,;(] )([A-Z][a-z]+)(?![\w-])")
# The field's words in plain letters: each one a page uses must have an entry
VOCABULARY = (
    "dynamic routing", "routing by agreement", "EM routing", "coupling coefficient", "coupling", "routing logit", "agreement",
    "E-step", "M-step", "assignment", "inverse temperature", "activation", "pose", "vote", "prediction", "presence", "squash",
    "capsule", "primary capsules", "class capsule", "digit capsule", "decoder", "reconstruction", "margin loss", "spread loss",
    "self-attention", "learned prior", "entropy", "uniform", "near uniform", "random couplings", "iteration",
    "epoch", "batch", "learning rate", "seed", "test error", "chance", "standard error", "beyond chance", "rises", "falls",
    "faster", "gradient masking", "targeted", "affine", "epsilon", "softmax", "logistic", "Gaussian", "baseline",
)  # fmt: skip
# Capitalised words that are no term of the field: file formats, hardware, venues, the app's own files and
# placeholders, and the drawing pad's JavaScript (code, never shown)
NOT_TERMS = {"AMX", "BMP", "CPU", "CPUs", "CVPR", "GIF", "GPU", "GPUs", "IDX", "JPEG", "MB", "PATH", "PNG", "RESULTS", "RUNS", "UTC"}
NOT_TERMS |= {"innerHTML", "Python", "Intel", "English"}  # English: the language, named where a page gives English names
NOT_TERMS |= {"Chiaberge", "Hinton", "Kim", "Lee", "Mazzia", "Sabour", "Salvetti", "Tresp"}  # the papers' authors, cited
NOT_TERMS |= {"Eq", "Fig", "Table", "Procedure"}  # parts of the papers, cited by number
NOT_TERMS |= {"CSV", "None", "SameSite", "Path"}  # the answers' export format; the identity cookie's script (code)
NOT_TERMS |= {"Class", "Clear", "End", "Open", "Resume", "Reproduction", "Robustness"}  # pages, panels, buttons and keys named


def shown_texts(path: Path) -> list[str]:
    """The texts in a source file that can reach a page: string constants with a space (keys and
    names of widgets have none), docstrings left out."""
    tree = ast.parse(path.read_text())
    docs = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body and isinstance(n.body[0], ast.Expr)
    }
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and " " in n.value.strip() and id(n) not in docs
    ]


def terms_in(text: str) -> set[str]:
    text = re.sub(r"\{[^{}]*\}", " ", text)  # a catalog message's {placeholders} are names in code, never shown
    found = {m.rstrip("|") for m in SYMBOL.findall(text)} | set(GREEK.findall(text))
    found |= set(CAPITALS.findall(text)) | set(MIDDLE.findall(text))
    lowered = text.lower()
    found |= {w for w in VOCABULARY if re.search(rf"(?<![\w-]){re.escape(w.lower())}", lowered)}
    return found - NOT_TERMS


def missing(texts) -> list[str]:
    return sorted({t for text in texts for t in terms_in(text) if not glossary.lookup(t)})


def test_every_term_symbol_and_abbreviation_the_pages_show_has_an_entry():
    texts = [t for path in SOURCES for t in shown_texts(path)]
    texts += [t.explanation for t in glossary.TERMS.values()]  # the hover help is glossary text too
    assert len(texts) > 500  # the scan reads the pages
    assert not missing(texts), f"add glossary entries (or a name in Term.also) for: {missing(texts)}"


def test_the_scan_finds_what_has_no_entry():
    assert missing(["The FooNet routes q_zz by the ZYX rule with kappa"]) == ["FooNet", "ZYX", "q_zz"]
    assert missing(["Dynamic routing sets c_ij from b_ij; EM routing fits mu and sigma; R_ij, lambda, beta_u"]) == []


@pytest.mark.parametrize(
    ("query", "entry"),
    [
        ("coupling coefficient", "c"), ("coupling coefficients", "c"), ("couplings", "c"), ("routing logit", "b"),
        ("E-step", "E_step"), ("E step", "E_step"), ("M-step", "M_step"), ("agreement", "agreement"), ("EM", "em_routing"),
        ("routing by agreement", "dynamic_routing"), ("dynamic routing", "dynamic_routing"), ("DigitCaps", "digitcaps"),
        ("digit capsules", "digitcaps"), ("MultiMNIST", "multimnist"), ("gradient masking", "gradient_masking"),
        ("standard error", "standard_error"), ("chance", "chance"), ("BatchNorm", "batchnorm"), ("batch normalization", "batchnorm"),
        ("epoch", "epoch"), ("batch size", "batch"), ("learning rate", "learning_rate"), ("CNN", "cnn"), ("CNNs", "cnn"),
        ("u_hat_j|k", "u_hat"), ("|s_j|", "s"), ("R", "R"), ("c_ij", "c"), ("fast gradient sign method", "fgsm"),
    ],
)  # fmt: skip
def test_search_finds_the_papers_terms_and_synonyms_first(query, entry):
    assert glossary.entries(query)[0] == glossary.TERMS[entry]


def test_em_finds_its_steps_and_assignments_but_not_words_that_hold_the_letters():
    found = glossary.entries("EM")
    for key in ("em_routing", "E_step", "M_step", "R"):
        assert glossary.TERMS[key] in found
    assert glossary.TERMS["reconstruction"] not in found  # "them", "system": not EM


@pytest.mark.parametrize("rule", list(RULES))
def test_each_rule_of_the_sentences_is_an_entry_in_the_rules_own_words(rule):
    (entry,) = [t for t in glossary.lookup(rule) if t.explanation == RULES[rule]]
    assert entry in glossary.entries(rule)


def test_the_coupling_help_does_not_give_efficient_capsnet_a_first_iteration():
    text = glossary.term("c").explanation
    dynamic, efficient = text.split("Efficient-CapsNet")
    assert "first iteration" in dynamic and "first iteration" not in efficient and "no iterations" in efficient


def test_every_help_key_the_pages_ask_for_exists():
    keys = set()
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("help_text", "label", "glossary_label"):
                keys |= {a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    assert keys and all(glossary.term(k) for k in keys)


# The glossary in Chinese and Japanese (issue 49): found by its readers' own words, the words of
# ../shared/TERMS.md, English unchanged, and the page in each language.
TERMS_MD = ROOT.parent / "shared" / "TERMS.md"
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")


@pytest.mark.parametrize(
    ("query", "entry"),
    [
        ("胶囊", "capsule"), ("耦合系数", "c"), ("カプセル", "capsule"), ("結合係数", "c"), ("动态路由", "dynamic_routing"),
        ("動的ルーティング", "dynamic_routing"), ("挤压", "squash"), ("边缘损失", "margin_loss"), ("マージン損失", "margin_loss"),
        ("E步", "E_step"), ("Eステップ", "E_step"), ("偶然波动", "chance"), ("ロジット", "b"), ("主胶囊", "primary"),
    ],
)  # fmt: skip
def test_search_finds_a_term_by_its_chinese_or_japanese_name_first(query, entry):
    for lang in ("en", "zh-Hans", "ja"):  # whatever the reader's language
        with speaking(lang):
            assert glossary.entries(query)[0] == glossary.TERMS[entry], (lang, query)


def test_a_chinese_or_japanese_word_inside_an_explanation_finds_it_too():
    found = glossary.entries("先升后降")
    assert glossary.TERMS["peaks_dips"] in found
    assert glossary.TERMS["self_attention"] in glossary.entries("自己注意")


def terms_md_rows():
    """(glossary keys, 简体中文 cell, 日本語 cell) of each row of TERMS.md's table that names keys."""
    rows = []
    for line in TERMS_MD.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and (keys := re.findall(r"`([^`]+)`", cells[0])):
            rows.append((keys, cells[1], cells[2]))
    return rows


def listed(cell: str) -> list[str]:
    """The words a TERMS.md cell lists (its counts, notes and dashes left out): those in Chinese or
    Japanese letters, else the English names it keeps (DigitCaps)."""
    words = re.findall(r"[「」（）\w]+", cell)
    cjk = [w for w in words if _CJK.search(w)]
    return cjk or [w for w in words if not w.isdigit() and w not in {"not", "in", "the", "text", "is", "usual"}]


@pytest.mark.skipif(not TERMS_MD.exists(), reason="../shared/TERMS.md is absent (a checkout without the shared folder)")
def test_every_term_of_terms_md_is_used_as_listed_in_its_glossary_entry():
    rows = terms_md_rows()
    assert len(rows) > 25
    wrong = []
    for keys, zh, ja in rows:
        for lang, cell in (("zh-Hans", zh), ("ja", ja)):
            words = listed(cell)
            if cell in ("-", "") or not words:
                continue
            for key in keys:
                entry = glossary.TERMS[key]
                with speaking(lang):
                    said = " ".join((entry.symbol_in(), entry.word_in(), entry.explain()))
                if not any(w in said for w in words):
                    wrong.append(f"{lang} {key}: none of {words}")
    assert not wrong, wrong


def test_english_is_unchanged_and_each_entry_speaks_the_readers_language():
    for key, entry in glossary.TERMS.items():
        assert glossary.label(key) == entry.named
        assert glossary.help_text(key) == f"**{entry.named}**: {entry.explanation}"
        assert entry.explain() == entry.explanation
        for lang in ("zh-Hans", "ja"):
            with speaking(lang):
                said = entry.explain()
                assert _CJK.search(said) and said != entry.explanation, (lang, key)
                assert glossary.help_text(key).startswith(f"**{glossary.label(key)}**："), (lang, key)
    with speaking("zh-Hans"):
        assert glossary.label("c") == "c_ij（耦合系数）" and glossary.TERMS["squash"].word_in() == "挤压（squashing）函数"
        assert glossary.TERMS["c"].heading() == "**c_ij** 耦合系数（coupling coefficient）"
        assert glossary.TERMS["capsule"].heading() == "**胶囊**（capsule）"
        assert glossary.class_words("mnist").capsules == "数字胶囊"
    with speaking("ja"):
        assert glossary.label("c") == "c_ij（結合係数）" and glossary.TERMS["squash"].word_in() == "「squashing」関数"
        assert glossary.TERMS["c"].heading() == "**c_ij** 結合係数（coupling coefficient）"
        assert glossary.class_words("mnist").capsule == "数字カプセル" and glossary.class_words("fashion-mnist").thing == "クラス"
    assert glossary.class_words("mnist").capsules == "digit capsules" and glossary.CLASS_WORDS.pictures == "images"


@pytest.mark.parametrize("rule", list(RULES))
def test_each_rule_says_its_numbers_in_every_language(rule):
    message, values = rules.RULE_MESSAGES[rule]
    assert rules.rule_words(rule) == RULES[rule] == message.format(**values)
    for lang in ("zh-Hans", "ja"):
        with speaking(lang):
            said = rules.rule_words(rule)
        assert _CJK.search(said) and all(v in said for v in values.values()), (lang, rule)


@pytest.mark.parametrize(
    ("lang", "title", "first", "query", "found"),
    [
        ("zh-Hans", "术语表", "**胶囊**（capsule）：", "结合係数", None),
        ("zh-Hans", "术语表", "**胶囊**（capsule）：", "耦合系数", "**c_ij** 耦合系数（coupling coefficient）："),
        ("ja", "用語集", "**カプセル**（capsule）：", "結合係数", "**c_ij** 結合係数（coupling coefficient）："),
        ("ja", "用語集", "**カプセル**（capsule）：", "胶囊", "**カプセル**（capsule）："),
    ],
)
def test_the_glossary_page_in_chinese_and_japanese(app, lang, title, first, query, found):  # noqa: F811
    app.query_params["lang"] = lang
    app.switch_page("pages/glossary.py").run()
    assert not app.exception
    assert app.title[0].value == title
    shown = [m.value for m in app.markdown if m.value.startswith("**")]
    assert shown[0].startswith(first) and len(shown) == len(glossary.TERMS)
    assert all(_CJK.search(s) for s in shown)
    also = app.caption[0].value  # the English names to look for in the papers, in brackets
    assert also.endswith("（capsules, capsule network, CapsNet, CapsNets, vector capsule）") and _CJK.search(also)
    app.text_input(key="term").set_value(query).run()
    assert not app.exception
    shown = [m.value for m in app.markdown if m.value.startswith("**")]
    if found is None:  # a word in neither language: the page says so in the reader's language
        assert not shown and _CJK.search(app.info[0].value) and query in app.info[0].value
    else:
        assert shown[0].startswith(found)
