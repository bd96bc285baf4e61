"""capsviz data: where each dataset was found, its size and checksums, and fetching the missing."""

from __future__ import annotations

import sys

from capsviz.cli.arguments import data_folder
from capsviz.errors import CapsvizError
from capsviz.i18n import t


def add_data(sub) -> None:
    """`data` and its options."""
    d = sub.add_parser("data", help=t("where each dataset was found, its size and checksums"))
    d.add_argument("--data-dir", help=t("folder holding the dataset files"))
    d.add_argument("--download", action="store_true", help=t("fetch missing datasets from the public mirrors"))


def cmd_data(args) -> int:
    from capsviz.data import SOURCES
    from capsviz.data.sources import download, locate, missing_message, verify

    data_folder(args.data_dir)
    for name, source in SOURCES.items():
        place, places = locate(source, args.data_dir)
        if place is None and args.download:
            print(t("{name}: downloading ...", name=name))
            place = download(source, progress=_download_progress)
            print()
        if place is None:
            print(
                t("{name}: NOT FOUND", name=name) + "\n" + "\n".join("  " + line for line in missing_message(source, places).splitlines())
            )
            continue
        status = verify(source, place)
        size = sum(f.stat().st_size for f in place.iterdir() if f.is_file() and f.name.split(".")[0] in source.files)
        said = dict(name=name, place=place, size=f"{size / 1e6:.1f}", status=status)
        if all(v == "ok" for v in status.values()):
            print(t("{name}: {place} ({size} MB) checksums ok", **said))
        else:
            print(t("{name}: {place} ({size} MB) checksums {status}", **said))
    _data_smallnorb(args)
    return 0


def _data_smallnorb(args) -> None:
    from capsviz.data import smallnorb

    place, places = smallnorb.locate(args.data_dir)
    if place is None and args.download:
        print(t("smallnorb: downloading from the official site (about 250 MB) ..."))
        place = smallnorb.download(progress=_download_progress)
        print()
    if place is None:
        print(
            t(
                "smallnorb: NOT FOUND (looked in {places}); `python -m capsviz data --download` or get the six files from {url}",
                places=", ".join(map(str, places)),
                url=smallnorb.URL,
            )
        )
        return
    counts = {}
    for split in smallnorb.FILES:
        try:
            counts[split] = len(smallnorb.load_smallnorb(place, split).labels)
        except CapsvizError as e:
            counts[split] = t("unreadable: {why}", why=e)
    print(t("smallnorb: {place} {counts} (no published checksums: files checked by parsing)", place=place, counts=counts))


def _download_progress(name: str, got: int, total: int) -> None:
    pct = f"{100 * got / total:5.1f}%" if total else f"{got / 1e6:.1f} MB"
    sys.stdout.write(f"\r  {name}: {pct}")
    sys.stdout.flush()
