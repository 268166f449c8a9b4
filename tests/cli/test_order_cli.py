"""`posenc order` end to end on a tiny model, and its user mistakes."""

import json

import pandas as pd
import pytest

TINY = [
    "model.d_model=16",
    "model.n_heads=2",
    "model.n_layers=1",
    "model.mlp_hidden=32",
    "train.batch_size=8",
    "train.seq_len=8",
    "train.warmup_steps=1",
    "eval.max_windows=16",
]


def invoke(cli, tmp_path, *args):
    return cli("order", "--results-dir", tmp_path / "res", "-q", *args)


def test_order_end_to_end_nope_bidirectional_is_invariant_and_rope_is_not(cli, tmp_path):
    code, out, err = invoke(cli, tmp_path, "--model", "lm_tiny", "--pe", "nope,rope", "--steps", "3", "-k", "2", *TINY)
    assert code == 0, out + err
    (run,) = (tmp_path / "res" / "runs").iterdir()
    for name in ("order.csv", "order.md", "order.png", "summary.json", "config.yaml", "metrics.jsonl"):
        assert (run / name).is_file(), name
    provenance = json.loads((run / "provenance.json").read_text())
    assert provenance["overrides"][:2] == ["train.steps=3", "model.d_model=16"]
    table = pd.read_csv(run / "order.csv")
    assert len(table) == 8  # {nope, rope} x {causal, bidirectional} x {init, trained}
    cell = table.set_index(["pe", "attention", "phase"])
    for phase in ("init", "trained"):
        nope = cell.loc[("nope", "bidirectional", phase)]
        assert nope.invariant and nope.equivariance_residual < 1e-5
        assert nope.pooled_max_abs_delta < 1e-5 and nope.pooled_pred_changed == 0
        assert not cell.loc[("rope", "bidirectional", phase)].invariant
        assert not cell.loc[("nope", "causal", phase)].invariant  # the causal mask alone leaks order
        assert cell.loc[("nope", "causal", phase)].equivariance_residual > 1e-2
    assert (table.chance == 0.5).all() and table.accuracy.between(0, 1).all()


@pytest.mark.parametrize(
    "args, words",
    [
        (["--pe", "nope,foo"], ["unknown pe 'foo'", "rope"]),
        (["--model", "vit_nonexistent"], ["unknown model 'vit_nonexistent'", "lm_tiny"]),
        (["--model", "lm_tiny", "--pe", "rope2d_axial"], ["pe 'rope2d_axial' does not fit", "pe=rope"]),
        (["--pe", "nope", "-k", "0"], ["--permutations must be >= 1"]),
        (["--pe", "nope,"], ["--pe 'nope,' has an empty item"]),
        (["--pe", "nope", "--task", "text"], ["task 'text' is not an order task", "order"]),
        (["--pe", "learned", "pe.max_len=4"], ["pe 'learned' does not fit", "pe.max_len"]),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(cli, tmp_path, args, words):
    code, out, err = invoke(cli, tmp_path, *args, *TINY)
    assert code == 2, out + err
    line = err.strip()
    assert "\n" not in line and all(w in line for w in words), line
    assert not (tmp_path / "res").exists()


def test_order_on_the_vit_nope_is_invariant_to_patch_permutations(cli, tmp_path):
    code, out, err = invoke(
        cli,
        tmp_path,
        "--model",
        "vit_tiny",
        "--pe",
        "nope,rope2d_axial",
        "--steps",
        "2",
        "-k",
        "2",
        "task.resolution=16",
        "train.batch_size=8",
        "eval.max_windows=16",
    )
    assert code == 0, out + err
    (run,) = (tmp_path / "res" / "runs").iterdir()
    cell = pd.read_csv(run / "order.csv").set_index(["pe", "phase"])
    assert set(cell.attention) == {"bidirectional"} and (cell.task == "shapes").all()
    assert (cell.chance >= 0.25).all()  # four quadrants, or the most frequent one of 16 images
    for phase in ("init", "trained"):
        assert cell.loc[("nope", phase)].invariant and cell.loc[("nope", phase)].pooled_pred_changed == 0
        assert not cell.loc[("rope2d_axial", phase)].invariant
