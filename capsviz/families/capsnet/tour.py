"""The tour through a dynamic-routing CapsNet: one image traced through Conv1, PrimaryCaps, every
routing iteration, the class capsules and the decoder (`follow`), the steps' titles and the walk
that fills them with the trace's own numbers."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from capsviz.analysis import as_batch, coupling_entropy
from capsviz.analysis import tour_questions as ask
from capsviz.analysis.questions import Words
from capsviz.analysis.steps import (
    MAPS,
    MOST,
    SATURATED,
    SHOWN,
    Step,
    Tour,
    capsnet_length,
    coupling_numbers,
    coupling_words,
    gap,
    input_step,
    lab_step,
    lengths_step,
    long_share,
    plane,
    prediction_words,
    reconstruction_step,
    saturation_words,
    squash_words,
    two,
)
from capsviz.glossary import DIGIT_WORDS, ClassWords, label
from capsviz.i18n import N_, t
from capsviz.text import plain

# The walk's sentences that depend only on numbers the static site computes too, each once: the walk
# fills them, and capsviz/site/said.py exports this table for web/js/said.js.
MESSAGES = {
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
        "{conv1} slides {n} filters of 9x9 pixels over the image and keeps the positive responses (ReLU). Here the "
        "{shown} maps that respond most: local features such as edges and stroke ends."
    ),
    "conv1": N_(
        "{conv1} slides {n} filters of 9x9 pixels over the image and keeps the positive responses (ReLU). Here the "
        "{shown} maps that respond most: local features such as edges."
    ),
    "conv1_neurons": N_("These are still ordinary neurons, one number per place: *whether* a feature is there, not yet *how* it sits."),
    "primary": N_(
        "{primary}: a second convolution whose outputs are grouped into {n} capsules of 8 numbers, {k} types at each of"
        " {g}x{g} positions. Each vector is squashed (Eq. 1) so its length lies between 0 and 1. In the paper, "
        "**length** is meant to be **presence** (how sure the capsule is that its part is there) and **direction** the "
        "**pose** (8 numbers for how the part looks; the arrows show them along the two directions in which this "
        "image's vectors differ most)."
    ),
    "guess_digit_an": N_(
        "Each primary capsule multiplies its vector by a learned matrix {W} once per {capsule}: {I} x {J} in all, each "
        "{u_hat} (Eq. 2) a {D}-number guess of what {thing} j's capsule should be: 'if I am this piece of stroke,"
        " an {name} would sit here and look like this'."
    ),
    "guess_digit": N_(
        "Each primary capsule multiplies its vector by a learned matrix {W} once per {capsule}: {I} x {J} in all, each "
        "{u_hat} (Eq. 2) a {D}-number guess of what {thing} j's capsule should be: 'if I am this piece of stroke,"
        " a {name} would sit here and look like this'."
    ),
    "guess_an": N_(
        "Each primary capsule multiplies its vector by a learned matrix {W} once per {capsule}: {I} x {J} in all, each "
        "{u_hat} (Eq. 2) a {D}-number guess of what {thing} j's capsule should be: 'if I am this part, an {name} "
        "would sit here and look like this'."
    ),
    "guess": N_(
        "Each primary capsule multiplies its vector by a learned matrix {W} once per {capsule}: {I} x {J} in all, each "
        "{u_hat} (Eq. 2) a {D}-number guess of what {thing} j's capsule should be: 'if I am this part, a {name} "
        "would sit here and look like this'."
    ),
    "vote": N_(
        "A prediction's length is not a confidence: it is the primary capsule's own length {primary_length} stretched "
        "or shrunk by W_ij, which differs for every {thing}. Each prediction is a vote; how much it weighs in the sum "
        "s_j is its {c}, which routing now sets: predictions that agree with each other should win."
    ),
    "margin": N_("Training used the {margin_loss}: the right capsule longer than 0.9, every other shorter than 0.1 (Eq. 4)."),
    "overlap": N_("Several capsules can be long at once: that is how the network reads two overlapping digits (the MultiMNIST page)."),
    "decoder": N_(
        "The {reconstruction} decoder (three fully connected layers, Fig. 2) redraws the {shown} from the {D} numbers "
        "of capsule {name} alone, the others masked to 0."
    ),
    "decoder_keeps": N_("During training this keeps the capsule's direction meaningful: its {D} numbers must say how the {shown} looks."),
    "explorer_digits": N_(
        "The **DigitCaps explorer** lets you nudge each of the {D} numbers and watch stroke width, slant and shape change (Fig. 4)."
    ),
    "explorer": N_("The **DigitCaps explorer** lets you nudge each of the {D} numbers and watch the drawing change."),
    "longest": N_("The longest is type {type} at row {row}, col {col} (length {length})."),
    "place": N_("type {type} at row {row}, col {col}"),
    "iter_first": N_(
        "Procedure 1 of the paper, iteration 1: every {b} starts at 0, so every {c} is 1/{J} = {uniform}: each capsule "
        "splits its prediction equally."
    ),
    "iter_next": N_("Iteration {k}: each {b} has grown by the {agreement} of the iteration before, and c = softmax(b) (Eq. 3) follows."),
    "iter_sums": N_("Each {capsule} sums the weighted predictions, {s} (Eq. 2), and squashes it to {v} (Eq. 1): {winner}; {second}."),
    # said only under the figure that draws the planes (the static site's own images have none)
    "iter_figure": N_("The figure draws s and v in a plane of the {D} dimensions; the lengths under it are the full ones."),
    "iteration": N_("iteration {k}"),
}


PLACE = MESSAGES["place"]  # a primary capsule's place, kept as its message in a question (Words) for every reader's language


def _say(key: str, /, **values) -> str:
    """MESSAGES[key] in this run's language, filled (a function of its own: the catalog takes its messages from MESSAGES)."""
    return t(MESSAGES[key], **values)


