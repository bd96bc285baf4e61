"""The static site's vocabulary and sentences, exported into its manifest (site.json) so the front
end writes none of them again: its views, the routings it runs (from capsviz.registry.ROUTINGS),
the link parameters it reads, and every message it says about a link, a failure or offline use.

Messages are English whole sentences with named {placeholders}, marked with N_ and translated by
`t` when the site is built, so a catalog translates them in one place; the page fills the
placeholders (web/js/words.js). The few said before the manifest is read live in words.js.
"""

from __future__ import annotations

import re
from dataclasses import asdict

from capsviz.analysis import rules, why
from capsviz.analysis.playground import PRESET_NAMES
from capsviz.i18n import N_, language, t, translations
from capsviz.registry import ROUTINGS
from capsviz.site import said
from capsviz.site.links import SHARED

# The site's views in the order of its menu: key (the link's view=), its name on the menu, the
# name a sentence uses ("it shows the Explorer instead"), and whether it shows the input panel
# Each view: its key, name, name in a sentence, whether it shows the input panel, whether it shows the
# model the header's picker opens (the playground computes toys; the EM view its matrix-capsule model)
VIEWS = (
    ("explore", N_("Explorer"), N_("the Explorer"), True, True),
    ("routing", N_("Routing"), N_("the Routing view"), True, True),
    ("tour", N_("Guided tour"), N_("the guided tour"), True, True),
    ("why", N_("Why capsules"), N_("the Why capsules view"), True, True),  # only in a site with a model the chapter can show
    ("playground", N_("Playground"), N_("the Playground"), False, False),
    ("em", N_("EM routing"), N_("the EM routing view"), True, False),  # only in a site built with a matrix-capsule model
)
# The vector-capsule routings the site runs, each with its view's title (their words are the registry's)
ROUTING_TITLES = {
    "dynamic": N_("Dynamic routing, iteration by iteration"),
    "self-attention": N_("Self-attention routing, in one pass"),
}
EM_TITLE = N_("EM routing, iteration by iteration: matrix capsules")
# The registry's words for the routings the site shows (capsviz.registry.ROUTINGS keeps them as plain
# strings): marked here so the catalog has them, and `vocabulary` translates them with t
REGISTRY_WORDS = (
    N_("self-attention routing (one pass)"),
    N_("the couplings are set by iterations of agreement"),
    N_("the couplings are set by one pass of self-attention"),
    N_("each class capsule fits a Gaussian to the votes it explains, and each vote goes to the capsules that explain it best"),
)
# Every link parameter the site reads: the app's shared ones and its own
PARAMS = ("view", "embed", *SHARED, "routing", "pts", "lang", "tour", "ask")
# The "Why capsules" view's words that are the app's chapter's (pages/why.py, capsviz/viz/why.py and
# capsviz/analysis/why.py write the same messages): one catalog entry each, so the page's sentence
# reads as the app's (tests/test_site_js.py fills them with the app's numbers and compares)
CHAPTER = {
    "why_models": N_("Capsule network: {caps}. Baseline CNN: {cnn}."),
    "why_invariance": N_("1. Invariance against equivariance"),
    "why_invariance_note": N_(
        "Move or turn the digit. An invariant network gives the same output whatever the pose; an equivariant one changes "
        "its output with the pose, in a way that can be read back, while its answer stays. Compare the CNN's pooled "
        "features and class scores with the winning capsule's vector and its reconstruction."
    ),
    "why_change": N_("Change"),
    "why_shift": N_("Shift"),
    "why_turn": N_("Turn"),
    "why_pixels": N_("Pixels to the right"),
    "why_degrees": N_("Degrees, anticlockwise"),
    "why_rows": N_("**This digit, moved** (top) **and redrawn by the winning capsule** (bottom):"),
    "why_px": N_("{v:+.0f} px"),
    "why_deg": N_("{v:+.0f}°"),
    "why_one_image": N_(
        "On this digit, the {name} capsule's length goes from {l0:.2f} to {l1:.2f} and it turns through {angle:.1f} degrees "
        "({moves} of its {dims} dimensions move by {step} or more); the CNN's score for {cnn_name} goes from {s0:.2f} to "
        "{s1:.2f} and its pooled features move by {features:.1f}% of their size."
    ),
    "why_this_digit": N_("This digit"),
    "why_length_or_score": N_("length or score"),
    "why_caps_length": N_("Capsule's length"),
    "why_cnn_score": N_("CNN's score"),
    "why_degrees_or_percent": N_("degrees, or %"),
    "why_dims_title": N_("The capsule's 16 numbers"),
    "why_dimension": N_("dimension"),
    "why_value": N_("value"),
    "why_unchanged": N_("unchanged"),
    "why_changed": N_("changed"),
    "why_parts": N_("2. Parts in the wrong places"),
    "why_parts_note": N_(
        "The scrambled face of every capsule explainer: all the parts present, in the wrong places. The story goes that a "
        "network that only asks whether the parts are there still sees the face, and one whose parts must agree on one pose "
        "does not. Here the halves or quadrants of each digit trade places; each network's answer is under each picture."
    ),
    "why_original": N_("original"),
    "why_parts_said": N_(
        "With its parts moved, the CNN keeps its answer for the unchanged digit ({cnn_name}) in {cnn} of {n} cases; "
        "the capsule network keeps its own ({caps_name}) in {caps} of {n}."
    ),
    "why_cnn_says": N_("CNN: {name} ({score:.2f})"),
    "why_caps_say": N_("Capsules: {name} ({length:.2f})"),
}

