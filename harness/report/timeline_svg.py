"""Draw a scenario timeline as swimlanes: a standalone SVG (or an HTML page around it).

Input is the timeline as plain records, the JSON form of
``harness.kube.timeline.Transition`` (this module does not import it)::

    {"mono": 1234.5, "kind": "Node", "name": "w1", "transition": "not-ready",
     "namespace": "", "detail": {"status": "Unknown"}}

``mono`` is a monotonic timestamp (or give ``t``, seconds from the origin, instead). ``kind``
is compared case-insensitively: ``node`` and ``pod`` records get one lane per object with
their phases as bars (node Ready -> NotReady/Unknown -> Ready; pod Running -> Terminating ->
deleted), other kinds (VolumeAttachment, PersistentVolumeClaim, Service, ...) get a lane
when something happened to them, ``action`` records (the harness's own: power-off sent /
acknowledged, drain, delete node) become vertical markers across all lanes, and
``observer`` records are left out of the picture (they are in the HTML table).
Transitions that do not change a phase (taints, events, Multi-Attach errors, scheduling)
are dots on their lane. The time axis is in seconds from the first record.

Output is deterministic (same input, same bytes), dependency-free string building, and every
piece of text is XML-escaped, so names and event messages from the cluster cannot break the
markup.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import escape as _xml_escape

from harness.kube.names import Change

SVG_NS = "http://www.w3.org/2000/svg"

# -- geometry (px) -------------------------------------------------------------------------
LABEL_W = 230
RIGHT_PAD = 24
LANE_H = 18
LANE_GAP = 8
MARKER_ROW_H = 14
CHAR_W = 6.2  # rough width of one character at font-size 11
FONT = "DejaVu Sans, Arial, Helvetica, sans-serif"

STATE_COLOURS: dict[str, str] = {
    "Ready": "#16a34a",
    "Running": "#16a34a",
    "attached": "#16a34a",
    "Bound": "#16a34a",
    "Succeeded": "#0d9488",
    "NotReady": "#dc2626",
    "NotReady (Unknown)": "#ea580c",
    "Unknown": "#ea580c",
    "Terminating": "#9333ea",
    "Pending": "#9ca3af",
    "detached": "#9ca3af",
    "Failed": "#7f1d1d",
    "Lost": "#7f1d1d",
    "Released": "#9ca3af",
}
_FALLBACK = ("#2563eb", "#0891b2", "#ca8a04", "#db2777", "#4f46e5", "#65a30d", "#78716c")

_INVALID_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def esc(text: object) -> str:
    """``text`` safe inside XML/HTML element content and double-quoted attributes."""
    return _xml_escape(_INVALID_XML.sub("\ufffd", str(text)), {'"': "&quot;", "'": "&#39;"})


def _num(x: float) -> str:
    s = f"{x:.1f}"
    return s[:-2] if s.endswith(".0") else s


def _secs(x: float) -> str:
    return f"{x:.3f}".rstrip("0").rstrip(".") if abs(x) < 10 else f"{x:.1f}"


def _tick(t: float, step: float) -> str:
    decimals = max(0, -math.floor(math.log10(step))) if step < 1 else 0
    return f"{t:.{decimals}f}"


def _truncate(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[: max(1, max_chars - 1)] + "\u2026"


def state_colour(state: str) -> str:
    """Colour of a phase bar; unknown states get a stable colour from their name."""
    if state in STATE_COLOURS:
        return STATE_COLOURS[state]
    if state.endswith(" ready"):  # Service "2/3 ready"
        ready, _, total = state.split(" ")[0].partition("/")
        if ready == "0":
            return STATE_COLOURS["NotReady"]
        return STATE_COLOURS["Ready"] if ready == total else STATE_COLOURS["Unknown"]
    return _FALLBACK[zlib.crc32(state.encode("utf-8")) % len(_FALLBACK)]


def marker_colour(label: str) -> str:
    low = label.lower()
    if "fail" in low or "error" in low:
        return "#dc2626"
    if "power-off" in low or "power off" in low or "poweroff" in low:
        return "#991b1b"
    if "power-on" in low or "power on" in low or "poweron" in low:
        return "#15803d"
    return "#1d4ed8"


# -- model ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Record:
    """One input record, normalised. ``t`` is seconds from the origin."""

    t: float
    kind: str  # lower case
    namespace: str
    name: str
    transition: str
    detail: Mapping[str, Any]


@dataclass(frozen=True)
class Phase:
    """``state`` from ``start`` to ``end``; ``open``: still so at the last record."""

    state: str
    start: float
    end: float
    open: bool = False


@dataclass(frozen=True)
class Point:
    t: float
    label: str


@dataclass(frozen=True)
class Marker:
    t: float
    label: str
    detail: str


@dataclass
class Lane:
    kind: str  # "node", "pod", or another kind in lower case
    namespace: str
    name: str
    phases: list[Phase] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)
    affected: bool = False
    node: str = ""  # pods: the node they were (last) on

    @property
    def key(self) -> str:
        obj = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind}/{obj}"

    @property
    def label(self) -> str:
        obj = f"{self.namespace}/{self.name}" if self.namespace else self.name
        if self.kind == "node":
            return f"node {obj}"
        if self.kind == "pod":
            return f"{obj} @{self.node}" if self.node else obj
        return f"{self.kind} {obj}"


@dataclass(frozen=True)
class Swimlanes:
    lanes: tuple[Lane, ...]
    markers: tuple[Marker, ...]
    records: tuple[Record, ...]
    span: float  # seconds from the origin to the last record


def _records(transitions: Iterable[Mapping[str, Any]], origin: float | None) -> list[Record]:
    raw: list[tuple[float, int, Mapping[str, Any]]] = []
    for i, tr in enumerate(transitions):
        if not isinstance(tr, Mapping):
            raise TypeError(f"transition #{i}: expected a mapping, got {type(tr).__name__}")
        when = tr.get("mono", tr.get("t"))
        if isinstance(when, bool) or not isinstance(when, int | float) or not math.isfinite(when):
            raise ValueError(f"transition #{i}: needs a finite number 'mono' (or 't'): {tr!r}")
        raw.append((float(when), i, tr))
    raw.sort(key=lambda item: (item[0], item[1]))
    if not raw:
        return []
    zero = raw[0][0] if origin is None else origin
    out = []
    for when, _, tr in raw:
        detail = tr.get("detail") or {}
        out.append(
            Record(
                t=when - zero,
                kind=str(tr.get("kind", "")).lower(),
                namespace=str(tr.get("namespace") or ""),
                name=str(tr.get("name", "")),
                transition=str(tr.get("transition", "")),
                detail=detail if isinstance(detail, Mapping) else {"detail": detail},
            )
        )
    return out


def _truthy(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        if value.lower() == "true":
            return True
        if value.lower() == "false":
            return False
    return None


def _flag(value: Any) -> bool:
    truth = _truthy(value)
    return truth if truth is not None else bool(value) and not isinstance(value, str)


class _LaneState:
    """Per-object flags from which the current phase is derived."""

    def __init__(self, lane: Lane) -> None:
        self.lane = lane
        self.state: str | None = None
        self.since = 0.0
        self.flags: dict[str, Any] = {}

    def set(self, t: float, state: str | None) -> None:
        if state == self.state:
            return
        if self.state is not None and t > self.since:  # zero-length phases are dropped
            self.lane.phases.append(Phase(self.state, self.since, t))
        self.state, self.since = state, t

    def close(self, end: float) -> None:
        if self.state is not None:
            self.lane.phases.append(Phase(self.state, self.since, max(end, self.since), True))
            self.state = None


def _node_state(flags: Mapping[str, Any]) -> str | None:
    if flags.get("deleted"):
        return None
    ready = flags.get("ready")
    if ready is True:
        return "Ready"
    if ready is False:
        return "NotReady"
    return "NotReady (Unknown)" if ready == "Unknown" else None


def _pod_state(flags: Mapping[str, Any]) -> str | None:
    if flags.get("deleted"):
        return None
    if flags.get("terminating"):
        return "Terminating"
    phase = flags.get("phase") or "Pending"
    if phase == "Running":
        return "Running" if flags.get("ready") else "NotReady"
    return str(phase)


def _apply_node(st: _LaneState, r: Record) -> bool:
    """Update node flags; False when the record is a point event, not a phase change."""
    tr, d = r.transition, r.detail
    if tr in (Change.OBSERVED, Change.CREATED):
        if "ready" in d:  # the Ready condition's status: "True", "False" or "Unknown"
            ready = _truthy(d["ready"])
            st.flags["ready"] = "Unknown" if ready is None else ready
    elif tr == Change.READY:
        st.flags["ready"] = True
    elif tr == Change.NOT_READY:
        st.flags["ready"] = "Unknown" if str(d.get("status")) == "Unknown" else False
    elif tr == Change.DELETED:
        st.flags["deleted"] = True
        return False
    else:
        return False
    return True


def _apply_pod(st: _LaneState, r: Record) -> bool:
    tr, d = r.transition, r.detail
    if d.get("node"):
        st.lane.node = str(d["node"])
    if tr in (Change.OBSERVED, Change.CREATED):
        st.flags["phase"] = d.get("phase") or "Pending"
        st.flags["ready"] = _flag(d.get("ready"))
        st.flags["terminating"] = _flag(d.get("terminating"))
    elif tr == Change.READY:
        st.flags["ready"] = True
        st.flags.setdefault("phase", "Running")
    elif tr == Change.NOT_READY:
        st.flags["ready"] = False
    elif tr == Change.TERMINATING:
        st.flags["terminating"] = True
    elif tr == Change.PHASE:
        st.flags["phase"] = d.get("phase") or st.flags.get("phase")
    elif tr == Change.DELETED:
        st.flags["deleted"] = True
        return False
    else:
        return False
    return True


_GENERIC_POINTS = frozenset({"event", "attach-error", "detach-error", "multi-attach"})


def _apply_generic(st: _LaneState, r: Record) -> bool:
    tr, d = r.transition, r.detail
    if tr == Change.DELETED:
        st.flags["deleted"] = True
        return False
    if tr in _GENERIC_POINTS:
        return False
    if tr in (Change.OBSERVED, Change.CREATED, Change.ENDPOINTS):
        if "ready" in d and "total" in d:
            st.flags["state"] = f"{d['ready']}/{d['total']} ready"
        elif "attached" in d:
            st.flags["state"] = "attached" if _truthy(d["attached"]) else "detached"
        elif "phase" in d:
            st.flags["state"] = str(d["phase"])
        else:
            st.flags["state"] = "present"
    elif tr == Change.PHASE and "phase" in d:
        st.flags["state"] = str(d["phase"])
    else:
        st.flags["state"] = tr
    return True


def build_swimlanes(
    transitions: Iterable[Mapping[str, Any]],
    *,
    origin: float | None = None,
    all_pods: bool = False,
) -> Swimlanes:
    """Lanes (nodes, affected pods, other affected objects) and action markers.

    ``origin``: the timestamp of t=0 (default: the first record). ``all_pods``: also draw
    pods to which nothing happened after they were first observed.
    """
    records = _records(transitions, origin)
    span = max((r.t for r in records), default=0.0)
    states: dict[tuple[str, str, str], _LaneState] = {}
    markers: list[Marker] = []
    for r in records:
        if r.kind == "action":
            label = f"{r.name}: {r.transition}" if r.name else r.transition
            detail = " ".join(f"{k}={v}" for k, v in sorted(r.detail.items(), key=str))
            markers.append(Marker(r.t, label, detail))
            continue
        if r.kind in ("observer", ""):
            continue
        key = (r.kind, r.namespace, r.name)
        st = states.get(key)
        if st is None:
            st = states[key] = _LaneState(Lane(r.kind, r.namespace, r.name))
        if r.transition not in (Change.OBSERVED,):
            st.lane.affected = True
        if r.kind == "node":
            phase_change = _apply_node(st, r)
            new_state = _node_state(st.flags)
        elif r.kind == "pod":
            phase_change = _apply_pod(st, r)
            new_state = _pod_state(st.flags)
        else:
            phase_change = _apply_generic(st, r)
            new_state = None if st.flags.get("deleted") else st.flags.get("state")
        if not phase_change:
            extra = r.detail.get("taint") or r.detail.get("reason") or r.detail.get("volume")
            st.lane.points.append(Point(r.t, f"{r.transition} {extra}" if extra else r.transition))
        st.set(r.t, new_state)
    for st in states.values():
        st.close(span)

    def wanted(lane: Lane) -> bool:
        return lane.kind == "node" or lane.affected or (all_pods and lane.kind == "pod")

    lanes = [st.lane for st in states.values() if wanted(st.lane)]
    kind_rank = {"node": 0, "pod": 1}
    lanes.sort(
        key=lambda ln: (
            kind_rank.get(ln.kind, 2),
            ln.kind,
            ln.node if ln.kind == "pod" else "",
            ln.namespace,
            ln.name,
        )
    )
    return Swimlanes(tuple(lanes), tuple(markers), tuple(records), span)


# -- drawing -------------------------------------------------------------------------------


def nice_step(span: float, target_ticks: int = 10) -> float:
    """A 1/2/5 x 10^k tick step giving about ``target_ticks`` ticks over ``span`` seconds."""
    if span <= 0:
        return 1.0
    raw = span / max(1, target_ticks)
    mag = 10 ** math.floor(math.log10(raw))
    for mult in (1, 2, 5, 10):
        if raw <= mult * mag:
            return float(mult * mag)
    return float(10 * mag)


def _marker_rows(markers: Sequence[Marker], x_of: Callable[[float], float]) -> list[int]:
    """Stagger marker labels into rows so they do not overlap (greedy, deterministic)."""
    row_end: list[float] = []
    rows = []
    for m in markers:
        x = x_of(m.t)
        width = len(m.label) * CHAR_W + 8
        for i, end in enumerate(row_end):
            if x >= end:
                row_end[i] = x + width
                rows.append(i)
                break
        else:
            row_end.append(x + width)
            rows.append(len(row_end) - 1)
    return rows


@dataclass(frozen=True)
class _Frame:
    """Where things go in the picture: the time axis (``axis_end`` seconds in ``step``
    ticks over ``plot_w`` pixels from ``plot_x0``) and the rows' heights."""

    axis_end: float
    step: float
    plot_x0: float
    plot_w: float
    markers_y0: float
    axis_y: float
    lanes_y0: float
    lanes_y1: float
    legend_y: float

    def x_of(self, t: float) -> float:
        return self.plot_x0 + (t / self.axis_end) * self.plot_w


