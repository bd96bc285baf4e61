"""Issue 27, "trust nothing from outside": checkpoints, training states, CLI arguments and IDX
files that are wrong in every way a hostile or unlucky user finds, and faults while saving.
Each must give one clear CapsvizError (CLI: one `error:` line, exit 2) and lose nothing saved."""

import errno
import gzip
import json
import math
import os
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from test_plain_text import as_shown

from capsviz import checkpoint as ckpt
from capsviz.cli import main
from capsviz.config import preset
from capsviz.data import idx
from capsviz.data.mnist import load_idx_pair
from capsviz.errors import CapsvizError
from capsviz.models import build_model
from capsviz.routing import dynamic_routing, em_routing, squash
from capsviz.schema import CheckpointMeta
from capsviz.train import TrainRun, train

ROOT = Path(__file__).resolve().parents[1]
TINY = dict(model="matrix-small", batch_size=16, train_limit=32, test_limit=16, device="cpu")


def one_error_line(capsys, *fragments) -> str:
    """The CLI's stderr holds exactly one line, `error: ...`, naming every fragment."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    return lines[0]


# ---------------------------------------------------------------- checkpoint metadata


@pytest.fixture(scope="module")
def small_model():
    torch.manual_seed(0)
    return build_model(preset("matrix-small", in_size=28, num_classes=10))


@pytest.fixture
def good(tmp_path, small_model) -> Path:
    p = tmp_path / "good.safetensors"
    ckpt.save_checkpoint(p, small_model, {"dataset": "mnist", "epochs": 1, "metrics": {"test_error": 9.5, "n_test": 16}})
    return p


def rewrite(src: Path, dst: Path, mutate=None, raw: str | None = None) -> Path:
    """dst: src's tensors with its metadata changed by `mutate` (a function of the dict) or
    replaced by the string `raw`."""
    with safe_open(str(src), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
        meta = json.loads(f.metadata()["capsviz"])
    if mutate is not None:
        mutate(meta)
    save_file(tensors, str(dst), metadata={"capsviz": raw if raw is not None else json.dumps(meta)})
    return dst


def setter(dotted: str, value):
    def mutate(meta):
        *parents, last = dotted.split(".")
        d = meta
        for k in parents:
            d = d[k]
        d[last] = value

    return mutate


def deleter(dotted: str):
    def mutate(meta):
        *parents, last = dotted.split(".")
        d = meta
        for k in parents:
            d = d[k]
        del d[last]

    return mutate


def nested(depth: int):
    def mutate(meta):
        inner = {}
        for _ in range(depth):
            inner = {"started_from": inner}
        meta["started_from"] = inner

    return mutate


def chain(n: int):
    def mutate(meta):
        link = {"file": "a.safetensors", "epochs": 1}
        for _ in range(n):
            link = {"file": "a.safetensors", "epochs": 1, "started_from": link}
        meta["started_from"] = link

    return mutate


BAD_META = [
    ("dataset-number", setter("dataset", 5), "dataset: must be one of"),
    ("dataset-list", setter("dataset", ["mnist"]), "dataset: must be one of"),
    ("dataset-path", setter("dataset", "../../etc"), "dataset: must be one of"),
    ("no-family", deleter("config.family"), "config.family"),
    ("unknown-family", setter("config.family", "evil"), "config.family"),
    ("config-not-object", setter("config", {"family": 3}), "config.family"),
    ("huge-channels", setter("config.A", 10**9), "config.A: must be an integer in [1, 512]"),
    ("zero-size", setter("config.B", 0), "config.B"),
    ("negative-size", setter("config.C", -4), "config.C"),
    ("size-as-string", setter("config.D", "16"), "config.D: must be an integer"),
    ("size-as-float", setter("config.D", 16.5), "config.D: must be an integer"),
    ("size-as-bool", setter("config.D", True), "config.D: must be an integer"),
    ("huge-iterations", setter("config.routing_iterations", 10**9), "config.routing_iterations"),
    ("zero-iterations", setter("config.routing_iterations", 0), "config.routing_iterations"),
    ("odd-input-size", setter("config.in_size", 7), "config.in_size"),
    ("lambda-negative", setter("config.final_lambda", -1.0), "config.final_lambda"),
    ("coord-add-string", setter("config.coord_add", "yes"), "config.coord_add"),
    ("unknown-config-field", setter("config.evil", 1), "unknown field 'evil'"),
    ("no-primary-grid", setter("config", dict(family="capsnet", conv1_kernel=15, primary_kernel=15)), "leave no PrimaryCaps grid"),
    ("metrics-string", setter("metrics", "good"), "metrics: must be an object"),
    ("test-error-string", setter("metrics.test_error", "low"), "metrics.test_error: must be a number"),
    ("test-error-out-of-range", setter("metrics.test_error", 1e9), "metrics.test_error"),
    ("n-test-negative", setter("metrics.n_test", -1), "metrics.n_test"),
    ("epochs-string", setter("epochs", "ten"), "epochs: must be a number"),
    ("parameters-string", setter("parameters", "many"), "parameters: must be an integer"),
    ("history-object", setter("history", {"epoch": 1}), "history: must be a list"),
    ("history-entry", setter("history", [{"epoch": "one"}]), "history[0].epoch"),
    ("complete-string", setter("complete", "yes"), "complete: must be true or false"),
    ("long-string", setter("hardware", "x" * 10_000), "at most"),
    ("long-unknown-string", setter("notes", "x" * 10_000), "notes: string of 10000 characters"),
    ("deep-nesting", nested(200), "nested more than"),
    ("long-chain", chain(20), "chain of more than"),
    ("started-from-string", setter("started_from", "elsewhere"), "started_from: must be an object"),
    ("run-dataset-path", setter("run", {"dataset": "../../etc"}), "run.dataset"),
    ("run-unknown-field", setter("run", {"shell": "rm -rf /"}), "run: unknown field 'shell'"),
    ("no-digest", deleter("weights_sha256"), "missing field 'weights_sha256'"),
    # each size within its bound, together far too large to build
    (
        "too-many-parameters",
        setter("config", dict(family="capsnet", conv1_channels=1024, primary_types=128, primary_dim=64)),
        "parameters; at most",
    ),
]
BAD_RAW = [
    ("not-json", "{config: 1", "not valid JSON"),
    ("nan", '{"config": {"family": "cnn"}, "weights_sha256": "x", "epochs": NaN}', "not valid JSON"),
    ("brackets", "[" * 100_000, "metadata"),
    ("a-list", "[]", "has no model config"),
    ("ten-megabytes", json.dumps({"config": {"family": "cnn"}, "notes": "x" * 10_000_000}), "capsviz reads at most"),
]


@pytest.mark.parametrize("name,mutate,says", BAD_META, ids=[c[0] for c in BAD_META])
def test_bad_metadata_is_refused_with_the_field_named(good, tmp_path, name, mutate, says):
    bad = rewrite(good, tmp_path / f"{name}.safetensors", mutate)
    with pytest.raises(CapsvizError, match="unusable metadata") as e:
        ckpt.read_meta(bad)
    assert says in str(e.value) and "\n" not in str(e.value) and len(str(e.value)) < 400
    with pytest.raises(CapsvizError):
        ckpt.load_checkpoint(bad)


@pytest.mark.parametrize("name,raw,says", BAD_RAW, ids=[c[0] for c in BAD_RAW])
def test_unparseable_or_oversized_metadata_is_refused_quickly(good, tmp_path, name, raw, says):
    bad = rewrite(good, tmp_path / f"{name}.safetensors", raw=raw)
    t0 = time.perf_counter()
    with pytest.raises(CapsvizError, match=says) as e:
        ckpt.read_meta(bad)
    assert time.perf_counter() - t0 < 1.0 and len(str(e.value)) < 400


def test_an_oversized_header_is_refused_before_it_is_read(good, tmp_path):
    bad = tmp_path / "big.safetensors"
    bad.write_bytes(struct.pack("<Q", 5_000_000) + b"{" + b" " * 5_000_000)
    with pytest.raises(CapsvizError, match="header of 5,000,000 bytes"):
        ckpt.read_meta(bad)


def test_shipped_checkpoints_pass_the_schema():
    for _, meta in ckpt.list_checkpoints(ROOT / "checkpoints"):
        assert isinstance(meta, CheckpointMeta), meta


def test_one_bad_file_is_listed_as_unusable_and_hides_nothing(good, tmp_path, capsys):
    rewrite(good, tmp_path / "bad-dataset.safetensors", setter("dataset", ["mnist"]))
    rewrite(good, tmp_path / "deep.safetensors", raw="[" * 100_000)
    rows = dict(ckpt.list_checkpoints(tmp_path))
    assert isinstance(rows[good], CheckpointMeta)
    assert "dataset" in rows[tmp_path / "bad-dataset.safetensors"] and isinstance(rows[tmp_path / "deep.safetensors"], str)
    assert main(["list", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3, out
    assert any(line.startswith("good.safetensors: matrix capsules on mnist") for line in out), out
    assert any(line.startswith("bad-dataset.safetensors: unusable:") and "dataset" in line for line in out)
    assert any(line.startswith("deep.safetensors: unusable:") for line in out)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_weights_that_are_not_finite_are_refused(tmp_path, small_model, value):
    model = build_model(small_model.config)
    model.load_state_dict(small_model.state_dict())
    with torch.no_grad():
        model.conv1.weight[0, 0, 0, 0] = value
    p = tmp_path / "diverged.safetensors"
    ckpt.save_checkpoint(p, model, {"dataset": "mnist"})
    with pytest.raises(CapsvizError, match="NaN or infinite values \\(conv1.weight\\)"):
        ckpt.load_checkpoint(p)


def test_a_folder_or_an_unreadable_file_is_not_reported_as_missing(good, tmp_path, capsys, monkeypatch):
    (tmp_path / "dir.safetensors").mkdir()
    assert main(["evaluate", str(tmp_path / "dir.safetensors")]) == 2
    one_error_line(capsys, "is not a checkpoint file")

    def denied(*args, **kwargs):  # what a file without read permission gives (root, running the tests, may read anything)
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(ckpt.files, "open", denied, raising=False)
    assert main(["evaluate", str(good)]) == 2
    line = one_error_line(capsys, "cannot be read (Permission denied)")
    assert "No such file" not in line


def test_the_schema_knows_every_training_dataset():
    from capsviz.data import DATASETS
    from capsviz.schema import DATASET_NAMES

    assert set(DATASET_NAMES) == set(DATASETS)


def test_the_zoo_lists_an_unusable_checkpoint_with_its_reason_beside_the_good_ones(good, tmp_path, monkeypatch):
    import streamlit.testing.v1.app_test as app_test_module
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.testing.v1 import AppTest

    class RouterFirst(PagesManager):  # as tests/test_app.py: app.py's navigation in charge
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            PagesManager.uses_pages_directory = False

    monkeypatch.setattr(app_test_module, "PagesManager", RouterFirst)
    rewrite(good, tmp_path / "odd.safetensors", setter("dataset", 5))
    rewrite(good, tmp_path / "deep.safetensors", raw="[" * 100_000)
    monkeypatch.setenv("CAPSVIZ_CHECKPOINTS", str(tmp_path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("pages/zoo.py").run()
    assert not at.exception
    assert [s.value for s in at.subheader] == ["good"]
    warnings = [as_shown(w.value) for w in at.warning]
    assert any("odd.safetensors" in w and "dataset: must be one of" in w for w in warnings)
    assert any("deep.safetensors" in w and "metadata" in w for w in warnings)


@pytest.mark.parametrize("family", ["capsnet-small", "matrix-small"])
def test_a_model_refuses_zero_routing_iterations(family):
    model = build_model(preset(family, in_size=28, num_classes=10)).eval()
    with torch.no_grad(), pytest.raises(ValueError, match="at least 1"):
        model(torch.rand(1, 1, 28, 28), iterations=0)


# ---------------------------------------------------------------- saving weights and state as one unit


def state_for(epoch: int) -> dict:
    return {
        "run": {"model": "matrix-small", "dataset": "mnist", "epochs": 3},
        "optimizer": {"state": {}, "param_groups": []},
        "scheduler": {},
        "step": 10 * epoch,
        "epoch": epoch,
        "batch": 0,
        "history": [],
        "elapsed": 1.0,
        "torch_rng": torch.get_rng_state(),
    }


def moved(model, by: float):
    m = build_model(model.config)
    m.load_state_dict(model.state_dict())
    with torch.no_grad():
        m.conv1.bias.add_(by)
    return m


KILL_SCRIPT = """
import os, sys, torch
from capsviz import checkpoint as ckpt
from capsviz.config import preset
from capsviz.models import build_model
path, die_at = sys.argv[1], int(sys.argv[2])
torch.manual_seed(0)
model = build_model(preset("matrix-small", in_size=28, num_classes=10))
with torch.no_grad():
    model.conv1.bias.add_(1.0)
