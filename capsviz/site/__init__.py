"""`capsviz site`: the core views as a static folder that any static host serves, the models
computing in each student's browser (onnxruntime-web) with the numbers PyTorch gives.

The folder holds index.html and the front end (capsviz/site/web), the chosen models as ONNX graphs
(capsviz.site.export), real test images, and a manifest (site.json) with every text the pages
show beside the numbers: the tour's steps, the glossary and the class names, taken from the same
Python sources the Streamlit pages use. Nothing is fetched from outside at run time.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from capsviz import glossary
from capsviz.analysis import rules, why
from capsviz.analysis.playground import I_TOY, LIMIT, _dynamic_presets
from capsviz.analysis.tour import tour_of
from capsviz.entries import Layout
from capsviz.errors import CapsvizError
from capsviz.i18n import LANGUAGES, speaking
from capsviz.registry import FAMILIES, ROUTINGS, resolve
from capsviz.site import export, offline, quiz, tours, words

WEB = Path(__file__).parent / "web"
DEFAULT_MODELS = ("capsnet-small-mnist", "capsnet-mnist", "efficient-capsnet-mnist", "capsnet-small-multimnist", "matrix-small-mnist")
DEFAULT_IMAGES = 300
# What the browser needs from the pinned npm packages (capsviz/site/web/package-lock.json), and nothing else
# (the WebAssembly runtime gzipped: the page inflates it and hands it to onnxruntime as env.wasm.wasmBinary)
VENDOR = {
    "onnxruntime-web/dist/ort.wasm.min.mjs": "ort.wasm.min.mjs",
    "onnxruntime-web/dist/ort-wasm-simd-threaded.mjs": "ort-wasm-simd-threaded.mjs",
    "onnxruntime-web/dist/ort-wasm-simd-threaded.wasm": "ort-wasm-simd-threaded.wasm.gz",
}
# The front end's files the site serves: the page, its style and its ES modules (js/, one per view
# under js/views/); not its unit tests (web/test) or its lint configuration
FRONT_END = (
    "index.html",
    "site.css",
    "site.js",
    *sorted(p.relative_to(WEB).as_posix() for p in (WEB / "js").rglob("*.js")),
)
# The folders of what the views fetch when first shown (models, graphs, test images, tours, questions):
# the service worker keeps each as it is fetched, or all of them when the student asks
VIEWED = ("models", "graphs", "data", "tours", "questions")
# The glossary entries each tour step explains (the app's tour page shows the same help)
STEP_TERMS = {
    "input": ["capsule"],
    "conv1": ["conv1", "relu"],
    "primary": ["primary", "u", "length"],
    "predictions": ["u_hat", "W"],
    "iteration": ["c", "b", "s", "squash", "v", "agreement"],
    "routing": ["self_attention", "c", "prior", "efficient_squash"],
    "lengths": ["length", "margin_loss"],
    "reconstruction": ["reconstruction"],
    "lab": ["uniform", "random_couplings"],
}


def step_terms(family: str, key: str) -> list[str]:
    """The glossary entries of tour step `key` ("iteration3" is an "iteration" step) for a model of
    `family`: its entry's own (capsviz.entries.Family.tour_terms) where it has them, else every tour's."""
    kind = re.sub(r"^iteration[0-9]+$", "iteration", key)
    return FAMILIES[family].tour_terms.get(kind, STEP_TERMS.get(kind, []))


# index.html's marker for the files the page asks for before its program runs
PRELOAD_MARK = "<!-- preload -->"


def preloaded(html: str) -> str:
    """index.html with every ES module and the first files the page fetches named at its top, so the
    browser fetches them at once and in parallel, not one import level after another (the page's
    cold first view, BENCH.md)."""
    modules = ["site.js", *(f for f in FRONT_END if f.startswith("js/")), "vendor/ort.wasm.min.mjs", "vendor/ort-wasm-simd-threaded.mjs"]
    links = [f'<link rel="modulepreload" href="{f}">' for f in modules]
    links += [f'<link rel="preload" href="{f}" as="fetch" crossorigin>' for f in ("site.json", "vendor/ort-wasm-simd-threaded.wasm.gz")]
    if PRELOAD_MARK not in html:
        raise CapsvizError(f"capsviz/site/web/index.html lost its {PRELOAD_MARK} marker")
    return html.replace(PRELOAD_MARK, "\n  ".join(links))


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9, mtime=0)  # mtime 0: the same model gives the same file


def write_graph(out: Path, where: str, name: str, blob: bytes) -> dict:
    """Write graph `name` into the site's folder `where` (under `out`) as NAME.onnx, its weights (if any) apart in NAME.weights.gz:
    the raw tensors with every even byte first and every odd byte after, gzipped. A float16 weight's
    high bytes (sign, exponent) then sit together and compress well; the site undoes both steps.
    Lossless: the browser gets the very bytes PyTorch's weights are. -> the manifest's entry, with
    paths relative to the site."""
    import onnx

    folder = out / where
    folder.mkdir(parents=True, exist_ok=True)
    model = onnx.load_from_string(blob)
    with tempfile.TemporaryDirectory() as tmp:
        onnx.save_model(model, Path(tmp) / f"{name}.onnx", save_as_external_data=True, location=f"{name}.weights", size_threshold=1024)
        (folder / f"{name}.onnx").write_bytes((Path(tmp) / f"{name}.onnx").read_bytes())
        weights = Path(tmp) / f"{name}.weights"
        if not weights.exists():
            return {"onnx": f"{where}/{name}.onnx", "weights": None, "bytes": (folder / f"{name}.onnx").stat().st_size}
        raw = weights.read_bytes()
    raw += b"\0" * (len(raw) % 2)
    (folder / f"{name}.weights.gz").write_bytes(_gzip(raw[0::2] + raw[1::2]))
    size = (folder / f"{name}.onnx").stat().st_size + (folder / f"{name}.weights.gz").stat().st_size  # the page's progress line
    return {"onnx": f"{where}/{name}.onnx", "weights": f"{where}/{name}.weights.gz", "name": f"{name}.weights", "bytes": size}


@dataclass
class Built:
    out: Path
    models: list[str]
    images: int
    bytes: int


def _npm_files(cache: Path) -> Path:
    """node_modules with the locked packages, installed by `npm ci` into `cache` once per lockfile."""
    npm = shutil.which("npm")
    if npm is None:
        raise CapsvizError("capsviz site needs Node.js and npm (to fetch onnxruntime-web, pinned by its lockfile)")
    lock = (WEB / "package-lock.json").read_bytes()
    stamp = hashlib.sha256(lock + (WEB / "package.json").read_bytes()).hexdigest()[:16]
    where = cache / f"npm-{stamp}"
    if not (where / "node_modules" / ".complete").exists():
        where.mkdir(parents=True, exist_ok=True)
        for f in ("package.json", "package-lock.json"):
            shutil.copyfile(WEB / f, where / f)
        done = subprocess.run(
            [npm, "ci", "--omit=dev", "--no-audit", "--no-fund", "--loglevel=error"], cwd=where, capture_output=True, text=True
        )
        if done.returncode != 0:
            last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["no output"]
            raise CapsvizError(f"npm ci failed (is the npm registry reachable?): {last[0]}")
        (where / "node_modules" / ".complete").touch()
    return where / "node_modules"


def _first(data, n: int) -> tuple[np.ndarray, np.ndarray]:
    n = min(n, len(data))
    return data.images[:n].numpy().astype(np.uint8), data.labels[:n].numpy().astype(int)


def pairs(data, n: int) -> tuple[np.ndarray, np.ndarray]:
    """MultiMNIST test pairs from the MNIST test split `data`: the first n of the fixed evaluation
    set the app measures on (capsviz.data's), each (36, 36) uint8 (two digits' uint8 pixels summed
    and clamped: exact), labels (n, 2)."""
    from capsviz.data import multimnist

    index, shifts = multimnist.MultiMNIST(data.images, data.labels).eval_set(pairs_per_digit=1, seed=0, limit=n)
    b = multimnist.compose(data.images, data.labels, index[:n], shifts[:n])
    return (b.images * 255).round().numpy().astype(np.uint8), b.labels.numpy().astype(int)


def _em_entry(path: Path, model, meta, graphs: dict[str, dict], images_key: str) -> dict:
    """What the EM view and the EM tour read of a matrix-capsule model (web/js/views/em.js, tour.js)."""
    cfg = model.config
    return {
        "name": path.name,
        "routing": "em",
        "iterations": cfg.routing_iterations,
        "in_size": cfg.in_size,
        "channels": cfg.in_channels,
        "classes": list(meta.class_names),
        "images": images_key,
        "graphs": graphs,
        "tour": [
            {"key": s.key, "kind": words.step_kind(s.key)[0], "iteration": words.step_kind(s.key)[1], "title": s.title, "terms": []}
            for s in _tour_steps(model, meta)
        ],
    }


def _routed(cfg) -> tuple[int, Layout]:
    """A site model's routing iterations (1 for a one-pass routing) and where its primary capsules
    sit, from its routing's and its family's entries."""
    iterations = cfg.routing_iterations if ROUTINGS[cfg.routing].iterative else 1
    return iterations, FAMILIES[cfg.family].primary_layout(cfg)


def _tour_steps(model, meta) -> list:
    """The tour's steps for a model, their titles in this run's language."""
    cfg = model.config
    if FAMILIES[cfg.family].layout is None:  # matrix capsules (the EM tour): no primary grid to name, EM's own iterations
        return tour_of(cfg).steps(cfg.routing_iterations, glossary.class_words(meta), None)
    iterations, layout = _routed(cfg)
    return tour_of(cfg).steps(iterations, glossary.class_words(meta), layout.grid or None)


def chapter(out: Path, path: Path, meta, baselines: dict, changes: dict) -> dict | None:
    """The "Why capsules" view's entry for a capsule model (web/js/views/why.js): its baseline CNN's
    graph (capsviz.analysis.why.baseline_for, from the model's own folder; each CNN exported once
    into `baselines`) and the graph of the chapter's changes for its image size (once per size, into
    `changes`); None when the chapter cannot show the model (why.vector_fits) or no baseline fits."""
    from capsviz.checkpoint import list_checkpoints, load_checkpoint

    if not why.vector_fits(meta):
        return None
    cnn_path = why.baseline_for(meta, list_checkpoints(path.parent))
    if cnn_path is None:
        return None
    if cnn_path.name not in baselines:
        cnn, _ = load_checkpoint(cnn_path)
        baselines[cnn_path.name] = write_graph(out, f"models/{cnn_path.stem}", "baseline", export.baseline_graph(cnn))
    cfg = meta.config
    key = f"{cfg.in_channels}-{cfg.in_size}"
    if key not in changes:
        changes[key] = write_graph(out, "graphs", f"changes-{key}", export.changes_graph(cfg.in_channels, cfg.in_size))
    return {"cnn": cnn_path.name, "baseline": baselines[cnn_path.name], "changes": changes[key]}


def words_in(lang: str, tours: dict, em: bool, chapter: bool = False) -> dict:
    """Every word the site shows, in `lang` (one of capsviz.i18n.LANGUAGES): the vocabulary of
    capsviz.site.words, the glossary and each model's tour titles (`tours`: a model's file name ->
    a function giving its tour steps); `em` and `chapter`: whether the site has the EM and "Why
    capsules" views. The site writes it as words-<lang>.json and fetches it when a
    student's language is not English (the manifest holds the English)."""
    with speaking(lang):
        return {
            "lang": lang,
            **words.vocabulary(em=em, chapter=chapter),
            "glossary": {
                k: {
                    "symbol": term.symbol_in(),
                    "word": term.word_in(),
                    # as the app's glossary names it: in Chinese or Japanese with the English term in brackets
                    "heading": term.heading().replace("**", ""),
                    "explanation": term.explain(),
                }
                for k, term in glossary.TERMS.items()
            },
            "tours": {name: [s.title for s in steps()] for name, steps in tours.items()},
        }