def render_timeline_svg(
    transitions: Iterable[Mapping[str, Any]],
    *,
    title: str = "Scenario timeline",
    origin: float | None = None,
    width: int = 1100,
    all_pods: bool = False,
) -> str:
    """The swimlane picture as a standalone SVG document (a string)."""
    sl = build_swimlanes(transitions, origin=origin, all_pods=all_pods)
    span = sl.span if sl.span > 0 else 1.0
    step = nice_step(span)
    axis_end = math.ceil(span / step - 1e-9) * step if span > 0 else step
    plot_x0 = float(LABEL_W)
    plot_w = max(100.0, width - LABEL_W - RIGHT_PAD)
    rows = _marker_rows(sl.markers, lambda t: plot_x0 + (t / axis_end) * plot_w)
    n_rows = (max(rows) + 1) if rows else 0
    title_h = 26
    markers_y0 = title_h + 4
    axis_y = markers_y0 + n_rows * MARKER_ROW_H + 16
    lanes_y0 = axis_y + 6
    lanes_h = len(sl.lanes) * (LANE_H + LANE_GAP)
    lanes_y1 = lanes_y0 + max(lanes_h, LANE_H)
    legend_y = lanes_y1 + 22
    f = _Frame(axis_end, step, plot_x0, plot_w, markers_y0, axis_y, lanes_y0, lanes_y1, legend_y)
    height = legend_y + 22

    out: list[str] = []
    a = out.append
    a(
        f'<svg xmlns="{SVG_NS}" width="{width}" height="{_num(height)}" '
        f'viewBox="0 0 {width} {_num(height)}" role="img" aria-label="{esc(title)}" '
        f'font-family="{FONT}" font-size="11">'
    )
    a(f"<title>{esc(title)}</title>")
    a(
        "<style>"
        ".grid{stroke:#e5e7eb;stroke-width:1}"
        ".lane-bg{fill:#f9fafb}"
        ".bar-text{fill:#fff;font-size:10px}"
        ".lane-label{fill:#111827}"
        ".axis{fill:#374151;font-size:10px}"
        ".point{fill:#111827;stroke:#fff;stroke-width:1}"
        "</style>"
    )
    a(f'<rect x="0" y="0" width="{width}" height="{_num(height)}" fill="#ffffff"/>')
    a(f'<text x="8" y="18" font-size="14" font-weight="bold">{esc(title)}</text>')
    _svg_axis(out, f)
    if not sl.lanes and not sl.markers:
        a(
            f'<text x="{_num(plot_x0)}" y="{_num(lanes_y0 + LANE_H - 4)}" fill="#6b7280">'
            "no transitions recorded</text>"
        )
    for i, lane in enumerate(sl.lanes):
        _svg_lane(out, f, lane, lanes_y0 + i * (LANE_H + LANE_GAP))
    _svg_markers(out, f, sl, rows)
    states_seen: list[str] = []
    for lane in sl.lanes:
        for ph in lane.phases:
            if ph.state not in states_seen:
                states_seen.append(ph.state)
    _svg_legend(out, f, states_seen)
    a("</svg>")
    return "\n".join(out) + "\n"


