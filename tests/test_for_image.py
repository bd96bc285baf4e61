"""The one cached call for "this model, this image" (pages.common.for_image): every page's
per-image computation goes through it, computed once per model, image, function and arguments."""

import numpy as np

from pages.active import for_image

calls = []


def double(model, image, times=2):
    calls.append((model, image.shape, times))
    return image * times


def half(model, image):
    calls.append((model, image.shape, "half"))
    return image / 2


def test_each_model_image_function_and_arguments_is_computed_once():
    calls.clear()
    image = np.arange(6, dtype=np.float32).reshape(2, 3)
    first = for_image(double, "m", image, key="model-a")
    np.testing.assert_array_equal(first, image * 2)
    np.testing.assert_array_equal(for_image(double, "m", image.copy(), key="model-a"), image * 2)
    assert len(calls) == 1  # the same model, image and function: computed once
    for_image(double, "m", image, 3, key="model-a")  # other arguments
    for_image(double, "m", image + 1, key="model-a")  # another image
    for_image(double, "m", image, key="model-b")  # another model (a retrained file is a new key)
    for_image(double, "m", image.reshape(3, 2), key="model-a")  # the same bytes in another shape
    np.testing.assert_array_equal(for_image(half, "m", image, key="model-a"), image / 2)  # another function
    assert len(calls) == 6
