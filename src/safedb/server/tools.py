"""The tools SafeDB offers: `execute_query`, `list_tables`, `describe_table`."""

from __future__ import annotations

import functools
import logging
from dataclasses import replace
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, InputRequiredResult
from pydantic import Field

from safedb import wording
from safedb.approval.display import visible_line, visible_statement_soon
from safedb.approval.verification import Decision, Verdict, decide
from safedb.audit import UNASKED_JUSTIFICATION, AuditDecision, AuditStore, AuditWriteFailed, decision_for_verdict
from safedb.db.backend import UNBOUND, Bounds, Impact, TableDescription
from safedb.errors import ApprovalReused, DeniedByPolicy, QueryFailed, SafeDBError
from safedb.server.auditing import CallAudit, describe_caller
from safedb.server.elicitation import ApprovalChannel, Prompt, Question, Reply, client_can_elicit
from safedb.server.rendering import error_result, format_table, rows_result, text_result, write_result
from safedb.server.targets import ServedTarget, ServedTargets, UnknownTarget
from safedb.server.unanswered import UnansweredQuestions
from safedb.server.web_channel import (
    WebApprovalChannel,
    WebQuestion,
    approval_page_served,
    client_can_open_urls,
)
from safedb.settings import Channel
from safedb.sql.classification import ChangeCategory, Classification

logger = logging.getLogger(__name__)

NEEDS_ELICITATION = (
    "This statement changes the database, and SafeDB runs such statements only after a person approves them "
    "through an MCP elicitation form. This client did not declare form elicitation (the `elicitation` capability, "
    "empty or with `form`; URL mode alone cannot ask for the approval's fields), so nothing was run. "
    "Use an elicitation-capable MCP client (for example `safedb client`, VS Code or Claude Code) to approve "
    "changes; read-only queries work from any client."
)


NEEDS_URL_ELICITATION = (
    "Changes to this target are approved on SafeDB's approval page, which the client must be able to open "
    "(URL-mode elicitation). This client did not declare that capability, so nothing was run."
)

NO_APPROVAL_PAGE = (
    "Changes to this target are approved on SafeDB's approval page, which SafeDB serves only over HTTP; this server "
    "speaks MCP over stdio, so nothing was run. Serve this target over HTTP (safedb serve without --transport "
    "stdio) to approve changes; read-only queries work here."
)

_STATEMENT_INDENT = "    "
_UNBOUND = (
    "An approval does not hold this statement to a number of rows (the preview has no count of every row it may "
    "change): it changes as many as it does when it runs."
)
_FAILED_VERDICTS = frozenset({Verdict.BLOCKED, Verdict.INVALID, Verdict.TIMED_OUT})


TargetArgument = Annotated[
    str | None,
    Field(description="Which database to use, by target name; may be left out when the server has only one."),
]