# -- the picture's parts ---------------------------------------------------------------------


def _svg_axis(out: list[str], f: _Frame) -> None:
    """The axis and its grid."""
    a = out.append
    a('<g class="axis-ticks">')
    n_ticks = round(f.axis_end / f.step)
    for i in range(n_ticks + 1):
        t = i * f.step
        x = f.x_of(t)
        a(
            f'<line class="grid" x1="{_num(x)}" y1="{_num(f.axis_y)}" x2="{_num(x)}" '
            f'y2="{_num(f.lanes_y1)}"/>'
        )
        a(
            f'<text class="axis" x="{_num(x)}" y="{_num(f.axis_y - 3)}" '
            f'text-anchor="middle">{esc(_tick(t, f.step))}s</text>'
        )
    a("</g>")


def _svg_lane(out: list[str], f: _Frame, lane: Lane, y: float) -> None:
    """One lane at ``y``: its phases as bars, its points as dots."""
    a = out.append
    a(f'<g class="lane" data-lane="{esc(lane.key)}" data-kind="{esc(lane.kind)}">')
    a(f"<title>{esc(lane.key)}</title>")
    a(
        f'<rect class="lane-bg" x="{_num(f.plot_x0)}" y="{_num(y)}" width="{_num(f.plot_w)}" '
        f'height="{LANE_H}"/>'
    )
    a(
        f'<text class="lane-label" x="{LABEL_W - 8}" y="{_num(y + LANE_H - 5)}" '
        f'text-anchor="end">{esc(_truncate(lane.label, int((LABEL_W - 12) / CHAR_W)))}</text>'
    )
    for ph in lane.phases:
        x0, x1 = f.x_of(ph.start), f.x_of(f.axis_end if ph.open else ph.end)
        w = max(1.0, x1 - x0)
        if ph.open:
            tip = f"{lane.label}: {ph.state} from +{_secs(ph.start)}s to the end"
        else:
            tip = (
                f"{lane.label}: {ph.state} from +{_secs(ph.start)}s to +{_secs(ph.end)}s "
                f"({_secs(ph.end - ph.start)}s)"
            )
        a(
            f'<rect class="phase" data-state="{esc(ph.state)}" x="{_num(x0)}" y="{_num(y)}" '
            f'width="{_num(w)}" height="{LANE_H}" fill="{state_colour(ph.state)}">'
            f"<title>{esc(tip)}</title></rect>"
        )
        if w >= len(ph.state) * CHAR_W * 0.9 + 6:
            a(
                f'<text class="bar-text" x="{_num(x0 + 3)}" y="{_num(y + LANE_H - 5)}">'
                f"{esc(ph.state)}</text>"
            )
    for pt in lane.points:
        a(
            f'<circle class="point" cx="{_num(f.x_of(pt.t))}" cy="{_num(y + LANE_H / 2)}" r="3">'
            f"<title>{esc(f'{lane.label}: {pt.label} at +{_secs(pt.t)}s')}</title></circle>"
        )
    a("</g>")


