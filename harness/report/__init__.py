"""Reporting: what goes into allure-results, the single-file HTML report, summaries.

* :mod:`~harness.report.allure_env`: ``environment.properties``, ``categories.json``,
  history carried between reports, timeline attachments (used while tests run).
* :mod:`~harness.report.html`: :func:`render_report` with Allure Report 3.
* :mod:`~harness.report.timeline_svg`: a scenario timeline as SVG swimlanes.
* :mod:`~harness.report.summary`: a one-screen text summary of a run.
* :mod:`~harness.report.browser`: headless Chromium screenshots and DOM dumps.

See ``docs/reports.md``.
"""

from harness.report.allure_env import (
    CATEGORIES,
    Category,
    carry_history,
    classify,
    prepare_results,
    write_categories,
    write_environment,
)
from harness.report.html import (
    ALLURE_VERSION,
    ReportError,
    ReportToolMissing,
    find_allure,
    render_report,
)
from harness.report.summary import RunSummary, format_summary, load, summarize
from harness.report.timeline_svg import render_timeline_html, render_timeline_svg

__all__ = [
    "ALLURE_VERSION",
    "CATEGORIES",
    "Category",
    "ReportError",
    "ReportToolMissing",
    "RunSummary",
    "carry_history",
    "classify",
    "find_allure",
    "format_summary",
    "load",
    "prepare_results",
    "render_report",
    "render_timeline_html",
    "render_timeline_svg",
    "summarize",
    "write_categories",
    "write_environment",
]