calls, replace, save = [0], os.replace, torch.save
def dying_replace(a, b):  # the process dies (no cleanup runs) just before rename number die_at
    calls[0] += 1
    if calls[0] == die_at:
        os._exit(9)
    replace(a, b)
def dying_save(obj, f):  # die_at 0: killed in the middle of writing the state's partial file
    with open(f, "wb") as out:
        out.write(b"half a file")
    os._exit(9)
ckpt.runs.os.replace = dying_replace
if die_at == 0:
    ckpt.runs.torch.save = dying_save
state = {"run": {"model": "matrix-small", "dataset": "mnist", "epochs": 3}, "optimizer": {"state": {}, "param_groups": []},
         "scheduler": {}, "step": 20, "epoch": 2, "batch": 0, "history": [], "elapsed": 2.0, "torch_rng": torch.get_rng_state()}
ckpt.save_run(path, model, {"dataset": "mnist", "epochs": 2}, state)
"""


@pytest.mark.parametrize(
    "die_at,survivor",
    [(0, 1), (1, 1), (2, 1), (3, 2)],
    ids=["during-write", "before-any-rename", "between-state-and-weights", "between-weights-and-state"],
)
def test_a_kill_at_any_point_of_a_save_leaves_a_matching_pair(tmp_path, small_model, die_at, survivor):
    p = tmp_path / "run.safetensors"
    ckpt.save_run(p, small_model, {"dataset": "mnist", "epochs": 1}, state_for(1))
    proc = subprocess.run([sys.executable, "-c", KILL_SCRIPT, str(p), str(die_at)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 9, proc.stderr
    model, meta = ckpt.load_checkpoint(p)
    state = ckpt.load_train_state(p)
    assert state["epoch"] == survivor and meta.epochs == survivor and state["weights_sha256"] == meta.weights_sha256
    with ckpt.writer_lock(p):
        ckpt.recover(p)  # what the next `train --out` does first
    assert sorted(f.name for f in tmp_path.iterdir()) == [".run.safetensors.lock", "run.safetensors", "run.safetensors.train.pt"]
    assert ckpt.load_train_state(p)["epoch"] == survivor


@pytest.mark.parametrize("fails", ["weights", "state"])
def test_a_full_disk_leaves_the_previous_pair_and_says_so(tmp_path, small_model, monkeypatch, fails):
    p = tmp_path / "run.safetensors"
    ckpt.save_run(p, small_model, {"dataset": "mnist", "epochs": 1}, state_for(1))
    before = {f.name: f.read_bytes() for f in tmp_path.iterdir()}

    def full(*args, **kwargs):
        with open(args[1], "wb") as f:  # a partial file, as a real full disk leaves
            f.write(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(*((ckpt.files, "save_file", full) if fails == "weights" else (ckpt.runs, "torch", _FullTorch(full))))
    with pytest.raises(CapsvizError, match="could not save .*No space left on device.*previous checkpoint there is unchanged"):
        ckpt.save_run(p, moved(small_model, 1.0), {"dataset": "mnist", "epochs": 2}, state_for(2))
    monkeypatch.undo()
    assert {f.name: f.read_bytes() for f in tmp_path.iterdir()} == before
    assert ckpt.load_train_state(p)["epoch"] == 1


class _FullTorch:
    """`torch` as capsviz.checkpoint.runs sees it, with save failing like a full disk."""

    def __init__(self, failing_save):
        self.save = lambda obj, f: failing_save(obj, f)

    def __getattr__(self, name):
        return getattr(torch, name)


def test_a_state_from_another_save_is_refused(tmp_path, small_model):
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    ckpt.save_run(a, small_model, {"dataset": "mnist"}, state_for(1))
    ckpt.save_run(b, moved(small_model, 0.5), {"dataset": "mnist"}, state_for(2))
    ckpt.train_state_path(a).write_bytes(ckpt.train_state_path(b).read_bytes())
    with pytest.raises(CapsvizError, match="does not belong to the weights in .*a.safetensors.*--init-from"):
        ckpt.load_train_state(a)


def test_a_state_saved_before_the_digest_existed_is_refused_with_the_way_out(tmp_path, small_model):
    p = tmp_path / "old.safetensors"
    ckpt.save_checkpoint(p, small_model, {"dataset": "mnist"})
    torch.save(state_for(1), ckpt.train_state_path(p))  # no weights_sha256: a state from an older capsviz
    with pytest.raises(CapsvizError, match="older capsviz.*--init-from .*old.safetensors$"):
        ckpt.load_train_state(p)


def test_an_output_that_is_a_folder_is_refused_before_training(synthetic_data, tmp_path):
    (tmp_path / "out.safetensors").mkdir()
    with pytest.raises(CapsvizError, match="is a folder"):
        train(TrainRun(epochs=1, **TINY), tmp_path / "out.safetensors")


def test_a_second_writer_is_refused_while_the_first_holds_the_lock(synthetic_data, tmp_path, capsys):
    out = tmp_path / "shared.safetensors"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from capsviz import checkpoint as c\nwith c.writer_lock(sys.argv[1]):\n print('ready', flush=True); time.sleep(60)",
            str(out),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        argv = [
            "train",
            "--model",
            "matrix-small",
            "--epochs",
            "1",
            "--batch-size",
            "16",
            "--train-limit",
            "16",
            "--device",
            "cpu",
            "--out",
            str(out),
        ]
        assert main(argv) == 2
        one_error_line(capsys, "is being written by another capsviz run", f"process {holder.pid}")
        assert not out.exists()
    finally:
        holder.kill()
        holder.wait()
    assert main(argv) == 0  # the lock went with the process that held it


def test_no_room_or_no_permission_is_found_before_training(synthetic_data, tmp_path, monkeypatch):
    events = []
    monkeypatch.setattr(ckpt.runs.shutil, "disk_usage", lambda p: type("U", (), {"free": 1000})())
    with pytest.raises(CapsvizError, match="0 MB free; saving m.safetensors needs about"):
        train(TrainRun(epochs=1, **TINY), tmp_path / "m.safetensors", on_event=events.append)
    assert [e.kind for e in events] == ["failed"]
    monkeypatch.undo()
    (tmp_path / "file").write_text("")
    with pytest.raises(CapsvizError, match="cannot write in"):
        train(TrainRun(epochs=1, **TINY), tmp_path / "file" / "m.safetensors")


def test_resuming_a_complete_run_saves_nothing_and_says_why(synthetic_data, tmp_path, capsys):
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    train(TrainRun(epochs=1, **TINY), a)
    capsys.readouterr()
    assert main(["train", "--resume", str(a), "--epochs", "1", "--out", str(b)]) == 2
    one_error_line(capsys, "has already trained its 1 epochs", "--epochs 2")
    assert not b.exists()


def test_leftover_partial_files_are_removed_by_the_next_run(synthetic_data, tmp_path):
    out = tmp_path / "m.safetensors"
    stale = [
        tmp_path / ".m.safetensors.abc123.part",
        tmp_path / ".m.safetensors.train.pt.xyz.part",
        tmp_path / "m.safetensors.train.pt.next",
    ]
    for f in stale:
        f.write_bytes(b"x" * 1000)
    train(TrainRun(epochs=1, **TINY), out)
    assert not any(f.exists() for f in stale)
    ckpt.load_train_state(out)


# ---------------------------------------------------------------- training state


@pytest.fixture(scope="module")
def trained(tmp_path_factory, synthetic_root):
    """One tiny finished run whose training state each case below spoils a copy of."""
    os.environ["CAPSVIZ_DATA_DIR"] = str(synthetic_root)
    try:
        p = tmp_path_factory.mktemp("trained") / "m.safetensors"
        train(TrainRun(epochs=1, **TINY), p)
    finally:
        del os.environ["CAPSVIZ_DATA_DIR"]
    return p


def spoil(key, value):
    def mutate(state):
        d, *path = key.split(".")
        target = state
        for k in [d, *path][:-1]:
            target = target[k]
        last = [d, *path][-1]
        if value is DELETE:
            del target[last]
        else:
            target[last] = value(target[last]) if callable(value) else value

    return mutate


DELETE = object()
BAD_STATE = [
    ("unknown-key", spoil("evil", 1), "unknown key 'evil'"),
    ("missing-optimizer", spoil("optimizer", DELETE), "missing 'optimizer'"),
    ("dataset-path", spoil("run.dataset", "../../etc"), "run.dataset: must be one of"),
    ("unknown-run-field", spoil("run.shell", "sh"), "run: unknown field 'shell'"),
    ("rng-size", spoil("torch_rng", lambda t: t[:100]), "torch_rng: must be a uint8 tensor of shape"),
    ("rng-type", spoil("torch_rng", [1, 2, 3]), "torch_rng"),
    ("step-string", spoil("step", "ten"), "step: must be an integer"),
    ("step-float", spoil("step", 2.5), "step: must be an integer"),
    ("step-negative", spoil("step", -1), "step: must be an integer in"),
    ("epoch-huge", spoil("epoch", 10**12), "epoch"),
    ("history-string", spoil("history", "none"), "history: must be a list"),
    ("elapsed-nan", spoil("elapsed", float("nan")), "elapsed"),
    ("optimizer-list", spoil("optimizer", [1]), "optimizer: must be a dict"),
    (
        "moment-shape",
        spoil("optimizer.state", lambda s: {k: dict(v, exp_avg=v["exp_avg"][:1]) for k, v in s.items()}),
        "exp_avg: must be a finite float tensor",
    ),
    (
        "moment-nan",
        spoil("optimizer.state", lambda s: {k: dict(v, exp_avg_sq=v["exp_avg_sq"] * float("nan")) for k, v in s.items()}),
        "exp_avg_sq",
    ),
    ("param-groups", spoil("optimizer.param_groups", []), "optimizer.param_groups: must be a list of 1"),
    ("lr-string", spoil("optimizer.param_groups", lambda g: [dict(g[0], lr="fast")]), "optimizer.param_groups[0].lr"),
    ("scheduler-key", spoil("scheduler", lambda s: {k: v for k, v in s.items() if k != "last_epoch"}), "scheduler: must hold the keys"),
    ("other-weights", spoil("weights_sha256", "0" * 64), "does not belong to the weights"),
]


@pytest.mark.parametrize("name,mutate,says", BAD_STATE, ids=[c[0] for c in BAD_STATE])
def test_bad_training_state_is_refused_in_one_line(trained, synthetic_data, tmp_path, capsys, name, mutate, says):
    p = tmp_path / "m.safetensors"
    p.write_bytes(trained.read_bytes())
    state = torch.load(ckpt.train_state_path(trained), weights_only=True)
    mutate(state)
    torch.save(state, ckpt.train_state_path(p))
    assert main(["train", "--resume", str(p), "--epochs", "2", "--out", str(p)]) == 2
    one_error_line(capsys, says)
    assert ckpt.read_meta(p).epochs == 1  # nothing was trained or saved


def test_a_pickled_state_is_refused_once_without_torchs_advice(trained, synthetic_data, tmp_path, capsys):
    p = tmp_path / "m.safetensors"
    p.write_bytes(trained.read_bytes())
    torch.save({"run": Path("/etc")}, ckpt.train_state_path(p))  # any non-tensor object needs a pickle
    assert main(["train", "--resume", str(p), "--epochs", "2", "--out", str(p)]) == 2
    line = one_error_line(capsys, "holds Python objects a safe load refuses")
    assert "weights_only" not in line and "unsafe" not in line.lower()


def test_the_unspoiled_state_resumes(trained, synthetic_data, tmp_path):
    p = tmp_path / "m.safetensors"
    p.write_bytes(trained.read_bytes())
    ckpt.train_state_path(p).write_bytes(ckpt.train_state_path(trained).read_bytes())
    assert main(["train", "--resume", str(p), "--epochs", "2", "--out", str(p)]) == 0
    assert ckpt.read_meta(p).epochs == 2


# ---------------------------------------------------------------- CLI arguments

BAD_ARGS = [
    (["evaluate", "x.safetensors", "--limit", "-5"], "--limit: must be an integer >= 1, found -5"),
    (["evaluate", "x.safetensors", "--limit", "1e3"], "--limit: must be an integer"),
    (["train", "--out", "o.safetensors", "--train-limit", "0"], "--train-limit"),
    (["train", "--out", "o.safetensors", "--test-limit", "-1"], "--test-limit"),
    (["train", "--out", "o.safetensors", "--lr", "nan"], "--lr: must be a finite number"),
    (["train", "--out", "o.safetensors", "--lr", "inf"], "--lr"),
    (["train", "--out", "o.safetensors", "--lr", "0"], "--lr"),
    (["train", "--out", "o.safetensors", "--lr", "fast"], "--lr: must be a number"),
    (["train", "--out", "o.safetensors", "--routing-iterations", "0"], "--routing-iterations"),
    (["train", "--out", "o.safetensors", "--routing-iterations", "1000000000"], "--routing-iterations"),
    (["train", "--out", "o.safetensors", "--epochs", "0"], "--epochs"),
    (["train", "--out", "o.safetensors", "--batch-size", "abc"], "--batch-size"),
    (["train", "--out", "o.safetensors", "--decay-steps", "0"], "--decay-steps"),
    (["train", "--out", "o.safetensors", "--final-lambda", "-inf"], "--final-lambda"),
    (["train", "--out", "o.safetensors", "--margin-start", "2"], "--margin-start"),
    (["train", "--out", "o.safetensors", "--seed", "-1"], "--seed"),
    (["train", "--out", "o.safetensors", "--model", "evil"], "--model"),
    (["train"], "--out"),
    (["bench", "--steps", "0"], "--steps"),
    (["bench", "--routing-iterations", "-2"], "--routing-iterations"),
    (["export", "a", "b", "--max-change", "nan"], "--max-change"),
    (["frobnicate"], "invalid choice"),
]


@pytest.mark.parametrize("argv,says", BAD_ARGS, ids=[" ".join(a[1:]) or a[0] for a, _ in BAD_ARGS])
def test_bad_arguments_are_one_error_line_and_exit_2(capsys, argv, says):
    assert main(argv) == 2
    one_error_line(capsys, says)


def test_export_checks_its_destination_and_dataset_before_evaluating(good, tmp_path, capsys, monkeypatch):
    import capsviz.train

    monkeypatch.setattr(capsviz.train, "evaluate", lambda *a, **k: pytest.fail("evaluated before checking"))
    assert main(["export", str(good), str(tmp_path)]) == 2
    one_error_line(capsys, "is a folder")
    no_dataset = rewrite(good, tmp_path / "nodata.safetensors", deleter("dataset"))
    assert main(["export", str(no_dataset), str(tmp_path / "out.safetensors")]) == 2
    one_error_line(capsys, "does not record the dataset")
    (tmp_path / "file").write_text("")
    assert main(["export", str(good), str(tmp_path / "file" / "out.safetensors")]) == 2
    one_error_line(capsys, "cannot write in")


def test_a_training_error_is_printed_once(synthetic_data, tmp_path, capsys):
    (tmp_path / "stateless.safetensors").write_bytes(b"weights without a training state beside them")
    assert main(["train", "--out", str(tmp_path / "m.safetensors"), "--resume", str(tmp_path / "stateless.safetensors")]) == 2
    one_error_line(capsys, "not found", "only runs saved by `capsviz train` can be resumed")


# ---------------------------------------------------------------- IDX files


def idx_header(code: int, dims) -> bytes:
    return bytes([0, 0, code, len(dims)]) + struct.pack(f">{len(dims)}I", *dims)


def gzip_stream(head: bytes, zeros: int) -> bytes:
    """A gzip file of `head` then `zeros` zero bytes, compressed piecewise (never all in memory)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts, chunk = [c.compress(head)], bytes(1 << 20)
    for _ in range(zeros >> 20):
        parts.append(c.compress(chunk))
    parts.append(c.flush())
    return b"".join(parts)


