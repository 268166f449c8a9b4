"""Position schemes. Each family lives in its own module and implements ``PositionScheme``."""

from posenc.pe.base import PositionOutOfRange, PositionScheme

__all__ = ["PositionOutOfRange", "PositionScheme"]
