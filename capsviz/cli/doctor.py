"""capsviz doctor: the device, torch, the native kernel, and the data and model folders."""

from __future__ import annotations

from capsviz.cli.serving import build_kernel
from capsviz.i18n import t, tn


def add_doctor(sub) -> None:
    """`doctor` and its options."""
    dr = sub.add_parser("doctor", help=t("device, torch, native kernel (and why it is off), data and checkpoint folders"))
    dr.add_argument(
        "--build", action="store_true", help=t("only build the native EM kernel now (as `capsviz app` does at start) and say how it went")
    )


def cmd_doctor(args) -> int:
    import platform

    if args.build:
        print(t("native EM kernel: {status}", status=build_kernel()))
        return 0

    import torch

    from capsviz import kernels, paths
    from capsviz.data import SOURCES
    from capsviz.data.sources import locate
    from capsviz.devices import describe_hardware, pick_device

    device = pick_device("auto")
    said = dict(version=__import__("capsviz").__version__, folder=paths.app_dir())
    print(
        t("capsviz {version} (checkout: {folder})", **said) if paths.is_checkout() else t("capsviz {version} (installed: {folder})", **said)
    )
    print(
        t(
            "python: {version} on {system} {machine}",
            version=platform.python_version(),
            system=platform.system(),
            machine=platform.machine(),
        )
    )
    print(t("torch: {version}, {threads} threads", version=torch.__version__, threads=torch.get_num_threads()))
    print(t("device: {device} ({hardware})", device=device.type, hardware=describe_hardware(device)))
    for k in kernels.paths(device):
        print(
            t("{path}: on ({reason})", path=k.path, reason=k.reason) if k.on else t("{path}: off ({reason})", path=k.path, reason=k.reason)
        )
    for name, source in SOURCES.items():
        place, _ = locate(source)
        print(
            t("data {name}: {place}", name=name, place=place) if place else t("data {name}: not found (capsviz data --download)", name=name)
        )
    folder = paths.model_folder()
    count = len(list(folder.glob("*.safetensors"))) if folder.is_dir() else 0
    print(tn("checkpoints: {folder} ({n} model)", "checkpoints: {folder} ({n} models)", count, folder=folder))
    print(t("shipped checkpoints: {folder}", folder=paths.shipped_checkpoints()))
    print(t("user folder: {folder} (CAPSVIZ_HOME moves it)", folder=paths.user_dir()))
    return 0