BAD_IDX = [
    ("dims-overflow", idx_header(0x08, [2**31, 2**31, 2**31]), "no dataset file here holds more than"),
    ("dims-huge-float", idx_header(0x0E, [4_000_000_000, 100]), "no dataset file here holds more than"),
    ("promises-more", idx_header(0x08, [3, 28, 28]) + bytes(100), "file has 100"),
    ("holds-more", idx_header(0x08, [1, 28, 28]) + bytes(5000), "file has more"),
    ("truncated-header", bytes([0, 0, 8, 3, 0, 0]), "truncated IDX header"),
    ("bad-type", bytes([0, 0, 0x42, 1, 0, 0, 0, 1, 7]), "not an IDX file"),
    ("empty", b"", "not an IDX file"),
]


@pytest.mark.parametrize("name,content,says", BAD_IDX, ids=[c[0] for c in BAD_IDX])
@pytest.mark.parametrize("compressed", [False, True], ids=["raw", "gzip"])
def test_bad_idx_files_are_refused_before_allocating(tmp_path, name, content, says, compressed):
    p = tmp_path / ("f.gz" if compressed else "f")
    p.write_bytes(gzip.compress(content) if compressed else content)
    with pytest.raises(CapsvizError, match=says):
        idx.read_idx(p)


def test_a_gzip_bomb_is_not_decompressed_into_memory(tmp_path):
    # a 200 kB file that expands to 200 MB behind a header promising 10 small images
    p = tmp_path / "bomb-images-idx3-ubyte.gz"
    p.write_bytes(gzip_stream(idx_header(0x08, [10, 28, 28]), 200 << 20))
    assert p.stat().st_size < 1_000_000
    import tracemalloc

    tracemalloc.start()
    with pytest.raises(CapsvizError, match="file has more"):
        idx.read_idx(p)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 20_000_000  # read as far as the header promised, not the 200 MB
    # read whole (checksums, smallNORB): refused by the size the gzip declares, or by reading one byte past the limit
    with pytest.raises(CapsvizError, match="gzip declares 209,715,216 bytes"):
        idx.decode_bytes(p.read_bytes(), p, limit=10_000_000)
    evasive = bytearray(p.read_bytes())
    evasive[-4:] = struct.pack("<I", 100)  # a trailer that lies about the size
    with pytest.raises(CapsvizError, match="expands to more than 10,000,000 bytes"):
        idx.decode_bytes(bytes(evasive), p, limit=10_000_000)


