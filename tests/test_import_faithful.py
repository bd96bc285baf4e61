"""Your own model, faithfully: small CapsNets written as public code writes them, one convention
each (tests/capsule_conventions.py), imported with `--against` their own code to within 1e-4 at
every stage, and flagged without it; weights no network computes with are refused."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from capsule_conventions import CONVENTIONS, I, make
from streamlit.testing.v1 import AppTest
from test_app import APP, router_mode  # noqa: F401 - the autouse fixture runs the app as app.py's router does
from test_plain_text import as_shown

from capsviz import checkpoint as ckpt
from capsviz.adapter import CapsuleAdapter, how_it_computes, import_file, plausibility, read_state_dict
from capsviz.against import STAGES, TOLERANCE
from capsviz.config import preset
from capsviz.data import batches, load_split
from capsviz.errors import CapsvizError
from capsviz.models import build_model
from capsviz.routing import DynamicOptions, dynamic_routing_ji, dynamic_routing_options
from capsviz.schema import Invalid, check_meta

ROOT = Path(__file__).resolve().parents[1]
CODE = str(ROOT / "tests" / "capsule_conventions.py")


def first_images(n=16) -> torch.Tensor:
    return next(iter(batches("mnist", load_split("mnist", "test"), n, train=False, limit=n)))[0]


def saved(tmp_path, convention) -> tuple[torch.nn.Module, Path]:
    net = make(convention).eval()
    path = tmp_path / f"{convention}.pt"
    torch.save(net.state_dict(), path)
    return net, path


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_each_convention_imports_against_its_code_within_tolerance_at_every_stage(synthetic_data, tmp_path, convention):
    net, path = saved(tmp_path, convention)
    out = tmp_path / f"{convention}.safetensors"
    batch = {"routing_batch": 16} if "batch" in convention else None  # the batch the user evaluates with
    args = {"against_args": {"convention": convention}, "computation": batch, "normalise": (0.0, 1.0)}  # fed [0, 1], as said
    result = import_file(path, out, limit=16, against=f"{CODE}:make", **args)
    assert result["check"].startswith("checked against its code: max difference")
    model, meta = ckpt.load_checkpoint(out)
    checked = meta.raw["imported"]["checked"]
    assert checked["max_difference"] <= TOLERANCE and checked["images"] == 16 and checked["stages"] == list(STAGES)
    assert how_it_computes(meta)[0] == result["check"]

    # the stored twin, opened as the pages open it, gives the original's stages on the same 16 images
    x = first_images()
    with torch.no_grad():
        v, rec = net(x)
        out_twin = model(x)
        c_twin = model.trace(x).trace.c[-1]  # (B, I, J), the twin's capsule numbering
    assert float(v.norm(dim=-1).max()) > 0.15  # capsules long enough for 1e-4 to mean something
    torch.testing.assert_close(out_twin.capsules, v, atol=TOLERANCE, rtol=0)
    torch.testing.assert_close(out_twin.reconstruction.flatten(1), rec, atol=TOLERANCE, rtol=0)
    numbering = "view" if meta.config.primary_grouping == "view" else "type-major"  # as the search found it
    order = CapsuleAdapter(read_state_dict(path), primary_order=numbering)
    c_original = net.digits.c_ij.expand(16, -1, -1)  # (B, I, J)
    c_mine = torch.empty_like(c_twin)
    c_mine[:, order.capsule_order()] = c_twin  # twin capsule i is the original's order[i]
    torch.testing.assert_close(c_mine, c_original, atol=TOLERANCE, rtol=0)
    if convention == "four-iterations":
        assert model.config.routing_iterations == 4
    if convention == "batch-sum-logits":  # b += a.sum(0): found, recorded and said
        assert model.config.routing_logits == "batch-sum" and model.config.routing_batch == 16
        assert any(w.startswith("routing logits summed over each 16 images") for w in how_it_computes(meta))
    # a prior the weights hold is routed from only where the code routes from it
    assert model.config.routing_prior == (convention in ("prior", "gram-ai"))
    if convention == "unused-prior":
        assert any(n.startswith(f"ignored: the learned routing prior b {(I, 10)}") for n in result["notes"])
    if convention == "squash-classes":  # recorded in the checkpoint and said in the words the pages show
        assert model.config.class_squash == "classes" and meta.raw["config"]["class_squash"] == "classes"
        assert any("class capsules squashed over the classes" in w for w in how_it_computes(meta))
    elif convention == "squash-values":
        assert model.config.class_squash == "value" and any("squashed value by value" in w for w in how_it_computes(meta))
    else:
        assert model.config.class_squash == "capsule"


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_without_against_each_convention_is_flagged(synthetic_data, tmp_path, convention):
    """The import says it was not checked, in its result, its checkpoint and the zoo's words; and
    for every convention the weights cannot show, the paper's assumptions compute other class
    capsules (the layouts, 3-D W and a prior, are read from the weights themselves)."""
    net, path = saved(tmp_path, convention)
    result = import_file(path, tmp_path / "plain.safetensors", limit=16)
    model, meta = ckpt.load_checkpoint(tmp_path / "plain.safetensors")
    x = first_images()
    with torch.no_grad():
        difference = float((model(x).capsules - net(x)[0]).abs().max())
    if convention in ("paper", "stages", "w-3d", "prior", "type-convs", "decoder-winner"):
        assert difference < TOLERANCE
    else:
        assert difference > 1e-2  # the twin is wrong here, and nothing but --against can say so
    assert result["check"].startswith("not checked against its code") and how_it_computes(meta)[0] == result["check"]
    assert meta.raw["imported"]["checked"] is None
    if result["warnings"]:  # the card says how many (each is in the import's output and the checkpoint)
        n = len(result["warnings"])
        assert how_it_computes(meta)[0] == f"not checked against its code; the import gave {n} warning{'s' if n > 1 else ''}"


def test_plausibility_warns_of_saturated_collapsed_and_short_capsules(synthetic_data, tmp_path):
    _, path = saved(tmp_path, "softmax-inputs")  # routed as the paper routes, its capsules all saturate
    import_file(path, tmp_path / "plain.safetensors", evaluate=False)
    model, _ = ckpt.load_checkpoint(tmp_path / "plain.safetensors")
    assert any("saturated" in w and "--against" in w for w in plausibility(model, "mnist"))
    with torch.no_grad():
        model.digits.W.mul_(1e-3)
    assert any("collapsed" in w for w in plausibility(model, "mnist"))
    short = build_model(preset("capsnet-small", conv1_channels=16, primary_types=4, primary_squash="map")).eval()
    assert any("primary capsules are short" in w for w in plausibility(short, "mnist"))
    assert any("test error, far above" in w for w in plausibility(short, "mnist", metrics={"test_error": 60.0}))


def test_plausibility_says_nothing_of_a_trained_capsnet(real_data):
    model, _ = ckpt.load_checkpoint(ROOT / "checkpoints" / "capsnet-small-mnist.safetensors")
    assert plausibility(model, "mnist", metrics={"test_error": 0.8}) == []


def test_a_network_capsviz_cannot_reproduce_is_refused_naming_the_stage(synthetic_data, tmp_path):
    """Conv1 without its ReLU: Conv1 matches (its module gives it before the ReLU), the primary
    capsules cannot; nothing is written."""

    class NoRelu(type(make())):
        def forward(self, x):
            u = self.primary(self.conv1(x))
            v = self.digits(u)
            return v, None

    net = make()
    torch.save(net.state_dict(), tmp_path / "n.pt")
    sys.modules["no_relu_net"] = type(sys)("no_relu_net")
    sys.modules["no_relu_net"].NoRelu = lambda: NoRelu()
    with pytest.raises(CapsvizError) as e:
        import_file(tmp_path / "n.pt", tmp_path / "n.safetensors", against="no_relu_net:NoRelu", evaluate=False)
    words = str(e.value)
    assert words.startswith("not imported: the primary capsules differ from your code's (module primary)") and "\n" not in words
    assert "matched before it: Conv1); capsviz's PrimaryCaps is one stride-2 conv" in words
    assert not (tmp_path / "n.safetensors").exists()


def test_stages_a_network_does_not_show_are_named_and_the_rest_still_checked(synthetic_data, tmp_path):
    """test_adapter's PublicCapsNet: its PrimaryCaps module gives the conv's output before the view
    and the squash, and its forward returns v alone. Conv1 and the class capsules are compared; the
    other stages are named as not found, and the twin is stored."""
    from test_adapter import SMALL, PublicCapsNet

    def build():
        torch.manual_seed(0)
        return PublicCapsNet(**SMALL)

    torch.save(build().state_dict(), tmp_path / "public.pt")
    sys.modules["public_net"] = type(sys)("public_net")
    sys.modules["public_net"].build = build
    public = tmp_path / "public.safetensors"
    result = import_file(tmp_path / "public.pt", public, against="public_net:build", evaluate=False, normalise=(0.0, 1.0))
    assert result["check"].startswith("checked against its code")
    (note,) = [n for n in result["notes"] if n.startswith("checked against your code")]
    assert note.endswith(
        "(Conv1, the class capsules; not found in your code's tensors: the primary capsules, the predictions u_hat, the couplings, "
        "the reconstruction)"
    )
    assert "the check fed your network [0, 1] pixels (--normalise)" in result["notes"]
    assert ckpt.read_meta(tmp_path / "public.safetensors").raw["imported"]["checked"]["stages"] == ["conv1", "class_capsules"]


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda s: s["digits.W"].view(-1).__setitem__(3, float("nan")), "digits.W (1, 144, 10, 16, 8) holds 1 NaN or infinite value(s)"),
        (lambda s: s["conv1.bias"].__setitem__(0, float("inf")), "conv1.bias (8,) holds 1 NaN or infinite value(s)"),
        (lambda s: s.update({"conv1.weight": s["conv1.weight"].to(torch.complex64)}), "conv1.weight (8, 1, 9, 9) holds complex numbers"),
    ],
    ids=["nan", "inf", "complex"],
)
def test_weights_no_network_computes_with_are_refused_in_one_line(tmp_path, change, words):
    state = dict(make().state_dict())
    change(state)
    torch.save(state, tmp_path / "bad.pt")
    with pytest.raises(CapsvizError) as e:
        import_file(tmp_path / "bad.pt", tmp_path / "bad.safetensors", evaluate=False)
    assert str(e.value).startswith(words) and "\n" not in str(e.value)
    assert not (tmp_path / "bad.safetensors").exists()


def test_refusals_name_the_tensor_its_shape_and_what_it_might_be():
    state = dict(make().state_dict())
    state["extra.weight"] = torch.ones(5, 7)
    with pytest.raises(
        CapsvizError, match=r"extra.weight \(5, 7\) fits no part of a CapsNet: it looks like a Linear layer, and the decoder"
    ):
        CapsuleAdapter(state).model()
    state = dict(make().state_dict())
    state["digits.W"] = torch.randn(144, 144, 8, 8)  # I twice: which is the classes' axis?
    with pytest.raises(CapsvizError, match=r"DigitCaps W digits.W \(144, 144, 8, 8\): cannot tell its layout"):
        CapsuleAdapter(state).model()


def cli(*args):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", "capsviz", "import", *map(str, args)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def test_import_command_against_says_it_runs_your_code_and_stores_the_check(synthetic_data, tmp_path):
    _, path = saved(tmp_path, "batch-logits")
    out = tmp_path / "mine.safetensors"
    against = ("--against", f"{CODE}:make", "--against-args", '{"convention": "batch-logits"}', "--normalise", "0", "1")
    r = cli(path, "--out", out, "--limit", "16", *against)
    assert r.returncode == 2 and "say it with --routing-batch N" in r.stderr and "Traceback" not in r.stderr
    r = cli(path, "--out", out, "--limit", "16", *against, "--routing-batch", "8")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stderr.startswith("--against runs your code:")
    assert json.loads(r.stdout)["check"].startswith("checked against its code")
    meta = ckpt.read_meta(out)
    assert (meta.config.routing_logits, meta.config.routing_batch) == ("batch", 8)
    assert any("averaged over each 8 images" in line for line in how_it_computes(meta))

    # without --against, the options and the iteration count can be said on the command line
    _, path = saved(tmp_path, "four-iterations")
    r = cli(path, "--out", tmp_path / "four.safetensors", "--no-evaluate", "--iterations", "4", "--softmax", "inputs")
    assert r.returncode == 0, r.stderr[-2000:]
    meta = ckpt.read_meta(tmp_path / "four.safetensors")
    assert (meta.config.routing_iterations, meta.config.routing_softmax) == (4, "inputs")
    assert "not checked against its code" in r.stderr

    bad = cli(path, "--out", tmp_path / "x.safetensors", "--against", "nowhere_module:Net")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "your code failed (ModuleNotFoundError" in bad.stderr
    assert not (tmp_path / "x.safetensors").exists()


def test_dynamic_routing_options_are_procedure_1_at_their_defaults_and_batch_groups_route_apart():
    torch.manual_seed(0)
    u_hat = torch.randn(8, 10, 36, 16) * 0.3
    paper = dynamic_routing_ji(u_hat, 3, record=True)
    same = dynamic_routing_options(u_hat, 3, DynamicOptions(prior=None), record=True)
    torch.testing.assert_close(same.v, paper.v)
    whole = dynamic_routing_options(u_hat, 3, DynamicOptions(logits="batch", batch=4), record=True)
    halves = [dynamic_routing_options(u_hat[k : k + 4], 3, DynamicOptions(logits="batch"), record=True) for k in (0, 4)]
    torch.testing.assert_close(whole.v, torch.cat([h.v for h in halves]))
    torch.testing.assert_close(whole.c, torch.cat([h.c for h in halves], 1))
    assert not torch.allclose(whole.v, paper.v, atol=1e-4)  # averaging over the batch changes the result
    zero = dynamic_routing_options(u_hat, 3, DynamicOptions(prior=torch.zeros(36, 10), softmax="inputs"), record=True)
    assert torch.allclose(zero.c[0].sum(1), torch.ones(8, 10))  # couplings sum to 1 over the inputs


def test_schema_checks_the_new_options_and_the_import_record():
    meta = {"config": {"family": "capsnet", "routing_softmax": "sideways"}, "weights_sha256": "0" * 64}
    with pytest.raises(Invalid, match="config.routing_softmax: must be one of classes, inputs"):
        check_meta(meta)
    meta = {"config": {"family": "capsnet"}, "weights_sha256": "0" * 64, "imported": {"checked": {"against": "m:N", "images": 3}}}
    with pytest.raises(Invalid, match="imported.checked: missing field 'max_difference'"):
        check_meta(meta)
    check_meta({"config": {"family": "capsnet"}, "weights_sha256": "0" * 64, "imported": {"file": "a.pt", "notes": []}})  # older imports
    # notes and warnings: plain text (older imports), or a message and its values (capsviz.i18n.stored)
    note = {"message": "ignored: {name} {shape} (all zeros)", "values": {"name": "b", "shape": "(1152, 10)"}}
    check_meta({**meta, "imported": {"notes": ["W read from caps.W as (I, J*D, K)", note], "warnings": [note]}})
    for bad, why in (
        ({**note, "values": {"name": "b"}}, "imported.notes[0]: placeholder 'shape' has no value"),
        ({"message": "{name.__class__}", "values": {"name": "b"}}, "imported.notes[0]: placeholder 'name.__class__' is not one"),
        ({"message": "{n:{m}}", "values": {"n": 1, "m": "d"}}, "imported.notes[0]: placeholder 'n' is not one"),
        ({"message": "{n:.2f}", "values": {"n": "b"}}, "imported.notes[0]: words that cannot be said: Unknown format code 'f'"),
        ({**note, "values": {"name": "b", "shape": None}}, "imported.notes[0].values.shape: must be words or a number"),
        ({"message": "{n} warning", "plural": "{n} warnings"}, "imported.notes[0]: a plural message needs both plural and n"),
    ):
        with pytest.raises(Invalid, match=re.escape(why)):
            check_meta({**meta, "imported": {"notes": [bad]}})
    checked = {"against": "m:N", "max_difference": 1e-7, "images": 16, "fed": {"mean": 0.0, "std": 1.0, "by": "a guess"}}
    meta["imported"] = {"checked": checked}
    with pytest.raises(Invalid, match="imported.checked.fed.by: must be one of pipeline, normalise, lengths"):
        check_meta(meta)


def test_imported_models_say_how_they_compute_on_the_zoo_and_routing_pages(synthetic_data, tmp_path, monkeypatch):
    folder = tmp_path / "models"
    _, path = saved(tmp_path, "softmax-inputs")
    fed = {"normalise": (0.0, 1.0)}
    import_file(
        path, folder / "checked.safetensors", limit=16, against=f"{CODE}:make", against_args={"convention": "softmax-inputs"}, **fed
    )
    _, path = saved(tmp_path, "view")
    import_file(path, folder / "plain.safetensors", limit=16)
    import_file(path, folder / "view.safetensors", limit=16, against=f"{CODE}:make", against_args={"convention": "view"}, **fed)
    monkeypatch.setenv("CAPSVIZ_CHECKPOINTS", str(folder))
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("pages/zoo.py").run()
    captions = [as_shown(c.value) for c in at.caption]  # the card shows them as plain text
    assert any(c.startswith("checked against its code: max difference") and " images fed [0, 1] pixels" in c for c in captions)
    assert any(c.startswith("not checked against its code") for c in captions)
    assert any("softmax over inputs" in c for c in captions)
    at.session_state["pending_model"] = "checked.safetensors"  # as the card's button picks it
    at.switch_page("pages/routing.py").run()
    assert not at.exception, at.exception
    assert any(
        c.value.startswith("This model was imported: checked against its code") and "softmax over inputs" in c.value for c in at.caption
    )
    # its couplings sum to 1 over the 144 inputs: the entropy chart and the uniform share say so
    captions = " ".join(c.value for c in at.caption)
    assert "sum to 1 over the input capsules" in captions and "1/144 from each" in captions
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    assert "Evenness of the couplings, %" in titles and "draws on the 144 primary capsules, its evenness" in captions
    at.session_state["pending_model"] = "view.safetensors"  # a view grouping: capsules with no one position
    at.switch_page("pages/routing.py").run()
    assert not at.exception, at.exception
    captions = " ".join(c.value for c in at.caption)
    assert "8 neighbouring values of one conv map" in captions and "has no one position" in captions, captions
    axes = [json.loads(c.proto.spec)["layout"].get("xaxis", {}).get("title", {}).get("text", "") for c in at.get("plotly_chart")]
    assert any(a == "capsule, 36 to a row" for a in axes)


def test_a_class_squash_over_the_classes_said_without_against_gives_the_originals_capsules(synthetic_data, tmp_path):
    """`--class-squash classes` (computation={"class_squash": "classes"}) without --against: the twin
    then computes the original's class capsules, and the stated option is stored; the same file
    imported with the paper's squash is not."""
    net, path = saved(tmp_path, "squash-classes")
    import_file(path, tmp_path / "said.safetensors", evaluate=False, computation={"class_squash": "classes"})
    import_file(path, tmp_path / "paper.safetensors", evaluate=False)
    x = first_images()
    with torch.no_grad():
        v = net(x)[0]
        said, meta = ckpt.load_checkpoint(tmp_path / "said.safetensors")
        paper, _ = ckpt.load_checkpoint(tmp_path / "paper.safetensors")
        torch.testing.assert_close(said(x).capsules, v, atol=TOLERANCE, rtol=0)
        assert float((paper(x).capsules - v).abs().max()) > 1e-2
    assert meta.config.class_squash == "classes"
    # each value squashed over the classes: every dimension's column has length below 1, a capsule's may not be
    assert float(said(x).capsules.norm(dim=1).max()) < 1


