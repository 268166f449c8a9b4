"""Facts about a scheme or a scaling live on its class: what it encodes, its counterpart for the
other kind of model, Hugging Face's name for a scaling and whether it follows the length."""

from posenc.engine.config import list_options, option_class


def test_every_scheme_encodes_one_of_three_things_and_its_counterpart_exists():
    options = list_options("pe")
    for name in options:
        cls = option_class("pe", name)
        assert cls.encodes in ("nothing", "absolute", "relative"), name
        assert cls.counterpart is None or cls.counterpart in options, name


def test_counterparts_cross_between_text_and_patches():
    """A 1D scheme's counterpart is 2D and back (NoPE serves both, so it names itself)."""
    for name in list_options("pe"):
        cls = option_class("pe", name)
        other = option_class("pe", cls.counterpart)
        assert (other.ndim != cls.ndim) or cls.encodes == "nothing", name
        assert other.encodes == cls.encodes, name


def test_encodes_by_family():
    encodes = {name: option_class("pe", name).encodes for name in list_options("pe")}
    assert encodes["nope"] == "nothing"
    assert {n for n, e in encodes.items() if e == "absolute"} >= {"learned", "learned2d", "sinusoidal", "sincos2d"}
    assert {"rope", "t5", "alibi", "rel2d", "rope2d_mixed"} <= {n for n, e in encodes.items() if e == "relative"}


def test_scaling_facts():
    facts = {
        name: (option_class("scale", name).hf_rope_type, option_class("scale", name).length_dependent)
        for name in list_options("scale")
    }
    assert facts["pi"] == ("linear", False) and facts["yarn"] == ("yarn", False)
    assert facts["dynamic"] == ("dynamic", True) and facts["longrope"] == ("longrope", True)
    assert facts["none"] == ("default", False) and facts["ntk"] == (None, False) and facts["clamp"][0] is None