def _svg_markers(out: list[str], f: _Frame, sl: Swimlanes, rows: list[int]) -> None:
    """The harness's actions, each a dashed line from its row down through the lanes."""
    a = out.append
    for m, row in zip(sl.markers, rows, strict=True):
        x = f.x_of(m.t)
        colour = marker_colour(m.label)
        label_y = f.markers_y0 + (row + 1) * MARKER_ROW_H - 3
        tip = f"{m.label} at +{_secs(m.t)}s" + (f" ({m.detail})" if m.detail else "")
        a(f'<g class="marker" data-kind="action" data-label="{esc(m.label)}">')
        a(f"<title>{esc(tip)}</title>")
        a(
            f'<line x1="{_num(x)}" y1="{_num(label_y + 3)}" x2="{_num(x)}" '
            f'y2="{_num(f.lanes_y1)}" stroke="{colour}" stroke-width="1.5" '
            'stroke-dasharray="4 2"/>'
        )
        a(f'<text x="{_num(x + 2)}" y="{_num(label_y)}" fill="{colour}">{esc(m.label)}</text>')
        a("</g>")


def _svg_legend(out: list[str], f: _Frame, states: list[str]) -> None:
    """The axis's unit and a swatch per state shown."""
    a = out.append
    a('<g class="legend">')
    lx = 8.0
    a(f'<text x="{_num(lx)}" y="{_num(f.legend_y)}" fill="#374151">seconds from first event</text>')
    lx = float(LABEL_W)
    for state in states:
        a(
            f'<rect x="{_num(lx)}" y="{_num(f.legend_y - 9)}" width="10" height="10" '
            f'fill="{state_colour(state)}"/>'
        )
        a(f'<text x="{_num(lx + 14)}" y="{_num(f.legend_y)}">{esc(state)}</text>')
        lx += 14 + len(state) * CHAR_W + 14
    a("</g>")


