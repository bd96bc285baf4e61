"""Robustness: affine transforms (Sabour et al. 5.2) and adversarial attacks (Hinton et al. 6),
a capsule model beside a baseline CNN."""

import numpy as np
import streamlit as st
import torch

from capsviz.analysis import stored
from capsviz.analysis.robustness import (
    AttackCurve,
    affine_sweep,
    attack,
    attack_sweep,
    attack_test_images,
    describe_comparison,
    other_class,
    stand_in,
    warp,
)
from capsviz.config import user_dataset
from capsviz.data.user import short_name
from capsviz.i18n import N_, gap, t
from capsviz.registry import FAMILIES, either, shows
from capsviz.text import plain
from capsviz.viz import capsule_bars, sweep_lines, to_image
from pages.active import answer, checkpoints, load_model, page_model, test_set
from pages.common import checkpoint_dir, require_router
from pages.drawn import chart, picture, show
from pages.inputs import count_slider, long_job, pick_image
from pages.linking import keep_choice, keep_keyed, keep_within, link_choice, link_keyed
from pages.state import STATE
from pages.terms import term_help, uses

require_router()
uses(
    "affine", "fgsm", "bim", "epsilon", "white_box", "gradient_masking", "spread_loss", "entropy"
)  # the glossary entries its text names (pages.terms)
# The affine sliders' ranges and defaults (as drawn below), for a shared link's values: (key, lo, hi, default, name)
AFFINE_LINKS = [
    (STATE.rotate, N_("rotate (degrees)")),
    (STATE.scale, N_("scale")),
    (STATE.shear, N_("shear")),
    (STATE.right, N_("move right (px)")),
    (STATE.down, N_("move down (px)")),
]

st.title(t("Robustness: affine transforms and adversarial attacks"))
st.markdown(
    t(
        "Capsules encode pose explicitly, so the papers claim they generalise better to transformed digits "
        "(Sabour et al. 5.2: 79% on affNIST against 66% for a CNN of similar size) and lose less accuracy "
        "under white-box attacks (Hinton et al. section 6: FGSM and BIM). Test both claims here, the active "
        "capsule model beside a baseline CNN trained on the same data."
    )
)

model, meta, path = page_model(
    lambda m: shows(m.config, "robustness") and (m.config.in_size in (28, 40) or user_dataset(m.image_dataset) is not None),
    t("a capsule model on 28x28 or 40x40 digits, or on your own images, to compare with a CNN"),
    t(
        "**{{name}}** is {{family}}; this page compares a capsule model ({models} on 28x28 or 40x40 digits, or on your own "
        "images) with a baseline CNN. Choose a capsule model.",
        models=either("robustness"),
    ),
    lambda sidebar, suitable: stand_in(sidebar, suitable, checkpoints()),
)
dataset = meta.image_dataset
size = meta.config.in_size
names = meta.class_names
own = user_dataset(dataset) is not None
shown_as = short_name(dataset)


def same_digits(fits) -> list:
    """The model files whose family `fits` (a test of its registry entry) that read the same digits at the same size."""
    return [
        p
        for p, m in checkpoints()
        if m.config.family in FAMILIES and fits(FAMILIES[m.config.family]) and m.config.in_size == size and m.image_dataset == dataset
    ]


cnns = same_digits(lambda family: family.baseline)
models = {path.stem: model}
files = {path.stem: path}
cnn_stem = None
if cnns:
    link_choice(STATE.cnn, [p.name for p in cnns], cnns[0].name, t("baseline CNN"), label=plain)
    cnn_name = st.selectbox(
        t("Baseline CNN"),
        [p.name for p in cnns],
        format_func=plain,
        key=STATE.cnn.key,
        bind="query-params",
        help=t("CNN checkpoints trained on {dataset} at {size}x{size}", dataset=plain(shown_as), size=size),
    )
    cnn_path = checkpoint_dir() / cnn_name
    cnn, _ = load_model(cnn_path)
    models[cnn_path.stem] = cnn
    files[cnn_path.stem] = cnn_path
    cnn_stem = cnn_path.stem
elif own:
    st.info(
        t(
            "No baseline CNN trained on these images ({dataset}, {size}x{size}) is in the model folder, so only the capsule model "
            "is shown and there is nothing to compare it with. Train one on the **Train** page (model cnn-small, the same "
            "images), or: `python -m capsviz train --model cnn-small --dataset {kind}:PATH --resize {size}`.",
            dataset=plain(shown_as),
            size=size,
            kind=plain(user_dataset(dataset)[0], "code"),
        )
    )
