"""Every protocol, failing mid-run, leaves its run folder marked failed the same way: the run
context's ``running`` block, not a copy of it per protocol. Each protocol runs from its own
``experiment=`` config as a sweep job would, and breaks where it writes its tables (after all its
work), because that is the one step every protocol shares."""

from __future__ import annotations

import json

import pytest

from posenc.engine.config import compose, instantiate
from posenc.engine.context import RunContext

LM = ["model.d_model=16", "model.n_layers=1", "model.n_heads=2", "model.mlp_hidden=32"]
SHORT = ["train.steps=2", "train.warmup_steps=1", "train.log_every=1", "train.eval_every=100", "eval.max_windows=4"]
CONFIGS = {
    "train": ["experiment=smoke", *SHORT],
    "extrapolation": [
        "experiment=extrapolation",
        "pe=rope",
        "extrapolation.scales=[pi]",
        "extrapolation.lengths=[16,32]",
        "train.seq_len=16",
        *LM,
        *SHORT,
    ],
    "resolution": [
        "experiment=resolution",
        "pe=nope",
        *LM,
        *SHORT,
        "train.batch_size=4",
        "task.val_size=16",
        "eval.periodic_windows=8",
        "resolution.resolutions=[16,32]",
        "resolution.finetune_steps=0",
        "resolution.eval_items=8",
    ],
    "order": [
        "experiment=order",
        "order.models=[lm_tiny]",
        "order.pes=[nope]",
        "order.permutations=2",
        "order.overrides=['model.d_model=16','model.n_heads=2','model.n_layers=1','model.mlp_hidden=32',"
        "'train.steps=2','train.batch_size=8','train.seq_len=8','eval.max_windows=16']",
    ],
    "check": ["experiment=check", "check.pes=[rope]"],
}


def fail_when_writing(monkeypatch):
    def broken(self, run, specs, tables):
        raise RuntimeError("disk full")

    monkeypatch.setattr(RunContext, "write", broken)


def marked(root):
    (folder,) = (root / "runs").iterdir()
    summary = json.loads((folder / "summary.json").read_text())
    written = sorted(p.name for p in folder.glob("*.csv"))
    return summary["status"], summary["error"], (folder / "provenance.json").is_file(), written


@pytest.mark.parametrize("name", list(CONFIGS))
def test_each_protocol_failing_mid_run_is_marked_failed_the_same_way(name, tmp_path, monkeypatch):
    cfg = compose(CONFIGS[name])
    protocol = instantiate(cfg.protocol, "protocol")
    protocol.check(cfg)  # the config is sound: the failure comes from the run
    fail_when_writing(monkeypatch)
    with pytest.raises(RuntimeError, match="disk full"):
        protocol.run(cfg, RunContext(tmp_path, device_name="cpu"))
    assert marked(tmp_path) == ("failed", "RuntimeError: disk full", True, [])


def test_the_real_model_protocol_is_marked_the_same_way(real_models, tmp_path, monkeypatch):
    cfg = compose(["experiment=real", f"model.path='{real_models['tied']}'", "model.device=cpu", "real.lengths=[16]"])
    protocol = instantiate(cfg.protocol, "protocol")
    protocol.check(cfg)
    fail_when_writing(monkeypatch)
    with pytest.raises(RuntimeError, match="disk full"):
        protocol.run(cfg, RunContext(tmp_path))
    status, error, provenance, _ = marked(tmp_path)
    assert (status, error, provenance) == ("failed", "RuntimeError: disk full", True)
