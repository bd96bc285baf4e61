"""capsviz site: the static site built from models in the model folder."""

from __future__ import annotations

from pathlib import Path

from capsviz.cli.arguments import integer
from capsviz.errors import CapsvizError
from capsviz.i18n import t

# The static site's models without --models: capsviz.site.DEFAULT_MODELS, named here so that the
# help does not import the site's exporter (tests/test_cli_languages.py checks they are the same)
SITE_MODELS = ("capsnet-small-mnist", "capsnet-mnist", "efficient-capsnet-mnist", "capsnet-small-multimnist", "matrix-small-mnist")


def add_site(sub) -> None:
    """`site` and its options."""
    si = sub.add_parser(
        "site",
        help=t("build the static site: the explorer, routing, tour and playground computing in the browser (needs npm)"),
        description=t(
            "Write a self-contained static folder (index.html, the models as ONNX, test images) that any static host "
            "serves; the models compute in each browser with onnxruntime-web. npm fetches the pinned front-end packages once."
        ),
    )
    si.add_argument("--out", type=Path, required=True, help=t("the folder to write (e.g. site/)"))
    si.add_argument(
        "--models",
        nargs="+",
        metavar="NAME",
        help=t("models from the model folder (default: {models})", models=" ".join(SITE_MODELS)),
    )
    si.add_argument("--images", type=integer(1, 10000), default=300, help=t("test images to include (default: 300)"))
    si.add_argument("--data-dir", help=t("folder holding the dataset files"))


def cmd_site(args) -> int:
    from capsviz import site
    from capsviz.paths import model_folder

    folder = model_folder()
    paths = []
    for name in args.models or site.DEFAULT_MODELS:
        path = folder / (name if name.endswith(".safetensors") else f"{name}.safetensors")
        if not path.is_file():
            raise CapsvizError(t("no model {name} in {folder}", name=name, folder=folder))
        paths.append(path)
    built = site.build(args.out, paths, images=args.images, data_dir=args.data_dir)
    print(
        t(
            "wrote {folder}: {models} models, {images} test images, {size} MB",
            folder=built.out,
            models=len(built.models),
            images=built.images,
            size=f"{built.bytes / 2**20:.1f}",
        )
    )
    print(
        t("try it: {command}, then open {url}", command=f"python3 -m http.server --directory {built.out} 8000", url="http://localhost:8000")
    )
    return 0