def _model_entry(path: Path, model, meta, graphs: dict[str, dict], images_key: str) -> dict:
    """What the front end reads of one model (site.js)."""
    cfg = model.config
    iterations, layout = _routed(cfg)
    words_of = glossary.class_words(meta)
    return {
        "name": path.name,
        "routing": cfg.routing,
        "iterations": iterations,
        "in_size": cfg.in_size,
        "channels": cfg.in_channels,
        "classes": list(meta.class_names),
        "dim": cfg.digit_dim,
        # where the primary capsules sit (its family's layout): a CapsNet's on a grid over the image,
        # Efficient-CapsNet's nowhere in particular (each sees all of it)
        "grid": layout.grid or None,
        "types": layout.types or None,
        "images": images_key,
        "digits": 2 if meta.dataset == "multimnist" else 1,
        "family": cfg.family,
        # the tour's words for any image (web/js/said.js): what its classes are called (English, the words file
        # translates them), and whether the dynamic routing the tour shows is the one it was trained with
        "class_words": {"capsule": words_of.capsule_en, "thing": words_of.thing_en, "shown": words_of.shown_en, "digits": words_of.digits},
        "own_routing": getattr(cfg, "couplings", "dynamic")
        == "dynamic",  # MultiMNIST: two digits in each image, the two longest capsules the answer
        "graphs": graphs,
        "tour": [
            {
                "key": s.key,
                "kind": words.step_kind(s.key)[0],
                "iteration": words.step_kind(s.key)[1],
                "title": s.title,
                "terms": step_terms(cfg.family, s.key),
            }
            for s in _tour_steps(model, meta)
        ],
    }


