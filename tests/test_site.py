"""`capsviz site` without a browser: what the ONNX export writes, and the clear refusals. The
browser's numbers against PyTorch's are checked in tests/e2e/test_site_browser.py."""

import re
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
import torch
from onnx import numpy_helper

from capsviz.config import preset
from capsviz.errors import CapsvizError
from capsviz.models import build_model
from capsviz.site import build, export

ROOT = Path(__file__).resolve().parents[1]


def tiny(name: str):
    torch.manual_seed(0)
    return build_model(preset(name)).eval()


def initializers(blob: bytes) -> dict:
    return {t.name: numpy_helper.to_array(t) for t in onnx.load_from_string(blob).graph.initializer}


def test_weights_exact_in_float16_stay_float16_and_the_rest_float32():
    model = tiny("capsnet-small")
    with torch.no_grad():
        model.conv1.weight.copy_(model.conv1.weight.half().float())  # exact in float16, as a shipped model
        model.conv1.bias.add_(1e-7)  # not exact: must stay float32, or the browser computes another model
    graphs = export.model_graphs(model)
    weights = initializers(graphs["encoder"])
    by_shape = {tuple(w.shape): w for w in weights.values()}
    assert by_shape[tuple(model.conv1.weight.shape)].dtype.name == "float16"
    assert by_shape[tuple(model.conv1.bias.shape)].dtype.name == "float32"
    assert torch.equal(torch.tensor(by_shape[tuple(model.conv1.weight.shape)]).float(), model.conv1.weight)
    onnx.checker.check_model(onnx.load_from_string(graphs["encoder"]))
    # the model itself is untouched: the export works on a copy
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_each_family_gets_its_graphs_and_the_dynamic_graph_records_every_iteration():
    assert set(export.model_graphs(tiny("capsnet-small"))) == {"encoder", "decoder"}
    assert set(export.model_graphs(tiny("efficient-capsnet"))) == {"encoder", "decoder", "attention"}
    g = onnx.load_from_string(export.dynamic_graph())
    assert [o.name for o in g.graph.output] == ["c", "v", "agreement"]
    assert g.graph.output[0].type.tensor_type.shape.dim[0].dim_value == export.ITERATIONS


def test_graphs_come_from_the_reference_path(monkeypatch):
    """A fast path the export cannot see is never traced: every kernel switch reads reference_only()."""
    from capsviz.kernels import policy

    seen = []
    real = policy.conv_path
    monkeypatch.setattr(policy, "conv_path", lambda *a: seen.append(real(*a)) or seen[-1])
    export.model_graphs(tiny("capsnet-small"))
    assert seen and all(p is None for p in seen)


def test_models_the_site_cannot_run_are_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="CapsNets and Efficient-CapsNets"):
        export.model_graphs(tiny("cnn-small"))
    with pytest.raises(CapsvizError, match="no models"):
        build(tmp_path / "site", [])


def test_without_npm_the_site_says_what_it_needs(tmp_path, monkeypatch):
    import capsviz.site as site

    monkeypatch.setattr(site.shutil, "which", lambda _: None)
    with pytest.raises(CapsvizError, match="needs Node.js and npm"):
        site._npm_files(tmp_path)


def site_command(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "capsviz", "site", *args], cwd=ROOT, capture_output=True, text=True)


def test_cli_names_a_missing_model_in_one_line(tmp_path):
    done = site_command("--out", str(tmp_path / "s"), "--models", "no-such-model")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"error: no model no-such-model in {ROOT / 'checkpoints'}"]
    assert not (tmp_path / "s").exists()


def test_an_out_that_cannot_be_a_folder_is_refused_in_one_line(tmp_path):
    (tmp_path / "afile").write_text("mine")
    done = site_command("--out", str(tmp_path / "afile"), "--models", "capsnet-small-mnist")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"error: cannot write the site to {tmp_path / 'afile'}: File exists"]
    assert (tmp_path / "afile").read_text() == "mine"


def test_the_front_end_files_the_build_copies_are_in_the_package():
    import fnmatch
    import tomllib

    from capsviz.site import FRONT_END, WEB

    assert all((WEB / f).is_file() for f in (*FRONT_END, "package.json", "package-lock.json"))
    assert "js/views/explore.js" in FRONT_END and not any(f.startswith("tests/") or "eslint" in f for f in FRONT_END)
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["capsviz.site"]
    for f in (*FRONT_END, "package.json", "package-lock.json"):  # a pattern's * stays within one folder, as setuptools' glob
        assert any(fnmatch.fnmatch(f"web/{f}", p) and f"web/{f}".count("/") == p.count("/") for p in patterns), f


