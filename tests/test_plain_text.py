"""User text is text: names of classes, models, files and studies and a link's parameters reach
every student's page, so they must never act as Markdown, HTML or links (capsviz.text.plain).
Here: what `plain` does, and a scan of every page for such text fed to Streamlit's Markdown
unescaped. tests/e2e/test_plain_text_browser.py shows it in chromium."""

import ast
import re
from pathlib import Path

import pytest

from capsviz.text import MAX_CHARS, MAX_SENTENCES, clean, plain

PAGES = Path(__file__).resolve().parents[1] / "pages"

# Streamlit calls whose text (first argument, label, help or progress text) is rendered as Markdown
SINKS = {
    *("markdown", "caption", "write", "info", "warning", "error", "success", "toast", "title", "header", "subheader"),
    *("progress", "button", "expander", "metric", "tabs", "radio", "checkbox", "selectbox", "multiselect", "number_input"),
    *("text_input", "select_slider", "slider", "link_button", "page_link", "download_button", "popover", "status", "toggle"),
    "image",  # its caption
    "show",  # pages.drawn.show: its caption, the third argument
}
MARKDOWN_ARGS = ("body", "label", "text", "help", "caption")
# ... and whose options are shown as Markdown too (their format_func's text, else the options)
OPTION_SINKS = {"selectbox", "radio", "multiselect", "select_slider", "pills", "segmented_control"}
# What a name, a label or a message that may carry one is called in the pages
SUSPECT = re.compile(
    r"name|stem|label|class|title|spec|asked|message|pick|path|dataset|study|architecture|preset|why|\be\b|line|text|note|"
    r"shown|who|owner|model|hardware|truth|reason|kept|out\b|caption|\bquery\b|\bq\b|params"
)
# plain itself, numbers, the glossary's own words, and the Train page's progress line (its one name made plain)
SAFE = {"plain", "len", "int", "float", "round", "duration", "help_text", "label", "glossary_label", "run_line", "font_note"}


def as_shown(markdown: str) -> str:
    """What a reader sees of Markdown that `plain` wrote: each \\x is x, the colons' breaks invisible."""
    return re.sub(r"\\(.)", r"\1", markdown).replace("\u200b", "")


def _called(node) -> str | None:
    f = node.func if isinstance(node, ast.Call) else None
    return getattr(f, "id", None) or getattr(f, "attr", None)


def _text_parts(node):
    """The parts of an argument that end up in the text: the values of f-strings, and the operands
    of + and of str.join, down to expressions."""
    if isinstance(node, ast.JoinedStr):
        for v in node.values:
            if isinstance(v, ast.FormattedValue) and v.format_spec is None:
                yield from _text_parts(v.value)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        yield from _text_parts(node.left)
        yield from _text_parts(node.right)
    elif isinstance(node, ast.IfExp):
        yield from _text_parts(node.body)
        yield from _text_parts(node.orelse)
    elif isinstance(node, ast.Call) and _called(node) == "join" and node.args:
        arg = node.args[0]
        inner = arg.elt if isinstance(arg, (ast.GeneratorExp, ast.ListComp)) else arg
        yield from _text_parts(inner)
    elif isinstance(node, (ast.ListComp, ast.GeneratorExp)):
        yield from _text_parts(node.elt)
    elif isinstance(node, (ast.List, ast.Tuple)):
        for e in node.elts:
            yield from _text_parts(e)
    elif isinstance(node, ast.Constant):
        return
    elif isinstance(node, ast.Call) and _called(node) in SAFE:
        return
    elif isinstance(node, ast.Call) and _called(node) == "keeping" and node.args:  # capsviz.i18n.keeping(fn): fn's text
        yield from _text_parts(node.args[0])
    elif isinstance(node, ast.Lambda):
        yield from _text_parts(node.body)
    elif isinstance(node, ast.Call) and _called(node) in ("t", "tn"):  # capsviz.i18n: our catalog's words, its values filled in
        for v in [*node.args[3 if _called(node) == "tn" else 1 :], *(k.value for k in node.keywords)]:
            yield from _text_parts(v)
    else:
        yield node


def unescaped(path: Path) -> list[tuple[ast.expr, str]]:
    """(expression, its source) for every name-like text given to a Markdown-rendering Streamlit
    call in `path` without `plain`. A call whose line says `# plain: <why>` is let through: Markdown
    that the core wrote from names the page made plain first."""
    source = path.read_text()
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "show":
            node.func = ast.Attribute(value=ast.Name("drawn"), attr="show")  # pages.drawn.show, called by its name
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SINKS):
            continue
        if node.func.attr == "write" and not (isinstance(node.func.value, ast.Name) and node.func.value.id == "st"):
            continue  # a file's or a store's write, not Streamlit's
        if any("# plain:" in line for line in lines[node.lineno - 1 : node.end_lineno]):
            continue
        args = node.args[:1] + [k.value for k in node.keywords if k.arg in MARKDOWN_ARGS]
        if node.func.attr == "image":  # the first argument is the picture
            args = [k.value for k in node.keywords if k.arg == "caption"] + node.args[1:2]
        if node.func.attr == "show":  # show(place, picture, caption, width)
            args = [k.value for k in node.keywords if k.arg == "caption"] + node.args[2:3]
        if node.func.attr in OPTION_SINKS:
            shown = next((k.value for k in node.keywords if k.arg == "format_func"), None)
            if isinstance(shown, ast.Lambda):
                args.append(shown.body)
            elif shown is not None:
                args.append(shown)
            else:
                args += node.args[1:2] + [k.value for k in node.keywords if k.arg == "options"]
        for arg in args:
            for part in _text_parts(arg):
                text = ast.unparse(part)
                if SUSPECT.search(text):
                    found.append((part, text))
    return found


