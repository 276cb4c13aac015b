"""The databases one server serves, each with its policy, and choosing one for a tool call."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from safedb.approval.verification import ApprovalRules, SafetyVerification, verification_form
from safedb.db.backend import Database
from safedb.errors import ConfigurationError, SafeDBError
from safedb.settings import Channel, Environment, Target
from safedb.sql.classification import Classification
from safedb.sql.policy import DenyList


class UnknownTarget(SafeDBError):
    """The call named no target, or one this server does not serve."""


@dataclass(frozen=True)
class ServedTarget:
    """A target's settings together with its open database."""

    target: Target
    database: Database

    @property
    def name(self) -> str:
        return self.target.name

    @property
    def deny_list(self) -> DenyList:
        return DenyList(allowed_paths=self.target.policy.allowed_paths)

    @property
    def rules(self) -> ApprovalRules:
        policy = self.target.policy
        return ApprovalRules(
            target_name=self.name,
            production_target=self.target.environment is Environment.PRODUCTION,
            min_production_justification=policy.min_justification,
            # On the approval page the approver sees the target itself; only the form asks to type it.
            type_target_name=policy.type_target_name and policy.channel is Channel.FORM,
        )

    @property
    def form(self) -> type[SafetyVerification]:
        return verification_form(self.target.policy.type_target_name)

    def refused_by_policy(self, classification: Classification) -> str | None:
        """Why the target's policy refuses this change outright, or None."""
        refused = [str(c) for c in classification.categories if c in self.target.policy.refuse]
        if not refused:
            return None
        return f"Target {self.name!r} refuses {', '.join(refused)} outright, whatever anyone answers. Nothing was run."

    def needs_approval(self, classification: Classification) -> bool:
        return any(category in self.target.policy.ask for category in classification.categories)


class ServedTargets:
    """Every target of the server, by name."""

    def __init__(self, targets: Mapping[str, ServedTarget]) -> None:
        if not targets:
            raise ConfigurationError("At least one target is needed.")
        self._targets = dict(targets)

    def __iter__(self) -> Iterator[ServedTarget]:
        return iter(self._targets.values())

    def __len__(self) -> int:
        return len(self._targets)

    def pick(self, name: str | None) -> ServedTarget:
        """The named target; with no name, the only one."""
        if name is None:
            if len(self._targets) == 1:
                return next(iter(self._targets.values()))
            raise UnknownTarget(f"Name a target: this server serves {self._names()}.")
        if name not in self._targets:
            raise UnknownTarget(f"There is no target named {name!r}; this server serves {self._names()}.")
        return self._targets[name]

    def _names(self) -> str:
        return ", ".join(repr(name) for name in self._targets)