def test_the_page_names_every_module_and_its_first_files_at_its_top():
    from capsviz.site import FRONT_END, PRELOAD_MARK, WEB, preloaded

    html = preloaded((WEB / "index.html").read_text(encoding="utf-8"))
    head = html[: html.index("</head>")]
    for f in [f for f in FRONT_END if f.endswith(".js")] + ["vendor/ort.wasm.min.mjs"]:
        assert f'<link rel="modulepreload" href="{f}">' in head, f
    assert '<link rel="preload" href="site.json" as="fetch" crossorigin>' in head and PRELOAD_MARK not in html
    assert "plotly" not in html  # the charts are the site's own SVG (web/js/chart.js)
    with pytest.raises(CapsvizError, match="marker"):
        preloaded("<html></html>")


def test_site_links_carry_the_app_view_or_nothing():
    from capsviz.site.links import site_link

    q = {"model": "capsnet-mnist.safetensors", "image": "7", "iterations": "5", "term": "x"}
    assert (
        site_link("routing", q, True, "https://h/s/")
        == "https://h/s/?view=routing&model=capsnet-mnist.safetensors&image=7&iterations=5&routing=dynamic"
    )  # the app's routing page routes every model by agreement, Efficient-CapsNet's capsules too
    assert site_link("routing", q, False, "https://h/s") is None  # a model the site cannot run
    assert site_link("em", q, True, "https://h/s") is None  # a page it does not have
    assert site_link("routing", q, True, "") is None  # no site named
    assert site_link("playground", {"toy": "em"}, False, "https://h") is None
    assert (
        site_link("playground", {"preset": "outliers", "rule": "dynamic"}, False, "https://h")
        == "https://h/?view=playground&preset=outliers&rule=dynamic"
    )
    from capsviz.i18n import speaking

    with speaking("ja"):  # the app read in Japanese: the site opens in Japanese
        assert site_link("tour", q, True, "https://h").endswith("&lang=ja")


def test_packed_weights_unpack_to_the_graph_pytorch_exported(tmp_path):
    """write_graph's container (weights apart, byte planes, gzip) gives back every byte: the site's
    interleave() undone here the same way, the graph then loads with every initializer equal."""
    import gzip

    from capsviz.site import write_graph

    blob = export.model_graphs(tiny("capsnet-small"))["decoder"]
    entry = write_graph(tmp_path, "m", "decoder", blob)
    assert entry == {
        "onnx": "m/decoder.onnx",
        "weights": "m/decoder.weights.gz",
        "name": "decoder.weights",
        "bytes": (tmp_path / entry["onnx"]).stat().st_size + (tmp_path / entry["weights"]).stat().st_size,
    }
    packed = gzip.decompress((tmp_path / entry["weights"]).read_bytes())
    half = len(packed) // 2
    raw = bytearray(len(packed))
    raw[0::2], raw[1::2] = packed[:half], packed[half:]
    (tmp_path / "m" / "decoder.weights").write_bytes(bytes(raw))
    got = onnx.load(str(tmp_path / entry["onnx"]))  # reads the external weights beside it
    want = initializers(blob)
    assert {t.name: numpy_helper.to_array(t).tobytes() for t in got.graph.initializer} == {k: v.tobytes() for k, v in want.items()}


