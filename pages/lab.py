"""Routing lab: does routing matter? The same capsules run with each routing, measured side by side."""

from pathlib import Path

import streamlit as st

from capsviz.analysis import lab, rules
from capsviz.data.user import short_name
from capsviz.i18n import keeping, t, tn
from capsviz.registry import either
from capsviz.text import plain, recorded
from capsviz.viz import grouped_bars, seed_strip
from capsviz.viz.teach import column_width
from pages.active import checkpoints, load_model, page_model, test_set
from pages.common import require_router, said_rows
from pages.drawn import chart
from pages.inputs import long_job
from pages.linking import keep_choice, keep_keyed, link_choices, link_keyed
from pages.state import STATE
from pages.terms import term_help, uses

require_router()
# the tables' own font (Streamlit's Source Sans), in which their columns are measured
GRID_FONT = next((Path(st.__file__).parent / "static" / "static" / "media").glob("SourceSansVF-Upright*"), None)
GRID_SIZE = 14  # px: the grid draws its cells and headers in the theme's small size, 0.875 rem
uses(
    "uniform", "random_couplings", "self_attention", "seed", "standard_error", "entropy"
)  # the glossary entries its text names (pages.terms)

st.title(t("Routing lab: does routing matter?"))
st.markdown(
    t(
        "In a capsule network, routing decides how much of each part's vote goes to each class. The tour showed that "
        "dynamic routing leaves most couplings near uniform; so does routing matter, and does another routing do better? "
        "Here the **same trained capsules** are run with each routing, and models of one architecture **trained** with "
        "different routings are compared. Two axes: *trained with* (how the weights were learned) and *run with* (how the "
        "votes are combined now; the model itself is not changed). The short answer comes first; every sentence on this "
        "page is computed from the table."
    )
)

model, meta, path = page_model(
    lambda m: lab.fits(m.config),
    t("a vector-capsule model (a {models}) whose routing can be swapped", models=either("lab")),
    t("**{{name}}** is {{family}}; the lab swaps the routing of vector capsules. Choose a {models}.", models=either("lab")),
)

fitting = {p.stem: (p, m) for p, m in checkpoints() if lab.fits(m.config)}
same_data = [name for name, (_, m) in fitting.items() if m.image_dataset == meta.image_dataset]
c = st.columns([3, 2])
with c[0]:
    link_choices(STATE.lab_models, list(fitting), same_data, t("models"), label=plain)
with c[1]:
    link_keyed(STATE.lab_routings, list(lab.LAB_ROUTINGS), list(lab.LAB_ROUTINGS), t("routings"), words=lab.LAB_ROUTINGS.get)
chosen = c[0].multiselect(
    t("Models"),
    list(fitting),
    default=same_data,
    format_func=plain,
    key=STATE.lab_models.key,
    bind="query-params",
    help=t("Vector-capsule models in the model folder; the default is every one trained on the same images as the model in the sidebar."),
)
routings = c[1].multiselect(
    t("Run with"),
    list(lab.LAB_ROUTINGS),
    format_func=keeping(lambda r: lab.LAB_ROUTINGS[r]),
    key=STATE.lab_routings.key,
    help=term_help("uniform", "random_couplings", "iteration", "self_attention"),
)
keep_keyed(STATE.lab_routings, routings, list(lab.LAB_ROUTINGS))  # ?lab_routings=dynamic&lab_routings=uniform: the same in every language
s = st.columns(2)
counts, epsilons = [1000, 2000, 5000, lab.TEST_IMAGES], [0.05, 0.1, 0.2]
with s[0]:
    keep_choice(STATE.lab_test, counts, lab.TEST_IMAGES, t("test images"))
with s[1]:
    keep_choice(STATE.lab_epsilon, epsilons, lab.FGSM_EPSILON, t("FGSM epsilon"))