def test_every_page_makes_names_plain_before_markdown_shows_them():
    """A model trained on a zip with a class folder named like a Markdown image made every page
    that names its classes fetch an outside address; a link's ?model= could show a live link."""
    found = [f"{p.name}:{node.lineno}: {text}" for p in sorted(PAGES.glob("*.py")) for node, text in unescaped(p)]
    assert not found, "give these to capsviz.text.plain before Markdown shows them:\n" + "\n".join(found)


def test_every_chart_is_made_plain_before_plotly_draws_it():
    """Plotly reads a few HTML tags in a chart's titles, labels and legends, links among them."""
    found = []
    for p in sorted(PAGES.glob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "plotly_chart":
                if not (node.args and _called(node.args[0]) in ("plain_chart", "chart", "live_chart")):
                    found.append(f"{p.name}:{node.lineno}")
    assert not found, "give these figures to pages.common.plain_chart (or draw them with pages.drawn.chart or live_chart): " + ", ".join(
        found
    )


def test_a_chart_keeps_its_numbers_and_loses_its_markup():
    import numpy as np
    import plotly.graph_objects as go

    from pages.common import plain_chart

    fig = go.Figure(go.Bar(x=["<a href='https://e'>x</a>", "ok"], y=[1, 2], name="<b>n</b>"))
    fig.update_layout(title="<img src=x>", xaxis_title="a & b")
    fig.add_trace(go.Heatmap(z=np.ones((2, 2)), x=np.array(["<i>p</i>", "q"], dtype=object)))
    plain_chart(fig)
    assert list(fig.data[0].x) == ["&lt;a href='https://e'&gt;x&lt;/a&gt;", "ok"] and list(fig.data[0].y) == [1, 2]
    assert fig.data[0].name == "&lt;b&gt;n&lt;/b&gt;" and list(fig.data[1].x) == ["&lt;i&gt;p&lt;/i&gt;", "q"]
    assert fig.layout.title.text == "&lt;img src=x&gt;" and fig.layout.xaxis.title.text == "a &amp; b"


def test_the_scan_finds_what_it_is_for(tmp_path):
    page = tmp_path / "page.py"
    page.write_text(
        "st.markdown(f'**{name}** has {n:,} images')\n"
        "c1.caption('Skipped: ' + why)\n"
        "st.info(f'{plain(name)} of {len(names)}')\n"
        "st.warning(', '.join(f'**{path.stem}**' for path in found))\n"
        "st.progress(0.5, text=asked)\n"
    )
    assert [t for _, t in unescaped(page)] == ["name", "why", "path.stem", "asked"]


@pytest.mark.parametrize(
    "hostile",
    [
        "![x](http://127.0.0.2:9/beacon.png)",
        "[log in again](https://evil.example/login)",
        "<img src=x onerror=alert(1)>",
        "www.evil.example",
        "https://evil.example",
        "me@evil.example",
        ":red[alarm] :material/warning: :smile:",
        "$\\frac{1}{2}$",
        "**bold** _it_ `code` # head",
        "- a list\n1. item",
    ],
)
def test_plain_leaves_no_markdown(hostile):
    out = plain(hostile)
    shown = out.replace("\u200b", "")
    assert not re.findall(r"(?<!\\)[\[\]<>*_`#$:@~|]", shown), out
    assert not re.search(r"(?i)www\.", shown) and not re.match(r"\s*([-+=]|\d+[.)])", shown), out
    assert "\n" not in out
    assert as_shown(out) == hostile.replace("\n", " ")  # what is shown is the text itself


def test_ordinary_names_and_numbers_stay_as_they_are():
    for text in ["T-shirt/top", "capsnet-small-mnist", "test error 12.50% (±0.3)", "Ankle boot, 3 of 10"]:
        assert plain(text) == text


def test_control_and_bidirectional_characters_are_dropped():
    text = "ab\u202ecd\u2066e\u200bf\x00g\x1b[31mh\tz"
    assert clean(text) == "abcdefg[31mh z"
    assert clean("e\u0301\u200d") == "e\u0301\u200d"  # combining marks and joiners stay
    assert len(clean("x" * 10_000)) == MAX_CHARS


def test_other_places_get_their_own_escapes():
    assert plain("a`b`\u202e", "code") == "a'b'"
    assert plain("[x](y) <b>", "table") == "[x](y) <b>"
    assert plain('<a href="https://e">x</a> & <br>', "chart") == '&lt;a href="https://e"&gt;x&lt;/a&gt; &amp; &lt;br&gt;'
    with pytest.raises(ValueError):
        plain("x", "html")


def test_the_cores_sentences_get_a_longer_limit_than_a_name():
    sentence = "word " * 200  # 1,000 characters: a link's note or a caption the core built around names
    assert plain(sentence, limit=MAX_SENTENCES) == sentence
    assert len(plain(sentence)) == MAX_CHARS and plain(sentence).endswith("…")  # a name is still cut
    assert len(clean("x" * 10_000, MAX_SENTENCES)) == MAX_SENTENCES
