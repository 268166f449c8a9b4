"""A suite's dry-run plan per sweep: the keys its jobs sweep with their values, the overrides every
job shares, and, when the jobs are not every combination of the swept values, each job's values."""

from __future__ import annotations

from posenc.launch.suite import PlannedSweep, SweepSpec, plan_table


def planned(name: str, jobs: list[list[str]]) -> PlannedSweep:
    return PlannedSweep(SweepSpec(name, "", []), [], jobs)


def test_a_product_sweep_is_its_swept_values_and_what_every_job_shares():
    jobs = [[f"pe={pe}", "train.steps=5", f"seed={s}"] for pe in ("rope", "nope") for s in (0, 1, 2)]
    (plan,) = plan_table([planned("text", jobs)])
    assert (plan.sweep, plan.jobs, plan.product) == ("text", 6, True)
    assert plan.swept == {"pe": ["rope", "nope"], "seed": ["0", "1", "2"]}
    assert plan.common == ["train.steps=5"]
    assert plan.per_job[4] == {"pe": "nope", "seed": "1"}


def test_jobs_that_are_not_every_combination_keep_their_own_values():
    jobs = [["pe=rope", "seed=0"], ["pe=nope", "seed=1", "+extra=1"], ["pe=rope", "seed=1"]]
    (plan,) = plan_table([planned("mixed", jobs)])
    assert plan.product is False  # 2 x 2 x 2 combinations, 3 jobs
    assert plan.swept == {"pe": ["rope", "nope"], "seed": ["0", "1"], "+extra": ["", "1"]}
    assert plan.common == [] and plan.per_job[1] == {"pe": "nope", "seed": "1", "+extra": "1"}
    (one,) = plan_table([planned("one", [["experiment=check", "seed=7"]])])
    assert (one.swept, one.common, one.product) == ({}, ["experiment=check", "seed=7"], True)


def test_the_printed_plan_fits_its_width_and_keeps_every_override_whole(capsys, monkeypatch):
    from posenc.cli import suite as cli_suite
    from posenc.cli.common import console

    monkeypatch.setattr(console, "width", 40)
    long = "order.overrides=['train.steps=80','model.d_model=64','model.n_layers=2']"
    jobs = [["pe=rope", "seed=0", long], ["pe=nope", "seed=1", long]]
    cli_suite.print_plan(plan_table([planned("order", jobs)])[0])
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) <= 40
    assert out.splitlines()[1:] == [
        "order: 2 jobs",
        "┏━━━━━┳━━━━━━┳━━━━━━┓",
        "┃ job ┃   pe ┃ seed ┃",
        "┡━━━━━╇━━━━━━╇━━━━━━┩",
        "│ 0   │ rope │    0 │",
        "│ 1   │ nope │    1 │",
        "└─────┴──────┴──────┘",
        "  every job:",
        "    order.overrides=['train.steps=80',",
        "    'model.d_model=64',",
        "    'model.n_layers=2']",
    ]
