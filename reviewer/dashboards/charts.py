"""Server-rendered SVG charts (no chart JavaScript): the geometry is computed here, and every mark links to the
reviews behind it. The marks are drawn here too (`Chart.points_svg` and the rest), as a template would draw them: a
chart over 26 weeks has a few hundred of their values, which the template's variables cost several times more to
print."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT = 800, 180
LEFT, RIGHT, TOP = 44, 16, 10
LINE_BOTTOM = 110  # the quality line lives in [TOP, LINE_BOTTOM]; the unknown bars below it
BAR_TOP, BAR_BOTTOM = 122, 160


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    label: str  # the week
    value: str  # what the mark says, for its title
    url: str

    def html(self) -> str:
        return (
            f'<a href="{self.url}" class="point"><circle cx="{self.x}" cy="{self.y}" r="5">'
            f"<title>{escape(self.label)}: {escape(self.value)}</title></circle></a>"
        )


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    css: str
    label: str
    url: str

    def html(self) -> str:
        return (
            f'<a href="{self.url}"><rect class="bar-{escape(self.css)}" x="{self.x}" y="{self.y}" width="{self.width}"'
            f' height="{self.height}"><title>{escape(self.label)}</title></rect></a>'
        )


@dataclass(frozen=True)
class Tick:
    x: float
    y: float
    text: str

    def html(self) -> str:
        return f'<text class="tick" x="{self.x}" y="{self.y}">{escape(self.text)}</text>'


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    points: list[Point]
    polyline: str  # the points with a value, joined; gaps where a week has nothing resolved
    bars: list[Bar]
    ticks: list[Tick]
    grid: list[float]
    description: str

    @property
    def points_svg(self) -> SafeString:
        return _drawn(self.points)

    @property
    def bars_svg(self) -> SafeString:
        return _drawn(self.bars)

    @property
    def ticks_svg(self) -> SafeString:
        return _drawn(self.ticks)


def _drawn(marks: list[Point] | list[Bar] | list[Tick]) -> SafeString:
    """Marks as SVG: their text escaped, their URLs `Links`' (ready for an attribute)."""
    return mark_safe("".join(mark.html() for mark in marks))  # noqa: S308 - see above


def _x(index: int, count: int) -> float:
    span = WIDTH - LEFT - RIGHT
    return round(LEFT + (span * (index + 0.5) / count), 1)


def quality_trend(weeks: list[dict], *, pass_url, unknown_url) -> Chart:
    """The weekly quality number as a line (passes over resolved, 0 to 100%), the unknowns as bars beneath it
    (beside the number, never inside it). `pass_url(week)` and `unknown_url(week)` give each mark's link."""
    count = max(len(weeks), 1)
    most_unknown = max((w["unknown"] for w in weeks), default=0) or 1
    points, bars = [], []
    for index, week in enumerate(weeks):
        x = _x(index, count)
        if week["quality"] is not None:
            y = round(LINE_BOTTOM - (LINE_BOTTOM - TOP) * week["quality"], 1)
            value = f"{week['passed']} / {week['resolved']} ({week['quality']:.0%})"
            points.append(Point(x, y, week["week"], value, pass_url(week["week"])))
        if week["unknown"]:
            height = round((BAR_BOTTOM - BAR_TOP) * week["unknown"] / most_unknown, 1)
            label = f"{week['week']}: {week['unknown']} with an unknown"
            bars.append(Bar(x - 9, BAR_BOTTOM - height, 18, height, "unknown", label, unknown_url(week["week"])))
    ticks = [Tick(0, TOP + 4, "100%"), Tick(0, (TOP + LINE_BOTTOM) / 2 + 4, "50%"), Tick(0, LINE_BOTTOM + 4, "0%")]
    step = max(1, count // 8)
    ticks += [Tick(_x(i, count) - 16, HEIGHT - 4, w["week"][5:]) for i, w in enumerate(weeks) if i % step == 0]
    described = "; ".join(f"{p.label} {p.value}" for p in points) or "nothing resolved in these weeks"
    return Chart(
        width=WIDTH,
        height=HEIGHT,
        points=points,
        polyline=" ".join(f"{p.x},{p.y}" for p in points),
        bars=bars,
        ticks=ticks,
        grid=[TOP, (TOP + LINE_BOTTOM) / 2, LINE_BOTTOM],
        description=f"Weekly quality: {described}",
    )


GATE_PARTS = ("pass", "fail", "human", "error")


def gate_bars(weeks: list[dict], *, url) -> Chart:
    """The gate's outcomes per week as stacked bars; `url(week, route)` links each part."""
    count = max(len(weeks), 1)
    tallest = max((sum(w[p] for p in GATE_PARTS) for w in weeks), default=0) or 1
    bars = []
    for index, week in enumerate(weeks):
        x, bottom = _x(index, count), float(BAR_BOTTOM)
        for part in GATE_PARTS:
            if not week[part]:
                continue
            height = round((BAR_BOTTOM - TOP) * week[part] / tallest, 1)
            bottom -= height
            label = f"{week['week']}: {week[part]} {part}"
            bars.append(Bar(x - 12, round(bottom, 1), 24, height, part, label, url(week["week"], part)))
    step = max(1, count // 8)
    ticks = [Tick(_x(i, count) - 16, HEIGHT - 4, w["week"][5:]) for i, w in enumerate(weeks) if i % step == 0]
    described = "; ".join(f"{w['week']} " + ", ".join(f"{w[p]} {p}" for p in GATE_PARTS) for w in weeks)
    return Chart(WIDTH, HEIGHT, [], "", bars, ticks, [], f"Draft gate outcomes per week: {described}")
