"""Run folders name what they ran: an extrapolation's task, schemes and scales."""

from types import SimpleNamespace

from posenc.experiments.extrapolation.protocol import Cell, run_name


def cells(pairs, task="passkey"):
    setup = SimpleNamespace(config={"choices": {"task": task}})
    return [Cell(pe, scale, setup, None, key=pe) for pe, scale in pairs]


def test_an_extrapolation_folder_names_its_task_schemes_and_scales():
    pairs = [("rope", "none"), ("rope", "yarn"), ("alibi", "none")]
    assert run_name(cells(pairs)) == "extrapolate-passkey-rope+alibi-none+yarn"
    many = [(pe, s) for pe in ("rope", "xpos") for s in ("none", "pi", "ntk", "yarn", "dynamic")]
    assert run_name(cells(many, "text")) == "extrapolate-text-rope+xpos-5scales"
