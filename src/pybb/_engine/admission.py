"""pybb's own admission rule, in front of the application's.

The kernel asks one rule of every write. pybb's part refuses what a knowledge source may
not write: a record other than its own attempt, or a component outside its scope. The
controller's bookkeeping (verdicts, dispatches, handoffs...) is pybb's own and accepted;
every other write (a knowledge source's attempt that pybb accepts, and the writes to the
application's own regions) goes on to the application's rule.
"""

from __future__ import annotations

from blackboard import (
    Accept,
    AdmissionRule,
    BoardReader,
    ProposedContribution,
    ProposedWrite,
    Reject,
)
from pybb._engine.projection import ATTEMPTS, KINDS

__all__ = ["PybbRule"]

# Asked of every record the board writes (about six per W1 entry): one answer, not one
# object per record (``Accept`` holds nothing, and the kernel keeps one of its own too).
_ACCEPT = Accept()


class PybbRule:
    """The board's admission rule: pybb's scope checks, then the application's rule.

    Args:
        user_rule: The application's rule (``None``: accept what pybb accepts).
    """

    def __init__(self, user_rule: AdmissionRule | None) -> None:
        self._user_rule = user_rule
        self._scopes: dict[str, str | None] = {}
        # Writer ``ks:<name>`` to ``<name>``, for the sources not scoped to a component:
        # their own attempt record has nothing to refuse (the common case, asked once
        # per attempt, without ``_scope_refusal``'s call).
        self._unscoped: dict[str, str] = {}

    def register_source(self, name: str, component: str | None) -> None:
        """Let knowledge source ``name`` record attempts (scoped to ``component``, if given)."""
        self._scopes[name] = component
        if component is None:
            self._unscoped[f"ks:{name}"] = name
        else:
            self._unscoped.pop(f"ks:{name}", None)

    def __call__(self, proposed: ProposedWrite, reader: BoardReader) -> Accept | Reject:
        if isinstance(proposed, ProposedContribution):
            writer = proposed.writer
            content = proposed.content
            if (
                writer in self._unscoped
                and proposed.level == ATTEMPTS
                and isinstance(content, dict)
                and content.get("source") == self._unscoped[writer]
            ):
                # An unscoped source's own attempt: nothing of pybb's to refuse (its writes
                # are taken apart as ``_scope_refusal`` does, so a malformed one raises alike).
                for _component, _value in content.get("writes", ()):
                    pass
            elif writer.startswith("ks:"):
                refusal = self._scope_refusal(proposed)
                if refusal is not None:
                    return Reject(refusal)
            elif proposed.level in KINDS:
                return _ACCEPT  # pybb's own bookkeeping
        elif proposed.premise in KINDS:
            return _ACCEPT  # the cycle count
        if self._user_rule is not None:
            return self._user_rule(proposed, reader)
        return _ACCEPT

    def _scope_refusal(self, proposed: ProposedContribution) -> str | None:
        name = proposed.writer[3:]
        content = proposed.content
        if proposed.level != ATTEMPTS or not isinstance(content, dict):
            return f"knowledge source {name!r} may only write attempt records"
        if content.get("source") != name:
            return f"knowledge source {name!r} may not record an attempt of another source"
        if name not in self._scopes:
            return f"{name!r} is not a knowledge source registered with a controller"
        scope = self._scopes[name]
        for component, _ in content.get("writes", ()):
            if scope is not None and component != scope:
                what = "the whole measurement" if component is None else f"component {component!r}"
                return (
                    f"knowledge source {name!r} is scoped to component {scope!r} and may not "
                    f"write {what} of entry {content.get('key')!r}; write only "
                    f"write_component(key, {scope!r}, value)"
                )
        return None
