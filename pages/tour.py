"""The guided tour: one image followed through the active capsule network, one step at a time
(Back / Next, the step in the URL as ?step=N). It opens with the "Why capsules" chapter measured on
the model (capsviz.analysis.why_steps), then follows the image through its layers: dynamic-routing
CapsNets, matrix capsules and Efficient-CapsNet (self-attention routing, one pass). Before a step
shows what the model did, the student predicts it (pages.asking); the last step says which
predictions were right."""

import pandas as pd
import streamlit as st

from capsviz.analysis import lab, why, why_steps
from capsviz.analysis.routing import canvas_words, centred, on_canvas
from capsviz.analysis.tour import tour_of, walk
from capsviz.analysis.tour_questions import standing, standing_words
from capsviz.glossary import class_words, help_text, links
from capsviz.i18n import keeping, language, t
from capsviz.memo import digest
from capsviz.registry import either, shows
from capsviz.site.links import site_tour_step
from capsviz.text import MAX_SENTENCES, plain
from capsviz.viz import grouped_bars, png_bytes, to_image
from capsviz.viz import why as figures
from capsviz.viz.animation import gif_bytes, tour_em_frames, tour_routing_frames, tour_routing_pieces, tour_vote_frame
from capsviz.viz.teach import bars, capsule_arrows, feature_maps, markdown_table, side_by_side, value_grid, whole
from pages.active import checkpoints, for_image, load_model, model_key, page_model, test_set
from pages.asking import answered, ask
from pages.classroom import person
from pages.classroom import seen as here_now
from pages.common import require_router
from pages.drawn import chart, kept, picture, pieces, show, show_pieces
from pages.inputs import pick_image
from pages.linking import link_number, show_link_note
from pages.projector import big
from pages.sidebar import site_button
from pages.state import STATE

require_router()
st.title(t("A guided tour of a capsule network"))
st.markdown(
    t(
        "Follow one image through the active model, one step at a time, with the real numbers at every step. "
        "Each step says which equation or figure of the paper it shows; hover a ? for the words behind a symbol. "
        "New to capsules? The **Routing playgrounds** show the same mechanism on six capsules you can move."
    )
)
# short labels: a phone shows them whole in every language; what each page holds is in its help
st.page_link("pages/glossary.py", label=t("Glossary"), icon=":material/menu_book:", help=t("Every symbol and word, in one place"))
st.page_link(
    "pages/why.py",
    label=t("Why capsules"),
    icon=":material/help:",
    help=t("The tour's first steps on a page of their own: every shift and turn, every scrambled digit"),
)

model, meta, path = page_model(
    lambda meta: shows(meta.config, "tour"),
    t("a {models} to follow an image through", models=either("tour")),
    t("**{name}** is {family}, which has no capsules to follow. Pick a capsule network in the sidebar."),
)
names = [str(n) for n in meta.class_names]
words = class_words(meta)  # digit capsules for digits; class capsules for Fashion-MNIST and a user's own images
size = meta.config.in_size
looks = (
    t("the {size}x{size} input, red, green and blue levels 0 to 1", size=size)
    if meta.config.in_channels == 3
    else t("the {size}x{size} input, grey levels 0 to 1", size=size)
)
pad = on_canvas(meta.image_dataset, size)  # a MultiMNIST model: a test digit centred on its canvas
if pad:
    st.info(canvas_words(size, pad), icon=":material/info:")
    st.page_link("pages/multimnist.py", label=t("MultiMNIST: pairs of digits"), icon=":material/arrow_outward:")
with st.expander(t("The image to follow (a test image, a drawing or an upload: change it here)"), expanded=False):
    picked = pick_image(meta.image_dataset, names, size - 2 * pad, None if pad else model)
if picked is None:
    st.info(t("Open **The image to follow** above and pick a test image, draw one or upload one."))
    st.stop()
image, truth = centred(picked[0], pad), picked[1]


