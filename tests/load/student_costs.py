"""Where a served student's milliseconds go: the server's CPU per move, and what it spends it on.

    pip install py-spy                                  # the sampling profiler this reads (not needed by capsviz)
    python tests/load/student_costs.py --moves 12             # starts `capsviz app` with the shipped models
    python tests/load/student_costs.py --raw-dir profiles/    # also keep py-spy's raw stacks, one file per move
    python tests/load/student_costs.py --cprofile profiles/   # cProfile of every script run, per kind (slower runs)
    python tests/load/student_costs.py --against main         # CPU per move here and on main's HEAD, kind by kind in turn

Each kind of move a student makes (the first page, each page's first open, a tour step, a slider
move, a new image, a routing change, an EM change, a page change, a language switch, a question
answered) is made --moves times by simulated students (tests/load/protocol.py's, which speak
Streamlit's websocket protocol) while py-spy samples every thread of the server; then the
teacher's (at the server's own keyboard): the Teacher page's first open, and its refresh (its two
live parts rerun, as the browser asks every few seconds), with the kinds' students before in the
class's store. New students for each kind, each with its own test
images: what a class costs, where every student follows its own image, not one student's repeats
(a student's second look at the same view is cheaper: it is kept). Prints, per kind, the server's
CPU per move (from /proc, in the kernel's 10 ms ticks, so a median of moves) and the share of the
samples in each part:

- model: PyTorch (the networks' passes, routing);
- pictures: PIL drawing and encoding images; charts: plotly building figures and their JSON;
- core: capsviz's own Python (numbers into words, numpy);
- script: Streamlit running the page (elements, widgets, session state, caches);
- server: the event loop (websocket messages, image requests);
- watching: Streamlit's polling of its config files.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import pstats
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import protocol as P  # noqa: E402

SWITCH_TO = ("简体中文", "日本語", "English")  # the sidebar's language switch, as it shows the languages
PARTS = ("model", "pictures", "charts", "core", "script", "server", "watching")


def part_of(stack: list[str]) -> str:
    """The part of the server a sampled stack (outermost frame first) is spending its time in."""
    whole = ";".join(stack)
    if "ScriptRunner" not in whole and "fragment.py" not in whole:
        return "watching" if "PollingPathWatcher" in whole else "server"
    for needle, part in (("torch/", "model"), ("PIL/", "pictures"), ("plotly", "charts"), ("orjson", "charts"), ("capsviz/", "core")):
        if needle in whole:
            return part
    return "script"


def read_samples(path: Path) -> Counter:
    """py-spy's raw output (one 'frame;frame;... count' a line) counted by part."""
    parts: Counter = Counter()
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if stack and n.isdigit():
            parts[part_of(stack.split(";"))] += int(n)
    return parts


