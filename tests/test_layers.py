"""The package is layered: a module imports only from its own layer or the layers below it.

core < science (pe < models; tasks) < analysis < engine < launch < reporting < experiments,
benchmarks < cli. A test, not a convention, because one stray import ties the layers together.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# the installed name of each folder (pyproject.toml's package-dir) and its rank
FOLDERS = {
    "posenc": "posenc",
    "experiments": "posenc.experiments",
    "benchmarks": "posenc.benchmarks",
    "cli": "posenc.cli",
}
RANKS = {
    "posenc.core": 0,
    "posenc.pe": 1,
    "posenc.tasks": 1,
    "posenc.models": 2,
    "posenc.analysis": 3,
    "posenc.engine": 4,
    "posenc.launch": 5,
    "posenc.reporting": 6,
    "posenc.experiments": 7,
    "posenc.benchmarks": 7,
    "posenc.cli": 8,
}


def rank(module: str) -> int:
    if module in ("posenc", "posenc.__init__"):
        return 0  # the package itself only re-exports core's errors
    if module.endswith(".__main__"):
        return 9  # an entry point (python -m posenc, python -m posenc.benchmarks) may call the CLI
    for prefix, r in sorted(RANKS.items(), key=lambda kv: -len(kv[0])):
        if module == prefix or module.startswith(prefix + "."):
            return r
    raise AssertionError(f"{module}: no layer; add it to RANKS")


def modules():
    for folder, name in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            yield ".".join((name, *parts)), path


def imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            yield next((n for n in reversed(names) if n.startswith("posenc")), node.module), node.lineno
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node.lineno


def test_no_module_imports_a_higher_layer():
    wrong = []
    for module, path in modules():
        for target, line in imports(path):
            if target.split(".")[0] != "posenc" or target in ("posenc.core", "posenc"):
                continue
            if rank(target) > rank(module):
                wrong.append(f"{path.relative_to(ROOT)}:{line} ({module}) imports {target}")
    assert not wrong, "\n".join(wrong)


def test_every_module_has_a_layer():
    for module, _ in modules():
        rank(module)


def test_the_old_top_level_names_are_gone():
    stale = []
    for _module, path in modules():
        for target, line in imports(path):
            if target.split(".")[0] in ("cli", "experiments", "benchmarks", "configs"):
                stale.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not stale, "\n".join(stale)
