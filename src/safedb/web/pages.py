"""The HTML of the approval pages. Every value from a statement or a client is escaped."""

from __future__ import annotations

import time
from html import escape

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import SqlLexer

from safedb.approval.board import WebApproval
from safedb.approval.display import visible_line, visible_statement

_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 56rem; margin: 2rem auto; padding: 0 1rem; color: #1b1b1b; }
h1 { font-size: 1.4rem; } dt { font-weight: 600; margin-top: .6rem; } dd { margin-left: 0; }
.sql { border: 1px solid #ccc; border-radius: 6px; padding: .6rem; background: #f8f8f8; }
.sql pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0; }
.warning { background: #fff4e5; border: 1px solid #f0a020; border-radius: 6px; padding: .6rem; }
textarea { width: 100%; min-height: 5rem; font: inherit; }
button { font: inherit; padding: .5rem 1.2rem; margin-right: .6rem; border-radius: 6px; cursor: pointer; }
button.approve { background: #1f7a1f; color: white; border: none; }
button.reject { background: #b00020; color: white; border: none; }
table { border-collapse: collapse; } td, th { border-bottom: 1px solid #ddd; padding: .3rem .6rem; text-align: left; }
"""


def page(title: str, body: str) -> str:
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<meta name=viewport content='width=device-width, initial-scale=1'><title>{escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body>{body}</body></html>"
    )


def highlighted_sql(sql: str) -> str:
    return highlight(sql, SqlLexer(), HtmlFormatter(noclasses=True, cssclass="sql", nowrap=False))


def approval_page(approval: WebApproval, csrf: str, min_justification: int, max_justification: int) -> str:
    classification = approval.classification
    # Names and messages from the database, shown as the form's question shows them (no bidi reordering).
    changes = "".join(f"<li>{escape(visible_line(str(change)))}</li>" for change in classification.changes)
    # The code the approval covers, writing or not: other code stops the approved run (as in the form's question).
    runs = ", ".join(escape(visible_statement(name)) for name in classification.runs)
    code = f"<dt>Runs the code of</dt><dd id=runs>{runs} (triggers, views)</dd>" if runs else ""
    impact = "".join(f"<li>{escape(visible_line(line))}</li>" for line in approval.impact.lines)
    impact = impact or "<li>No preview.</li>"
    production = approval.environment == "production"
    warning = (
        f"<p class=warning>This is a <strong>production</strong> database. Approving needs a justification of at "
        f"least {min_justification} characters.</p>"
        if production
        else ""
    )
    body = f"""
<h1>Approve a change to <code>{escape(approval.target)}</code>?</h1>
{warning}
<div id=statement>{highlighted_sql(visible_statement(classification.statement))}</div>
<dl>
<dt>Change</dt><dd id=classification>{escape(visible_line(classification.summary))}</dd>
<dt>What it does</dt><dd><ul>{changes}</ul></dd>
{code}
<dt>Impact</dt><dd><ul id=impact>{impact}</ul></dd>
<dt>Target</dt><dd>{escape(approval.target)} ({escape(approval.environment)})</dd>
<dt>Requested by</dt><dd id=caller>{escape(visible_statement(approval.caller))}</dd>
<dt>Requested at</dt><dd>{escape(_time(approval.created))} (expires {escape(_time(approval.expires))})</dd>
</dl>
<form method=post>
<input type=hidden name=t value="{escape(approval.link_token)}">
<input type=hidden name=csrf value="{escape(csrf)}">
<label for=justification>Your justification</label>
<textarea id=justification name=justification required minlength="{min_justification if production else 1}"
 maxlength="{max_justification}"></textarea>
<p><button class=approve name=decision value=approve>Approve</button>
<button class=reject name=decision value=reject formnovalidate>Reject</button></p>
</form>"""
    return page(f"SafeDB approval: {approval.target}", body)


def pending_page(approvals: list[WebApproval]) -> str:
    if not approvals:
        return page("SafeDB approvals", "<h1>Pending approvals</h1><p id=empty>Nothing is waiting.</p>")
    rows = "".join(
        f"<tr><td>{escape(a.target)}</td><td>{escape(visible_line(a.classification.summary))}</td>"
        f"<td><code>{escape(_shorten(visible_statement(a.classification.statement)))}</code></td>"
        f"<td>{escape(visible_statement(a.caller))}</td>"
        f"<td>{escape(_time(a.created))}</td>"
        # Relative to this list (…/approvals), so that a proxy's path prefix (public_url) stays in the link.
        f"<td><a href='approvals/{escape(a.id)}?t={escape(a.link_token)}'>review</a></td></tr>"
        for a in approvals
    )
    table = (
        "<table id=pending><tr><th>Target</th><th>Change</th><th>Statement</th><th>Client</th><th>Asked</th>"
        f"<th></th></tr>{rows}</table>"
    )
    return page("SafeDB approvals", f"<h1>Pending approvals</h1>{table}")


def message_page(title: str, text: str) -> str:
    return page(title, f"<h1>{escape(title)}</h1><p id=message>{escape(text)}</p>")


def _time(moment: float) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(moment))
    except (OverflowError, OSError, ValueError):  # past what the calendar holds (approval_timeout = 1e300)
        return "never"


def _shorten(sql: str, limit: int = 80) -> str:
    flat = " ".join(sql.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
