"""The tours' sentences that depend only on numbers the browser computes (for a dynamic-routing
CapsNet the primary capsules' lengths, the predictions' lengths, the couplings, the class capsules'
s and v; for Efficient-CapsNet the same from its one pass of self-attention; for matrix capsules each
EM iteration's assignments R and activations a): the very message tables of capsviz.analysis.steps,
rule_words and each family's tour (capsviz/families/*/tour.py), exported with their constants so
web/js/said.js writes them for any image, a drawing included, as the app's tour writes them for a
test image (tests/test_site_js.py compares the two on real traces in every language).

A sentence that needs what only the build has (the routing lab's stored rows, the label of a
drawing, the app's paragraphs that name the model's training) is not here: the page's note says so.
"""

from __future__ import annotations

from capsviz.analysis import rule_words, rules, steps
from capsviz.families.capsnet import tour as capsnet_tour
from capsviz.families.efficient_capsnet import tour as efficient_tour
from capsviz.families.efficient_capsnet.model import MSE_WEIGHT
from capsviz.families.matrix_capsnet import tour as matrix_tour
from capsviz.glossary import CLASS_WORDS, DIGIT_WORDS, label
from capsviz.i18n import language, t, translations
from capsviz.registry import ONE_ITERATION, ONE_ITERATION_WHY

# The app's own tables of these messages, not copies: the walks and the steps fill the very same entries
TABLES = (steps.MESSAGES, rule_words.MESSAGES, capsnet_tour.MESSAGES, efficient_tour.MESSAGES, matrix_tour.MESSAGES)
TOUR_MESSAGES = {k: m for table in TABLES for k, m in table.items()}
# Messages with a singular and a plural (steps.loudest_words, margin_words): each one's form for every count up to COUNTS
TOUR_COUNTED = steps.COUNTED
# The counts whose forms are exported: the six followed capsules, and the other class capsules of a
# model of up to 11 classes; past it the page uses the form of COUNTS, which is right in the site's
# languages (English, Chinese and Japanese write every count from 2 up alike)
COUNTS = 10


def _class_words() -> dict:
    """The model's words for its classes (glossary.ClassWords' English, which a model entry names)
    in this run's language."""
    return {w: t(w) for words in (DIGIT_WORDS, CLASS_WORDS) for w in (words.capsule_en, words.thing_en, words.shown_en)}


def tour_said() -> dict:
    """What web/js/said.js reads, in this run's language: the messages, the counted ones' forms, the
    glossary's symbols the paragraphs name, the near-uniform rule in full, and the constants the
    sentences compare with (as numbers and as the app writes them)."""
    catalog = translations(language())
    return {
        "messages": {k: t(m) for k, m in TOUR_MESSAGES.items()},
        "counted": {k: {str(n): catalog.ngettext(one, many, n) for n in range(1, COUNTS + 1)} for k, (one, many) in TOUR_COUNTED.items()},
        "labels": {
            k: label(k)
            for k in ("b", "c", "s", "v", "agreement", "conv1", "primary", "W", "u_hat", "primary_length", "margin_loss", "reconstruction")
        },
        "one_iteration": [t(ONE_ITERATION), t(ONE_ITERATION_WHY)],  # what a CapsNet trained with 1 iteration was trained with
        "maps": steps.MAPS,
        "class_words": _class_words(),
        "rule": rules.rule_words("near uniform"),
        "gap": steps.gap(),  # between two sentences: a space, none in Chinese and Japanese
        "limits": {
            "saturated": steps.SATURATED,
            "most": steps.MOST,
            "present": steps.MARGIN_PRESENT,
            "absent": steps.MARGIN_ABSENT,
            "entropy": rules.NEAR_UNIFORM_ENTROPY,
            "share": rules.NEAR_UNIFORM_SHARE,
            "shown": steps.SHOWN,
        },
        # the constants as Python's str() writes them into a sentence ("0.9", "1.5", "95%")
        "written": {
            "saturated": str(steps.SATURATED),
            "present": str(steps.MARGIN_PRESENT),
            "absent": str(steps.MARGIN_ABSENT),
            "share": str(rules.NEAR_UNIFORM_SHARE),
            "entropy": f"{rules.NEAR_UNIFORM_ENTROPY:.0%}",
            "mse_weight": str(MSE_WEIGHT),  # Efficient-CapsNet's decoder weight, which its tour quotes
        },
        "em_layer": matrix_tour.CLASS_LAYER_IN,  # the layer whose capsules the EM tour follows into the class capsules
    }
