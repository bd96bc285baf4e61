"""capsviz: `streamlit run app.py`. Page setup, the shared sidebar, and navigation over pages/."""

import logging

import streamlit as st

st.set_page_config(page_title="capsviz", layout="wide")

from capsviz.serve import local_browser  # noqa: E402 - set_page_config must come first
from pages.common import TURNS, person, sidebar  # noqa: E402

HOME = "pages/tour.py"
# The Teacher page is listed for the teacher only (and refuses anyone else who finds its address).
teacher_pages = [st.Page("pages/teacher.py", title="Teacher", url_path="teacher")] if person()[1] else []
page = st.navigation(
    [
        # The default page is served at "/" and reserves its own path there (a link to it would
        # find no page), so "/" runs a hidden copy and every page listed keeps its path.
        st.Page(HOME, title="Home", url_path="home", default=True, visibility="hidden"),
        st.Page(HOME, title="Guided tour", url_path="tour"),
        st.Page("pages/zoo.py", title="Model zoo", url_path="zoo"),
        st.Page("pages/playground.py", title="Routing playgrounds", url_path="playground"),
        st.Page("pages/explorer.py", title="DigitCaps explorer", url_path="explorer"),
        st.Page("pages/routing.py", title="Dynamic routing", url_path="routing"),
        st.Page("pages/em.py", title="EM routing", url_path="em"),
        st.Page("pages/multimnist.py", title="MultiMNIST", url_path="multimnist"),
        st.Page("pages/robustness.py", title="Robustness", url_path="robustness"),
        st.Page("pages/lab.py", title="Routing lab", url_path="lab"),
        st.Page("pages/reproduction.py", title="Reproduction", url_path="reproduction"),
        st.Page("pages/glossary.py", title="Glossary", url_path="glossary"),
        st.Page("pages/train.py", title="Train", url_path="train"),
        *teacher_pages,
    ]
)
try:
    who, teacher = sidebar(page.url_path)  # the student's id, read once
    waiting = st.empty()
    if not teacher and TURNS.busy(who):
        waiting.info("Your other tab is still computing: this one follows as soon as it is done.")
    with TURNS.take(who, teacher):  # a student's tabs run one at a time: several tabs weigh as one student
        waiting.empty()
        page.run()
except Exception as e:  # Streamlit's own stop and rerun are not Exceptions: they pass
    logging.getLogger("capsviz").exception("page %s failed", page.url_path)
    if local_browser(st.context.ip_address, st.context.headers):
        st.exception(e)  # a developer at the server sees the traceback (st.exception ignores showErrorDetails)
    else:
        st.error("This page met an unexpected error (it is logged on the server). Reload the page, or tell the teacher.")
