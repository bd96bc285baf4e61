"""One hostile student beside a class, at the protocol level (tests/load/protocol.py): a served app
with the shipped models and the real MNIST, a few students working as a class does, and one
student in several tabs from another machine sending Streamlit's clear-cache message twice a
second per tab, crafted links and the dearest pages without a pause. The class's own work must
come through whole: every move answered, no exception, no other student's state, no model loaded
again for the hostile student's messages. (How fast the class's answers stay is measured by
`python tests/load/protocol.py --hostile` and reported in BENCH.md, not timed here.)"""

import asyncio
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "load"))
pytest.importorskip("websockets")
import protocol  # noqa: E402
from st_helpers import run_async  # noqa: E402 - protocol put tests/e2e on the path


def test_a_hostile_student_spoils_nothing_for_the_class(real_data, tmp_path, monkeypatch):
    monkeypatch.setenv("CAPSVIZ_DATA_DIR", str(real_data))
    log = tmp_path / "server.log"
    proc, url = protocol.start_app(None, log)
    try:

        async def lesson():
            await protocol.warm_up(url, 1, protocol.MODELS)  # every model the class opens, loaded before it
            await protocol.hostile_student(url, 20, tabs=1)  # the pages and models it visits, loaded once
            loads = protocol.reloads(log)
            class_, (hostile, cleared) = await asyncio.gather(
                protocol.run_class(url, 4, arrive=4, seconds=25, think=2, remote=True),
                protocol.hostile_student(url, 30, tabs=2),
            )
            return class_, hostile, cleared, protocol.reloads(log) - loads

        class_, hostile, cleared, loads = run_async(lesson())  # a loop of its own: the browser tests keep one on this thread
    finally:
        protocol.stop_streamlit(proc)

    assert cleared >= 60, "the hostile student sent its clear-cache messages"
    assert sum(hostile.moves.values()) >= 30, dict(hostile.moves)
    assert {"odd link", "dear page", "burst"} <= set(hostile.moves)
    assert not hostile.problems["exception"], hostile.problems["exception"][:3]  # crafted links: messages, no tracebacks
    assert loads == 0, "a student's clear-cache message made the server load its models again"
    assert sum(class_.moves.values()) >= 4 * 5, dict(class_.moves)  # every student worked
    for kind in ("error", "leak", "lost", "exception"):
        assert not class_.problems[kind], (kind, class_.problems[kind][:3])
