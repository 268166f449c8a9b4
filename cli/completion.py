"""Shell completion of option values from the config tree (``--pe ro<TAB>`` → ``rope``).

``posenc --install-completion`` installs it for the user's shell (Typer's); an option that names
options of a config group passes ``autocompletion=options_of("pe")``. Comma lists complete their
last item, so ``--pe rope,al<TAB>`` gives ``rope,alibi``.
"""

from __future__ import annotations

from collections.abc import Callable


def options_of(group: str, extra: tuple[str, ...] = ()) -> Callable[[str], list[str]]:
    """A completer of the options of ``group`` (read from the config tree and the researcher's
    config folders when asked, so a new option completes with no list to edit), plus ``extra``."""

    def complete(incomplete: str) -> list[str]:  # Typer passes what was typed by the parameter's type
        from posenc.engine.config import list_options

        head, _, last = incomplete.rpartition(",")
        try:
            names = [*list_options(group), *extra]
        except Exception:  # a broken config folder: no completion rather than a traceback in the shell
            return []
        given = set(head.split(",")) if head else set()
        prefix = f"{head}," if head else ""
        return [prefix + n for n in names if n.startswith(last) and n not in given]

    return complete
