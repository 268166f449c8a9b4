"""The CLI's progress bars, driven by the library's events on a terminal in memory."""

import io
import re

from rich.console import Console

from posenc.cli.common import EventBar
from posenc.engine.context import Event


class Clock:
    """Seconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=120), out


def last_frame(out: io.StringIO) -> str:
    """The bar's final drawing, without colours and cursor codes."""
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    return [line for line in re.split(r"[\r\n]", plain) if line.strip()][-1]


def test_the_time_left_is_the_rate_since_the_first_record_even_when_records_are_a_minute_apart():
    console, out = terminal()
    clock = Clock()
    bar = EventBar(console=console, clock=clock)
    bar(Event("stage", "train rope", total=100))
    for minute, done in ((1, 10), (2, 20), (3, 30)):  # rich's own 30 s window would hold one record
        clock.now = 60.0 * minute
        bar(Event("advance", "train rope", done=done, fields={"train_loss": 2.0}))
    task = bar._bar.tasks[0]
    assert task.time_remaining == 420  # 20 steps in 120 s, 70 left
    bar.close()
    assert "30/100" in last_frame(out) and "0:07:00" in last_frame(out)


def test_a_training_that_reaches_its_target_before_the_cap_ends_full():
    console, out = terminal()
    clock = Clock()
    bar = EventBar(console=console, clock=clock)
    bar(Event("stage", "train rope", total=400))
    clock.now = 10.0
    bar(Event("advance", "train rope", done=50, fields={"train_loss": 1.0}))
    clock.now = 20.0
    bar(Event("advance", "train rope", done=100, fields={"train_loss": 0.5}))
    bar(Event("advance", "train rope", done=100, fields={"reached_target": False}))
    assert bar._bar.tasks[0].completed == 100
    clock.now = 30.0
    bar(Event("advance", "train rope", done=150, fields={"reached_target": True}))
    task = bar._bar.tasks[0]
    assert (task.completed, task.finished, task.time_remaining) == (400, True, 0.0)
    bar.close()
    frame = last_frame(out)
    assert "400/400" in frame and "target reached at step 150" in frame and "0:00:00" in frame


def test_the_reached_target_flag_travels_from_the_training_record_to_the_event(tmp_path):
    from posenc.engine.context import RunContext

    events = []
    ctx = RunContext(tmp_path, on_event=events.append)
    on_log = ctx.stage("train rope", total=400)
    on_log({"step": 150, "val_bpb": 1.2, "reached_target": True})
    assert events[-1] == Event("advance", "train rope", done=150, fields={"reached_target": True})


def stop_at_step(monkeypatch, step: int) -> None:
    """Ctrl-C (a SIGINT to this process) during training step ``step`` (from 0)."""
    import signal

    import posenc.engine.training as training

    lr_at = training.lr_at

    def lr_then_ctrl_c(at, cfg):
        if at == step:
            signal.raise_signal(signal.SIGINT)
        return lr_at(at, cfg)

    monkeypatch.setattr(training, "lr_at", lr_then_ctrl_c)


TINY = ["experiment=smoke", "train.steps=6", "train.seq_len=16", "eval.max_windows=4", "-q"]


def test_an_interrupted_cached_training_names_the_run_folder_to_resume(cli, tmp_path, monkeypatch):
    stop_at_step(monkeypatch, 2)
    code, _, err = cli("extrapolate", "--pe", "rope", "--lengths", "16,32", "--results-dir", tmp_path, *TINY)
    assert code == 130, err  # 128 + SIGINT
    [run] = (tmp_path / "runs").iterdir()  # the extrapolation's folder, which --resume continues
    discarded = "stopped by SIGINT: the unfinished training was discarded, the run's config kept"
    assert f"{discarded} in {run}; resume with --resume {run}" in " ".join(err.split())
    assert not [p for p in (tmp_path / "cache").iterdir() if p.is_dir()]  # the partial folder is gone


def test_an_interrupted_training_names_its_folder_to_resume(cli, tmp_path, monkeypatch):
    stop_at_step(monkeypatch, 2)
    code, _, err = cli("train", "--pe", "rope", "--results-dir", tmp_path, *TINY)
    assert code == 130, err
    [run] = (tmp_path / "runs").iterdir()
    assert f"checkpoint of step 3 saved in {run}; resume with --resume {run}" in " ".join(err.split())


SWEEP = ["experiment=smoke", "train.steps=2", "train.log_every=1", "eval.max_windows=2", "eval.periodic_windows=2"]


def job_counts(events):
    """The ``done`` of each advance event, after checking that they only grow."""
    done = [e.done for e in events if e.kind == "advance"]
    assert done == sorted(set(done)), done
    return done


def test_a_sweep_reports_its_jobs_ended_out_of_its_planned_jobs(tmp_path):
    from posenc.launch import sweep

    planned = sweep.plan([*SWEEP, "pe=rope,nope", "seed=0,1"])
    sweep_dir = sweep.create(tmp_path, planned.job_overrides + planned.hydra_overrides, "basic", planned.jobs)
    events = []
    outcome = sweep.run(sweep_dir, planned, on_event=events.append)
    assert outcome.failed == 0
    assert events[0] == Event("stage", f"sweep {sweep_dir.name}", total=4)
    assert [e.kind for e in events[1:]] == ["advance"] * (len(events) - 1)
    assert job_counts(events)[-1] == 4


def test_a_suite_reports_the_jobs_of_all_its_sweeps_as_one_count(tmp_path):
    from posenc.launch import suite as suites

    pes = {"first": "rope,nope", "second": "rope"}
    sweeps = [suites.SweepSpec(name, name, [*SWEEP, f"pe={pe}"]) for name, pe in pes.items()]
    the_suite = suites.Suite("two", "two sweeps", [0], "basic", [], sweeps)
    planned = suites.plan(the_suite)
    assert [len(p.jobs) for p in planned] == [2, 1]
    suite_dir = suites.create(tmp_path, the_suite, planned, "basic")
    events = []
    outcome = suites.run(suite_dir, planned, "basic", on_event=events.append)
    assert outcome.failed == 0
    assert events[0] == Event("stage", f"suite {suite_dir.name}", total=3)
    assert [e for e in events if e.kind == "stage"] == [events[0]]  # the sweeps' own stages stay inside
    done = job_counts(events)
    assert done[-1] == 3 and 2 in done  # the first sweep's end, then the second's job on top of it
    messages = [e.label for e in events if e.kind == "message"]
    assert messages[0] == "first: 2 jobs: first" and messages[2] == "second: 1 jobs: second"
