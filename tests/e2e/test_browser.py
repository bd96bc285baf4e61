"""Like a person: open every page in chromium, pick a model, slide a capsule dimension, train a
tiny model to completion, and meet a missing-data state. Screenshots go to E2E_SCREENSHOT_DIR."""

import re
import time

import pytest
from playwright.sync_api import expect
from st_helpers import wait_for_app_run

pytestmark = pytest.mark.e2e


def shot(page, shots, name):
    path = shots / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000
    return path


def no_exceptions(page):
    assert page.get_by_test_id("stException").count() == 0
    assert not page.errors, page.errors


def open_page(page, url, title):
    page.goto(url)
    wait_for_app_run(page)
    expect(page.get_by_role("heading", name=title)).to_be_visible()


def test_zoo_page_and_model_picker(page, server, shots):
    open_page(page, server["url"] + "/zoo", "capsviz: watch capsules route")
    expect(page.get_by_text("tiny-capsnet", exact=True)).to_be_visible()
    expect(page.get_by_test_id("stPlotlyChart").first).to_be_visible()
    expect(page.get_by_test_id("stMetricValue").nth(1)).to_have_text("12.50%")
    shot(page, shots, "zoo")
    page.get_by_role("button", name="Use this model").nth(2).click()  # cards: tiny-capsnet, tiny-cnn, tiny-matrix, ...
    wait_for_app_run(page)
    shot(page, shots, "zoo_after_pick")
    expect(page).to_have_url(re.compile(r"model=tiny-matrix\.safetensors"))  # waits for the rerun the click starts
    page.get_by_test_id("stSidebarNav").get_by_text("DigitCaps explorer").click()
    wait_for_app_run(page)
    expect(
        page.get_by_text("the model in the sidebar, is a matrix-capsule model", exact=False)
    ).to_be_visible()  # the pick holds on every page
    no_exceptions(page)


def test_explorer_slider_changes_reconstruction_fast(page, server, shots):
    open_page(page, server["url"] + "/explorer?model=tiny-capsnet.safetensors&image=3", "DigitCaps explorer")
    expect(page.get_by_test_id("stNumberInput").get_by_role("spinbutton")).to_have_value("3")
    perturbed = page.locator("[data-testid='stImage'] img").nth(2)
    expect(perturbed).to_be_visible()
    shot(page, shots, "explorer")
    timings = []
    thumb = page.get_by_role("slider", name="d5")
    for key in ["ArrowRight"] * 5 + ["ArrowLeft", "ArrowRight"]:  # 0.05, 0.10, ... 0.25, 0.20, 0.25
        old = perturbed.get_attribute("src")
        thumb.focus()
        t0 = time.perf_counter()
        page.keyboard.press(key)
        page.wait_for_function(
            "([el, old]) => el.src !== old && el.complete && el.naturalWidth > 0", arg=[perturbed.element_handle(), old], polling="raf"
        )
        timings.append(time.perf_counter() - t0)
        wait_for_app_run(page)
    expect(page.get_by_text("perturbed: d5 +0.25")).to_be_visible()
    ms = sorted(round(1000 * t) for t in timings)
    print(f"slider key press -> new reconstruction in the browser, ms: {ms}, median {ms[3]}")
    shot(page, shots, "explorer_perturbed")
    page.get_by_role("button", name="Reset all to 0").click()
    wait_for_app_run(page)
    expect(page.get_by_text("perturbed: none")).to_be_visible()
    expect(page.get_by_role("button", name="Download grid as PNG")).to_be_visible()
    no_exceptions(page)


def test_explorer_explains_matrix_model(page, server, shots):
    open_page(page, server["url"] + "/explorer?model=tiny-matrix.safetensors", "DigitCaps explorer")
    expect(page.get_by_text("this page needs a CapsNet with a decoder", exact=False)).to_be_visible()
    expect(page.get_by_role("button", name="Use tiny-capsnet on every page")).to_be_visible()
    no_exceptions(page)


def test_train_tiny_model_to_completion_and_see_it_in_the_zoo(page, server, shots):
    open_page(page, server["url"] + "/train", "Train")
    expect(page.get_by_text("estimate: about", exact=False)).to_be_visible()
    page.get_by_label("Training images (0 = all)").fill("96")
    page.get_by_label("Batch size").fill("32")
    page.get_by_label("Save as", exact=True).and_(page.get_by_test_id("stTextInputField")).fill("browser-run")
    page.get_by_role("button", name="Start training").click()
    expect(page.get_by_text(re.compile(r"browser-run: step \d+/3"))).to_be_visible()
    # .first: while the polling fragment hands over to the full rerun, the message can briefly exist twice
    expect(page.get_by_text("Finished", exact=False).first).to_be_visible(timeout=120_000)
    # the final state: polling has handed over to a full rerun, so Start is offered again
    expect(page.get_by_role("button", name="Start training")).to_be_enabled()
    expect(page.get_by_role("button", name="Stop")).to_have_count(0)
    wait_for_app_run(page)
    expect(page.get_by_text(re.compile(r"epoch 1: test error"))).to_be_visible()
    shot(page, shots, "train_done")
    assert (server["checkpoints"] / "browser-run.safetensors").is_file()
    open_page(page, server["url"] + "/zoo", "capsviz: watch capsules route")
    expect(page.get_by_text("browser-run", exact=True)).to_be_visible()
    no_exceptions(page)