n_test = s[0].select_slider(
    t("Test images for the error"),
    counts,
    value=lab.TEST_IMAGES,
    key=STATE.lab_test.key,
    bind="query-params",
    help=t("The whole MNIST test set ({n}) is the default: with fewer images, chance hides small differences.", n=f"{lab.TEST_IMAGES:,}"),
)
epsilon = s[1].select_slider(
    t("FGSM epsilon"),
    epsilons,
    value=lab.FGSM_EPSILON,
    key=STATE.lab_epsilon.key,
    bind="query-params",
    help=term_help("fgsm", "epsilon"),
)
if not chosen or not routings:
    st.info(t("Pick at least one model and one routing."))
    st.stop()

settings = lab.Settings(test_images=n_test, epsilon=epsilon)
skipped: list[str] = []  # stored files that could not be read: a note below
have = lab.stored_rows([fitting[name] for name in chosen], routings, settings, skipped=skipped)  # read once per rerun
complete = {name for name in chosen if all((name, r) in have for r in routings)}
# test images only where rows must still be measured: stored results need none
images = {
    name: test_set(m.image_dataset, m.config.in_size, m.config.in_channels, quiet=True)
    for name, (_, m) in fitting.items()
    if name in chosen and name not in complete
}
without = [name for name, found in images.items() if found is None]
if without:
    st.warning(
        tn(
            "The test images of {models} are not available on this server ({datasets}), so it is left out of the lab unless "
            "stored results are kept for it.",
            "The test images of {models} are not available on this server ({datasets}), so they are left out of the lab unless "
            "stored results are kept for them.",
            len(without),
            models=t(", ").join(f"**{plain(n)}**" for n in without),
            datasets=t(", ").join(plain(d) for d in sorted({short_name(fitting[n][1].image_dataset) for n in without})),
        ),
        icon=":material/image_not_supported:",
    )
entries = [fitting[name] for name in chosen if name not in without]
if not entries:
    st.stop()


def run(progress):
    def tell(done, total, what):
        progress(done, total)

    data = lambda meta: test_set(meta.image_dataset, meta.config.in_size, meta.config.in_channels)  # noqa: E731
    return lab.run_lab(entries, routings, lambda p: load_model(p)[0], data, settings, on_progress=tell)


def all_stored():
    return [have[p.stem, r] for p, _ in entries for r in routings] if all(p.stem in complete for p, _ in entries) else None


# the rows' words are made when shown, so a run kept for this session is shown again in any language
job = f"lab:{'|'.join(chosen)}:{'|'.join(routings)}:{n_test}:{epsilon}"
missing = sum((p.stem, r) not in have for p, _ in entries for r in routings)
if missing:
    st.caption(
        t(
            "{missing} of the {total} rows are not stored for these settings yet: they run once, then stay.",
            missing=missing,
            total=len(entries) * len(routings),
        )
    )
rows = long_job(job, t("Run the lab"), run, stored=all_stored)
if rows is None:
    st.stop()

shown = {lab.preset_and_data(fitting[n][1]) for n in chosen}
found = lab.stored_studies(skipped=skipped) + lab.studies_in((m for _, m in fitting.values()), names=list(fitting))
# a study made of this folder's models (a student's runs) never takes the place of one shipped with the app
studies = list({(st_.architecture, st_.shipped, st_.models): st_ for st_ in found if st_.preset_and_data in shown}.values())
plain_rows, plain_studies = said_rows(rows, studies)  # their names made plain, for the sentences written about them
said = lab.report(plain_rows, plain_studies)

st.subheader(t("Does routing matter? The short answer"))
c = st.columns([3, 2])
with c[0]:
    st.caption(t("What the table below shows, in a few sentences; each model's details follow it."))
    for line in said.short:
        st.markdown("- " + line)  # plain: said_rows makes the names plain
with c[1]:
    st.subheader(t("What others found (published, not measured here)"))
    for line in lab.published():
        st.markdown("- " + plain(line))
for line in said.hidden:
    st.info(line, icon=":material/visibility_off:")  # plain: said_rows makes the names plain

