"""The training loop's resume and stop signals, in process."""

from __future__ import annotations

import os
import signal

import pytest
import torch

from posenc.build import build
from posenc.config import compose
from posenc.errors import Interrupted
from posenc.results import RunDir
from posenc.training import train

OVERRIDES = ["experiment=smoke", "train.steps=12", "train.checkpoint_every=5", "train.log_every=1"]


def start(tmp_path, name):
    setup = build(compose(OVERRIDES))
    run = RunDir.create(tmp_path, name, setup.config)
    return setup, run


def batches_of(setup):
    return lambda b, g: setup.task.train_batch(b, setup.train.seq_len, g)


def losses(run):
    return [(r["step"], r["train_loss"], r["grad_norm"]) for r in run.read_records()]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_ends_the_step_saves_it_and_resume_matches_an_uninterrupted_run(tmp_path, signum):
    setup, reference = start(tmp_path, "reference")
    train(setup.model, batches_of(setup), setup.train, seed=0, run=reference)

    setup, run = start(tmp_path, "stopped")
    batches = batches_of(setup)

    def stop_at_7(b, g):  # the signal arrives in the middle of step 7
        if len(run.read_records()) == 6:
            os.kill(os.getpid(), signum)
        return batches(b, g)
    with pytest.raises(Interrupted) as info:
        train(setup.model, stop_at_7, setup.train, seed=0, run=run)
    assert info.value.step == 7 and info.value.signum == signum  # not the periodic step 5
    assert str(info.value) == f"stopped by {signal.Signals(signum).name}: checkpoint of step 7 saved in {run.path}; resume with --resume {run.path}"
    assert torch.load(run.checkpoint_dir / "trainer.pt", weights_only=True)["step"] == 7
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored

    setup, _ = start(tmp_path, "unused")  # a fresh model, as a new process would build
    result = train(setup.model, batches_of(setup), setup.train, seed=0, run=RunDir(run.path), resume=True)
    assert losses(RunDir(run.path)) == losses(reference)
    assert result.train_loss == losses(reference)[-1][1]


def test_resume_without_a_checkpoint_starts_from_step_zero(tmp_path):
    setup, reference = start(tmp_path, "reference")
    train(setup.model, batches_of(setup), setup.train, seed=0, run=reference)
    setup, run = start(tmp_path, "fresh")
    run.log({"step": 3, "train_loss": 1.0})  # logged, then killed before the first checkpoint
    train(setup.model, batches_of(setup), setup.train, seed=0, run=run, resume=True)
    assert losses(run) == losses(reference)


def test_a_handler_installed_before_gets_the_signal_after_the_checkpoint_and_may_let_training_go_on(tmp_path):
    seen = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))  # like submitit's
    try:
        setup, run = start(tmp_path, "passes")
        batches = batches_of(setup)

        def term_at_7(b, g):
            if len(run.read_records()) == 6:
                os.kill(os.getpid(), signal.SIGTERM)
            return batches(b, g)
        result = train(setup.model, term_at_7, setup.train, seed=0, run=run)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert seen == [signal.SIGTERM] and result.steps == 12
    assert [r["step"] for r in run.read_records()] == list(range(1, 13))
