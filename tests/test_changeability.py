"""The changeability check, as CONTRIBUTING.md's recipes promise it: a model family and a routing
defined here, in the test suite, and given to capsviz through its registry alone (a family entry
plus its config and model; a routing entry plus its function), nothing of capsviz edited.

The family is a CapsNet with two primary-capsule layers (two convolutions over the same Conv1
maps, their capsules routed together); the routing, "toy-max", gives each input capsule's whole
coupling to the class its vote agrees with best. Both must appear in the zoo in their own words,
train from the command line, and open without a traceback on every page the family claims and in
the routing lab. The contract test says what an entry must provide, naming the missing hook.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch
import torch.nn as nn
from test_app import app, router_mode  # noqa: F401 - the fixtures: tiny models, router mode

from capsviz import checkpoint as ckpt
from capsviz import registry
from capsviz.analysis import lab, why, why_steps, zoo
from capsviz.bounds import MAX_ITERATIONS, bounded
from capsviz.cli import main
from capsviz.config import PRESETS, preset, to_dict
from capsviz.entries import PAGES, Layout
from capsviz.layers import DigitCaps, PrimaryCaps
from capsviz.models import ModelOutput, build_model
from capsviz.models.heads import ClassCapsules, Decoder
from capsviz.routing import RoutingResult, route
from capsviz.routing import squash as eq1
from capsviz.schema import CheckpointMeta

# ---------- the routing: one function and one entry ----------


def route_max(u_hat, *, iterations=3, prior=None, squash=None, record=False, dynamic=None) -> RoutingResult:
    """Each input capsule's whole coupling to its best-agreeing class: the class capsules of the
    even split v0 = squash(sum_i u_hat_j|i / J), each vote's agreement u_hat_j|i . v0_j, and c_ij = 1
    for the j it agrees with best (0 elsewhere); then v = squash(sum_i c_ij u_hat_j|i)."""
    squash = squash or eq1  # `route` passes the model's own squash, or None for Eq. 1
    B, J, I, D = u_hat.shape
    v0 = squash(u_hat.sum(2) / J)  # (B, J, D)
    b = torch.einsum("bjid,bjd->bij", u_hat, v0)  # (B, I, J): agreement of each vote with the even split's capsule
    c = nn.functional.one_hot(b.argmax(-1), J).to(u_hat.dtype)  # (B, I, J)
    v = squash(torch.einsum("bij,bjid->bjd", c, u_hat))  # (B, J, D)
    if not record:
        return RoutingResult(v=v)
    return RoutingResult(v=v, c=c[None], b=b[None], v_trace=v[None])


MAX = registry.Routing(
    "toy-max",
    route_max,
    words="max-agreement couplings (a toy)",
    about="each primary capsule's whole vote goes to the class it agrees with best",
    iterative=False,
    uniform="never: every coupling is 0 or 1",
    from_votes=True,
    copies=2,
)

# ---------- the family: its config, its model and one entry ----------


@dataclass(frozen=True)
class TwoPrimaryConfig:
    """A CapsNet with two primary-capsule layers over the same Conv1 maps (kernels 9 and 5)."""

    routing: ClassVar[str | None] = "dynamic"
    run_options: ClassVar[tuple[str, ...]] = ("reconstruction", "couplings")

    family: str = "toy-twoprimary"
    in_size: int = bounded(28, lo=20, hi=64)
    in_channels: int = bounded(1, lo=1, hi=3)
    num_classes: int = bounded(10, lo=2, hi=100)
    conv1_channels: int = bounded(8, lo=1, hi=64)
    primary_types: int = bounded(2, lo=1, hi=16)
    primary_dim: int = bounded(4, lo=1, hi=16)
    digit_dim: int = bounded(8, lo=1, hi=32)
    routing_iterations: int = bounded(3, lo=1, hi=MAX_ITERATIONS)
    couplings: str = bounded("dynamic", choices=registry.vector_routings)
    reconstruction: bool = True
    decoder_hidden: tuple[int, int] = bounded((16, 32), lo=1, hi=1024)

    @property
    def decodes(self) -> bool:
        return self.reconstruction

    @property
    def grids(self) -> tuple[int, int]:
        """The two primary layers' grids: kernel 9 stride 2 and kernel 5 stride 4 over Conv1's maps."""
        side = self.in_size - 8
        return (side - 9) // 2 + 1, (side - 5) // 4 + 1


class TwoPrimaryNet(ClassCapsules, nn.Module):
    def __init__(self, *, config: TwoPrimaryConfig):
        super().__init__()
        self.config = cfg = config
        self.conv1 = nn.Conv2d(cfg.in_channels, cfg.conv1_channels, 9)
        self.primary_a = PrimaryCaps(in_channels=cfg.conv1_channels, types=cfg.primary_types, dim=cfg.primary_dim, kernel=9, stride=2)
        self.primary_b = PrimaryCaps(in_channels=cfg.conv1_channels, types=cfg.primary_types, dim=cfg.primary_dim, kernel=5, stride=4)
        self.num_primary = sum(g * g for g in cfg.grids) * cfg.primary_types
        self.digits = DigitCaps(num_in=self.num_primary, num_out=cfg.num_classes, dim_in=cfg.primary_dim, dim_out=cfg.digit_dim)
        self.decoder = (
            Decoder(
                num_classes=cfg.num_classes, dim=cfg.digit_dim, hidden=cfg.decoder_hidden, out_size=cfg.in_size, channels=cfg.in_channels
            )
            if cfg.reconstruction
            else None
        )

    def primary_capsules(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.conv1(x)).permute(0, 2, 3, 1)  # (B, S', S', C1)
        return torch.cat([self.primary_a(h), self.primary_b(h)], 1)  # (B, I, K)

    def predictions(self, x: torch.Tensor) -> torch.Tensor:
        return self.digits(self.primary_capsules(x))  # (B, J, I, D)

    def route(self, u_hat, *, routing=None, iterations=None, record=False):
        T = self.config.routing_iterations if iterations is None else iterations
        return route(routing or self.config.couplings, u_hat, iterations=T, record=record)

    def forward(self, x, y=None, *, iterations=None, record=False, reconstruct=True, routing=None) -> ModelOutput:
        routed = self.route(self.predictions(x), routing=routing, iterations=iterations, record=record)
        out = self._outputs(routed.v, y, reconstruct)
        if record:
            out.trace = routed
            out.layer_traces["digitcaps"] = routed
        return out

    def trace(self, x, iterations=None, routing=None) -> ModelOutput:
        return self(x, iterations=iterations, record=True, reconstruct=False, routing=routing)


def two_primary_votes(model: TwoPrimaryNet, config: TwoPrimaryConfig, x, y) -> int:
    """What training keeps (capsviz.estimate, on the meta device): its primary capsules and
    decoder run; its votes (J, I, D) per image counted from their shapes."""
    model.primary_capsules(x)
    if model.decoder is not None:
        B = x.shape[0]
        model.decoder(
            torch.zeros(B, config.num_classes, config.digit_dim, device="meta"), torch.zeros(B, config.num_classes, device="meta")
        )
    return model.num_primary * config.num_classes * config.digit_dim


# Where its primary capsules sit: on two grids of different sides, so on no one grid the routing
# page could draw a map over; the page shows them one by one and says why, in these words
NO_ONE_GRID = (
    "Its primary capsules come from two grids of different sizes (kernels 9 and 5 over the same Conv1 maps), so no one map "
    "places them: each is shown apart, in the model's order."
)


def two_primary_layout(config: TwoPrimaryConfig) -> Layout:
    return Layout(0, config.primary_dim, about=NO_ONE_GRID)


TWO_PRIMARY = registry.Family(
    "toy-twoprimary",
    config=TwoPrimaryConfig,
    model=TwoPrimaryNet,
    presets={"toy-twoprimary-tiny": TwoPrimaryConfig()},
    words="a two-primary CapsNet",
    short="two-primary CapsNet",
    title="two-primary CapsNet (a toy family)",
    about="A CapsNet whose votes come from two primary-capsule layers, routed together.",
    score="capsule length",
    routing="dynamic",
    pages=frozenset({"routing", "lab", "explorer", "robustness"}),
    votes=two_primary_votes,
    layout=two_primary_layout,
    why="vector",
)
# The pages the family claims, as AppTest opens them (the lab is one of them)
PAGE_FILES = {"routing": "pages/routing.py", "lab": "pages/lab.py", "explorer": "pages/explorer.py", "robustness": "pages/robustness.py"}


@pytest.fixture
def registered(monkeypatch):
    """The toy family and routing in the registry, as their entries would be (undone after the test)."""
    monkeypatch.setitem(registry.ROUTINGS, MAX.name, MAX)
    monkeypatch.setitem(registry.FAMILIES, TWO_PRIMARY.name, TWO_PRIMARY)


def test_the_toy_family_and_routing_are_in_the_zoo_in_their_own_words(registered):
    assert "toy-twoprimary-tiny" in PRESETS and "toy-max" in registry.vector_routings()
    cfg = preset("toy-twoprimary-tiny", couplings="toy-max")
    model = build_model(cfg)
    meta = CheckpointMeta.from_dict({"config": to_dict(cfg), "weights_sha256": "0" * 64, "dataset": "mnist"})
    said = zoo.card(meta)
    assert said.family == TWO_PRIMARY.title
    assert said.routing == MAX.words  # its own words, never "dynamic, 3 iterations"
    assert said.paper == "no paper figure for this setting"
    assert said.size == zoo.parameter_counts(model)
    own = zoo.card(dataclasses.replace(meta, config=preset("toy-twoprimary-tiny")))
    assert own.routing == "dynamic, 3 iterations"


def test_the_toy_family_trains_from_the_command_line_with_the_toy_routing(registered, synthetic_data, tmp_path, capsys):
    out = tmp_path / "toy.safetensors"
    argv = ["train", "--model", "toy-twoprimary-tiny", "--couplings", "toy-max", "--epochs", "1", "--batch-size", "16"]
    argv += ["--train-limit", "32", "--test-limit", "16", "--device", "cpu", "--out", str(out)]
    assert main(argv) == 0
    assert "Traceback" not in capsys.readouterr().err
    model, meta = ckpt.load_checkpoint(out)
    assert isinstance(model, TwoPrimaryNet) and meta.config.couplings == "toy-max" and meta.metrics.measured


def test_the_toy_family_opens_on_every_page_it_claims_and_in_the_lab(registered, app, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    torch.manual_seed(0)
    ckpt.save_checkpoint(
        app.folder / "tiny-twoprimary.safetensors",
        build_model(preset("toy-twoprimary-tiny", couplings="toy-max")),
        {"dataset": "mnist", "metrics": {"test_error": 30.0, "n_test": 100, "how": "fixture"}},
    )
    assert set(PAGE_FILES) == set(TWO_PRIMARY.pages) and "lab" in PAGE_FILES
    app.query_params["model"] = "tiny-twoprimary.safetensors"  # the sidebar's model, from the first run on
    app.switch_page("pages/zoo.py").run()
    assert not app.exception, app.exception
    shown = " ".join(m.value for m in app.markdown)
    assert TWO_PRIMARY.title in shown and MAX.words in shown
    for page, path in PAGE_FILES.items():
        app.switch_page(path).run()
        assert not app.exception, (page, app.exception)
        said = " ".join(m.value for kind in ("info", "warning", "error") for m in getattr(app, kind))
        assert "tiny-twoprimary** is " not in said, (page, said)  # shown, not turned away as "**NAME** is a ..."
        assert "unexpected error" not in said, (page, said)  # a traceback the page caught and logged
    app.switch_page("pages/routing.py").run()  # its own routing, dynamic, on capsules that sit on no one grid
    said = " ".join(m.value for kind in ("info", "caption") for m in getattr(app, kind))
    assert f"was trained with {MAX.words}, not with dynamic routing" in said and NO_ONE_GRID in said
    assert "Each column is one of the 104 primary capsules, in the model's order" in said  # 6x6 and 4x4 grids, 2 types each
    assert not [c for c in app.get("plotly_chart") if "coupling_maps" in str(c.proto)]  # no map claims a position for them
    app.switch_page("pages/lab.py").run()
    picked = app.multiselect(key="lab_routings")
    assert MAX.words in picked.options and "toy-max" in picked.value
    assert lab.trained_with(preset("toy-twoprimary-tiny", couplings="toy-max")) == "toy-max"


def test_the_toy_family_gets_the_why_chapter_from_its_entry_alone(registered, tmp_path, monkeypatch):
    """Its entry's `why` is all the Why capsules chapter reads: "vector", and beside a baseline CNN
    on its images the chapter measures it (the sweeps and the tour's three steps); a family whose
    entry names no argument gets the one step saying the chapter cannot measure it, and why."""
    torch.manual_seed(0)
    info = {"dataset": "mnist", "metrics": {"test_error": 30.0, "n_test": 100, "how": "fixture"}}
    toy = tmp_path / "tiny-twoprimary.safetensors"
    ckpt.save_checkpoint(toy, build_model(preset("toy-twoprimary-tiny")), info)
    meta = dict(ckpt.list_checkpoints(tmp_path))[toy]
    alone = why_steps.chapter_for(meta, ckpt.list_checkpoints(tmp_path), toy.stem)
    assert why.vector_fits(meta) and alone.kind == "" and "no CNN trained on mnist" in alone.reason

    ckpt.save_checkpoint(tmp_path / "tiny-cnn.safetensors", build_model(preset("cnn-small")), info)
    chapter = why_steps.chapter_for(meta, ckpt.list_checkpoints(tmp_path), toy.stem)
    assert chapter.kind == "vector" and chapter.cnn_path == tmp_path / "tiny-cnn.safetensors"
    model, cnn = ckpt.load_checkpoint(toy)[0].eval(), ckpt.load_checkpoint(chapter.cnn_path)[0].eval()
    images, labels = torch.randint(0, 256, (6, 28, 28), dtype=torch.uint8), torch.arange(6)
    invariance, parts = why.invariance_sweep(model, cnn, images), why.parts_sweep(model, cnn, images, labels)
    assert invariance["images"] == 6 and len(invariance["shift_caps_length"]) == len(why.SHIFTS)
    image = images[0].numpy() / 255.0
    steps = why_steps.vector_chapter(model, cnn, image, [str(d) for d in range(10)], toy.stem, invariance, parts)
    assert [s.title for s in steps] == why_steps.titles(chapter) and all(s.text for s in steps)

    monkeypatch.setitem(registry.FAMILIES, TWO_PRIMARY.name, dataclasses.replace(TWO_PRIMARY, why=""))
    chapter = why_steps.chapter_for(meta, ckpt.list_checkpoints(tmp_path), toy.stem)
    assert chapter.kind == "" and not why.vector_fits(meta)
    assert chapter.reason == "The chapter has no measurements for two-primary CapsNet models such as tiny-twoprimary."
    (step,) = why_steps.unmeasured_steps(chapter, image)
    assert chapter.reason in step.text[0] and step.link[0] == "pages/why.py"


# ---------- the contract: what an entry must provide ----------


def test_every_registered_entry_provides_its_hooks():
    for entry in registry.FAMILIES.values():
        assert not entry.missing(registry.ROUTINGS), entry.missing(registry.ROUTINGS)
        assert set(entry.pages) <= set(PAGES)
    for entry in registry.ROUTINGS.values():
        assert entry.words and entry.about and entry.uniform and callable(entry.function)


@pytest.mark.parametrize(
    "change,named",
    [
        ({"pages": frozenset({"tour"})}, "toy-twoprimary: tour"),
        ({"votes": None}, "toy-twoprimary: votes"),
        ({"routing": "nowhere"}, "toy-twoprimary: routing 'nowhere'"),
        ({"pages": frozenset({"gallery"})}, "toy-twoprimary: pages ['gallery']"),
        ({"title": ""}, "toy-twoprimary: title"),
        ({"paper": {("mnist", 3, True): 1.0}}, "toy-twoprimary: paper_presets"),
        ({"layout": None}, "toy-twoprimary: layout"),
        ({"routing": "toy-max"}, "toy-twoprimary: routing page (its routing 'toy-max' has no view there"),
        ({"why": "scalar"}, "toy-twoprimary: why 'scalar'"),
        ({"why": "matrix"}, "toy-twoprimary: why 'matrix' (its routing 'dynamic' is not one of matrix capsules)"),
    ],
)
def test_an_entry_missing_a_hook_is_named(change, named):
    missing = dataclasses.replace(TWO_PRIMARY, **change).missing({**registry.ROUTINGS, MAX.name: MAX})
    assert any(m.startswith(named) for m in missing), missing


def test_a_config_field_without_bounds_is_refused_naming_it():
    from capsviz import schema

    @dataclass(frozen=True)
    class Loose:
        family: str = "loose"
        width: int = 3

    with pytest.raises(TypeError, match="Loose.width: a number needs its bounds"):
        schema.config_fields(Loose)
