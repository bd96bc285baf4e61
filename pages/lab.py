"""Routing lab: does routing matter? The same capsules run with each routing, measured side by side."""

import streamlit as st

from capsviz.analysis import lab, rules
from capsviz.data.user import short_name
from capsviz.glossary import help_text
from capsviz.registry import either
from capsviz.text import plain
from capsviz.viz import grouped_bars, seed_strip
from pages.active import checkpoints, load_model, page_model, test_set
from pages.common import require_router, said_rows
from pages.drawn import chart
from pages.inputs import long_job
from pages.linking import keep_choice, link_choices
from pages.state import STATE

require_router()

st.title("Routing lab: does routing matter?")
st.markdown(
    "In a capsule network, routing decides how much of each part's vote goes to each class. The tour showed that "
    "dynamic routing leaves most couplings near uniform; so does routing matter, and does another routing do better? "
    "Here the **same trained capsules** are run with each routing, and models of one architecture **trained** with "
    "different routings are compared. Two axes: *trained with* (how the weights were learned) and *run with* (how the "
    "votes are combined now; the model itself is not changed). The short answer comes first; every sentence on this "
    "page is computed from the table."
)

model, meta, path = page_model(
    lambda m: lab.fits(m.config),
    f"a vector-capsule model (a {either('lab')}) whose routing can be swapped",
    f"**{{name}}** is {{family}}; the lab swaps the routing of vector capsules. Choose a {either('lab')}.",
)

fitting = {p.stem: (p, m) for p, m in checkpoints() if lab.fits(m.config)}
same_data = [name for name, (_, m) in fitting.items() if m.image_dataset == meta.image_dataset]
c = st.columns([3, 2])
with c[0]:
    link_choices(STATE.lab_models, list(fitting), same_data, "models", label=plain)
with c[1]:
    link_choices(STATE.lab_routings, list(lab.LAB_ROUTINGS), list(lab.LAB_ROUTINGS), "routings", label=lab.LAB_ROUTINGS.get)
chosen = c[0].multiselect(
    "Models",
    list(fitting),
    default=same_data,
    format_func=plain,
    key=STATE.lab_models.key,
    bind="query-params",
    help="Vector-capsule models in the model folder; the default is every one trained on the same images as the model in the sidebar.",
)
routings = c[1].multiselect(
    "Run with",
    list(lab.LAB_ROUTINGS),
    default=list(lab.LAB_ROUTINGS),
    format_func=lambda r: lab.LAB_ROUTINGS[r],
    key=STATE.lab_routings.key,
    bind="query-params",
    help=help_text("uniform", "random_couplings", "iteration", "self_attention"),
)
s = st.columns(2)
counts, epsilons = [1000, 2000, 5000, lab.TEST_IMAGES], [0.05, 0.1, 0.2]
with s[0]:
    keep_choice(STATE.lab_test, counts, lab.TEST_IMAGES, "test images")
with s[1]:
    keep_choice(STATE.lab_epsilon, epsilons, lab.FGSM_EPSILON, "FGSM epsilon")
n_test = s[0].select_slider(
    "Test images for the error",
    counts,
    value=lab.TEST_IMAGES,
    key=STATE.lab_test.key,
    bind="query-params",
    help="The whole MNIST test set (10,000) is the default: with fewer images, chance hides small differences.",
)
epsilon = s[1].select_slider(
    "FGSM epsilon",
    epsilons,
    value=lab.FGSM_EPSILON,
    key=STATE.lab_epsilon.key,
    bind="query-params",
    help=help_text("fgsm", "epsilon"),
)
if not chosen or not routings:
    st.info("Pick at least one model and one routing.")
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
        f"The test images of {', '.join(f'**{n}**' for n in without)} are not available on this server "
        f"({', '.join(plain(d) for d in sorted({short_name(fitting[n][1].image_dataset) for n in without}))}), so "
        f"{'it is' if len(without) == 1 else 'they are'} left out of the lab unless stored results are kept for them.",
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