MESSAGES = {
    # a link asking for what the site does not have (web/js/address.js)
    "link_odd": N_("The link asks for {name}={raw}, which this site does not have; it shows {shown} instead."),
    "link_not_whole": N_("The link asks for {name}={raw}, not a whole number from {lo} to {hi}; it shows {shown} instead."),
    "link_unknown": N_("The link's {name}={raw} is not a setting this site has; it was left out."),
    "link_one_pass": N_(
        "The link asks for {name}={raw}, but {model} routes in one pass of self-attention (add routing=dynamic to route by agreement); it shows the one pass."
    ),
    "link_dims": N_("The link's dims asks for values outside -0.25 to 0.25 or not numbers; it shows {shown}."),
    "link_pts_count": N_("The link's pts={raw} is not {count} numbers; it shows the preset's predictions instead."),
    "link_pts_range": N_("The link's pts has numbers outside -{limit} to {limit}; it shows them at the nearest end."),
    "shown_full_page": N_("the full page"),
    "shown_own_routing": N_("each model's own routing"),
    "shown_three_uppers": N_("3 upper capsules"),
    "shown_agreement": N_("routing by agreement"),
    "shown_model": N_("the model {model}"),
    "shown_preset": N_("the preset {preset}"),
    "shown_longest": N_("the longest capsule"),
    "shown_model_tour": N_("the open model's tour"),
    "link_em_iterations": N_(
        "The link asks for iterations={raw}, but the EM view shows {model} routing with its own {n} iterations, so it shows those."
    ),
    # a model that cannot be opened (web/site.js, web/js/runtime.js)
    "model_failed": N_("Could not open the model {model}: {cause}, so this still shows {before}; {todo}."),
    "start_failed": N_("The site could not open {what}: {cause}; {todo}."),
    "what_manifest": N_("its list of models (site.json)"),
    "what_runtime": N_("its runtime"),
    "what_model": N_("the model {model}"),
    "what_file": N_("the file {file}"),
    "cause_offline": N_("it could not be downloaded (is the device offline?)"),
    "todo_offline": N_("reconnect and try again"),
    "cause_missing": N_("its files are missing from this site"),
    "cause_damaged": N_("its files on this site are damaged"),
    "todo_rebuild": N_("whoever hosts the site can rebuild it with capsviz site"),
    "cause_browser": N_("something in this browser went wrong"),
    "todo_browser": N_("reload the page, or try a current Chrome, Firefox or Safari"),
    "loading_progress": N_("Loading the model {model}: {done} of {total} MB ..."),
    # the input panel (web/js/views/input.js)
    "input_test_image": N_("Test image {index} of {count} (true class: {name})."),
    "input_test_image_waits": N_("Test image {index} of {count} (its true class is shown once you answer)."),
    "input_drawing": N_("Your drawing: draw one digit, white on black; the model sees it when you lift the pen."),
    "input_test_pair": N_("Test image {index} of {count}: two digits, {first} and {second}."),
    # the explorer (web/js/views/explore.js)
    "explore_longest": N_("The longest: {name} ({length})"),
    "explore_two_longest": N_("The two longest: {first} ({first_length}) and {second} ({second_length})"),
    # a MultiMNIST model in the explorer (web/js/views/explore.js)
    "pair_winners": N_(
        "The two longest capsules are the answer: {first} (length {first_length}) and {second} (length {second_length}). The image holds {truth}."
    ),
    "pair_truth": N_("{first} and {second}"),
    "pair_drawn": N_("Your drawing: the two longest capsules are {first} (length {first_length}) and {second} (length {second_length})."),
    "pair_overlay": N_(
        "Each reconstruction is decoded from one capsule alone, the other capsules masked: red from {first}, green from {second}, yellow where both draw. The paper (Sabour et al., Fig. 5) segments the two digits so."
    ),
    # the routing view (web/js/views/routing.js)
    "routing_iteration": N_(
        "Iteration {t} of {T}: each primary capsule splits its vote over the {J} class capsules; uniform is 1/{J} = {uniform} each."
    ),
    "routing_one_pass": N_(
        "One pass of self-attention: each primary capsule splits its vote over the {J} class capsules; uniform is 1/{J} = {uniform} each."
    ),
    "routing_evenness": N_(
        "Evenness: 100% when every capsule spreads its vote evenly over all {J} classes, 0% when all of it goes to one."
    ),
    "routing_maps_grid": N_(
        "Each map: a class's coupling at each place of the image, averaged over the capsule types, from the smallest on this iteration (dark) to the largest (yellow), the input showing through in white."
    ),
    "routing_maps_matrix": N_(
        "The map: a row per primary capsule (each sees the whole image), a column per class; coupling from 0 (dark) to the largest (yellow)."
    ),
    "routing_map_caption": N_("{name}: mean c {mean}, |v| {length}"),
    "routing_maps_scale": N_("(dark to yellow). |v|: each class capsule's length {after}."),
    "colour_scale": N_("Colour scale:"),
    "after_iteration": N_("after iteration {t}"),
    "after_one_pass": N_("after the one pass"),
    # the EM view (web/js/views/em.js): Fig. 2 of Hinton et al. (2018)
    "em_note": N_(
        "{model} routes its class capsules by EM ({iterations} iterations): {about}. Each panel is one class capsule, the most active after the last iteration first. Each bar sums the assignments R of the votes at that distance from the capsule's mean pose (0 = the vote agrees exactly), with distances from 0 to {limit}, which holds the nearest {share} of the votes. As the iterations go on, a capsule that explains the image gathers its votes close to its mean."
    ),
    "em_panel": N_("class {name}: activation {activation}, total R {total}"),
    "em_said": N_(
        "After iteration {t} of {T}, class {name} is the most active, at {activation} (the other classes {lo} to {hi}), and "
        "holds {share} of all assignment (uniform: {uniform})."
    ),
    "em_winner": N_("class {name} (the answer): activation {activation}, total R {total}"),
    # offline use (web/js/offline.js)
    "offline_kept": N_("Available offline (site version {version}): this page and the models you opened, {models}."),
    "offline_insecure": N_("Not kept for offline use: this browser keeps a site only when it is served over https or from localhost."),
    "offline_refused": N_("Not kept for offline use: this browser refused to store the site."),
    "offline_keep_all": N_("Keep every view for offline use ({size} MB more)"),
    "offline_keeping": N_("Keeping every view for offline use: {done} of {total} MB ..."),
    "offline_keep_failed": N_("Not every view could be kept for offline use: {cause}; {todo}. What was kept stays kept."),
    "offline_updated": N_("A new version of this site has been stored for offline use; reload the page to use it."),
}