else:
    st.info(
        t(
            "No baseline CNN for {dataset} at {size}x{size} yet, so only the capsule model is shown. Train one: `python -m "
            "capsviz train --model cnn-small --dataset {code} --out checkpoints/cnn-small-{code}.safetensors`.",
            dataset=plain(dataset),
            size=size,
            code=plain(dataset, "code"),
        )
    )
key = STATE.model_key.get() + "|" + "|".join(models)


def stored_sweeps(kind: str, settings: dict, models: dict) -> dict[str, str]:
    """Each model's name for this sweep in the store of results (capsviz.analysis.stored)."""
    return {name: stored.sweep_key(files[name], kind, settings) for name in models}


def stored_results(keys: dict[str, str], convert=lambda v: v):
    """Every model's stored result for this sweep, or None when one of them has none."""
    found = {name: stored.read(k) for name, k in keys.items()}
    return None if any(v is None for v in found.values()) else {name: convert(v) for name, v in found.items()}


@st.cache_data(max_entries=64, show_spinner=False)
def attacked(model_key: str, _model, dataset: str, count: int, _x, _y, eps: float, method: str, targeted: bool, _target):
    """The first `count` test images of `dataset` (`_x`, `_y`) attacked, their predictions and
    (CapsNet) reconstructions, cached per (model, images, epsilon, attack); the targets are seeded."""
    adv = attack(_model, _x, _y, eps, method, _target)
    with torch.no_grad():
        out = _model(adv)  # one pass: scores, and a CapsNet's reconstruction from its longest capsule
    recs = None if out.reconstruction is None else out.reconstruction.numpy()
    adv = adv[:, 0] if adv.shape[1] == 1 else adv  # (N, H, W) or (N, C, H, W): capsviz.analysis's layout
    return adv.numpy(), out.scores.argmax(1).numpy(), recs


# a tab's English name is its key in the address (?tab=Adversarial+attacks); a link naming it in any language opens it
link_keyed(STATE.tab, STATE.tab.choices, STATE.tab.default, t("tab"), words=t, shown=t)
TABS = [t(name) for name in STATE.tab.choices]
tab_affine, tab_adv = st.tabs(TABS, key=STATE.tab.key, on_change="rerun")
keep_keyed(STATE.tab, STATE.tab.choices[TABS.index(STATE.tab.get())], STATE.tab.default)