def capsnet_steps(iterations: int, words: ClassWords = DIGIT_WORDS, grid: int | None = None) -> list[Step]:
    """`words`: the model's (capsviz.glossary.class_words): digit capsules only for digits; `grid`:
    the side of the primary capsules' grid (ModelConfig.primary_grid), which depends on the input size."""
    if not grid:
        primary = t("PrimaryCaps: vectors on a grid of positions")
    elif str(grid).startswith("8") or grid in (11, 18):  # "an 8x8 grid"
        primary = t("PrimaryCaps: vectors on an {g}x{g} grid", g=grid)
    else:
        primary = t("PrimaryCaps: vectors on a {g}x{g} grid", g=grid)
    return [
        Step("input", t("The input")),
        Step("conv1", t("Conv1: local features")),
        Step("primary", primary),
        Step("predictions", t("Predictions u_hat for every {capsule}", capsule=words.capsule)),
        *[Step(f"iteration{it + 1}", t("Routing, iteration {k} of {n}", k=it + 1, n=iterations)) for it in range(iterations)],
        Step("lengths", t("DigitCaps: lengths are the answer") if words.digits else t("Class capsules: lengths are the answer")),
        Step("reconstruction", t("The decoder redraws the {shown}", shown=words.shown)),
        Step("lab", t("Does routing matter? This model in the routing lab")),
    ]


