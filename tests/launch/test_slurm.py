"""posenc.launch.slurm.slurm_jobs: which SLURM job runs which sweep job, from the sweep's own record
(each job's job.json), without submitit's folder internals."""

import json

from posenc.launch.listing import record_job
from posenc.launch.slurm import slurm_jobs


def sweep(tmp_path, n):
    (tmp_path / "sweep.json").write_text(json.dumps({"jobs": [[f"seed={i}"] for i in range(n)]}))
    return tmp_path


def test_jobs_that_never_started_are_their_arrays_tasks_in_job_order(tmp_path):
    folder = sweep(tmp_path, 3)
    record_job(folder / "0", job=0, slurm_job="17_0")
    record_job(folder / "2", job=2, slurm_job="17_2")
    assert slurm_jobs(folder) == {0: "17_0", 1: "17_1", 2: "17_2"}


def test_one_job_alone_is_no_array_and_an_unstarted_sweep_names_nothing(tmp_path):
    folder = sweep(tmp_path, 1)
    assert slurm_jobs(folder) == {}
    record_job(folder / "0", job=0, slurm_job="42")
    assert slurm_jobs(folder) == {0: "42"}