def test_missing_data_says_what_to_do(page, server_without_data, shots):
    # This server's first request is a deep link: the app's own navigation must still be in charge.
    open_page(page, server_without_data["url"] + "/explorer?model=tiny-capsnet.safetensors", "DigitCaps explorer")
    nav = page.get_by_test_id("stSidebarNav")
    expect(nav.get_by_text("Model zoo")).to_be_visible()
    expect(nav.get_by_text("common")).to_have_count(0)
    expect(page.get_by_test_id("stSidebar").get_by_text("Active model")).to_be_visible()
    expect(page.get_by_text("test images are not available", exact=False)).to_be_visible()
    expect(page.get_by_text("python -m capsviz data --download", exact=False).first).to_be_visible()
    shot(page, shots, "missing_data")
    no_exceptions(page)


def test_routing_page_iteration_slider_redraws_the_coupling_maps(page, server, shots):
    open_page(page, server["url"] + "/routing?model=tiny-capsnet.safetensors&image=2", "Dynamic routing, iteration by iteration")
    title = page.locator("[data-testid='stPlotlyChart'] .gtitle").first
    expect(title).to_contain_text("Iteration 3")
    shot(page, shots, "routing")
    slider = page.get_by_role("slider", name="Show iteration")
    timings = []
    for key, want in [("Home", "Iteration 1"), ("End", "Iteration 3")] * 2 + [("Home", "Iteration 1")]:
        slider.focus()
        t0 = time.perf_counter()
        page.keyboard.press(key)
        expect(title).to_contain_text(want)
        timings.append(time.perf_counter() - t0)
        wait_for_app_run(page)
    ms = sorted(round(1000 * t) for t in timings)
    print(f"routing: iteration key press -> coupling maps redrawn, ms: {ms}, median {ms[2]}")
    expect(page.get_by_text("Paper (Fig. A.1)", exact=False)).to_be_visible()
    shot(page, shots, "routing_iteration1")
    no_exceptions(page)


def test_em_page_draws_vote_histograms(page, server, shots):
    open_page(page, server["url"] + "/em?model=tiny-matrix.safetensors&image=2", "EM routing, iteration by iteration")
    expect(page.get_by_text("Shown: vote distances from 0 to", exact=False)).to_be_visible()  # the histograms: an image
    page.get_by_text("Zoom in on the nearest votes", exact=False).click()
    wait_for_app_run(page)
    expect(page.get_by_role("button", name="Download all 2 iterations (animated GIF)")).to_be_visible()
    shot(page, shots, "em")
    no_exceptions(page)


def test_draw_a_digit_and_see_it_classified(page, server, shots):
    open_page(page, server["url"] + "/explorer?model=tiny-capsnet.safetensors", "DigitCaps explorer")
    page.get_by_text("Draw", exact=True).click()
    wait_for_app_run(page)
    pad = page.locator("canvas[aria-label='drawing pad']")
    expect(pad).to_be_visible()
    box = pad.bounding_box()
    x = box["x"] + box["width"] / 2
    page.mouse.move(x, box["y"] + 40)
    page.mouse.down()
    for k in range(1, 11):
        page.mouse.move(x + 2 * k, box["y"] + 40 + 20 * k)
    page.mouse.up()
    expect(page.get_by_text("input (label drawn)")).to_be_visible(timeout=30_000)
    expect(page.get_by_text(re.compile(r"Prediction: \d"))).to_be_visible()
    shot(page, shots, "explorer_drawn")
    no_exceptions(page)


def test_upload_a_picture_and_an_odd_file(page, server, shots, tmp_path):
    import io

    import numpy as np
    from PIL import Image

    ink = np.full((120, 90), 235, np.uint8)  # a dark '1' on light paper, as a phone photo would have it
    ink[15:105, 40:52] = 30
    buf = io.BytesIO()
    Image.fromarray(ink).save(buf, format="JPEG")
    photo = tmp_path / "digit.jpg"
    photo.write_bytes(buf.getvalue())
    fake = tmp_path / "notes.png"
    fake.write_text("not a picture at all")

    open_page(page, server["url"] + "/explorer?model=tiny-capsnet.safetensors", "DigitCaps explorer")
    page.get_by_text("Upload", exact=True).click()
    wait_for_app_run(page)
    page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(str(photo))
    expect(page.get_by_text("input (label ?)")).to_be_visible(timeout=30_000)
    expect(page.get_by_text(re.compile(r"Prediction: \d"))).to_be_visible()
    shot(page, shots, "explorer_uploaded")
    page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(str(fake))
    expect(page.get_by_text("not a picture capsviz can read", exact=False)).to_be_visible(timeout=30_000)
    expect(page.get_by_text("input (label ?)")).to_have_count(0)
    no_exceptions(page)


