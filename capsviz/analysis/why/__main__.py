"""The "Why capsules" chapter's command line (python -m capsviz.analysis.why):

python -m capsviz.analysis.why                # store the sweeps of every shipped model that fits (checkpoints/sweeps)
python -m capsviz.analysis.why --only STEM    # only these models
python -m capsviz.analysis.why --say          # the sentences of the stored sweeps, nothing run
"""

from __future__ import annotations

import argparse

from capsviz.analysis import stored
from capsviz.analysis.why.store import precompute, stored_sentences


def main() -> None:
    from capsviz.paths import shipped_checkpoints

    parser = argparse.ArgumentParser(description="Store the sweeps of the chapter on why capsules for the shipped models.")
    parser.add_argument("--only", nargs="*", default=None, help="model file stems to run (default: every one that fits)")
    parser.add_argument("--say", action="store_true", help="print the sentences of the stored sweeps instead of running any")
    args = parser.parse_args()
    if args.say:
        print("\n".join(stored_sentences(shipped_checkpoints())))
    else:
        names = precompute(shipped_checkpoints(), stored.shipped_folder(), only=args.only)
        print(f"{len(names)} results in {stored.shipped_folder()}")


if __name__ == "__main__":
    main()
