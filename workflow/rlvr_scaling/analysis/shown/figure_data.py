"""What each figure plots, read back from the drawn matplotlib figure: every axis's lines (with their
labels), bars and error bars, as numbers. Written beside the figures (figure_data.json), so a reader
can take the numbers without digitising a PNG, and `verify` draws the figures again from the bundled
summaries and compares these numbers (the PNG and PDF bytes depend on the fonts and matplotlib build)."""

from __future__ import annotations

import math
from typing import Any

DATA_FILE = "figure_data.json"
RELATIVE_TOLERANCE = 1e-9  # the same summaries through the same code; only float printing may differ


def _number(value: Any) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _numbers(values: Any) -> list[float | None]:
    return [_number(v) for v in values]


def _label(label: object) -> str | None:
    """matplotlib names an unlabelled artist "_child3", "_nolegend_"...: no label (nor for a label set to None,
    which matplotlib's get_label returns as it is)."""
    return label if isinstance(label, str) and not label.startswith("_") else None


def _error_bars(container: Any) -> dict[str, Any]:
    """One errorbar() call: its label, points, and each point's bar as [low, high]."""
    data_line, _caps, (bars, *_rest) = container.lines
    return {
        "label": _label(container.get_label()),
        "x": _numbers(data_line.get_xdata()),
        "y": _numbers(data_line.get_ydata()),
        "bars": [_numbers(sorted(point[1] for point in segment)) for segment in bars.get_segments()],
    }


def plotted_data(fig: Any) -> list[dict[str, Any]]:
    """Every axis of `fig` in drawing order (a legend is no axis): its error-bar series, its other
    lines and its bars, each with its label."""
    from matplotlib.container import BarContainer, ErrorbarContainer
    from matplotlib.patches import Rectangle

    axes = []
    for ax in fig.axes:
        with_bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
        drawn_by_errorbar = {id(line) for c in with_bars for line in (c.lines[0], *c.lines[1])}
        # A bar's label is its bar() call's (the patch itself has none).
        bar_labels = {id(p): c.get_label() for c in ax.containers if isinstance(c, BarContainer) for p in c.patches}
        axes.append(
            {
                "title": ax.get_title(),
                "xlabel": ax.get_xlabel(),
                "ylabel": ax.get_ylabel(),
                "series": [_error_bars(c) for c in with_bars],
                "lines": [
                    {
                        "label": _label(line.get_label()),
                        "x": _numbers(line.get_xdata()),
                        "y": _numbers(line.get_ydata()),
                    }
                    for line in ax.lines
                    if id(line) not in drawn_by_errorbar
                ],
                "bars": [
                    {
                        "label": _label(bar_labels.get(id(p)) or p.get_label()),
                        "x": _number(p.get_x()),
                        "y": _number(p.get_y()),
                        "width": _number(p.get_width()),
                        "height": _number(p.get_height()),
                    }
                    for p in ax.patches
                    if isinstance(p, Rectangle)
                ],
            }
        )
    return axes


def first_difference(bundled: Any, recomputed: Any, path: str = "") -> str | None:
    """Where two figure data documents differ (numbers within RELATIVE_TOLERANCE are the same)."""
    if isinstance(bundled, bool) or isinstance(recomputed, bool):
        same = bundled is recomputed
    elif isinstance(bundled, int | float) and isinstance(recomputed, int | float):
        same = math.isclose(bundled, recomputed, rel_tol=RELATIVE_TOLERANCE, abs_tol=1e-12)
    elif isinstance(bundled, dict) and isinstance(recomputed, dict):
        for key in sorted(set(bundled) | set(recomputed), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in bundled or key not in recomputed:
                return f"{where}: only in the {'bundle' if key in bundled else 'recomputed data'}"
            found = first_difference(bundled[key], recomputed[key], where)
            if found:
                return found
        return None
    elif isinstance(bundled, list) and isinstance(recomputed, list):
        if len(bundled) != len(recomputed):
            return f"{path}: {len(bundled)} items in the bundle, recomputed {len(recomputed)}"
        for i, (a, b) in enumerate(zip(bundled, recomputed, strict=True)):
            found = first_difference(a, b, f"{path}[{i}]")
            if found:
                return found
        return None
    else:
        same = bundled == recomputed
    return None if same else f"{path}: {bundled!r} in the bundle, recomputed {recomputed!r}"


# The files each figure is saved as.
FORMATS = (".png", ".pdf")


class Captions(dict[str, str]):
    """Each figure's caption by name, and (`data`) what it plots (analysis/shown/figure_data.py); `formats`:
    the files each figure is saved as (none: verify wants only the captions and the data)."""

    def __init__(self, formats: tuple[str, ...] = FORMATS) -> None:
        super().__init__()
        self.data: dict[str, list[dict[str, Any]]] = {}
        self.formats = formats