def _contrast(a: str, b: str) -> float:
    def lum(hex_colour: str) -> float:
        c = [int(hex_colour.lstrip("#")[k : k + 2], 16) / 255 for k in (0, 2, 4)]
        c = [x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4 for x in c]
        return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]

    hi, lo = sorted([lum(a), lum(b)], reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_key_colours_in_the_css_meet_wcag_aa():
    """Text 4.5:1 on the page and on white panels, the focus ring 3:1, white on the accent (the chosen view's button)."""
    import re

    from capsviz.site import WEB

    css = (WEB / "site.css").read_text()
    colours = dict(re.findall(r"--([a-z0-9]+):\s*(#[0-9a-fA-F]{6})", css))
    for name in ("ink", "muted", "accent", "status", "upper1", "upper2", "upper3"):
        for bg in (colours["page"], "#ffffff"):
            assert _contrast(colours[name], bg) >= 4.5, (name, bg, _contrast(colours[name], bg))
    assert _contrast(colours["focus"], colours["page"]) >= 3
    assert _contrast("#ffffff", colours["accent"]) >= 4.5
    assert "outline: 3px solid var(--focus)" in css
    # the page's text colours all come from these variables (and white on the accent, checked above)
    assert not re.search(r"(?<![-a-z])color:\s*#(?!fff;)", css)
    js = "".join(p.read_text() for p in [WEB / "site.js", *(WEB / "js").rglob("*.js")])
    assert "var(--upper1)" in js and "#E69F00" not in js and "#CC79A7" not in js


def test_each_tour_step_gets_its_own_glossary_entries():
    from capsviz.site import step_terms

    assert step_terms("capsnet", "conv1") == ["conv1", "relu"]  # not cut to "conv"
    assert step_terms("capsnet", "iteration3") == step_terms("capsnet", "iteration1") == ["c", "b", "s", "squash", "v", "agreement"]
    assert "primary" not in step_terms("efficient", "primary")  # its entry describes the paper CapsNet's 6x6 grid
    assert step_terms("efficient", "convs") == ["relu", "batchnorm"]


def test_the_service_worker_names_its_cache_by_the_build(tmp_path):
    from capsviz.site import offline

    (tmp_path / "a.txt").write_text("one")
    v1 = offline.version(tmp_path, b"{}")
    (tmp_path / "sw.js").write_text("anything")  # the worker itself does not count
    assert offline.version(tmp_path, b"{}") == v1
    (tmp_path / "a.txt").write_text("two")
    v2 = offline.version(tmp_path, b"{}")
    assert v1 != v2 and len(v2) == 12
    sw = offline.service_worker(v2, ["index.html", "site.js"])
    assert f'const VERSION = "{v2}"' in sw and 'const SHELL = ["index.html", "site.js"]' in sw and "__" not in sw


def test_the_footer_says_what_the_site_does_itself():
    """The site computes digits the student draws: the footer sends only what it cannot do to the app."""
    from capsviz.site import WEB

    footer = (WEB / "index.html").read_text().split("<footer", 1)[1]
    assert "digits you draw" in footer and "your own data" not in footer


@pytest.mark.parametrize("lang", ["zh-Hans", "ja"])
def test_the_site_words_of_each_language_are_whole_and_fill_as_the_english(lang):
    """words-<lang>.json: every message, view, routing and glossary entry of the English is there,
    translated, with the same placeholders, and each fills without a brace left."""
    import string

    from capsviz.glossary import DIGIT_WORDS
    from capsviz.registry import FAMILIES
    from capsviz.site import words, words_in

    tours = {"m.safetensors": lambda: FAMILIES["capsnet"].guided_tour.steps(3, DIGIT_WORDS, 6)}
    en, got = words_in("en", tours, em=True), words_in(lang, tours, em=True)
    assert got["lang"] == lang and set(got) == set(en)
    assert set(got["messages"]) == set(en["messages"]) == set(words.MESSAGES) | set(words.PAGE) | set(words.CHAPTER)
    for key, english in en["messages"].items():
        said = got["messages"][key]
        symbols = not re.findall(r"[A-Za-z]{3,}", "".join(text for text, *_ in string.Formatter().parse(english)))  # "{v:+.0f} px"
        assert said and (said != english or symbols), f"{lang}: {key} is not translated: {said!r}"
        assert words.placeholders(said) == words.placeholders(english), (lang, key)
        filled = said.format(**dict.fromkeys(words.placeholders(said), 7))  # a number: {score:.2f} formats it
        assert "{" not in filled and "}" not in filled, (lang, key, filled)
        english_words = re.findall(r"[A-Za-z]{3,}", "".join(text for text, *_ in string.Formatter().parse(english)))
        assert not english_words or key == "of_count" or re.search("[\u3000-\u9fff\uff00-\uffef]", said), f"{lang}: {key}: {said!r}"
    assert [v["key"] for v in got["views"]] == [v["key"] for v in en["views"]]
    for a, b in zip(got["views"], en["views"], strict=True):
        assert a["name"] != b["name"] and a["called"] != b["called"], (lang, a)
    for name, r in got["routings"].items():
        assert r["words"] != en["routings"][name]["words"] and r["about"] != en["routings"][name]["about"], (lang, name)
        assert r["title"] != en["routings"][name]["title"] and r["iterative"] == en["routings"][name]["iterative"], (lang, name)
    assert set(got["glossary"]) == set(en["glossary"]) and len(got["tours"]["m.safetensors"]) == len(en["tours"]["m.safetensors"])


def test_the_build_writes_each_languages_words_beside_the_manifest():
    """The manifest names each language's words file; the service worker keeps them for offline use."""
    src = (ROOT / "capsviz" / "site" / "__init__.py").read_text()
    assert 'f"words-{lang}.json"' in src and "*languages.values()" in src
    from capsviz.i18n import LANGUAGES
    from capsviz.site import words

    assert "lang" in words.PARAMS and set(LANGUAGES) == {"en", "zh-Hans", "ja"}
