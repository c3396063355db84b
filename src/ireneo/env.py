"""What the environment allows: numbers read one way for every policy (echoes, explicit
memories), and the cores this process may use."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path


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


def model_cache() -> Path:
    """Where models built at first use are kept: $IRENEO_MODEL_CACHE, else ireneo/models under
    $XDG_CACHE_HOME (~/.cache)."""
    if os.environ.get("IRENEO_MODEL_CACHE"):
        return Path(os.environ["IRENEO_MODEL_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "ireneo" / "models"
