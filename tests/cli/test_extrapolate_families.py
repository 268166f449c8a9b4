"""``posenc extrapolate --model`` on tiny checkpoints of the families posenc runs through
transformers' modules: Gemma 3 (local and global RoPE) end to end, Phi-3 refused where it cannot go."""

import pandas as pd
import pytest

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")


def save(path, config_class, **kwargs):
    import torch
    import transformers
    from hf_models import VOCAB, tiny_tokenizer

    config = getattr(transformers, config_class)(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=64,
        eos_token_id=0,
        bos_token_id=0,
        pad_token_id=0,
        **kwargs,
    )
    torch.manual_seed(0)
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(path)
    tiny_tokenizer().save_pretrained(path)
    return path


def gemma3(path):
    return save(
        path,
        "Gemma3TextConfig",
        sliding_window=8,
        layer_types=["sliding_attention", "full_attention"],
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
            "full_attention": {"rope_type": "default", "rope_theta": 10000.0},
        },
    )


def test_gemma3_end_to_end_names_each_layer_types_rope(cli, tmp_path):
    folder = gemma3(tmp_path / "gemma3")
    code, out, err = cli(
        "extrapolate",
        "--model",
        folder,
        "--scale",
        "pi,yarn",
        "--lengths",
        "32,128",
        "--windows",
        "1",
        "--tail",
        "8",
        "--device",
        "cpu",
        "--results-dir",
        tmp_path / "results",
    )
    assert code == 0, err
    flat = " ".join(out.split())
    assert "full_attention: θ = 10000, rope_type default; sliding_attention: θ = 100, rope_type default" in flat, flat
    [run] = list((tmp_path / "results" / "runs").iterdir())
    table = pd.read_csv(run / "table.csv")
    assert set(table.scale) == {"none", "pi", "yarn"}
    values = table.drop(columns=["scale", "metric"]).to_numpy(dtype=float)
    assert (values > 1).all() and (values < 10 * 384).all()  # perplexities of a random model over 384 tokens


def test_finetune_of_an_injected_family_is_one_line(cli, tmp_path, capsys):
    folder = save(tmp_path / "phi3", "Phi3Config", original_max_position_embeddings=64)
    capsys.readouterr()  # transformers' bar while saving the folder
    code, _, err = cli(
        "extrapolate",
        "--model",
        folder,
        "--scale",
        "yarn",
        "--finetune-steps",
        "2",
        "--results-dir",
        tmp_path / "results",
    )
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "model_type 'phi3' is scored zero-shot only (fine-tuned: llama)" in err
    assert not (tmp_path / "results").exists()


def test_the_scaled_layer_type_is_an_option(cli, tmp_path, capsys):
    """PI on the local layers instead of the global ones: the same model as shipped (none), another
    perplexity under pi; a layer type the model has not is refused in one line before any work."""
    folder = gemma3(tmp_path / "gemma3")
    capsys.readouterr()
    tables = []
    for extra in ([], ["+model.scaled_layers=sliding_attention"]):
        results = tmp_path / f"results{len(tables)}"
        args = ["--model", folder, "--scale", "pi", "--lengths", "128", "--tail", "8", "--results-dir", results]
        code, _, err = cli("extrapolate", *args, *extra)
        assert code == 0, err
        [run] = list((results / "runs").iterdir())
        tables.append(pd.read_csv(run / "table.csv").set_index(["scale", "metric"])["128"])
    assert tables[0][("none", "ppl")] == pytest.approx(tables[1][("none", "ppl")], rel=1e-6)
    # a random model barely reads positions: 8e-4 apart here; ignoring the option gives exactly equal numbers
    assert abs(tables[0][("pi", "ppl")] - tables[1][("pi", "ppl")]) > 1e-4 * tables[0][("pi", "ppl")]
    code, _, err = cli(
        "extrapolate", "--model", folder, "--results-dir", tmp_path / "bad", "+model.scaled_layers=chunked_attention"
    )
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "model.scaled_layers: 'gemma3_text' has no layer type 'chunked_attention' to scale; valid: " in err
    assert not (tmp_path / "bad").exists()
