"""The routing lab's command line (python -m capsviz.analysis.lab):

python -m capsviz.analysis.lab           # the lab's default results for every shipped model
python -m capsviz.analysis.lab --table   # the stored ones as a markdown table and sentences
python -m capsviz.analysis.lab --retime  # their time per image again (stored only if the machine is not busy)
python -m capsviz.analysis.lab --seeds RUN.safetensors ...  # a seed study of finished runs, stored
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

from capsviz.analysis import rule_words, rules, stored
from capsviz.analysis.lab.measuring import ITERATIONS, TIME_BATCH, RunWith, Settings, fits, hardware, retime
from capsviz.analysis.lab.seeds import seed_sentences, seed_study, seeds_key, stored_studies
from capsviz.analysis.lab.store import key, precompute, stored_rows
from capsviz.analysis.lab.tables import markdown
from capsviz.analysis.robustness import attack_test_images
from capsviz.errors import CapsvizError
from capsviz.i18n import N_, environment, set_language, t
from capsviz.registry import ROUTINGS, vector_routings

USAGE = N_(
    "usage: python -m capsviz.analysis.lab [--table | --retime | --seeds RUN.safetensors ...]\n"
    "  (nothing)  measure the lab's default results for every shipped model and store them\n"
    "  --table    the stored results as a markdown table and sentences (nothing is measured)\n"
    "  --retime   their time per image again, stored only if the machine is not busy\n"
    "  --seeds    a seed study of finished training runs, stored"
)


def main() -> None:
    set_language(environment())  # its messages and tables in the language of the shell (LANG)
    if {"-h", "--help"} & set(sys.argv[1:]):
        print(t(USAGE))
        return
    try:
        run()
    except CapsvizError as e:  # missing data, an unreadable model: one line, never a traceback
        sys.exit(t("error: {reason}", reason=e))


def run() -> None:
    from capsviz.checkpoint import list_checkpoints, load_checkpoint
    from capsviz.data import load_split
    from capsviz.paths import shipped_checkpoints

    target = stored.shipped_folder()
    if "--retime" in sys.argv:  # the time per image of every stored row again, on a quiet machine
        for path, meta in list_checkpoints(shipped_checkpoints()):
            if isinstance(meta, str) or not fits(meta.config):
                continue
            model = load_checkpoint(path)[0]
            x, _ = attack_test_images(load_split(meta.image_dataset, "test"), TIME_BATCH, meta.config.in_size)
            where = {r: key(path, r, meta.image_dataset, Settings()) for r in vector_routings()}
            values = {r: v for r, w in where.items() if (v := stored.read(w, [target])) is not None}
            runs = {r: RunWith(model, r, ITERATIONS if ROUTINGS[r].iterative else None) for r in values}
            timed, load, cores = retime(runs, x), os.getloadavg()[0], os.cpu_count() or 0
            if rules.busy(load, cores):  # a busy machine's times would replace better ones and claim nothing
                print(
                    t(
                        "{model}: the machine is busy (load {load} on {cores} cores), so its times are not stored",
                        model=path.stem,
                        load=f"{load:.1f}",
                        cores=cores,
                    ),
                    file=sys.stderr,
                )
                continue
            for r, value in values.items():
                value.update(
                    ms_per_image=statistics.median(timed[r]), ms_samples=list(timed[r]), hardware=hardware(), load=load, cores=cores
                )
                stored.write(where[r], value, target)
                said = rule_words.timing_words(rules.Timing(timed[r]))
                print(
                    t("{model} with {routing}: {timing}, load {load}", model=path.stem, routing=r, timing=said, load=f"{load:.2f}"),
                    file=sys.stderr,
                )
    elif "--seeds" in sys.argv:  # a seed study made of finished training runs (RESULTS.md has the commands)
        from capsviz.checkpoint import read_meta

        files = [Path(a) for a in sys.argv[sys.argv.index("--seeds") + 1 :]]
        try:
            study = seed_study(read_meta(f) for f in files)
        except (OSError, ValueError) as e:
            sys.exit(t("error: {reason}", reason=e))
        stored.write(seeds_key(study), study.stored(), target)
        print("\n".join(f"- {line}" for line in seed_sentences(study)))
    elif "--table" in sys.argv:  # what is stored, as the page shows it: nothing is measured
        entries = [(p, m) for p, m in list_checkpoints(shipped_checkpoints()) if not isinstance(m, str) and fits(m.config)]
        have = stored_rows(entries, vector_routings(), folders=[target])
        print(markdown([have[p.stem, r] for p, _ in entries for r in vector_routings() if (p.stem, r) in have], stored_studies([target])))
    else:
        print(t("{n} lab results in {folder}", n=len(precompute(shipped_checkpoints(), target)), folder=target))


if __name__ == "__main__":
    main()
