"""``posenc extrapolate --model REAL``: end to end on a tiny checkpoint, and bad input."""

import pandas as pd
import pytest

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
    )
    assert code == 0, err
    [run] = list((tmp_path / "runs").iterdir())
    table = pd.read_csv(run / "table.csv")
    assert list(zip(table.scale, table.metric)) == [
        ("none", "ppl"),
        ("none", "tail_ppl"),
        ("yarn", "ppl"),
        ("yarn", "tail_ppl"),
    ]
    flat = " ".join(out.split())  # the title wraps
    assert "yarn" in out and "context 64 tokens" in flat and "(RoPE as shipped: θ = 10000, rope_type default)" in flat
    assert "ETA" in err  # the progress bar


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
    assert f"fine-tuned checkpoint (pi+ft2): {run / 'finetuned' / 'pi+ft2'}" in out.replace("\n", "")
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
        (["--model", "REPLACE/gpt2"], "supported: Llama family"),
        (["--model", "REPLACE/tied", "--lengths", "100000000000"], "needs about"),
        (["--model", "REPLACE/tied", "--lengths", "64", "--windows", "100000"], "the text has"),
        (["--model", "REPLACE/tied", "--scale", "clamp"], "--scale 'clamp' does not rescale a real model's RoPE"),
        (["--model", "REPLACE/tied", "--dtype", "int8"], "--dtype 'int8' is not supported; valid: float32"),
        (["--model", "REPLACE/tied", "--task", "copy"], "apply to posenc's own models"),
        (
            ["--model", "REPLACE/tied", "--finetune-steps", "3"],
            "fine-tunes under each --scale besides the baseline none",
        ),
        (["--model", "REPLACE/tied", "--scale", "yarn", "--finetune-steps", "-1"], "--finetune-steps must be >= 0"),
        (["--model", "REPLACE/tied", "--passkey", "50", "--lengths", "30"], "too short for the passkey prompt"),
        (["--model", "REPLACE/tied", "--passkey", "150"], "--passkey depths are percentages"),
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
