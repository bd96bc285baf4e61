"""The robustness page's sweep chart (third walk, F7): at a phone's width the legend must not take
half the plot, and the "guessing" label must sit clear of the lines."""

import pytest

from capsviz.viz import clear_side, sweep_lines


def test_the_legend_sits_above_the_plot_not_beside_it():
    fig = sweep_lines(
        [0.0, 0.1, 0.2],
        {"capsnet-small-mnist": [99.0, 60.0, 20.0], "cnn-small-mnist": [99.0, 30.0, 5.0]},
        "t",
        "epsilon",
        "accuracy %",
        10.0,
    )
    legend = fig.layout.legend
    assert legend.orientation == "h" and legend.y >= 1 and legend.yanchor == "bottom"  # a row above the plot, full width below
    assert fig.layout.margin.t >= 100  # room for the title and the legend's rows above the plot


@pytest.mark.parametrize(
    "series, level, where",
    [
        # the attack curves: high at epsilon 0, down near guessing at the end: the label goes under the line, at the left
        ({"a": [99.0, 40.0, 12.0], "b": [98.0, 20.0, 9.0]}, 10.0, "bottom left"),
        # lines that end far above the level and start near it: the right end, under the line
        ({"a": [11.0, 60.0, 90.0]}, 10.0, "bottom right"),
        # lines below the level at the clearer end: the label above the line
        ({"a": [2.0, 30.0, 9.0]}, 50.0, "top left"),
    ],
)
def test_the_guessing_label_goes_where_the_lines_leave_room(series, level, where):
    assert clear_side(series, level) == where
    fig = sweep_lines([0.0, 0.1, 0.2], series, "t", "epsilon", "accuracy %", level)
    (label,) = fig.layout.annotations
    assert label.text == "guessing"
    assert {"left": label.x < 0.5, "right": label.x > 0.5}[where.split()[1]]  # placed at that end of the line
    assert label.yanchor == ("top" if where.startswith("bottom") else "bottom")  # hangs below (or stands above) the line


def test_a_chart_without_guessing_has_no_label():
    assert not sweep_lines([0.0, 1.0], {"a": [99.0, 90.0]}, "t", "strength", "accuracy %").layout.annotations
