"""A student is a browser, not a tab, in chromium: a reload or a second tab of the browser that
started a run still shows it and can stop it; another browser cannot."""

import pytest
from playwright.sync_api import expect
from st_helpers import new_page, outward_address, start_streamlit, stop_streamlit
from test_browser import no_exceptions, open_page
from test_train_browser import fill, set_name

pytestmark = pytest.mark.e2e


def test_a_reload_and_a_second_tab_keep_control_of_ones_run(browser, own_server):
    mine, other = (browser.new_context(viewport={"width": 1400, "height": 2400}) for _ in range(2))
    url = own_server["url"] + "/train"
    try:
        tab = new_page(mine)
        open_page(tab, url, "Train")
        fill(tab, "Batch size", 8)
        fill(tab, "Epochs", 20)
        fill(tab, "Training images (0 = all)", 600)
        set_name(tab, "kept")
        tab.get_by_role("button", name="Start training").click()
        expect(tab.get_by_test_id("stProgress").first).to_contain_text("kept: ")

        tab.reload()  # a new Streamlit session of the same browser
        expect(tab.get_by_role("heading", name="Your run")).to_be_visible()
        expect(tab.get_by_test_id("stProgress").first).to_contain_text("kept: ")
        expect(tab.get_by_role("button", name="Stop")).to_be_visible()
        expect(tab.get_by_role("button", name="Start training")).to_be_disabled()

        second = new_page(mine)  # another tab of the same browser
        open_page(second, url, "Train")
        expect(second.get_by_role("heading", name="Your run")).to_be_visible()

        stranger = new_page(other)  # another student's browser
        open_page(stranger, url, "Train")
        expect(stranger.get_by_text("Another student is training", exact=False).first).to_be_visible()
        expect(stranger.get_by_role("button", name="Stop")).to_have_count(0)

        second.get_by_role("button", name="Stop").click()
        expect(second.get_by_text("Stopped at step", exact=False)).to_be_visible(timeout=90_000)
        tab.reload()
        expect(tab.get_by_text("Stopped at step", exact=False)).to_be_visible()
        for pg in (tab, second, stranger):
            no_exceptions(pg)
    finally:
        mine.close()
        other.close()


def test_only_the_teacher_is_offered_clear_cache(browser, tmp_path_factory, app_env):
    """Streamlit's menu offers "Clear cache" to a browser on the server's own machine (the
    teacher's) and not to a student's browser on another machine; a student's clear-cache message
    sent anyway is ignored (tests/test_clear_cache.py)."""

    address = outward_address()
    if address is None:
        pytest.skip("this machine has no network address besides loopback")
    log = tmp_path_factory.mktemp("menu") / "server.log"
    proc, url = start_streamlit(app_env, log, address="0.0.0.0")
    port = url.rsplit(":", 1)[1]
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        for where, teacher in ((f"http://{address}:{port}", False), (url, True)):
            pg = new_page(ctx)
            open_page(pg, where + "/glossary", "Glossary")
            pg.get_by_test_id("stMainMenu").click()
            menu = pg.get_by_test_id("stMainMenuPopover")
            expect(menu.get_by_text("Print")).to_be_visible()  # the menu is open
            expect(menu.get_by_text("Clear cache")).to_have_count(1 if teacher else 0)
            assert not pg.errors, pg.errors
            pg.close()
    finally:
        ctx.close()
        stop_streamlit(proc)
