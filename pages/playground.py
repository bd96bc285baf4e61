"""Routing playgrounds: a few 2-D capsules whose predictions (or votes) a student sets, routed by
capsviz's own dynamic_routing and em_routing, every iteration drawn and every number named."""

import numpy as np
import pandas as pd
import streamlit as st

from capsviz.analysis.links import Linked, chosen, unread
from capsviz.analysis.playground import (
    DYNAMIC_PRESETS,
    EM_PRESETS,
    I_TOY,
    LIMIT,
    PRESET_NAMES,
    TABLE,
    attention_toy,
    attention_view,
    decode_points,
    dynamic_toy,
    dynamic_view,
    em_toy,
    em_view,
    encode_points,
)
from capsviz.analysis.questions import em_assignment, routed_split
from capsviz.i18n import N_, keeping, t
from capsviz.viz import png_bytes
from capsviz.viz.animation import dynamic_frames, dynamic_toy_pieces, em_frames, em_toy_pieces, gif_bytes
from capsviz.viz.teach import whole
from pages.asking import ask
from pages.common import require_router
from pages.drawn import pieces, show_pieces
from pages.linking import keep_link_note, link_number, show_link_note
from pages.sidebar import site_button
from pages.state import STATE, Key, link_asks
from pages.terms import term_help

require_router()
st.title(t("Routing playgrounds"))
st.markdown(
    t(
        "Six lower capsules, two or three upper capsules, poses in 2-D so you can see them. You set what each lower "
        "capsule predicts for each upper capsule; capsviz routes them with the **same functions the trained models use** "
        "and draws every iteration. Start from a preset, then drag a slider and watch the couplings (or assignments) follow."
    )
)

TOYS = {"dynamic": N_("Routing by agreement (dynamic routing)"), "em": N_("EM routing (matrix capsules)")}
RULES = {"dynamic": N_("routing by agreement (iterations)"), "self-attention": N_("self-attention (one pass)")}


def lower_names() -> list[str]:
    """The lower capsules as the figures name them, in the reader's language."""
    return [t("lower {i}", i=i + 1) for i in range(I_TOY)]


def from_link(slot: Key, what: str, choices, default, name=str) -> None:
    """Seed a widget's state before it is drawn: a shared link's value (?param=) when it is one of
    `choices`, else `default` with a note naming what the link asked for (`what`: the setting in
    words; `name`: a choice as the widget shows it); the widget itself then takes no default of its own."""
    if not slot.present:
        raw = link_asks(slot.param)
        slot.set(default if raw is None else keep_link_note(slot.param, chosen(raw, list(choices), default, what, name)).value)
    show_link_note(slot.param, slot.get())


def switch_toy() -> None:
    """The other toy's settings in the URL do not apply to this one."""
    for param in ("preset", "J", "T", "t", "cap", "pts", "acts", "rule"):
        st.query_params.pop(param, None)


from_link(STATE.pg_toy, t("playground"), list(TOYS), "dynamic", lambda k: t(TOYS[k]))
toy_kind = st.radio(
    t("Playground"), list(TOYS), format_func=keeping(lambda k: t(TOYS[k])), key=STATE.pg_toy.key, horizontal=True, on_change=switch_toy
)
st.query_params["toy"] = toy_kind
prefix = f"pg_{toy_kind}"
preset_slot, j_slot, t_slot, cap_slot, points_slot, gen_slot = (
    k(toy=toy_kind) for k in (STATE.pg_preset, STATE.pg_J, STATE.pg_T, STATE.pg_cap, STATE.pg_points, STATE.pg_gen)
)
presets = list(DYNAMIC_PRESETS) if toy_kind == "dynamic" else list(EM_PRESETS)


def reset_points() -> None:
    """A new preset (or number of upper capsules) replaces every point; the point sliders start
    again from the preset's values (a new generation of widget keys)."""
    points_slot.pop()
    gen_slot.set(gen_slot.get() + 1)


