"""Issue 52: `capsviz import --against` checks the whole pipeline the user's evaluation runs (their
input pipeline, their routing batch), from any layout public code writes (a network split over
files, PrimaryCaps as T convs of K channels, a decoder fed the winning capsule alone, a per-value
class squash); a twin is "checked" only where that whole pipeline was compared within 1e-4."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from capsule_conventions import REFUSED, I, K, T, make, trained

from capsviz import checkpoint as ckpt
from capsviz.adapter import CapsuleAdapter, how_it_computes, import_file, plausibility
from capsviz.against import TOLERANCE
from capsviz.errors import CapsvizError
from capsviz.i18n import recalled

ROOT = Path(__file__).resolve().parents[1]
CONVENTIONS_FILE = ROOT / "tests" / "capsule_conventions.py"


def test_a_network_split_over_two_files_imports_through_the_console_script(synthetic_data, tmp_path):
    """As pip installs it, the `capsviz` script's folder is sys.path[0]: neither the user's folder nor
    the current one is on the path unless --against FILE.py puts them there, as `python FILE.py` would."""
    code = tmp_path / "code"
    code.mkdir()
    shutil.copy(CONVENTIONS_FILE, code / "capsules.py")
    (code / "net.py").write_text("from capsules import make\n\n\ndef build():\n    return make('paper')\n")
    sys.path.insert(0, str(code))
    try:
        from capsules import make
    finally:
        sys.path.remove(str(code))
        sys.modules.pop("capsules", None)
    torch.save(make("paper").state_dict(), tmp_path / "w.pt")
    script = tmp_path / "bin" / "capsviz"
    script.parent.mkdir()
    script.write_text(
        f"#!{sys.executable}\nimport sys\nfrom capsviz.cli import entry\n\nif __name__ == '__main__':\n    sys.exit(entry())\n"
    )
    script.chmod(0o755)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    args = [
        str(script),
        "import",
        str(tmp_path / "w.pt"),
        "--out",
        str(tmp_path / "w.safetensors"),
        "--no-evaluate",
        "--normalise",
        "0",
        "1",
    ]
    r = subprocess.run(
        [*args, "--against", f"{code / 'net.py'}:build"], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["check"].startswith("checked against its code")
    assert ckpt.read_meta(tmp_path / "w.safetensors").raw["imported"]["checked"]["against"].endswith("net.py:build")


def saved(tmp_path, convention):
    net = make(convention).eval()
    torch.save(net.state_dict(), tmp_path / f"{convention}.pt")
    return net, tmp_path / f"{convention}.pt"


def test_primary_caps_as_T_convs_of_K_channels_are_T_types_of_K_dims():
    """A list of T convs of K channels each (public code's `[Conv2d(256, 8, 9, 2) for _ in range(32)]`)
    is one capsule type per conv: I = G*G*T capsules, not the G*G*K of K convs of T channels."""
    adapter = CapsuleAdapter(dict(make("type-convs").state_dict()))
    assert (adapter.config().primary_types, adapter.config().primary_dim, adapter.get_parts().W.shape[0]) == (T, K, I)
    assert any(f"{T} convs of {K} channels, read as {T} types of {K} dims" in n for n in adapter.notes)

    # the paper-sized network of issue 52: 32 convs of 8 channels, W (1, 1152, 10, 8, 16), a decoder reading 16 values
    torch.manual_seed(0)
    state = {"conv1.weight": torch.randn(256, 1, 9, 9), "conv1.bias": torch.randn(256)}
    for t in range(32):
        state[f"primary.capsules.{t}.weight"], state[f"primary.capsules.{t}.bias"] = torch.randn(8, 256, 9, 9), torch.randn(8)
    state["digits.W"] = torch.randn(1, 1152, 10, 8, 16)
    for n, (o, i) in enumerate(((512, 16), (1024, 512), (784, 1024))):
        state[f"decoder.{2 * n}.weight"], state[f"decoder.{2 * n}.bias"] = torch.randn(o, i), torch.randn(o)
    config = CapsuleAdapter(state).config()
    assert (config.primary_types, config.primary_dim, config.digit_dim, config.decoder_hidden) == (32, 8, 16, (512, 1024))


def test_a_decoder_whose_two_hidden_layers_are_one_size_is_read_in_order():
    """Public code's `Linear(16, 512), Linear(512, 512), Linear(512, 784)`: two layers read 512
    values, and only the last draws the picture."""
    state = dict(make("decoder-winner").state_dict())
    state["decoder.2.weight"], state["decoder.2.bias"] = torch.randn(32, 32), torch.randn(32)
    state["decoder.4.weight"] = torch.randn(784, 32)
    config = CapsuleAdapter(state).config()
    assert config.decoder_hidden == (32, 32)


def test_a_decoder_fed_every_class_capsule_unmasked_is_refused_naming_its_layer(synthetic_data, tmp_path):
    (bad,) = REFUSED
    _, path = saved(tmp_path, bad)
    with pytest.raises(CapsvizError) as e:
        import_file(path, tmp_path / "u.safetensors", against=f"{CONVENTIONS_FILE}:make", against_args={"convention": bad}, evaluate=False)
    words = str(e.value)
    assert words.startswith("not imported: your decoder (decoder.0.weight, module decoder.5) is fed all 10 x 16 class-capsule")
    assert "unmasked" in words and "\n" not in words
    assert not (tmp_path / "u.safetensors").exists()


PIPELINE = ROOT / "tests" / "user_pipeline.py"
MNIST_NORM = (0.1307, 0.3081)


def user_evaluation(net, n=64, normalise=MNIST_NORM):
    """The user's own evaluation: their data loader normalises, their network is fed the result."""
    x = first_images(n)
    with torch.no_grad():
        return x, net((x - normalise[0]) / normalise[1])[0]


def first_images(n):
    from capsviz.data import batches, load_split

    return next(iter(batches("mnist", load_split("mnist", "test"), n, train=False, limit=n)))[0]


def import_trained(tmp_path, net, name, **kw):
    torch.save(net.state_dict(), tmp_path / f"{name}.pt")
    out = tmp_path / f"{name}.safetensors"
    result = import_file(tmp_path / f"{name}.pt", out, evaluate=False, against=f"{CONVENTIONS_FILE}:make", **kw)
    model, meta = ckpt.load_checkpoint(out)
    return result, model, meta


def test_a_network_normalised_in_its_data_loader_is_checked_on_its_own_scale(synthetic_data, tmp_path):
    """Issue 52's first case: (x - 0.1307) / 0.3081 in the data loader, outside forward. Fed [0, 1]
    images the network matches its twin perfectly, and the twin would be wrong against the user's
    own evaluation; `--against` alone compares on each usual normalisation and keeps the one the
    trained network's lengths fit the labels on."""
    net = trained(normalise=MNIST_NORM)
    result, model, meta = import_trained(tmp_path, net, "loader")
    checked = meta.raw["imported"]["checked"]
    assert checked["fed"] == {"mean": 0.1307, "std": 0.3081, "by": "lengths"}
    mark = result["check"].split("; the import gave ")[0]
    assert mark.endswith("images fed pixels (x - 0.1307) / 0.3081, inferred from its lengths")
    assert how_it_computes(meta)[0] == result["check"]  # the zoo card's words
    assert (meta.config.input_mean, meta.config.input_std) == MNIST_NORM
    # the scale was inferred, not given: the warnings a wrong one would explain stay on
    assert result["warnings"] == plausibility(model, "mnist", checked=True)
    x, v = user_evaluation(net)
    with torch.no_grad():
        torch.testing.assert_close(model(x).capsules, v, atol=TOLERANCE, rtol=0)
    assert any(n.startswith("your input pipeline not given: pixels (x - 0.1307) / 0.3081, inferred") for n in result["notes"])

    # a network trained on [0, 1] images is kept on them
    plain = trained(normalise=(0.0, 1.0))
    _, model, meta = import_trained(tmp_path, plain, "plain")
    assert meta.raw["imported"]["checked"]["fed"] == {"mean": 0.0, "std": 1.0, "by": "lengths"}
    assert (meta.config.input_mean, meta.config.input_std) == (0.0, 1.0)


def test_the_users_own_input_pipeline_is_what_the_check_feeds(synthetic_data, tmp_path, monkeypatch):
    """--against-input: the user's transform, test dataset or DataLoader makes the images the
    network is fed; the twin normalises as that pipeline does, and the whole pipeline being
    compared, no warning is left on. A pipeline that is not the test set in order is refused."""
    monkeypatch.syspath_prepend(str(ROOT / "tests"))
    net = make("paper")
    for name in ("test_transform", "test_set", "test_loader"):
        result, model, meta = import_trained(tmp_path, net, name, against_input=f"{PIPELINE}:{name}")
        fed = meta.raw["imported"]["checked"]["fed"]
        assert (fed["by"], fed["pipeline"], (fed["mean"], fed["std"])) == ("pipeline", f"{PIPELINE}:{name}", pytest.approx(MNIST_NORM))
        assert result["check"].endswith(f"fed your input pipeline {PIPELINE}:{name}, pixels (x - 0.1307) / 0.3081")
        assert (meta.config.input_mean, meta.config.input_std) == pytest.approx(MNIST_NORM)
        assert result["warnings"] == []
        x, v = user_evaluation(net)
        with torch.no_grad():
            torch.testing.assert_close(model(x).capsules, v, atol=TOLERANCE, rtol=0)
    # normalised twice, in the pipeline and again inside forward: the twin applies both as one
    twice = make("normalised")
    _, model, meta = import_trained(
        tmp_path, twice, "twice", against_args={"convention": "normalised"}, against_input=f"{PIPELINE}:test_transform"
    )
    x, v = user_evaluation(twice)
    with torch.no_grad():
        torch.testing.assert_close(model(x).capsules, v, atol=TOLERANCE, rtol=0)
    assert meta.config.input_mean == pytest.approx(0.1307 + 0.1307 * 0.3081)

    for name, words in (
        ("shuffled_loader", "its first 16 images are not capsviz's first test images under one (x - mean) / std"),
        ("padded_transform", "gives images of (1, 32, 32); the 16 test images compared are (1, 28, 28)"),
    ):
        with pytest.raises(CapsvizError) as e:
            import_trained(tmp_path, net, name, against_input=f"{PIPELINE}:{name}")
        assert words in str(e.value) and "\n" not in str(e.value)


def test_a_network_whose_lengths_do_not_say_its_scale_is_refused_until_the_scale_is_given(synthetic_data, tmp_path):
    """Nothing is marked checked that was not compared on the images the user's evaluation feeds.
    Trained 4 steps on data-loader-normalised images, a network fits (x - 0.1307) / 0.3081 less
    than twice as well as [0, 1]: no scale stands out, so nothing is imported, in one line saying
    what to pass; given, the twin is checked and is the user's own evaluation. An untrained network
    is refused too: it fits [0, 1] 2.5 times better only because its capsules saturate on the other
    scales, and it answers no better there."""
    brief = trained(normalise=MNIST_NORM, steps=4)
    for net in (brief, make("paper")):
        with pytest.raises(CapsvizError) as e:
            import_trained(tmp_path, net, "unsaid")
        words = str(e.value)
        assert words.startswith(
            "not imported: your input pipeline was not given, and your network's lengths do not say which images it was trained on (on "
        )
        assert " test images, [0, 1] pixels: margin loss " in words
        assert "; pixels (x - 0.1307) / 0.3081: margin loss " in words and "% test error" in words and "\n" not in words
        assert words.endswith(
            "--against-input MODULE:NAME (your test transform, dataset or DataLoader) or --normalise MEAN STD (--normalise 0 1 for [0, 1] pixels)"
        )
        assert not (tmp_path / "unsaid.safetensors").exists()

    result, model, meta = import_trained(tmp_path, brief, "said", normalise=MNIST_NORM)
    assert meta.raw["imported"]["checked"]["fed"] == {"mean": 0.1307, "std": 0.3081, "by": "normalise"}
    assert result["check"].endswith("images fed pixels (x - 0.1307) / 0.3081 (--normalise)") and result["warnings"] == []
    x, v = user_evaluation(brief)
    with torch.no_grad():
        torch.testing.assert_close(model(x).capsules, v, atol=TOLERANCE, rtol=0)


def test_batch_averaged_routing_logits_ask_for_the_users_batch(synthetic_data, tmp_path, monkeypatch):
    """Logits averaged over the batch make an image's answer depend on its batch: the check asks for
    the batch the user evaluates with (or takes their DataLoader's), and is then run on one such batch."""
    monkeypatch.syspath_prepend(str(ROOT / "tests"))
    net = make("batch-logits")
    args = {"against_args": {"convention": "batch-logits"}, "normalise": (0.0, 1.0)}
    with pytest.raises(CapsvizError) as e:
        import_trained(tmp_path, net, "ask", **args)
    assert "averages its routing logits over the batch (found on 16 images)" in str(e.value) and "--routing-batch N" in str(e.value)
    _, model, meta = import_trained(tmp_path, net, "said", computation={"routing_batch": 8}, **args)
    assert (meta.config.routing_batch, meta.raw["imported"]["checked"]["images"]) == (8, 8)
    x = first_images(8)
    with torch.no_grad():
        torch.testing.assert_close(model(x).capsules, net(x)[0], atol=TOLERANCE, rtol=0)
    _, model, meta = import_trained(
        tmp_path, net, "loader", against_args={"convention": "batch-logits"}, against_input=f"{PIPELINE}:test_loader"
    )
    assert (meta.config.routing_batch, meta.raw["imported"]["checked"]["images"]) == (8, 8)
    # summed over the batch (b += a.sum(0)), as some public code writes it: asked for the same way
    with pytest.raises(CapsvizError) as e:
        import_trained(tmp_path, make("batch-sum-logits"), "sum", against_args={"convention": "batch-sum-logits"}, normalise=(0.0, 1.0))
    assert "your network sums its routing logits over the batch (found on 16 images)" in str(e.value)


def test_a_plain_import_says_when_another_routing_count_fits_the_weights_as_well(synthetic_data, tmp_path):
    """Issue 52's fifth case: a trained network that routes 4 times, imported without --against as
    routing 3 times, passes every plausibility check; the import compares the counts it could be
    using and says that 4 fits as well. Said with --iterations, nothing is guessed."""
    net = trained("four-iterations")
    torch.save(net.state_dict(), tmp_path / "four.pt")
    result = import_file(tmp_path / "four.pt", tmp_path / "four.safetensors", evaluate=False)
    (warning,) = [w for w in result["warnings"] if w.startswith("routing ")]
    assert warning.startswith("routing 4 times fits these weights as well as 3 (margin loss ")
    assert "say it with --iterations" in warning
    kept = ckpt.read_meta(tmp_path / "four.safetensors").raw["imported"]["warnings"]
    assert [recalled(w) for w in kept] == result["warnings"] and all(isinstance(w, dict) for w in kept)
    said = import_file(tmp_path / "four.pt", tmp_path / "said.safetensors", evaluate=False, iterations=4)
    assert not any(w.startswith("routing ") for w in said["warnings"])


def test_a_plain_import_says_when_routing_from_0_fits_better_than_the_prior_the_weights_hold(synthetic_data, tmp_path, capsys):
    """Issue 52's fifth point, for priors: a logit tensor b (I, J) in the weights is routed from by
    default, but code may keep one it never routes from (`self.b = nn.Parameter(...)`, the routing
    starting from zeros). The plain import routes the twin from b and from 0 and says when 0 fits
    the labels as well; a prior the network was trained with fits best and is not questioned;
    `--prior none` says it, and --against finds it."""
    from capsviz.cli import main

    unused = trained("unused-prior")
    torch.save(unused.state_dict(), tmp_path / "unused.pt")
    result = import_file(tmp_path / "unused.pt", tmp_path / "unused.safetensors", evaluate=False)
    (warning,) = [w for w in result["warnings"] if w.startswith("routing ")]
    assert (
        f" times from 0, not from the learned prior b {(I, 10)} the weights hold, fits them as well as routing 3 times from it" in warning
    )
    assert "say it with --prior none or --prior learned" in warning and "\n" not in warning
    assert ckpt.read_meta(tmp_path / "unused.safetensors").raw["config"]["routing_prior"] is True  # what was assumed

    said = ["import", str(tmp_path / "unused.pt"), "--no-evaluate", "--prior", "none", "--iterations", "3"]
    assert main([*said, "--out", str(tmp_path / "said.safetensors")]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert not any(w.startswith("routing ") for w in printed["warnings"])
    model, meta = ckpt.load_checkpoint(tmp_path / "said.safetensors")
    assert meta.raw["config"]["routing_prior"] is False
    assert any(n.startswith(f"ignored: the learned routing prior b {(I, 10)}") for n in printed["notes"])
    x = first_images(16)
    with torch.no_grad():
        torch.testing.assert_close(model(x).capsules, unused(x)[0], atol=TOLERANCE, rtol=0)

    used = trained("prior")
    torch.save(used.state_dict(), tmp_path / "used.pt")
    result = import_file(tmp_path / "used.pt", tmp_path / "used.safetensors", evaluate=False)
    assert not any(" from 0, not from the learned prior" in w for w in result["warnings"])

    _, model, meta = import_trained(tmp_path, unused, "checked", against_args={"convention": "unused-prior"}, normalise=(0.0, 1.0))
    assert meta.raw["config"]["routing_prior"] is False and meta.raw["imported"]["checked"]["max_difference"] <= TOLERANCE


def test_the_import_command_takes_the_input_pipeline_and_capsviz_list_says_what_was_checked(synthetic_data, tmp_path, capsys):
    from capsviz.cli import main

    _, path = saved(tmp_path, "paper")
    folder = tmp_path / "models"
    pipeline = ["--against-input", f"{PIPELINE}:test_transform"]
    assert main(["import", str(path), "--out", str(folder / "mine.safetensors"), "--no-evaluate", *pipeline]) == 2
    assert "--against-input goes with --against MODULE:NAME" in capsys.readouterr().err
    against = ["--against", f"{CONVENTIONS_FILE}:make"]
    assert main(["import", str(path), "--out", str(folder / "mine.safetensors"), "--no-evaluate", *against, *pipeline]) == 0
    assert json.loads(capsys.readouterr().out)["check"].endswith(
        f"fed your input pipeline {PIPELINE}:test_transform, pixels (x - 0.1307) / 0.3081"
    )
    assert main(["import", str(path), "--out", str(folder / "plain.safetensors"), "--no-evaluate"]) == 0
    capsys.readouterr()
    assert main(["list", str(folder)]) == 0
    lines = dict(line.split(": ", 1) for line in capsys.readouterr().out.splitlines() if not line.startswith("  "))  # not the notes
    assert "; checked against its code: max difference " in lines["mine.safetensors"]
    assert lines["mine.safetensors"].endswith(f"images fed your input pipeline {PIPELINE}:test_transform, pixels (x - 0.1307) / 0.3081")
    assert "; not checked against its code" in lines["plain.safetensors"]


def test_the_zoo_card_says_what_the_check_fed_in_the_readers_language():
    """The card's words are made where they are shown, from what the checkpoint records (the numbers,
    the images fed and who said them), so a Chinese or Japanese reader gets them in their language."""
    from test_i18n import english_left

    from capsviz.adapter import checked_words
    from capsviz.i18n import speaking

    fed = {"mean": 0.1307, "std": 0.3081, "by": "lengths"}
    checked = {"against": "net.py:make", "max_difference": 2.7e-7, "images": 16, "stages": ["conv1"], "fed": fed}
    assert checked_words(checked, ["w1", "w2"]) == (
        "checked against its code: max difference 2.7e-07 on 16 images fed pixels (x - 0.1307) / 0.3081, inferred from its "
        "lengths; the import gave 2 warnings"
    )
    for lang in ("zh-Hans", "ja"):
        with speaking(lang):
            said = [checked_words(checked, ["w1", "w2"]), checked_words(dict(checked, fed=dict(fed, by="normalise")), [])]
            said.append(checked_words(None, ["w1"]))
        for words in said:
            assert english_left(words) == [], (lang, words)
        assert all(n in said[0] for n in ("2.7e-07", "16", "0.1307", "0.3081", "2"))


def test_how_an_imported_capsnet_computes_is_said_in_each_language():
    """The zoo card's and the routing page's sentences on a CapsNet written elsewhere: one whole
    message per option, in Chinese and Japanese as in English, with the same numbers."""
    from capsviz.config import preset
    from capsviz.families.capsnet.model import computation_words
    from capsviz.i18n import speaking

    cfg = preset(
        "capsnet-small",
        input_mean=0.1307,
        input_std=0.3081,
        primary_grouping="view",
        routing_logits="batch",
        routing_batch=16,
        routing_prior=True,
    )
    english = computation_words(cfg)
    assert english and any("averaged over each 16 images" in w for w in english)
    for lang in ("zh-Hans", "ja"):
        with speaking(lang):
            said = computation_words(cfg)
        assert len(said) == len(english) and said != english
        assert all(re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", w) for w in said)
        assert "0.1307" in said[0] and "0.3081" in said[0] and any("16" in w for w in said)
