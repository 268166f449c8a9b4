"""posenc.experiments.cache's lock: two processes that need the same model at the same moment
train it once; the second waits for the first and loads what it published."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from pathlib import Path

import pytest
import torch
from test_cache import TINY  # the cache tests' tiny LM

from posenc.engine.build import build
from posenc.engine.config import compose
from posenc.experiments.cache import locked, trained


def job(cache: str, start, results) -> None:
    """One sweep job: build its setup, wait for the other job, then ask the cache for the model."""
    torch.set_num_threads(1)
    setup = build(compose(TINY))
    trainings = []
    start.wait(timeout=120)  # both ask at once, so without the lock both would train
    try:
        out = trained(setup, cache, stage=lambda label, steps: trainings.append(label))
    except Exception as e:  # the test reads it rather than waiting for a result that never comes
        results.put((os.getpid(), repr(e), [], {}, []))
        return
    weights = torch.cat([p.detach().flatten() for p in out.model.parameters()])
    results.put((os.getpid(), out.reused, trainings, out.record, weights.tolist()))


@pytest.mark.slow  # two spawned processes import torch and build a model: ~10-30 s on 2 loaded cores
def test_two_processes_needing_one_model_train_it_once(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=job, args=(str(tmp_path / "cache"), start, results)) for _ in range(2)]
    for p in procs:
        p.start()
    got = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    (_, reused_a, trained_a, record_a, weights_a), (_, reused_b, trained_b, record_b, weights_b) = sorted(
        got, key=lambda r: str(r[1])
    )
    # exactly one training: one process trained (its stage started once), the other waited and loaded it
    assert (reused_a, reused_b) == (False, True)
    assert trained_a == ["train rope"]
    assert trained_b in ([], ["wait: another job trains rope"])  # [] only if it looked after the first published
    assert record_a == record_b and record_a["steps"] == 3
    assert weights_a == weights_b
    # one entry, no hidden folder and no lock file left behind
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [trained_entry(tmp_path / "cache")]


def trained_entry(cache):
    [entry] = [p.name for p in cache.iterdir() if not p.name.startswith(".")]
    return entry


def holder(path: str, held, release) -> None:
    with locked(Path(path)):
        held.set()
        release.wait(timeout=60)


def test_the_lock_makes_a_second_job_wait_until_the_first_releases_it(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    held, release = ctx.Event(), ctx.Event()
    path = tmp_path / ".abc.lock"
    p = ctx.Process(target=holder, args=(str(path), held, release))
    p.start()
    assert held.wait(timeout=60)
    waited = []

    def let_go():
        time.sleep(0.5)
        waited.append(time.perf_counter())
        release.set()

    threading.Thread(target=let_go).start()
    told = []
    with locked(path, on_wait=lambda: told.append(time.perf_counter())):
        acquired = time.perf_counter()
    p.join(timeout=30)
    assert waited and acquired >= waited[0]  # not before the holder let go
    assert len(told) == 1 and told[0] < waited[0]  # told once, while the holder still held it
    assert not path.exists()