class SafeDBTools:
    """The tool functions, bound to the served targets and the audit log."""

    def __init__(
        self,
        targets: ServedTargets,
        audit: AuditStore,
        channel: ApprovalChannel,
        web_channel: WebApprovalChannel,
        text_rows: int,
    ) -> None:
        self.targets = targets
        self.audit = audit
        self.channel = channel
        self.web_channel = web_channel
        self.text_rows = text_rows
        self.unanswered = UnansweredQuestions(audit, web_channel.board)

    async def execute_query(
        self,
        query: Annotated[str, Field(description="Exactly one SQL statement.")],
        ctx: Context[Any, Any],
        target: TargetArgument = None,
    ) -> CallToolResult | InputRequiredResult:
        """Run one SQL statement. Read-only statements run at once and return their rows. A statement that
        could change anything (data, schema, settings, files) is first shown to the person at the client, who
        must approve it (confirm, justification, environment); declined or cancelled statements never run."""
        try:
            served = self.targets.pick(target)
        except UnknownTarget as exc:
            return error_result(str(exc))
        # Partials, not lambdas, here and in `_ask`: fewer objects for each of the thousands of calls that may wait.
        audit = CallAudit(self.audit, served.name, functools.partial(describe_caller, ctx), query)
        try:
            return await self._execute(query, ctx, served, audit)
        except AuditWriteFailed as exc:
            logger.error("Audit log write failed; nothing was run: %s", exc)
            return error_result(f"{exc} Nothing was run.", status="failed")
        except SafeDBError as exc:  # refused, a replayed answer or one to a question not recorded included
            return await _failure_result(exc, audit)

    async def _execute(
        self, query: str, ctx: Context[Any, Any], served: ServedTarget, audit: CallAudit
    ) -> CallToolResult | InputRequiredResult:
        database = served.database
        classification = await database.classify(query)
        if classification.read_only:
            try:
                return rows_result(await database.read(classification), self.text_rows)
            except QueryFailed as exc:
                return error_result(str(exc), status="failed")
        audit.classified(classification)
        try:
            served.deny_list.check(classification)
        except DeniedByPolicy as exc:
            await audit.record(AuditDecision.BLOCKED, error=str(exc))
            return error_result(str(exc), status=AuditDecision.BLOCKED)
        if (refusal := served.refused_by_policy(classification)) is not None:
            await audit.record(AuditDecision.BLOCKED, error=refusal)
            return error_result(refusal, status=AuditDecision.BLOCKED)
        if not served.needs_approval(classification):
            with anyio.CancelScope(shield=True):  # see `_run`
                await audit.record_unasked(AuditDecision.ACCEPTED, justification=UNASKED_JUSTIFICATION)
                result = await self._run(served, classification, audit)
            return result
        try:
            reply = await self._ask(ctx, served, classification, audit)
        except anyio.get_cancelled_exc_class():
            await audit.abandoned()
            raise
        if isinstance(reply, InputRequiredResult) and audit.asked:  # a 2026-07-28 question went out
            self.unanswered.asked(audit.request_id, served.target.policy.approval_timeout)
        if isinstance(reply, CallToolResult | InputRequiredResult):
            return reply
        self.unanswered.answered(reply.request_id)
        audit.request_id = reply.request_id
        decision = decide(reply.answer, reply.verification, served.rules)
        answered = reply.verification
        with anyio.CancelScope(shield=True):  # see `_run`
            try:
                await audit.record_answer(
                    decision_for_verdict(decision.verdict),
                    justification=answered.justification if answered else None,
                    environment=answered.environment if answered else None,
                    error=None if decision.approved else decision.reason,
                )
            except ApprovalReused:
                if decision.verdict is not Verdict.TIMED_OUT:
                    raise
                return _decision_result(decision)  # a late answer: its question is already recorded as timed out
            if decision.approved:
                result = await self._run(served, classification, audit, reply.bounds)
            else:
                result = _decision_result(decision)
        return result

    async def _ask(
        self, ctx: Context[Any, Any], served: ServedTarget, classification: Classification, audit: CallAudit
    ) -> Reply | CallToolResult | InputRequiredResult:
        """Put the question through the target's channel: the form at the client, or the approval page."""
        policy = served.target.policy
        if policy.channel is Channel.WEB:
            if not approval_page_served(ctx):
                await audit.record(AuditDecision.REFUSED, error=NO_APPROVAL_PAGE)
                return error_result(NO_APPROVAL_PAGE)
            if not client_can_open_urls(ctx):
                await audit.record(AuditDecision.REFUSED, error=NEEDS_URL_ELICITATION)
                return error_result(NEEDS_URL_ELICITATION)
            question = WebQuestion(
                target=served.name,
                environment=str(served.target.environment),
                impact=await self._impact(served, classification),
                caller=audit.caller,
                timeout=policy.approval_timeout,
                min_justification=policy.min_justification,
            )
            return await self.web_channel.ask(ctx, classification, question, audit.asking)
        if not client_can_elicit(ctx):
            await audit.record(AuditDecision.REFUSED, error=NEEDS_ELICITATION)
            return error_result(NEEDS_ELICITATION)
        form = Question(
            prompt=functools.partial(self._prompt, served, classification),
            asking=audit.asking,
            caller=audit.caller,
            form=served.form,
            timeout=policy.approval_timeout,
        )
        return await self.channel.ask(ctx, classification, form)

    async def _run(
        self,
        served: ServedTarget,
        classification: Classification,
        audit: CallAudit,
        bounds: Bounds = UNBOUND,
    ) -> CallToolResult:
        """Run an approved statement, held to what its question showed (`bounds`; none when none was asked), and record
        how it ended.

        Callers shield the answer's record and this run from cancellation: a call cancelled once the answer is in
        (the client gave up on it) still records the answer, lets the approved statement end (within the statement
        time limit) and records its outcome. Interrupted, the statement could have committed or not, and the log
        would say `accepted` with no outcome.
        """
        try:
            outcome = await served.database.write(classification, bounds)
        except SafeDBError as exc:
            return await _failure_result(exc, audit)
        result = write_result(classification, outcome, self.text_rows)
        try:
            await audit.record(AuditDecision.EXECUTED, rows_affected=outcome.rows_affected, error=None)
        except AuditWriteFailed:
            logger.exception("The statement ran but its execution could not be recorded in the audit log")
        return result

    async def list_tables(self, target: TargetArgument = None) -> CallToolResult:
        """List the tables and views in the database."""
        try:
            served = self.targets.pick(target)
            tables = await served.database.list_tables()
        except SafeDBError as exc:  # an unknown target included
            return error_result(str(exc))
        structured = {"tables": [{"name": table.name, "type": table.type} for table in tables]}
        text = format_table(["name", "type"], [[table.name, table.type] for table in tables]) if tables else "(none)"
        return text_result(text, structured)

    async def describe_table(
        self,
        name: Annotated[str, Field(description="A table or view name, as list_tables shows it.")],
        target: TargetArgument = None,
    ) -> CallToolResult:
        """Describe one table or view: its columns, row count and definition."""
        try:
            served = self.targets.pick(target)
            # A broken view (its table dropped) or a virtual table of a module this SQLite lacks: said, not raised.
            description = await served.database.describe_table(name)
        except SafeDBError as exc:  # an unknown target included
            return error_result(str(exc))
        if description is None:
            return error_result(f"There is no table or view named {name!r}. Use list_tables to see the names.")
        return _description_result(description)

    async def _impact(self, served: ServedTarget, classification: Classification) -> Impact:
        """The preview, and what an approval of a counted change holds for."""
        try:
            impact = await served.database.preview(classification)
        except SafeDBError as exc:
            impact = Impact(lines=(f"preview unavailable ({exc})",))
        if impact.rows_affected is None:
            if ChangeCategory.DATA in classification.categories:
                return replace(impact, lines=(*impact.lines, _UNBOUND))
            return impact
        rows = wording.rows(impact.rows_affected)
        holds = (
            f"An approval holds for exactly {rows}, as counted above: if the statement changes any other number, "
            "it is rolled back."
        )
        return replace(impact, lines=(*impact.lines, holds))

    async def _prompt(self, served: ServedTarget, classification: Classification) -> Prompt:
        # The statement's later lines are indented, and names and messages from the database shown on one line
        # each: nothing the statement or the database says can pass for a line of SafeDB's own below.
        statement = await visible_statement_soon(classification.statement)
        lines = [
            "SafeDB needs your approval before running a statement that changes the database.",
            "",
            "Statement: " + statement.replace("\n", "\n" + _STATEMENT_INDENT),
            f"Change: {visible_line(classification.summary)}",
            "Touches: " + visible_line(", ".join(str(target) for target in classification.touched)),
        ]
        if any(change.via or change.detail for change in classification.changes):
            lines.append("Details: " + visible_line("; ".join(classification.change_lines)))
        if classification.runs:  # the code the approval covers, writing or not: other code stops the approved run
            lines.append("Runs the code of (triggers, views): " + visible_line(", ".join(classification.runs)))
        impact = await self._impact(served, classification)
        lines.extend(f"Impact: {visible_line(line)}" for line in impact.lines)
        lines.append(f"Target: {served.name} ({served.target.environment}, {served.database.label})")
        lines.append("")
        rules = served.rules
        closing = "Set confirm to true to run it."
        if rules.production_target:
            closing += " This is a production database: answer environment=Production."
        closing += (
            f" A Production change needs a justification of at least {rules.min_production_justification} characters."
        )
        if rules.type_target_name:
            closing += f" Type the target name ({served.name}) to confirm."
        lines.append(closing)
        return Prompt("\n".join(lines), impact.bounds)


