"""The single-node SLURM cluster of ``tests/cluster/slurm.sh`` for the tests marked ``slurm``.

The cluster is used when it is up. Under ``CI=true`` or ``POSENC_SLURM=1`` the fixture brings it
up itself (installing Debian's packages when they are missing; it needs root) and takes it down
at the end; a cluster that cannot start is then a failure. Elsewhere the tests skip, saying how
to start one.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("slurm.sh")


def cluster(verb: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), verb], capture_output=True, text=True, timeout=900)


def client_env() -> dict[str, str]:
    """os.environ plus what ``slurm.sh up`` wrote to its env file (SLURM_CONF)."""
    state = Path(os.environ.get("POSENC_SLURM_DIR") or Path(os.environ.get("TMPDIR") or "/tmp") / "posenc-slurm")
    lines = (state / "env").read_text().splitlines()
    pairs = [line.removeprefix("export ").split("=", 1) for line in lines if "=" in line]
    return {**os.environ, **dict(pairs), "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="session")
def slurm() -> Iterator[dict[str, str]]:
    """The environment for SLURM's clients and posenc, with the test cluster up."""
    must = os.environ.get("CI") == "true" or os.environ.get("POSENC_SLURM") == "1"
    started = False
    if cluster("status").returncode != 0:
        if not must:
            pytest.skip(
                "no SLURM test cluster is up: start one with `tests/cluster/slurm.sh up` (as root), "
                "or set POSENC_SLURM=1 to let the tests start it"
            )
        up = cluster("up")
        if up.returncode != 0:
            pytest.fail(
                f"the SLURM test cluster did not start (CI=true or POSENC_SLURM=1): {(up.stdout + up.stderr)[-2000:]}",
                pytrace=False,
            )
        started = True
    yield client_env()
    if started:
        cluster("down")