with tab_affine:
    picked = pick_image(dataset, names, size if own else 28, model)
    if picked is not None:
        image, label = picked
        if size == 40 and not own:  # a 28x28 digit centred on the 40x40 canvas these models read
            image = np.pad(image, 6)

        @st.fragment
        def transform_view():
            for slot, what in AFFINE_LINKS:
                keep_within(slot, *slot.bounds, slot.default, t(what))
            c = st.columns(5)
            rot = c[0].slider(t("rotate (degrees)"), -90, 90, 0, 5, key=STATE.rotate.key, bind="query-params", help=term_help("affine"))
            scale = c[1].slider(t("scale"), 0.5, 1.5, 1.0, 0.05, key=STATE.scale.key, bind="query-params")
            shear = c[2].slider(t("shear"), -0.6, 0.6, 0.0, 0.05, key=STATE.shear.key, bind="query-params")
            dx = c[3].slider(t("move right (px)"), -8, 8, 0, 1, key=STATE.right.key, bind="query-params")
            dy = c[4].slider(t("move down (px)"), -8, 8, 0, 1, key=STATE.down.key, bind="query-params")
            warped = warp(image, rot, scale, shear, dx, dy)
            cols = st.columns([1, 2, 2])
            show(cols[0], picture(to_image, warped, 5, width=150), t("transformed (label {label})", label=plain(label)), 150)
            for col, (name, m) in zip(cols[1:], models.items(), strict=False):
                p = answer(f"{key}:{name}", m, warped)
                y_title = t(FAMILIES[m.config.family].score)
                col.plotly_chart(
                    chart(
                        capsule_bars, p.scores, names, p.predicted, f"{name}: {names[p.predicted]} ({p.scores[p.predicted]:.2f})", y_title
                    ),
                    key=f"aff_bars_{name}",
                )

        transform_view()

    st.subheader(t("Accuracy versus transform strength"))
    st.caption(
        t(
            "Each test digit gets a random rotation, shear and scale drawn from affNIST's ranges (+-20 degrees, +-0.2 shear, "
            "0.8-1.2 scale) multiplied by the strength: 0 is the plain test set, 1 is affNIST's distortion, 2 doubles it."
        )
        + (
            gap() + t("At 40x40 the digit is also moved anywhere on the canvas (the affNIST-like test set).")
            if size == 40 and not own
            else ""
        )
    )
    data = test_set(dataset, size, meta.config.in_channels, quiet=True)
    if data is not None:
        n = count_slider(t("Test images"), [100, 200, 500, 1000, 2000], stored.AFFINE_IMAGES, len(data), STATE.affine_images)
        strengths = stored.AFFINE_STRENGTHS
        affine_keys = stored_sweeps("affine", stored.affine_settings(dataset, size, n, strengths), models)

        def run_affine(progress):
            sweep = affine_sweep(models, data.images[:n], data.labels[:n], size, strengths, on_progress=progress)
            for name, acc in sweep.items():
                stored.write(affine_keys[name], {"accuracy": acc})
            return sweep

        sweep = long_job(
            f"{key}:affine:{n}",
            t("Run the affine sweep"),
            run_affine,
            stored=lambda: stored_results(affine_keys, lambda v: v["accuracy"]),
        )
        if sweep is not None:
            st.plotly_chart(
                chart(
                    sweep_lines,
                    strengths,
                    sweep,
                    t("Accuracy on {n} transformed test images", n=n),
                    t("transform strength"),
                    t("accuracy %"),
                ),
                key="aff_sweep",
            )
            said = {plain(k): v for k, v in sweep.items()}
            for line in describe_comparison(said, strengths, plain(path.stem), t("strength"), n):
                st.markdown(line, help=term_help("beyond_chance"))  # plain: its names are made plain above
            st.caption(
                t(
                    "The paper's 79% against 66% (Sabour et al. 5.2) comes from models trained on digits placed anywhere on a "
                    "40x40 canvas and tested on the real affNIST. A 28x28 model here saw only centred digits in training, so both "
                    "models meet larger changes than they learned; train `capsnet-affine` and `cnn-small` on affine MNIST for the "
                    "paper's setup."
                )
            )

