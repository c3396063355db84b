"""ireneo: verbatim, searchable recall of earlier conversations, for AI agents."""

from ireneo.errors import FormatError, IreneoError, ModelMismatch, NotFound
from ireneo.memory import Memory
from ireneo.model import Block, ContextTurn, Hit, Turn

__all__ = [
    "Block",
    "ContextTurn",
    "FormatError",
    "Hit",
    "IreneoError",
    "Memory",
    "ModelMismatch",
    "NotFound",
    "Turn",
]
__version__ = "0.1.0"
