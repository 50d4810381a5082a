"""The report page: one self-contained HTML file (plotly.js inlined once in the head) that opens offline."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
import plotly.offline

from autotune.numbers import flops_text, minutes, number, share
from autotune.views.report.data import ReportData

__all__ = ["page"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.5em 0; } td, th { padding: 0.25em 0.8em; text-align: left; }
th { background: #f2f2f2; } tr:nth-child(even) td { background: #fafafa; }
code, pre { background: #f4f4f4; padding: 0.2em 0.4em; border-radius: 3px; }
.note { color: #666; font-size: 0.9em; }
"""


def _esc(value: Any) -> str:
    return html.escape(str(value))


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _figure(fig: go.Figure) -> str:
    return str(fig.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False}))


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return number(value)


def _headline(data: ReportData) -> str:
    info, w = data.info, data.winner
    measured = len(data.points)
    counts = ", ".join(f"{n} {s}" for s, n in data.status_counts.items())
    not_run = ", ".join(f"{n} {k}" for k, n in data.not_run.items())
    lines = [
        f"{_esc(info.workload)} ({_esc(info.preset)}) on {_esc(info.device)}; "
        f"objectives: {_esc(', '.join(f'{m} ({d})' for m, d in info.objectives))}",
        f"{measured} measured trials ({_esc(counts)})" + (f"; not run: {_esc(not_run)}" if not_run else ""),
    ]
    if w is not None:
        speedup = f", <b>{w.speedup:.2f}x</b> the PyTorch default" if w.speedup else ""
        head = f"winner: trial {w.trial}, {data.metric} <b>{_fmt(w.value)} {_esc(data.unit)}</b>{speedup}"
        limit = flops_text(w.tflops, w.mfu)
        lines.append(head + (f"; {_esc(limit)}" if limit else ""))
    else:
        lines.append("no feasible ok trial yet: no winner")
    return "".join(f"<p>{line}</p>" for line in lines)


def _winner_section(data: ReportData) -> str:
    w, d = data.winner, data.default
    if w is None:
        return "<p>No winner: no trial ran ok within the constraints.</p>"
    default_params = d.params if d is not None else {}
    knobs = list(dict.fromkeys([*w.params, *default_params]))
    rows: list[list[Any]] = [[k, default_params.get(k, "-"), w.params.get(k, "-")] for k in knobs]
    rows.append([f"{data.metric} ({data.unit})", _fmt(d.value if d else None), _fmt(w.value)])
    rows.append(["speedup", "1.00x" if d is not None and d.ok else "-", f"{w.speedup:.2f}x" if w.speedup else "-"])
    if w.tflops is not None or (d is not None and d.tflops is not None):
        rows.append(["TFLOP/s (model FLOPs)", _fmt(d.tflops if d else None), _fmt(w.tflops)])
        rows.append(["MFU (of the dense peak)", _percent(d.mfu if d else None), _percent(w.mfu)])
    default_head = f"PyTorch default (trial {d.trial})" if d is not None else "PyTorch default (not measured)"
    return _table(["", default_head, f"winner (trial {w.trial})"], rows) + (
        f"<p>Export it for production training:</p><pre>{_esc(data.export_command)}</pre>"
    )


def _percent(value: float | None) -> str:
    return "-" if value is None else share(value)


def _environment(env: Mapping[str, Any]) -> str:
    if not env:
        return "<p>No environment recorded.</p>"
    return _table(["", "winner's environment"], [[k, v] for k, v in env.items()])


def _time_table(data: ReportData) -> str:
    time = data.time
    rows = [[label, f"{minutes(s)}", _share(time.share(s))] for label, s in time.parts().items()]
    line = time.line()
    note = (
        "<p class='note'>Shares are of trial time: each measured trial from its start to its record, every "
        "worker's (with one GPU per worker, GPU time). Compiling is a compiled trial's <code>compile_s</code>; "
        "re-measurements come after the search, timed where recorded.</p>"
    )
    said = "".join(f"<p>{_esc(text)}</p>" for text in ([line] if line else []) + time.detail_lines())
    return said + _table(["part", "time", "share"], rows) + note


def _share(share: float | None) -> str:
    return "-" if share is None else f"{share:.0%}"


def page(data: ReportData, figures: Mapping[str, go.Figure | None], env: Mapping[str, Any]) -> str:
    """The whole page; ``figures`` maps a section title to its figure (None: the section is left out)."""
    title = f"autotune report: {data.study_name}"
    sections = [f"<h2>{_esc(name)}</h2>{_figure(fig)}" for name, fig in figures.items() if fig is not None]
    sections.insert(0, f"<h2>Winner against the PyTorch default</h2>{_winner_section(data)}")
    sections.append(f"<h2>Where the time went</h2>{_time_table(data)}")
    sections.append(f"<h2>Environment</h2>{_environment(env)}")
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_esc(title)}</title><style>{_STYLE}</style>"
        f"<script type='text/javascript'>{plotly.offline.get_plotlyjs()}</script></head>"
        f"<body><h1>{_esc(title)}</h1>{_headline(data)}{''.join(sections)}</body></html>\n"
    )
