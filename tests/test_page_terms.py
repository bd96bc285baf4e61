"""A term used on a page links to its glossary entry from that page (pages.terms): every page lists
the entries its text and its controls' help name, each a link that opens the glossary with that
entry first, in the reader's language; the tour links each step's terms under the step."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from streamlit.testing.v1 import AppTest
from test_app import router_mode  # noqa: F401 - an autouse fixture: st.navigation in charge, as served
from test_no_english import PAGES, opened  # noqa: F401 - the fixture: the app over the shipped models

from capsviz.glossary import TERMS, entries, label, links, term
from capsviz.i18n import speaking
from capsviz.text import plain

LINK = re.compile(r"\[([^\]]+)\]\((glossary\?[^)]+)\)")
# The glossary itself, the Teacher page (no term of capsules) and the chapter and the tour, which
# link their words in place
OWN = {"glossary", "teacher", "why", "tour"}


def test_every_entry_is_first_on_the_glossary_page_its_link_opens():
    for key, entry in TERMS.items():
        assert entries(entry.english)[:1] == [entry], key  # the papers' own names find their entry first


@pytest.mark.parametrize("lang", ["en", "zh-Hans", "ja"])
def test_links_name_each_entry_in_the_readers_language_and_keep_it(lang):
    with speaking(lang):
        shown = links(["c", "u_hat", "c"], lang)
        found = LINK.findall(shown)
        assert [name for name, _ in found] == [plain(label("c")), plain(label("u_hat"))]  # once each, in the reader's words
    for (_, address), key in zip(found, ["c", "u_hat"], strict=True):
        query = parse_qs(urlsplit(address).query)
        assert query["lang"] == [lang] and entries(query["term"][0])[0] is term(key)


def linked(at: AppTest) -> list[tuple[str, str]]:
    return [m for md in at.markdown if "glossary?term=" in md.value for m in LINK.findall(md.value)]


@pytest.mark.parametrize("page", sorted(set(PAGES) - OWN))
def test_every_page_links_the_terms_it_uses(opened, page):  # noqa: F811
    at = opened(page, "en")
    assert not at.exception, at.exception
    found = linked(at)
    assert found, f"{page}: no term linked to the glossary"
    for name, address in found:
        query = parse_qs(urlsplit(address).query)
        assert query["lang"] == ["en"]
        assert plain(label(next(k for k, e in TERMS.items() if e is entries(query["term"][0])[0]))) == name
    with speaking("zh-Hans"):
        assert any(re.search(r"[\u4e00-\u9fff]", name) for name, _ in linked(opened(page, "zh-Hans"))), page


def test_the_tour_links_each_steps_terms_under_the_step(opened):  # noqa: F811
    at = opened("tour", "en")
    for _ in range(6):
        at.button(key="tour_next").click().run()
        if skip := [b for b in at.button if b.key and "skip" in b.key]:  # a question before the step: skip it
            skip[0].click().run()
        notes = [c.value for c in at.caption if c.value.startswith("In the glossary:")]
        if notes:
            assert LINK.findall(notes[0])
            return
    pytest.fail("no tour step among the first seven linked its terms")
