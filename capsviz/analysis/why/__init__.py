"""Why capsules: the papers' argument before the mechanics, measured on real models.

Both papers, and every explainer after them, start from one story: a CNN's pooling keeps *whether*
a part is present and throws away *where*, so its answer is *invariant* to the pose; a capsule's
length says whether, its direction says how, so it is *equivariant* (the vector changes with the
pose while the answer stays); a face with its parts in the wrong places fools a CNN but not parts
that must agree; and in matrix capsules a change of viewpoint moves all the votes together, so
their agreement survives it. This package measures each claim on a capsule model and the baseline
CNN over real test images, and every sentence it writes is decided by a rule of
capsviz.analysis.rules from the numbers it quotes, which are the numbers its charts draw.

Measurements are over the first `WHY_IMAGES` test images (whole sweeps, kept by the caller once
per process and on disk, capsviz.analysis.stored); the single-image views take one image and
answer in milliseconds.

One concern per module: `changes` (what is done to an image: moved, turned, its parts moved),
`measuring` (the sweeps over the test images and the single-image views), `sentences` (the words
about them), `store` (the sweeps kept on disk, which models the chapter shows, `precompute` and
`stored_sentences`) and `__main__` (its command line, `python -m capsviz.analysis.why [--say]`). The pages
and tests read them as `why.NAME`, from here.
"""

from __future__ import annotations

from capsviz.analysis.why.changes import (
    ANGLES,
    KIND_NAMES,
    KINDS,
    SCHEME_NAMES,
    SCHEME_SHORT,
    SCHEMES,
    SHIFTS,
    moved,
    scrambled,
)
from capsviz.analysis.why.measuring import (
    BATCH,
    FIELDS,
    PART_FIELDS,
    POSITION,
    class_votes,
    column,
    invariance_sweep,
    one_image,
    one_image_votes,
    parts_sweep,
    parts_views,
    viewpoint_sweep,
    vote_agreement,
)
from capsviz.analysis.why.sentences import (
    CHAPTER_WORDS,
    chapter_words,
    invariance_words,
    inverse_graphics_words,
    one_image_words,
    parts_words,
    viewpoint_words,
)
from capsviz.analysis.why.store import (
    SWEEP_VERSION,
    WHY_IMAGES,
    baseline_for,
    chapter_kind,
    kept_sweep,
    matrix_fits,
    precompute,
    stored_sentences,
    vector_fits,
)

__all__ = [
    "SHIFTS",
    "ANGLES",
    "KINDS",
    "SCHEMES",
    "SCHEME_NAMES",
    "SCHEME_SHORT",
    "KIND_NAMES",
    "moved",
    "scrambled",
    "BATCH",
    "FIELDS",
    "invariance_sweep",
    "column",
    "one_image",
    "vote_agreement",
    "PART_FIELDS",
    "parts_sweep",
    "parts_views",
    "class_votes",
    "POSITION",
    "viewpoint_sweep",
    "one_image_votes",
    "invariance_words",
    "one_image_words",
    "parts_words",
    "viewpoint_words",
    "CHAPTER_WORDS",
    "chapter_words",
    "inverse_graphics_words",
    "WHY_IMAGES",
    "chapter_kind",
    "vector_fits",
    "matrix_fits",
    "baseline_for",
    "SWEEP_VERSION",
    "kept_sweep",
    "precompute",
    "stored_sentences",
]