@dataclass
class CapsNetTour:
    """One image through a dynamic-routing CapsNet.

    conv1: (MAPS, H', W') the strongest Conv1 maps, conv1_ids their channels, conv1_total how many.
    primary_len: (G, G, types) primary capsule lengths; arrow_len (G, G) the longest per position,
    arrow_dir (G, G, 2) its direction projected on the two main directions of all primary vectors.
    shown: (SHOWN,) indices of the primary capsules followed; shown_names their places.
    b, c: (T, I, J); s, v: (T, J, D); lengths: (J,) final |v_j|; winner, runner_up: class ids.
    pred2d: (J, SHOWN, 2) the shown capsules' predictions for each class in that class's plane,
    s2d, v2d: (T, J, 2) each iteration's s_j and v_j in the same planes.
    """

    image: np.ndarray
    conv1: np.ndarray
    conv1_ids: np.ndarray
    conv1_total: int
    primary_len: np.ndarray
    arrow_len: np.ndarray
    arrow_dir: np.ndarray
    shown: np.ndarray
    shown_names: list[str]
    shown_places: list[dict]  # each followed capsule's type, row and col, as MESSAGES["place"] takes them
    pred_len: np.ndarray  # (SHOWN, J) |u_hat_j|i| of the shown capsules
    b: np.ndarray
    c: np.ndarray
    s: np.ndarray
    v: np.ndarray
    lengths: np.ndarray
    winner: int
    runner_up: int
    pred2d: np.ndarray
    s2d: np.ndarray
    v2d: np.ndarray
    reconstruction: np.ndarray | None
    grid: int
    types: int
    pred_all_len: np.ndarray  # (I, J) |u_hat_j|i| of every primary capsule
    # the model's own answer, routed as it was trained (its couplings and iterations): its lengths
    # (J,), their winner and runner-up; `own` says whether that routing is the one the tour shows
    own: bool = True
    own_lengths: np.ndarray | None = None
    own_winner: int = 0
    own_runner_up: int = 0

    @property
    def iterations(self) -> int:
        return len(self.c)

    @property
    def s_len(self) -> np.ndarray:
        """(T, J) |s_j| of the full 16 numbers (the figure's planes show projections of s)."""
        return np.linalg.norm(self.s, axis=-1)

    @property
    def v_len(self) -> np.ndarray:
        """(T, J) |v_j|."""
        return np.linalg.norm(self.v, axis=-1)

    @property
    def entropy(self) -> np.ndarray:
        """(T, I) each primary capsule's coupling entropy over log J at each iteration (1 = uniform)."""
        return coupling_entropy(self.c) / np.log(self.c.shape[-1])


