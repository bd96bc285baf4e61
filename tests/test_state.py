"""The one session object (pages/state.py): every key a page keeps is declared there, with a type,
a default within its bounds or choices, and the link parameter that sets it; pages reach the
session and read the link only through it. The scans read the pages' source, so a page that
writes st.session_state["x"] or key="x" for a declared key fails here."""

import ast
from pathlib import Path

import pytest
import streamlit as st

from pages.state import STATE, Key, Keys, declared, is_declared, link_asks, link_asks_all, read_link

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "pages").glob("*.py")) + [ROOT / "app.py"]
READERS = {"active.py", "classroom.py", "sidebar.py", "state.py"}  # the model asked for, a teacher key to drop, the view for the site


def parsed(path: Path) -> ast.Module:
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            child.parent = node
    return tree


def literal(node) -> str | None:
    """A key written in the source: a string, or an f-string with X for each filled-in part."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "X" for v in node.values)
    return None


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_no_page_touches_the_session_but_through_the_session_object(path):
    if path.name == "state.py":
        return
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Attribute) and node.attr == "session_state":
            pytest.fail(f"{path.name}:{node.lineno} uses st.session_state; use pages.state.STATE")
        if isinstance(node, ast.Attribute) and node.attr == "_session_state":  # the clear-cache guard reads another session's
            index = node.parent.slice
            assert isinstance(index, ast.Attribute) and index.attr == "key", f"{path.name}:{node.lineno}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_widget_keys_the_session_keeps_come_from_the_session_object(path):
    for node in ast.walk(parsed(path)):
        if not isinstance(node, ast.Call):
            continue
        kw = {k.arg: k.value for k in node.keywords}
        if "key" in kw and (name := literal(kw["key"])) is not None:
            assert not is_declared(name), f"{path.name}:{node.lineno}: key {name!r} is declared: write key=STATE....key"
        bound = isinstance(kw.get("bind"), ast.Constant) and kw["bind"].value == "query-params"
        if bound:  # a widget bound to the address: its key is a declared one, whose link parameter is its name
            key = kw.get("key")
            assert isinstance(key, ast.Attribute) and key.attr == "key", f"{path.name}:{node.lineno}: a bound widget's key comes from STATE"
            slot = key.value
            if isinstance(slot, ast.Attribute) and isinstance(slot.value, ast.Name) and slot.value.id == "STATE":
                declared_key = getattr(STATE, slot.attr)
                assert declared_key.param == declared_key.name, f"{path.name}:{node.lineno}"


@pytest.mark.parametrize("path", [p for p in SOURCES if p.name not in READERS], ids=lambda p: p.name)
def test_pages_read_the_link_only_through_the_session_object(path):
    """Pages may write the address (st.query_params[k] = v, .update, .pop), never read it: the
    link is read once, by pages.state.read_link, and handed out by link_asks."""
    tree = parsed(path)
    aliases = {"query_params"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute) and node.value.attr == "query_params":
            aliases |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        named = (isinstance(node, ast.Attribute) and node.attr in aliases) or (isinstance(node, ast.Name) and node.id in aliases)
        if not named or isinstance(node.parent, ast.Assign) and node.parent.value is node or isinstance(node.ctx, ast.Store):
            continue
        parent = node.parent
        writes = (isinstance(parent, ast.Subscript) and not isinstance(parent.ctx, ast.Load)) or (
            isinstance(parent, ast.Attribute) and parent.attr in {"update", "pop"}
        )
        assert writes, f"{path.name}:{node.lineno} reads st.query_params; use pages.state.link_asks"


def test_every_key_has_a_type_a_default_of_that_type_within_its_bounds_and_choices_and_a_purpose():
    keys = declared()
    names = [k.name if isinstance(k, Key) else k.pattern for k in keys]
    assert len(names) == len(set(names)) and len(keys) > 40
    for k in keys:
        assert isinstance(k.default, k.type), k
        assert k.doc, k
        if k.bounds is not None:
            lo, hi = k.bounds
            assert lo < hi and lo <= k.default <= hi, k
        if k.choices is not None:
            assert k.default in k.choices and len(set(k.choices)) == len(k.choices), k
    assert STATE.image.param == "image" and STATE.tour_step.param == "step" and STATE.pg_toy.param == "toy"
    assert STATE.iterations.bounds == (1, 10) and STATE.rotate.bounds == (-90, 90) and STATE.squash.bounds == (0.0, 5.0)
    assert STATE.tab.choices == ("Affine transforms", "Adversarial attacks") and STATE.attack.choices == ("fgsm", "bim")


def test_a_family_names_one_key_per_filling_and_recognises_its_own():
    t = STATE.pg_T(toy="em")
    assert isinstance(STATE.pg_T, Keys) and t.name == "pg_em_T" and t.key == "pg_em_T" and t.param == "T" and t.default == 3
    assert STATE.pg_T.matches("pg_dynamic_T") and not STATE.pg_T.matches("pg_dynamic_Tx") and not STATE.pg_T.matches("pg_T")
    assert is_declared("pair_i1") and is_declared("running:Run the lab") and is_declared("image")
    assert not is_declared("lab_err") and not is_declared("pg_dynamic_pt_0_1_0_0")


@pytest.fixture
def session(monkeypatch):
    """A dict standing in for this browser's st.session_state, and an address."""
    state: dict = {}
    monkeypatch.setattr(st, "session_state", state)
    return state


def test_a_key_reads_its_default_until_set_and_keeps_mutable_defaults_apart(session):
    assert STATE.tour_step.get() == 1 and not STATE.tour_step.present and STATE.tour_step.get(None) is None
    STATE.tour_step.set(4)
    assert session == {"tour_step": 4} and STATE.tour_step.get() == 4 and STATE.tour_step.present
    assert STATE.tour_step.setdefault(9) == 4 and STATE.tour_step.pop() == 4 and STATE.tour_step.pop() is None
    notes = STATE.link_notes.setdefault()
    notes["x"] = 1
    assert session["link_notes"] == {"x": 1} and STATE.link_notes.default == {}  # a fresh dict for each session


class Address(dict):
    """st.query_params as a page sees it: each parameter with all its values."""

    def get_all(self, k):
        return list(self[k])


def test_the_link_is_read_once_and_each_parameter_handed_out_once(session, monkeypatch):
    monkeypatch.setattr(st, "query_params", Address({"image": ["3"], "lab_models": ["a", "b"], "t": ["1", "2"]}))
    read_link()
    monkeypatch.setattr(st, "query_params", Address({"image": ["7"]}))  # the page has moved on: the link stays the opening one
    read_link()
    assert link_asks("image") == "3" and link_asks("image") is None
    assert link_asks("t") == "2"  # the last, as st.query_params[...] gives it
    assert link_asks_all("lab_models") == ["a", "b"] and link_asks_all("lab_models") is None
    assert link_asks("step") is None