def write_tour_words(out: Path, path: Path, model, meta, images: np.ndarray, labels, n: int) -> dict:
    """The app's tour words for the first `n` test images (capsviz.site.tours), one gzipped file a
    language under tours/ (fetched only by a student who opens that model's tour in that language).
    -> the manifest's entry: how many images are explained and each language's file."""
    (out / "tours").mkdir(exist_ok=True)
    files = {}
    for lang, steps in tours.tour_words(model, meta, path, images, labels, n).items():
        files[lang] = f"tours/{path.stem}-{lang}.json.gz"
        (out / files[lang]).write_bytes(_gzip(json.dumps(steps, ensure_ascii=False, separators=(",", ":")).encode()))
    return {"images": min(n, len(images)), "files": files}


def write_questions(out: Path, path: Path, model, meta, images: np.ndarray, labels, n: int) -> dict:
    """The explorer's questions for the first `n` test images (capsviz.site.quiz), one gzipped file a
    language under questions/. -> the manifest's entry: how many images are asked about and each file."""
    (out / "questions").mkdir(exist_ok=True)
    files = {}
    for lang, asked in quiz.questions_for(model, meta, path, images, labels, n).items():
        files[lang] = f"questions/{path.stem}-{lang}.json.gz"
        (out / files[lang]).write_bytes(_gzip(json.dumps(asked, ensure_ascii=False, separators=(",", ":")).encode()))
    return {"images": min(n, len(images)), "files": files}