async def _failure_result(exc: SafeDBError, audit: CallAudit) -> CallToolResult:
    """Record a statement that failed (the database raised an error) or was refused, and say so."""
    if isinstance(exc, QueryFailed):
        return await _recorded_error(audit, AuditDecision.FAILED, str(exc), status="failed")
    return await _recorded_error(audit, AuditDecision.REFUSED, str(exc))


async def _recorded_error(
    audit: CallAudit, decision: AuditDecision, message: str, status: str = "refused"
) -> CallToolResult:
    """Record `decision` and answer with `message`; when the log cannot be written either (the same outage may
    have hit both), say that too, as an answer rather than an unexpected error."""
    try:
        await audit.record(decision, error=message)
    except AuditWriteFailed as exc:
        logger.error("A %s call could not be recorded in the audit log: %s", decision, exc)
        return error_result(f"{message} {exc}", status=status)
    return error_result(message, status=status)


def _decision_result(decision: Decision) -> CallToolResult:
    structured = {"status": str(decision.verdict), "executed": False, "message": decision.reason}
    return text_result(decision.reason, structured, is_error=decision.verdict in _FAILED_VERDICTS)


def _description_result(description: TableDescription) -> CallToolResult:
    columns = [
        {"name": c.name, "type": c.type, "nullable": c.nullable, "default": c.default, "primary_key": c.primary_key}
        for c in description.columns
    ]
    structured = {
        "name": description.name,
        "type": description.type,
        "columns": columns,
        "row_count": description.row_count,
        "row_count_estimated": description.row_count_estimated,
        "sql": description.sql,
    }
    table = format_table(
        ["column", "type", "nullable", "default", "primary key"],
        [[c.name, c.type, c.nullable, c.default, c.primary_key] for c in description.columns],
    )
    rows = "" if description.row_count is None else f", {description.row_count} rows"
    if description.row_count is not None and description.row_count_estimated:
        rows = f", about {description.row_count} rows (the planner's estimate, not a count)"
    return text_result(f"{description.type} {description.name}{rows}\n{table}", structured)
