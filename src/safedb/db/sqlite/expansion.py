"""Statements SQLite would take minutes to compile: WITH queries and views named many times over, nested.

While it compiles a statement, SQLite puts a copy of a WITH query (materialized or not) or of a view in
place of every name that refers to it, and copies what each copy names in turn. It checks neither its
progress handler nor interrupts while doing so, so no time limit applies. Twelve nested WITH queries
that each name the one before three times make half a million copies: a minute's work, on the event
loop, for a statement under 1,000 characters. `copied_tokens` counts, from the text alone, how much
would be copied, so that such a statement is refused before SQLite compiles it.

The count errs on the high side: any name that matches a WITH query or a view counts as a reference to
it, wherever it stands.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from safedb.db.sqlite.tokens import MARK, WORD, Token, is_keyword, is_mark, sql_tokens

COPY_LIMIT = 10_000
"""The most tokens a statement may have SQLite copy while compiling it (some tens of milliseconds' work)."""

_WITH = re.compile("with", re.IGNORECASE)


@dataclass(frozen=True)
class Definition:
    """What naming a WITH query or a view brings in: its own tokens, and the names it refers to."""

    size: int
    names: tuple[str, ...]
    queries: Mapping[str, tuple[Definition, ...]] = field(default_factory=dict)
    """A view's own WITH queries, under names no statement can write (`_OWN`): SQLite copies them again wherever
    the view is named."""


@dataclass(frozen=True)
class _Query:
    name: str
    name_at: int
    opens_at: int
    closes_at: int


# Joins a mark of a view (its text's hash) and the name of one of its WITH queries into a name no SQL text holds.
_OWN = "\0"


class _AnyName:
    """Every name: when a view is read, which other views there are is not known yet."""

    def __contains__(self, name: object) -> bool:
        return True


def view_definition(sql: str) -> Definition:
    """A view, from its `CREATE VIEW` text, with its own WITH queries (a view of nested WITH queries, each naming
    the one before three times, is a bomb of its own under a short name). The view's own name counts once, as a
    recursive WITH query's does."""
    tokens = list(sql_tokens(sql))
    names, queries = _parts(tokens, _AnyName(), f"{hash(sql):x}{_OWN}")
    return Definition(len(tokens), tuple(names), queries)


def copied_tokens(sql: str, views: Mapping[str, Definition]) -> int:
    """About how many tokens SQLite would copy while compiling `sql`, given the database's views by
    lower-cased name; any count past `COPY_LIMIT` is reported as `COPY_LIMIT + 1`."""
    if not views and _WITH.search(sql) is None:
        return 0
    known: dict[str, list[Definition]] = {name: [definition] for name, definition in views.items()}
    for definition in views.values():
        for name, definitions in definition.queries.items():
            known.setdefault(name, []).extend(definitions)
    names, queries = _parts(list(sql_tokens(sql)), views, "")
    for name, definitions in queries.items():
        known.setdefault(name, []).extend(definitions)
    return _Expansion(known).total(names)


def _parts(
    tokens: list[Token], views: Container[str], prefix: str
) -> tuple[list[str], dict[str, tuple[Definition, ...]]]:
    """The names a text refers to at its top level, and its WITH queries (named `prefix` + their name), each with
    its size and the names its body refers to: other WITH queries of the text, and `views`."""
    queries = _with_queries(tokens)
    names_in: dict[_Query | None, list[str]] = {query: [] for query in queries}
    names_in[None] = []
    query_names = {query.name for query in queries}
    naming = {query.name_at for query in queries}
    for index, owner in _innermost_queries(tokens, queries):
        text, kind = tokens[index]
        if kind == MARK or index in naming:
            continue
        if text in query_names:
            names_in[owner].append(prefix + text)
        if text in views and (prefix or text not in query_names):
            names_in[owner].append(text)
    definitions: dict[str, tuple[Definition, ...]] = {}
    for query in queries:
        definition = Definition(max(query.closes_at - query.opens_at - 1, 1), tuple(names_in[query]))
        definitions[prefix + query.name] = (*definitions.get(prefix + query.name, ()), definition)
    return names_in[None], definitions


class _Expansion:
    """How much naming each WITH query or view copies, counting what its copy names in turn."""

    def __init__(self, known: Mapping[str, list[Definition]]) -> None:
        self._known = known
        self._sizes: dict[str, int] = {}
        self._open: set[str] = set()

    def total(self, names: Iterable[str]) -> int:
        return _capped_sum(self._size(name) for name in names)

    def _size(self, name: str) -> int:
        # Depth first with a stack of its own, not recursion: a chain of a thousand WITH queries is valid SQL.
        stack = [name]
        while stack:
            current = stack[-1]
            if current in self._sizes or current not in self._known:
                stack.pop()
                continue
            if current not in self._open:
                self._open.add(current)
                stack.extend(
                    other for definition in self._known[current] for other in definition.names
                    if other in self._known and other not in self._sizes and other not in self._open
                )  # fmt: skip
                continue
            self._sizes[current] = min(
                max(definition.size + self._named(definition.names) for definition in self._known[current]),
                COPY_LIMIT + 1,
            )
            self._open.discard(current)
            stack.pop()
        return self._sizes.get(name, 0)

    def _named(self, names: Iterable[str]) -> int:
        """What the names in a definition bring in, each already sized; one still being sized names itself
        (a recursive WITH query), which SQLite does not copy again."""
        return _capped_sum(1 if name in self._open else self._sizes.get(name, 0) for name in names)


def _capped_sum(sizes: Iterable[int]) -> int:
    """The sum, held at just past COPY_LIMIT: a bomb's sizes grow exponentially, and only the limit matters."""
    total = 0
    for size in sizes:
        total = min(total + size, COPY_LIMIT + 1)
    return total


_QUERY_WORDS = frozenset({"select", "values", "with"})


def subquery_depth(sql: str) -> int:
    """How deeply the statement nests queries: in parentheses (`(SELECT ...)`, `(VALUES ...)`, `(WITH ...)`), and
    through WITH queries that name one another, which SQLite compiles into the query that names them as it does a
    subquery in FROM.

    SQLite flattens a subquery in FROM into the query around it, putting a copy of the subquery's expression
    in place of every reference to its column: `SELECT x + x + x AS x FROM (...)` nested twelve times is a
    program of a million instructions, seconds of compiling, from some 300 characters. The copies depend on
    how the names resolve, so only the nesting is counted here, to keep deep statements off the event loop;
    the size of what they compile to is bounded where they are compiled (`inspector`)."""
    tokens = list(sql_tokens(sql))
    return _parenthesized_depth(tokens) + _with_chain_depth(tokens)


def _parenthesized_depth(tokens: list[Token]) -> int:
    depth = deepest = 0
    opened: list[bool] = []
    previous: Token | None = None
    for token in tokens:
        if previous is not None and is_mark(previous, "(") and token[1] == WORD and token[0] in _QUERY_WORDS:
            opened[-1] = True
            depth += 1
            deepest = max(deepest, depth)
        if is_mark(token, "("):
            opened.append(False)
        elif is_mark(token, ")") and opened:
            depth -= opened.pop()
        previous = token
    return deepest


def _with_chain_depth(tokens: list[Token]) -> int:
    """The longest chain of WITH queries naming one another that the statement's top level names (`c5` naming `c4`,
    ..., naming `c0` is five deep): the chain's parentheses stand side by side, not nested."""
    if not any(is_keyword(token, "with") for token in tokens):
        return 0
    names, definitions = _parts(tokens, (), "")
    chains = _deepest_paths(
        {name: 0 for name in definitions},
        {name: {other for query in named for other in query.names} - {name} for name, named in definitions.items()},
    )
    return max((chains[name] for name in names if name in chains), default=0)


# Keywords that end a FROM clause at its level (after them, a comma separates something else).
_AFTER_FROM = frozenset(
    {"where", "group", "having", "order", "limit", "window", "union", "except", "intersect", "returning", "select",
     "values", "set", "do"}
)  # fmt: skip


def tables_joined(sql: str) -> int:
    """The most tables the statement's FROM clauses join, as its text says (`JOIN`s and commas), in all.

    SQLite's planner weighs the orders of the tables a query joins without checking its progress handler: a read
    joining some 40 copies of a table with four indexes by `NATURAL JOIN`, under 1,000 characters, took seconds to
    compile. Counted high: each FROM clause's first table, every `JOIN` anywhere, and every comma of a FROM clause
    at its own level, all added up."""
    tables = 0
    in_from = [False]  # per parenthesis level
    for text, kind in sql_tokens(sql):
        if kind == MARK:
            if text == "(":
                in_from.append(False)
            elif text == ")" and len(in_from) > 1:
                in_from.pop()
            elif text == "," and in_from[-1]:
                tables += 1
        elif kind == WORD:
            if text == "join":
                tables += 1
            elif text == "from":
                tables += 1
                in_from[-1] = True
            elif text in _AFTER_FROM:
                in_from[-1] = False
    return tables


def nesting_depths(
    brought_in: Mapping[str, Iterable[str]], generated_columns: Mapping[str, int] | None = None
) -> dict[str, int]:
    """How deeply naming each schema name nests subqueries, by lower-cased name: `brought_in` gives, per name,
    the definitions SQLite compiles into a statement that names it (a view's; the triggers on a table, for a
    statement that changes it). Each counts its own nesting (`subquery_depth`) and, through the names it holds,
    the deepest of what those bring in, once (a trigger may name its own table). Names that nest nothing are
    left out.

    `generated_columns` gives how many generated columns a table has. Each may name another, whose expression SQLite
    then copies in place of every reference to it, as it does a subquery's: 25 columns each naming the one before
    twice compiled until SQLite ran out of memory, from `SELECT c22 FROM g`. So two or more count as that many
    levels."""
    generated = {name: count for name, count in (generated_columns or {}).items() if count >= 2}
    definitions = {name: list(texts) for name, texts in brought_in.items()}
    for name in generated:
        definitions.setdefault(name, [])
    own = {
        name: max((subquery_depth(text) for text in texts), default=0) + generated.get(name, 0)
        for name, texts in definitions.items()
    }
    names = {
        name: {text for sql in texts for text, kind in sql_tokens(sql) if kind != MARK and text in definitions} - {name}
        for name, texts in definitions.items()
    }
    depths = _deepest_paths(own, names)
    return {name: depth for name, depth in depths.items() if depth > 0}


def _deepest_paths(own: Mapping[str, int], names: Mapping[str, set[str]]) -> dict[str, int]:
    """For each name, its `own` depth plus the deepest of the names it holds (`names`), each one deeper; a name on
    the path to itself counts as nothing."""
    depths: dict[str, int] = {}
    for start in own:
        if start in depths:
            continue
        # Depth first with a stack of its own, as in `_Expansion`.
        path, pending = [start], [iter(names[start])]
        while pending:
            other = next(pending[-1], None)
            if other is None:
                current = path.pop()
                pending.pop()
                named = (1 + depths.get(name, 0) for name in names[current] if name not in path)
                depths[current] = own[current] + max(named, default=0)
            elif other in own and other not in depths and other not in path:
                path.append(other)
                pending.append(iter(names[other]))
    return depths


def statement_nesting(sql: str, depths: Mapping[str, int]) -> int:
    """How deeply `sql` nests subqueries, counting what the schema names it holds bring in (`nesting_depths`)."""
    own = subquery_depth(sql)
    brought = (depths[text] for text, kind in sql_tokens(sql) if kind != MARK and text in depths)
    return own + max((1 + depth for depth in brought), default=0)


def _with_queries(tokens: list[Token]) -> list[_Query]:
    """Every `name [(columns)] AS [NOT] [MATERIALIZED] (body)`, in the order they start."""
    closing = _matching_parentheses(tokens)
    queries = []
    count = len(tokens)
    for index, (text, kind) in enumerate(tokens):
        if kind == MARK:
            continue
        at = index + 1
        if at < count and is_mark(tokens[at], "("):
            at = closing[at] + 1
        if not (at < count and is_keyword(tokens[at], "as")):
            continue
        at += 1
        for word in ("not", "materialized"):
            if at < count and is_keyword(tokens[at], word):
                at += 1
        if at < count and is_mark(tokens[at], "("):
            queries.append(_Query(text, index, at, closing[at]))
    return queries


def _matching_parentheses(tokens: list[Token]) -> dict[int, int]:
    """Where each opening parenthesis closes (the end of the text when it does not)."""
    closing: dict[int, int] = {}
    opened: list[int] = []
    for index, token in enumerate(tokens):
        if is_mark(token, "("):
            opened.append(index)
        elif is_mark(token, ")") and opened:
            closing[opened.pop()] = index
    for index in opened:
        closing[index] = len(tokens)
    return closing


def _innermost_queries(tokens: list[Token], queries: list[_Query]) -> Iterator[tuple[int, _Query | None]]:
    """Each token's index with the innermost WITH query whose body holds it (None at the top level)."""
    starting = {query.opens_at: query for query in queries}
    inside: list[_Query] = []
    for index in range(len(tokens)):
        while inside and index >= inside[-1].closes_at:
            inside.pop()
        yield index, inside[-1] if inside else None
        if index in starting:
            inside.append(starting[index])
