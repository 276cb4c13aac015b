"""Answer rules for unattended use: matching by server, tool, message and mode; answers checked by the schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp_types import ElicitRequestFormParams, ElicitRequestURLParams

from safedb.client.requests import ElicitationRequest, Era, ServerIdentity
from safedb.client.rules import AnswerRules, RuleAnswerer, RuleDecision, RulesFileError, decide, load_rules

pytestmark = pytest.mark.anyio

SCHEMA = {
    "type": "object",
    "properties": {
        "confirm": {"type": "boolean"},
        "justification": {"type": "string", "minLength": 3},
        "environment": {"type": "string", "enum": ["Development", "Production"], "default": "Development"},
    },
    "required": ["confirm", "justification"],
}


def request(message: str, *, server: str = "SafeDB", tool: str | None = "execute_query") -> ElicitationRequest:
    params = ElicitRequestFormParams(message=message, requested_schema=SCHEMA)
    return ElicitationRequest(ServerIdentity(server, "http://127.0.0.1:9/mcp"), params, Era.HANDSHAKE, tool)


RULES = AnswerRules.model_validate(
    {
        "rules": [
            {"message": "DROP TABLE", "action": "decline"},
            {"server": "other*", "action": "cancel"},
            {
                "server": "safedb",
                "tool": "execute_query",
                "message": r"DELETE FROM scratch_\w+",
                "action": "accept",
                "content": {"confirm": True, "justification": "cleanup"},
            },
            {"tool": "bad_*", "action": "accept", "content": {"confirm": "yes", "justification": "x"}},
        ]
    }
)


def test_first_matching_rule_answers_and_defaults_fill_the_rest() -> None:
    decision = decide(RULES, request("Statement: DELETE FROM scratch_abc WHERE id = 1"))
    assert decision.result.action == "accept"
    assert decision.result.content == {"confirm": True, "justification": "cleanup", "environment": "Development"}
    assert decision.reason == "rule 3"


def test_rules_match_message_server_and_tool() -> None:
    assert decide(RULES, request("DROP TABLE scratch_abc; DELETE FROM scratch_abc")).result.action == "decline"
    assert decide(RULES, request("anything", server="Other Server")).result.action == "cancel"
    assert decide(RULES, request("DELETE FROM scratch_a", tool="describe_table")).result.action == "decline"
    assert decide(RULES, request("DELETE FROM scratch_a", tool=None)).result.action == "decline"


@pytest.mark.parametrize(
    "hidden", ["\x1b[0m", "\u200b", "\u202e", "\x07", "\x1b]0;title\x07", "\u2060", "\u00ad", "\U000e0020"]
)
def test_rules_match_the_message_as_it_is_shown(hidden: str) -> None:
    """A server's escape sequence or invisible character inside `DROP TABLE` took the question past the rule that
    declines it to the next one that matched, here one that accepts."""
    message = f"DROP{hidden} TABLE scratch_abc; DELETE FROM scratch_abc"
    assert decide(RULES, request(message)).result.action == "decline"
    assert decide(RULES, request("ok", server=f"Other{hidden} Server")).result.action == "cancel"


def test_no_match_gives_the_default_action() -> None:
    decision = decide(RULES, request("UPDATE users SET role = 'admin'"))
    assert (decision.result.action, decision.reason) == ("decline", "no rule matched, default action")
    assert decide(AnswerRules(default="cancel"), request("x")).result.action == "cancel"


def test_an_accepting_default_gives_the_schemas_defaults_and_is_checked_like_a_rule() -> None:
    """It sent `accept` with no content at all: required fields missing, defaults not filled, nothing checked."""
    accepting = AnswerRules(default="accept")
    decision = decide(accepting, request("anything"))
    assert decision.result.action == "cancel"  # confirm and justification are required and have no default
    assert decision.result.content is None
    assert "confirm" in decision.reason

    optional = ElicitRequestFormParams(
        message="x", requested_schema={"type": "object", "properties": {"n": {"type": "integer", "default": 5}}}
    )
    decision = decide(accepting, ElicitationRequest(ServerIdentity("S", "t"), optional, Era.HANDSHAKE))
    assert (decision.result.action, decision.result.content) == ("accept", {"n": 5})


def test_rule_content_that_does_not_fit_the_schema_is_never_sent() -> None:
    decision = decide(RULES, request("hello", tool="bad_tool"))
    assert decision.result.action == "cancel"
    assert decision.result.content is None
    assert "confirm" in decision.reason
    assert "justification" in decision.reason


def test_url_mode_rules() -> None:
    rules = AnswerRules.model_validate({"rules": [{"mode": "url", "action": "accept"}]})
    url = ElicitRequestURLParams(message="Open", url="https://example.com", elicitation_id="1")
    url_request = ElicitationRequest(ServerIdentity("S", "t"), url, Era.HANDSHAKE)
    decision = decide(rules, url_request)
    assert decision.result.action == "accept"
    assert decision.reason == "rule 1: consent to the URL; nothing is opened"  # reported within parentheses
    assert decide(rules, request("form")).result.action == "decline"


async def test_rule_answerer_reports_every_decision() -> None:
    heard: list[RuleDecision] = []
    result = await RuleAnswerer(RULES, heard.append).answer(request("DROP TABLE users"))
    assert result.action == "decline"
    assert [decision.result.action for decision in heard] == ["decline"]


def test_rules_files_in_json_and_toml(tmp_path: Path) -> None:
    as_json = tmp_path / "answers.json"
    as_json.write_text(json.dumps({"default": "cancel", "rules": [{"message": "x", "action": "decline"}]}))
    as_toml = tmp_path / "answers.toml"
    as_toml.write_text(
        'default = "cancel"\n[[rules]]\nmessage = "x"\naction = "accept"\n[rules.content]\nconfirm = true\n'
    )
    as_upper_case_toml = tmp_path / "ANSWERS.TOML"
    as_upper_case_toml.write_text(as_toml.read_text())
    assert load_rules(as_json).default == "cancel"
    assert load_rules(as_toml).rules[0].content == {"confirm": True}
    assert load_rules(as_upper_case_toml).rules[0].content == {"confirm": True}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{not json", "not valid"),
        ('{"rules": [{"action": "approve"}]}', "expected shape"),
        ('{"rules": [{"action": "accept", "message": "(unclosed"}]}', "regular expression"),
        ('{"rules": [], "surprise": 1}', "expected shape"),
    ],
)
def test_bad_rules_files_are_reported(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "answers.json"
    path.write_text(text)
    with pytest.raises(RulesFileError, match=problem):
        load_rules(path)


def test_missing_rules_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(RulesFileError, match="Cannot read"):
        load_rules(tmp_path / "nope.json")