# The page's own words: index.html's headings, labels, buttons and notes (each element marked
# data-w="id", or data-w-label="id" for its aria-label), and the captions, axis titles and table
# rows the views write (web/js/views/*). The page says them with say(id), as MESSAGES.
PAGE = {
    "page_title": N_("capsviz: capsule networks in your browser"),
    "page_tagline": N_("capsule networks, computed in your browser"),
    "ui_views": N_("Views"),
    "ui_model": N_("Model"),
    "ui_footer": N_(
        "Every number on this page, for the test images and for digits you draw, is computed on your device from the model's ONNX graphs, exported from capsviz's PyTorch code. Training, your own models and image files, the routing lab and robustness are in the full capsviz app."
    ),
    # the input panel
    "input_panel": N_("Input image"),
    "input_title": N_("The input"),
    "input_canvas": N_("The input image; draw on it with a mouse, a finger or a pen"),
    "input_prev": N_("Previous test image"),
    "input_next": N_("Next test image"),
    "input_image_label": N_("Test image"),
    "input_draw": N_("Draw your own"),
    "input_clear": N_("Clear"),
    # the explorer
    "explore_title": N_("Class-capsule lengths"),
    "explore_note": N_(
        "The length of each class capsule is meant as the network's confidence that its class is in the image; the longest one is the answer."
    ),
    "explore_note_two": N_(
        "The length of each class capsule is meant as the network's confidence that its class is in the image; this model reads two digits at once, so the two longest are the answer."
    ),
    "pair_title": N_("Two digits in one image: each capsule redraws its own"),
    "fig_input": N_("input"),
    "pair_both": N_("both: red and green"),
    "pair_from_red": N_("from {name} (red)"),
    "pair_from_green": N_("from {name} (green)"),
    "explore_reconstruction": N_("Reconstruction"),
    "explore_decode": N_("Decode capsule"),
    "explore_reset": N_("Reset all to 0"),
    "explore_dims_title": N_("The 16 dimensions"),
    "explore_dims_note": N_(
        "Each slider adds a value in [-0.25, 0.25] to one dimension of the chosen capsule; the decoder redraws the picture at once (Fig. 4 of Sabour et al.)."
    ),
    "explore_grid_title": N_("Every dimension from -0.25 to +0.25"),
    "explore_grid_note": N_(
        "Row d (d0 at the top, d15 at the bottom) changes dimension d alone, from -0.25 (left) to +0.25 (right) in steps of 0.05; the other 15 stay at the capsule's own values."
    ),
    "option_length": N_("{name} (length {length})"),
    "word_length": N_("length"),
    "axis_class": N_("class capsule"),
    "axis_length": N_("length |v_j|"),
    "axis_iteration": N_("iteration"),
    # the routing view
    "routing_iterations_label": N_("Routing iterations"),
    "show_iteration": N_("Show iteration"),
    "routing_label": N_("Routing"),
    "one_pass": N_("one pass"),
    "matrix_caption": N_("Rows: the {count} primary capsules; columns: the classes. Colour: coupling c_ij,"),
    "dark_to_yellow": N_("(dark to yellow)"),
    "lengths_after_one": N_("|v_j| after 1 iteration"),
    "lengths_after_pass": N_("|v_j| after the one pass"),
    "lengths_each": N_("|v_j| after each iteration"),
    "evenness_title": N_("Evenness of the couplings, %"),
    "axis_one_pass": N_("the one pass"),
    "axis_evenness": N_("evenness % (100 = even)"),
    # the guided tour
    "tour_back": N_("Back"),
    "tour_next": N_("Next"),
    "tour_step": N_("Step {step} of {count}"),
    "tour_map": N_("map {number}"),
    "tour_feature_maps": N_("feature maps"),
    "tour_conv1_maps": N_("{count} of Conv1's, each {size} x {size}"),
    "tour_last_maps": N_("{count} of the last convolution's, each {size} x {size}"),
    "tour_shown": N_("shown"),
    "tour_shown_16": N_("the 16 with the largest mean"),
    "tour_colour": N_("colour"),
    "tour_colour_map": N_("0 (dark) to each map's own maximum (yellow)"),
    "tour_size": N_("size"),
    "tour_size_grey": N_("{size} x {size} pixels, grey"),
    "tour_size_colour": N_("{size} x {size} pixels, colour"),
    "tour_values": N_("values"),
    "tour_values_range": N_("0 (black) to 1 (white)"),
    "tour_longest_place": N_("The longest primary capsule at each place:"),
    "tour_primary": N_("primary capsules"),
    "tour_primary_grid": N_("{count} = {grid} x {grid} places x {types} types"),
    "tour_primary_whole": N_("{count}, each seeing the whole image"),
    "tour_longest_at_place": N_("longest at each place"),
    "tour_from_to": N_("{lo} to {hi}"),
    "tour_primary_title": N_("|u_i| of each primary capsule"),
    "tour_primary_axis": N_("primary capsule i"),
    "tour_primary_length": N_("length |u_i|"),
    "tour_longest_u": N_("longest |u_i|"),
    "tour_mean_u": N_("mean |u_i|"),
    "tour_predictions_title": N_("Mean |u_hat_j|i| for each class capsule"),
    "tour_predictions_axis": N_("class capsule j"),
    "tour_predictions_length": N_("mean length |u_hat_j|i|"),
    "tour_predictions": N_("predictions"),
    "tour_predictions_count": N_("{I} x {J}, each of {D} numbers"),
    "tour_after_iteration": N_("|v_j| after this iteration"),
    "tour_after_pass": N_("|v_j| after this pass"),
    "tour_mean_c": N_("mean c to {name}"),
    "tour_uniform": N_("uniform"),
    "tour_evenness": N_("evenness, % (100 = spread evenly)"),
    "tour_lengths_title": N_("|v_j|: the answer is the longest"),
    "tour_answer": N_("answer"),
    "tour_runner_up": N_("runner-up"),
    "tour_decoded": N_("decoded from {name}"),
    "tour_difference": N_("mean pixel difference"),
    "tour_lab": N_(
        "The routing lab, which runs this model with uniform and random couplings and compares them, is in the full capsviz app (Routing lab page)."
    ),
    "tour_no_figure": N_("This step's figure is shown in the full capsviz app's guided tour."),
    "tour_follow": N_("Follow"),
    # the "Why capsules" view's own words (the app's are CHAPTER)
    "why_moved_title": N_("How far each answer moved"),
    "why_caps_angle": N_("Capsule's angle turned (degrees)"),
    "why_cnn_features": N_("CNN's pooled features' change (%)"),
    "why_unfit": N_(
        "The chapter's views need a CapsNet or an Efficient-CapsNet with a decoder on 28 x 28 single images, and a baseline CNN trained on the same images; {model} is not one: pick another model."
    ),
    "why_sweeps": N_(
        "These views follow one digit. The measurements over the test set behind the chapter's argument are on the app's Why capsules page."
    ),
    "shown_why_change": N_("the shift"),
    # predict, then see (web/js/asking.js): the app's words where it asks the same (pages/asking.py)
    "ask_predict": N_("**Predict first.** {question}"),
    "ask_your_answer": N_("Your answer"),
    "ask_reason": N_("Why? (optional, one line)"),
    "ask_commit": N_("Commit my answer"),
    "ask_skip": N_("Skip: just show me"),
    "ask_verdict": N_("{verdict} {why}"),
    "ask_kept": N_("Your answers stay in this browser only; nothing is sent anywhere."),
    "ask_not_kept": N_("This browser does not let the page keep your answers, so they last until the page is closed."),
    "shown_questions": N_("each question before its answer"),
    # the verdicts the app says after a question (capsviz.analysis.questions.Question.verdict)
    "ask_skipped": N_("You skipped this one. The answer: “{answer}”."),
    "ask_right": N_("Right: “{answer}”."),
    "ask_wrong": N_("Not this time: you said “{mine}”; the answer is “{answer}”."),
    # the playground's question, the app's (capsviz.analysis.questions.routed_split), filled by the page with its own toy's
    # numbers (web/js/toyask.js); tests/test_site_js.py compares the page's question with the app's in each language
    "pg_ask_attention": N_("Self-attention routing runs once. Where will lower capsule {k} send its prediction?"),
    "pg_ask_upper": N_("Most of it to upper capsule {j}"),
    "pg_ask_uniform": N_("Still split about evenly (near uniform)"),
    "pg_why_uniform": N_(
        "Its largest coupling is {share}, against the uniform {uniform}: its predictions agree with no output more than with the others."
    ),
    "pg_why_upper": N_(
        "Its coupling to upper capsule {j} is {share}, against the uniform {uniform}: its prediction agrees with that output most."
    ),
    "tour_words_none": N_(
        "The app's tour follows single digits, so the site has no explanations for {model}'s pairs: the figures and numbers here are this pair's."
    ),
    "tour_words_drawing": N_(
        "The app's explanations of each step are written when the site is built, for its first {n} test images, so for your drawing this step shows only its own figure and numbers: for the full explanation, pick test image 0 to {last}, or draw your digit in the capsviz app's guided tour."
    ),
    "tour_words_first": N_(
        "The app's explanations of each step are written when the site is built, for its first {n} test images, so for this image this step shows only its own figure and numbers: for the full explanation, pick test image 0 to {last}, or open this image in the capsviz app's guided tour."
    ),
    # beside the app's sentences the page writes on any image's numbers (web/js/said.js): exactly what only the build writes
    "tour_said_drawing_figure": N_(
        "Every sentence here is the app's tour's, written on your drawing's numbers; only the app's own figure of this step and its question before it are written when the site is built, for its first {n} test images: to see them, pick test image 0 to {last}, or draw your digit in the capsviz app's guided tour."
    ),
    "tour_said_first_figure": N_(
        "Every sentence here is the app's tour's, written on this image's numbers; only the app's own figure of this step and its question before it are written when the site is built, for its first {n} test images: to see them, pick test image 0 to {last}, or open this image in the capsviz app's guided tour."
    ),
    "tour_said_drawing_table": N_(
        "Every sentence here is the app's tour's, written on your drawing's numbers; only the app's table of the followed capsules' b and c, its figure of their predictions in each capsule's plane and its question before the step are written when the site is built, for its first {n} test images: to see them, pick test image 0 to {last}, or draw your digit in the capsviz app's guided tour."
    ),
    "tour_said_first_table": N_(
        "Every sentence here is the app's tour's, written on this image's numbers; only the app's table of the followed capsules' b and c, its figure of their predictions in each capsule's plane and its question before the step are written when the site is built, for its first {n} test images: to see them, pick test image 0 to {last}, or open this image in the capsviz app's guided tour."
    ),
    "tour_said_first_question": N_(
        "Every sentence here is the app's tour's, written on this image's numbers; only its question before the step is written when the site is built, for its first {n} test images: to answer it, pick test image 0 to {last}, or open this image in the capsviz app's guided tour."
    ),
    "tour_said_drawing_answer": N_(
        "The other sentences here are the app's tour's, written on your drawing's numbers; its sentence naming the answer quotes the image's label, which a drawing has not: to read it, pick test image 0 to {last} (the site's first {n} test images), or draw your digit in the capsviz app's guided tour."
    ),
    # a step of which the page writes some of the app's sentences: {missing} names the rest (a tour_missing_* message)
    "tour_said_drawing_part": N_(
        "The sentences here are the app's tour's, written on your drawing's numbers; {missing}, the app's own figure of this step and its question before it are written when the site is built, for its first {n} test images: to see them, pick test image 0 to {last}, or draw your digit in the capsviz app's guided tour."
    ),
    "tour_said_first_part": N_(
        "The sentences here are the app's tour's, written on this image's numbers; {missing}, the app's own figure of this step and its question before it are written when the site is built, for its first {n} test images: to see them, pick test image 0 to {last}, or open this image in the capsviz app's guided tour."
    ),
    "tour_missing_efficient_primary": N_(
        "its paragraphs on the depthwise convolution and the squash, which quote the last convolution's sizes and each capsule's length before the squash"
    ),
    "tour_missing_efficient_routing": N_(
        "its paragraph on self-attention and its sentences on the learned prior b, which the site's graphs do not return, its table"
    ),
    "tour_missing_em_iteration": N_(
        "its paragraph on the M-step and the E-step, which quotes this iteration's inverse temperature lambda, its table"
    ),
    # the EM tour's last step: the page writes the answer's sentence (js/said.js), not the paragraph after it
    "tour_said_drawing_em_answer": N_(
        "The sentence here is the app's tour's answer, written on your drawing's numbers, without the label, which a drawing has not; its paragraph on the spread loss, which quotes the last EM iteration's inverse temperature lambda, and its question before the step are written when the site is built, for its first {n} test images: to read them, pick test image 0 to {last}, or draw your digit in the capsviz app's guided tour."
    ),
    "tour_said_first_em_answer": N_(
        "The sentence here is the app's tour's answer, written on this image's numbers; its paragraph on the spread loss, which quotes the last EM iteration's inverse temperature lambda, and its question before the step are written when the site is built, for its first {n} test images: to read them, pick test image 0 to {last}, or open this image in the capsviz app's guided tour."
    ),
    "tour_length_since": N_("Since iteration 1, the length of the {name} capsule {trend}: from {first} to {now} at iteration {t}."),
    "tour_words_failed": N_("The explanations of this step could not be opened: {cause}; {todo}."),
    "tour_em_no_figure": N_("This step's figure comes with the app's explanations, for the site's first {n} test images (0 to {last})."),
    "tour_em_drawing": N_("{model} reads {size} x {size} images: draw your digit with a single-digit model open to follow it here."),
    "tour_type": N_("type {k}"),
    "tour_em_maps": N_("Each map: a primary capsule type's activation at each place, from 0 (dark) to 1 (yellow):"),
    "tour_legend_dynamic": N_(
        "Arrows: the six predictions u_hat, their opacity the coupling c; dashed: s, the couplings' weighted sum; thick black: v = squash(s); dotted circle: length 1, squash's bound."
    ),
    "tour_legend_em": N_("Dots: the votes, their opacity the assignment R; cross: the mean pose mu; ellipses: one and two spreads sigma."),
    "tour_legend_votes": N_("Dots: the votes of the six most active lower capsules, numbered as in the table."),
    "tour_axes_dynamic": N_(
        "Across: the direction of the final output v; up: the predictions' main other direction. The numbers at the axes' ends are the plot's half-width, the same in both planes."
    ),
    "tour_axes_em": N_(
        "The centre is the class capsule's final mean pose; across: towards the mean of these six votes; up: the votes' main other direction. The numbers at the axes' ends are the plot's half-width, the same in both planes."
    ),
    "tour_plane_em": N_("activation a = {a}, spread sigma = ({x}, {y})"),
    "em_activations_at": N_("Activation a_j after EM iteration {t} of {T}"),
    "lab_error_title": N_("Test error by routing"),
    "lab_error_axis": N_("test error %"),
    "lab_pairs_title": N_("Pair accuracy by routing"),
    "lab_pairs_axis": N_("pair accuracy %"),
    "axis_routing": N_("routing"),
    # the playground
    "playground_title": N_("Routing playground"),
    "playground_note": N_(
        "Six lower capsules each predict a 2-D vector for every upper capsule. Routing decides how much of each vote goes where, with the same routing graph the models use."
    ),
    "pg_preset": N_("Preset"),
    "pg_uppers": N_("Upper capsules"),
    "pg_iterations": N_("Iterations"),
    "pg_lower_pick": N_("Lower capsule"),
    "pg_lower": N_("lower"),
    "pg_lower_n": N_("lower {number}"),
    "pg_c_to_upper": N_("c to upper {number}"),
    "pg_drawn": N_("|v_j| (drawn x3)"),
    "pg_input": N_("upper {number} {axis}"),
    # the EM view
    "of_count": N_("{t} of {T}"),
    "em_your_drawing": N_("your drawing"),
    "em_test_image": N_("test image {index} (true class: {name})"),
    "em_routes": N_("{model} routes {said}"),
    "em_tour": N_("Guided tour of this model"),
    "em_activations_title": N_("Activation a_j after each EM iteration"),
    "em_activation_axis": N_("activation a_j"),
    "em_hist_title": N_("Iteration {t} of {T}: vote distances to each class capsule's mean pose, weighted by R"),
    "em_distance_axis": N_("distance to the mean pose"),
    "em_sum_axis": N_("sum of R"),
    # what a screen reader says of the explorer's and the routing view's figures
    "aria_lengths": N_("Bar chart. {title}. Length of each class capsule: {values}."),
    "aria_pair_input": N_("The input: two digits overlaid"),
    "aria_pair_one": N_("The reconstruction from capsule {name} alone"),
    "aria_pair_both": N_("Both reconstructions: {first} in red, {second} in green, yellow where both draw"),
    "aria_reconstruction": N_("The decoder's reconstruction from capsule {name}, with {changes}."),
    "aria_reconstruction_plain": N_("The decoder's reconstruction from capsule {name}, no dimension changed."),
    "aria_grid": N_(
        "Perturbation grid for capsule {name}: {count} rows, one per dimension (d0 at the top), each changed alone from -0.25 (left) to +0.25 (right) in steps of 0.05; the middle column is the capsule's own reconstruction."
    ),
    "aria_dimension": N_("dimension {d}"),
    "aria_map": N_("Couplings to {name} over the image on iteration {t}: mean {mean}, from {lo} to {hi}; |v| {after} {length}."),
    "aria_matrix": N_(
        "Couplings of the {I} primary capsules (rows, 1 at the top) to the {J} classes (columns), from 0 to {top}. Mean coupling to each class: {values}."
    ),
    "aria_bars": N_("Bar chart, {title}: {values}."),
    "aria_lines": N_(
        "Line chart of each class capsule's length after each of {T} iterations (the dotted line marks iteration {t}, shown above). After iteration {t}: {values}. After iteration {T}: {last}."
    ),
    "aria_evenness": N_("Bar chart of the couplings' evenness (their entropy as a share of an even split's): {values} percent."),
    "aria_iteration": N_("iteration {n}"),
    # ... and of the tour's, the EM view's and the playground's
    "aria_feature_map": N_("Feature map {number}: mean response {mean}, strongest {top}"),
    "aria_input_image": N_("The input image, {size} x {size} pixels"),
    "aria_longest_places": N_("The longest primary capsule at each of the {grid} x {grid} places: lengths from {lo} to {hi}"),
    "aria_primary_lengths": N_("Bar chart of the length of each of the {count} primary capsules: {values}."),
    "aria_predictions": N_("Bar chart of the mean length of the predictions for each class capsule: {values}."),
    "aria_class_lengths": N_("Bar chart of the class capsules' lengths: {values}."),
    "aria_reconstruction_from": N_("The reconstruction from capsule {name}"),
    "aria_em_input": N_("The image EM routes: {said}"),
    "aria_em_lines": N_(
        "Line chart of each class capsule's activation after each of {T} EM iterations (the dotted line marks iteration {t}, shown below). After iteration {t}: {values}."
    ),
    "aria_em_histogram": N_("Histogram, {title}: the votes' distances from 0 to {limit}; the most R, {most}, at distance {at}."),
    "aria_pg_input": N_("lower {lower}'s prediction for upper {upper}, {axis}"),
    "aria_arrows": N_(
        "The longest primary capsule at each of the {grid} x {grid} places as an arrow: its length the capsule's length, from {lo} to {hi}, its direction the pose."
    ),
    "aria_em_type": N_("Activations of primary capsule type {number} over the image, up to {top}"),
    "aria_planes": N_("{title}. {values}."),
    "aria_why_inputs": N_("The digit under each change: {values}"),
    "aria_why_recs": N_("The {name} capsule's reconstruction under each change"),
    "aria_why_digit": N_("Line chart. The capsule's length: {lengths}. The CNN's score: {scores}."),
    "aria_why_moved": N_("Line chart. The capsule's angle turned, degrees: {angles}. The CNN's pooled features' change, %: {features}."),
    "aria_why_dims": N_("Bar chart of the capsule's 16 numbers. Unchanged: {unchanged}. Changed: {changed}."),
    "aria_pg_svg": N_(
        "Predictions of the {I} lower capsules (lines numbered 1 to {I}, one colour per upper capsule) and the {J} upper capsules v (black, drawn 3 times as long): lengths {lengths}; the couplings are in the table beside."
    ),
}

