"""The catalogs' upkeep: find every message the code shows (`t`, `tn`, `N_` in capsviz/, pages/ and
app.py), bring each language's catalog up to date with them, and say what is missing.

    python -m capsviz translations          # update capsviz/locale/*/LC_MESSAGES/capsviz.po
    python -m capsviz translations --check  # exit 1, naming each message untranslated or broken
    python -m capsviz translations --fonts  # cut capsviz/fonts/*.otf to the catalogs' characters

A translator then fills the empty `msgstr`s (TERMS.md gives the words). tests/test_i18n.py runs the
check, so CI fails for a message missing in Chinese or Japanese or whose placeholders differ."""

from __future__ import annotations

import re
import string
from datetime import UTC, datetime
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract
from babel.messages.pofile import read_po, write_po

from capsviz.i18n import FOLDERS, LANGUAGES, catalog_path
from capsviz.paths import CHECKOUT
from capsviz.viz.teach import FONT_DIR  # the fonts the figures are drawn with, which --fonts re-cuts

STAMP = datetime(2026, 1, 1, tzinfo=UTC)  # the catalogs' dates stay put: a change shows only what changed
HEADER = "# capsviz's words in {name}. ../shared/TERMS.md gives the terms; `python -m capsviz translations` keeps it up to date."
# t(message), tn(singular, plural, n), N_(message), Nn_(singular, plural), sentence(message), sentence_n(singular, plural, n):
# Babel's keyword specs
KEYWORDS = {"t": None, "tn": (1, 2), "N_": None, "Nn_": (1, 2), "sentence": None, "sentence_n": (1, 2)}


def sources(root: Path = CHECKOUT) -> list[Path]:
    """Every Python file whose words a user sees: the core, the pages, the app."""
    files = sorted((root / "capsviz").rglob("*.py")) + sorted((root / "pages").glob("*.py"))
    return files + [root / "app.py"] if (root / "app.py").exists() else files


def template(root: Path = CHECKOUT) -> Catalog:
    """Every message in the code, where each is used."""
    found = Catalog(project="capsviz", fuzzy=False, creation_date=STAMP)
    for path in sources(root):
        with path.open("rb") as f:
            for line, message, comments, _context in extract("python", f, keywords=KEYWORDS, comment_tags=("i18n:",)):
                where = (str(path.relative_to(root)), line)
                found.add(message, locations=[where], auto_comments=comments)
    return found


def update(root: Path = CHECKOUT) -> dict[str, int]:
    """Each language's catalog brought up to date with the code's messages (kept translations stay,
    a message gone from the code is dropped); returns how many messages each still lacks."""
    pot = template(root)
    missing = {}
    for lang, folder in FOLDERS.items():
        path = catalog_path(lang)
        if path.exists():
            with path.open("rb") as f:
                catalog = read_po(f, locale=folder)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            catalog = Catalog(locale=folder, project="capsviz", fuzzy=False, creation_date=STAMP, revision_date=STAMP)
        catalog.header_comment = HEADER.format(name=LANGUAGES[lang])
        catalog.update(pot, no_fuzzy_matching=True)
        catalog.obsolete.clear()
        with path.open("wb") as f:
            write_po(f, catalog, width=0, sort_output=False, ignore_obsolete=True, include_lineno=False)
        missing[lang] = sum(1 for m in catalog if m.id and not _done(m))
    return missing


# The system's Noto Sans CJK (Debian's fonts-noto-cjk) that the shipped subsets are cut from,
# and the face of it each language's text is drawn in (its own forms of the shared characters).
NOTO = Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")
FACES = {"zh-Hans": "Noto Sans CJK SC", "ja": "Noto Sans CJK JP"}


def characters(lang: str) -> str:
    """Every character a figure may draw in `lang`: its catalog's translations and printable ASCII."""
    with catalog_path(lang).open("rb") as f:
        catalog = read_po(f, locale=FOLDERS[lang])
    found = {chr(c) for c in range(32, 127)} | set("·×—–…‘’“”°±≤≥≈→←↑↓")
    for m in catalog:
        for s in m.string if isinstance(m.string, tuple | list) else (m.string,):
            found |= {c for c in s or "" if c.isprintable()}
    return "".join(sorted(found))


def cut_fonts(source: Path = NOTO, out: Path = FONT_DIR) -> dict[str, int]:
    """The export fonts (capsviz/fonts/<language>.otf): Noto Sans CJK (SIL Open Font License,
    capsviz/fonts/OFL.txt) cut down to the characters of each catalog. Needs fontTools and the
    system font; returns each file's size in bytes."""
    from fontTools import subset
    from fontTools.ttLib import TTCollection

    faces = {f["name"].getDebugName(4): f for f in TTCollection(source).fonts}
    sizes = {}
    for lang, face in FACES.items():
        font = faces[face]
        options = subset.Options()
        options.layout_features = ["*"]
        options.name_IDs = ["*"]
        options.notdef_outline = True
        cutter = subset.Subsetter(options)
        cutter.populate(text=characters(lang))
        cutter.subset(font)
        path = out / f"{lang}.otf"
        font.save(path)
        sizes[lang] = path.stat().st_size
        faces = {f["name"].getDebugName(4): f for f in TTCollection(source).fonts}  # a fresh copy for the next cut
    return sizes


def _done(message) -> bool:
    strings = message.string if isinstance(message.string, tuple | list) else (message.string,)
    return all(strings) and not message.fuzzy


def placeholders(text: str) -> set[str]:
    """The {named} placeholders of a message."""
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


_MARKUP = re.compile(r"\*\*|`|:material/[a-z_]+:")


def problems(root: Path = CHECKOUT) -> list[str]:
    """What stops a catalog from being complete: a message of the code missing or untranslated in a
    language, a translation whose placeholders or markdown marks differ from the English."""
    pot = template(root)
    found = []
    for lang, folder in FOLDERS.items():
        path = catalog_path(lang)
        if not path.exists():
            found.append(f"{lang}: no catalog at {path.relative_to(root)} (run `python -m capsviz translations`)")
            continue
        with path.open("rb") as f:
            catalog = read_po(f, locale=folder)
        for message in pot:
            if not message.id:
                continue
            have = catalog.get(message.id)
            where = "{}:{}".format(*message.locations[0])
            english = message.id if isinstance(message.id, str) else message.id[0]
            if have is None or not _done(have):
                found.append(f"{lang}: untranslated ({where}): {english[:80]!r}")
                continue
            ids = message.id if isinstance(message.id, tuple | list) else (message.id,)
            strings = have.string if isinstance(have.string, tuple | list) else (have.string,)
            want = set().union(*(placeholders(i) for i in ids))
            for s in strings:
                if placeholders(s) != want:
                    found.append(f"{lang}: placeholders {sorted(placeholders(s))} instead of {sorted(want)} ({where}): {english[:60]!r}")
                if sorted(_MARKUP.findall(s)) != sorted(_MARKUP.findall(ids[0])):
                    found.append(f"{lang}: markup differs ({where}): {english[:60]!r}")
    return found
