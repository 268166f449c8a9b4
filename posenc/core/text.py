"""Parsing the small strings a user types: comma lists."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from posenc.core.errors import UserError


def split_list(value: str, what: str, cast: Callable[[str], Any] = str) -> list:
    """``"a,b,c"`` -> ``[a, b, c]`` (items stripped, each passed through ``cast``).

    ``what`` names the option in the error (``--lengths``): an empty item or one that ``cast``
    rejects is a user mistake, reported with an example.
    """
    items = [v.strip() for v in str(value).split(",")]
    if not all(items):
        raise UserError(f"{what} '{value}' has an empty item; give a comma list such as a,b")
    try:
        return [cast(v) for v in items]
    except ValueError:
        kind = {int: "integers", float: "numbers"}.get(cast, getattr(cast, "__name__", "value") + "s")
        raise UserError(f"{what} '{value}' is not a comma list of {kind}, e.g. 128,256") from None
