"""posenc.experiments.resolution on a tiny ViT: the table, the files, and checks before any work."""

import json
from pathlib import Path

import pandas as pd
import pytest

from posenc.core.errors import ConfigError
from posenc.engine.config import compose
from posenc.engine.context import RunContext
from posenc.experiments.resolution import Resolution, methods_for, run
from posenc.pe.resample import MODES

TINY = [
    "experiment=resolution",
    "model.d_model=16",
    "model.n_layers=1",
    "model.n_heads=2",
    "model.mlp_hidden=32",
    "train.steps=3",
    "train.batch_size=4",
    "train.warmup_steps=1",
    "task.val_size=16",
    "resolution.resolutions=[16,32]",
    "resolution.eval_items=8",
    "resolution.finetune_steps=1",
    "eval.periodic_windows=8",
]


def test_methods_for_maps_requests_onto_what_a_scheme_can_do():
    coords = ("extrapolate", "interpolate")
    assert methods_for(coords, ["bicubic", "bilinear", "extrapolate"]) == ["interpolate", "extrapolate"]
    assert methods_for(MODES, ["bicubic", "extrapolate", "interpolate"]) == ["bicubic"]
    assert methods_for((*MODES, "clip"), ["extrapolate", "area"]) == ["clip", "area"]
    assert methods_for(("none",), ["bicubic", "extrapolate"]) == ["none"]
    assert methods_for(MODES, ["extrapolate"]) == []


def test_tiny_run_writes_the_table(tmp_path):
    cfgs = [compose([*TINY, f"pe={pe}"]) for pe in ("learned", "rope2d_axial")]
    result = run(cfgs, RunContext(tmp_path))
    table, run_dir = result.table, result.run
    assert list(result.tables) == ["table", "long", "similarity"]
    assert list(table.columns) == [
        "pe",
        "method",
        "finetune_steps",
        "seed",
        "16px",
        "32px",
        "split",
        "items",
        "steps",
        "criterion",
        "target",
        "reached_target",
        "target_step",
    ]
    # every scheme's rows say how its training ended: 3 steps cannot reach 0.95 on quadrants
    assert (table.steps == 3).all() and (table.criterion == "accuracy").all() and (table.target == 0.95).all()
    assert not table.reached_target.any() and table.target_step.isna().all()
    training = json.loads((run_dir.path / "summary.json").read_text())["training"]
    assert [(t["pe"], t["steps"], t["reached_target"], t["target_step"]) for t in training] == [
        ("learned", 3, False, None),
        ("rope2d_axial", 3, False, None),
    ]
    assert table[["pe", "method", "finetune_steps"]].values.tolist() == [
        ["learned", "bicubic", 0],
        ["learned", "bicubic", 1],
        ["rope2d_axial", "interpolate", 0],
        ["rope2d_axial", "interpolate", 1],
        ["rope2d_axial", "extrapolate", 0],
        ["rope2d_axial", "extrapolate", 1],
    ]
    assert table[["16px", "32px"]].isin([i / 8 for i in range(9)]).all().all()  # accuracies over 8 images
    assert (table.split == "test").all() and (table["items"] == 8).all()  # the held-out scenes, their count
    no_ft = table[table.finetune_steps == 0]
    # at the trained resolution every method is the same model
    assert no_ft[no_ft.pe == "rope2d_axial"]["32px"].nunique() == 1
    for name in ("table.csv", "table.md", "long.csv", "accuracy.png", "similarity.csv", "similarity_learned.png"):
        assert (run_dir.path / name).is_file(), name
    assert pd.read_csv(run_dir.path / "table.csv").shape == (6, 13)
    assert list(result.tables["long"].columns[:6]) == [
        "pe",
        "method",
        "finetune_steps",
        "resolution",
        "seed",
        "accuracy",
    ]
    assert len(result.tables["long"]) == 12 and (result.tables["long"].seed == 0).all()
    assert sorted(p.name for p in (run_dir.path / "checkpoints").iterdir()) == [
        "learned.safetensors",
        "rope2d_axial.safetensors",
    ]
    similarity = pd.read_csv(run_dir.path / "similarity.csv")
    assert similarity.pe.tolist() == ["learned"] and similarity.rank_corr_trained.between(-1, 1).all()
    assert similarity[["steps", "reached_target"]].values.tolist() == [[3, False]]  # how its model trained
    models = run_dir.read_summary()["models"]
    assert [(m["pe"], m["reused"]) for m in models] == [("learned", False), ("rope2d_axial", False)]
    assert {Path(m["cache"]).parent for m in models} == {tmp_path / "cache"}
    summary = run_dir.read_summary()
    assert (summary["status"], summary["table"], summary["tables"]) == (
        "completed",
        "table",
        ["table", "long", "similarity"],
    )


