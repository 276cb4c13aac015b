"""The Python API's `elicitation_handler` in the SDK's own `Client`, against the feature server, in both eras."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest
from mcp.client.client import Client
from mcp_types import ElicitRequestURLParams

from safedb.client import Accept, FormQuestion, elicitation_handler

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["legacy", "auto"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def call(
    url: str, mode: str, tool: str, answer: Any, on_url: Any = None, arguments: dict[str, Any] | None = None
) -> Any:
    async with Client(url, mode=mode, elicitation_callback=elicitation_handler(answer, on_url)) as client:
        with anyio.fail_after(30):
            result = await client.call_tool(tool, arguments or {})
    return result.structured_content


CONSTRAINED = {
    "type": "object",
    "properties": {
        "level": {"type": "integer", "enum": [1, 2, 3]},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
    },
    "required": ["level"],
}


async def test_a_dict_answer_is_sent(server_url: str, mode: str) -> None:
    async def answer(question: FormQuestion) -> object:
        return {"api_key": "not really a key"}

    assert await call(server_url, mode, "ask_secret", answer) == {
        "secret": {"action": "accept", "content": {"api_key": "not really a key"}}
    }


@pytest.mark.parametrize("reply", [Accept(), None], ids=["accept", "none"])
async def test_a_form_answer_of_the_wrong_type_is_not_sent_but_cancelled(
    server_url: str, mode: str, reply: object, caplog: pytest.LogCaptureFixture
) -> None:
    async def answer(question: FormQuestion) -> object:
        return reply

    with caplog.at_level(logging.WARNING, logger="safedb.client.api"):
        sent = await call(server_url, mode, "ask_secret", answer)
    assert sent == {"secret": {"action": "cancel"}}
    assert f"the program answered {reply!r}" in caplog.text


async def test_a_url_answer_of_the_wrong_type_is_not_sent_but_cancelled(
    server_url: str, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def answer(question: FormQuestion) -> object:
        raise AssertionError("a URL question is not a form")

    async def on_url(params: ElicitRequestURLParams) -> object:
        return {"done": True}

    with caplog.at_level(logging.WARNING, logger="safedb.client.api"):
        sent = await call(server_url, mode, "ask_url", answer, on_url)
    assert sent == {"page": {"action": "cancel"}}
    assert "the program answered {'done': True}" in caplog.text


@pytest.mark.parametrize(
    ("content", "problem"), [({"level": 7}, "must be one of 1, 2, 3"), ({"level": 1, "zip": "abc"}, "pattern")]
)
async def test_a_dict_answer_the_schema_forbids_is_not_sent_but_cancelled(
    server_url: str, mode: str, caplog: pytest.LogCaptureFixture, content: dict[str, Any], problem: str
) -> None:
    async def answer(question: FormQuestion) -> object:
        return content

    with caplog.at_level(logging.WARNING, logger="safedb.client.api"):
        sent = await call(server_url, mode, "ask_for", answer, arguments={"requested_schema": CONSTRAINED})
    assert sent == {"form": {"action": "cancel"}}
    assert problem in caplog.text


async def test_an_answer_the_model_refuses_while_it_is_built_is_not_sent_but_cancelled(
    server_url: str, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def answer(question: FormQuestion) -> object:
        return question.model(level=7)  # raises pydantic's ValidationError inside the program's handler

    with caplog.at_level(logging.WARNING, logger="safedb.client.api"):
        sent = await call(server_url, mode, "ask_for", answer, arguments={"requested_schema": CONSTRAINED})
    assert sent == {"form": {"action": "cancel"}}
    assert "does not fit the schema: level: must be one of 1, 2, 3" in caplog.text


async def test_an_answer_function_that_raises_cancels_its_question(
    server_url: str, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def answer(question: FormQuestion) -> object:
        raise RuntimeError("the program's own bug")

    with caplog.at_level(logging.WARNING, logger="safedb.client.api"):
        sent = await call(server_url, mode, "ask_secret", answer)
    assert sent == {"secret": {"action": "cancel"}}
    assert "answer function raised" in caplog.text
    assert "the program's own bug" in caplog.text


async def test_a_url_function_that_raises_cancels_its_question(
    server_url: str, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def answer(question: FormQuestion) -> object:
        raise AssertionError("a URL question is not a form")

    async def on_url(params: ElicitRequestURLParams) -> object:
        raise RuntimeError("no browser here")

    with caplog.at_level(logging.WARNING, logger="safedb.client.api"):
        sent = await call(server_url, mode, "ask_url", answer, on_url)
    assert sent == {"page": {"action": "cancel"}}
    assert "no browser here" in caplog.text
