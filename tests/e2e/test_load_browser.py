"""The class-on-one-server script, small: two browser sessions on the shipped models, each
checking after every move that it sees only its own image, sliders and model."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
SCRIPT = Path(__file__).resolve().parents[1] / "load" / "loadtest.py"


def test_two_sessions_time_their_moves_and_see_only_their_own(shipped_server):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--url", shipped_server, "--sessions", "2", "--seconds", "20", "--arrive", "2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert re.search(r"errors: 0\s+leaks: 0", done.stdout)
    rows = dict(re.findall(r"^\s+(open page|slider key press|new image|routing iteration)\s+n=\s*(\d+)", done.stdout, re.M))
    assert int(rows.get("open page", 0)) >= 2  # each session opened, and moved at least once
    assert int(rows.get("slider key press", 0)) + int(rows.get("new image", 0)) + int(rows.get("routing iteration", 0)) >= 2