preset_name = keeping(lambda p: t(PRESET_NAMES[p]))
from_link(preset_slot, t("preset"), presets, presets[0], preset_name)
from_link(j_slot, t("upper capsules"), [2, 3], 2)
from_link(t_slot, t("routing iterations"), range(1, 6), 3)
from_link(cap_slot, t("lower capsule"), range(1, I_TOY + 1), 1)
controls, figure = st.columns([1, 2.2], gap="large")
with controls:
    preset = st.selectbox(
        t("Preset"),
        presets,
        format_func=preset_name,  # plain: our catalog's preset names; the link keeps the English key
        key=preset_slot.key,
        on_change=reset_points,
        help=t("A starting arrangement; the sliders below change it"),
    )
    J = st.radio(t("Upper capsules"), [2, 3], key=j_slot.key, horizontal=True, on_change=reset_points)
    rule = "dynamic"
    if toy_kind == "dynamic":
        from_link(STATE.pg_rule, t("routing"), STATE.pg_rule.choices, "dynamic", lambda r: t(RULES[r]))
        rule = st.radio(
            t("Routing"),
            list(RULES),
            format_func=keeping(lambda r: t(RULES[r])),
            key=STATE.pg_rule.key,
            horizontal=True,
            help=term_help("iteration", "self_attention", "prior"),
        )
    T = st.slider(t("Routing iterations"), 1, 5, key=t_slot.key, help=term_help("iteration"), disabled=rule != "dynamic")
    if rule != "dynamic":
        T = 1

    # the points: the preset, or a shared link's edits, or the user's slider moves
    if not points_slot.present:
        base = DYNAMIC_PRESETS[preset] if toy_kind == "dynamic" else EM_PRESETS[preset][0]
        base = base[:, :J].copy()
        acts = np.ones(I_TOY) if toy_kind == "dynamic" else EM_PRESETS[preset][1].copy()
        for param, shape, what, instead in (
            ("pts", base.shape, t("points"), t("the preset's points")),
            ("acts", (I_TOY,), t("activations"), t("the preset's activations")),
        ):  # a link's, once
            raw = link_asks(param)
            linked = decode_points(raw, shape)
            if linked is None and raw:
                shown = base if param == "pts" else acts
                keep_link_note(param, Linked(encode_points(shown), unread(raw, what, instead)))
            elif linked is not None and param == "pts":
                base = linked
            elif linked is not None:
                acts = np.clip(linked, 0, 1)
        points_slot.set((base, acts))
    points, acts = points_slot.get()
    points, acts = points.copy(), acts.copy()

    st.markdown(t("**Move one lower capsule**"))
    i = (
        st.selectbox(
            t("Lower capsule"), list(range(1, I_TOY + 1)), key=cap_slot.key, format_func=keeping(lambda k: t("lower capsule {k}", k=k))
        )
        - 1
    )
    gen = gen_slot.get()
    for j in range(J):
        a, b = st.columns(2)
        for axis, col in enumerate((a, b)):
            points[i, j, axis] = col.slider(
                t("prediction u_hat for upper {j}: {axis}", j=j + 1, axis="xy"[axis])
                if toy_kind == "dynamic"
                else t("vote V for upper {j}: {axis}", j=j + 1, axis="xy"[axis]),
                -LIMIT,
                LIMIT,
                float(points[i, j, axis]),
                0.1,
                key=f"{prefix}_pt_{gen}_{i}_{j}_{axis}",
                help=term_help("u_hat" if toy_kind == "dynamic" else "vote"),
            )
    if toy_kind == "em":
        acts[i] = st.slider(
            t("activation a of lower capsule {i}", i=i + 1),
            0.0,
            1.0,
            float(acts[i]),
            0.05,
            key=f"{prefix}_act_{gen}_{i}",
            help=term_help("a_in"),
        )
        final_lambda = st.slider(t("final inverse temperature lambda"), 0.1, 3.0, 0.3, 0.1, key="pg_em_lambda", help=term_help("lambda"))
        beta_u = st.slider(t("beta_u (cost per unit of spread)"), -2.0, 2.0, 0.0, 0.1, key="pg_em_beta_u", help=term_help("beta_u"))
        beta_a = st.slider(t("beta_a (activation bias)"), -2.0, 2.0, 0.0, 0.1, key="pg_em_beta_a", help=term_help("beta_a"))
    points_slot.set((points, acts))
    for param, value in (("pts", points), ("acts", acts)):
        show_link_note(param, encode_points(value))  # while the page shows the preset's in place of a link's it cannot read