def test_multimnist_pair_shows_both_overlays(page, server, shots):
    open_page(
        page,
        server["url"] + "/multimnist?model=tiny-multimnist.safetensors&pair=3,8,-2,1,2,-3",
        "MultiMNIST: two digits on top of each other",
    )
    expect(page.get_by_role("spinbutton", name="First digit (test index)")).to_have_value("3")
    overlay = page.get_by_text(re.compile(r"^red: capsule \d \(.*\), green: capsule \d \(.*\); over the input with labels \d and \d$"))
    expect(overlay).to_be_visible()
    expect(page.get_by_text(re.compile(r"^red: capsule \d \(.*\) alone$"))).to_be_visible()
    expect(page.get_by_text(re.compile(r"^green: capsule \d \(.*\) alone$"))).to_be_visible()
    expect(page.get_by_text("segmentation of the input's ink")).to_be_visible()
    first = page.locator("[data-testid='stImage'] img").first
    old = first.get_attribute("src")
    page.get_by_role("spinbutton", name="dx 2").fill("4")
    page.keyboard.press("Enter")
    wait_for_app_run(page)
    expect(page).to_have_url(re.compile(r"pair=3%2C8%2C-2%2C1%2C2%2C4|pair=3,8,-2,1,2,4"))
    # the URL is written early in the rerun; the new image arrives later, so wait for it
    expect(first).not_to_have_attribute("src", old, timeout=30_000)
    shot(page, shots, "multimnist")
    page.get_by_role("button", name="Measure accuracy").click()
    expect(page.get_by_test_id("stMetricLabel").get_by_text("Pair error")).to_be_visible(timeout=60_000)
    expect(page.get_by_text("The hardest pairs", exact=False)).to_be_visible()
    shot(page, shots, "multimnist_accuracy")
    no_exceptions(page)


def test_robustness_affine_slider_updates_both_predictions(page, server, shots):
    open_page(
        page, server["url"] + "/robustness?model=tiny-capsnet.safetensors&image=4", "Robustness: affine transforms and adversarial attacks"
    )
    titles = page.locator("[data-testid='stPlotlyChart'] .gtitle")
    expect(titles.filter(has_text="tiny-capsnet:")).to_have_count(1)
    expect(titles.filter(has_text="tiny-cnn:")).to_have_count(1)
    image = page.locator("[data-testid='stImage'] img").first
    old = image.get_attribute("src")
    page.get_by_role("slider", name="rotate (degrees)").focus()
    for _ in range(6):
        page.keyboard.press("ArrowRight")
    wait_for_app_run(page)
    page.wait_for_function("([el, old]) => el.src !== old", arg=[image.element_handle(), old])
    expect(titles.filter(has_text="tiny-cnn:")).to_have_count(1)
    shot(page, shots, "robustness_affine")
    page.get_by_role("tab", name="Adversarial attacks").click()
    page.get_by_role("button", name="Run the attack sweep").click()
    expect(titles.filter(has_text="FGSM accuracy on 100 test digits")).to_be_visible(timeout=120_000)
    expect(page.get_by_text("Fraction of zero input gradients", exact=False)).to_be_visible()
    shot(page, shots, "robustness_fgsm")
    no_exceptions(page)


def test_reproduction_table(page, server, shots):
    open_page(page, server["url"] + "/reproduction", "Reproduction: our checkpoints beside the papers")
    expect(page.get_by_role("cell", name="0.25")).to_be_visible()
    expect(page.get_by_text("How each was measured")).to_be_visible()
    shot(page, shots, "reproduction")
    no_exceptions(page)


def test_a_long_sweep_can_be_cancelled(page, own_server, shots):
    open_page(
        page, own_server["url"] + "/robustness?model=tiny-capsnet.safetensors", "Robustness: affine transforms and adversarial attacks"
    )
    page.get_by_role("tab", name="Adversarial attacks").click()
    page.get_by_text("BIM", exact=True).click()
    wait_for_app_run(page)
    slider = page.get_by_role("slider", name="Test images")
    slider.focus()
    page.keyboard.press("End")  # all 200 synthetic test images x 7 epsilons x 3 models (CapsNet, CNN, matrix capsules)
    wait_for_app_run(page)
    page.get_by_role("button", name="Run the attack sweep").click()
    expect(page.get_by_text(re.compile(r"Run the attack sweep: \d+ / 4200"))).to_be_visible()
    page.get_by_role("button", name="Cancel").click()
    expect(page.get_by_text("cancelled before it finished", exact=False)).to_be_visible()
    expect(page.locator("[data-testid='stPlotlyChart'] .gtitle").filter(has_text="BIM accuracy")).to_have_count(0)
    expect(page.get_by_role("button", name="Run the attack sweep")).to_be_visible()
    shot(page, shots, "robustness_cancelled")
    no_exceptions(page)
