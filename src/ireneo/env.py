"""Numbers from the environment, read one way for every policy (echoes, explicit memories)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping


def env_number(name: str, default: float, env: Mapping[str, str] | None = None) -> float:
    """`name` as a finite number of at least 0; `default` when unset or blank.

    ValueError names the variable and what it holds.
    """
    raw = (os.environ if env is None else env).get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a number of at least 0, not {raw}")
    return value