def build(
    out: Path,
    models: list[Path],
    *,
    images: int = DEFAULT_IMAGES,
    tour_images: int = tours.TOUR_IMAGES,
    data_dir=None,
    cache: Path | None = None,
    log=print,
) -> Built:
    """Write the static site for checkpoint files `models` into `out` (created; its old contents
    replaced only where the site writes). `tour_images`: the test images whose tour the site explains
    in the app's words (capsviz.site.tours)."""
    from capsviz.checkpoint import load_checkpoint
    from capsviz.data import model_test_set
    from capsviz.paths import cache_dir

    if not models:
        raise CapsvizError("no models to put in the site")
    if importlib.util.find_spec("onnx") is None:
        raise CapsvizError("capsviz site needs the onnx package, which torch's ONNX exporter writes through: pip install 'onnx>=1.17'")
    try:  # before anything is fetched or exported
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CapsvizError(f"cannot write the site to {out}: {e.strerror}") from None
    node_modules = _npm_files(cache or cache_dir() / "site")
    entries, em_entries, sets, tours_titles = [], [], {}, {}
    chapters, baselines, changes = {}, {}, {}  # the "Why capsules" view's models, baseline CNNs and changes graphs
    for path in models:
        try:
            model, meta = load_checkpoint(path)
        except Exception as e:  # a model that cannot be used is named, the site is not half-built
            raise CapsvizError(f"{path.name}: cannot be used: {e}") from None
        if not export.supported(model):
            raise CapsvizError(
                f"{path.name}: the site runs CapsNets and Efficient-CapsNets with a decoder, and matrix capsules in its EM view; this is a {meta.family}"
            )
        cfg = model.config
        key = f"{meta.dataset}-{cfg.in_size}-{cfg.in_channels}"
        if key not in sets:
            data = model_test_set(meta.dataset, cfg.in_size, cfg.in_channels, data_dir)
            sets[key] = pairs(data, images) if meta.dataset == "multimnist" else _first(data, images)
        log(f"exporting {path.name} ...")
        if cfg.routing == "em":  # matrix capsules: the EM view's, not in the other views' model list
            written = {name: write_graph(out, f"models/{path.stem}", name, blob) for name, blob in export.em_graphs(model).items()}
            em_entries.append(_em_entry(path, model, meta, written, key))
            em_entries[-1]["explained"] = write_tour_words(out, path, model, meta, *sets[key], tour_images)
            tours_titles[path.name] = lambda model=model, meta=meta: _tour_steps(model, meta)
            continue
        graphs = resolve(FAMILIES[meta.family].site)(model)  # the family's own export (capsviz.entries.Family.site)
        written = {name: write_graph(out, f"models/{path.stem}", name, blob) for name, blob in graphs.items()}
        entries.append(_model_entry(path, model, meta, written, key))
        if tours.explained(meta):
            entries[-1]["explained"] = write_tour_words(out, path, model, meta, *sets[key], tour_images)
        entries[-1]["questions"] = write_questions(out, path, model, meta, *sets[key], tour_images)
        if (entry := chapter(out, path, meta, baselines, changes)) is not None:
            chapters[path.name] = entry
        tours_titles[path.name] = lambda model=model, meta=meta: _tour_steps(model, meta)
    if not entries:
        raise CapsvizError("the site needs at least one CapsNet or Efficient-CapsNet besides matrix-capsule models")
    shared = {
        name: write_graph(out, "graphs", name, blob)
        for name, blob in (("dynamic", export.dynamic_graph()), ("attention", export.attention_graph()))
    }
    (out / "data").mkdir(exist_ok=True)
    image_sets = {}
    for key, (imgs, labels) in sets.items():
        (out / "data" / f"{key}.bin.gz").write_bytes(_gzip(np.ascontiguousarray(imgs).tobytes()))
        size = (out / "data" / f"{key}.bin.gz").stat().st_size
        image_sets[key] = {"file": f"data/{key}.bin.gz", "count": len(labels), "labels": labels.tolist(), "bytes": size}
    (out / "vendor").mkdir(exist_ok=True)
    for src, dst in VENDOR.items():
        if dst.endswith(".gz"):
            (out / "vendor" / dst).write_bytes(_gzip((node_modules / src).read_bytes()))
        else:
            shutil.copyfile(node_modules / src, out / "vendor" / dst)
    for f in FRONT_END:
        (out / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(WEB / f, out / f)
    (out / "index.html").write_text(preloaded((WEB / "index.html").read_text(encoding="utf-8")), encoding="utf-8")
    # each language's words apart, fetched only by a student who reads that language (English is in the manifest)
    languages = {}
    for lang in LANGUAGES:
        languages[lang] = f"words-{lang}.json"
        (out / languages[lang]).write_text(
            json.dumps(words_in(lang, tours_titles, bool(em_entries), bool(chapters)), ensure_ascii=False, indent=1), encoding="utf-8"
        )
    # every file a view may fetch, for a student who asks to keep them all offline (web/js/offline.js)
    viewed = sorted(f for f in out.rglob("*") if f.is_file() and f.relative_to(out).parts[0] in VIEWED)
    manifest = {
        "offline": {f.relative_to(out).as_posix(): f.stat().st_size for f in viewed},  # each file and its bytes
        "languages": {lang: {"name": name, "words": languages[lang]} for lang, name in LANGUAGES.items()},
        "models": entries,
        "em_models": em_entries,
        "image_sets": image_sets,
        "graphs": shared,
        "iterations_max": export.ITERATIONS,
        "glossary": {k: {"symbol": term.symbol, "word": term.word, "explanation": term.explanation} for k, term in glossary.TERMS.items()},
        **words.vocabulary(em=bool(em_entries), chapter=bool(chapters)),
        # the "Why capsules" view: its changes in the changes graph's order and the rule's step (capsviz.analysis.why)
        "why": {
            "shifts": list(why.SHIFTS),
            "angles": list(why.ANGLES),
            "schemes": list(why.SCHEMES),
            "dim_step": rules.DIM_STEP,
            "models": chapters,
        },
        "playground": {
            "presets": {name: p.tolist() for name, p in _dynamic_presets().items()},
            "lower": I_TOY,
            "limit": LIMIT,
        },
    }
    # the version names this build's files: a changed site gets a new service worker, which replaces the offline copy
    manifest["version"] = offline.version(out, json.dumps(manifest, sort_keys=True).encode())
    (out / "site.json").write_text(json.dumps(manifest, indent=1))
    shell = [*FRONT_END, "site.json", *languages.values(), *(f"vendor/{f}" for f in VENDOR.values())]
    shell += [g[k] for g in shared.values() for k in ("onnx", "weights") if g.get(k)]
    (out / "sw.js").write_text(offline.service_worker(manifest["version"], shell))
    total = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    return Built(out, [e["name"] for e in entries], sum(len(v[1]) for v in sets.values()), total)
