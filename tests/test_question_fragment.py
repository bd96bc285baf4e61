"""A question's choice reruns only the question, at the protocol level (tests/load/protocol.py): a
served app, one student from another machine on the explorer. Choosing sends back the question's
own few elements and none of the page's figures; "Commit my answer" then runs the whole page, which
reveals the figure. What this saves a class is measured by `python tests/load/protocol.py` and
reported in BENCH.md, not timed here."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "load"))
pytest.importorskip("websockets")
import protocol  # noqa: E402
from st_helpers import run_async  # noqa: E402 - protocol put tests/e2e on the path


def test_a_choice_reruns_the_question_and_the_commit_the_page(real_data, tmp_path, monkeypatch):
    monkeypatch.setenv("CAPSVIZ_DATA_DIR", str(real_data))
    proc, url = protocol.start_app(None, tmp_path / "server.log")
    try:

        async def student():
            s = protocol.Student(0, url, protocol.Stats(), think=0, model=protocol.MODELS[0], remote=True)
            opened = await s.connect_and_open("explorer")
            s.ids, s.last = opened.ids, opened
            asked = s._question()
            assert asked is not None, "the explorer asks nothing before its figure"
            pick, button, options = asked
            radio = s.ids[pick][0]
            chosen = await s.rerun("question choice", widgets=[(pick, "string_value", options[0])])
            s.ids = {**s.ids, **chosen.ids}
            committed = await s.rerun("question answered", widgets=[(button, "trigger_value", True)])
            await s.ws.close()
            return opened, chosen, committed, radio

        opened, chosen, committed, radio = run_async(student())
    finally:
        protocol.stop_streamlit(proc)

    kinds = lambda run: [what for what, _ in run.elements]  # noqa: E731
    assert chosen.fragment, "the choice reran the whole page"
    assert "radio" in kinds(chosen) and "imgs" not in kinds(chosen), kinds(chosen)
    assert len(chosen.elements) < len(opened.elements) / 2, (len(chosen.elements), len(opened.elements))
    assert not committed.fragment, "the commit did not run the page again"
    # the page's next question may follow its figure: this one's choices are gone
    assert all(sub.id != radio for what, sub in committed.elements if what == "radio"), "the question still waits after its commit"
    assert len(committed.elements) > len(opened.elements), "the commit revealed nothing more than the question showed"
    assert not chosen.exceptions and not committed.exceptions
