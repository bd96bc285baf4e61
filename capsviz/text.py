"""Text that came from a user or a file, made plain for the pages: class names, model and file
names, study labels, link parameters.

On a served class such a string reaches every student's page, so it must never act as Markdown
(an image fetched from another address, a link), HTML or a chart's markup, and control and
bidirectional characters (which reorder what is shown) are dropped. `plain` is the one function
the pages use for it; `where` says what kind of place the text goes to.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata

MAX_CHARS = 300  # a name longer than this is cut: it is a label, not a document
MAX_SENTENCES = 1200  # the words the core builds around names (a caption, a link's note): a few sentences
KEEP_FORMAT = {"\u200c", "\u200d"}  # zero-width (non-)joiner: part of how some scripts and emoji are written
# What starts Markdown in Streamlit: emphasis, code, links and images ([), HTML and autolinks (<),
# headings, tables, maths ($), colours, icons and emoji (:), e-mail autolinks (@); "www." and a
# list marker at the start are broken apart below. The rest of ASCII's punctuation is left as it is.
_ESCAPE = {ord(ch): "\\" + ch for ch in "\\`*_~[]<>#|$:@"}
# Streamlit turns :name: into an emoji or icon after Markdown's escapes are read: a zero-width
# space after each colon keeps two colons from ever meeting round a word
_COLON = "\\:\u200b"
_WWW = re.compile(r"(?i)\b(www)\.")
_LIST = re.compile(r"^(\s*)([-+=]|\d+(?=[.)]))")


def clean(text, limit: int = MAX_CHARS, keep=KEEP_FORMAT) -> str:
    """`text` as a string without control, format (bidirectional marks, zero-width spaces) or
    unassigned characters, line breaks and tabs made spaces, at most `limit` long. `keep`: the
    format characters kept (by default the zero-width joiners some scripts need)."""
    text = str(text)
    if text.isprintable():  # no control, format, private, unassigned or separator character but spaces: nothing to drop or replace
        return text if len(text) <= limit else text[: limit - 1] + "…"
    out = []
    for ch in text[: limit * 2]:
        if ch in "\t\n\r\v\f\x85\u2028\u2029":
            out.append(" ")
        elif unicodedata.category(ch) in ("Cc", "Cs", "Co", "Cn") or (unicodedata.category(ch) == "Cf" and ch not in keep):
            continue
        else:
            out.append(ch)
    joined = "".join(out)
    return joined if len(joined) <= limit else joined[: limit - 1] + "…"


def bare(text, limit: int = MAX_CHARS) -> str:
    """A name from a file or a folder (a class name) as it is kept: `clean`, with every
    bidirectional and zero-width character dropped (the joiners too: a name that reorders or hides
    part of itself on a classmate's page is not worth a ligature), spaces at its ends removed."""
    return clean(text, limit, keep=()).strip()


def plain(text, where: str = "markdown", limit: int = MAX_CHARS) -> str:
    """`text` made plain for `where` it is shown:
    - "markdown": any Streamlit text that renders Markdown (st.markdown, captions, info boxes,
      widget labels, progress text): the characters that start Markdown escaped, so no link,
      image, emphasis, HTML, code, maths, colour, icon, list or heading can form;
    - "code": inside a `code span`: backticks (which would end it) left out;
    - "table": a table cell, select option or image caption, shown as it is;
    - "chart": a Plotly title, label or hover text, which reads a few HTML tags: < > & as entities.
    Every kind is `clean`ed first, cut at `limit` characters (MAX_CHARS for a name; MAX_SENTENCES for
    the sentences the core builds around names)."""
    if type(text) is str and len(text) <= KEPT_CHARS:  # a name or a label: the same few thousand for every run
        return _kept(text, where, limit)
    return _plain(text, where, limit)


KEPT_CHARS = 200  # the texts whose plain form is kept (names and labels), not sentences


@functools.lru_cache(maxsize=16384)
def _kept(text: str, where: str, limit: int) -> str:
    return _plain(text, where, limit)


def _plain(text, where: str, limit: int) -> str:
    text = clean(text, limit)
    if where == "markdown":
        text = text.translate(_ESCAPE).replace("\\:", _COLON)
        text = _WWW.sub(r"\1\\.", text)
        return _LIST.sub(lambda m: m.group(1) + ("\\" + m.group(2) if not m.group(2).isdigit() else m.group(2) + "\\"), text, count=1)
    if where == "code":
        return text.replace("`", "'")
    if where == "table":
        return text
    if where == "chart":
        return html.escape(text, quote=False)
    raise ValueError(f"unknown place for text: {where!r}")


def recorded(text: str) -> str:
    """A record kept in a checkpoint as it was written (a machine's name, how a figure was measured):
    a code span, which Markdown shows as it is, whatever it holds."""
    return "`" + " ".join(str(text).replace("`", "'").split()) + "`"