preset_points = DYNAMIC_PRESETS[preset][:, :J] if toy_kind == "dynamic" else EM_PRESETS[preset][0][:, :J]
st.query_params.update({"preset": preset, "J": str(J), "T": str(t_slot.get()), "cap": str(i + 1)})
if toy_kind == "dynamic":
    st.query_params["rule"] = rule
for param, value, default in (("pts", points, preset_points), ("acts", acts, np.ones(I_TOY))):
    if np.allclose(value, default):
        st.query_params.pop(param, None)  # a preset's link stays short
    else:
        st.query_params[param] = encode_points(value)


def show_iteration(T: int) -> int:
    linked_t = link_number(STATE.pg_t, 1, T, T, t("iteration"))  # a shared link's, once
    if linked_t is not None:
        STATE.pg_t.set(linked_t)
    if STATE.pg_t.get(T) > T:
        STATE.pg_t.set(T)
    STATE.pg_t.setdefault(T)  # the slider then takes its value from the session alone (no second default)
    shown = (
        st.slider(
            t("Show iteration"), 1, T, key=STATE.pg_t.key, help=t("Routing is computed for every iteration; this picks which one is drawn")
        )
        if T > 1
        else 1
    )
    st.query_params["t"] = str(shown)
    show_link_note(STATE.pg_t.param, shown)
    return shown - 1


def dynamic_iteration(toy, it: int):
    """Iteration it of the dynamic (or self-attention) toy, in pieces."""
    return dynamic_toy_pieces(toy, lower_names(), it)


def em_iteration(toy, it: int):
    """Iteration it of the EM toy, in pieces."""
    return em_toy_pieces(toy, lower_names(), it)


def downloads(png, frames, name: str) -> None:
    """This iteration's whole figure (`png`: its PNG, drawn when downloaded) and every iteration's, for slides."""
    st.download_button(
        t("Download this iteration (PNG)"),
        png,
        f"{name}-iteration.png",
        "image/png",
        key=f"{prefix}_png",
        on_click="ignore",
    )
    st.download_button(  # one under the other: side by side, the longer label is cut short in Japanese
        t("Download every iteration (animated GIF)"),
        keeping(lambda: gif_bytes(frames())),  # drawn when downloaded, in the language of the page
        f"{name}.gif",
        "image/gif",
        key=f"{prefix}_gif",
        on_click="ignore",
    )


if toy_kind == "dynamic":
    toy = dynamic_toy(points, T) if rule == "dynamic" else attention_toy(points)
    question = routed_split(toy, i, (rule, preset, J, T), attention=rule != "dynamic")
else:
    toy = em_toy(points, acts, T, beta_u, beta_a, final_lambda)
    question = em_assignment(toy, i, (preset, J, T, beta_u, beta_a, final_lambda))
# predict, then see: asked about the numbers as they are until the student answers; once answered,
# the sliders move the figure freely until the next preset, lower capsule or setting
context = (toy_kind, rule, preset, J, T, i)
kept = STATE.pg_question.get()
if STATE.pg_asked_for.get() != context or kept is None or kept.qid not in STATE.asked.get():
    STATE.pg_asked_for.set(context)
    STATE.pg_question.set(question)
with figure:
    if not ask(STATE.pg_question.get(question)):
        st.stop()
    it = show_iteration(T)
    if toy_kind == "dynamic":
        drawn = pieces(dynamic_iteration, toy, it, key=(rule, points, T, it))  # drawn once for everyone on these numbers (per language)
        show_pieces(
            drawn,
            t(
                "Procedure 1 of Sabour et al. on your numbers: one panel per upper capsule with the predictions it receives; "
                "below, how each lower capsule splits its prediction"
            ),
        )
        downloads(
            keeping(lambda: png_bytes(whole(dynamic_iteration(toy, it)))),
            lambda: dynamic_frames(toy, lower_names()),
            "routing-by-agreement",
        )
    else:
        drawn = pieces(em_iteration, toy, it, key=(points, acts, T, beta_u, beta_a, final_lambda, it))
        show_pieces(drawn, t("Procedure 1 of Hinton et al. on your numbers: each upper capsule is a Gaussian over the votes it receives"))
        downloads(keeping(lambda: png_bytes(whole(em_iteration(toy, it)))), lambda: em_frames(toy, lower_names()), "em-routing")


