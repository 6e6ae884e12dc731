"""What a figure plots, read back from the drawn figure (analysis/shown/figure_data.py): the numbers a
reader gets in figure_data.json and verify compares with the figures drawn again."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from rlvr_scaling.analysis.shown.figure_data import first_difference, plotted_data  # noqa: E402


def test_the_numbers_of_error_bars_lines_and_bars_are_read_back_with_their_labels() -> None:
    fig, (left, right) = plt.subplots(1, 2)
    left.errorbar([1, 2, 4], [3.0, 5.0, 6.0], yerr=[0.5, 1.0, 0.25], label="gsm8k")
    left.plot([1, 2, 4], [1, 2, 4], label="ideal")
    left.plot([1, 2], [7, 7])  # no label
    left.set_title("speedup")
    right.barh(0, 2.5, left=1.0, label="generation")
    plt.close(fig)
    left_data, right_data = plotted_data(fig)
    assert left_data["title"] == "speedup"
    assert left_data["series"] == [
        {"label": "gsm8k", "x": [1, 2, 4], "y": [3, 5, 6], "bars": [[2.5, 3.5], [4, 6], [5.75, 6.25]]}
    ]
    assert left_data["lines"] == [
        {"label": "ideal", "x": [1, 2, 4], "y": [1, 2, 4]},
        {"label": None, "x": [1, 2], "y": [7, 7]},
    ]
    assert left_data["bars"] == []
    assert right_data["bars"] == [{"label": "generation", "x": 1.0, "y": -0.4, "width": 2.5, "height": 0.8}]


def test_a_difference_is_named_by_its_path_and_float_printing_is_no_difference() -> None:
    bundled = {"figure2": [{"series": [{"label": "gsm8k", "y": [100.0, 97.5]}]}]}
    assert (
        first_difference(bundled, {"figure2": [{"series": [{"label": "gsm8k", "y": [100.0, 97.5 + 1e-12]}]}]}) is None
    )
    moved = {"figure2": [{"series": [{"label": "gsm8k", "y": [100.0, 97.6]}]}]}
    assert first_difference(bundled, moved) == "figure2[0].series[0].y[1]: 97.5 in the bundle, recomputed 97.6"
    assert first_difference(bundled, {"figure2": [{"series": []}]}) == (
        "figure2[0].series: 1 items in the bundle, recomputed 0"
    )
    assert first_difference(bundled, {**bundled, "figure9": []}) == "figure9: only in the recomputed data"
    assert first_difference({"a": None}, {"a": 0.0}) == "a: None in the bundle, recomputed 0.0"
