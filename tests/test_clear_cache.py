"""Streamlit's "clear cache" message, sent as a hostile student would: a websocket client that
speaks Streamlit's protocol sends it twice a second. The server's shared models must not load
again for it; the teacher's (a browser on the server's own machine) still clears them."""

import asyncio
import sys
import time
from pathlib import Path

import pytest
import test_app

sys.path.insert(0, str(Path(__file__).resolve().parent / "e2e"))
from st_helpers import run_async, start_streamlit, stop_streamlit  # noqa: E402

websockets = pytest.importorskip("websockets")
from streamlit.proto.BackMsg_pb2 import BackMsg  # noqa: E402
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg  # noqa: E402

EARLY = ForwardMsg.DESCRIPTOR.fields_by_name["script_finished"].enum_type.values_by_name["FINISHED_EARLY_FOR_RERUN"].number
LOADED = "capsviz: loaded model tiny-capsnet.safetensors"


@pytest.fixture
def served(tmp_path, synthetic_root):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    test_app.tiny_checkpoints(folder)
    env = {"CAPSVIZ_CHECKPOINTS": str(folder), "CAPSVIZ_DATA_DIR": str(synthetic_root), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    log = tmp_path / "server.log"
    proc, url = start_streamlit(env, log)
    yield url, log
    stop_streamlit(proc)


class Client:
    """One browser session over Streamlit's websocket. `forwarded`: the X-Forwarded-For a proxy in
    front would send (the replicas' nginx sends the browser's address)."""

    def __init__(self, url: str, forwarded: str | None = None):
        self.url, self.forwarded = url, forwarded

    async def __aenter__(self):
        headers = {"X-Forwarded-For": self.forwarded} if self.forwarded else None
        ws_url = "ws" + self.url.removeprefix("http") + "/_stcore/stream"
        self.ws = await websockets.connect(ws_url, subprotocols=["streamlit", "xsrf"], additional_headers=headers, max_size=None)
        return self

    async def __aexit__(self, *exc):
        await self.ws.close()

    async def open(self, page: str, query: str) -> list[str]:
        """Rerun `page` with `query`; the exceptions the run showed."""
        msg = BackMsg()
        msg.rerun_script.page_name = page
        msg.rerun_script.query_string = query
        await self.ws.send(msg.SerializeToString())
        shown = []
        async with asyncio.timeout(120):
            async for raw in self.ws:
                fwd = ForwardMsg()
                fwd.ParseFromString(raw)
                kind = fwd.WhichOneof("type")
                if (
                    kind == "delta"
                    and fwd.delta.WhichOneof("type") == "new_element"
                    and fwd.delta.new_element.WhichOneof("type") == "exception"
                ):
                    shown.append(fwd.delta.new_element.exception.message)
                if kind == "script_finished" and fwd.script_finished != EARLY:
                    return shown
        raise AssertionError("the script never finished")

    async def clear_cache(self) -> None:
        msg = BackMsg()
        msg.clear_cache = True
        await self.ws.send(msg.SerializeToString())


def loads(log: Path) -> int:
    return log.read_text(errors="replace").count(LOADED)


def test_a_students_clear_cache_messages_do_not_reload_the_shared_models(served):
    url, log = served
    query = "model=tiny-capsnet.safetensors&image=1"

    async def student_then_teacher():
        async with Client(url, forwarded="10.0.0.7") as student:  # a browser elsewhere, behind a proxy
            assert await student.open("explorer", query) == []
            assert loads(log) == 1
            for _ in range(12):  # twice a second for 6 s
                await student.clear_cache()
                await asyncio.sleep(0.5)
            assert await student.open("explorer", query) == []
            assert loads(log) == 1, log.read_text()[-2000:]  # the model stayed loaded for everyone
        async with Client(url) as teacher:  # a browser on the server's own machine
            assert await teacher.open("explorer", query) == []
            await teacher.clear_cache()
            await asyncio.sleep(0.5)
            assert await teacher.open("explorer", query) == []
            assert loads(log) == 2  # the teacher may still clear the caches

    start = time.monotonic()
    run_async(student_then_teacher())
    assert time.monotonic() - start < 120
