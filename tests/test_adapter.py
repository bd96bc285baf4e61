"""Your own model: a CapsNet written the way public PyTorch repositories write it, saved as a
state dict, imported (capsviz.adapter, `capsviz import`) and opened like a capsviz model."""

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file
from streamlit.testing.v1 import AppTest
from test_app import APP, router_mode  # noqa: F401 - the autouse fixture runs the app as app.py's router does

from capsviz import checkpoint as ckpt
from capsviz.adapter import CapsuleAdapter, Parts, import_file, import_notes, read_state_dict
from capsviz.errors import CapsvizError

ROOT = Path(__file__).resolve().parents[1]


def sabour_squash(s: torch.Tensor) -> torch.Tensor:
    """Eq. 1: |s|^2 / (1 + |s|^2) s / |s|."""
    n2 = (s * s).sum(-1, keepdim=True)
    return n2 / (1 + n2) * s / torch.sqrt(n2 + 1e-12)


class PublicCapsNet(nn.Module):
    """The layout most public PyTorch CapsNets share, written here from the paper: Conv1, PrimaryCaps
    as one conv (viewed (B, T, K, G, G)) or as K convs of T channels (one per capsule dimension),
    DigitCaps with W (1, I, J, D, K), dynamic routing with 3 iterations, and the decoder."""

    def __init__(self, *, c1=256, types=32, dim=8, classes=10, D=16, modulelist=False, decoder=True, size=28, position_major=False):
        super().__init__()
        self.types, self.dim, self.modulelist, self.position_major = types, dim, modulelist, position_major
        self.conv1 = nn.Conv2d(1, c1, 9)
        if modulelist:
            self.primary_capsules = nn.ModuleList(nn.Conv2d(c1, types, 9, stride=2) for _ in range(dim))
        else:
            self.primary_capsules = nn.Conv2d(c1, types * dim, 9, stride=2)
        G = (size - 8 - 9) // 2 + 1  # Conv1 9x9, then 9x9 stride 2
        self.digit_capsules = nn.Module()
        self.digit_capsules.W = nn.Parameter(torch.randn(1, G * G * types, classes, D, dim))  # N(0, 1), as public repos start it
        self.digit_capsules.register_buffer("b_init", torch.zeros(1, G * G * types, classes))  # an all-zero buffer some repos keep
        self.decoder = (
            nn.Sequential(
                nn.Linear(classes * D, 512), nn.ReLU(), nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, size * size), nn.Sigmoid()
            )
            if decoder
            else None
        )

    def forward(self, x):
        B = x.shape[0]
        h = F.relu(self.conv1(x))
        if self.modulelist:
            u = torch.stack([conv(h) for conv in self.primary_capsules], dim=-1)  # (B, T, G, G, K)
        else:
            p = self.primary_capsules(h)  # (B, T*K, G, G)
            u = p.view(B, self.types, self.dim, *p.shape[-2:]).permute(0, 1, 3, 4, 2)  # (B, T, G, G, K)
        if self.position_major:  # as TensorFlow's reshape of NHWC maps numbers them
            u = u.permute(0, 2, 3, 1, 4)  # (B, G, G, T, K)
        u = sabour_squash(u.reshape(B, -1, self.dim))  # (B, I, K), i = (type, row, col) or (row, col, type)
        u_hat = (self.digit_capsules.W @ u[:, :, None, :, None]).squeeze(-1)  # (B, I, J, D)
        b = torch.zeros(u_hat.shape[:3])  # (B, I, J)
        for t in range(3):
            c = b.softmax(dim=2)
            v = sabour_squash((c.unsqueeze(-1) * u_hat).sum(1))  # (B, J, D)
            if t < 2:
                b = b + (u_hat * v.unsqueeze(1)).sum(-1)
        return v


def save_public(path: Path, **kw) -> PublicCapsNet:
    torch.manual_seed(0)
    net = PublicCapsNet(**kw).eval()
    torch.save(net.state_dict(), path)
    return net


def images(n=4) -> torch.Tensor:
    torch.manual_seed(1)
    return torch.rand(n, 1, 28, 28)


