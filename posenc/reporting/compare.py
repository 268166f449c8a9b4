"""Compare the tables of several runs, sweeps or CSV files, joined on the config keys that differ.

A run directory contributes the rows of one of the tables its protocol declared (``tables_of``:
its main table unless another is named: ``order`` of an order run, ``per_position`` of an
extrapolation), a sweep folder those of every run it holds, a CSV file its rows as they are. Rows
of runs carry the config keys whose values differ between the runs (a group picked with ``pe=…``
shows as ``pe``, not as every ``pe.*`` value it implies; a run of several cells names its cells in
its rows, so only its own settings count); the metrics are the float columns the inputs share.
``per_configuration`` folds the seeds of each configuration into one row: n and, per metric, the
mean and its 95% Student-t interval (as a sweep's ``stats.csv``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from posenc.analysis.stats import summarize
from posenc.core.errors import UserError
from posenc.core.io import atomic_write_text
from posenc.engine.results import RunDir, flatten

_NOT_KEYS = ("_target_", "description")


def runs_of(path: Path) -> list[Path]:
    """The run directories an input names: itself, or every run of a sweep folder."""
    from posenc.launch.listing import SWEEP_FILE, job_run, read_sweep

    path = Path(path)
    if (path / "config.yaml").is_file():
        return [path]
    if (path / SWEEP_FILE).is_file():
        jobs = read_sweep(path)["jobs"]
        return [run for num in range(len(jobs)) if (run := job_run(path / str(num))) is not None]
    raise UserError(f"'{path}' is not a run directory, a sweep directory or a CSV table")


def tables_of(run: Path) -> list[str]:
    """The names of the tables a run wrote, its main table first: those its summary lists (what
    ``RunContext.write`` records of the protocol's declared tables), else, for a run written
    before summaries listed them, every ``<name>.csv`` beside its ``<name>.md``."""
    summary = RunDir(run).read_summary() if (Path(run) / "summary.json").is_file() else {}
    names = list(summary.get("tables") or [])
    if not names:
        names = sorted(p.stem for p in Path(run).glob("*.csv") if p.with_suffix(".md").is_file())
    main = summary.get("table") or ("table" if "table" in names else None)
    ordered = [main, *names] if main in names else names
    return [n for n in dict.fromkeys(ordered) if (Path(run) / f"{n}.csv").is_file()]


def _settings(config: dict) -> dict:
    """The config values that can tell runs apart: every key of a one-cell run's config; of a run
    of several cells (an order test, an extrapolation) its own settings, not its cells' configs."""
    if "choices" in config:
        return {**flatten(config), **config["choices"]}
    cells = (dict, list)  # cells: a mapping of configs, or a list of them
    return flatten({k: v for k, v in config.items() if not isinstance(v, cells)})


def _differing(configs: list[dict]) -> list[str]:
    """Dotted config keys that differ between runs; a differing group choice stands for its keys."""
    flat = [flatten(c) if "choices" in c else _settings(c) for c in configs]
    keys = sorted({k for f in flat for k in f})
    differ = [k for k in keys if len({repr(f.get(k)) for f in flat}) > 1 and not k.endswith(_NOT_KEYS)]
    groups = {k.split(".", 1)[1] for k in differ if k.startswith("choices.")}
    named = [k.split(".", 1)[1] if k.startswith("choices.") else k for k in differ]
    return [k for k in named if k.split(".", 1)[0] not in groups or k in groups]


def load(inputs: Sequence[Path], table: str | None = None) -> tuple[pd.DataFrame, list[str]]:
    """One table of every input's rows and the join keys (config keys that differ, then ``run``):
    of each run its main table, or the one named ``table``."""
    if not inputs:
        raise UserError("nothing to compare: give run directories, sweep directories or CSV tables")
    parts: list[tuple[str, pd.DataFrame, dict | None]] = []
    written: set[str] = set()
    for path in map(Path, inputs):
        if path.suffix == ".csv":
            if not path.is_file():
                raise UserError(f"'{path}' does not exist")
            parts.append((str(path), pd.read_csv(path).assign(run=path.stem), None))
            continue
        for run in runs_of(path):
            names = tables_of(run)  # none: a failed or unfinished run has no table yet
            written.update(names)
            name = table or (names[0] if names else None)
            if name in names:
                rows = pd.read_csv(run / f"{name}.csv").assign(run=run.name)
                parts.append((str(run), rows, RunDir(run).read_config()))
    if not parts:
        if table is not None and written:
            raise UserError(f"no run has a table '{table}'; tables there: {', '.join(sorted(written))}")
        raise UserError(f"no finished run with a table in {', '.join(map(str, inputs))}")
    common = set.intersection(*(set(t.columns) - {"run"} for _, t, _ in parts))
    if not common:
        described = "; ".join(f"{name}: {', '.join(c for c in t.columns if c != 'run')}" for name, t, _ in parts)
        raise UserError(f"the inputs have no common keys to compare on ({described})")

    configs = [c for _, _, c in parts if c is not None]
    keys = _differing(configs) if len(configs) > 1 else []
    tables = []
    for _, table, config in parts:
        values = _settings(config) if config is not None else {}
        front = {k: values.get(k) for k in keys if k not in table.columns}
        tables.append(table.assign(**front))
    joined = pd.concat(tables, ignore_index=True)
    key_cols = [k for k in keys if k in joined.columns] + ["run"]
    rest = [c for c in joined.columns if c not in key_cols]
    return joined[key_cols + rest], key_cols


def metric_columns(table: pd.DataFrame, keys: Sequence[str]) -> list[str]:
    return [c for c in table.columns if c not in keys and pd.api.types.is_float_dtype(table[c])]


LOW, HIGH = " ci95_low", " ci95_high"  # suffixes of a metric's interval columns


def per_configuration(table: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    """One row per configuration (the columns that are neither metrics nor ``seed`` nor ``run``):
    ``seeds`` (how many rows it folds) and, per metric, its mean over them with the 95% interval
    in ``<metric> ci95_low`` and ``<metric> ci95_high`` (NaN with one seed)."""
    keys = [c for c in table.columns if c not in metrics and c not in ("seed", "run")]
    groups = table.groupby(keys, dropna=False, sort=False) if keys else [((), table)]
    rows = []
    for group, part in groups:
        row = dict(zip(keys, group if isinstance(group, tuple) else (group,)))
        row["seeds"] = part["seed"].nunique() if "seed" in part else len(part)
        for m in metrics:
            s = summarize(part[m].tolist())
            row |= {m: s["mean"], f"{m}{LOW}": s["ci95_low"], f"{m}{HIGH}": s["ci95_high"]}
        rows.append(row)
    return pd.DataFrame(rows)


def select(table: pd.DataFrame, spec: str, inputs: Sequence[Path]) -> pd.Series:
    """Rows of the baseline: those of one of the inputs (its path), or ``key=value[,key=value]``."""
    for path in map(Path, inputs):
        if Path(spec).resolve() == path.resolve():
            names = [path.stem] if path.suffix == ".csv" else [run.name for run in runs_of(path)]
            return table["run"].isin(names)
    mask = pd.Series(True, index=table.index)
    for term in spec.split(","):
        key, sep, value = term.partition("=")
        if not sep or key not in table.columns:
            raise UserError(
                f"--baseline '{spec}': give one of the inputs, or key=value with a key among {', '.join(table.columns)}"
            )
        if not (table[key].astype(str) == value).any():
            raise UserError(
                f"--baseline '{spec}': no row has {key}={value}; values there: "
                f"{', '.join(sorted(set(table[key].astype(str))))}"
            )
        mask &= table[key].astype(str) == value
    if not mask.any():
        raise UserError(f"--baseline '{spec}' matches no row")
    return mask


def differences(table: pd.DataFrame, baseline: pd.Series, metrics: Sequence[str]) -> pd.DataFrame:
    """``Δ metric`` columns: each row minus the baseline, matched on the columns that tell the
    baseline's own rows apart (a seed, a length); the mean where several baseline rows match."""
    base = table[baseline]
    match = [c for c in table.columns if c not in metrics and c != "run" and base[c].nunique() > 1]
    out = table.copy()
    if match:
        means = base.groupby(match)[list(metrics)].mean()
        aligned = table[match].merge(means, left_on=match, right_index=True, how="left")
        for m in metrics:
            out[f"Δ {m}"] = table[m] - aligned[m].to_numpy()
    else:
        for m in metrics:
            out[f"Δ {m}"] = table[m] - base[m].mean()
    return out


_LATEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\^{}",
    "Δ": r"$\Delta$",
}


def to_latex(table: pd.DataFrame, floatfmt: str = ".4g") -> str:
    """A booktabs ``tabular`` of the table (written here: pandas' needs jinja2)."""

    def cell(v: object) -> str:
        text = format(v, floatfmt) if isinstance(v, float) else str(v)
        return "".join(_LATEX.get(ch, ch) for ch in text)

    align = "".join("r" if pd.api.types.is_numeric_dtype(table[c]) else "l" for c in table.columns)
    lines = [f"\\begin{{tabular}}{{{align}}}", r"\toprule", " & ".join(map(cell, table.columns)) + r" \\", r"\midrule"]
    lines += [" & ".join(map(cell, row)) + r" \\" for row in table.itertuples(index=False)]
    lines += [r"\bottomrule", r"\end{tabular}", ""]
    return "\n".join(lines)


def export(table: pd.DataFrame, path: Path) -> None:
    """Write the table as CSV, Markdown or LaTeX, by the file's extension."""
    path = Path(path)
    writers = {
        ".csv": lambda t: t.to_csv(index=False),
        ".md": lambda t: t.to_markdown(index=False, floatfmt=".4g") + "\n",
        ".tex": to_latex,
    }
    if path.suffix not in writers:
        raise UserError(f"cannot export to '{path}': use a .csv, .md or .tex file")
    atomic_write_text(path, writers[path.suffix](table))
