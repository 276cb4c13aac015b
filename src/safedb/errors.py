"""One exception tree for SafeDB.

    SafeDBError
    ├── ConfigurationError        bad settings or command-line input; nothing started
    ├── DatabaseOpenError         the database cannot be opened (missing, not a database, unreachable)
    ├── StatementRefused          the statement is never run, whatever anyone answers
    │   ├── EmptyStatement
    │   ├── MultipleStatements
    │   ├── TransactionControl
    │   ├── InvalidStatement      the database cannot prepare it (syntax error, unknown table...)
    │   └── DeniedByPolicy        on the deny list (extension loading, files outside allowed paths...)
    │       └── TemporaryObject   it creates a temporary object, which no later call could use
    ├── QueryFailed               the database raised an error while running the statement
    │   ├── QueryTimeout          the statement ran past its time limit and was interrupted
    │   ├── RowCountChanged       it affected another number of rows than the approved preview showed
    │   └── ChangedSinceQuestion  what it would do now is not what the approved question showed
    ├── ApprovalReused            an answer that was already acted on came back (a replay)
    └── TooManyWaiting            the approval page holds as many waiting approvals as it takes

The server turns each of these into a tool error whose text is the exception's message; anything
else becomes a generic error and is logged, so internals never reach the client.
"""

from __future__ import annotations

from safedb import wording


class SafeDBError(Exception):
    """Base of every error SafeDB raises on purpose; its message is safe to show to users."""


class ConfigurationError(SafeDBError):
    """Invalid settings or command-line input."""


class DatabaseOpenError(SafeDBError):
    """The database could not be opened."""


class StatementRefused(SafeDBError):
    """The statement will not be run, and no approval can change that."""


class EmptyStatement(StatementRefused):
    def __init__(self) -> None:
        super().__init__("The query is empty: send exactly one SQL statement.")


class MultipleStatements(StatementRefused):
    def __init__(self) -> None:
        super().__init__(
            "The query contains more than one statement. SafeDB runs exactly one statement per call; "
            "nothing was run. Send each statement in its own call."
        )


class TransactionControl(StatementRefused):
    def __init__(self, verb: str) -> None:
        super().__init__(
            f"Transaction control ({verb}) is not accepted: SafeDB runs each approved statement in its own "
            "transaction. Nothing was run."
        )


class InvalidStatement(StatementRefused):
    """The database could not prepare the statement."""


class DeniedByPolicy(StatementRefused):
    """The statement is on the deny list."""


class TemporaryObject(DeniedByPolicy):
    def __init__(self) -> None:
        super().__init__(
            "Temporary tables, views, triggers, indexes and sequences last only as long as one database session, "
            "and SafeDB does not keep sessions between calls: no later statement could use one. Nothing was run; "
            "create a regular one instead."
        )


class QueryFailed(SafeDBError):
    """The database reported an error while running the statement; its transaction was rolled back."""


class QueryTimeout(QueryFailed):
    def __init__(self, seconds: float) -> None:
        super().__init__(
            f"The statement did not finish within the {seconds:g} s time limit, which counts any wait for a free "
            "database connection, and was stopped."
        )


class RowCountChanged(QueryFailed):
    def __init__(self, approved: int, affected: int) -> None:
        super().__init__(
            f"The statement affected {wording.rows(affected)}, but was approved for the {wording.rows(approved)} "
            "its preview showed (what it matches changed since). It was rolled back; nothing was changed. Call "
            "the tool again to see the new impact."
        )


class ChangedSinceQuestion(QueryFailed):
    def __init__(self, reasons: str) -> None:
        super().__init__(
            f"The database changed since the question ({reasons}), so the approval does not cover what the "
            "statement would do now. It was stopped (or rolled back); nothing was changed. Call the tool again to "
            "see the new impact."
        )


class ApprovalReused(SafeDBError):
    def __init__(self) -> None:
        super().__init__(
            "This question was already answered (approved, declined or cancelled), and an answer counts once: this "
            "one was not used, and nothing was run for it. Call the tool again to ask anew."
        )


class ApprovalHeldElsewhere(SafeDBError):
    def __init__(self) -> None:
        super().__init__(
            "This approval is not on this SafeDB process's approval page: another process asked it (or this one "
            "restarted), and only that process holds the approver's decision. Nothing was run, and the approval is "
            "left as it is: send the retry to the process that asked, or call the tool again to ask anew."
        )


class TooManyWaiting(SafeDBError):
    def __init__(self, held: str) -> None:
        super().__init__(
            f"The approval page already holds {held}; nothing was run. Ask again once some are decided or have expired."
        )
