"""The obvious command works: ``posenc extrapolate --pe rope --task passkey`` with nothing else
trains with the task's own recipe (train=passkey) and reaches its target."""

import json

import pandas as pd
import pytest


@pytest.mark.slow  # ~2 min of training on one core
def test_the_default_passkey_command_reaches_its_target(cli, tmp_path):
    code, out, err = cli(
        "extrapolate", "--pe", "rope", "--task", "passkey", "--lengths", "32", "--results-dir", tmp_path
    )
    assert code == 0, err
    [run] = list((tmp_path / "runs").iterdir())
    table = pd.read_csv(run / "table.csv")
    assert table.reached_target.all() and (table.target == 0.95).all()
    assert "ended under its target" not in err
    [model] = json.loads((run / "summary.json").read_text())["models"]
    assert model["criterion"] == "accuracy" and model["target_step"] <= 3000  # train=passkey's cap
    # the test split's exact match of whole keys, well above chance (1e-5)
    assert table.set_index("metric").loc["exact_match", "32"] > 0.5
