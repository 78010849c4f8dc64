"""What a model declares: its regions (levels and premises) and its agents."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from blackboard._records import Notification

__all__ = ["Agent", "Level", "Premise", "Region"]


@dataclass(frozen=True, slots=True)
class Level:
    """An append-only region: contributions accumulate in the order they were admitted.

    Args:
        name: The region's name, unique within the model.
        unique: ``True`` makes the whole content unique within the level; a string names
            a key of the (dict) content that must be unique. Enforced by the store inside
            the admitting transaction, so it holds under concurrency where a rule cannot.
    """

    name: str
    unique: bool | str = False

    @property
    def kind(self) -> Literal["level"]:
        """The region kind, ``"level"``."""
        return "level"


@dataclass(frozen=True, slots=True)
class Premise:
    """A named, versioned value with an opening value; written by compare-and-set.

    Args:
        name: The region's name, unique within the model.
        guarded: When true, a registered agent may set it only if its ``writes_to``
            names it (levels are always guarded for registered agents).
    """

    name: str
    guarded: bool = False

    @property
    def kind(self) -> Literal["premise"]:
        """The region kind, ``"premise"``."""
        return "premise"


Region = Level | Premise


@dataclass(frozen=True, slots=True)
class Agent:
    """A registered writer: what it may write, what it watches, and how it is woken.

    Args:
        name: The writer name the agent writes under.
        writes_to: The regions it may write; a level outside them is ``NOT_PERMITTED``.
        subscribes_to: The regions whose contributions (a level's) or values (a
            premise's) it is notified of; grants and revokes naming the region are not.
        notify: Called, outside any lock and in sequence order, with a notification of
            each accepted write to a region it subscribes to, and of each grant or revoke
            of its own permissions (``record.kind`` GRANT or REVOKE, ``record.region`` the
            region concerned), when that commits. Only this process's writes are told;
            another process's are read with ``BoardReader.follow``.
    """

    name: str
    writes_to: tuple[str, ...] | list[str] = ()
    subscribes_to: tuple[str, ...] | list[str] = ()
    notify: Callable[[Notification], None] | None = field(default=None, compare=False)
