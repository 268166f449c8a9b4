"""``posenc extrapolate --model REAL``: end to end on a tiny checkpoint, overrides, and bad input."""

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

pytest.importorskip("transformers")


def test_end_to_end_on_a_folder(cli, real_models, tmp_path):
    code, out, err = cli(
        "extrapolate",
        "--model",
        real_models["untied"],
        "--scale",
        "yarn",
        "--lengths",
        "16,80",
        "--windows",
        "2",
        "--tail",
        "8",
        "--device",
        "cpu",
        "--results-dir",
        tmp_path,
        "real.buckets=4",
        "model.dtype=float32",
    )
    assert code == 0, err
    [run] = list((tmp_path / "runs").iterdir())
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert (config["real"]["buckets"], config["real"]["tail"], config["real"]["windows"]) == (4, 8, 2)
    assert config["model"]["device"] == "cpu" and config["real"]["scales"] == ["none", "yarn"]
    positions = pd.read_csv(run / "per_position.csv")
    assert len(positions[(positions.scale == "yarn") & (positions.length == 80)]) == 4
    table = pd.read_csv(run / "table.csv")
    assert list(zip(table.scale, table.metric)) == [
        ("none", "ppl"),
        ("none", "tail_ppl"),
        ("yarn", "ppl"),
        ("yarn", "tail_ppl"),
    ]
    flat = " ".join(out.split())  # the title wraps
    assert "yarn" in out and "context 64 tokens" in flat and "(RoPE as shipped: θ = 10000, rope_type default)" in flat
    assert "yarn @ 80 (window 1)" in err and "320/320" in err and "4/4" in err  # the bar: tokens and forwards
    provenance = json.loads((run / "provenance.json").read_text())
    assert provenance["overrides"][:2] == ["experiment=real", f"model.path='{real_models['untied']}'"]
    assert f"run directory: {run}" in out.replace("\n", "")


def test_finetune_prints_its_checkpoint(cli, real_models, tmp_path):
    code, out, err = cli(
        "extrapolate",
        "--model",
        real_models["gguf"],
        "--scale",
        "pi",
        "--lengths",
        "16,80",
        "--finetune-steps",
        "2",
        "--device",
        "cpu",
        "--results-dir",
        tmp_path,
    )
    assert code == 0, err
    [run] = list((tmp_path / "runs").iterdir())
    [store] = list((tmp_path / "cache" / "real").iterdir())
    assert f"fine-tuned checkpoint (pi+ft2): {store / 'finetuned' / 'pi+ft2'}" in out.replace("\n", "")
    assert (store / "finetuned" / "pi+ft2" / "model.safetensors").is_file()
    assert list(dict.fromkeys(pd.read_csv(run / "table.csv").scale)) == ["none", "pi", "pi+ft2"]
    assert "fine-tune pi+ft2" in err  # the progress bar


