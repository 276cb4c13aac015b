"""The person at the terminal answers elicitations: a form rendered from any requested schema, or a URL.

Everything the server wrote is cleaned of escape sequences and control characters before it is shown, and long
runs of blanks or empty lines are named with their count: nothing a server writes can push the `Server:` line
above its question out of view (a long message is followed by that line again).
The person chooses accept, decline or cancel explicitly; Ctrl-C or Esc at any prompt cancels.
"""

from __future__ import annotations

import webbrowser
from collections.abc import Callable
from typing import Any

import anyio.to_thread
from mcp_types import ElicitRequestFormParams, ElicitRequestURLParams, ElicitResult
from prompt_toolkit import PromptSession, print_formatted_text
from prompt_toolkit.application.current import get_app_session
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.utils import get_cwidth

from safedb.client.fields import ElicitationForm, FieldKind, FormField
from safedb.client.filling import FieldQuestion, fill_form
from safedb.client.requests import ElicitationRequest, Era
from safedb.client.sanitize import shown_text
from safedb.client.schema import UnsupportedSchema, parse_requested_schema
from safedb.client.text_input import hint, numbered, value_label
from safedb.client.urls import UrlReview, review_url

SECRET_WARNING = (
    "Warning: {names} looks like a secret (password, token, API key). The MCP specification forbids servers "
    "from asking for secrets in a form; do not type real credentials here. Decline if unsure."
)

LONE_ESCAPE_WAIT = 0.1
"""Seconds after Esc without another key before it counts as Esc alone (cancel), not the start of Alt-KEY."""

MESSAGE_ROWS_IN_VIEW = 15
"""Rows of the terminal a server's message may take before the `Server:` line is shown again below it: a longer one
may push the header above it out of view on a terminal of 24 rows, and could draw a header of its own there."""


class FormCancelled(Exception):
    """The person pressed Ctrl-C or Esc."""


class TerminalAnswerer:
    """Asks the person at this terminal. Uses prompt_toolkit's current input and output."""

    def __init__(self, open_url: Callable[[str], bool] = webbrowser.open) -> None:
        self._open_url = open_url
        self._prompt: PromptSession[str] | None = None

    async def answer(self, request: ElicitationRequest) -> ElicitResult:
        self._header(request)
        try:
            if isinstance(request.params, ElicitRequestURLParams):
                return await self._answer_url(request, request.params)
            return await self._answer_form(request.params)
        except (FormCancelled, KeyboardInterrupt, EOFError):
            self.say("Cancelled: nothing was sent to the server but 'cancel'.", "ansiyellow")
            return ElicitResult(action="cancel")
        except anyio.get_cancelled_exc_class():
            self.say("The question was withdrawn: the server cancelled it or the connection closed.", "ansiyellow")
            raise

    # -- form mode ---------------------------------------------------------------------------------

    async def _answer_form(self, params: ElicitRequestFormParams) -> ElicitResult:
        try:
            form = parse_requested_schema(params.requested_schema)
        except UnsupportedSchema as exc:
            self.say(f"This form cannot be shown: {shown_text(str(exc))}.", "ansired")
            action = await self._choose("Answer [d]ecline or [c]ancel: ", {"d": "decline", "c": "cancel"})
            return ElicitResult(action=action)  # type: ignore[arg-type]
        self._describe_form(form)
        action = await self._choose(
            "Answer: [a]ccept and fill in, [d]ecline, [c]ancel: ", {"a": "accept", "d": "decline", "c": "cancel"}
        )
        if action != "accept":
            return ElicitResult(action=action)  # type: ignore[arg-type]
        content: dict[str, Any] | None = None
        while True:
            content = await fill_form(form, _TerminalFieldReader(self), start=content)
            self._summary(form, content)
            action = await self._choose(
                "[s]end these answers, [e]dit them, [d]ecline, [c]ancel: ",
                {"s": "send", "e": "edit", "d": "decline", "c": "cancel"},
            )
            if action == "send":
                self.say("Sent.", "ansigreen")
                return ElicitResult(action="accept", content=content)
            if action != "edit":
                return ElicitResult(action=action)  # type: ignore[arg-type]

    def _describe_form(self, form: ElicitationForm) -> None:
        if form.secret_fields:
            names = ", ".join(repr(shown_text(field.name, multiline=False)) for field in form.secret_fields)
            self.say(SECRET_WARNING.format(names=names), "ansired bold")
        listed = ", ".join(
            f"{shown_text(field.label, multiline=False)}{'' if field.required else ' (optional)'}"
            for field in form.fields
        )
        self.say(f"The form asks for: {listed or 'nothing (an empty form)'}")

    def _summary(self, form: ElicitationForm, content: dict[str, Any]) -> None:
        self.say("You will send:", "bold")
        for field in form.fields:
            shown = value_label(field, content[field.name]) if field.name in content else "(left out)"
            self.say(f"  {shown_text(field.label, multiline=False)}: {shown_text(shown, multiline=False)}")

    # -- url mode ----------------------------------------------------------------------------------

    async def _answer_url(self, request: ElicitationRequest, params: ElicitRequestURLParams) -> ElicitResult:
        review = review_url(params.url)
        self._show_url(review)
        options = {"o": "open", "m": "manual", "d": "decline", "c": "cancel"}
        prompt = "[o]pen it in your browser, [m] I will open it myself, [d]ecline, [c]ancel: "
        if not review.openable:
            options.pop("o")
            options.pop("m")
            prompt = "This URL will not be opened. [d]ecline, [c]ancel: "
        action = await self._choose(prompt, options)
        if action in ("decline", "cancel"):
            return ElicitResult(action=action)  # type: ignore[arg-type]
        if action == "open":
            opened = await anyio.to_thread.run_sync(self._open_url, review.url)
            self.say("Opened in your browser." if opened else "No browser could be opened; open the URL yourself.")
        if request.era is Era.INPUT_REQUIRED:
            done = await self._choose(
                "When you have finished on the page: [d]one, or [c]ancel: ", {"d": "done", "c": "cancel"}
            )
            return ElicitResult(action="accept" if done == "done" else "cancel")
        self.say("Consent sent. The server will report when the page is finished.")
        return ElicitResult(action="accept")

    def _show_url(self, review: UrlReview) -> None:
        self.say("The server asks you to open a web page:", "bold")
        self.say(f"  URL:  {review.url}")
        self.say(f"  Host: {review.host or '(none)'}", "bold ansicyan")
        if review.reason:
            self.say(f"  Note: {review.reason}", "ansiyellow")

    # -- shared ------------------------------------------------------------------------------------

    def _header(self, request: ElicitationRequest) -> None:
        position = request.position
        counter = f" {position.number} of {position.total}" if position is not None and position.total > 1 else ""
        self.say("")
        self.say(f"── Question{counter} from the server ──", "bold reverse")
        self.say(f"Server: {request.server.describe()}", "bold")
        if request.tool:
            self.say(f"Tool:   {shown_text(request.tool, multiline=False)}")
        self.say("Message:", "bold")
        lines = [f"  {line}" for line in shown_text(request.params.message).splitlines() or [""]]
        for line in lines:
            self.say(line)
        rows = _rows(lines)
        if rows > MESSAGE_ROWS_IN_VIEW:
            self.say(f"Server: {request.server.describe()} (again: the message above takes {rows:,} lines)", "bold")

    async def _choose(self, prompt: str, options: dict[str, str]) -> str:
        while True:
            text = (await self.ask(prompt)).strip().lower()
            for key, action in options.items():
                if text in (key, action):
                    return action
            self.say(f"Please type one of: {', '.join(options)}", "ansiyellow")

    async def ask(self, prompt: str, prefilled: str = "") -> str:
        if self._prompt is None:
            # Made at the first question, not before: a prompt session keeps the output in force when it is
            # made, and the CLI moves forms to stderr (stdout redirected) after it makes its answerer.
            self._prompt = PromptSession(history=InMemoryHistory(), key_bindings=_cancel_keys())
            # Esc alone cancels, but Alt-b, Alt-Backspace... arrive as Esc and a key: the binding waits this
            # long to see whether a key follows (prompt_toolkit waits 1.5 s by default).
            self._prompt.app.ttimeoutlen = self._prompt.app.timeoutlen = LONE_ESCAPE_WAIT
        return await self._prompt.prompt_async(prompt, default=prefilled)

    def say(self, text: str, style: str = "") -> None:
        print_formatted_text(FormattedText([(style, text)]))


