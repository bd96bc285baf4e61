"""Every word a user sees, in the reader's language: English (the source), 简体中文 and 日本語.

The words are gettext messages: English whole sentences with named placeholders, written in the
code as `t("The winner is {name}.", name=...)` (or `tn(singular, plural, n, ...)` where English
needs a plural; `N_(...)`, or `Nn_(singular, plural)`, marks a message kept in a table and
translated where it is shown). The translations are the catalogs
`capsviz/locale/<language>/LC_MESSAGES/capsviz.po`, extracted and updated with Babel (README's "Translations"); they are read once per process.

The language is per student, never per server: each page run says which (`set_language`, from
the link's `lang=`, the sidebar's switch or the browser's languages), and every `t` in that run
uses it. It is held in a context variable, so two sessions' runs never see each other's. Anything
kept across sessions that holds words (a figure, a sentence) is keyed by `language()` too.
"""

from __future__ import annotations

import gettext
import io
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from pathlib import Path

SOURCE = "en"
# Each language by its own name, as the switch shows it.
LANGUAGES: dict[str, str] = {"en": "English", "zh-Hans": "简体中文", "ja": "日本語"}
LOCALE_DIR = Path(__file__).parent / "locale"
DOMAIN = "capsviz"
# The catalog folder of each language (gettext's locale names).
FOLDERS = {"zh-Hans": "zh_Hans", "ja": "ja"}

# Chinese and Japanese characters; a space the catalogs keep between one and a placeholder (在 {n} 张)
# is for a value that starts or ends with Latin letters or digits, and is dropped beside a value that
# is Chinese or Japanese itself (在 {x_name} {x} 处 with x_name 强度: 在强度 1 处), its full-width
# punctuation included (a list ending "3（0.916）" meets 把 with no space)
_CJK = re.compile(r"[\u3000-\u303f\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\uff00-\uffef]")
_SPACE_BEFORE = re.compile(r"(?<=[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]) (\{(\w+)[^{}]*\})")
_SPACE_AFTER = re.compile(r"(\{(\w+)[^{}]*\}) (?=[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff])")
_LANGUAGE: ContextVar[str | None] = ContextVar("capsviz_language", default=None)
# Where a run that did not say its language finds it: the app sets this to read the session's
# choice, so a fragment's rerun or a widget's callback speaks the session's language too.
_RESOLVER: list[Callable[[], str | None]] = []


def normalise(tag: str | None) -> str | None:
    """One of LANGUAGES for a language tag as browsers and links write it ("zh-CN", "zh_Hans",
    "ja-JP", "EN-gb"), or None for a language capsviz does not speak. Traditional Chinese readers
    are given Simplified Chinese, which they read, rather than English."""
    if not tag or not isinstance(tag, str):
        return None
    parts = tag.strip().replace("_", "-").lower().split("-")
    if parts[0] == "en":
        return "en"
    if parts[0] == "zh":
        return "zh-Hans"
    if parts[0] == "ja":
        return "ja"
    return None


def best(preferences: Iterable[str | None]) -> str:
    """The first of the browser's (or a link's) preferred languages that capsviz speaks, else English."""
    for tag in preferences:
        found = normalise(tag)
        if found:
            return found
    return SOURCE


def from_environment(environ: Mapping[str, str]) -> str:
    """The language a command-line program speaks, chosen as gettext programs choose it: the first
    of LANGUAGE (a list, "ja:en"), LC_ALL, LC_MESSAGES and LANG that is set decides, and the first
    language of it that capsviz speaks wins ("ja_JP.UTF-8" -> ja, "zh_CN" -> zh-Hans); English when
    it names none ("C", "fr_FR")."""
    for name in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = environ.get(name, "").strip()
        if value:
            return best(part.split(".")[0].split("@")[0] for part in value.split(":"))
    return SOURCE


def environment() -> str:
    """The language of this process's command line, from its environment (`from_environment`)."""
    return from_environment(os.environ)


def language() -> str:
    """The language of the words being made now: this run's (`set_language`, `speaking`), else the
    resolver's (the browser session's), else English."""
    lang = _LANGUAGE.get()
    if lang is None and _RESOLVER:
        lang = normalise(_RESOLVER[0]())
    return lang or SOURCE


def set_resolver(resolve: Callable[[], str | None]) -> None:
    """Where `language()` looks when no run said its language (the app: the session's choice)."""
    _RESOLVER[:] = [resolve]


def set_language(tag: str | None) -> str:
    """Make this run's words in `tag`'s language (English for one capsviz does not speak); returns it."""
    lang = normalise(tag) or SOURCE
    _LANGUAGE.set(lang)
    return lang


@contextmanager
def speaking(tag: str | None) -> Iterator[str]:
    """`with speaking("ja"):` words made inside are Japanese; the language before is restored after."""
    token = _LANGUAGE.set(normalise(tag) or SOURCE)
    try:
        yield language()
    finally:
        _LANGUAGE.reset(token)


def keeping(fn: Callable) -> Callable:
    """`fn` made to speak the language of now wherever it is called later: a widget's `format_func`,
    which Streamlit (and its AppTest) may call outside the run that made the widget."""
    lang = language()

    def in_language(*args, **kwargs):
        with speaking(lang):
            return fn(*args, **kwargs)

    return in_language


def catalog_path(lang: str) -> Path:
    return LOCALE_DIR / FOLDERS[lang] / "LC_MESSAGES" / f"{DOMAIN}.po"


