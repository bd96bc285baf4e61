"""`capsviz app` with every script run profiled by cProfile (tests/load/student_costs.py --cprofile
starts it; not for serving a class: the profiler slows every run down).

    CAPSVIZ_PROFILE_DIR=DIR python tests/load/profiled_app.py [streamlit options]

Each script run (a page run or a fragment's) is profiled in its own thread and counted under the
label DIR/label holds when the run ends, with the run thread's CPU seconds. SIGUSR1 writes what
was counted since the last SIGUSR1: DIR/LABEL.prof (pstats, every run of that label merged) and
DIR/LABEL.json (runs and their thread CPU seconds), then DIR/written, and starts counting again.
"""

from __future__ import annotations

import cProfile
import json
import os
import pstats
import signal
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

from streamlit.runtime.scriptrunner import script_runner
from streamlit.web import cli

sys.path.insert(0, os.getcwd())  # the checkout the app is served from
from capsviz.cli.serving import app_command  # noqa: E402

OUT = Path(os.environ["CAPSVIZ_PROFILE_DIR"])
_lock = threading.Lock()
_runs: dict[str, list] = defaultdict(list)  # label -> [(profile, thread CPU seconds)]
_plain = script_runner.ScriptRunner._run_script


def _label() -> str:
    try:
        return (OUT / "label").read_text().strip() or "unlabelled"
    except OSError:
        return "unlabelled"


def _profiled(self, rerun_data):
    prof, t0 = cProfile.Profile(time.thread_time), time.thread_time()  # CPU time: robust to other load on the machine
    prof.enable()
    try:
        return _plain(self, rerun_data)
    finally:
        prof.disable()
        spent = time.thread_time() - t0
        with _lock:
            _runs[_label()].append((prof, spent))


def _dump(*_) -> None:
    with _lock:
        runs = dict(_runs)
        _runs.clear()
    for label, taken in runs.items():
        stats = pstats.Stats(taken[0][0])
        for prof, _ in taken[1:]:
            stats.add(prof)
        stats.dump_stats(OUT / f"{label}.prof")
        (OUT / f"{label}.json").write_text(json.dumps({"runs": len(taken), "thread_cpu_s": [s for _, s in taken]}))
    (OUT / "written").write_text(" ".join(runs))


if __name__ == "__main__":
    script_runner.ScriptRunner._run_script = _profiled
    signal.signal(signal.SIGUSR1, _dump)
    command, env = app_command(None, sys.argv[1:])
    os.environ.update(env)
    sys.argv = ["streamlit", *command[3:]]  # "streamlit run .../app.py [options]"
    sys.exit(cli.main())