st.subheader(t("The table"))
# a table's cell holds what a model was trained with in short; the column's help gives it whole
cells = [c | {"trained with": r.trained_short} for c, r in zip(lab.table(rows), rows, strict=True)]
whole = sorted({r.trained for r in rows if r.trained_label})
trained_help = t("The routing the model was trained with")
if whole:
    trained_help = t("{said}; in full: {whole}", said=trained_help, whole=t("; ").join(plain(w) for w in whole))
number = lambda k: f"%.{lab.DECIMALS[k]}f"  # noqa: E731 - a column's decimals
shown_as = lambda k, c: f"{c[k]:.{lab.DECIMALS[k]}f}" if k in lab.DECIMALS and c[k] is not None else str(c[k])  # noqa: E731
epsilon_words = f"{epsilon:g}"
headers = {k: t(words) for k, words in lab.COLUMNS.items()} | {
    "shifted acc. %": t("shifted %"),
    "FGSM acc. %": t("FGSM {epsilon} %", epsilon=epsilon_words),
    "pair acc. %": t("pair %"),
}


def _column(k: str, least: int, **kwargs):
    """Column `k` as wide as its header or its widest cell as shown, whichever is wider (each whole:
    capsviz.viz.teach.column_width), and never under `least`: a table fits a laptop's page in every
    language, so it does not scroll sideways."""
    width = column_width([headers[k], *(shown_as(k, c) for c in cells)], least, size=GRID_SIZE, latin=GRID_FONT)
    if k in lab.DECIMALS:
        return st.column_config.NumberColumn(headers[k], format=number(k), width=width, **kwargs)
    return st.column_config.TextColumn(headers[k], width=width, **kwargs)


column_config = {  # short headers, each with its long form as help: a laptop's page shows every column, a phone most
    "model": _column("model", 150, pinned=True),  # in view while a phone scrolls
    "run with": _column("run with", 100, help=t("The routing the model is run with here")),
    "error %": _column("error %", 50, help=t("Test error, %")),
    "± chance": _column("± chance", 50, help=t("Two standard errors of the error")),
    "shifted acc. %": _column("shifted acc. %", 50, help=t("Accuracy on shifted and turned images, %")),
    "FGSM acc. %": _column("FGSM acc. %", 50, help=t("Accuracy under FGSM, epsilon {epsilon}, %", epsilon=epsilon_words)),
    "pair acc. %": _column("pair acc. %", 50, help=t("Pair accuracy on MultiMNIST test pairs, %")),
    "trained with": _column("trained with", 120, help=trained_help),
    "entropy %": _column("entropy %", 90, help=t(lab.ENTROPY_TITLE)),
    "c to pred.": _column("c to pred.", 90),
    "ms / image": _column("ms / image", 90),
    "ms range": _column("ms range", 160),
}
reads_pairs = any(r.pair_accuracy is not None for r in rows)  # else the pair column would say "-" on every row
for k, columns in enumerate(lab.SPLIT):  # two tables, each as wide as a laptop's page: no column hidden to the right
    shown = [c for c in columns if c != "trained with"] + [c for c in columns if c == "trained with"]  # numbers next to their model
    st.dataframe(
        [{name: c[name] for name in shown} for c in cells],
        hide_index=True,
        width="stretch",
        key=f"lab_table_{k}",
        column_order=[c for c in shown if c != "pair acc. %" or reads_pairs],
        column_config={name: column_config[name] for name in shown},
    )
first = rows[0]
machine = recorded(first.hardware) if first.hardware else t("the machine that measured it")
st.caption(
    t(
        "{columns} Time per image at batch {batch} on {machine}: the median of the timings, their range beside. {rule}",
        columns=lab.table_words(plain_rows),  # plain: no name in it, only counts
        batch=lab.TIME_BATCH,
        machine=machine,
        rule=lab.time_rule(),
    )
)

