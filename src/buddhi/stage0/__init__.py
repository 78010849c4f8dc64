"""Stage 0: the one-time pre-pass that types raw input into items.

:func:`condition` is the contract's simplest correct fill: a 1:1 identity
pass-through plus an optional trigger-detection hook whose flag is recorded.
"""

from buddhi.stage0.conditioning import RawInput, condition

__all__ = ["RawInput", "condition"]
