"""The flood's size: the PR tier, or the nightly tier under PYBB_NIGHTLY=1."""

from __future__ import annotations

import os

FLOOD_REQUESTS = 10_000 if os.environ.get("PYBB_NIGHTLY") == "1" else 1_000