tour = for_image(tour_of(meta.config).follow, model, image)
have = lab.stored_rows([(path, meta)], list(lab.LAB_ROUTINGS)) if lab.fits(meta.config) else {}
rows = [have[path.stem, r] for r in lab.LAB_ROUTINGS if (path.stem, r) in have]
# the tour of this model and image: its steps' words and figures are the same for every session that follows it
seen = digest(STATE.model_key.get(), image, names, truth, repr(rows), language())
LARGE = big()

# the chapter "Why capsules" first, on this model (beside the baseline CNN) and this image
chapter = why_steps.chapter_for(meta, checkpoints(), path.stem)
data = test_set(meta.image_dataset, meta.config.in_size, quiet=True) if chapter.kind else None
sweeps = {kind: None if data is None else why_steps.stored_sweep(kind, path, data, chapter.cnn_path) for kind in chapter.sweeps}
measured_key = tuple(kind for kind, sweep in sweeps.items() if sweep is not None)
cnn = load_model(chapter.cnn_path)[0] if chapter.cnn_path is not None else None
if chapter.kind == "vector":
    key = (seen, model_key(chapter.cnn_path), measured_key)
    chapter_steps = kept(
        why_steps.vector_chapter, model, cnn, image, names, path.stem, sweeps["invariance"], sweeps["parts"], data is not None, key=key
    )
elif chapter.kind == "matrix":
    chapter_steps = kept(why_steps.matrix_chapter, model, image, path.stem, sweeps["viewpoint"], data is not None, key=(seen, measured_key))
else:
    chapter_steps = why_steps.unmeasured_steps(chapter, image)
steps = chapter_steps + kept(walk, tour, names, words, path.stem, truth, looks, rows, meta.config, key=seen)
N = len(steps) + 1  # and "Where I stand" at the end

linked_step = link_number(STATE.tour_step, 1, N, 1, t("step"))  # a shared link's step, once
if linked_step is not None or not STATE.tour_step.present:
    STATE.tour_step.set(linked_step or 1)
STATE.tour_step.set(min(max(STATE.tour_step.get(), 1), N))  # the other family's tour may be longer


def move(by: int) -> None:
    STATE.tour_step.set(min(max(STATE.tour_step.get() + by, 1), N))


def step_figure(step, name: str, build, *args, width: int | None = None, key=None, **kwargs) -> None:
    """One figure, `build(*args, **kwargs)` drawn once (pages.drawn.picture), the step's caption,
    and its PNG at full size for slides."""
    show(st, picture(build, *args, width=width, key=key, **kwargs), plain(step.caption, limit=MAX_SENTENCES), width or "stretch")
    st.download_button(
        t("Download this figure (PNG)"),
        lambda: picture(build, *args, key=key, **kwargs),
        f"tour-{name}.png",
        "image/png",
        key="tour_png",
        on_click="ignore",
    )


def em_frame(tour, names, it: int):
    """Iteration it's frame of the matrix tour's EM figure."""
    return tour_em_frames(tour, names, only=it)[0]


PHONE_COLUMNS = 6  # numbers a table row shows beside its name at 390 px
PHONE_WIDTH = 350  # pixels a table gets on a 390 px phone (the page's margins taken off)


