"""A composition is kept by the YAML files and overrides it was made from: the same ones give the
same config without Hydra, an edited file or another override composes again, a mistake is never
kept (posenc.engine.compose_cache)."""

import hydra
import pytest
from omegaconf import OmegaConf

from posenc.core.errors import ConfigError
from posenc.engine import compose_cache
from posenc.engine.config import compose, compose_defaults

JOB = ["experiment=extrapolation", "pe=alibi", "model.n_layers=3", "seed=1"]


@pytest.fixture
def hydra_calls(monkeypatch, tmp_path):
    """The compose cache on, in a folder of its own and with nothing in memory; the calls to
    Hydra's compose (posenc.engine.config imports it where it composes)."""
    monkeypatch.setenv("POSENC_COMPOSE_CACHE", str(tmp_path / "composed"))
    monkeypatch.setattr(compose_cache, "_memory", {})
    calls = []
    real = hydra.compose
    monkeypatch.setattr(hydra, "compose", lambda *a, **k: (calls.append(k["overrides"]), real(*a, **k))[1])
    return calls


def fresh(overrides, monkeypatch):
    with monkeypatch.context() as m:
        m.setenv("POSENC_COMPOSE_CACHE", "off")
        return compose(overrides)


def test_a_kept_config_is_the_composed_one_and_each_caller_gets_its_own(hydra_calls, monkeypatch, tmp_path):
    first = compose(JOB)
    assert len(hydra_calls) == 1
    first.model.n_layers = 99  # a caller's change stays in its copy
    again = compose(JOB)
    monkeypatch.setattr(compose_cache, "_memory", {})  # a new process reads the folder
    from_disk = compose(JOB)
    assert len(hydra_calls) == 1
    expected = fresh(JOB, monkeypatch)
    for cfg in (again, from_disk):
        assert OmegaConf.to_yaml(cfg) == OmegaConf.to_yaml(expected)
        assert cfg.model.n_layers == 3 and cfg.choices.pe == "alibi" and cfg.pe.n_heads == cfg.model.n_heads
        assert OmegaConf.is_struct(cfg) and "hydra" not in cfg
        with pytest.raises(Exception, match="not in struct"):
            cfg.model.no_such_key = 1
    assert len(list((tmp_path / "composed").glob("*/*.pkl"))) == 1
    calls = len(hydra_calls)  # the kept one and the fresh one
    assert compose([*JOB, "train.steps=7"]).train.steps == 7  # another value: set on a kept copy
    assert len(hydra_calls) == calls
    compose([*JOB, "task=copy"])  # another option: composed
    assert len(hydra_calls) == calls + 1


def test_an_edited_config_file_composes_again(hydra_calls, monkeypatch, tmp_path):
    mine = tmp_path / "mine"
    (mine / "pe").mkdir(parents=True)
    option = mine / "pe" / "mine.yaml"
    option.write_text("_target_: posenc.pe.rope.RoPE\nbase: 1000.0\n")
    monkeypatch.setenv("POSENC_CONFIG_DIR", str(mine))
    assert compose(["pe=mine"]).pe.base == 1000.0
    option.write_text("_target_: posenc.pe.rope.RoPE\nbase: 2000.0\n")  # the same size, in the same second
    assert compose(["pe=mine"]).pe.base == 2000.0
    assert len(hydra_calls) == 2
    # a suite is not composed: editing one keeps the compositions, unless an override names the group
    (mine / "suite").mkdir()
    (mine / "suite" / "s.yaml").write_text("seeds: [0]\n")
    assert compose(["pe=mine"]).pe.base == 2000.0
    assert len(hydra_calls) == 2
    before = compose_cache.tree_digest([mine], ["+suite=s"])
    (mine / "suite" / "s.yaml").write_text("seeds: [1]\n")
    assert compose_cache.tree_digest([mine], ["+suite=s"]) != before
    assert compose_cache.tree_digest([mine]) == compose_cache.tree_digest([mine], ["pe=rope"])


