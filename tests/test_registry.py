"""capsviz.registry: one entry per routing and per model family, and everything else reads it.

A routing or a family added in a test (its entry plus its own function or classes, nothing else
edited) must be picked up by `route`, the models, the routing lab, the tour's words, the config
loader, `build_model`, the checkpoint files and the pages."""

from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch
from test_app import app, router_mode  # noqa: F401 - the fixtures: tiny models, router mode

import capsviz.routing
from capsviz import checkpoint as ckpt
from capsviz import registry, schema
from capsviz.analysis import lab
from capsviz.analysis.steps import lab_words
from capsviz.analysis.tour import tour_of
from capsviz.bounds import bounded
from capsviz.config import PRESETS, config_from_dict, preset, to_dict
from capsviz.models import build_model
from capsviz.routing import RoutingResult, route, squash


def longest_vote(u_hat, *, iterations=3, prior=None, squash=squash, record=False, dynamic=None) -> RoutingResult:
    """A toy routing: each lower capsule sends all of its vote to the class it predicts longest."""
    B, J, I, D = u_hat.shape
    b = u_hat.norm(dim=-1)  # (B, J, I)
    c = torch.nn.functional.one_hot(b.argmax(1), J).movedim(-1, 1).to(u_hat.dtype)  # (B, J, I)
    v = (squash or capsviz.routing.squash)((c.unsqueeze(-2) @ u_hat).squeeze(-2))  # (B, J, D)
    if not record:
        return RoutingResult(v=v)
    return RoutingResult(v=v, c=c.transpose(1, 2)[None], b=b.transpose(1, 2)[None], v_trace=v[None])


TOY = registry.Routing(
    "longest",
    longest_vote,
    words="longest-vote couplings (a toy)",
    about="each primary capsule's whole vote goes to the class it predicts longest",
    iterative=False,
    uniform="never: every coupling is 0 or 1",
    from_votes=True,
)


@pytest.fixture
def toy_routing(monkeypatch):
    monkeypatch.setitem(registry.ROUTINGS, TOY.name, TOY)
    return TOY


def lab_row(run_with, error, trained="dynamic"):
    return lab.Row("m", trained, run_with, error, 10_000, 90.0, 50.0, 1000, 0.9, 0.2, 0.4)


def test_a_registered_routing_is_run_by_route_and_by_every_vector_capsule_model(toy_routing):
    assert "longest" in capsviz.routing.ROUTINGS and "longest" in registry.vector_routings()
    torch.manual_seed(0)
    u_hat = torch.randn(2, 10, 6, 16)
    r = route("longest", u_hat, record=True)
    want = longest_vote(u_hat)
    torch.testing.assert_close(r.v, want.v)
    assert r.c.shape == (1, 2, 6, 10) and set(r.c.unique().tolist()) == {0.0, 1.0}  # its own trace, through route
    for name in ("capsnet-small", "efficient-capsnet"):
        model = build_model(preset(name)).eval()
        x = torch.rand(2, 1, 28, 28)
        with torch.no_grad():
            u = model.predictions(x)
            out = model(x, routing="longest")
            routed = model.route(u, routing="longest").v
        torch.testing.assert_close(out.scores, routed.norm(dim=-1))
        assert not torch.allclose(out.scores, model(x).scores)  # not the model's own routing under another name
    with pytest.raises(ValueError, match=f"choose from {', '.join(registry.vector_routings())}"):  # every registered one, the toy's too
        route("nowhere", u_hat)
    with pytest.raises(ValueError, match="unknown routing 'em'"):  # EM routes matrix capsules: not through route
        route("em", u_hat)


def test_a_registered_routing_is_in_the_lab_and_in_the_words_the_lab_and_tour_say(toy_routing):
    assert list(lab.LAB_ROUTINGS)[-1] == "longest" and lab.LAB_ROUTINGS["longest"] == TOY.words
    assert lab.LAB_ROUTINGS["dynamic"] == f"dynamic routing, {lab.ITERATIONS} iterations"  # an iterative one: the lab's count
    assert "longest" in lab.vote_based()  # it computes its couplings from the votes
    note = lab.hidden([lab_row("dynamic", 1.0)])[0]
    assert f"Hidden under *Run with*: {', '.join(r for r in lab.LAB_ROUTINGS if r != 'dynamic')}." in note
    assert note.index("longest") > note.index("self-attention")  # the toy's, in the registry's order
    assert f"how far {TOY.words} moves the couplings from uniform" in note
    said, _ = lab_words([lab_row("dynamic", 1.0), lab_row("longest", 40.0)], lab.LAB_ROUTINGS)
    assert f"Run with {TOY.words}, the model misclassifies 40.00%" in said[0]
    assert said[1].startswith(f"The tallest bar is {TOY.words} (40.00%): {TOY.about}, while")
    assert registry.routing_words("longest") == TOY.words