class Sampler:
    """py-spy sampling the server's threads while the measured moves run, and only then (nothing
    where py-spy is not installed)."""

    def __init__(self, spy: str | None, pid: int, out: Path):
        self.spy, self.pid, self.out = spy, pid, out
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        if self.spy is None:
            return
        self.proc = subprocess.Popen(
            [self.spy, "record", "-p", str(self.pid), "-r", "200", "-f", "raw", "-o", str(self.out), "--nonblocking"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)  # attached

    def stop(self) -> Counter:
        if self.proc is not None:
            self.proc.send_signal(2)
            self.proc.wait(timeout=30)
        return read_samples(self.out) if self.proc is not None and self.out.exists() else Counter()


class Profiles:
    """With --cprofile: the label tests/load/profiled_app.py files each script run under, and its
    profiles written per label (DIR/LABEL.prof, DIR/LABEL.json)."""

    def __init__(self, folder: Path | None, pid: int):
        self.folder, self.pid = folder, pid

    def label(self, name: str) -> None:
        if self.folder is not None:
            (self.folder / "label").write_text(name.replace(" ", "_"))

    def write(self) -> None:
        if self.folder is not None:
            done = self.folder / "written"
            done.unlink(missing_ok=True)
            os.kill(self.pid, signal.SIGUSR1)
            for _ in range(600):  # written by the server's main thread
                if done.exists():
                    return
                time.sleep(0.1)

    def top(self, kind: str, n: int) -> str:
        """The functions a kind's runs spent the most time in (their own time, then capsviz's by cumulative time)."""
        prof = self.folder / f"{kind.replace(' ', '_')}.prof" if self.folder else None
        if prof is None or not prof.exists():
            return ""
        runs = json.loads(prof.with_suffix(".json").read_text())
        out = io.StringIO()
        out.write(f"  {runs['runs']} script runs, script-thread CPU {1000 * sum(runs['thread_cpu_s']):.0f} ms in all (profiled)\n")
        stats = pstats.Stats(str(prof), stream=out)
        stats.sort_stats("tottime").print_stats(n)
        stats.sort_stats("cumulative").print_stats(r"capsviz/|pages/", n)
        return out.getvalue()


def asked(folder: Path, n: int) -> None:
    """The class store beside the models in `folder` holding `n` questions, each answered by one
    student, as a class each on its own images leaves it (a class of 100 in BENCH.md left 497)."""
    import numpy as np

    sys.path.insert(0, str(P.ROOT))
    from capsviz import store
    from capsviz.analysis import questions
    from capsviz.viz import thumbnail

    s = store.Store(folder)
    rng = np.random.default_rng(0)
    for k in range(len(s.splits()), n):
        scores = rng.random(10)
        q = questions.longest_capsule("m", rng.random((28, 28)), scores, int(scores.argmax()), [str(d) for d in range(10)])
        text, labels = q.kept()
        about = (q.model_name(), thumbnail(q.picture))  # as pages.asking records it: the Teacher page shows each
        s.answer(q.qid, q.page, text, q.keys, labels, q.answer, f"{k:016x}", q.keys[k % len(q.keys)], about=about)
    s.close()


async def one_kind(
    url: str, pids, kind: str, moves: int, first: int, sampler: Sampler, profiles: Profiles, folder: Path | None = None, questions: int = 0
) -> tuple[list[float], Counter]:
    """CPU seconds of the server for each of `moves` moves of this kind, by new students, and the
    samples taken during those moves (the students' arrival and setup before them are not sampled).
    The teacher's kinds first have the server's class store (in its model folder `folder`) hold
    `questions` questions."""
    costs: list[float] = []

    async def timed(act) -> None:
        profiles.label(kind)
        costs.append(await P.server_cost(pids, act))
        profiles.label("setup")

    profiles.label("setup")
    if kind in ("open teacher", "teacher refresh"):  # at the server's own keyboard
        if folder is not None:
            asked(folder, questions)
        teachers = [P.Student(first + k, url, P.Stats(), 0, P.MODELS[0]) for k in range(moves if kind == "open teacher" else 1)]
        if kind == "open teacher":
            sampler.start()
            for s in teachers:
                await timed(lambda s=s: s.connect_and_open("teacher"))
        else:  # its two live parts (the class, the questions), each rerun every few seconds
            live = sorted((await teachers[0].connect_and_open("teacher")).fragments)
            assert len(live) == 2, live
            sampler.start()
            for _ in range(moves):
                await timed(lambda: teachers[0].refresh(live))
        parts = sampler.stop()
        for s in teachers:
            await s.leave()
        return costs, parts
    if kind.startswith("open "):  # a new session's first open of a page, as the teacher's link opens it
        page = kind.removeprefix("open ")
        crowd = [P.Student(first + k, url, P.Stats(), 0, P.FIRST_OPEN[page], remote=True) for k in range(moves)]
        sampler.start()
        for s in crowd:
            await timed(lambda s=s: s.connect_and_open(page))
        parts = sampler.stop()
        for s in crowd:
            await s.leave()
        return costs, parts
    students = max(2, moves // 4)  # each makes a few moves, on its own images
    crowd = [P.Student(first + k, url, P.Stats(), 0, P.MODELS[k % len(P.MODELS)], remote=True) for k in range(students)]
    setup = {"slider": "explorer", "new image": "explorer", "routing iterations": "routing", "em iterations": "em"}.get(kind)
    setup = {"question answered": "explorer", "language switch": "explorer"}.get(kind, setup)
    for s in crowd:
        await s.connect()
        await s.open()
        if setup:
            await s.change_page(setup)
        if kind in ("slider", "new image", "language switch"):
            await s.answer(commit=False)  # the explorer's question skipped: its figures shown
    sampler.start()
    for n, s in enumerate(crowd):
        act = {
            "tour step": s.tour_step,
            "slider": s.slider,
            "new image": s.new_image,
            "routing iterations": lambda s=s: s.iterations("routing iterations", 10),
            "em iterations": lambda s=s: s.iterations("em iterations", 5),
            "page change": s.change_page,
            "language switch": lambda s=s, n=n: s.switch_language(SWITCH_TO[(n + len(costs)) % 3]),
            "question answered": s.answer,
        }[kind]
        for _ in range(-(-moves // students)):
            if kind == "question answered" and s.last is not None and not s._question():
                await s.new_image()  # a new image asks again (not measured)
            await timed(act)
    parts = sampler.stop()
    for s in crowd:
        await s.leave()
    return costs[:moves], parts


KINDS = (
    [
        "tour step",
        "slider",
        "new image",
        "routing iterations",
        "em iterations",
        "page change",
        "language switch",
        "question answered",
    ]
    + [f"open {p}" for p in P.FIRST_OPEN]
    + ["open teacher", "teacher refresh"]
)


async def compare(a) -> int:
    """Each kind's CPU per move on this checkout's `capsviz app` and on commit `a.against`'s (a git
    worktree of it, with its shipped models), both served at once and measured in turn, kind by
    kind (the order alternating), by the same students with the same images."""
    rev = subprocess.run(["git", "-C", str(P.ROOT), "rev-parse", "--short", a.against], capture_output=True, text=True)
    if rev.returncode:
        print(f"--against {a.against}: not a commit of this repository ({rev.stderr.strip()})")
        return 2
    here = subprocess.run(["git", "-C", str(P.ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    old = Path(tempfile.mkdtemp()) / "against"
    subprocess.run(["git", "-C", str(P.ROOT), "worktree", "add", "--detach", str(old), a.against], check=True, capture_output=True)
    servers: dict[str, tuple] = {}
    report = {"cpu": P.cpu_name(), "moves": a.moves, "kinds": {}}
    try:
        for name, root in ((here, P.ROOT), (rev.stdout.strip(), old)):
            models = P.model_links(root)
            proc, url = P.start_app(None, Path(tempfile.mkdtemp()) / "server.log", root, env={"CAPSVIZ_CHECKPOINTS": str(models)})
            servers[name] = (proc, url, P.server_pids(proc.pid, [])[0], models)
        anchors = []
        for _, url, pids, _ in servers.values():
            await P.warm_up(url, 1)
            await P.first_opens(url, pids, students=1)
            anchors.append(P.Student(199, url, P.Stats(), 0, P.MODELS[0]))
            await anchors[-1].connect()
            await anchors[-1].open()
        names = list(servers)
        print(f"{P.cpu_name()}; {a.moves} moves of each kind; server CPU ms per move, median")
        print(f"{'move':22} " + " ".join(f"{n:>9}" for n in names))
        first = 0
        for n, kind in enumerate(a.kinds):
            ms, every = {}, {}
            for name in names if n % 2 == 0 else names[::-1]:
                _, url, pids, models = servers[name]
                costs, _ = await one_kind(url, pids, kind, a.moves, first, Sampler(None, 0, Path()), Profiles(None, 0), models, a.questions)
                ms[name], every[name] = 1000 * statistics.median(costs), [round(1000 * c) for c in costs]
            first += a.moves if kind.startswith("open ") else max(2, a.moves // 4)
            report["kinds"][kind] = {k: {"median_ms": round(v, 1), "each_ms": every[k]} for k, v in ms.items()}
            print(f"{kind:22} " + " ".join(f"{ms[k]:9.1f}" for k in names), flush=True)
        for s in anchors:
            await s.leave()
        if a.json:
            Path(a.json).write_text(json.dumps(report, indent=1))
    finally:
        for proc, *_ in servers.values():
            P.stop_streamlit(proc)
        subprocess.run(["git", "-C", str(P.ROOT), "worktree", "remove", "--force", str(old)], capture_output=True)
    return 0


async def main(a) -> int:
    if a.against:
        return await compare(a)
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    spy = spy if Path(spy).exists() else None
    if spy is None and not a.cprofile:
        print("note: py-spy is not installed here (`pip install py-spy`): no shares by part", file=sys.stderr)
    log = Path(tempfile.mkdtemp()) / "server.log"
    folder = Path(a.cprofile).resolve() if a.cprofile else None
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    models = P.model_links()
    proc, url = P.start_app(
        None,
        log,
        how="profiled" if folder else "capsviz",
        env={"CAPSVIZ_CHECKPOINTS": str(models), **({"CAPSVIZ_PROFILE_DIR": str(folder)} if folder else {})},
    )
    raw = Path(a.raw_dir) if a.raw_dir else Path(tempfile.mkdtemp())
    raw.mkdir(parents=True, exist_ok=True)
    report = {"cpu": P.cpu_name(), "moves": a.moves, "kinds": {}}
    try:
        pids, _ = P.server_pids(proc.pid, [])
        profiles = Profiles(folder, pids[0])
        await P.warm_up(url, 1)
        await P.first_opens(url, pids, students=1)  # every page once: the models, test sets and page code are loaded
        # One student stays connected throughout, as a class does: with no session left Streamlit
        # forgets the pages' compiled code, and the next student alone would pay for compiling it.
        anchor = P.Student(199, url, P.Stats(), 0, P.MODELS[0])
        await anchor.connect()
        await anchor.open()
        profiles.write()  # what the warm-up ran: not counted
        print(f"{P.cpu_name()}; server {pids}; {a.moves} moves of each kind, new students with their own images")
        print(f"{'move':22} {'CPU ms':>7}  " + "  ".join(f"{p:>8}" for p in PARTS))
        first = 0  # students 0 to 159: each its own test images (160 onwards are the warm-up's)
        for kind in a.kinds:
            out = raw / f"{kind.replace(' ', '_')}.txt"
            costs, parts = await one_kind(url, pids, kind, a.moves, first, Sampler(spy, pids[0], out), profiles, models, a.questions)
            first += a.moves if kind.startswith("open ") else max(2, a.moves // 4)
            total = sum(parts.values()) or 1
            ms = 1000 * statistics.median(costs)
            report["kinds"][kind] = {"cpu_ms_median": round(ms, 1), "parts": {p: round(parts[p] / total, 3) for p in PARTS}}
            print(f"{kind:22} {ms:7.1f}  " + ("  ".join(f"{100 * parts[p] / total:7.0f}%" for p in PARTS) if parts else ""), flush=True)
            profiles.write()
        await anchor.leave()
        for kind in a.kinds if folder else ():
            print(f"\n=== {kind}\n" + profiles.top(kind, a.top))
        if a.json:
            Path(a.json).write_text(json.dumps(report, indent=1))
    finally:
        P.stop_streamlit(proc)
    return 0


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moves", type=int, default=12, help="moves of each kind (default: 12)")
    ap.add_argument("--kinds", nargs="+", default=KINDS, help=f"which (default: all: {', '.join(KINDS)})")
    ap.add_argument("--raw-dir", help="keep py-spy's raw stacks here, one file per kind")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument(
        "--cprofile",
        metavar="DIR",
        help="serve through tests/load/profiled_app.py (cProfile on every script run) and write each kind's profile to DIR; "
        "the profiler slows the runs down, so measure CPU per move without it",
    )
    ap.add_argument("--against", metavar="REV", help="CPU per move on this checkout and on this commit, kind by kind in turn")
    ap.add_argument("--top", type=int, default=25, help="with --cprofile: the functions printed per kind (default: 25)")
    ap.add_argument(
        "--questions",
        type=int,
        default=500,
        help="questions in the class's store for the teacher's kinds, one student's answer each (default: 500, what a class of 100 "
        "on its own images leaves)",
    )
    return ap


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parser().parse_args())))
