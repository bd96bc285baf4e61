import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from capsviz import checkpoint as ckpt
from capsviz.cli import main
from capsviz.config import preset
from capsviz.errors import CapsvizError
from capsviz.models import build_model
from capsviz.train import TrainRun, train

ROOT = Path(__file__).resolve().parents[1]
TINY = dict(batch_size=32, train_limit=128, test_limit=64, device="cpu")


@pytest.fixture
def saved(tmp_path):
    torch.manual_seed(0)
    m = build_model(preset("capsnet-small"))
    p = tmp_path / "m.safetensors"
    ckpt.save_checkpoint(p, m, {"dataset": "mnist", "metrics": {"test_error": 1.0}})
    return p, m


def test_checkpoint_round_trip_rebuilds_from_file_alone(saved):
    p, m = saved
    loaded, meta = ckpt.load_checkpoint(p)
    assert meta.family == "capsnet" and meta.metrics.test_error == 1.0 and meta.capsviz_version
    for (k, a), (_, b) in zip(m.state_dict().items(), loaded.state_dict().items(), strict=True):
        torch.testing.assert_close(a, b, msg=k)
    assert not list(p.parent.glob("*.part"))


def test_half_precision_checkpoint_is_half_the_size(saved, tmp_path):
    p, m = saved
    h = tmp_path / "h.safetensors"
    ckpt.save_checkpoint(h, m, {"dataset": "mnist"}, half=True)
    assert h.stat().st_size < 0.55 * p.stat().st_size
    loaded, _ = ckpt.load_checkpoint(h)
    assert loaded.conv1.weight.dtype == torch.float32


def test_truncated_checkpoint(saved):
    p, _ = saved
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    with pytest.raises(CapsvizError, match="not a readable safetensors checkpoint"):
        ckpt.load_checkpoint(p)


def test_corrupt_checkpoint(saved):
    p, _ = saved
    p.write_bytes(b"\x00\x01garbage" * 100)
    with pytest.raises(CapsvizError, match="not a readable safetensors"):
        ckpt.load_checkpoint(p)


def test_tampered_weights_are_detected(saved):
    p, _ = saved
    raw = bytearray(p.read_bytes())
    raw[-100] ^= 0xFF  # flip bits inside the tensor data
    p.write_bytes(bytes(raw))
    with pytest.raises(CapsvizError, match="modified or damaged"):
        ckpt.load_checkpoint(p)


def test_mismatched_config_and_foreign_files(saved, tmp_path):
    p, m = saved
    meta = ckpt.read_meta(p).raw
    meta["config"]["primary_types"] = 4
    tensors = {k: v.contiguous() for k, v in m.state_dict().items()}
    bad = tmp_path / "bad.safetensors"
    save_file(tensors, str(bad), metadata={"capsviz": json.dumps(meta)})
    with pytest.raises(CapsvizError, match="do not fit"):
        ckpt.load_checkpoint(bad)
    foreign = tmp_path / "foreign.safetensors"
    save_file({"x": torch.zeros(2)}, str(foreign))
    with pytest.raises(CapsvizError, match="not written by capsviz"):
        ckpt.load_checkpoint(foreign)
    with pytest.raises(CapsvizError, match="does not exist"):
        ckpt.load_checkpoint(tmp_path / "none.safetensors")


def test_train_state_refuses_pickled_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned > " + str(tmp_path / "pwned"),))

    p = tmp_path / "m.safetensors"
    torch.save({"x": Evil()}, ckpt.train_state_path(p))
    with pytest.raises(CapsvizError, match="holds Python objects a safe load refuses") as e:
        ckpt.load_train_state(p)
    assert not (tmp_path / "pwned").exists()
    assert "\n" not in str(e.value) and "weights_only" not in str(e.value)  # one line, no advice to load it unsafely


@pytest.mark.parametrize(
    "model,dataset",
    [
        ("capsnet-small", "mnist"),
        ("matrix-small", "mnist"),
        ("cnn-smallnorb", "mnist"),
        ("capsnet-small", "multimnist"),
        ("cnn-smallnorb", "multimnist"),
    ],
)
def test_dry_run_every_family(model, dataset, synthetic_data, tmp_path):
    events = []
    run = TrainRun(model=model, dataset=dataset, epochs=1, batch_size=8, train_limit=16, test_limit=16, device="cpu")
    meta = train(run, tmp_path / "m.safetensors", on_event=events.append)
    kinds = [e.kind for e in events]
    assert kinds.count("step") == 2 and kinds[-3:] == ["epoch", "evaluation", "finished"]
    assert all(e.images_per_s > 0 and e.eta_s >= 0 for e in events if e.kind == "step")
    assert meta.complete and meta.metrics.n_test == 16 and meta.hardware
    ckpt.load_checkpoint(tmp_path / "m.safetensors")


