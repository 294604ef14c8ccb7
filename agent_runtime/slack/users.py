"""Who a Slack user is: the canonical principal the bridge votes for. Pure: no I/O (the bridge looks the e-mail up).

Two ways, read once at start-up from the mapping file (a ConfigMap's ``users.yaml``) and the flags:

.. code-block:: yaml

    users:                                  # Slack user id -> principal (and its groups)
      U024BE7LH: {principal: alice@example.com, groups: [sre]}
    emailDomains: [example.com]             # else: the Slack profile's e-mail, when it is in one of these domains
    groups:                                 # groups of a principal found either way
      sre: [alice@example.com, bob@example.com]

A user found neither way is nobody: the bridge tells them so and decides nothing. The Agent's own
``spec.access.identities`` then fold the principal into the name its approvers use, in the runtime.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from agent_runtime.bridges.people import Person


@dataclass(frozen=True)
class UserMap:
    users: Mapping[str, Person] = field(default_factory=dict)  # Slack user id -> person
    email_domains: frozenset[str] = frozenset()
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # principal -> groups (from the groups table)

    @classmethod
    def load(cls, text: str = "", email_domains: Iterable[str] = ()) -> UserMap:
        """The mapping file's text (YAML, see the module docstring) and the ``--email-domain`` flags."""
        data: Any = yaml.safe_load(text) if text.strip() else {}
        if not isinstance(data, dict):
            raise ValueError("the Slack user mapping must be a YAML mapping with users, emailDomains and groups")
        users: dict[str, Person] = {}
        for slack_id, entry in (data.get("users") or {}).items():
            if isinstance(entry, str):
                entry = {"principal": entry}
            if not isinstance(entry, dict) or not isinstance(entry.get("principal"), str) or not entry["principal"]:
                raise ValueError(f"users.{slack_id}: give a principal (a string, or {{principal, groups}})")
            users[str(slack_id)] = Person(entry["principal"], tuple(str(g) for g in entry.get("groups") or []))
        by_principal: dict[str, list[str]] = {}
        for group, members in (data.get("groups") or {}).items():
            for member in members or []:
                by_principal.setdefault(str(member), []).append(str(group))
        domains = {d.lower().lstrip("@") for d in [*(data.get("emailDomains") or []), *email_domains] if d}
        return cls(users, frozenset(domains), {p: tuple(g) for p, g in by_principal.items()})

    def needs_email(self, slack_id: str) -> bool:
        """Whether :meth:`resolve` would look at the user's e-mail (not mapped by id, and domains are configured)."""
        return slack_id not in self.users and bool(self.email_domains)

    def resolve(self, slack_id: str, email: str | None = None) -> Person | None:
        """The person a Slack user is, or None: nobody we know."""
        person = self.users.get(slack_id)
        if person is None and email and "@" in email:
            domain = email.rsplit("@", 1)[1].lower()
            if domain in self.email_domains:
                person = Person(email.lower())
        if person is None:
            return None
        extra = self.groups.get(person.principal, ())
        return Person(person.principal, tuple(sorted({*person.groups, *extra})))


__all__ = ["Person", "UserMap"]
