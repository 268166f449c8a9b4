"""Planning a sweep is cheap the second time: jobs that differ only in their seed are checked
once, and a job that passed its check with the same code and configs is remembered."""

import pytest

import posenc.launch.sweep as sweep
from posenc.core.errors import ConfigError

JOBS = [["experiment=smoke", f"pe={pe}", f"seed={s}"] for pe in ("rope", "nope") for s in range(3)]


@pytest.fixture
def checked(monkeypatch, tmp_path):
    monkeypatch.setenv("POSENC_CHECK_CACHE", str(tmp_path / "checked"))
    calls = []
    real = sweep._check_job
    monkeypatch.setattr(sweep, "_check_job", lambda job: (calls.append(list(job)), real(job)))
    return calls


def test_seeds_are_checked_once_and_passes_are_remembered(checked, tmp_path):
    sweep.check_jobs(JOBS)
    assert checked == [JOBS[0], JOBS[3]]  # one seed of each scheme
    sweep.check_jobs(JOBS)
    assert len(checked) == 2  # the second plan composes nothing
    assert len(list((tmp_path / "checked").rglob("*"))) == 3  # the fingerprint's folder and two passes


def test_a_failure_is_never_remembered_and_other_code_checks_again(checked, monkeypatch):
    bad = [["experiment=smoke", "pe=rope", "train.lr=-1", "seed=0"]]
    for _ in range(2):
        with pytest.raises(ConfigError, match="train.lr must be > 0"):
            sweep.check_jobs(bad)
    assert len(checked) == 2
    sweep.check_jobs(JOBS[:1])
    monkeypatch.setattr(sweep, "code_fingerprint", lambda: "another version of the code")
    sweep.check_jobs(JOBS[:1])
    assert checked[2:] == [JOBS[0], JOBS[0]]


def test_off_checks_every_job(monkeypatch):
    monkeypatch.setenv("POSENC_CHECK_CACHE", "off")
    assert sweep.check_cache() is None


def test_the_fingerprint_follows_the_config_tree(monkeypatch, tmp_path):
    sweep.code_fingerprint.cache_clear()
    before = sweep.code_fingerprint()
    mine = tmp_path / "mine" / "pe"
    mine.mkdir(parents=True)
    (mine / "x.yaml").write_text("_target_: posenc.pe.rope.RoPE\n")
    monkeypatch.setenv("POSENC_CONFIG_DIR", str(tmp_path / "mine"))
    sweep.code_fingerprint.cache_clear()
    assert sweep.code_fingerprint() != before
    sweep.code_fingerprint.cache_clear()


def test_the_fingerprint_leaves_out_the_suites(monkeypatch, tmp_path):
    """A suite plans its jobs and no check reads it: editing one keeps the passes; any other
    config file of the researcher's folder is read by checks and changes the fingerprint."""
    mine = tmp_path / "mine"
    for group in ("suite", "pe"):
        (mine / group).mkdir(parents=True)
    (mine / "suite" / "s.yaml").write_text("seeds: [0]\n")
    (mine / "pe" / "x.yaml").write_text("_target_: posenc.pe.rope.RoPE\n")
    monkeypatch.setenv("POSENC_CONFIG_DIR", str(mine))

    def fingerprint():
        sweep.code_fingerprint.cache_clear()
        return sweep.code_fingerprint()

    before = fingerprint()
    (mine / "suite" / "s.yaml").write_text("seeds: [0, 1]\n")
    assert fingerprint() == before
    (mine / "pe" / "x.yaml").write_text("_target_: posenc.pe.rope.RoPE\nbase: 100.0\n")
    assert fingerprint() != before
    sweep.code_fingerprint.cache_clear()


def lr_jobs(lrs):
    schemes = ("rope", "nope", "alibi", "learned")
    return [["experiment=smoke", f"pe={pe}", f"train.lr={lr}"] for pe, lr in zip(schemes, lrs)]


@pytest.mark.parametrize("workers", [1, 2])
def test_workers_report_the_first_failure_in_order_and_remember_the_passes_before_it(monkeypatch, tmp_path, workers):
    """Forks of this process check two jobs a task each; the answer is the serial one: the first
    failing job in order (not the one a worker happened to finish first), and only the passes."""
    monkeypatch.setenv("POSENC_CHECK_CACHE", str(tmp_path / "checked"))
    jobs = lr_jobs([0.001, 0.001, -1, -2])
    with pytest.raises(ConfigError) as failed:
        sweep.check_jobs(jobs, workers=workers)
    assert str(failed.value).startswith("job pe=alibi train.lr=-1: ") and "train.lr must be > 0" in str(failed.value)
    assert len(list((tmp_path / "checked").rglob("*"))) == 3  # the fingerprint's folder and the two passes
    sweep.check_jobs(jobs[:2], workers=workers)  # remembered: nothing to check, nothing raised


def test_a_failure_in_a_later_task_stops_the_plan(monkeypatch):
    monkeypatch.setenv("POSENC_CHECK_CACHE", "off")
    assert sweep.first_failure(lr_jobs([0.001, 0.001, 0.001, -1]), workers=2) == (
        lr_jobs([0.001, 0.001, 0.001, -1])[3],
        "train.lr must be > 0, got -1.0",
    )
    assert sweep.first_failure(lr_jobs([0.001] * 4), workers=2) is None


def test_one_worker_per_jobs_per_worker_up_to_the_cores(monkeypatch):
    monkeypatch.setattr(sweep.os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    monkeypatch.setattr(sweep.sys, "platform", "linux")
    assert [sweep.check_workers(n * sweep.JOBS_PER_WORKER) for n in (0, 1, 2, 3, 50)] == [1, 1, 2, 3, 3]
    monkeypatch.setattr(sweep.sys, "platform", "darwin")
    assert sweep.check_workers(50 * sweep.JOBS_PER_WORKER) == 1
