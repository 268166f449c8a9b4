"""Write pyproject.toml's version floors as pins, one ``name==floor`` a line, for pip's ``-c``.

A floor in pyproject.toml is a claim that the code works there; the floors job installs every
floor at once and runs the tests, so the claim is tested. Read are the base dependencies and the
extras named on the command line (``python .ci/floors.py hf``); a requirement without a floor
(``gguf``) is left for pip to resolve. ``--check`` instead compares the installed versions with
the floors and exits 1 naming the first that differs.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

import tomllib

FLOOR = re.compile(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?\s*>=\s*([0-9][0-9A-Za-z.]*)")


def floors(extras: list[str]) -> dict[str, str]:
    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements += project["optional-dependencies"][extra]
    pins = {}
    for requirement in requirements:
        match = FLOOR.match(requirement)
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def main(argv: list[str]) -> int:
    check = "--check" in argv
    pins = floors([arg for arg in argv if arg != "--check"])
    if not check:
        print("\n".join(f"{name}=={version}" for name, version in sorted(pins.items())))
        return 0
    for name, version in sorted(pins.items()):
        installed = metadata.version(name).split("+")[0]  # torch 2.5.0+cu124 is torch 2.5.0
        if _padded(installed) != _padded(version):
            print(f"floors: {name} {installed} is installed, not its floor {version}", file=sys.stderr)
            return 1
        print(f"floors: {name} {installed}")
    return 0


def _padded(version: str) -> list[int]:
    parts = [int(part) for part in re.findall(r"\d+", version)]
    return (parts + [0, 0, 0])[:3]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