def test_a_header_beyond_the_maximum_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(idx, "MAX_DECODED_BYTES", 1000)
    p = tmp_path / "f.gz"
    idx.write_idx(p, np.zeros((2, 28, 28), np.uint8))
    with pytest.raises(CapsvizError, match="header promises 1,568 bytes"):
        idx.read_idx(p)


def test_zero_images_are_refused(tmp_path, good, capsys, monkeypatch):
    folder = tmp_path / "mnist"
    folder.mkdir()
    for prefix in ("train", "t10k"):
        idx.write_idx(folder / f"{prefix}-images-idx3-ubyte.gz", np.zeros((0, 28, 28), np.uint8))
        idx.write_idx(folder / f"{prefix}-labels-idx1-ubyte.gz", np.zeros((0,), np.uint8))
    with pytest.raises(CapsvizError, match="holds no images"):
        load_idx_pair(folder / "t10k-images-idx3-ubyte.gz", folder / "t10k-labels-idx1-ubyte.gz")
    monkeypatch.setenv("CAPSVIZ_DATA_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert main(["evaluate", str(good), "--device", "cpu"]) == 2
    one_error_line(capsys, "holds no images")


# ---------------------------------------------------------------- routing numerics

MAGNITUDES = [0.0, 1e-30, 1.0, 1e18, 1e19, 1e30, 1e38, 3.4e38]


def votes(shape, magnitude, dtype=torch.float32):
    magnitude = min(magnitude, torch.finfo(dtype).max)  # bfloat16's largest is a little below float32's
    g = torch.Generator().manual_seed(0)
    return (torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1).mul(magnitude).to(dtype).requires_grad_()


@pytest.mark.parametrize("magnitude", MAGNITUDES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_squash_is_finite_and_shorter_than_one_everywhere(magnitude, dtype):
    s = votes((64, 16), magnitude, dtype)
    v = squash(s)
    v.float().sum().backward()
    assert torch.isfinite(v).all() and torch.isfinite(s.grad).all()
    assert float(v.detach().float().norm(dim=-1).max()) <= 1.0 + 1e-2


def test_squash_is_eq1_where_plain_arithmetic_holds():
    s = votes((64, 16), 1.0, torch.float64).detach() * torch.logspace(-3, 3, 64, dtype=torch.float64).unsqueeze(1)
    n2 = (s * s).sum(-1, keepdim=True)
    torch.testing.assert_close(squash(s), n2 / (1 + n2) * s / torch.sqrt(n2 + 1e-8))
    big = torch.tensor([[3e38, 4e38 / 10]])  # |s| overflows float32 when squared: direction kept, length 1
    torch.testing.assert_close(squash(big), torch.tensor([[3.0, 0.4]]) / math.hypot(3.0, 0.4))


@pytest.mark.parametrize("magnitude", MAGNITUDES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dynamic_routing_is_finite_for_any_float32_predictions(magnitude, dtype):
    u_hat = votes((2, 32, 10, 16), magnitude, dtype)
    res = dynamic_routing(u_hat, 3, record=True)
    assert res.v.dtype == dtype and torch.isfinite(res.v).all() and torch.isfinite(res.c).all()
    res = dynamic_routing(u_hat, 3)
    res.v.float().square().sum().backward()
    assert torch.isfinite(u_hat.grad).all()


@pytest.mark.parametrize("magnitude", MAGNITUDES)
@pytest.mark.parametrize("active", [True, False], ids=["active", "no-input-activation"])
def test_em_routing_is_finite_for_any_float32_votes(magnitude, active):
    V = votes((2, 32, 10, 16), magnitude)
    a_in = (torch.rand(2, 32) if active else torch.zeros(2, 32)).requires_grad_()
    beta_u, beta_a = torch.zeros(10, requires_grad=True), torch.zeros(10, requires_grad=True)
    res = em_routing(V, a_in, 3, beta_u, beta_a)
    assert res.a.dtype == torch.float32 and torch.isfinite(res.a).all() and torch.isfinite(res.mu).all()
    (res.a.sum() + res.mu.sum()).backward()
    for t in (V, a_in, beta_u, beta_a):
        assert torch.isfinite(t.grad).all()
    rec = em_routing(V.detach(), a_in.detach(), 3, record=True)
    assert all(torch.isfinite(x).all() for x in (rec.R, rec.mu_trace, rec.sigma, rec.a_trace))


@pytest.mark.parametrize("iterations", [0, -1, 2.5, True])
def test_fewer_than_one_iteration_is_refused(iterations):
    with pytest.raises(ValueError, match="at least 1"):
        dynamic_routing(torch.randn(1, 4, 2, 3), iterations)
    with pytest.raises(ValueError, match="at least 1"):
        em_routing(torch.randn(1, 4, 2, 16), torch.rand(1, 4), iterations)


def test_train_flags_are_the_run_fields_with_help_and_defaults(capsys):
    import dataclasses

    from capsviz.cli import parser

    args = parser().parse_args(["train", "--out", "o.safetensors", "--no-reconstruction", "--init-from", "a.safetensors"])
    run = TrainRun(**{f.name: getattr(args, f.name) for f in dataclasses.fields(TrainRun)})
    assert run.reconstruction is False and run.init_from == "a.safetensors" and run.routing_iterations is None
    assert parser().parse_args(["train", "--out", "o"]).reconstruction is None  # the preset's
    with pytest.raises(SystemExit):
        parser().parse_args(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for f in dataclasses.fields(TrainRun):
        flag = f.metadata["flag"] or "--" + f.name.replace("_", "-")
        assert flag in text, flag
    assert "(default: 128)" in text and "(default: the preset's)" in text and text.count("(default:") >= len(dataclasses.fields(TrainRun))


def test_the_run_schema_checks_every_run_field():
    import dataclasses

    from capsviz.schema import RUN

    assert set(RUN.fields) == {f.name for f in dataclasses.fields(TrainRun)}
