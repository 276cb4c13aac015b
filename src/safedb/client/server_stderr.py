"""A stdio server's stderr, shown one cleaned line at a time.

What a server writes on its stderr reaches the person's terminal. Passed through as written, a broken or
hostile server could clear the screen, move the cursor over the question being asked, set the window title
or the clipboard (OSC 52), or reorder text with bidi overrides. The SDK hands its `errlog` to the server
process as its stderr, so that must be a real file descriptor: the server writes into a pipe, and a task
here reads the pipe as fast as the server writes (a server must never block on a full pipe) and shows each
line as `clean_text` leaves it.
"""

from __future__ import annotations

import codecs
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
from mcp.client.stdio import StdioServerParameters, stdio_client

from safedb.client.sanitize import clean_text

if TYPE_CHECKING:  # a private module of the SDK: for the type checker only, so a rename cannot break a run
    from mcp.client._transport import TransportStreams

DRAIN_TIMEOUT = 2.0
"""Seconds to wait, once the server has stopped, for the end of its stderr: a process the server started in a
session of its own outlives it and can hold the pipe open for as long as it runs."""
LONGEST_LINE = 64 * 1024
"""Characters of a line without a line break shown as one line before more is read, so that a server writing no
line breaks cannot fill the client's memory."""
_READ_SIZE = 64 * 1024


def write_to_stderr(line: str) -> None:
    """Show one line of the server's on the client's own stderr; dropped when that is gone (a closed pipe): the
    relay must go on draining the server's pipe, or the server would block, and an error here would end the
    session."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # ValueError: the file object itself was closed
        pass


@asynccontextmanager
async def stdio_transport(
    parameters: StdioServerParameters, show_line: Callable[[str], None] = write_to_stderr
) -> AsyncIterator[TransportStreams]:
    """The SDK's stdio transport, with each line the server writes on stderr passed to `show_line` cleaned."""
    reading, writing = os.pipe()  # both ends close on exec: only the server's stderr gets a copy of `writing`
    os.set_blocking(reading, False)
    server_end = os.fdopen(writing, "w")
    try:
        async with anyio.create_task_group() as relay:
            ended = anyio.Event()
            relay.start_soon(_relay_lines, reading, show_line, ended)
            try:
                async with stdio_client(parameters, errlog=server_end) as streams:
                    # The server has its own copy now; with ours open the pipe would never end.
                    server_end.close()
                    yield streams
            finally:
                server_end.close()
                # The SDK has stopped the server: show what it wrote last, unless something keeps the pipe open.
                with anyio.move_on_after(DRAIN_TIMEOUT, shield=True):
                    await ended.wait()
                relay.cancel_scope.cancel()
    finally:
        server_end.close()
        os.close(reading)


async def _relay_lines(reading: int, show_line: Callable[[str], None], ended: anyio.Event) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    try:
        while True:
            await anyio.wait_readable(reading)
            try:
                chunk = os.read(reading, _READ_SIZE)
            except BlockingIOError:
                continue
            *lines, pending = (pending + decoder.decode(chunk, final=not chunk)).split("\n")
            for line in lines:
                show_line(clean_text(line, multiline=False))
            if not chunk:
                break
            if len(pending) > LONGEST_LINE:
                show_line(clean_text(pending, multiline=False))
                pending = ""
    finally:
        # A last line without a line break is still a line (also when the server left a process holding the pipe).
        if pending:
            show_line(clean_text(pending, multiline=False))
        ended.set()