@pytest.mark.parametrize("modulelist", [False, True], ids=["one-conv", "modulelist"])
def test_imported_model_gives_the_original_class_capsules(tmp_path, modulelist):
    """The paper-size network (W (1, 1152, 10, 16, 8)): the same v as its own forward."""
    net = save_public(tmp_path / "net.pt", modulelist=modulelist)
    adapter = CapsuleAdapter(read_state_dict(tmp_path / "net.pt"))
    model = adapter.model()
    assert model.digits.W.shape == (1152, 10, 16, 8)
    x = images()
    with torch.no_grad():
        want, got = net(x), model(x).capsules
    assert float(want.norm(dim=-1).max()) > 0.1  # capsules long enough for the comparison to mean something
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
    assert any("b_init" in n and "ignored" in n for n in adapter.notes)
    wrong = CapsuleAdapter(read_state_dict(tmp_path / "net.pt"), primary_order="position-major").model()
    with torch.no_grad():
        assert not torch.allclose(wrong(x).capsules, want, atol=1e-3)  # the numbering matters, and the default is this layout's


SMALL = {"c1": 16, "types": 4}  # I = 144 primary capsules: the same layout, a fraction of the work


def small_state(**kw) -> tuple[PublicCapsNet, dict]:
    torch.manual_seed(0)
    net = PublicCapsNet(**SMALL, **kw).eval()
    return net, dict(net.state_dict())


