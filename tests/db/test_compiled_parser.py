"""The parser's second opinion with sqlglot compiled (`pip install 'sqlglot[c]'`, sqlglotc), which users may have.

SafeDB ships with the Python build: the compiled one parses about 3x faster but adds some 21 MiB to the server
(see docs/benchmarks.md). Compiled, sqlglot crashed the whole process on deep nesting and raised TypeError on
some malformed text, so SafeDB must hold up with it too. It runs in a venv of its own with only sqlglot, SafeDB's
`sql` package taken from the source tree.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap

import pytest
import sqlglot

from tests.client.servers import ROOT
from tests.interop.environments import ClientUnavailable, python_environment

pytestmark = pytest.mark.slow

# Prints one JSON object: each statement's shape (its root and read_form), and says_replace of a REPLACE.
_PROBE = textwrap.dedent(
    """
    import json, threading
    import sqlglot.parser
    from safedb.sql.structure import says_replace, statement_shape

    assert sqlglot.parser.__file__.endswith(".so"), sqlglot.parser.__file__
    statements = {
        "from nested 20,000 deep": "SELECT * FROM " + "(" * 20_000 + "t" + ")" * 20_000,
        "subqueries nested 5,000 deep": "SELECT " + "(SELECT " * 5_000 + "1" + ")" * 5_000,
        "malformed": "( ALL - ->> IF",
        "nested 60 deep": "SELECT * FROM " + "(" * 60 + "t" + ")" * 60,
        "a read": "SELECT id FROM users WHERE name = 'x' AND 5 > 0",
        "a replace": "REPLACE INTO t VALUES (1)",
    }
    shapes = {}

    def probe():  # in a thread, as SafeDB's worker threads classify long statements
        for name, sql in statements.items():
            shape = statement_shape(sql, "sqlite")
            shapes[name] = [shape.root, shape.read_form]

    worker = threading.Thread(target=probe)
    worker.start()
    worker.join()
    shapes["says replace"] = says_replace("REPLACE INTO t VALUES (1)")
    print(json.dumps(shapes))
    """
)


def test_compiled_sqlglot_neither_crashes_nor_confirms_what_it_cannot_parse() -> None:
    try:
        python = python_environment("sqlglot-compiled", f"sqlglot[c]=={sqlglot.__version__}")
    except ClientUnavailable as exc:
        if os.environ.get("SAFEDB_REQUIRE_ALL") == "1":
            pytest.fail(f"compiled sqlglot is required (SAFEDB_REQUIRE_ALL=1) but could not be installed: {exc}")
        pytest.skip(f"compiled sqlglot could not be installed: {exc}")
    probe = subprocess.run(
        [str(python), "-c", _PROBE],
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert probe.returncode == 0, f"exit status {probe.returncode}\n{probe.stderr[-3000:]}"
    assert json.loads(probe.stdout) == {
        "from nested 20,000 deep": ["unparsed", False],
        "subqueries nested 5,000 deep": ["unparsed", False],
        "malformed": ["unparsed", False],
        "nested 60 deep": ["Select", True],
        "a read": ["Select", True],
        "a replace": ["Command:REPLACE", False],
        "says replace": True,
    }