models_in = list(dict.fromkeys(r.model for r in rows))
by = {(r.model, r.run_with): r for r in rows}
bars = lambda values: {lab.routing_name(rt): values(rt) for rt in routings}  # noqa: E731 - a bar per routing, named in the reader's language
err = bars(lambda rt: [by[m, rt].test_error if (m, rt) in by else None for m in models_in])
band = bars(lambda rt: [rules.spread(by[m, rt].test_error, by[m, rt].n_test) if (m, rt) in by else 0 for m in models_in])
c = st.columns(2)
c[0].plotly_chart(
    chart(grouped_bars, models_in, err, t("Test error (lower is better), ± two standard errors"), t("test error %"), band), key="lab_err"
)
acc = bars(lambda rt: [by[m, rt].shifted_accuracy if (m, rt) in by else None for m in models_in])
c[1].plotly_chart(chart(grouped_bars, models_in, acc, t("Accuracy on shifted and turned images"), t("accuracy %")), key="lab_shift")
c = st.columns(2)
fg = bars(lambda rt: [by[m, rt].fgsm_accuracy if (m, rt) in by else None for m in models_in])
c[0].plotly_chart(
    chart(grouped_bars, models_in, fg, t("Accuracy under FGSM, epsilon {epsilon}", epsilon=f"{epsilon:g}"), t("accuracy %")), key="lab_fgsm"
)
ent = bars(lambda rt: [100 * by[m, rt].entropy_ratio if (m, rt) in by else None for m in models_in])
c[1].plotly_chart(chart(grouped_bars, models_in, ent, t(lab.ENTROPY_TITLE), "%"), key="lab_entropy")

st.subheader(t("The details, model by model"))
trained = {plain(r.model): r.trained_name for r in rows}
for name, lines in said.models.items():
    with st.expander(t("{model}, trained with {routing}", model=name, routing=trained[name])):  # plain: said_rows makes the names plain
        for line in lines:
            st.markdown("- " + line)  # plain: said_rows makes the names plain
if said.across:
    st.subheader(t("Across models"))
    for line in said.across:
        st.markdown("- " + line)  # plain: said_rows makes the names plain

for k, (study, plain_study) in enumerate(zip(studies, plain_studies, strict=True)):
    st.subheader(study.title(plain))  # plain: its names are made plain by title
    st.markdown(
        t(
            "One training run per routing cannot say whether a gap between routings is the routing or the luck of the "
            "draw: the starting weights and the order of the images (the *seed*). Here the same preset was trained with "
            "each routing from {k} seeds on a shorter schedule ({schedule}), so the gap between routings can be set beside "
            "the gap between seeds.",
            k=len(study.seeds),
            schedule=lab.architecture_words(plain(study.architecture)),  # plain: the study's name made plain inside
        )
    )
    c = st.columns([2, 3])
    c[0].plotly_chart(
        chart(
            seed_strip,
            {lab.routing_name(r): e for r, e in study.errors.items()},
            study.seeds,
            t("Error per seed (dots), mean (bar)"),
        ),
        key=f"lab_seeds_{k}_{lab.seeds_key(study)}",
    )
    with c[1]:
        for line in lab.seed_sentences(plain_study):  # whole: plain() would cut a long sentence, so only its names are made plain
            st.markdown("- " + line)  # plain: said_rows made the study's architecture plain
        machine = recorded(study.hardware) if study.hardware else t("an unnamed machine")
        st.caption(
            t(
                "Each error on {n} test images, from the training run's own evaluation; trained on {machine}. "
                "Command: `python -m capsviz.analysis.lab --seeds RUNS...` (RESULTS.md).",
                n=f"{study.n_test:,}",
                machine=machine,
            )
        )
if skipped:
    listed = t(", ").join(plain(s) for s in skipped[:5]) + (" ..." if len(skipped) > 5 else "")
    st.caption(
        tn(
            "{n} stored result could not be read and was left out (damaged, or from another version of capsviz): {listed}",
            "{n} stored results could not be read and were left out (damaged, or from another version of capsviz): {listed}",
            len(skipped),
            listed=listed,
        )
    )