def test_the_pages_offer_and_name_a_registered_routing(toy_routing, app, tmp_path, monkeypatch):  # noqa: F811
    """The lab page offers it; a model trained with it is saved, loaded and named in its words."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cfg = preset("capsnet-small", conv1_channels=16, primary_types=4, couplings="longest")
    ckpt.save_checkpoint(app.folder / "tiny-longest.safetensors", build_model(cfg), {"dataset": "mnist"})
    assert ckpt.load_checkpoint(app.folder / "tiny-longest.safetensors")[1].config.couplings == "longest"
    app.query_params["model"] = "tiny-longest.safetensors"
    app.switch_page("pages/lab.py").run()
    assert not app.exception, app.exception
    picked = app.multiselect(key="lab_routings")
    assert TOY.words in picked.options and "longest" in picked.value
    assert lab.trained_with(cfg) == "longest"
    app.switch_page("pages/routing.py").run()
    assert not app.exception, app.exception
    note = " ".join(i.value for i in app.info)
    assert f"**tiny-longest** was trained with {TOY.words}, not with dynamic routing" in note


@pytest.mark.parametrize("name", registry.vector_routings())
def test_every_registered_routing_runs_as_its_entry_says(name):
    """Its iterations: one trace per iteration for an iterative routing, one pass otherwise; and
    whether its couplings start uniform (c = 1/J everywhere at the first pass) as `uniform` words it."""
    entry = registry.ROUTINGS[name]
    assert entry.words and entry.about and entry.uniform
    torch.manual_seed(0)
    u_hat = torch.randn(2, 10, 6, 16)
    r = route(name, u_hat, iterations=3, record=True)
    assert r.v.shape == (2, 10, 16) and r.c.shape[1:] == (2, 6, 10)
    assert r.c.shape[0] == (3 if entry.iterative else 1)
    starts_uniform = bool(torch.allclose(r.c[0], torch.full_like(r.c[0], 0.1)))
    assert starts_uniform == entry.uniform.startswith(("always", "at the first")), entry.uniform


def smallest_preset(family: str):
    """The family's preset with the fewest parameters (a test builds and saves it)."""
    configs = [c for c in PRESETS.values() if c.family == family]
    return min(configs, key=lambda c: sum(p.numel() for p in build_model(c).parameters()))


@pytest.mark.parametrize("name", list(registry.FAMILIES))
def test_every_registered_family_builds_saves_loads_and_is_shown_where_its_entry_says(name, tmp_path):
    entry = registry.FAMILIES[name]
    cfg = smallest_preset(name)
    assert isinstance(cfg, entry.config_class) and cfg.routing == entry.routing  # the config's routing is the entry's
    assert entry.routing is None or entry.routing in registry.ROUTINGS
    torch.manual_seed(0)
    model = build_model(cfg)
    assert isinstance(model, entry.model_class)
    path = tmp_path / f"{name}.safetensors"
    ckpt.save_checkpoint(path, model, {"dataset": "mnist" if cfg.in_size == 28 else "multimnist"})
    loaded, meta = ckpt.load_checkpoint(path)
    assert meta.family == name and meta.config == cfg and type(loaded) is type(model)
    for (k, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items(), strict=True):
        torch.testing.assert_close(a, b, msg=k)
    for page in ("routing", "em", "lab", "tour", "explorer", "robustness"):
        assert registry.shows(cfg, page) == (page in entry.pages), page
        assert (name in registry.families_on(page)) == (page in entry.pages)
    assert lab.fits(cfg) == ("lab" in entry.pages)
    assert ("tour" in entry.pages) == (tour_of(cfg) is not None)  # its own tour follows every family the tour page shows
    assert not entry.missing(registry.ROUTINGS)  # the contract: every hook its pages need
    assert registry.family_words(name) == entry.words
    assert all(entry.short in registry.either(page) for page in entry.pages)  # the pages' lists of what they show


def test_the_pages_lists_of_families_come_from_the_registry():
    for page in ("routing", "robustness", "tour", "lab"):
        said = registry.either(page)
        shown = [entry.short for entry in registry.FAMILIES.values() if page in entry.pages]
        assert said.endswith(f" or {shown[-1]}" if len(shown) > 1 else shown[0]) and all(s in said for s in shown), page
        assert not any(e.short in said.split(", ") for e in registry.FAMILIES.values() if page not in e.pages), page
    if set(registry.FAMILIES) == {"capsnet", "cnn", "efficient", "matrix"}:  # the shipped families: the words exactly
        assert registry.either("routing") == "CapsNet or Efficient-CapsNet"
        assert registry.either("robustness") == "CapsNet, Efficient-CapsNet or matrix capsules"
    assert registry.family_words("nowhere") == "a nowhere model"


@dataclass(frozen=True)
class ToyConfig:
    routing: ClassVar[str | None] = None
    run_options: ClassVar[tuple[str, ...]] = ()
    decodes: ClassVar[bool] = False

    family: str = "toy"
    in_size: int = bounded(28, lo=8, hi=64)
    in_channels: int = bounded(1, lo=1, hi=3)
    num_classes: int = bounded(10, lo=2, hi=100)


class ToyNet(torch.nn.Module):
    def __init__(self, config: ToyConfig):
        super().__init__()
        self.config = config
        self.linear = torch.nn.Linear(config.in_channels * config.in_size**2, config.num_classes)


def test_a_registered_family_loads_builds_and_round_trips_through_a_checkpoint(monkeypatch, tmp_path):
    entry = registry.Family(
        "toy",
        ToyConfig,
        ToyNet,
        {"toy": ToyConfig()},
        "a toy model",
        "toy",
        "toy (a test)",
        "A linear layer.",
        "score",
        None,
        frozenset({"robustness"}),
    )
    monkeypatch.setitem(registry.FAMILIES, "toy", entry)
    cfg = config_from_dict(to_dict(ToyConfig(num_classes=4)))
    assert cfg == ToyConfig(num_classes=4)
    model = build_model(cfg)
    assert isinstance(model, ToyNet)
    ckpt.save_checkpoint(tmp_path / "toy.safetensors", model, {"dataset": "mnist"})
    loaded, meta = ckpt.load_checkpoint(tmp_path / "toy.safetensors")
    assert meta.config == cfg and isinstance(loaded, ToyNet)
    torch.testing.assert_close(loaded.linear.weight, model.linear.weight)
    assert registry.shows(cfg, "robustness") and not registry.shows(cfg, "lab") and not lab.fits(cfg)
    with pytest.raises(schema.Invalid, match="in_size"):  # its own table checks its fields
        schema.Config().check(dict(to_dict(cfg), in_size=4), "config")
