"""Every word a page shows in an AppTest run: the text of each element and block (markdown, captions,
titles, alerts, metrics, widget labels, options and help, tabs and expanders), the column titles and
word cells of its tables, and the words of its charts (titles, axes, legends, hover, annotations).
Read from the messages Streamlit sends to the browser, so nothing a page adds escapes the check."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

# The fields of Streamlit's element and block messages that a reader sees as words.
SEEN = {
    "body",
    "caption",
    "captions",
    "content",
    "default_tab_label",
    "delta",
    "delta_description",
    "help",
    "label",
    "message",
    "options",
    "placeholder",
    "text",
    "title",
    "tooltip",
}
# The keys of a plotly figure whose values are words: titles, names, hover and tick texts.
PLOTLY_WORDS = {"text", "name", "hovertemplate", "hovertext", "ticktext", "texttemplate", "legendgrouptitle"}
_PLOTLY_MARKUP = re.compile(r"%\{[^}]*\}|<[^>]+>|&[a-z]+;")
# Markdown's own HTML (unsafe_allow_html): its tags are no words ("<name>" in a sentence is one).
_TAG = re.compile(r"</?(?:span|div|br|b|i|a|p|small|sup|sub|strong|em|code|img)\b[^<>]*>")
_HTML = re.compile(r"<(script|style)\b.*?</\1>|<[^>]+>", re.S)


def _nodes(node) -> Iterator:
    yield node
    children = getattr(node, "children", None)
    if isinstance(children, dict):
        for child in children.values():
            yield from _nodes(child)


def _message_words(message, out: list[str]) -> None:
    for field, value in message.ListFields():
        many = field.is_repeated
        values = value if many else [value]
        if field.type == field.TYPE_MESSAGE:
            for v in values:
                if field.message_type.GetOptions().map_entry:
                    continue
                _message_words(v, out)
        elif field.type == field.TYPE_STRING:
            if field.name == "html_content" or (field.name == "body" and message.DESCRIPTOR.name == "Html"):
                out.extend(_HTML.sub(" ", v) for v in values)
            elif field.name in SEEN:
                out.extend(str(v) for v in values)
            elif field.name == "spec" and message.DESCRIPTOR.name == "PlotlyChart":
                out.extend(plotly_words(json.loads(values[0])))


def plotly_words(figure) -> list[str]:
    """The words of a plotly figure's dict: each string under a key a reader sees (titles, trace
    names, hover and tick texts, annotations), with plotly's %{...} fields and HTML tags taken out."""
    out: list[str] = []

    def walk(value, key: str | None) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str) and key in PLOTLY_WORDS:
            out.append(_PLOTLY_MARKUP.sub(" ", value))

    walk({k: v for k, v in figure.items() if k != "config"}, None)
    return out


def _table_words(node, out: list[str]) -> None:
    columns = json.loads(node.proto.columns or "{}")
    out.extend(" ".join([c.get("label") or "", c.get("help") or ""]) for c in columns.values())
    frame = node.value
    labelled = {name for name, c in columns.items() if c.get("label")}  # a column shown by its label, not its name
    out.extend(str(c) for c in frame.columns if not str(c).isdigit() and str(c) not in labelled)
    out.extend(str(name) for name in frame.index.names if name)
    for col in frame.columns:
        out.extend(x for x in frame[col] if isinstance(x, str))
    out.extend(x for x in frame.index if isinstance(x, str))


def page_words(at) -> list[str]:
    """Every word the page (and its sidebar) shows in this run of `at`."""
    out: list[str] = []
    for node in _nodes(at._tree):
        kind = getattr(node, "type", "")
        proto = getattr(node, "proto", None)
        if proto is None:
            continue
        if kind in ("arrow_data_frame", "arrow_table", "dataframe", "table"):
            _table_words(node, out)
            continue
        _message_words(proto, out)
    return [_TAG.sub(" ", w) for w in out if w and w.strip()]
