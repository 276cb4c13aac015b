"""Log records for the person at the terminal: warnings and errors, one clean line each on stderr.

The client commands install this; the library modules only log. Without it, Python's last-resort
handler prints the SDK's `logger.exception` records with a whole traceback, e.g. for every line a
stdio server prints on stdout that is not MCP.
"""

from __future__ import annotations

import logging
import sys

import anyio

from safedb.client.sanitize import clean_text

_REPORTED_BY_THE_CONNECTION = frozenset({("mcp.client.stdio", "Failed to parse JSONRPC message from server")})
"""SDK records whose event also reaches `Connection.message_handler`, which says what the server sent."""


class OneLineFormatter(logging.Formatter):
    """`Warning: message (ErrorType: first line of the error)`; no traceback, no escape sequences."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{record.levelname.capitalize()}: {record.getMessage()}"
        error = record.exc_info[1] if record.exc_info else None
        while isinstance(error, BaseExceptionGroup) and error.exceptions:  # a task group's: say what went wrong
            error = error.exceptions[0]
        if error is not None:
            first = next(iter(str(error).splitlines()), "")
            line += f" ({type(error).__name__}: {first})" if first else f" ({type(error).__name__})"
        # Messages quote the server's words (its name, what it printed): a server must not reach the terminal.
        return clean_text(line, multiline=False)


_FORWARDED_TOO_LATE = ("mcp.client.streamable_http", "Error parsing SSE message")
"""The SDK's record of a message that came on a request's stream after the client stopped reading it (a server's
notification after the result, such as a URL elicitation's completion): no parse failure, and nothing lost."""


def shown_on_console(record: logging.LogRecord) -> bool:
    """Whether a record is for the person at the terminal (not one the connection reports itself, nor noise)."""
    if (record.name, record.msg) in _REPORTED_BY_THE_CONNECTION:
        return False
    error = record.exc_info[1] if record.exc_info else None
    closed = isinstance(error, anyio.BrokenResourceError | anyio.ClosedResourceError)
    return not (closed and (record.name, record.msg) == _FORWARDED_TOO_LATE)


def log_to_console() -> None:
    """Show warnings and errors of the client and the SDK on stderr, one line each."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLineFormatter())
    handler.addFilter(shown_on_console)
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)
