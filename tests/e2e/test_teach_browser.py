"""The teaching pages like a person: walk the guided tour with Back / Next (buttons and arrow keys)
for both model families, move a playground slider, and download a PNG and a GIF that must open as
images. Interaction timings are printed, not asserted. Screenshots go to the `shots` folder."""

import io
import re
import time

import pytest
from PIL import Image
from playwright.sync_api import expect
from st_helpers import wait_for_app_run
from test_browser import no_exceptions, open_page, shot

pytestmark = pytest.mark.e2e
TOUR = "A guided tour of a capsule network"


def download(page, button_name: str) -> Image.Image:
    """Click a download button and open what arrives as an image."""
    with page.expect_download() as info:
        page.get_by_role("button", name=button_name).click()
    data = open(info.value.path(), "rb").read()
    img = Image.open(io.BytesIO(data))
    img.load()
    return img


def walk(page, shots, name: str, n: int) -> list[float]:
    """Next through every step (a screenshot of each), timing each click to the new step on screen."""
    timings = []
    for k in range(1, n):
        expect(page.get_by_text(re.compile(rf"Step {k} of {n}"))).to_be_visible()
        wait_for_app_run(page)
        shot(page, shots, f"tour_{name}_{k}")
        t0 = time.perf_counter()
        page.get_by_role("button", name="Next").click()
        expect(page.get_by_text(re.compile(rf"Step {k + 1} of {n}"))).to_be_visible()
        timings.append(time.perf_counter() - t0)
    wait_for_app_run(page)
    shot(page, shots, f"tour_{name}_{n}")
    expect(page).to_have_url(re.compile(rf"step={n}"))
    expect(page.get_by_role("button", name="Next")).to_be_disabled()
    return timings


def test_tour_walks_a_capsnet_and_a_matrix_model(page, server, shots):
    open_page(page, server["url"] + "/?model=tiny-capsnet.safetensors", TOUR)  # the app's first page
    timings = walk(page, shots, "capsnet", 14)  # the chapter's three steps, the model's ten, where the student stands
    ms = sorted(round(1000 * t) for t in timings)
    print(f"tour: Next click -> next step on screen, ms: {ms}, median {ms[len(ms) // 2]}")
    page.get_by_role("button", name="Back").click()
    expect(page.get_by_text(re.compile(r"Step 13 of 14"))).to_be_visible()
    wait_for_app_run(page)
    for shown in (12, 11, 10):
        page.get_by_role("heading", name=TOUR).click()  # focus on the page, not a widget
        page.keyboard.press("ArrowLeft")  # the Back button's shortcut
        expect(page.get_by_text(re.compile(rf"Step {shown} of 14"))).to_be_visible()
        wait_for_app_run(page)
    expect(page).to_have_url(re.compile(r"step=10"))
    wait_for_app_run(page)
    gif = download(page, "Download every iteration (animated GIF)")
    assert gif.format == "GIF" and gif.n_frames == 3
    png = download(page, "Download this figure (PNG)")
    assert png.format == "PNG" and png.width > 300
    no_exceptions(page)

    # a shared link to a step of the matrix-capsule tour
    open_page(page, server["url"] + "/?model=tiny-matrix.safetensors&step=1", TOUR)
    walk(page, shots, "matrix", 9)
    no_exceptions(page)


def test_playground_slider_moves_the_couplings_and_the_gif_opens(page, server, shots):
    open_page(page, server["url"] + "/playground?preset=outliers&cap=5", "Routing playgrounds")
    figure = page.get_by_test_id("stImage").locator("img").first
    shot(page, shots, "playground_dynamic")
    slider = page.get_by_role("slider", name="prediction u_hat for upper 1: x")
    timings = []
    for key in ["ArrowRight", "ArrowLeft"] * 3:
        before = figure.get_attribute("src")
        slider.focus()
        t0 = time.perf_counter()
        page.keyboard.press(key)
        page.wait_for_function(
            "old => document.querySelector('[data-testid=stImage] img').getAttribute('src') !== old", arg=before, timeout=30_000
        )
        timings.append(time.perf_counter() - t0)
        wait_for_app_run(page)
    ms = sorted(round(1000 * t) for t in timings)
    print(f"playground: slider key press -> routing figure redrawn, ms: {ms}, median {ms[len(ms) // 2]}")
    expect(page).to_have_url(re.compile(r"cap=5"))
    gif = download(page, "Download every iteration (animated GIF)")
    assert gif.format == "GIF" and gif.n_frames == 3
    png = download(page, "Download this iteration (PNG)")
    assert png.format == "PNG"

    page.get_by_text("EM routing (matrix capsules)").click()
    wait_for_app_run(page)
    expect(page.get_by_text("Inverse temperature per iteration", exact=False)).to_be_visible()
    expect(page).to_have_url(re.compile(r"toy=em"))
    shot(page, shots, "playground_em")
    gif = download(page, "Download every iteration (animated GIF)")
    assert gif.n_frames == 3
    no_exceptions(page)