@torch.no_grad()
def capsnet_tour(model, image: np.ndarray, iterations: int | None = None) -> CapsNetTour:
    cfg = model.config
    T = iterations or cfg.routing_iterations
    x = as_batch(image)
    h = model.features(x)[0]  # (H', W', C) after ReLU
    strength = h.mean((0, 1))  # (C,)
    ids = strength.argsort(descending=True)[:MAPS]
    conv1 = h[:, :, ids].permute(2, 0, 1)  # (MAPS, H', W')
    u = model.primary_capsules(x)  # (1, I, 8)
    G, K = cfg.primary_grid, cfg.primary_types
    lengths_u = u[0].norm(dim=-1)  # (I,)
    per_cell = lengths_u.view(G, G, K)
    best = per_cell.argmax(-1)  # (G, G)
    vectors = u[0].view(G, G, K, -1)
    chosen = vectors.gather(2, best.view(G, G, 1, 1).expand(G, G, 1, vectors.shape[-1])).squeeze(2)  # (G, G, 8)
    _, _, Vt = torch.linalg.svd(u[0] - u[0].mean(0), full_matrices=False)
    flat = chosen.reshape(-1, chosen.shape[-1]) @ Vt[:2].T  # (G*G, 2): the two main directions of this image's pose vectors
    direction = flat / flat.norm(dim=-1, keepdim=True).clamp_min(1e-12)

    u_hat = model.digits(u)  # (1, J, I, D)
    r = model.route(u_hat, routing="dynamic", iterations=T, record=True)  # with the model's own routing options
    c = r.c[:, 0]  # (T, I, J)
    s = torch.einsum("tij,jid->tjd", c, u_hat[0])  # (T, J, D): Eq. 2 with routing's own couplings
    v = r.v_trace[:, 0]  # (T, J, D)
    final = v[-1].norm(dim=-1)  # (J,)
    order = final.argsort(descending=True)
    winner, runner = int(order[0]), int(order[1])
    pred_len = u_hat[0].norm(dim=-1).T  # (I, J)
    shown = pred_len[:, winner].argsort(descending=True)[:SHOWN]  # the loudest predictions for the winner

    J = u_hat.shape[1]
    pred2d = torch.zeros(J, SHOWN, 2)
    s2d, v2d = torch.zeros(len(c), J, 2), torch.zeros(len(c), J, 2)
    for j in range(J):
        P = plane(u_hat[0, j], v[-1, j])  # (2, D)
        pred2d[j] = u_hat[0, j, shown] @ P.T
        s2d[:, j] = s[:, j] @ P.T
        v2d[:, j] = v[:, j] @ P.T
    places = [dict(type=int(i) % K + 1, row=int(i) // K // G + 1, col=int(i) // K % G + 1) for i in shown]
    names = [_say("place", **p) for p in places]
    own = getattr(cfg, "couplings", "dynamic") == "dynamic" and T == cfg.routing_iterations
    answer = v[-1] if own else model.route(u_hat).v[0]  # (J, D): the model's forward pass as trained
    answer_len = answer.norm(dim=-1)
    own_order = answer_len.argsort(descending=True)
    own_w = int(own_order[0])
    rec = model.decode(answer[own_w], own_w)[0].numpy() if model.decoder is not None else None  # the decoder reads its own answer
    return CapsNetTour(
        image=np.asarray(image, np.float32),
        conv1=conv1.numpy(),
        conv1_ids=ids.numpy(),
        conv1_total=int(h.shape[-1]),
        primary_len=per_cell.numpy(),
        arrow_len=per_cell.max(-1).values.numpy(),
        arrow_dir=direction.view(G, G, 2).numpy(),
        shown=shown.numpy(),
        shown_names=names,
        shown_places=places,
        pred_len=pred_len[shown].numpy(),
        b=r.b[:, 0].numpy(),
        c=c.numpy(),
        s=s.numpy(),
        v=v.numpy(),
        lengths=final.numpy(),
        winner=winner,
        runner_up=runner,
        pred2d=pred2d.numpy(),
        s2d=s2d.numpy(),
        v2d=v2d.numpy(),
        reconstruction=rec,
        grid=G,
        types=K,
        pred_all_len=pred_len.numpy(),
        own=own,
        own_lengths=answer_len.numpy(),
        own_winner=own_w,
        own_runner_up=int(own_order[1]),
    )


def trained_words(couplings: str, trained_iterations: int, shown_iterations: int) -> tuple[str, bool]:
    """What a CapsNet was trained with, as every page names it (capsviz.analysis.zoo), and whether
    the `shown_iterations` of dynamic routing the tour shows are its own. `couplings`: its
    config's couplings ("dynamic", "uniform", "random")."""
    from capsviz.analysis.lab import LAB_ROUTINGS
    from capsviz.analysis.steps import lab_routing_words
    from capsviz.registry import ONE_ITERATION, ONE_ITERATION_WHY

    if couplings != "dynamic":
        return (lab_routing_words(couplings) if couplings in LAB_ROUTINGS else t("{couplings} couplings", couplings=couplings)), False
    if trained_iterations == 1:
        return _say("trained_one", routing=t(ONE_ITERATION), why=t(ONE_ITERATION_WHY)), shown_iterations == 1
    return _say("trained", n=trained_iterations), shown_iterations == trained_iterations


def not_own_words(trained: str) -> str:
    """Said wherever the tour shows dynamic routing on a model trained otherwise."""
    return t("This model was trained with {trained}; the tour shows what dynamic routing would do with its weights.", trained=trained)


def own_answer_words(trained: str, routed_name: str, routed_length: str, same: bool) -> str:
    """The lengths step of a model trained without the dynamic routing the steps before showed:
    the bars are its own answer; where dynamic routing's longest capsule stands."""
    v = dict(trained=trained, name=routed_name, length=routed_length)
    if same:
        return t(
            "This model was trained with {trained}, so these bars are its own answer, computed with those couplings as in training. "
            "The routing steps before showed what dynamic routing would do with its weights: there {name} was longest, with {length}, the same winner.",
            **v,
        )
    return t(
        "This model was trained with {trained}, so these bars are its own answer, computed with those couplings as in training. "
        "The routing steps before showed what dynamic routing would do with its weights: there {name} was longest, with {length}, another winner.",
        **v,
    )


def capsnet_walk(
    tour: CapsNetTour,
    names: list[str],
    words: ClassWords,
    model_name: str,
    truth: str,
    looks: str,
    lab_rows: list,
    trained: tuple[str, bool] | None = None,
) -> list[Step]:
    """Every step of a CapsNet's tour with dynamic routing, its figure's data and its sentences.
    `trained`: what the model was trained with and whether the tour's iterations are its own
    (trained_words); None: the iterations shown."""
    trained_with, own = trained or trained_words("dynamic", tour.iterations, tour.iterations)
    pn = [plain(n) for n in names]
    W, R, G, K = tour.winner, tour.runner_up, tour.grid, tour.types
    J, I, D = len(names), tour.c.shape[1], tour.v.shape[-1]
    out = []
    for step in capsnet_steps(tour.iterations, words, G):
        k = step.key
        if k == "input":
            step = input_step(
                step,
                tour.image,
                truth,
                looks,
                [
                    _say(
                        "input",
                        model=plain(model_name),
                        trained=trained_with,
                        capsule=words.capsule,
                    )
                    + gap()
                    + (
                        ""
                        if own
                        else not_own_words(trained_with)
                        + gap()
                        + t("Its answer at the end (the lengths step) and the drawing redrawn from it are its own, with its own couplings.")
                        + gap()
                    )
                    + _say("input_vector")
                ],
            )
        elif k == "conv1":
            step = replace(
                step,
                figure="maps",
                data={"maps": tour.conv1, "names": [t("filter {i}", i=i) for i in tour.conv1_ids]},
                caption=t("bright = the filter responds there (each map scaled to its own maximum)"),
                text=[
                    (
                        _say(
                            "conv1_digits",
                            conv1=label("conv1"),
                            n=tour.conv1_total,
                            shown=len(tour.conv1_ids),
                        )
                        if words.digits
                        else _say(
                            "conv1",
                            conv1=label("conv1"),
                            n=tour.conv1_total,
                            shown=len(tour.conv1_ids),
                        )
                    )
                    + gap()
                    + _say("conv1_neurons")
                ],
            )
        elif k == "primary":
            measured, warn = saturation_words(tour.primary_len, words.shown)
            if not warn:
                top = np.unravel_index(tour.primary_len.argmax(), tour.primary_len.shape)
                measured += gap() + _say(
                    "longest",
                    type=top[2] + 1,
                    row=top[0] + 1,
                    col=top[1] + 1,
                    length=two(tour.primary_len[top]),
                )
            step = replace(
                step,
                figure="arrows",
                data={
                    "lengths": tour.arrow_len,
                    "directions": tour.arrow_dir,
                    "all_lengths": tour.primary_len,
                    "long": long_share(tour.primary_len),
                    "grid": G,
                    "types": K,
                },
                caption=t(
                    "at each of the {g}x{g} positions, the longest of its {k} capsules: arrow length = its length |u_i| (presence), arrow direction = its pose",
                    g=G,
                    k=K,
                ),
                text=[
                    _say(
                        "primary",
                        primary=label("primary"),
                        n=tour.primary_len.size,
                        k=K,
                        g=G,
                    )
                ],
                measured=measured,
                warn=warn,
                terms=("primary_length", "pose"),
                question=ask.mostly_long(model_name, tour.image, tour.primary_len, SATURATED, MOST),
            )
        elif k == "predictions":
            primary = tour.primary_len.reshape(-1)[tour.shown]  # (SHOWN,) |u_i|: primary_len is (G, G, K) of the I capsules
            an = str(names[W])[:1].lower() in tuple("aeiou")
            v = dict(W=label("W"), capsule=words.capsule, I=I, J=J, u_hat=label("u_hat"), D=D, thing=words.thing, name=pn[W])
            if words.digits and an:
                guess = _say(
                    "guess_digit_an",
                    **v,
                )
            elif words.digits:
                guess = _say(
                    "guess_digit",
                    **v,
                )
            elif an:
                guess = _say(
                    "guess_an",
                    **v,
                )
            else:
                guess = _say(
                    "guess",
                    **v,
                )
            step = replace(
                step,
                figure="grid",
                data={  # one row per class capsule, one column per primary capsule followed: narrow enough for a phone
                    "values": tour.pred_len.T,
                    "rows": names,
                    "columns": [f"P{n + 1}" for n in range(len(tour.shown))],
                    "title": t(
                        "Length of the predictions u_hat_j|i for each {capsule} j (red: {name})", capsule=words.capsule, name=names[W]
                    ),
                    "highlight_row": W,
                    "primary": primary,  # each followed capsule's own length |u_i|, as the caption writes it
                },
                caption=t(
                    "rows: the {capsules} (red: {name}, the longest after routing); columns: the six primary capsules with the longest "
                    "predictions for {name}, {list}",
                    capsules=words.capsules,
                    name=names[W],
                    list="; ".join(
                        t("P{n} = {where} (|u_i| = {length})", n=n + 1, where=where, length=two(x))
                        for n, (where, x) in enumerate(zip(tour.shown_names, primary, strict=True))
                    ),
                ),
                text=[
                    guess
                    + gap()
                    + _say(
                        "vote",
                        primary_length=label("primary_length"),
                        thing=words.thing,
                        c=label("c"),
                    )
                ],
                measured=prediction_words(f"P1 ({tour.shown_names[0]})", tour.pred_len[0], pn, W, words.thing, float(primary[0])),
                terms=("u_hat", "W", "primary_length"),
                question=ask.loudest_prediction(
                    model_name,
                    tour.image,
                    tour.pred_len[0],
                    names,
                    Words.t("P{n} ({where})", n=1, where=Words.t(PLACE, **tour.shown_places[0])),
                    W,
                ),
            )
        elif k.startswith("iteration"):
            it = int(k.removeprefix("iteration")) - 1
            first = (
                _say(
                    "iter_first",
                    b=label("b"),
                    c=label("c"),
                    J=J,
                    uniform=two(1 / J),
                )
                if it == 0
                else _say(
                    "iter_next",
                    k=it + 1,
                    b=label("b"),
                    agreement=label("agreement"),
                )
            )
            sums = (
                _say(
                    "iter_sums",
                    capsule=words.capsule,
                    s=label("s"),
                    v=label("v"),
                    winner=squash_words(f"s_{pn[W]}", f"v_{pn[W]}", tour.s_len[it, W], tour.v_len[it, W], capsnet_length),
                    second=squash_words(f"s_{pn[R]}", f"v_{pn[R]}", tour.s_len[it, R], tour.v_len[it, R], capsnet_length),
                )
                + gap()
                + _say("iter_figure", D=D)
            )
            rows = {t("primary capsule"): tour.shown_names}
            for j in (W, R):
                rows[t("b to {name}", name=pn[j])] = tour.b[it][tour.shown, j]
                rows[t("c to {name}", name=pn[j])] = tour.c[it][tour.shown, j]
            summary = coupling_numbers(tour.c[it], tour.entropy[it], tour.pred_all_len[:, W], W)
            step = replace(
                step,
                figure="routing",
                data={
                    "t": it,
                    "s_len": tour.s_len[it, [W, R]],
                    "v_len": tour.v_len[it, [W, R]],
                    "c": tour.c[it],
                    "shown": tour.shown,
                    "winner": W,
                    "uniform": 1 / J,
                    "entropy": tour.entropy[it],
                    "weights": tour.pred_all_len[:, W],
                    **summary,
                },
                caption=t(
                    "each {capsule}'s plane: x along its final output v, so a prediction's x times |v| is its agreement with v",
                    capsule=words.capsule,
                ),
                text=([] if own else [not_own_words(trained_with)]) + [first, sums],
                measured=coupling_words(it, summary, tour.c[it][tour.shown, W], I, J, pn[W], _say("iteration", k=2) if it > 1 else ""),
                table=rows,
                terms=("b", "c"),
                question=(
                    ask.first_split(model_name, tour.image, tour.c[it], names, W, R)
                    if it == 0
                    else ask.still_near_uniform(model_name, tour.image, tour.c[it], summary["entropy_mean"], summary["mean"], 1 / J, it + 1)
                ),
            )
        elif k == "lengths":
            margin = _say(
                "margin",
                margin_loss=label("margin_loss"),
            )
            if tour.own:
                step = lengths_step(
                    step,
                    tour.lengths,
                    names,
                    W,
                    R,
                    truth,
                    words.capsule,
                    t("DigitCaps lengths |v_j| after routing") if words.digits else t("Class capsule lengths |v_j| after routing"),
                    [margin + gap() + _say("overlap")],
                )
            else:  # the model's own answer, with the couplings it was trained with: the lengths its loss saw
                OW = tour.own_winner
                step = lengths_step(
                    step,
                    tour.own_lengths,
                    names,
                    OW,
                    tour.own_runner_up,
                    truth,
                    words.capsule,
                    (
                        t("DigitCaps lengths |v_j| with its own {trained}", trained=trained_with.split(" (")[0])
                        if words.digits
                        else t("Class capsule lengths |v_j| with its own {trained}", trained=trained_with.split(" (")[0])
                    ),
                    [
                        own_answer_words(trained_with, pn[W], two(tour.lengths[W]), OW == W),
                        margin + gap() + t("These are the lengths it was trained on, so the targets below apply to them."),
                    ],
                )
                step.data["dynamic"] = tour.lengths  # dynamic routing's lengths, which the text quotes beside
            step.question = ask.longest_class(model_name, tour.image, step.data["values"], names, truth)
        elif k == "reconstruction":
            rv = dict(reconstruction=label("reconstruction"), shown=words.shown, D=D, name=pn[tour.own_winner])
            step = reconstruction_step(
                step,
                tour.image,
                tour.reconstruction,
                names[tour.own_winner],
                tour.v.shape[-1],
                "CapsNet",
                [
                    (
                        _say(
                            "decoder",
                            **rv,
                        )
                        if tour.own
                        else t(
                            "The {reconstruction} decoder (three fully connected layers, Fig. 2) redraws the {shown} from the {D} numbers of "
                            "capsule {name} alone (its own answer, with its own couplings), the others masked to 0.",
                            **rv,
                        )
                    )
                    + gap()
                    + _say(
                        "decoder_keeps",
                        **rv,
                    )
                    + gap()
                    + (
                        _say(
                            "explorer_digits",
                            D=D,
                        )
                        if words.digits
                        else _say("explorer", D=D)
                    )
                ],
            )
        elif k == "lab":
            step = lab_step(
                step, lab_rows, "dynamic", model_name, tour.iterations, J, _say("iteration", k=2) if tour.iterations > 1 else ""
            )
        out.append(step)
    return out


def walk(tour: CapsNetTour, names, words, model_name, truth, looks, lab_rows, config=None) -> list[Step]:
    """Every step as the page shows it; `config` (the model's) says what the CapsNet was trained with."""
    trained = trained_words(getattr(config, "couplings", "dynamic"), config.routing_iterations, tour.iterations) if config else None
    return capsnet_walk(tour, names, words, model_name, truth, looks, lab_rows, trained)


TOUR = Tour(CapsNetTour, capsnet_tour, capsnet_steps, walk)