# Messages with a singular and a plural (tn): the manifest's "counted" holds each one's form for every
# count of routing iterations the site runs, {n} and its other placeholders left for the page (web/js/words.js sayCounted)
COUNTED = {
    "pg_ask_after": (
        "After {n} iteration of routing by agreement, where will lower capsule {k} send its prediction?",
        "After {n} iterations of routing by agreement, where will lower capsule {k} send its prediction?",
    ),
}


def counted() -> dict:
    """COUNTED in this run's language: {id: {"1": form, ..., "10": form}}, one form for each count of
    routing iterations the site's graphs record (capsviz.site.export.ITERATIONS)."""
    from capsviz.site.export import ITERATIONS

    return {
        key: {str(n): translations(language()).ngettext(one, many, n) for n in range(1, ITERATIONS + 1)}
        for key, (one, many) in COUNTED.items()
    }


_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?::[^{}]*)?\}")


def placeholders(message: str) -> set[str]:
    """The {names} a message needs filled ({score:.2f} needs score)."""
    return set(_PLACEHOLDER.findall(message))


def step_kind(key: str) -> tuple[str, int | None]:
    """A tour step's kind, which picks its figure on the site, and its iteration: ("iteration", 3)
    for "iteration3", (key, None) for any other."""
    found = re.fullmatch(r"iteration([0-9]+)", key)
    return ("iteration", int(found.group(1))) if found else (key, None)


