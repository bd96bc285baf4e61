"""A good model is never replaced by a worse or unfinished one, from the command line as from the
app: the CLI is driven as a user types it (subprocesses and signals where that matters), on copies
of the shipped files, and every good model is checked byte for byte after each mistake."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from test_app import router_mode, tiny_checkpoints  # noqa: F401 - the fixture and models of the AppTests
from test_trust import one_error_line

from capsviz import checkpoint as ckpt
from capsviz import paths
from capsviz.cli import main
from capsviz.errors import CapsvizError
from capsviz.train import TrainRun, train

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_DIR = ROOT / "checkpoints"
TINY = ["--model", "capsnet-small", "--batch-size", "32", "--train-limit", "96", "--test-limit", "32", "--device", "cpu"]
ENV = {"PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


def sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture
def good(synthetic_data, tmp_path) -> Path:
    """A user's good model: a copy of a shipped one, under the user's own name."""
    p = tmp_path / "good.safetensors"
    shutil.copyfile(SHIPPED_DIR / "capsnet-small-mnist.safetensors", p)
    return p


def cli(*args, **kw) -> subprocess.Popen:
    """`python -m capsviz ARGS` as a terminal starts it: Ctrl-C's signal at its default (a test run
    started in the background has it ignored, and a child inherits that)."""
    return subprocess.Popen(
        [sys.executable, "-m", "capsviz", *map(str, args)],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **ENV},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        **kw,
    )


def read_until(proc: subprocess.Popen, marker: str, timeout: float = 120) -> str:
    seen, end = "", time.monotonic() + timeout
    while marker not in seen:
        ch = proc.stderr.read(1)
        assert ch and time.monotonic() < end, f"{marker!r} never came: {seen[-500:]}"
        seen += ch
    return seen


# ---------------------------------------------------------------- one rule for every writer


def test_a_new_run_without_replace_leaves_a_model_there_alone(good, capsys):
    before = sha(good)
    assert main(["train", *TINY, "--epochs", "1", "--out", str(good)]) == 2
    one_error_line(capsys, "already holds a model", "0.55% test error", "--replace")  # what is there, from its metadata
    assert sha(good) == before and not ckpt.pending_path(good).exists()


def test_a_replacing_run_stopped_early_leaves_the_good_model_and_continues_beside_it(good):
    """The reported case: a good model at --out, a new run (now with --replace) stopped after a
    few steps. The good model stays; the run is saved beside it and goes on from there; only the
    finished, evaluated run takes its place."""
    before, pending = sha(good), ckpt.pending_path(good)
    proc = cli("train", *TINY, "--batch-size", "8", "--epochs", "50", "--out", good, "--replace")
    read_until(proc, "/600")  # a step has run
    proc.send_signal(signal.SIGTERM)
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert sha(good) == before
    assert f"saved at {pending}" in err and f"--resume {pending} --out {good}" in err
    assert not ckpt.read_meta(pending).complete

    # starting again instead of continuing would lose the saved progress: refused
    assert main(["train", *TINY, "--epochs", "1", "--out", str(good), "--replace"]) == 2
    assert sha(good) == before

    assert main(["train", "--resume", str(pending), "--epochs", "1", "--out", str(good)]) == 0
    meta = ckpt.read_meta(good)
    assert meta.complete and meta.metrics.measured and meta.run["model"] == "capsnet-small"
    assert not pending.exists() and not ckpt.train_state_path(pending).exists()
    ckpt.load_train_state(good)  # the state moved with its weights
    ckpt.load_checkpoint(good)


def test_resuming_a_models_own_run_keeps_it_until_the_run_finishes(synthetic_data, tmp_path):
    out = tmp_path / "m.safetensors"
    stop_after_one = _StopAfter(1)
    train(TrainRun(model="capsnet-small", epochs=2, batch_size=32, train_limit=96, test_limit=32, device="cpu"), out, stop=stop_after_one)
    stopped = sha(out)
    seen = []
    train(
        TrainRun(model="capsnet-small", epochs=2, batch_size=32, train_limit=96, test_limit=32, device="cpu"),
        out,
        resume=out,
        on_event=lambda e: seen.append((e.kind, sha(out))),
    )
    assert all(h == stopped for kind, h in seen if kind in ("step", "evaluation")), "the model was rewritten before the run finished"
    assert ckpt.read_meta(out).complete and sha(out) != stopped
    assert not ckpt.pending_path(out).exists()


class _StopAfter:
    """A stop flag that is set after n checks (one per step)."""

    def __init__(self, n):
        self.n = n

    def is_set(self):
        self.n -= 1
        return self.n < 0


def test_a_shipped_model_is_never_written(synthetic_data, tmp_path, capsys, monkeypatch):
    shipped = SHIPPED_DIR / "capsnet-small-mnist.safetensors"
    before = sha(shipped)
    for argv in (
        ["train", *TINY, "--epochs", "1", "--out", str(shipped)],
        ["train", *TINY, "--epochs", "1", "--out", str(shipped), "--replace"],
        ["export", str(shipped), str(shipped), "--replace"],
        ["export", str(shipped), str(SHIPPED_DIR / "CAPSNET-SMALL-MNIST.safetensors"), "--replace"],
    ):
        assert main(argv) == 2
        one_error_line(capsys, "comes with capsviz and is never overwritten")
    assert sha(shipped) == before
    assert not ckpt.pending_path(shipped).exists()
    # the copies in an installed app's model folder are shipped models too
    folder = tmp_path / "models"
    folder.mkdir()
    shutil.copyfile(shipped, folder / shipped.name)
    monkeypatch.setenv("CAPSVIZ_CHECKPOINTS", str(folder))
    assert main(["train", *TINY, "--epochs", "1", "--out", str(folder / shipped.name), "--replace"]) == 2
    one_error_line(capsys, "never overwritten")
    assert sha(folder / shipped.name) == before
    # a new name in the shipped folder is not a shipped model (a developer adds one this way)
    assert not ckpt.is_shipped(SHIPPED_DIR / "a-new-model.safetensors")


def test_export_onto_a_model_needs_replace(good, tmp_path, capsys):
    other = tmp_path / "other.safetensors"
    shutil.copyfile(SHIPPED_DIR / "cnn-small-mnist.safetensors", other)
    before = sha(other)
    assert main(["export", str(good), str(other)]) == 2
    one_error_line(capsys, "already holds a model", "--replace")
    assert sha(other) == before


# ---------------------------------------------------------------- Ctrl-C and SIGTERM say what is true


@pytest.mark.parametrize("delay", [0.3, 1.0, 2.0, 3.5])
def test_ctrl_c_before_any_save_says_nothing_was_saved_and_exits_130(synthetic_data, tmp_path, delay):
    out = tmp_path / "m.safetensors"
    proc = cli("train", *TINY, "--epochs", "500", "--out", out)
    time.sleep(delay)
    assert proc.poll() is None, "the run ended before Ctrl-C"
    proc.send_signal(signal.SIGINT)
    err = proc.communicate(timeout=120)[1]
    if out.exists():  # this machine was fast enough to finish an epoch first: then it must say where
        assert "the last saved checkpoint is" in err, err
    else:
        assert "nothing was saved" in err, err
        assert "--resume" not in err
    assert proc.returncode == 130, err  # never killed by the signal itself (-2)
    assert "Traceback" not in err


def test_ctrl_c_after_an_epoch_names_the_saved_checkpoint(synthetic_data, tmp_path):
    out = tmp_path / "m.safetensors"
    proc = cli("train", *TINY, "--epochs", "50", "--out", out)
    read_until(proc, "epoch 1: test error")
    read_until(proc, "/150")  # the first step of the second epoch
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGINT)  # an impatient second press changes nothing
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == 130, err
    assert f"the last saved checkpoint is {out} ({ckpt.describe(out)})" in err and f"--resume {out}" in err
    assert ckpt.read_meta(out).epochs >= 1
    ckpt.load_train_state(out)


# ---------------------------------------------------------------- weights checked against the architecture


def _resaved(src: Path, dst: Path, change) -> Path:
    """`src` with its tensors changed by `change(dict)`, the digest recomputed (so only the
    architecture check can catch it)."""
    with safe_open(str(src), framework="pt") as f:
        meta = json.loads(f.metadata()["capsviz"])
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    change(tensors)
    meta["weights_sha256"] = ckpt.weights_digest(tensors)
    save_file(tensors, str(dst), metadata={"capsviz": json.dumps(meta)})
    return dst


@pytest.mark.parametrize(
    "name, change, says",
    [
        ("ints", lambda t: t.update({"conv1.weight": (t["conv1.weight"] * 100).to(torch.int32)}), "conv1.weight is stored as int32"),
        ("shape", lambda t: t.update({"conv1.bias": t["conv1.bias"][:-1]}), "conv1.bias has shape (63,), the model needs (64,)"),
        ("missing", lambda t: t.pop("conv1.bias"), "conv1.bias is missing"),
        ("extra", lambda t: t.update({"spare": torch.zeros(3)}), "spare is not part of it"),
    ],
)
def test_weights_that_do_not_fit_the_architecture_are_refused_and_listed_unusable(good, tmp_path, capsys, name, change, says):
    bad = _resaved(good, tmp_path / f"{name}.safetensors", change)
    with pytest.raises(CapsvizError, match="weights do not fit") as e:
        ckpt.load_checkpoint(bad)
    assert says in str(e.value)
    assert main(["list", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    row = next(line for line in lines if line.startswith(f"{name}.safetensors"))
    assert row.startswith(f"{name}.safetensors: unusable:") and says in row and "test error" not in row


def test_list_marks_tampered_and_diverged_files_unusable_without_their_claimed_metrics(good, tmp_path, capsys):
    raw = bytearray(good.read_bytes())
    raw[-100] ^= 0xFF
    (tmp_path / "tampered.safetensors").write_bytes(bytes(raw))
    _resaved(good, tmp_path / "nan.safetensors", lambda t: t["conv1.weight"].view(-1).__setitem__(0, float("nan")))
    assert main(["list", str(tmp_path)]) == 0
    lines = dict(line.split(": ", 1) for line in capsys.readouterr().out.splitlines())
    assert lines["tampered.safetensors"].startswith("unusable:") and "modified or damaged" in lines["tampered.safetensors"]
    assert lines["nan.safetensors"].startswith("unusable:") and "NaN" in lines["nan.safetensors"]
    assert "0.55% test error" in lines["good.safetensors"]


def test_list_of_a_missing_folder_is_an_error(tmp_path, capsys):
    assert main(["list", str(tmp_path / "nowhere")]) == 2
    one_error_line(capsys, "no such folder")


# ---------------------------------------------------------------- devices and paths checked up front


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CPU-only torch refuses every CUDA device")
@pytest.mark.parametrize("device", ["cuda:99", "cuda:0", "cuda", "cuda:x", "tpu"])
def test_bad_devices_are_one_line_and_exit_2_everywhere(good, tmp_path, capsys, device):
    out = tmp_path / "new.safetensors"
    for argv in (
        ["train", *TINY[:-2], "--device", device, "--epochs", "1", "--out", str(out)],
        ["evaluate", str(good), "--device", device],
        ["export", str(good), str(out), "--device", device],
        ["bench", "--models", "capsnet-small", "--device", device],
    ):
        assert main(argv) == 2, argv
        one_error_line(capsys, device)
    assert not out.exists()


def test_a_data_folder_that_does_not_exist_is_refused_not_replaced(good, tmp_path, capsys):
    out, nowhere = tmp_path / "new.safetensors", str(tmp_path / "nowhere")
    for argv in (
        ["train", *TINY, "--epochs", "1", "--data-dir", nowhere, "--out", str(out)],
        ["evaluate", str(good), "--data-dir", nowhere],
        ["export", str(good), str(out), "--data-dir", nowhere],
        ["data", "--data-dir", nowhere],
    ):
        assert main(argv) == 2, argv
        one_error_line(capsys, "--data-dir", "no such folder")
    # a folder that exists but lacks the data is the only place looked in
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["train", *TINY, "--epochs", "1", "--data-dir", str(empty), "--out", str(out)]) == 2
    assert str(empty) in capsys.readouterr().err and not out.exists()


def test_missing_resume_or_init_files_are_refused_before_training(synthetic_data, tmp_path, capsys):
    out = tmp_path / "new.safetensors"
    assert main(["train", *TINY, "--epochs", "1", "--resume", str(tmp_path / "gone.safetensors"), "--out", str(out)]) == 2
    one_error_line(capsys, "--resume", "no such checkpoint file")
    assert main(["train", *TINY, "--epochs", "1", "--init-from", str(tmp_path / "gone.safetensors"), "--out", str(out)]) == 2
    one_error_line(capsys, "--init-from", "no such checkpoint file")


# ---------------------------------------------------------------- no leftovers


def test_a_killed_save_leaves_its_temporary_files_in_one_place_that_the_next_run_removes(synthetic_data, tmp_path):
    """safetensors writes a temporary file of its own beside the file it is asked for; killed in
    the middle, that file stays. Here a save of a large tensor is killed while it writes."""
    out = tmp_path / "m.safetensors"
    script = (
        "import sys, torch; from safetensors.torch import save_file; from capsviz.paths import atomic_write;"
        "t = {'w': torch.randn(60_000_000)}; print('go', flush=True);"
        "atomic_write(sys.argv[1], lambda tmp: save_file(t, tmp))"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(out)], stdout=subprocess.PIPE, text=True, env={**os.environ, **ENV})
    assert proc.stdout.readline().strip() == "go"
    end = time.monotonic() + 60
    while not any(f.stat().st_size for part in paths.partial_files(out) for f in part.rglob("*") if f.is_file()):
        assert time.monotonic() < end and proc.poll() is None, "the save finished before it could be killed"
        time.sleep(0.005)
    proc.kill()
    proc.wait()
    left = [p for p in tmp_path.iterdir() if p.name != "cache"]
    assert left and all(p in paths.partial_files(out) for p in left), left  # nothing outside the partial folder
    assert ckpt.list_checkpoints(tmp_path) == []
    train(TrainRun(model="capsnet-small", epochs=1, batch_size=32, train_limit=64, test_limit=32, device="cpu"), out)
    assert not paths.partial_files(out)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache" and not p.name.endswith(".lock")) == [
        "m.safetensors",
        "m.safetensors.train.pt",
    ]


def test_a_promotion_cut_short_is_completed_by_the_next_run(good, tmp_path):
    """A crash inside `promote`, after the state moved and before the weights did: the next run on
    that target sends the state back to the run it belongs to, which then finishes normally."""
    pending = ckpt.pending_path(good)
    run = TrainRun(model="capsnet-small", epochs=1, batch_size=32, train_limit=96, test_limit=32, device="cpu")
    train(run, good, replace=True, stop=_StopAfter(1))
    assert pending.exists() and ckpt.train_state_path(pending).exists()
    os.replace(ckpt.train_state_path(pending), Path(str(good) + ".train.pt.next"))  # the first rename of promote
    with ckpt.writer_lock(good):
        ckpt.recover(good)
    ckpt.load_train_state(pending)
    before = sha(good)
    train(run, good, resume=pending)
    assert sha(good) != before and ckpt.read_meta(good).complete and not pending.exists()


# ---------------------------------------------------------------- the browser: links and messages


@pytest.fixture
def models(synthetic_data, tmp_path, monkeypatch):  # router_mode, imported, is autouse here too
    folder = tmp_path / "models"
    folder.mkdir()
    tiny_checkpoints(folder)
    monkeypatch.setenv("CAPSVIZ_CHECKPOINTS", str(folder))
    return folder


@pytest.mark.parametrize("asked, says", [("broken.safetensors", "modified or damaged"), ("gone.safetensors", "no model of that name")])
def test_a_link_to_a_model_that_cannot_be_used_says_so_and_which_model_it_shows(models, asked, says):
    from streamlit.testing.v1 import AppTest

    raw = bytearray((models / "tiny-cnn.safetensors").read_bytes())
    raw[-100] ^= 0xFF
    (models / "broken.safetensors").write_bytes(bytes(raw))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["model"] = asked
    at.switch_page("pages/zoo.py").run()
    assert not at.exception
    notice = next(w.value for w in at.warning if "The link asks for" in w.value)
    assert asked in notice and says in notice and "showing **tiny-capsnet.safetensors** instead" in notice
    assert str(models) not in " ".join(w.value for w in at.warning)  # no server path in the browser
    at.run()  # still showing the stand-in: the notice stays
    assert any("The link asks for" in w.value for w in at.warning)
    at.sidebar.selectbox(key="model_pick").set_value("tiny-matrix.safetensors").run()
    assert not any("The link asks for" in w.value for w in at.warning)


def test_messages_in_the_browser_name_models_not_server_paths(models, tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    link = tmp_path / "link"
    link.symlink_to(models)  # the folder reached through a symlink: neither path may show
    monkeypatch.setenv("CAPSVIZ_CHECKPOINTS", str(link))
    raw = bytearray((models / "tiny-cnn.safetensors").read_bytes())
    raw[-100] ^= 0xFF
    (models / "broken.safetensors").write_bytes(bytes(raw))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("pages/zoo.py").run()
    shown = " ".join(w.value for w in at.warning)
    assert "broken.safetensors" in shown and "modified or damaged" in shown
    assert str(models) not in shown and str(link) not in shown and str(tmp_path) not in shown