with tab_adv:
    st.caption(
        t(
            "White-box attacks on the cross-entropy of each model's class scores (capsule lengths or activations read as "
            "logits: the margin and spread losses are flat for confidently classified images, which would mask the gradient). FGSM takes one step of size epsilon along the sign of the input "
            "gradient; BIM takes 10 smaller steps, each kept within epsilon of the original. Untargeted attacks push away "
            "from the label (accuracy should fall); targeted ones pull towards a random other class (success should rise). "
            "The paper: the capsule model never fell below the accuracy of guessing at random untargeted, while the CNN did at epsilon 0.2."
        )
    )
    data = test_set(dataset, size, meta.config.in_channels, quiet=True)
    if data is None:
        st.info(t("The attacks need the model's test images, which are not available here (see above)."))
    if data is not None:
        c = st.columns(3)
        with c[0]:
            link_choice(STATE.attack, STATE.attack.choices, STATE.attack.default, t("attack"), label=str.upper)
        with c[1]:
            link_choice(STATE.targeted, STATE.targeted.choices, STATE.targeted.default, t("targeted"))
        method = c[0].radio(
            t("Attack"),
            ["fgsm", "bim"],
            format_func=str.upper,
            horizontal=True,
            key=STATE.attack.key,
            bind="query-params",
            help=term_help("fgsm", "bim"),
        )
        targeted = c[1].toggle(t("Targeted"), key=STATE.targeted.key, bind="query-params", help=term_help("targeted"))
        n = count_slider(t("Test images"), [50, 100, 200, 500, 1000], stored.ATTACK_IMAGES, len(data), STATE.attack_images, c[2])
        epsilons = stored.ATTACK_EPSILONS
        x, y = attack_test_images(data, n, size)
        # The claim is made for some families (their entry's `attacks`): beside another capsule model, one of them is attacked too
        attacked_models = dict(models)
        claimed = FAMILIES[meta.config.family].attacks
        claimant = None if claimed else next(iter(same_digits(lambda family: family.attacks)), None)
        if claimant is not None:
            attacked_models[claimant.stem], _ = load_model(claimant)
            files[claimant.stem] = claimant
        attack_keys = stored_sweeps("attack", stored.attack_settings(dataset, method, targeted, n, epsilons), attacked_models)

        def run_all(progress):
            out = {}
            for k, (name, m) in enumerate(attacked_models.items()):
                out[name] = attack_sweep(
                    m,
                    x,
                    y,
                    epsilons,
                    method=method,
                    targeted=targeted,
                    on_progress=lambda d, t, k=k: progress(k * t + d, t * len(attacked_models)),
                )
                stored.write(attack_keys[name], out[name].as_dict())
            return out

        curves = long_job(
            f"{key}|{'|'.join(attacked_models)}:adv:{method}:{targeted}:{n}",
            t("Run the attack sweep"),
            run_all,
            stored=lambda: stored_results(attack_keys, AttackCurve.from_dict),
        )
        if curves is not None:
            series = {name: (cv.success if targeted else cv.accuracy) for name, cv in curves.items()}
            if targeted:
                title, y_title = t("{attack} targeted success rate on {n} test digits", attack=method.upper(), n=n), t("success %")
            else:
                title, y_title = t("{attack} accuracy on {n} test digits", attack=method.upper(), n=n), t("accuracy %")
            st.plotly_chart(
                chart(sweep_lines, epsilons, series, title, "epsilon", y_title, None if targeted else 100.0 / len(names)),
                key="adv_curve",
            )
            st.markdown(
                t(
                    "**Fraction of zero input gradients** (near 1 would mean gradient masking, not robustness): {fractions}",
                    fractions=t(", ").join(f"{plain(name)} {cv.zero_gradients:.1%}" for name, cv in curves.items()),
                )
            )
            said = {plain(k): v for k, v in series.items()}
            for capsule in [name for name in said if name != plain(cnn_stem)]:
                for line in describe_comparison(
                    said, epsilons, capsule, "epsilon", n, higher_is_robust=not targeted, baseline=plain(cnn_stem)
                ):
                    st.markdown(line, help=term_help("beyond_chance"))  # plain: its names are made plain above
            st.caption(
                t(
                    "Why this can differ from the papers: the claim is Hinton et al.'s (section 6), for matrix capsules with EM "
                    "routing on smallNORB (guessing at random gets 20% right there; with {J} classes here, {chance}%); Sabour et "
                    "al. make none for attacks. The models here are trained on {dataset}, smaller and for fewer epochs than the "
                    "papers', and these attacks follow the cross-entropy of the class scores (the paper does not say which loss it "
                    "attacked).",
                    J=len(names),
                    chance=f"{100 / len(names):.0f}",
                    dataset=plain(shown_as),
                )
                + gap()
                + (
                    ""
                    if claimed or claimant is not None
                    else t(
                        "No model of a family whose paper makes this claim ({families}) is in the model folder for these images, so "
                        "that claim is not tested here.",
                        families=t(", ").join(t(f.short) for f in FAMILIES.values() if f.attacks),
                    )
                )
            )
        st.subheader(t("Attacked images"))
        keep_choice(STATE.epsilon, epsilons[1:], 0.1, "epsilon")
        eps = st.select_slider("epsilon", epsilons[1:], value=0.1, key=STATE.epsilon.key, bind="query-params", help=term_help("epsilon"))
        count = min(6, n)
        target = other_class(y[:count], len(names)) if targeted else None
        for name, m in attacked_models.items():
            adv, pred, recs = attacked(f"{key}:{name}", m, dataset, count, x[:count], y[:count], eps, method, targeted, target)
            st.markdown(
                t(
                    "**{model}** (targets: {targets})",
                    model=plain(name),
                    targets=t(", ").join(plain(str(names[k])) for k in target.tolist()),
                )
                if targeted
                else f"**{plain(name)}**"
            )
            cols = st.columns(count)
            for i, col in enumerate(cols):
                show(col, picture(to_image, adv[i], 3), f"{plain(names[int(y[i])])} → {plain(names[int(pred[i])])}")
                if recs is not None:
                    show(col, picture(to_image, recs[i], 3), t("reconstruction"))
