"""``posenc export``: a real model with a zero-shot scaling saved as a Hugging Face folder that
transformers loads with posenc's logits (float32), the llama.cpp flags for the same RoPE, and the
mistakes refused before anything is written."""

import json
import re

import pytest
import torch
from torch.testing import assert_close

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
from transformers import AutoModelForCausalLM  # noqa: E402

from posenc.core.errors import ConfigError  # noqa: E402
from posenc.models import pretrained  # noqa: E402
from posenc.models.export import llama_cpp_flags, plan_export, write_export  # noqa: E402
from posenc.models.hf import from_hf_llama, llama_config_for, save_hf_llama  # noqa: E402
from posenc.pe.scaling import NTK, PI, DynamicNTK, Llama3, LongRoPE, NoScale, Proportional, YaRN  # noqa: E402

ORIGINAL, LENGTH, HEAD_DIM = 16, 48, 16  # evaluated at 3x the tiny models' original context
SCALES = {
    "none": NoScale(),
    "pi": PI(factor=3.0, original_length=ORIGINAL),
    "ntk": NTK(factor=3.0, original_length=ORIGINAL),
    "yarn": YaRN(factor=3.0, original_length=ORIGINAL, beta_fast=16.0),
    "dynamic": DynamicNTK(factor=1.0, original_length=ORIGINAL),
    "llama3": Llama3(factor=3.0, original_length=ORIGINAL),
    "longrope": LongRoPE(
        original_length=ORIGINAL,
        max_position=LENGTH,
        short_factor=[1.0 + 0.1 * i for i in range(HEAD_DIM // 2)],
        long_factor=[1.0 + 0.5 * i for i in range(HEAD_DIM // 2)],
    ),
    "proportional": Proportional(factor=2.0, original_length=ORIGINAL, partial_rotary_factor=0.75),
}


@pytest.fixture(scope="module")
def tokenizer():
    from hf_models import tiny_tokenizer

    return tiny_tokenizer()


def tiny_family(family: str):
    """test_families' tiny qwen2 (q/k/v biases, sliding layers) or gemma3_text (local θ 50, global θ 1000)."""
    from test_families import tiny

    return tiny(family)


def saved(model, tokenizer, folder):
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def posenc_logits(source, scale, idx):
    """The logits ``posenc extrapolate`` scores with: the model loaded, the scale installed."""
    lm = pretrained.load_pretrained(source, pretrained.read_config(source)).lm
    if scale.length_dependent:
        lm.follow_length(scale)
    else:
        scale.apply(lm.pe, idx.shape[1])
    with torch.no_grad():
        return lm(idx)


def export(folder, name, out, **kwargs):
    source = pretrained.resolve_source(str(folder))
    plan = plan_export(source, pretrained.read_config(source), SCALES[name], name, out, **kwargs)
    return source, plan, write_export(plan)


@pytest.mark.parametrize("name", list(SCALES))
def test_exported_llama_loads_in_transformers_with_posencs_logits(tmp_path, tokenizer, name):
    from hf_models import tiny_llama

    source, plan, folder = export(
        saved(tiny_llama(False, max_positions=ORIGINAL), tokenizer, tmp_path / "src"), name, tmp_path / "out"
    )
    written = json.loads((folder / "config.json").read_text())
    kind = {"none": "default", "pi": "linear", "ntk": "default"}.get(name, name)
    assert written["rope_parameters"]["rope_type"] == kind and written["architectures"] == ["LlamaForCausalLM"]
    assert (written["rope_scaling"] or {}).get("rope_type") == (None if kind == "default" else kind)
    assert (folder / "tokenizer.json").is_file() and not (tmp_path / "out.partial").exists()
    back = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    idx = torch.randint(0, back.config.vocab_size, (2, LENGTH), generator=torch.Generator().manual_seed(1))
    ours = posenc_logits(source, SCALES[name], idx)
    with torch.no_grad():
        assert_close(back(idx).logits, ours, rtol=1e-5, atol=1e-5)
        if name != "none":  # the scaling is what config.json carries: the unscaled model differs
            assert (posenc_logits(source, NoScale(), idx) - ours).abs().max() > 1e-3


@pytest.mark.parametrize("name", ["pi", "ntk", "yarn", "llama3", "dynamic"])
@pytest.mark.parametrize("family", ["qwen2", "gemma3_text"])
def test_exported_families_load_with_posencs_logits(tmp_path, tokenizer, family, name):
    """Qwen2 (transformers' modules, posenc's RoPE injected) and Gemma 3, whose scaling acts on the
    global layers only: config.json scales full_attention and keeps the local layers' θ."""
    source, plan, folder = export(saved(tiny_family(family), tokenizer, tmp_path / "src"), name, tmp_path / "out")
    written = json.loads((folder / "config.json").read_text())
    if family == "gemma3_text":
        assert written["rope_parameters"]["sliding_attention"] == {"rope_type": "default", "rope_theta": 50.0}
        assert written["rope_parameters"]["full_attention"]["rope_theta"] == (
            1000.0 * 3 ** (16 / 14) if name == "ntk" else 1000.0
        )
        assert "rope_scaling" not in written or written["rope_scaling"] is None
    back = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    idx = torch.randint(0, back.config.vocab_size, (2, LENGTH), generator=torch.Generator().manual_seed(2))
    ours = posenc_logits(source, SCALES[name], idx)
    with torch.no_grad():
        assert_close(back(idx).logits, ours, rtol=1e-4, atol=1e-5)
        assert (posenc_logits(source, NoScale(), idx) - ours).abs().max() > 1e-3


def test_a_fine_tuned_copy_exports_as_it_is_with_its_flags(tmp_path, tokenizer):
    """A checkpoint posenc fine-tuned under YaRN (``save_hf_llama``) exported with none: the same
    weights and scaling, and llama.cpp's flags for the scaling it carries."""
    from hf_models import tiny_llama

    hf = tiny_llama(True, max_positions=ORIGINAL)
    lm = from_hf_llama(hf)
    tuned = save_hf_llama(lm, llama_config_for(hf.config, SCALES["yarn"], 16, LENGTH), tokenizer, tmp_path / "ft")
    _, plan, folder = export(tuned, "none", tmp_path / "out")
    assert (
        json.loads((folder / "config.json").read_text())["rope_parameters"]
        == json.loads((tuned / "config.json").read_text())["rope_parameters"]
    )
    assert plan.llama_cpp.flags == (
        "--rope-scaling", "yarn", "--rope-scale", "3", "--yarn-orig-ctx", "16",
        "--yarn-beta-fast", "16", "--yarn-beta-slow", "1", "--ctx-size", "48",
    )  # fmt: skip


def test_a_bf16_checkpoint_exports_in_bf16_unless_asked(tmp_path, tokenizer):
    from hf_models import tiny_llama
    from safetensors import safe_open

    src = saved(tiny_llama(True).to(torch.bfloat16), tokenizer, tmp_path / "src")
    for out, dtype, expected in (("own", None, torch.bfloat16), ("fp32", torch.float32, torch.float32)):
        source = pretrained.resolve_source(str(src))
        plan = plan_export(source, pretrained.read_config(source), SCALES["pi"], "pi", tmp_path / out)
        folder = write_export(plan, dtype)
        with safe_open(folder / "model.safetensors", "pt") as f:
            assert {f.get_tensor(k).dtype for k in f.keys()} == {expected}


def llama_config(**rope):
    from transformers import LlamaConfig

    return LlamaConfig(
        hidden_size=64,
        num_attention_heads=4,
        head_dim=16,
        max_position_embeddings=8192,
        rope_parameters={"rope_theta": 10000.0, **rope},
    )


def flags_for(config, scale, length):
    return llama_cpp_flags(config, llama_config_for(config, scale, 16, length), length)


def test_llama_cpp_flags_are_its_own_option_names():
    config = llama_config()
    yarn = flags_for(config, YaRN(factor=4.0, original_length=8192), 32768)
    assert yarn.line() == (
        "--rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 8192 --yarn-beta-fast 32 --yarn-beta-slow 1 "
        "--ctx-size 32768"
    )
    assert flags_for(config, PI(factor=2.5, original_length=8192), 20480).line() == (
        "--rope-scaling linear --rope-scale 2.5 --ctx-size 20480"
    )
    theta = 10000.0 * 4 ** (16 / 14)  # NTK's base θ·s^(r/(r−2)), r = 16 rotated dimensions
    assert flags_for(config, NTK(factor=4.0, original_length=8192), 32768).flags == (
        "--rope-freq-base", f"{theta:.10g}", "--ctx-size", "32768",
    )  # fmt: skip
    assert flags_for(config, NoScale(), 8192).line() == "none needed (the model's own RoPE)"
    # PI on a shipped linear x2: one linear factor, the product
    shipped = llama_config(rope_type="linear", factor=2.0)
    assert flags_for(shipped, PI(factor=3.0, original_length=8192), 8192).flags[:4] == (
        "--rope-scaling", "linear", "--rope-scale", "6",
    )  # fmt: skip


def test_what_llama_cpp_cannot_express_is_a_reason():
    config = llama_config()
    for scale, reason in (
        (DynamicNTK(factor=1.0, original_length=8192), "no dynamic NTK"),
        (Llama3(factor=8.0, original_length=8192), "rope_freqs tensor"),
        (YaRN(factor=4.0, original_length=8192, attention_factor=1.5), r"0.1 ln s \+ 1 = 1.13863"),
        (YaRN(factor=4.0, original_length=8192, truncate=False), "whole dimensions"),
        (SCALES["longrope"], "rope_factors_long/short"),
        (
            Proportional(factor=1.0, original_length=8192, partial_rotary_factor=0.5),
            "no flag for rope_type 'proportional'",
        ),
    ):
        flags = flags_for(config, scale, 32768)
        assert flags.flags == () and flags.line().startswith("not expressible: ")
        assert re.search(reason, flags.reason), flags.reason
    # YaRN's own attention factor, given explicitly, is llama.cpp's: expressible
    assert flags_for(
        config, YaRN(factor=4.0, original_length=8192, attention_factor=0.1 * 1.3862943611 + 1), 32768
    ).flags


def test_llama_cpp_flags_reach_the_global_layers_only():
    """llama.cpp keeps a Gemma model's sliding-window layers at the GGUF's RoPE: a Gemma 3 scaling
    of its global layers is expressible, one of its local layers or of every Gemma 2 layer is not."""
    gemma3 = tiny_family("gemma3_text").config
    yarn = YaRN(factor=2.0, original_length=ORIGINAL)
    assert llama_cpp_flags(gemma3, llama_config_for(gemma3, yarn, 16, 32), 32).flags[:2] == ("--rope-scaling", "yarn")
    local = llama_config_for(gemma3, yarn, 16, 32, "sliding_attention")
    assert "full_attention layers only" in llama_cpp_flags(gemma3, local, 32, "sliding_attention").reason
    gemma2 = transformers.Gemma2Config(head_dim=16, rope_parameters={"rope_theta": 10000.0})
    assert "sliding-window layers" in llama_cpp_flags(gemma2, llama_config_for(gemma2, yarn, 16, 32), 32).reason


def test_plan_refuses_before_any_weight_is_read(tmp_path, tokenizer, monkeypatch):
    from hf_models import tiny_llama

    src = saved(
        tiny_llama(True, max_positions=ORIGINAL, rope_scaling={"rope_type": "linear", "factor": 2.0}),
        tokenizer,
        tmp_path / "src",
    )
    source = pretrained.resolve_source(str(src))
    config = pretrained.read_config(source)
    monkeypatch.setattr(pretrained, "load_transformers", lambda *a: pytest.fail("weights read"))
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep.txt").write_text("mine")
    for scale, name, kwargs, message in (
        (SCALES["pi"], "pi", {"folder": tmp_path / "busy"}, "exists and is not empty; give a new folder, or --force"),
        (SCALES["yarn"], "yarn", {}, "cannot describe 'YaRN' on top of the shipped rope_type 'linear'"),
        (YaRN(original_length=ORIGINAL), "yarn", {}, "--scale yarn needs --factor"),
        (NoScale(), "none", {"factor": 2.0}, "--factor does not apply to --scale none"),
        (SCALES["pi"], "pi", {"scaled_layers": "sliding_attention"}, "has one RoPE for every layer"),
        (
            LongRoPE(original_length=ORIGINAL, short_factor=[1.0] * 3, long_factor=[1.0] * 3),
            "longrope",
            {},
            "short_factor has 3 factors, but the rotary dimension 16 has 8 frequencies",
        ),
    ):
        args = {"folder": tmp_path / "new", **kwargs}
        with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("+", r"\+")):
            plan_export(source, config, scale, name, **args)
    assert not (tmp_path / "new").exists() and [p.name for p in (tmp_path / "busy").iterdir()] == ["keep.txt"]
    plan = plan_export(source, config, SCALES["pi"], "pi", tmp_path / "busy", force=True)
    assert plan.rope["factor"] == 6.0  # PI x3 on the shipped linear x2


def test_cli_exports_a_gguf_file_and_prints_the_flags(cli, real_models, tmp_path):
    out = tmp_path / "smol-yarn"
    code, stdout, err = cli("export", "--model", real_models["gguf"], "--scale", "yarn", "--factor", "4", "-o", out)
    assert code == 0, err
    assert err == ""  # no bar from transformers' reader or writer
    flat = " ".join(stdout.split())
    assert f"exported: {out} (config.json: rope_type=yarn rope_theta=10000 factor=4" in flat
    assert "original_max_position_embeddings=64; context 256 tokens)" in flat
    assert (
        "llama.cpp: --rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 64 --yarn-beta-fast 32 --yarn-beta-slow 1 "
        "--ctx-size 256" in flat
    )
    back = AutoModelForCausalLM.from_pretrained(out).eval()
    idx = torch.randint(0, 384, (1, 200), generator=torch.Generator().manual_seed(3))
    source = pretrained.resolve_source(str(real_models["gguf"]))
    scale = YaRN(factor=4.0, original_length=64)
    with torch.no_grad():
        assert_close(back(idx).logits, posenc_logits(source, scale, idx), rtol=1e-5, atol=1e-4)
    code, stdout, err = cli("export", "--model", real_models["tied"], "--scale", "dynamic", "--out", tmp_path / "dyn")
    assert code == 0, err
    assert "llama.cpp: not expressible: llama.cpp has no dynamic NTK" in " ".join(stdout.split())
    assert (tmp_path / "dyn" / "model.safetensors").is_file()  # the Hugging Face folder is written all the same


def test_cli_mistakes_are_one_line_and_write_nothing(cli, real_models, tmp_path, tokenizer, capsys):
    from hf_models import tiny_llama

    linear = saved(tiny_llama(True, rope_scaling={"rope_type": "linear", "factor": 2.0}), tokenizer, tmp_path / "lin")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    (tmp_path / "file").write_text("")
    model = str(real_models["tied"])
    capsys.readouterr()  # transformers' bar from saving the folder above
    for args, message in (
        (["--model", model, "--scale", "pi", "--factor", "2", "--out", busy], "exists and is not empty"),
        (["--model", model, "--scale", "pi", "--factor", "2", "--out", tmp_path / "file"], "is a file"),
        (["--model", model, "--scale", "yarn"], "--scale yarn needs --factor"),
        (["--model", model, "--factor", "2"], "--factor does not apply to --scale none"),
        (
            ["--model", model, "--scale", "clamp"],
            "--scale 'clamp' does not rescale a real model's RoPE; valid: dynamic, llama3",
        ),
        (["--model", model, "--scale", "pi", "--factor", "2", "--dtype", "int8"], "--dtype 'int8' is not one of"),
        (["--model", model, "--scale", "pi", "--factor", "2", "--scaled-layers", "x"], "one RoPE for every layer"),
        (["--model", str(tmp_path / "none.gguf")], "does not exist"),
        (["--model", model, "--remap", "self_extend"], "--remap self_extend: transformers has no position remap"),
        (["--model", model, "--remap", "nope"], "--remap 'nope' is not a remap; valid: "),
        (["--model", linear, "--scale", "yarn", "--factor", "2"], "on top of the shipped rope_type 'linear'"),
        (["--model", linear, "--out", linear, "--force"], "holds the model being exported"),
        (["--model", real_models["gguf"], "--out", real_models["gguf"].parent.parent, "--force"], "holds the model"),
    ):
        code, out, err = cli("export", *args, *([] if "--out" in args else ["--out", tmp_path / "new"]))
        assert code == 2, (args, err)
        assert err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1, err
        assert out == ""
    assert not (tmp_path / "new").exists() and [p.name for p in busy.iterdir()] == ["keep.txt"]
    code, out, err = cli("export", "--model", model, "--scale", "pi", "--factor", "2", "--out", busy, "--force")
    assert code == 0 and not (busy / "keep.txt").exists() and (busy / "config.json").is_file()


def test_cli_exports_the_fine_tuned_copy_of_a_run(cli, real_models, tmp_path):
    """The run folder of ``posenc extrapolate --finetune-steps``: its copy exported as it is (PI x5
    in config.json), with the llama.cpp flags of that scaling; a wrong name or a run without copies
    is one line."""
    common = ("--lengths", "16,80", "--device", "cpu", "--results-dir")
    code, _, err = cli("extrapolate", "--model", real_models["gguf"], "--scale", "pi", "--finetune-steps", "2",
                       *common, tmp_path / "ft")  # fmt: skip
    assert code == 0, err
    [run] = list((tmp_path / "ft" / "runs").iterdir())
    code, out, err = cli("export", "--model", run, "--out", tmp_path / "tuned")
    assert code == 0, err
    flat = " ".join(out.split())
    assert "rope_type=linear rope_theta=10000 factor=1.25; context 80 tokens" in flat
    assert "llama.cpp: --rope-scaling linear --rope-scale 1.25 --ctx-size 80" in flat
    [copy] = list((tmp_path / "ft" / "cache" / "real").glob("*/finetuned/pi+ft2"))
    idx = torch.randint(0, 384, (1, 80), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        exported, tuned = (
            AutoModelForCausalLM.from_pretrained(f).eval()(idx).logits for f in (tmp_path / "tuned", copy)
        )
    assert torch.equal(exported, tuned)
    code, _, err = cli("export", "--model", run, "--finetuned", "yarn+ft2", "--out", tmp_path / "x")
    assert code == 2 and "--finetuned 'yarn+ft2' is not in --model" in err and "valid: pi+ft2" in err
    code, _, err = cli("extrapolate", "--model", real_models["gguf"], "--lengths", "16", *common, tmp_path / "plain")
    [plain] = list((tmp_path / "plain" / "runs").iterdir())
    code, _, err = cli("export", "--model", plain, "--out", tmp_path / "x")
    assert code == 2 and "is a run folder without a fine-tuned copy" in err
    code, _, err = cli("export", "--model", real_models["tied"], "--finetuned", "pi+ft2", "--out", tmp_path / "x")
    assert code == 2 and "--finetuned names a fine-tuned copy of a run folder" in err
    assert not (tmp_path / "x").exists()


def every_family():
    from test_families import FAMILY_CONFIGS

    return list(FAMILY_CONFIGS)


@pytest.mark.parametrize("family", every_family())
def test_every_family_exports_with_posencs_logits(tmp_path, tokenizer, family):
    """One scaling per family (Phi-3's config takes LongRoPE only): the export loads with posenc's logits."""
    from test_families import ORIGINAL as PHI3_ORIGINAL

    scale = SCALES["yarn"]
    if family == "phi3":
        half = HEAD_DIM // 2
        scale = LongRoPE(
            original_length=PHI3_ORIGINAL,
            max_position=4 * PHI3_ORIGINAL,
            short_factor=[1.0 + 0.1 * i for i in range(half)],
            long_factor=[1.0 + 0.5 * i for i in range(half)],
        )
    source = pretrained.resolve_source(str(saved(tiny_family(family), tokenizer, tmp_path / "src")))
    plan = plan_export(source, pretrained.read_config(source), scale, "x", tmp_path / "out")
    folder = write_export(plan)
    # transformers 4's rope_scaling too, unless transformers reads it otherwise (GPT-NeoX: it would
    # rebuild θ from the old rotary_emb_base) or the layer types have their own RoPE (Gemma 3)
    written = json.loads((folder / "config.json").read_text())
    assert ("rope_scaling" in written) == (family not in ("gpt_neox", "gemma3_text"))
    back = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    idx = torch.randint(0, back.config.vocab_size, (2, LENGTH), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        assert_close(back(idx).logits, posenc_logits(source, scale, idx), rtol=1e-4, atol=1e-5)
