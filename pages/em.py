"""EM routing inspector: Fig. 2 (and B.2) of Hinton et al. (2018), one image at a time."""

import numpy as np
import streamlit as st

from capsviz.analysis.routing import em_trace, vote_histograms
from capsviz.data.mnist import CLASS_NAMES
from capsviz.viz import heatmap, histograms, lines, to_image
from pages.common import page_model, pick_image, require_router

require_router()
st.title("EM routing, iteration by iteration")
st.markdown(
    "Each class capsule is a Gaussian over 16 pose dimensions; lower capsules are data points that "
    "EM assigns to them (R). The histograms reproduce Fig. 2 of the paper: the distance from every "
    "vote to each class capsule's mean pose, weighted by its assignment. At iteration 1 the votes "
    "are spread evenly over all classes; by iterations 2-3 the agreeing votes concentrate on the "
    "detected class and the others keep only scattered, distant votes."
)

model, meta, path = page_model(
    lambda meta: meta["config"]["family"] == "matrix",
    "**{name}** is a {family} model. This page shows EM routing between matrix capsules; pick a matrix-capsule model "
    "below or in the sidebar, or train one: `python -m capsviz train --model matrix-small --compile --out "
    "checkpoints/my-matrix-small.safetensors`.",
)
names = CLASS_NAMES.get(meta.get("dataset", "mnist"), CLASS_NAMES["mnist"])[: meta["config"]["num_classes"]]
picked = pick_image(meta.get("dataset", "mnist"), names, meta["config"]["in_size"], model)
if picked is None:
    st.stop()
image, label = picked
T = st.slider(
    "EM iterations at inference",
    1,
    5,
    int(meta["config"]["routing_iterations"]),
    key="iterations",
    bind="query-params",
    help="The weights are the same; only the number of EM iterations changes",
)


@st.cache_data(max_entries=32, show_spinner=False)
def trace(model_key: str, image_bytes: bytes, T: int):
    return em_trace(model, np.frombuffer(image_bytes, np.float32).reshape(image.shape), T)


tr = trace(st.session_state["model_key"], image.tobytes(), T)
pred = int(tr.a[-1].argmax())


@st.fragment
def iteration_view(tr, image, label, pred: int) -> None:
    """One iteration's figures and the convolutional layers': their widgets rerun only this."""
    if T > 1:
        t = (
            st.slider(
                "Show iteration",
                1,
                T,
                T,
                key="t",
                bind="query-params",
                help="Each EM iteration re-estimates every class capsule's Gaussian (M-step) and then re-assigns the votes to them (E-step)",
            )
            - 1
        )
    else:
        t = 0
        st.info(
            "EM runs once here, so there is nothing to step through: the first M-step fits each class capsule to votes "
            "assigned evenly (R = 1/10 each), and no E-step re-assigns them. Raise **EM iterations at inference** to watch "
            "the assignments move."
        )
    left, right = st.columns([1, 3])
    left.image(to_image(image), caption=f"input (label {label}), prediction {names[pred]}", width=168)
    left.metric("inverse temperature lambda", f"{tr.lambdas[t]:.3f}")
    zoom = right.toggle("Zoom to distances < 0.05 (as in Fig. 2)", value=False, key="zoom", bind="query-params")
    if zoom and (tr.distances < 0.05).any():
        top = 0.05
    elif zoom:
        top = float(np.percentile(tr.distances, 10))
        right.caption(
            f"No vote lies within 0.05 of a mean pose for this model (the nearest is {tr.distances.min():.3f}); the paper's 0.05 "
            f"suits its trained smallNORB model. Zoomed to the nearest 10% of distances instead (< {top:.3f})."
        )
    else:
        top = float(np.percentile(tr.distances, 99))
    bins = np.linspace(0, top + 1e-6, 41)
    right.plotly_chart(
        histograms(vote_histograms(tr, bins)[t], bins, names, f"Iteration {t + 1}: R-weighted vote distances per class capsule"),
        key="em_hist",
    )

    st.plotly_chart(
        heatmap(
            tr.R[t].T,
            f"Assignments R at iteration {t + 1} (lower capsules x classes)",
            "lower capsule (position x type)",
            "class",
            y=[str(n) for n in names],
            zmin=0,
            zmax=1,
            height=300,
        ),
        key="em_R",
    )

    st.subheader("Convolutional capsule layers")
    layer = st.selectbox("Layer", ["convcaps1", "convcaps2"], key="layer", bind="query-params")
    res = tr.layers[layer]
    P = res.R.shape[2]
    n = int(round(P**0.5))
    pos = st.slider("Output position (row-major)", 0, P - 1, P // 2, key="position", bind="query-params", help=f"{n}x{n} positions")
    R = res.R[t if t < res.R.shape[0] else -1, 0, pos].numpy()  # (K*K*types, J)
    st.plotly_chart(
        heatmap(
            R.T,
            f"{layer}, position {pos // n},{pos % n}: assignments of the receptive field's capsules",
            "lower capsule in the 3x3 receptive field (kernel position x type)",
            "upper capsule type",
            zmin=0,
            height=280,
        ),
        key="em_conv_R",
    )
    st.caption(
        "Each lower capsule's assignments sum to 1 over every upper capsule it reaches, at all positions, so a capsule near the border (fewer positions) sends larger shares to each."
    )


iteration_view(tr, image, label, pred)

st.subheader("Across iterations")
a, b, c = st.columns(3)
a.plotly_chart(lines(tr.a, names, "Class activations a_j", "iteration", "a_j"), key="em_act")
b.plotly_chart(lines(tr.sigma.mean(-1), names, "Spread: mean sigma over the 16 pose dims", "iteration", "sigma"), key="em_sigma")
c.plotly_chart(lines(tr.R.sum(1), names, "Total assignment each class receives", "iteration", "sum_i R_ij"), key="em_mass")
