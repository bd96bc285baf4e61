"""capsviz bench: speed and memory of the presets, and the other measurements of capsviz.bench."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from capsviz.cli.arguments import integer
from capsviz.config import MAX_ITERATIONS, PRESETS
from capsviz.i18n import t


def add_bench(sub) -> None:
    """`bench` and its options."""
    b = sub.add_parser("bench", help=t("speed and memory of every model preset on this device"))
    b.add_argument("--models", nargs="*", default=None, choices=list(PRESETS), help=t("the presets to measure (default: all)"))
    b.add_argument("--device", default="auto", help=t("auto, cpu, cuda, cuda:N or mps"))
    b.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"], help=t("arithmetic of the forward pass (autocast)"))
    b.add_argument("--steps", type=integer(1, 10_000), default=3, help=t("timed repetitions per measurement"))
    b.add_argument("--compile", action="store_true", help=t("as train --compile (compile time not counted)"))
    b.add_argument(
        "--routing-iterations",
        type=integer(1, MAX_ITERATIONS),
        help=t("override the routed presets' iterations (default: each preset's own)"),
    )
    b.add_argument("--json", type=Path, default=Path("bench.json"), help=t("where to save the results"))
    b.add_argument(
        "--convolutions",
        action="store_true",
        help=t("instead: PrimaryCaps' convolution, im2col GEMM against Fourier, per batch size"),
    )
    b.add_argument(
        "--step-parts",
        choices=[n for n, c in PRESETS.items() if c.routing == "dynamic"],
        help=t("instead: ms per part of a CapsNet preset's CPU training step"),
    )
    b.add_argument(
        "--sweeps", action="store_true", help=t("instead: seconds of each page sweep at its defaults (shipped models, real data)")
    )
    b.add_argument("--one", help=argparse.SUPPRESS)  # internal: measure one preset in this process


def cmd_bench(args) -> int:
    from capsviz import bench
    from capsviz.devices import pick_device

    pick_device(args.device)  # each preset is measured in a process of its own: a bad device is said once, here
    if args.convolutions:
        print(bench.convolution_table(bench.convolutions(args.steps)))
        return 0
    if args.step_parts:
        parts = bench.capsnet_step_parts(args.step_parts, args.steps)
        total = sum(parts.values())
        for part, ms in parts.items():
            print(f"{part:10} {ms:8.1f} ms  {100 * ms / total:4.0f}%")
        return 0
    if args.sweeps:
        for name, seconds in bench.page_sweeps(Path(__file__).resolve().parents[2] / "checkpoints"):
            print(t("{seconds} s  {name}", seconds=f"{seconds:7.1f}", name=name))
        return 0
    if args.one:
        print(json.dumps(bench.measure(args.one, args.device, args.precision, args.steps, args.compile, args.routing_iterations)))
        return 0
    results = bench.run_all(args.models or list(PRESETS), args.device, args.precision, args.steps, args.compile, args.routing_iterations)
    print(bench.table(results))
    args.json.write_text(json.dumps(results, indent=1))
    print(t("saved {path}", path=args.json))
    return 0
