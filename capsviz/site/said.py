"""The dynamic-routing CapsNet tour's sentences that depend only on numbers the browser computes (the
primary capsules' lengths, the predictions' lengths, the couplings, the class capsules' s and v): the
very messages of capsviz.analysis.steps and capsviz.families.capsnet.tour, exported with their
constants so web/js/said.js writes them for any image, a drawing included, as the app's tour writes
them for a test image (tests/test_site_js.py compares the two on real traces in every language).

A sentence that needs what only the build has (the routing lab's stored rows, the label of a
drawing, the app's paragraphs that name the model's training) is not here: the page's note says so.
"""

from __future__ import annotations

from capsviz.analysis import rules, steps
from capsviz.glossary import CLASS_WORDS, DIGIT_WORDS, label
from capsviz.i18n import N_, language, t, translations
from capsviz.registry import ONE_ITERATION, ONE_ITERATION_WHY

TOUR_MESSAGES = {
    # the walk's paragraphs that name only the model and the image's winner
    "input": N_(
        "This is the image the tour follows through **{model}**, a CapsNet (Sabour et al. 2017, Fig. 1) trained with "
        "{trained}. It will pass three layers: an ordinary convolution, a layer of primary capsules and one {capsule} "
        "per class, with routing between the two capsule layers."
    ),
    "input_vector": N_(
        "A capsule outputs a vector, not a number: its length is meant to say how likely its thing is present, its direction how it looks."
    ),
    "trained": N_("dynamic routing, {n} iterations"),
    "trained_one": N_("{routing} ({why})"),
    "conv1_digits": N_(
        "{conv1} slides {n} filters of 9x9 pixels over the image and keeps the positive responses (ReLU). "
        "Here the {shown} maps that respond most: local features such as edges and stroke ends."
    ),
    "conv1": N_(
        "{conv1} slides {n} filters of 9x9 pixels over the image and keeps the positive responses (ReLU). "
        "Here the {shown} maps that respond most: local features such as edges."
    ),
    "conv1_neurons": N_("These are still ordinary neurons, one number per place: *whether* a feature is there, not yet *how* it sits."),
    "primary": N_(
        "{primary}: a second convolution whose outputs are grouped into {n} capsules of 8 numbers, {k} types at each of "
        "{g}x{g} positions. Each vector is squashed (Eq. 1) so its length lies between 0 and 1. In the paper, **length** is "
        "meant to be **presence** (how sure the capsule is that its part is there) and **direction** the **pose** (8 numbers "
        "for how the part looks; the arrows show them along the two directions in which this image's vectors differ most)."
    ),
    "guess_digit_an": N_(
        "Each primary capsule multiplies its vector by a learned matrix {W} once per {capsule}: {I} x {J} predictions {u_hat} "
        "(Eq. 2), each a {D}-number guess of what {thing} j's capsule should be: 'if I am this piece of stroke, an {name} would "
        "sit here and look like this'."
    ),
    "guess_digit": N_(
        "Each primary capsule multiplies its vector by a learned matrix {W} once per {capsule}: {I} x {J} predictions {u_hat} "
        "(Eq. 2), each a {D}-number guess of what {thing} j's capsule should be: 'if I am this piece of stroke, a {name} would "
        "sit here and look like this'."
    ),
    "guess_an": N_(
        "Each primary capsule multiplies its vector by a learned matrix {W} once per {capsule}: {I} x {J} predictions {u_hat} "
        "(Eq. 2), each a {D}-number guess of what {thing} j's capsule should be: 'if I am this part, an {name} would sit here "
        "and look like this'."
    ),
    "guess": N_(
        "Each primary capsule multiplies its vector by a learned matrix {W} once per {capsule}: {I} x {J} predictions {u_hat} "
        "(Eq. 2), each a {D}-number guess of what {thing} j's capsule should be: 'if I am this part, a {name} would sit here "
        "and look like this'."
    ),
    "vote": N_(
        "A prediction's length is not a confidence: it is the primary capsule's own length {primary_length} stretched or "
        "shrunk by W_ij, which differs for every {thing}. Each prediction is a vote; how much it weighs in the sum s_j is "
        "its coupling {c}, which routing now sets: predictions that agree with each other should win."
    ),
    "answer": N_(
        "The answer is the longest {capsule}: **{winner}** with length {length} (label: {truth}); the runner-up, {second}, has {second_len}."
    ),
    "margin": N_("Training used the {margin_loss}: the right capsule longer than 0.9, every other shorter than 0.1 (Eq. 4)."),
    "overlap": N_("Several capsules can be long at once: that is how the network reads two overlapping digits (the MultiMNIST page)."),
    "decoder": N_(
        "The {reconstruction} decoder (three fully connected layers, Fig. 2) redraws the {shown} from the {D} numbers of "
        "capsule {name} alone, the others masked to 0."
    ),
    "decoder_keeps": N_("During training this keeps the capsule's direction meaningful: its {D} numbers must say how the {shown} looks."),
    "explorer_digits": N_(
        "The **DigitCaps explorer** lets you nudge each of the {D} numbers and watch stroke width, slant and shape change (Fig. 4)."
    ),
    "explorer": N_("The **DigitCaps explorer** lets you nudge each of the {D} numbers and watch the drawing change."),
    # steps.saturation_words, and the capsnet walk's longest primary capsule
    "sat_most": N_(
        "Measured here: {share} of the {n} primary capsules are longer than {limit} (lengths {lo} to {hi}). Most of them are "
        "then nearly equally long, so in this trained model a primary capsule's length hardly tells where the {shown} is; "
        "what differs between them is their direction, and so the predictions they make (next step)."
    ),
    "sat": N_("Measured here: {share} of the {n} primary capsules are longer than {limit} (lengths {lo} to {hi})."),
    "longest": N_("The longest is type {type} at row {row}, col {col} (length {length})."),
    # the followed primary capsules' places (capsnet_tour)
    "place": N_("type {type} at row {row}, col {col}"),
    # steps.ordinal
    "first": N_("first"),
    "second": N_("second"),
    "third": N_("third"),
    "nth": N_("{n}th"),
    # steps.prediction_words with the capsule's own length
    "pred_1": N_(
        "Measured here: the first column, {name}, whose own length |u_i| is {own}, predicts {w} with length {w_len}, its longest "
        "prediction; the next longest is for {next} ({next_len}); its shortest is for {low} ({low_len}): one capsule predicts "
        "every {thing}, some louder than others, from one vector and a different W for each."
    ),
    "pred_2": N_(
        "Measured here: the first column, {name}, whose own length |u_i| is {own}, predicts {w} with length {w_len}, only its "
        "{ordinal} longest: its longest prediction is for {top} ({top_len}); its shortest is for {low} ({low_len}): one capsule "
        "predicts every {thing}, some louder than others, from one vector and a different W for each."
    ),
    "pred_n": N_(
        "Measured here: the first column, {name}, whose own length |u_i| is {own}, predicts {w} with length {w_len}, only its "
        "{ordinal} longest: its longest prediction is for {top} ({top_len}), then {next} ({next_len}); its shortest is for "
        "{low} ({low_len}): one capsule predicts every {thing}, some louder than others, from one vector and a different W for each."
    ),
    "pred_top": N_("Here its longest vote is for {w}, the {thing} routing picks; a vote's weight still comes from its coupling."),
    "pred_other": N_(
        "Its vote for {top} is longer than its vote for {w}, yet {w} is the {thing} routing picks: length alone does not decide, "
        "the couplings and the other capsules' votes do."
    ),
    # the walk's iteration paragraphs
    "iter_first": N_(
        "Procedure 1 of the paper, iteration 1: every {b} starts at 0, so every {c} is 1/{J} = {uniform}: each capsule splits its prediction equally."
    ),
    "iter_next": N_("Iteration {k}: each {b} has grown by the {agreement} of the iteration before, and c = softmax(b) (Eq. 3) follows."),
    "iter_sums": N_(
        "Each {capsule} sums the weighted predictions, {s} (Eq. 2), and squashes it to {v} (Eq. 1): {winner}; {second}. "
        "The figure draws s and v in a plane of the {D} dimensions; the lengths under it are the full ones."
    ),
    "iteration": N_("iteration {k}"),
    # steps.squash_words
    "squash": N_("|{s}| = {s_len} squashes to |{v}| = {v_len}"),
    "squash_rounded": N_(
        "|{s}| = {s_len} squashes to |{v}| = {v_len} (both rounded to two decimals: the squash acts on the unrounded length)"
    ),
    # steps.coupling_words, loudest_words, share_words, near_uniform_words
    "coupled_first": N_(
        "Measured here: the {few} loudest predictions for {name} are coupled to it by {loud}; averaged over all {capsules} primary "
        "capsules the coupling to {name} is {mean} (uniform {u}), {weighted} weighted by prediction length."
    ),
    "loud_all": N_(
        "Measured here: the {few} loudest predictions for {name} are coupled to it by {loud}, but they are {few} of {capsules}: "
        "averaged over all {capsules} primary capsules the coupling to {name} is {mean} (uniform {u}). All of the {few} loudest "
        "reach {factor} times uniform or more (up to {top}), yet the mean over all {capsules}, which the near-uniform rule "
        "reads, stays below {factor} times uniform."
    ),
    "loud_mean": N_(
        "Measured here: the {few} loudest predictions for {name} are coupled to it by {loud}; averaged over all {capsules} primary "
        "capsules the coupling to {name} is {mean} (uniform {u}): the mean has moved to {factor} times uniform or more, not only "
        "the loudest few."
    ),
    "loud_none": N_(
        "Measured here: the {few} loudest predictions for {name} are coupled to it by {loud}; averaged over all {capsules} primary "
        "capsules the coupling to {name} is {mean} (uniform {u}): neither the loudest few nor the mean has reached {factor} times uniform."
    ),
    "weighted": N_("Weighted by prediction length the mean is {weighted}."),
    "who": N_("all the primary capsules' couplings together"),
    "share_each": N_("{lo} each"),
    "share_range": N_("{lo} to {hi}"),
    "rule_stated": N_("By the routing lab's near-uniform rule (stated in full at {where}), {who} are {verdict}."),
    "rule_full": N_("By the routing lab's rule, {who} are {verdict}. {rule}"),
    # rule_words.uniform_words with a share
    "uniform_near": N_(
        "near uniform: their evenness is {evenness} (100% = spread evenly over all {n} classes), more than {limit}, and the "
        "predicted class gets {share} on average, less than {factor} times the uniform {uniform}"
    ),
    "uniform_share": N_(
        "away from uniform: their evenness is {evenness} (100% = spread evenly over all {n} classes), more than {limit}, but "
        "the predicted class gets {share} on average, at least {factor} times the uniform {uniform}"
    ),
    "uniform_low": N_(
        "away from uniform: their evenness is {evenness} (100% = spread evenly over all {n} classes), not more than {limit} "
        "(the predicted class gets {share} on average, less than {factor} times the uniform {uniform})"
    ),
    "uniform_away": N_(
        "away from uniform: their evenness is {evenness} (100% = spread evenly over all {n} classes), not more than {limit} "
        "(the predicted class gets {share} on average, at least {factor} times the uniform {uniform})"
    ),
    # rule_words.long_votes_words
    "long_mainly": N_(
        "Weighted by prediction length, {name} gets {weighted}, {times} times uniform: routing moves mainly the capsules "
        "with long predictions."
    ),
    "long_more": N_(
        "Weighted by prediction length, {name} gets {weighted}, {times} times uniform, and the plain mean, {plain}, is "
        "{plain_times} times: routing moves the capsules with long predictions more than the rest."
    ),
    "long_no_more": N_(
        "Weighted by prediction length, {name} gets {weighted}, {times} times uniform, and the plain mean, {plain}, is "
        "{plain_times} times: routing moves the capsules with long predictions no more than the rest."
    ),
    # steps.lengths_step and margin_words
    "measured": N_("Measured here: {said}"),
    "margin_label_met": N_(
        "on this image the label's capsule, {name}, has {length}, above {present}; every other is shorter than {absent} "
        "(the longest of them, {top}, {top_len}): this image meets both targets."
    ),
    "margin_longest_met": N_(
        "on this image the longest capsule, {name}, has {length}, above {present}; every other is shorter than {absent} "
        "(the longest of them, {top}, {top_len}): this image meets both targets."
    ),
    "margin_label_short": N_(
        "on this image the label's capsule, {name}, has {length}, not above {present}; every other is shorter than {absent} "
        "(the longest of them, {top}, {top_len}): this image does not meet the targets, so the loss would still push these lengths."
    ),
    "margin_longest_short": N_(
        "on this image the longest capsule, {name}, has {length}, not above {present}; every other is shorter than {absent} "
        "(the longest of them, {top}, {top_len}): this image does not meet the targets, so the loss would still push these lengths."
    ),
}