class _TerminalFieldReader:
    def __init__(self, terminal: TerminalAnswerer) -> None:
        self._terminal = terminal

    async def read(self, question: FieldQuestion) -> str:
        terminal = self._terminal
        field = question.field
        if question.problem is None:
            title = shown_text(field.label, multiline=False)
            name = "" if field.title is None else f" ({shown_text(field.name, multiline=False)})"
            terminal.say(f"[{question.number}/{question.count}] {title}{name}", "bold")
            if field.description:
                for line in shown_text(field.description).splitlines():
                    terminal.say(f"      {line}")
            for line in _choice_lines(field):
                terminal.say(line)
            terminal.say(f"      ({shown_text(hint(field), multiline=False)})", "ansibrightblack")
        else:
            terminal.say(f"  ✗ {shown_text(question.problem)}", "ansired")
        return await terminal.ask("  > ", question.prefilled)


def _choice_lines(field: FormField) -> list[str]:
    if field.kind not in (FieldKind.CHOICE, FieldKind.MULTI_CHOICE):
        return []
    lines = []
    for number, choice in enumerate(field.choices, start=1):
        label = shown_text(choice.label, multiline=False)
        value = shown_text(choice.value, multiline=False)
        bullet = f"{number})" if numbered(field) else "-"  # a typed number means a value when values are numbers
        lines.append(f"      {bullet} {label}" + ("" if label == value else f"  [{value}]"))
    return lines


def _rows(lines: list[str]) -> int:
    """Rows of the terminal the lines take, each wrapped at its width."""
    width = max(1, get_app_session().output.get_size().columns)
    return sum(max(1, -(-get_cwidth(line) // width)) for line in lines)


def _cancel_keys() -> KeyBindings:
    keys = KeyBindings()

    @keys.add("escape")  # not eager: Esc followed by a key is an Alt shortcut (word moves and deletes)
    def _escape(event: KeyPressEvent) -> None:
        event.app.exit(exception=FormCancelled())

    return keys
