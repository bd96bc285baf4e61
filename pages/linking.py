"""A shared link's settings brought within what a page shows, with a note for each one changed."""

from __future__ import annotations

import streamlit as st

from capsviz.analysis.links import Linked, chosen, linked, named, several
from capsviz.text import MAX_SENTENCES, plain
from pages.state import STATE, Key, link_asks, link_asks_all


def link_number(slot: Key, lo: float, hi: float, default: float, what: str, whole: bool = True) -> int | float | None:
    """The session's opening link's ?param= for `slot` (read once, by the first page to ask)
    brought within [lo, hi] (capsviz.analysis.links), or None when the link had none. A value the
    page cannot show as it is leaves a note for `show_link_note`."""
    got = _link(slot.param, lo, hi, default, what, whole)
    return None if got is None else got.value


def _link(param: str, lo: float, hi: float, default: float, what: str, whole: bool) -> Linked | None:
    raw = link_asks(param)
    return None if raw is None else keep_link_note(param, linked(raw, lo, hi, default, what, whole))


def keep_link_note(param: str, got: Linked) -> Linked:
    """Keep `got`'s note, if any, for `show_link_note(param, ...)`; returns `got`."""
    if got.note:
        STATE.link_notes.setdefault()[param] = (got.note, got.value)
    return got


def show_link_note(param: str, current) -> None:
    """What the link asked for ?param= and what the page shows instead, while it still shows that."""
    notes = STATE.link_notes.get()
    if param not in notes:
        return
    note, value = notes[param]
    if current != value:  # the user has moved on
        notes.pop(param)
        return
    st.info(plain(note, limit=MAX_SENTENCES), icon=":material/link_off:")


def keep_within(slot: Key, lo: float, hi: float, default: float | None = None, what: str | None = None) -> None:
    """A widget bound to the URL's ?key=: a shared link's value brought within this widget's range
    with a note (Streamlit would show its default in silence), and a value kept from another page
    or a wider range (routing and EM iterations share ?iterations=) brought within it: Streamlit
    refuses it otherwise. `default`: the widget's own, shown for a malformed link value."""
    if not slot.present:
        whole = isinstance(lo, int) and isinstance(hi, int)
        got = _link(slot.param, lo, hi, lo if default is None else default, what or slot.param, whole)
        if got is not None and got.note:
            _replace_linked(slot, got.value)
    v = slot.get(None)
    if isinstance(v, int | float) and not lo <= v <= hi:
        slot.set(type(v)(min(max(v, lo), hi)))
    show_link_note(slot.param, slot.get(None))


def _replace_linked(slot: Key, value) -> None:
    """Show `value` in the widget bound to ?key= in place of the link's: Streamlit would read some
    malformed values its own way (?right=1.5 as 1), so the address gets the value too."""
    slot.set(value)
    st.query_params[slot.param] = str(value)  # before the widget is drawn: not bound to it yet in this run


def keep_choice(slot: Key, choices, default, what: str) -> None:
    """`keep_within` for a widget bound to ?key= that offers `choices` (a select slider, a radio):
    a shared link's value none of them is replaced by `default`, with a note."""
    if not slot.present:
        raw = link_asks(slot.param)
        got = None if raw is None else keep_link_note(slot.param, chosen(raw, choices, default, what))
        if got is not None and got.note:
            _replace_linked(slot, got.value)
    show_link_note(slot.param, slot.get(None))


def link_choice(slot: Key, options, default, what: str, label=str) -> None:
    """Before a widget bound to ?key= that offers `options` (a select box, a radio, a toggle, tabs;
    the address names each by `label(option)`, the text the widget shows, and a toggle by true or
    false): a shared link's value that names none of them leaves a note saying the page shows
    `default`, as Streamlit then does in silence."""
    if not slot.present:
        raw = link_asks(slot.param)
        names = {("true" if o else "false") if isinstance(o, bool) else label(o): o for o in options}
        given = None if raw is None else raw.lower() if all(isinstance(o, bool) for o in options) else raw
        if given is not None and given != "" and given not in names:
            written = next((n for n in names if n.lower() == given.strip().lower()), None)  # ?attack=bim for "BIM"
            if written is not None:
                slot.set(names[written])
                st.query_params[slot.param] = written  # as the widget bound to it writes it
            else:
                got = chosen(raw, list(names), next(k for k, o in names.items() if o == default), what)
                keep_link_note(slot.param, got._replace(value=default))
    show_link_note(slot.param, slot.get(default))


def link_choices(slot: Key, options, default: list, what: str, label=str) -> None:
    """`link_choice` for a multiselect bound to ?key= (its link repeats the parameter, one value
    per option): values that name no option are left out, as Streamlit leaves them, with a note."""
    shown = default  # before the widget is drawn for the first time: what it will show
    if not slot.present:
        raws = link_asks_all(slot.param)
        names = {label(o): o for o in options}
        if raws is not None and raws != [""]:
            got = several(raws, list(names), [label(o) for o in default], what)
            shown = [names[n] for n in got.value]
            keep_link_note(slot.param, got._replace(value=shown))
    show_link_note(slot.param, slot.get(shown))


def link_keyed(slot: Key, options, default, what: str, words, shown=lambda option: option) -> None:
    """Before a widget that offers `options` under its words in the reader's language (`words(option)`)
    and whose address holds each option's stable key instead (str(option), written by `keep_keyed`):
    seeds the widget from a shared link's ?param= (one value, or a multiselect's several when
    `default` is a list) naming an option by its key or by its words in any language, with a note
    for a value that names none; `shown(option)`: what the widget holds for it (a tab its words).
    A value the session holds in another language's words (the reader switched) is brought over."""
    several_ = isinstance(default, list)
    said = {words(o): o for o in options}
    if not slot.present:  # the widget takes no default of its own: the session's value is its only one
        slot.set([shown(o) for o in default] if several_ else shown(default))
        raws = link_asks_all(slot.param)
        if raws is not None and raws != [""]:
            # each value that names an option in any language, as this reader's words for it
            asked = [words(o) if (o := named(r, options, words)) is not None else r for r in raws]
            if several_:
                got = several(asked, list(said), [words(o) for o in default], what)
                value = [shown(said[w]) for w in got.value]
            else:
                got = chosen(asked[-1], list(said), words(default), what)
                value = shown(said[got.value])
            slot.set(value)
            keep_link_note(slot.param, got._replace(value=value))
    elif not several_ and slot.get() not in [shown(o) for o in options]:
        if (o := named(str(slot.get()), options, words)) is not None:
            slot.set(shown(o))
    show_link_note(slot.param, slot.get())


def keep_keyed(slot: Key, value, default) -> None:
    """After a widget seeded by `link_keyed`: its choice (an option, or a multiselect's list) in the
    address by its stable key, the same in every language; none at the widget's default."""
    if value == default:
        st.query_params.pop(slot.param, None)
    else:
        st.query_params[slot.param] = [str(v) for v in value] if isinstance(value, list) else str(value)