def value_table(step, d: dict) -> None:
    """A grid of numbers as tables of text, every number in view on a phone, shaded by size like its picture, the highlighted column (or row) in red; the picture for slides."""
    columns = [str(c) for c in d["columns"]]
    rows = [plain(r, "table") for r in d["rows"]]
    frame = pd.DataFrame(d["values"].astype(float), index=rows, columns=columns).round(2)  # as drawn
    top = max(float(d["values"].max()), 1e-8)
    red_column = columns[d["highlight"]] if "highlight" in d else None
    red_row = rows[d["highlight_row"]] if "highlight_row" in d else None

    def shade(column: pd.Series) -> list[str]:
        level = (255 - 180 * column / top).astype(int)
        ink = ["white" if v < 150 else "black" for v in level]
        red = [column.name == red_column or r == red_row for r in column.index]
        return [
            f"background-color: rgb({f'255, {v}, {v}' if r else f'{v}, {v}, 255'}); color: {c}"
            for v, c, r in zip(level, ink, red, strict=True)
        ]

    st.markdown(f"**{plain(d['title'])}**")
    # at most PHONE_COLUMNS columns a table (more are stacked below), so a 390 px phone shows every number without scrolling
    parts = -(-len(columns) // PHONE_COLUMNS)
    names = min(160, 24 + 7 * max(map(len, frame.index)))  # the row names whole
    for n in range(parts):
        part = columns[n * len(columns) // parts : (n + 1) * len(columns) // parts]
        st.dataframe(
            frame[part].style.format("{:.2f}").apply(shade),
            column_config={"_index": st.column_config.TextColumn(width=names)}
            | {c: st.column_config.NumberColumn(width=max(40, min(50, (PHONE_WIDTH - names) // len(part)))) for c in part},
            height=35 * (len(frame) + 1) + 3,  # every row in view: 35 px a row and the header
            key=f"tour_table_{n}",
        )
    st.caption(plain(step.caption, limit=MAX_SENTENCES))
    st.download_button(
        t("Download this figure (PNG)"),
        lambda: png_bytes(value_grid(d["values"], d["rows"], d["columns"], d["title"], d.get("highlight"), d.get("highlight_row"))),
        f"tour-{step.key}.png",
        "image/png",
        key="tour_png",
        on_click="ignore",
    )


def strip(pictures, values: list[float]) -> None:
    """A row of digits (the chapter's shifts), each captioned with its shift."""
    side = 168 if LARGE else 98  # 28 pixels drawn 6 (or 3.5) times over
    captions = [t("{v:+.0f} px").format(v=v) if v else "0" for v in values]
    show(st, [picture(to_image, a, 6, width=side) for a in pictures], captions, side)  # plain: numbers only


def why_figure(step) -> None:
    """The figures of a step of the chapter (capsviz.analysis.why_steps), drawn by capsviz.viz.why,
    each picture's caption right under it."""
    d = step.data
    sweep, at = d.get("sweep"), (seen, step.key, LARGE)

    def caption(words: str) -> None:
        st.caption(plain(words, limit=MAX_SENTENCES))

    if step.figure == "why_invariance":
        strip(d["view"]["inputs"], d["view"]["values"])
        caption(step.caption)
        st.plotly_chart(chart(figures.dimensions, d["view"], d["amount"], LARGE, key=at), key="tour_why_dims")
        if sweep is not None:
            st.plotly_chart(chart(figures.changes, sweep, why_steps.CHANGE, d["amount"], LARGE), key="tour_why_changes")
    elif step.figure == "why_parts":
        side = 200 if LARGE else 140
        shown = [plain(n) for n in names]  # computed when the step is shown: most students never open it for every image
        pictures, lines = kept(why.parts_views, model, cnn, image, shown, key=(seen, model_key(chapter.cnn_path), tuple(shown)))
        for place, a, words_ in zip(st.columns(len(pictures)), pictures, lines, strict=True):
            show(place, picture(to_image, a, 8, width=side), None, side)
            place.markdown("  \n".join(words_.split("\n")))  # plain: the class names made plain in the core
        caption(step.caption)
        if sweep is not None:
            st.plotly_chart(chart(figures.parts_right, sweep, LARGE), key="tour_why_parts")
    elif step.figure == "why_pose":
        moved, redrawn = d["captions"]
        strip(d["view"]["inputs"], d["view"]["values"])
        caption(moved)
        strip(d["view"]["reconstructions"], d["view"]["values"])
        caption(redrawn)
        st.plotly_chart(chart(figures.this_digit, d["view"], why_steps.CHANGE, d["amount"], LARGE, key=at), key="tour_why_digit")
    elif step.figure in ("why_viewpoint", "why_coordinates"):
        which = "with" if step.figure == "why_viewpoint" else "without"
        st.plotly_chart(chart(figures.vote_cloud, d["votes"], which, LARGE, key=at), key="tour_why_cloud")
        caption(step.caption)
        if sweep is not None and which == "with":
            st.plotly_chart(chart(figures.votes_move, sweep, why_steps.CHANGE, d["amount"], LARGE), key="tour_why_votes")
        elif sweep is not None:
            st.plotly_chart(chart(figures.coordinates, sweep, why_steps.CHANGE, d["amount"], LARGE), key="tour_why_coordinates")
            st.plotly_chart(chart(figures.coordinates_kept, sweep, why_steps.CHANGE, d["amount"], LARGE), key="tour_why_kept")
    if sweep is None and data is not None and any(s is None for s in sweeps.values()):
        if st.button(t("Measure over the test set"), key="tour_why_measure", help=t("Once per server: a minute or more")):
            with st.spinner(t("Measuring over the test set (once per server) ...")):
                why_steps.measure(chapter, path, model, data, cnn)
            st.rerun()


def go(k: int) -> None:
    STATE.tour_step.set(k)


def where_i_stand() -> None:
    """The last step: which of the tour's questions this student got right, a way back to each missed one."""
    asked = [(k, step.title, step.question) for k, step in enumerate(steps, 1) if step.question is not None]
    rows = standing(asked, {q.qid: answered(q) for _, _, q in asked})
    _, teacher = person()
    st.markdown(standing_words(rows))
    if teacher:
        st.caption(t("As the teacher you see every answer at once, so none of yours is counted here: this is what a student sees."))
    marks = {"right": ":green[:material/check_circle:]", "wrong": ":red[:material/cancel:]"}
    for row in rows:
        line, back = st.columns([4, 1], vertical_alignment="center")
        line.markdown(f"{marks.get(row.status, ':material/radio_button_unchecked:')} {plain(row.words())}")
        if row.missed:
            back.button(t("Open step {k}", k=row.step), key=f"tour_to_{row.step}", on_click=go, args=(row.step,), width="stretch")


@st.fragment
def step_view() -> None:
    """The step shown: Back and Next rerun only this, not the page around it."""
    k = STATE.tour_step.get()
    st.query_params["step"] = str(k)
    who, teacher = person()
    here_now(who, f"tour:{k}", teacher)  # Back and Next rerun only this: the Teacher page learns the step here
    back, where, nxt = st.columns([1, 4, 1], vertical_alignment="center")
    back.button(
        t("Back"),
        key="tour_back",
        on_click=move,
        args=(-1,),
        disabled=k == 1,
        width="stretch",
        shortcut="Left",  # Streamlit shows the key's arrow beside the word: no icon besides
        help=t("Previous step (left arrow key)"),
    )
    nxt.button(
        t("Next"),
        key="tour_next",
        on_click=move,
        args=(1,),
        disabled=k == N,
        width="stretch",
        type="primary",
        shortcut="Right",
        help=t("Next step (right arrow key)"),
    )
    if k == N:
        where.progress(1.0, text=t("Step {k} of {n}: **{title}**", k=k, n=N, title=t("Where I stand")))
        show_link_note(STATE.tour_step.param, k)
        where_i_stand()
        return
    step = steps[k - 1]
    where.progress(k / N, text=t("Step {k} of {n}: **{title}**", k=k, n=N, title=step.title))  # plain: the tour's own step titles
    show_link_note(STATE.tour_step.param, k)
    if step.question is not None and not ask(step.question):  # predict, then see: the step waits for the answer
        show(st, picture(side_by_side, [image], [t("the image the tour follows")], width=260), None, 260)
        return
    d = step.data
    # a table of numbers, and every figure on a projector, takes the page's whole width, its words under it
    fig, text = (st.container(), st.container()) if step.figure == "grid" or LARGE else st.columns([3, 2], gap="large")
    with fig:
        if step.figure.startswith("why_"):
            why_figure(step)
        elif step.figure == "image":
            step_figure(step, step.key, side_by_side, d["images"], d["labels"], width=260 if len(d["images"]) == 1 else None)
        elif step.figure == "maps":
            step_figure(step, step.key, feature_maps, d["maps"], d["names"], scale=d.get("scale", 4))
        elif step.figure == "arrows":
            step_figure(step, step.key, capsule_arrows, image, d["lengths"], d["directions"])
        elif step.figure == "grid":
            value_table(step, d)
        elif step.figure == "bars":
            step_figure(step, step.key, bars, d["values"], d["names"], d["highlight"], d["title"], d["axis"], d["lines"])
        elif step.figure == "routing":
            # in pieces, each picture shown at its own size: a phone shows their text readably
            drawn = pieces(tour_routing_pieces, tour, names, d["t"], words.capsule, key=(seen, d["t"], words.capsule))
            show_pieces(drawn, plain(step.caption, limit=MAX_SENTENCES))
            st.download_button(
                t("Download this figure (PNG)"),
                keeping(lambda: png_bytes(whole(tour_routing_pieces(tour, names, d["t"], words.capsule)))),  # drawn when downloaded
                f"tour-routing-{d['t'] + 1}.png",
                "image/png",
                key="tour_png",
                on_click="ignore",
            )
            st.download_button(
                t("Download every iteration (animated GIF)"),
                keeping(lambda: gif_bytes(tour_routing_frames(tour, names, capsule=words.capsule))),
                "tour-routing.gif",
                "image/gif",
                key="tour_gif",
                on_click="ignore",
            )
        elif step.figure == "em_primary":
            maps = d["maps"]
            step_figure(
                step, step.key, feature_maps, maps, [t("type {k}", k=k + 1) for k in range(len(maps))], scale=6, columns=4, normalise=False
            )
            st.markdown(markdown_table({t("col {c}", c=c + 1): d["pose"][:, c] for c in range(d["pose"].shape[1])}))
        elif step.figure == "votes":
            step_figure(step, step.key, tour_vote_frame, tour, names, key=seen)
        elif step.figure == "em":
            step_figure(step, f"em-{d['t'] + 1}", em_frame, tour, names, d["t"], key=(seen, d["t"]))
            st.download_button(
                t("Download every iteration (animated GIF)"),
                lambda: gif_bytes(tour_em_frames(tour, names)),
                "tour-em.gif",
                "image/gif",
                key="tour_gif",
                on_click="ignore",
            )
        elif step.figure == "lab":
            charts = [("error", "spread", t("Test error by routing"), t("test error %"), "tour_lab")]
            if "pairs" in d:  # a model that reads pairs: its own task, as the lab judges it
                charts.append(("pairs", "pair_spread", t("Pair accuracy by routing"), t("pair accuracy %"), "tour_lab_pairs"))
            for values, spread, title, axis, chart_key in charts:
                st.plotly_chart(
                    chart(
                        grouped_bars,
                        [path.stem],
                        {r: [v] for r, v in zip(d["routing_names"], d[values], strict=True)},
                        title,
                        axis,
                        {r: [e] for r, e in zip(d["routing_names"], d[spread], strict=True)},
                    ),
                    key=chart_key,
                )
            st.caption(plain(step.caption, limit=MAX_SENTENCES))
    with text:
        for paragraph in step.text:
            st.markdown(paragraph)  # plain: the core made every user-given name in it plain
        if step.measured:
            (st.warning if step.warn else st.info)(step.measured)
        if step.terms:
            st.caption(help_text(*step.terms))
            st.caption(t("In the glossary: {links}", links=links(step.terms, language())))  # plain: names made plain by links
        if step.key == "lab":
            st.page_link("pages/lab.py", label=t("Open the routing lab"), icon=":material/science:")
        if step.link:
            st.page_link(step.link[0], label=step.link[1], icon=":material/arrow_outward:")
    if step.table:  # under both columns: a capsule's name in Chinese or Japanese wraps a character a line in the narrow one
        st.markdown(markdown_table(step.table))


step_view()
# the site's tour has no chapter steps: its step is counted from the walk's first
site_button("tour", meta, step=site_tour_step(STATE.tour_step.get(), len(chapter_steps), len(steps) - len(chapter_steps)))