def test_a_mistake_is_never_kept_and_a_broken_file_composes_again(hydra_calls, monkeypatch, tmp_path):
    bad = ["+experiment=extrapolation"]  # a mistake in the defaults list
    for _ in range(2):
        with pytest.raises(ConfigError, match="Multiple values for experiment"):
            compose(bad)
    assert hydra_calls == [bad, bad]
    assert not (tmp_path / "composed").exists()
    # a mistake in a value is found on the kept composition of the rest, every time
    compose_defaults.cache_clear()  # the message below composes the defaults once a process
    for _ in range(2):
        with pytest.raises(ConfigError, match="unknown override key 'train.no_such_key'; valid keys in train"):
            compose(["train.no_such_key=1"])
    (default,) = (tmp_path / "composed").glob("*/*.pkl")  # the defaults: the composition without the value
    assert hydra_calls == [bad, bad, []]
    default.unlink()
    compose(JOB)
    (kept,) = (tmp_path / "composed").glob("*/*.pkl")
    kept.write_bytes(kept.read_bytes()[:50])  # a torn file
    monkeypatch.setattr(compose_cache, "_memory", {})
    calls = len(hydra_calls)
    assert compose(JOB).model.n_layers == 3
    assert len(hydra_calls) == calls + 1


def test_off_keeps_nothing(hydra_calls, monkeypatch, tmp_path):
    monkeypatch.setenv("POSENC_COMPOSE_CACHE", "off")
    assert compose_cache.compose_cache() is None
    compose(JOB)
    compose(JOB)
    assert len(hydra_calls) == 2 and not (tmp_path / "composed").exists()


# Jobs that differ only in values share one composition: compose() applies them after composing
# the rest, as Hydra applies its "config overrides". The answer must be Hydra's own, for the
# suites' jobs and for every kind of value override, mistakes included.
SAME_AS_HYDRA = [
    JOB,
    ["experiment=extrapolation", "task=text", "pe=rope", "model.d_model=32", "extrapolation.scales=[pi,ntk,yarn]"],
    ["experiment=extrapolation", "task=addition", "pe=fire", "task.eval_size=256", "eval.max_windows=null"],
    ["pe=learned2d", "experiment=resolution", "resolution.resolutions=[16,24]", "resolution.methods=[bilinear]"],
    ["experiment=order", "order.pes=[nope,rope]", "order.overrides=['model.d_model=64','train.steps=4']"],
    ["train.steps=${train.log_every}", "++train.lr=0.5", "~train.warmup_steps", "+train.extra={a: 1}", "seed=abc"],
    ["train.lr=1", "train=passkey", "train.lr=2"],  # values after the options they land in, in order
]
MISTAKES = [
    ["train.no_such_key=1"],
    ["+train.lr=1"],
    ["~train.no_such"],
    ["train.lr=[1,"],
    ["seed=1,2"],
    ["pe=no_such", "train.lr=1"],
    ["choices.pe=rope"],
]


def hydra_alone(overrides):
    from posenc.engine.config import _hydra_composed

    return _hydra_composed(overrides)


@pytest.mark.parametrize("job", SAME_AS_HYDRA, ids=lambda j: " ".join(j)[:60])
def test_values_on_a_kept_composition_are_hydras_answer(job, hydra_calls):
    cfg = compose(job)
    expected = hydra_alone(job)
    assert OmegaConf.to_yaml(cfg) == OmegaConf.to_yaml(expected)
    assert OmegaConf.is_struct(cfg) and OmegaConf.is_struct(cfg.train)
    assert all("." not in o.split("=", 1)[0] for call in hydra_calls[:1] for o in call)  # values stayed out


@pytest.mark.parametrize("job", MISTAKES, ids=" ".join)
def test_a_value_mistake_reads_as_hydras(job, hydra_calls):
    with pytest.raises(ConfigError) as ours:
        compose(job)
    with pytest.raises(ConfigError) as theirs:
        hydra_alone(job)
    assert str(ours.value) == str(theirs.value)


def test_a_sweep_of_values_composes_once(hydra_calls):
    sizes = [compose([*JOB, f"model.d_model={d}", f"seed={s}"]).model.d_model for d in (32, 64) for s in (0, 1)]
    assert sizes == [32, 32, 64, 64] and len(hydra_calls) == 1