def number(title: str, *terms: str):
    """A table column drawn at the 3 decimals the sentences quote (capsviz.analysis.playground.TABLE)."""
    return st.column_config.NumberColumn(title, help=term_help(*terms), format=f"%.{TABLE}f")


if toy_kind == "dynamic" and rule == "self-attention":
    view = attention_view(toy)
    st.markdown(view.intro)
    st.info(view.said)
    cols = {"lower capsule": st.column_config.TextColumn(t("lower capsule"))}
    for j in range(J):
        cols[f"a to {j + 1}"] = number(t("a to {j}", j=j + 1), "self_attention")  # the keys: the table's columns; the titles shown
        cols[f"c to {j + 1}"] = number(t("c to {j}", j=j + 1), "c")
    st.markdown(t("**The numbers** (hover a column title for its meaning)"))
    st.dataframe(pd.DataFrame(view.lower), hide_index=True, column_config=cols, key="pg_att_table")
elif toy_kind == "dynamic":
    view = dynamic_view(toy, it)
    st.markdown(view.intro)
    st.info(view.said)
    cols = {"lower capsule": st.column_config.TextColumn(t("lower capsule"))}
    for j in range(J):
        cols[f"b to {j + 1}"] = number(t("b to {j}", j=j + 1), "b")
        cols[f"c to {j + 1}"] = number(t("c to {j}", j=j + 1), "c")
        cols[f"u_hat.v with {j + 1}"] = number(t("u_hat.v with {j}", j=j + 1), "agreement")
    st.markdown(
        t(
            "**The numbers at iteration {iteration}** (hover a column title for its meaning; b and c are what this iteration used, "
            "u_hat.v is what it adds to b)",
            iteration=it + 1,
        )
    )
    st.dataframe(pd.DataFrame(view.lower), hide_index=True, column_config=cols, key="pg_dyn_table")
    st.dataframe(
        pd.DataFrame(view.upper),
        hide_index=True,
        key="pg_dyn_upper",
        column_config={
            "upper capsule": st.column_config.TextColumn(t("upper capsule")),
            "s (x, y)": st.column_config.TextColumn("s (x, y)", help=term_help("s")),
            "|s|": number("|s|", "s"),
            "v (x, y)": st.column_config.TextColumn("v (x, y)", help=term_help("v", "squash")),
            "|v| (presence)": number(t("|v| (presence)"), "length"),
        },
    )
    st.caption(view.try_it)
else:
    view = em_view(toy, it, beta_a)
    st.markdown(view.intro)
    st.info(view.said)
    cols = {
        "lower capsule": st.column_config.TextColumn(t("lower capsule")),
        "a (lower activation)": st.column_config.NumberColumn(t("a (lower activation)"), format="%.2f", help=term_help("a_in")),
    }
    for j in range(J):
        cols[f"R to {j + 1}"] = number(t("R to {j}", j=j + 1), "R")
    st.markdown(
        t(
            "**The numbers at iteration {iteration}** (hover a column title for its meaning; R is what this iteration's M-step used)",
            iteration=it + 1,
        )
    )
    st.dataframe(pd.DataFrame(view.lower), hide_index=True, column_config=cols, key="pg_em_table")
    st.dataframe(
        pd.DataFrame(view.upper),
        hide_index=True,
        key="pg_em_upper",
        column_config={
            "upper capsule": st.column_config.TextColumn(t("upper capsule")),
            "mu (mean pose)": st.column_config.TextColumn(t("mu (mean pose)"), help=term_help("mu")),
            "sigma (spread)": st.column_config.TextColumn(t("sigma (spread)"), help=term_help("sigma")),
            "a (activation)": number(t("a (activation)"), "a_j"),
        },
    )
    st.caption(view.try_it)

site_button("playground", None)