@pytest.mark.parametrize(
    "layout",
    [
        lambda W: W[0],  # (I, J, D, K)
        lambda W: W[0].permute(1, 0, 3, 2),  # (J, I, K, D): u_hat = u W, as some repos multiply
        lambda W: W[0].transpose(2, 3),  # (I, J, K, D)
        lambda W: W[0].transpose(0, 1)[None],  # (1, J, I, D, K)
    ],
    ids=["IJDK", "JIKD", "IJKD", "1JIDK"],
)
def test_digit_weights_in_every_common_layout(tmp_path, layout):
    net, state = small_state()
    state["digit_capsules.W"] = layout(state["digit_capsules.W"]).contiguous()
    torch.save(state, tmp_path / "net.pth")
    model = CapsuleAdapter(read_state_dict(tmp_path / "net.pth")).model()
    x = images(2)
    with torch.no_grad():
        torch.testing.assert_close(model(x).capsules, net(x), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("modulelist", [False, True], ids=["one-conv", "modulelist"])
def test_position_major_numbering(modulelist):
    net, state = small_state(modulelist=modulelist, position_major=True)
    x = images(2)
    with torch.no_grad():
        got = CapsuleAdapter(state, primary_order="position-major").model()(x).capsules
        torch.testing.assert_close(got, net(x), atol=1e-5, rtol=1e-4)


def test_safetensors_and_training_checkpoints_are_read(tmp_path):
    net, state = small_state(modulelist=True)
    save_file({k: v.contiguous() for k, v in state.items()}, tmp_path / "net.safetensors")
    torch.save({"epoch": 3, "state_dict": state, "best": 0.99}, tmp_path / "run.pt")
    x = images(2)
    for name in ("net.safetensors", "run.pt"):
        with torch.no_grad():
            got = CapsuleAdapter(read_state_dict(tmp_path / name)).model()(x).capsules
        torch.testing.assert_close(got, net(x), atol=1e-5, rtol=1e-4)


class Boom:
    """A pickle that would run a command when loaded unsafely."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_files_that_are_not_plain_state_dicts_are_refused_in_one_line(tmp_path):
    net, _ = small_state()
    torch.save(net, tmp_path / "whole.pt")  # the whole module: its class is needed to unpickle it
    with open(tmp_path / "code.pt", "wb") as f:
        pickle.dump({"conv1.weight": Boom(tmp_path / "ran")}, f)
    torch.save([torch.zeros(3)], tmp_path / "list.pt")
    torch.save({"lr": 0.1}, tmp_path / "numbers.pt")
    (tmp_path / "text.pt").write_text("not a torch file")
    expected = {
        "whole.pt": "a safe load refuses it (it holds Python objects",
        "code.pt": "a safe load refuses it (it holds Python objects",
        "list.pt": "holds a list, not a state dict",
        "numbers.pt": "holds a dict with keys lr, not a state dict",
        "text.pt": "a safe load refuses it",
    }
    for name, words in expected.items():
        with pytest.raises(CapsvizError) as e:
            read_state_dict(tmp_path / name)
        assert words in str(e.value) and "\n" not in str(e.value), (name, str(e.value))
        assert "weights_only=False" not in str(e.value)  # never the advice to load it unsafely
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda s: s.pop("digit_capsules.W"), "no DigitCaps W found"),
        (lambda s: s.pop("conv1.weight"), "no Conv1 found"),
        (lambda s: s.pop("primary_capsules.weight"), "no PrimaryCaps found"),
        (lambda s: s.pop("decoder.2.weight"), "decoder: expected one Linear layer reading 512 inputs after 1 layer(s), found none"),
        (lambda s: s.update({"extra.weight": torch.ones(7, 5, 3)}), "extra.weight (7, 5, 3) fits no part of a CapsNet"),
        (lambda s: s.update({"digit_capsules.bias": torch.ones(1, 10, 16)}), "looks like a DigitCaps bias and is not zero"),
        (lambda s: s.update({"W2": s["digit_capsules.W"].clone()}), "ambiguous DigitCaps W"),
    ],
    ids=["no-W", "no-conv1", "no-primary", "decoder", "extra", "bias", "two-W"],
)
def test_wrong_layouts_are_refused_naming_what_is_missing(change, words):
    _, state = small_state()
    change(state)
    with pytest.raises(CapsvizError) as e:
        CapsuleAdapter(state).model()
    assert words in str(e.value) and "\n" not in str(e.value)


def test_a_zero_bias_and_no_decoder_are_said(tmp_path):
    net, state = small_state(decoder=False)
    state["digit_capsules.bias"] = torch.zeros(1, 10, 16)
    adapter = CapsuleAdapter(state)
    model = adapter.model()
    assert model.decoder is None and not model.config.decodes
    notes = " | ".join(adapter.notes)
    assert "ignored: digit_capsules.bias (1, 10, 16) (all zeros)" in notes and "no decoder found" in notes
    x = images(2)
    with torch.no_grad():
        torch.testing.assert_close(model(x).capsules, net(x), atol=1e-5, rtol=1e-4)


def cli(*args, env=None):
    env = dict(os.environ if env is None else env, OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", "capsviz", "import", *map(str, args)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def test_import_command_end_to_end(synthetic_data, tmp_path):
    save_public(tmp_path / "mine.pt", **SMALL)
    out = tmp_path / "models" / "mine.safetensors"
    r = cli(tmp_path / "mine.pt", "--out", out, "--limit", "20")
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(r.stdout)
    assert result["checkpoint"] == str(out) and result["n_test"] == 20
    assert "assumed: dynamic routing" in r.stderr and "capsviz app --checkpoints" in r.stderr
    model, meta = ckpt.load_checkpoint(out)
    assert meta.family == "capsnet" and meta.dataset == "mnist" and meta.metrics.n_test == 20
    assert meta.raw["imported"]["file"] == "mine.pt" and import_notes(meta) == result["notes"]  # kept as message and values
    assert model.config.primary_types == 4 and model.config.routing_iterations == 3

    again = cli(tmp_path / "mine.pt", "--out", out, "--no-evaluate")  # never over a model without --replace
    assert again.returncode == 2 and again.stderr.count("\n") == 1 and "already holds a model" in again.stderr
    r = cli(tmp_path / "mine.pt", "--out", out, "--no-evaluate", "--replace")
    assert r.returncode == 0, r.stderr[-2000:]
    assert not ckpt.read_meta(out).metrics.measured  # stored as not evaluated, as asked

    with open(tmp_path / "code.pt", "wb") as f:
        pickle.dump({"conv1.weight": Boom(tmp_path / "ran")}, f)
    bad = cli(tmp_path / "code.pt", "--out", tmp_path / "other.safetensors")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
    assert not (tmp_path / "ran").exists() and not (tmp_path / "other.safetensors").exists()


def test_import_never_writes_a_shipped_model(tmp_path):
    save_public(tmp_path / "mine.pt", **SMALL)
    with pytest.raises(CapsvizError, match="comes with capsviz and is never overwritten"):
        import_file(tmp_path / "mine.pt", ROOT / "checkpoints" / "capsnet-mnist.safetensors", replace=True, evaluate=False)


def test_imported_model_opens_in_the_pages(synthetic_data, tmp_path, monkeypatch):
    folder = tmp_path / "models"
    save_public(tmp_path / "mine.pt", **SMALL)
    import_file(tmp_path / "mine.pt", folder / "mine.safetensors", limit=20)
    monkeypatch.setenv("CAPSVIZ_CHECKPOINTS", str(folder))
    at = AppTest.from_file(APP, default_timeout=120)
    for page in ("explorer", "tour", "routing", "zoo"):
        at.switch_page(f"pages/{page}.py").run()
        assert not at.exception, (page, at.exception)
        assert not at.error, (page, [e.value for e in at.error])
        assert not [i.value for i in at.info if "is a CapsNet; this page needs" in i.value]  # shown itself, no stand-in
        assert at.image or at.get("plotly_chart"), page  # the page drew the model's pictures
    assert at.session_state["model_pick"] == "mine.safetensors"


class MyAdapter(CapsuleAdapter):
    """docs/own-model.md's example for another layout: W kept as (I, J*D, K), capsules numbered (row, col, type)."""

    def parts(self) -> Parts:
        s = self.state
        return Parts(
            conv1=(s["stem.weight"], s["stem.bias"]),
            primary=(s["prim.weight"], s["prim.bias"]),
            primary_dim=8,
            W=s["caps.W"].view(s["caps.W"].shape[0], 10, 16, 8),
            decoder=[(s[f"dec.{n}.weight"], s[f"dec.{n}.bias"]) for n in (0, 2, 4)],
            notes=["W read from caps.W as (I, J*D, K)"],
        )


def test_a_subclass_imports_another_layout(synthetic_data, tmp_path):
    net, state = small_state()
    T, G = SMALL["types"], 6
    W = state["digit_capsules.W"][0].view(T, G * G, 10, 16, 8).transpose(0, 1).reshape(G * G * T, 160, 8)  # (I, J*D, K), (row, col, type)
    mine = {"stem.weight": state["conv1.weight"], "stem.bias": state["conv1.bias"], "caps.W": W.contiguous()}
    mine |= {"prim.weight": state["primary_capsules.weight"], "prim.bias": state["primary_capsules.bias"]}
    mine |= {f"dec.{n}.{k}": state[f"decoder.{n}.{k}"] for n in (0, 2, 4) for k in ("weight", "bias")}
    torch.save(mine, tmp_path / "mine.pt")
    result = import_file(tmp_path / "mine.pt", tmp_path / "mine.safetensors", adapter=MyAdapter, limit=8)
    assert result["notes"][0] == "W read from caps.W as (I, J*D, K)" and result["n_test"] == 8
    model, _ = ckpt.load_checkpoint(tmp_path / "mine.safetensors")
    x = images(2)
    with torch.no_grad():
        torch.testing.assert_close(model(x).capsules, net(x), atol=1e-5, rtol=1e-4)


def test_a_briefly_trained_network_keeps_its_test_error(real_data, tmp_path):
    """Trained a little on real MNIST in its own code: the test error `capsviz import` stores is the
    one the network's own forward gets on the same images."""
    from capsviz.data import load_split
    from capsviz.losses import margin_loss

    torch.manual_seed(0)
    net = PublicCapsNet(**SMALL, decoder=False)
    train = load_split("mnist", "train")
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    for step in range(30):
        x = train.images[32 * step : 32 * (step + 1)].float().unsqueeze(1) / 255
        y = train.labels[32 * step : 32 * (step + 1)].long()
        loss = margin_loss(net(x).norm(dim=-1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.save(net.state_dict(), tmp_path / "trained.pt")
    result = import_file(tmp_path / "trained.pt", tmp_path / "trained.safetensors", limit=200)
    test = load_split("mnist", "test")
    with torch.no_grad():
        own = net.eval()(test.images[:200].float().unsqueeze(1) / 255).norm(dim=-1).argmax(1)
    own_error = 100.0 * float((own != test.labels[:200]).float().mean())
    assert result["n_test"] == 200 and result["test_error"] == pytest.approx(own_error, abs=0.5)  # one image at most
    assert own_error < 80  # it learned something: the comparison is not between two guessers


def test_a_subclass_whose_parts_do_not_fit_is_refused_in_one_line():
    class Wrong(MyAdapter):
        def parts(self) -> Parts:
            p = super().parts()
            p.W = p.W[:100]  # fewer primary capsules than the grid holds
            return p

    _, state = small_state()
    mine = {"stem.weight": state["conv1.weight"], "stem.bias": state["conv1.bias"], "caps.W": torch.zeros(144, 160, 8)}
    mine |= {"prim.weight": state["primary_capsules.weight"], "prim.bias": state["primary_capsules.bias"]}
    mine |= {f"dec.{n}.{k}": state[f"decoder.{n}.{k}"] for n in (0, 2, 4) for k in ("weight", "bias")}
    with pytest.raises(CapsvizError, match=r"do not make one CapsNet: W holds 100 primary capsules; a 6x6 grid of 4 types .* has 144$"):
        Wrong(mine).model()