def render_timeline_html(
    transitions: Iterable[Mapping[str, Any]],
    *,
    title: str = "Scenario timeline",
    origin: float | None = None,
    width: int = 1100,
    all_pods: bool = False,
) -> str:
    """A standalone HTML page: the SVG picture and a table of every record."""
    items = list(transitions)
    svg = render_timeline_svg(items, title=title, origin=origin, width=width, all_pods=all_pods)
    rows = []
    for r in _records(items, origin):
        obj = f"{r.namespace}/{r.name}" if r.namespace else r.name
        detail = " ".join(f"{k}={v}" for k, v in sorted(r.detail.items(), key=str))
        rows.append(
            f'<tr><td class="t">+{esc(_secs(r.t))}</td><td>{esc(r.kind)}</td>'
            f"<td>{esc(obj)}</td><td>{esc(r.transition)}</td><td>{esc(detail)}</td></tr>"
        )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title>"
        "<style>body{font-family:sans-serif;margin:16px}"
        "table{border-collapse:collapse;font-size:12px}"
        "td,th{border:1px solid #e5e7eb;padding:2px 6px;text-align:left;vertical-align:top}"
        "td.t{text-align:right;font-variant-numeric:tabular-nums}</style>"
        "</head><body>\n"
        f"{svg}"
        "<table><thead><tr><th>t (s)</th><th>kind</th><th>object</th><th>transition</th>"
        "<th>detail</th></tr></thead><tbody>\n" + "\n".join(rows) + "\n</tbody></table>\n"
        "</body></html>\n"
    )