def test_loss_falls_on_a_tiny_problem(synthetic_data, tmp_path):
    events = []
    train(TrainRun(model="capsnet-small", epochs=3, lr=3e-3, **TINY), tmp_path / "m.safetensors", on_event=events.append)
    losses = [e.loss for e in events if e.kind == "epoch"]
    assert losses[-1] < 0.7 * losses[0]


@pytest.mark.parametrize(
    "device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU"))]
)
def test_resume_equals_uninterrupted_run(synthetic_data, tmp_path, device):
    # on CUDA the batches come through the prefetch thread, which a stop abandons mid-epoch
    run = TrainRun(model="capsnet-small", epochs=2, **dict(TINY, device=device))
    train(run, tmp_path / "full.safetensors")
    stop = threading.Event()

    def stop_after_5(e):
        if e.kind == "step" and e.step == 5:
            stop.set()

    meta = train(run, tmp_path / "part.safetensors", on_event=stop_after_5, stop=stop)
    assert not meta.complete and meta.epochs == pytest.approx(1.25)
    train(run, tmp_path / "part.safetensors", resume=tmp_path / "part.safetensors")
    a, _ = ckpt.load_checkpoint(tmp_path / "full.safetensors")
    b, mb = ckpt.load_checkpoint(tmp_path / "part.safetensors")
    assert mb.complete
    tol = {} if device == "cpu" else dict(atol=1e-4, rtol=1e-3)  # GPU convolutions' summation order varies
    for (k, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        torch.testing.assert_close(x, y, msg=k, **tol)


def test_init_from_starts_at_the_checkpoint_weights_and_refuses_another_model(synthetic_data, tmp_path, capsys):
    first = tmp_path / "first.safetensors"
    train(TrainRun(model="matrix-small", epochs=1, **TINY), first)
    start, _ = ckpt.load_checkpoint(first)
    stop = threading.Event()
    stop.set()  # stop after the first step: the weights have moved by one small step only
    run = TrainRun(model="matrix-small", epochs=1, lr=1e-6, margin_start=0.9, init_from=str(first), **TINY)
    meta = train(run, tmp_path / "tuned.safetensors", stop=stop)
    tuned, _ = ckpt.load_checkpoint(tmp_path / "tuned.safetensors")
    fresh = build_model(preset("matrix-small", in_size=28, num_classes=10))
    deltas = [float((a - b).abs().max()) for a, b in zip(tuned.state_dict().values(), start.state_dict().values(), strict=True)]
    apart = [float((a - b).abs().max()) for a, b in zip(fresh.state_dict().values(), start.state_dict().values(), strict=True)]
    assert max(deltas) < 1e-4 < max(apart)  # it began at the checkpoint, not at a fresh initialisation
    assert meta.run["init_from"] == str(first) and meta.run["margin_start"] == 0.9
    # the metadata keeps where it started; resumed to the end, the chain adds up
    assert meta.started_from["file"] == "first.safetensors" and meta.started_from["weights_sha256"] == ckpt.read_meta(first).weights_sha256
    done = train(run, tmp_path / "tuned.safetensors", resume=tmp_path / "tuned.safetensors")
    assert done.started_from == meta.started_from
    total = ckpt.total_training(done)
    assert total["stages"] == [1.0, 1.0] and total["epochs"] == 2.0
    assert [h["epoch"] for h in total["history"]] == [1, 2] and len(total["hardware"]) == 1
    assert total["training_time_s"] == pytest.approx(done.training_time_s + meta.started_from["training_time_s"])
    # another preset: one clear line, nothing written
    bad = tmp_path / "bad.safetensors"
    argv = ["train", "--model", "capsnet-small", "--init-from", str(first), "--train-limit", "32", "--device", "cpu", "--out", str(bad)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "holds a different model" in err and "family matrix there, capsnet here" in err and "Traceback" not in err
    assert not bad.exists()


def test_total_training_survives_odd_metadata():
    assert ckpt.total_training({})["epochs"] == 0.0
    odd = {"epochs": 2, "history": [{"epoch": "x"}, 5, {"epoch": 2, "metrics": {}}], "started_from": "junk", "hardware": "cpu"}
    t = ckpt.total_training(odd)
    assert t["epochs"] == 2.0 and [h["epoch"] for h in t["history"]] == [2] and t["hardware"] == ["cpu"]
    nested = {
        "epochs": 1,
        "history": [{"epoch": 1}],
        "started_from": {"epochs": 8, "training_time_s": 60, "history": [{"epoch": 8}], "hardware": "gpu"},
    }
    t = ckpt.total_training(nested)
    assert t["stages"] == [8.0, 1.0] and [h["epoch"] for h in t["history"]] == [8, 9] and t["hardware"] == ["gpu"]


def test_spread_margin_start_sets_the_matrix_loss():
    from capsviz.train import objective

    m = build_model(preset("matrix-small", in_size=28, num_classes=10))
    with torch.no_grad():
        out = m(torch.rand(4, 1, 28, 28))
    y = torch.arange(4)
    low, high = (float(objective(m, out, None, y, 0.0, margin_start=s)) for s in (0.2, 0.9))
    assert high > low  # a wider margin costs more at the same scores
    assert float(objective(m, out, None, y, 1.0, margin_start=0.2)) == pytest.approx(high)  # both 0.9 at the end


def test_stop_is_honoured_within_one_step(synthetic_data, tmp_path):
    stop = threading.Event()
    steps = []

    def on(e):
        if e.kind == "step":
            steps.append(e.step)
            stop.set()

    train(TrainRun(model="capsnet-small", epochs=5, **TINY), tmp_path / "m.safetensors", on_event=on, stop=stop)
    assert steps == [1]
    assert ckpt.train_state_path(tmp_path / "m.safetensors").is_file()


@pytest.mark.parametrize("storm", [False, True])
def test_sigterm_saves_a_resumable_checkpoint(synthetic_data, tmp_path, storm):
    """kill (or a batch system's time limit) stops the CLI at the next step with nothing lost. A
    storm of SIGTERMs (kill plus `timeout`, a batch system signalling every process) must not
    deadlock it: with a threading.Event as the flag, a signal landing inside Event.set() did."""
    import signal
    import time

    out = tmp_path / "m.safetensors"
    cmd = [sys.executable, "-m", "capsviz", "train", "--model", "capsnet-small", "--epochs", "50", "--batch-size", "8", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
    seen = ""
    while "/3750" not in seen:  # the first step has run
        seen += proc.stderr.read(1)
    proc.send_signal(signal.SIGTERM)
    t = time.monotonic()
    while storm and proc.poll() is None and time.monotonic() - t < 2:
        proc.send_signal(signal.SIGTERM)
    err = proc.communicate(timeout=60)[1]  # a deadlocked handler never returns
    # 143 (128 + TERM: stopped, not finished), or killed by a TERM that came after the save, once the handler was uninstalled
    assert proc.returncode in (128 + signal.SIGTERM, -signal.SIGTERM), err
    assert f"continue with --resume {out}" in err
    meta = ckpt.read_meta(out)
    assert not meta.complete and 0 < meta.epochs < 1 and ckpt.train_state_path(out).is_file()


def test_cli_errors_are_one_line_and_nonzero(synthetic_data, tmp_path, capsys):
    assert main(["evaluate", str(tmp_path / "missing.safetensors")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "does not exist" in err and "Traceback" not in err
    (tmp_path / "junk.safetensors").write_bytes(b"junk")
    assert main(["evaluate", str(tmp_path / "junk.safetensors")]) == 2
    assert (
        main(
            ["train", "--out", str(tmp_path / "x.safetensors"), "--device", "cuda"]
            if not torch.cuda.is_available()
            else ["train", "--out", "x", "--epochs", "0"]
        )
        == 2
    )
    assert main(["train", "--out", str(tmp_path / "x.safetensors"), "--resume", str(tmp_path / "nothing.safetensors")]) == 2
    assert "Traceback" not in capsys.readouterr().err


def tiny_cli_train(out) -> int:
    return main(
        [
            "train",
            "--model",
            "capsnet-small",
            "--epochs",
            "1",
            "--batch-size",
            "32",
            "--train-limit",
            "64",
            "--test-limit",
            "32",
            "--device",
            "cpu",
            "--out",
            str(out),
        ]
    )


def test_cli_train_evaluate_list(synthetic_data, tmp_path, capsys):
    out = tmp_path / "ck" / "m.safetensors"
    assert tiny_cli_train(out) == 0
    capsys.readouterr()
    assert main(["evaluate", str(out), "--limit", "50"]) == 0
    printed = capsys.readouterr()
    res = json.loads(printed.out)  # stdout: the result alone
    assert res["n_test"] == 50 and 0 <= res["test_error"] <= 100
    assert printed.err.strip().splitlines()[-1] == "evaluate: 50 / 50 images"  # progress goes to stderr
    assert main(["list", str(out.parent)]) == 0
    assert "CapsNet with dynamic routing on mnist" in capsys.readouterr().out
    assert main(["evaluate", str(out), "--limit", "50", "--routing"]) == 0
    r = json.loads(capsys.readouterr().out)["routing"]
    assert len(r["coupling_to_prediction"]) == 3 and r["coupling_to_prediction"][0] == pytest.approx(0.1)
    from capsviz.data import load_split

    assert r["n_images"] == min(1000, len(load_split("mnist", "test")))
    from test_app import tiny_checkpoints

    tiny_checkpoints(tmp_path)
    assert main(["evaluate", str(tmp_path / "tiny-matrix.safetensors"), "--limit", "10", "--routing"]) == 2
    assert "coupling summary is for dynamic routing" in capsys.readouterr().err


def test_torchrun_two_cpu_processes_hold_identical_weights(synthetic_data, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        "29533",
        "-m",
        "capsviz",
        "train",
        "--model",
        "capsnet-small",
        "--epochs",
        "1",
        "--batch-size",
        "8",
        "--train-limit",
        "48",
        "--test-limit",
        "16",
        "--device",
        "cpu",
        "--out",
        str(tmp_path / "ddp.safetensors"),
    ]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    digests = {line.split()[1]: line.split()[-1] for line in r.stdout.splitlines() if line.startswith("rank ")}
    assert set(digests) == {"0", "1"} and digests["0"] == digests["1"]
    meta = ckpt.read_meta(tmp_path / "ddp.safetensors")
    assert meta.effective_batch_size == 16 and "x2 processes" in meta.hardware


def test_cli_export_halves_the_file_and_remeasures(synthetic_data, tmp_path, capsys):
    src, dst = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    assert tiny_cli_train(src) == 0
    capsys.readouterr()
    assert main(["export", str(src), str(dst), "--max-change", "100"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert dst.stat().st_size < 0.55 * src.stat().st_size
    meta = ckpt.read_meta(dst)
    assert meta.stored_as == "float16" and meta.metrics.test_error == out["float16_test_error"] and meta.metrics.n_test == 200
    assert 0 < out["max_reconstruction_change"] < 0.05 and meta.float16_reconstruction_change == out["max_reconstruction_change"]


def test_final_lambda_override_reaches_matrix_models_only():
    from capsviz.train import model_config

    assert model_config(TrainRun(model="matrix-small", final_lambda=0.05)).final_lambda == 0.05
    default = model_config(TrainRun(model="matrix-small"))
    assert (default.final_lambda, default.routing_iterations) == (0.3, 2)
    assert not hasattr(model_config(TrainRun(model="capsnet-small", final_lambda=0.05)), "final_lambda")


def test_metadata_is_read_once_per_version_and_never_shared(saved):
    p, m = saved
    first = ckpt.read_meta(p)
    first.raw["dataset"] = "changed by a caller"
    assert ckpt.read_meta(p).raw["dataset"] == "mnist"  # each caller gets its own copy
    ckpt.save_checkpoint(p, m, {"dataset": "fashion-mnist", "epochs": 7})
    again = ckpt.read_meta(p)
    assert again.dataset == "fashion-mnist" and again.epochs == 7  # a rewritten file is read anew


def test_time_left_is_measured_and_said_in_words():
    from capsviz.i18n import speaking
    from capsviz.progress import progress_words

    assert progress_words("Routing", 0, 100, 5.0) == "Routing: 0 / 100"  # nothing measured yet
    assert progress_words("Routing", 25, 100, 10.0) == "Routing: 25 / 100, about 30 s left"
    assert progress_words("Routing", 1, 100, 60.0) == "Routing: 1 / 100, about 99 min left"
    assert progress_words("Routing", 100, 100, 60.0) == "Routing: 100 / 100"
    with speaking("ja"):
        said = progress_words("ルーティング", 25, 100, 10.0)
    assert said != "ルーティング: 25 / 100, about 30 s left" and "30" in said and "25 / 100" in said