def test_passkey_table_and_heatmap(cli, real_models, tmp_path):
    code, out, err = cli(
        "extrapolate",
        "--model",
        real_models["gguf"],
        "--scale",
        "pi",
        "--lengths",
        "200,260",
        "--passkey",
        "0,50,100",
        "--windows",
        "2",
        "--device",
        "cpu",
        "-q",
        "--results-dir",
        tmp_path,
    )
    assert code == 0, err
    [run] = list((tmp_path / "runs").iterdir())
    accuracy = pd.read_csv(run / "passkey.csv")
    assert len(accuracy) == 2 * 2 * 3 and set(accuracy.depth) == {0, 50, 100}
    assert accuracy.accuracy.between(0, 1).all() and set(accuracy.accuracy) <= {0, 0.5, 1}
    assert (run / "passkey.png").stat().st_size > 0 and "passkey accuracy" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "HuggingFaceTB/SmolLM2-135M"], "hub is offline"),
        (["--model", "REPLACE/bare"], "has no tokenizer"),
        (["--model", "REPLACE/gpt2"], "supported: llama (Llama"),
        (["--model", "REPLACE/tied", "--lengths", "100000000000"], "needs about"),
        (["--model", "REPLACE/tied", "--lengths", "64", "--windows", "100000"], "the text has"),
        (["--model", "REPLACE/tied", "--scale", "clamp"], "scale 'clamp' (real.scales) does not rescale"),
        (["--model", "REPLACE/tied", "--dtype", "int8"], "--dtype 'int8' is not one of: fp32, float32, bf16"),
        (["--model", "REPLACE/tied", "model.dtype=int8"], "--dtype 'int8' is not one of: fp32, float32, bf16"),
        (
            ["--model", "REPLACE/tied", "--finetune-steps", "3"],
            "real.finetune_steps fine-tunes under each scale besides the baseline none",
        ),
        (["--model", "REPLACE/tied", "--scale", "yarn", "--finetune-steps", "-1"], "real.finetune_steps must be >= 0"),
        (["--model", "REPLACE/tied", "--passkey", "50", "--lengths", "30"], "too short for the passkey prompt"),
        (["--model", "REPLACE/tied", "--passkey", "150"], "real.passkey_depths are percentages"),
        (["--model", "REPLACE/tied", "real.tail=0"], "real.tail must be >= 1, got 0"),
        (["--model", "REPLACE/tied", "real.nothing=1"], "real.nothing"),
        # options and overrides of posenc's own models
        (["--model", "REPLACE/tied", "--task", "copy"], "task 'copy' trains posenc's own models; a real model is"),
        (["--model", "REPLACE/tied", "--pe", "alibi"], "--pe applies to posenc's own models, not to the real model"),
        (["--model", "REPLACE/tied", "--steps", "5"], "--steps applies to posenc's own models"),
        (["--model", "REPLACE/tied", "--seed", "1"], "--seed is unused: the real model"),
        (["--model", "REPLACE/tied", "seed=1"], "--seed is unused: the real model"),
        (["--model", "REPLACE/tied", "train.lr=1e-3"], "override 'train.lr=1e-3' applies to posenc's own models"),
        (["--model", "REPLACE/tied", "pe=alibi"], "override 'pe=alibi' applies to posenc's own models"),
        (["--model", "REPLACE/tied", "task.path=x.txt"], "override 'task.path=x.txt' applies to posenc's own models"),
        (["--model", "REPLACE/tied", "model=lm_tiny"], "override 'model=lm_tiny' applies to posenc's own models"),
        (["--model", "pretrained"], "model.path is missing"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(cli, real_models, tmp_path, monkeypatch, args, message):
    import shutil

    from transformers import GPT2Config

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    models = tmp_path / "models"
    shutil.copytree(real_models["tied"], models / "tied")
    shutil.copytree(real_models["tied"], models / "bare")
    for f in (models / "bare").glob("tokenizer*"):
        f.unlink()
    shutil.copytree(real_models["tied"], models / "gpt2")
    GPT2Config(n_layer=1, n_embd=8, n_head=2).save_pretrained(models / "gpt2")
    results = tmp_path / "results"
    args = [a.replace("REPLACE", str(models)) for a in args]
    code, out, err = cli("extrapolate", *args, "--device", "cpu", "--results-dir", results)
    assert code == 2, err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not results.exists()


@pytest.mark.parametrize(
    "args",
    [
        ["--windows", "4"],
        ["--tail", "8"],
        ["--data", "corpus.txt"],
        ["--dtype", "bfloat16"],
        ["--device", "cpu"],
        ["--factor", "2"],
        ["--passkey", "50"],
    ],
)
def test_real_model_options_are_refused_on_posenc_models(cli, tmp_path, args):
    """posenc's own models train: an option of real models only is a mistake, not silently ignored."""
    results = tmp_path / "results"
    code, out, err = cli("extrapolate", "--pe", "rope", *args, "--results-dir", results)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert f"{args[0]} applies to real models only (--model FOLDER|FILE.gguf|HUB_ID)" in err
    assert not results.exists()


def test_seed_is_taken_when_a_copy_is_fine_tuned(cli, real_models, tmp_path):
    args = ["extrapolate", "--model", real_models["tied"], "--scale", "pi", "--lengths", "16,40"]
    code, _, err = cli(
        *args, "--finetune-steps", "1", "--seed", "3", "--device", "cpu", "-q", "--results-dir", tmp_path
    )
    assert code == 0, err
    [run] = list((tmp_path / "runs").iterdir())
    assert yaml.safe_load((run / "config.yaml").read_text())["seed"] == 3
    [store] = list((tmp_path / "cache" / "real").iterdir())
    assert json.loads((store / "finetuned" / "pi+ft1" / "finetune.json").read_text())["seed"] == 3
    assert Path(json.loads((run / "summary.json").read_text())["cells"]) == store
