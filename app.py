"""capsviz: `streamlit run app.py`. Page setup, the shared sidebar, and navigation over pages/."""

import logging

import streamlit as st

st.set_page_config(page_title="capsviz", layout="wide")

from capsviz.i18n import t  # noqa: E402 - set_page_config must come first
from capsviz.serve import local_browser  # noqa: E402
from pages.classroom import SEATS, TURNS, person  # noqa: E402
from pages.common import routed  # noqa: E402
from pages.language import choose_language  # noqa: E402
from pages.projector import projector_switch, share_view  # noqa: E402
from pages.sidebar import sidebar  # noqa: E402
from pages.state import read_link  # noqa: E402
from pages.terms import glossary_links, start_page  # noqa: E402

read_link()  # the link this session opened with, once
choose_language()  # before any word is made

HOME = "pages/tour.py"
# The Teacher page is listed for the teacher only (and refuses anyone else who finds its address).
teacher_pages = [st.Page("pages/teacher.py", title=t("Teacher"), url_path="teacher")] if person()[1] else []
page = st.navigation(
    [
        # The default page is served at "/" and reserves its own path there (a link to it would
        # find no page), so "/" runs a hidden copy and every page listed keeps its path.
        st.Page(HOME, title=t("Home"), url_path="home", default=True, visibility="hidden"),
        st.Page("pages/why.py", title=t("Why capsules"), url_path="why"),
        st.Page(HOME, title=t("Guided tour"), url_path="tour"),
        st.Page("pages/zoo.py", title=t("Model zoo"), url_path="zoo"),
        st.Page("pages/playground.py", title=t("Routing playgrounds"), url_path="playground"),
        st.Page("pages/explorer.py", title=t("DigitCaps explorer"), url_path="explorer"),
        st.Page("pages/routing.py", title=t("Dynamic routing"), url_path="routing"),
        st.Page("pages/em.py", title=t("EM routing"), url_path="em"),
        st.Page("pages/multimnist.py", title=t("MultiMNIST"), url_path="multimnist"),
        st.Page("pages/robustness.py", title=t("Robustness"), url_path="robustness"),
        st.Page("pages/lab.py", title=t("Routing lab"), url_path="lab"),
        st.Page("pages/reproduction.py", title=t("Reproduction"), url_path="reproduction"),
        st.Page("pages/glossary.py", title=t("Glossary"), url_path="glossary"),
        st.Page("pages/train.py", title=t("Train"), url_path="train"),
        *teacher_pages,
    ],
    expanded=True,  # every page listed: Streamlit's own "View N more" would be English in every language
)
try:
    who, teacher = sidebar(page.url_path)  # the student's id, read once
    projector_switch()
    waiting = st.empty()
    if not teacher and TURNS.busy(who):
        waiting.info(t("Your other tab is still computing: this one follows as soon as it is done."))
    # a student's tabs run one at a time (several tabs weigh as one student), and a few students' runs at once
    with TURNS.take(who, teacher), SEATS.take(teacher), routed():
        waiting.empty()
        start_page()
        page.run()
    glossary_links(page.url_path)
    share_view(page.url_path)  # after the page has written its view into the address
except Exception as e:  # Streamlit's own stop and rerun are not Exceptions: they pass
    logging.getLogger("capsviz").exception("page %s failed", page.url_path)
    if local_browser(st.context.ip_address, st.context.headers):
        st.exception(e)  # a developer at the server sees the traceback (st.exception ignores showErrorDetails)
    else:
        st.error(t("This page met an unexpected error (it is logged on the server). Reload the page, or tell the teacher."))