job = f"lab:{'|'.join(chosen)}:{'|'.join(routings)}:{n_test}:{epsilon}"
missing = sum((p.stem, r) not in have for p, _ in entries for r in routings)
if missing:
    st.caption(f"{missing} of the {len(entries) * len(routings)} rows are not stored for these settings yet: they run once, then stay.")
rows = long_job(job, "Run the lab", run, stored=all_stored)
if rows is None:
    st.stop()

shown = {lab.preset_and_data(fitting[n][1]) for n in chosen}
found = lab.stored_studies(skipped=skipped) + lab.studies_in((m for _, m in fitting.values()), names=list(fitting))
# a study made of this folder's models (a student's runs) never takes the place of one shipped with the app
studies = list({(st_.architecture, st_.shipped, st_.models): st_ for st_ in found if st_.preset_and_data in shown}.values())
plain_rows, plain_studies = said_rows(rows, studies)  # their names made plain, for the sentences written about them
said = lab.report(plain_rows, plain_studies)

st.subheader("Does routing matter? The short answer")
c = st.columns([3, 2])
with c[0]:
    st.caption("What the table below shows, in a few sentences; each model's details follow it.")
    for line in said.short:
        st.markdown("- " + line)  # plain: said_rows makes the names plain
with c[1]:
    st.subheader("What others found (published, not measured here)")
    for line in lab.PUBLISHED:
        st.markdown("- " + plain(line))
for line in said.hidden:
    st.info(line, icon=":material/visibility_off:")  # plain: said_rows makes the names plain

st.subheader("The table")
cells = lab.table(rows)
cells = [c | {"trained with": c["trained with"].split(" (")[0]} for c in cells]  # short in the table, whole in its header's help
whole = sorted({r.trained for r in rows if " (" in r.trained})
column_config = {  # short headers, each with its long form as help: a laptop's page shows every column, a phone most
    "model": st.column_config.TextColumn(width=150, pinned=True),  # stays in view while a phone scrolls to the numbers
    "run with": st.column_config.TextColumn(width=100, help="The routing the model is run with here"),
    "error %": st.column_config.NumberColumn(format=f"%.{lab.DECIMALS['error %']}f", width=66, help="Test error, %"),
    "± chance": st.column_config.NumberColumn(format=f"%.{lab.DECIMALS['± chance']}f", width=70, help="Two standard errors of the error"),
    "shifted acc. %": st.column_config.NumberColumn(
        "shifted %", format=f"%.{lab.DECIMALS['shifted acc. %']}f", width=70, help="Accuracy on shifted and turned images, %"
    ),
    "FGSM acc. %": st.column_config.NumberColumn(
        f"FGSM {epsilon:g} %", format=f"%.{lab.DECIMALS['FGSM acc. %']}f", width=78, help=f"Accuracy under FGSM, epsilon {epsilon:g}, %"
    ),
    "pair acc. %": st.column_config.TextColumn("pair %", width=62, help="Pair accuracy on MultiMNIST test pairs, %"),
    "trained with": st.column_config.TextColumn(
        width=190, help="The routing the model was trained with" + (f"; in full: {'; '.join(plain(w) for w in whole)}" if whole else "")
    ),
    "entropy %": st.column_config.NumberColumn(format=f"%.{lab.DECIMALS['entropy %']}f", width=90, help=lab.ENTROPY_TITLE),
    "c to pred.": st.column_config.NumberColumn(format=f"%.{lab.DECIMALS['c to pred.']}f", width=90),
    "ms / image": st.column_config.NumberColumn(format=f"%.{lab.DECIMALS['ms / image']}f", width=90),
    "ms range": st.column_config.TextColumn(width=160),
}
for k, columns in enumerate(lab.SPLIT):  # two tables, each as wide as a laptop's page: no column hidden to the right
    shown = [c for c in columns if c != "trained with"] + [c for c in columns if c == "trained with"]  # numbers next to their model
    st.dataframe(
        [{name: c[name] for name in shown} for c in cells],
        hide_index=True,
        width="stretch",
        key=f"lab_table_{k}",
        column_order=shown,
        column_config={name: column_config[name] for name in shown},
    )