def rule_table() -> dict:
    """capsviz.analysis.rules.TABLE as the manifest carries it (web/js/rules.js reads it): each
    rule's inputs, cases in order with their tests, message ids and words in this run's language,
    and its placeholders' formats and constants."""
    return {
        name: {
            "inputs": list(rule.inputs),
            "cases": [{"id": c.id, "words": t(c.words) if c.words else "", "when": [asdict(test) for test in c.when]} for c in rule.cases],
            "formats": dict(rule.formats),
            "constants": dict(rule.constants),
        }
        for name, rule in rules.TABLE.items()
    }


def vocabulary(em: bool = True, chapter: bool = True) -> dict:
    """The manifest's words, in this run's language: views (the EM view with `em`, a matrix-capsule
    model in the site; the "Why capsules" view with `chapter`, a model it can show), routings, link
    parameters, the chapter's changes and parts moved, messages."""
    em_routing = ROUTINGS["em"]  # apart from t(...): the catalog's extractor would take its key for a message
    return {
        "views": [
            {"key": k, "name": t(name), "called": t(called), "input": shows_input, "model": picked}
            for k, name, called, shows_input, picked in VIEWS
            if (em or k != "em") and (chapter or k != "why")
        ],
        "preset_names": {k: t(v) for k, v in PRESET_NAMES.items()},  # the playground's presets as the app names them
        "why_words": {
            "kinds": {k: t(v) for k, v in why.KIND_NAMES.items()},
            "scheme_names": {k: t(v) for k, v in why.SCHEME_NAMES.items()},
        },
        "em": {"words": t(em_routing.words), "about": t(em_routing.about), "title": t(EM_TITLE)},
        "routings": {
            name: {
                "words": t(ROUTINGS[name].words),
                "about": t(ROUTINGS[name].about),
                "iterative": ROUTINGS[name].iterative,
                "title": t(title),
            }
            for name, title in ROUTING_TITLES.items()
        },
        "params": list(dict.fromkeys(PARAMS)),
        "rules": rule_table(),
        "messages": {k: t(m) for k, m in {**MESSAGES, **PAGE, **CHAPTER}.items()},
        "counted": counted(),
        "tour_said": said.tour_said(),
    }