@pytest.mark.parametrize(
    "extra,message",
    [
        (["resolution.resolutions=[16,30]", "pe=learned"], "resolution=30 is not divisible by model.patch_size=4"),
        (["resolution.methods=[cubic]", "pe=learned"], "unknown interpolation method 'cubic'; valid: nearest"),
        (["resolution.methods=[extrapolate]", "pe=learned"], "none of the methods extrapolate applies to pe 'learned'"),
        (["pe=rope"], "pe 'rope' is 1D-only .* use pe=rope2d_axial"),
    ],
)
def test_bad_settings_fail_before_any_run_dir(tmp_path, extra, message):
    with pytest.raises(ConfigError, match=message):
        run([compose([*TINY, *extra])], RunContext(tmp_path))
    with pytest.raises(ConfigError, match=message):
        Resolution().check(compose([*TINY, *extra]))
    with pytest.raises(ConfigError, match="each scheme once, please: nope, nope"):
        run([compose([*TINY, "pe=nope"])] * 2, RunContext(tmp_path))
    assert not (tmp_path / "runs").exists()


def test_antialias_applies_to_the_smooth_methods_beside_nearest(tmp_path):
    """Fails on the old run: nearest took resolution.antialias=true too and raised mid-run, after
    training. Now nearest runs as it is, the same with the flag on or off."""
    cfg = [
        *TINY,
        "pe=learned",
        "resolution.methods=[nearest,bilinear]",
        "resolution.finetune_steps=0",
        "resolution.resolutions=[8,32]",
        "resolution.eval_items=32",
    ]
    tables = {
        flag: run([compose([*cfg, f"resolution.antialias={flag}"])], RunContext(tmp_path / flag)).table
        for flag in ("true", "false")
    }
    for table in tables.values():
        assert table.method.tolist() == ["nearest", "bilinear"]
    on, off = (tables[f].set_index("method") for f in ("true", "false"))
    assert on.loc["nearest", "8px"] == off.loc["nearest", "8px"]


def test_the_protocol_from_the_config_runs_one_scheme_and_a_failure_marks_its_folder(tmp_path, monkeypatch):
    import posenc.experiments.resolution as resolution
    from posenc.engine.config import instantiate

    cfg = compose([*TINY, "pe=nope", "seed=2", "resolution.finetune_steps=0"])
    protocol = instantiate(cfg.protocol, "protocol")
    assert isinstance(protocol, Resolution)
    events = []
    result = protocol.run(cfg, RunContext(tmp_path / "ok", on_event=events.append))
    # the training (experiments.cache: 3 steps), then the evaluation at 2 resolutions x 1 method
    assert [(e.label, e.total) for e in events if e.kind == "stage"] == [
        ("train nope", 3),
        ("resolution nope: evaluate", 2),
    ]
    assert [e.done for e in events if e.kind == "advance" and "evaluate" in e.label] == [1, 2]
    assert result.table[["pe", "method", "finetune_steps", "seed"]].values.tolist() == [["nope", "none", 0, 2]]
    for spec in protocol.tables:
        if spec.name in result.tables:
            assert set(spec.keys) | set(spec.pairs) <= set(result.tables[spec.name].columns), spec.name

    def broken(*args, **kwargs):
        raise RuntimeError("no space left")

    monkeypatch.setattr(resolution, "plot_accuracy", broken)
    with pytest.raises(RuntimeError, match="no space left"):
        protocol.run(cfg, RunContext(tmp_path / "bad"))
    (folder,) = (tmp_path / "bad" / "runs").iterdir()
    summary = json.loads((folder / "summary.json").read_text())
    assert (summary["status"], summary["error"]) == ("failed", "RuntimeError: no space left")