first = rows[0]
st.caption(
    lab.table_words(plain_rows)  # plain: no name in it, only counts
    + f" Time per image at batch {lab.TIME_BATCH} on {plain(first.hardware or 'the machine that measured it')}: the median of "
    f"the timings, their range beside. {lab.TIME_RULE}"
)

models_in = list(dict.fromkeys(r.model for r in rows))
by = {(r.model, r.run_with): r for r in rows}
err = {rt: [by[m, rt].test_error if (m, rt) in by else None for m in models_in] for rt in routings}
band = {rt: [rules.spread(by[m, rt].test_error, by[m, rt].n_test) if (m, rt) in by else 0 for m in models_in] for rt in routings}
c = st.columns(2)
c[0].plotly_chart(
    chart(grouped_bars, models_in, err, "Test error (lower is better), ± two standard errors", "test error %", band), key="lab_err"
)
acc = {rt: [by[m, rt].shifted_accuracy if (m, rt) in by else None for m in models_in] for rt in routings}
c[1].plotly_chart(chart(grouped_bars, models_in, acc, "Accuracy on shifted and turned images", "accuracy %"), key="lab_shift")
c = st.columns(2)
fg = {rt: [by[m, rt].fgsm_accuracy if (m, rt) in by else None for m in models_in] for rt in routings}
c[0].plotly_chart(chart(grouped_bars, models_in, fg, f"Accuracy under FGSM, epsilon {epsilon:g}", "accuracy %"), key="lab_fgsm")
ent = {rt: [100 * by[m, rt].entropy_ratio if (m, rt) in by else None for m in models_in] for rt in routings}
c[1].plotly_chart(chart(grouped_bars, models_in, ent, lab.ENTROPY_TITLE, "%"), key="lab_entropy")

st.subheader("The details, model by model")
trained = {plain(r.model): r.trained for r in rows}
for name, lines in said.models.items():
    with st.expander(f"{name}, trained with {trained[name]}"):  # plain: said_rows makes the names plain
        for line in lines:
            st.markdown("- " + line)  # plain: said_rows makes the names plain
if said.across:
    st.subheader("Across models")
    for line in said.across:
        st.markdown("- " + line)  # plain: said_rows makes the names plain

for k, (study, plain_study) in enumerate(zip(studies, plain_studies, strict=True)):
    st.subheader(study.title(plain))  # plain: its names are made plain by title
    st.markdown(
        "One training run per routing cannot say whether a gap between routings is the routing or the luck of the "
        "draw: the starting weights and the order of the images (the *seed*). Here the same preset was trained with "
        f"each routing from {len(study.seeds)} seeds on a shorter schedule ({plain(study.architecture)}), so the gap between "
        "routings can be set beside the gap between seeds."
    )
    c = st.columns([2, 3])
    c[0].plotly_chart(
        chart(seed_strip, study.errors, study.seeds, "Error per seed (dots), mean (bar)"),
        key=f"lab_seeds_{k}_{lab.seeds_key(study)}",
    )
    with c[1]:
        for line in lab.seed_sentences(plain_study):  # whole: plain() would cut a long sentence, so only its names are made plain
            st.markdown("- " + line)  # plain: said_rows made the study's architecture plain
        st.caption(
            f"Each error on {study.n_test:,} test images, from the training run's own evaluation; trained on {plain(study.hardware or 'an unnamed machine')}. "
            "Command: `python -m capsviz.analysis.lab --seeds RUNS...` (RESULTS.md)."
        )
if skipped:
    st.caption(
        f"{len(skipped)} stored result(s) could not be read and were left out (damaged, or from another version of capsviz): "
        + ", ".join(plain(s) for s in skipped[:5])
        + (" ..." if len(skipped) > 5 else "")
    )