@cache
def translations(lang: str) -> gettext.NullTranslations:
    """The language's catalog, compiled once per process (untranslated and fuzzy messages stay
    English); English, or a language without a catalog file, translates nothing."""
    if lang not in FOLDERS or not catalog_path(lang).exists():
        return gettext.NullTranslations()
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    with catalog_path(lang).open("rb") as f:
        catalog = read_po(f, locale=FOLDERS[lang])
    compiled = io.BytesIO()
    write_mo(compiled, catalog)
    compiled.seek(0)
    return gettext.GNUTranslations(compiled)


def gap() -> str:
    """What goes between two sentences in the reader's language: a space, none in Chinese and Japanese."""
    return "" if language() in ("zh-Hans", "ja") else " "


def t(message: str, /, **values) -> str:
    """`message` in this run's language, its {placeholders} filled from `values` (a `Sentence` said
    in this language too)."""
    text = translations(language()).gettext(message)
    return _filled(text, _saying(values)) if values else text


def tn(singular: str, plural: str, n: int, /, **values) -> str:
    """The singular or plural message for `n` (as the language counts: Chinese and Japanese have one
    form), its {placeholders} filled from `values` and {n}."""
    text = translations(language()).ngettext(singular, plural, n)
    return _filled(text, {"n": n, **_saying(values)})


def _filled(text: str, values: dict) -> str:
    """`text` with its placeholders filled from `values`, without the space beside a placeholder
    where its value meets a Chinese or Japanese character of the text with one of its own."""

    def cjk_at(name: str, end: int) -> bool:
        v = values.get(name)
        return isinstance(v, str) and v != "" and _CJK.match(v[end]) is not None

    text = _SPACE_BEFORE.sub(lambda m: m.group(1) if cjk_at(m.group(2), 0) else m.group(0), text)
    text = _SPACE_AFTER.sub(lambda m: m.group(1) if cjk_at(m.group(2), -1) else m.group(0), text)
    return text.format(**values)


def _saying(values: dict) -> dict:
    return {k: v.words() if isinstance(v, Sentence) else v for k, v in values.items()}


def N_(message: str) -> str:
    """Marks `message` for the catalog where it is kept in a table; `t(entry)` translates it where shown."""
    return message


def Nn_(singular: str, plural: str) -> tuple[str, str]:
    """Marks a singular and plural pair for the catalog where it is kept in a table; `tn(*entry, n)` translates it where shown."""
    return singular, plural


class Sentence(str):
    """A sentence made once and kept where every session reads it (a dataset read once for every
    session, a summary on disk): it is the English text, as a str, and it keeps its message and
    values, so `said(sentence)` puts it into the language of whoever reads it, where it is shown.
    Made with `sentence(message, ...)` or `sentence_n(singular, plural, n, ...)` (both in the catalog)."""

    message: str
    plural: str | None
    count: int | None
    values: dict

    def __new__(cls, message: str, plural: str | None = None, count: int | None = None, /, **values):
        shown = {k: _value(v, str) for k, v in values.items()}
        if plural is None:
            english = message.format(**shown) if values else message
        else:
            english = (message if count == 1 else plural).format(n=count, **shown)
        made = super().__new__(cls, english)
        made.message, made.plural, made.count, made.values = message, plural, count, values
        return made

    def words(self) -> str:
        """The sentence in the language of now (a value that is a Sentence, or a list of them, too)."""
        values = {k: _value(v, said) for k, v in self.values.items()}
        if self.plural is None:
            return t(self.message, **values)
        return tn(self.message, self.plural, self.count, **values)


def _value(v, say: Callable[[str], str]):
    """A Sentence's value as it is filled in: a list said item by item, joined with commas."""
    if isinstance(v, list):
        return ", ".join(say(x) if isinstance(x, str) else str(x) for x in v)
    return say(v) if isinstance(v, str) else v


def sentence(message: str, /, **values) -> Sentence:
    """`t(message, **values)`, kept to be said in each reader's language later (`said`)."""
    return Sentence(message, **values)


def sentence_n(singular: str, plural: str, n: int, /, **values) -> Sentence:
    """`tn(singular, plural, n, **values)`, kept to be said in each reader's language later (`said`)."""
    return Sentence(singular, plural, n, **values)


def said(text: str) -> str:
    """A `Sentence` in the language of now; any other text as it is."""
    return text.words() if isinstance(text, Sentence) else text


def stored(text: str) -> str | dict:
    """Words to keep in a file and say later in each reader's language: a `Sentence` as its message
    and named values ({"message", "values"}, and "plural" and "n" for `sentence_n`'s; a value that
    is a Sentence or a list of them kept the same way, any other than a string or a number as its
    text); any other text as it is, to be shown as it is."""
    if not isinstance(text, Sentence):
        return str(text)
    record = {"message": text.message, "values": {k: _stored_value(v) for k, v in text.values.items()}}
    if text.plural is not None:
        record |= {"plural": text.plural, "n": text.count}
    return record


def _stored_value(v):
    if isinstance(v, list):
        return [_stored_value(x) for x in v]
    if isinstance(v, Sentence):
        return stored(v)
    return v if isinstance(v, str | int | float) else str(v)


def recalled(record: str | dict) -> str:
    """Words kept by `stored` (or plain text kept by an older version) as a `Sentence` again, said
    with `said` in the language of whoever reads it."""
    if not isinstance(record, dict):
        return record
    values = {k: _recalled_value(v) for k, v in record.get("values", {}).items()}
    return Sentence(record["message"], record.get("plural"), record.get("n"), **values)


def _recalled_value(v):
    if isinstance(v, list):
        return [_recalled_value(x) for x in v]
    return recalled(v) if isinstance(v, dict) else v
