"""`safedb client`: an elicitation-capable MCP client for any server and any elicitation schema.

The Python API: `schema_to_model` (a pydantic model that validates exactly like a requested schema)
and `elicitation_handler` (answer elicitations from a program with a typed object, a dict, or an
explicit `Decline()` / `Cancel()`).
"""

from safedb.client.api import Accept, Cancel, Decline, FormQuestion, answer_content, elicitation_handler
from safedb.client.model import InvalidAnswer, dump_content, schema_to_model
from safedb.client.schema import UnsupportedSchema, parse_requested_schema

__all__ = [
    "Accept",
    "Cancel",
    "Decline",
    "FormQuestion",
    "InvalidAnswer",
    "UnsupportedSchema",
    "answer_content",
    "dump_content",
    "elicitation_handler",
    "parse_requested_schema",
    "schema_to_model",
]