def test_class_squash_axes_normalise_what_they_say():
    from capsviz.routing import SQUASH_DIMS, class_squash, squash

    s = torch.randn(3, 10, 16) * 2
    torch.testing.assert_close(class_squash("sabour", "capsule")(s), squash(s))
    torch.testing.assert_close(class_squash("sabour", "classes")(s), squash(s.transpose(1, 2)).transpose(1, 2))
    torch.testing.assert_close(class_squash("sabour", "all")(s), squash(s.flatten(1)).view_as(s))
    torch.testing.assert_close(class_squash("sabour", "value")(s), s.sign() * s**2 / (1 + s**2))
    assert set(SQUASH_DIMS) == {"capsule", "classes", "all", "value"}
    u_hat = torch.randn(2, 10, 36, 16) * 0.2
    paper = dynamic_routing_options(u_hat, 3, DynamicOptions(), record=True)
    over = dynamic_routing_options(u_hat, 3, DynamicOptions(squash_axis="classes"), record=True)
    assert not DynamicOptions(squash_axis="all").paper and not torch.allclose(paper.v, over.v, atol=1e-3)
    with pytest.raises(ValueError, match="unknown dynamic routing options"):
        dynamic_routing_options(u_hat, 3, DynamicOptions(squash_axis="sideways"))