# Messages with a singular and a plural (steps.loudest_words, margin_words): each one's form for every count up to COUNTS
TOUR_COUNTED = {
    "loud_some": (
        "Measured here: the {few} loudest predictions for {name} are coupled to it by {loud}, but they are {few} of {capsules}: "
        "averaged over all {capsules} primary capsules the coupling to {name} is {mean} (uniform {u}). {n} of the {few} loudest "
        "reaches {factor} times uniform or more (up to {top}), yet the mean over all {capsules}, which the near-uniform rule "
        "reads, stays below {factor} times uniform.",
        "Measured here: the {few} loudest predictions for {name} are coupled to it by {loud}, but they are {few} of {capsules}: "
        "averaged over all {capsules} primary capsules the coupling to {name} is {mean} (uniform {u}). {n} of the {few} loudest "
        "reach {factor} times uniform or more (up to {top}), yet the mean over all {capsules}, which the near-uniform rule "
        "reads, stays below {factor} times uniform.",
    ),
    "margin_label_loud_met": (
        "on this image the label's capsule, {name}, has {length}, above {present}; {n} of the other {others} is not shorter than "
        "{absent} (the longest, {top}, {top_len}): this image does not meet the targets, so the loss would still push these lengths.",
        "on this image the label's capsule, {name}, has {length}, above {present}; {n} of the other {others} are not shorter than "
        "{absent} (the longest, {top}, {top_len}): this image does not meet the targets, so the loss would still push these lengths.",
    ),
    "margin_longest_loud_met": (
        "on this image the longest capsule, {name}, has {length}, above {present}; {n} of the other {others} is not shorter than "
        "{absent} (the longest, {top}, {top_len}): this image does not meet the targets, so the loss would still push these lengths.",
        "on this image the longest capsule, {name}, has {length}, above {present}; {n} of the other {others} are not shorter than "
        "{absent} (the longest, {top}, {top_len}): this image does not meet the targets, so the loss would still push these lengths.",
    ),
    "margin_label_loud_short": (
        "on this image the label's capsule, {name}, has {length}, not above {present}; {n} of the other {others} is not shorter "
        "than {absent} (the longest, {top}, {top_len}): this image does not meet the targets, so the loss would still push these lengths.",
        "on this image the label's capsule, {name}, has {length}, not above {present}; {n} of the other {others} are not shorter "
        "than {absent} (the longest, {top}, {top_len}): this image does not meet the targets, so the loss would still push these lengths.",
    ),
    "margin_longest_loud_short": (
        "on this image the longest capsule, {name}, has {length}, not above {present}; {n} of the other {others} is not shorter "
        "than {absent} (the longest, {top}, {top_len}): this image does not meet the targets, so the loss would still push these lengths.",
        "on this image the longest capsule, {name}, has {length}, not above {present}; {n} of the other {others} are not shorter "
        "than {absent} (the longest, {top}, {top_len}): this image does not meet the targets, so the loss would still push these lengths.",
    ),
}
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
        },
    }
