import sys

import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _check_every_job(monkeypatch):
    """Sweeps check every job in the tests (tests that patch a check would otherwise meet a pass
    remembered from an earlier run); tests/cli/test_check_cache.py turns the cache on."""
    monkeypatch.setenv("POSENC_CHECK_CACHE", "off")


@pytest.fixture(autouse=True)
def _compose_every_config(monkeypatch):
    """Configs are composed afresh in the tests, as with the check cache: nothing is read from or
    written to the user's cache folder; tests/engine/test_compose_cache.py turns the cache on."""
    monkeypatch.setenv("POSENC_COMPOSE_CACHE", "off")


@pytest.fixture
def cli(capsys, monkeypatch):
    """Run the posenc CLI in-process: returns (exit code, stdout, stderr)."""
    from posenc.cli.app import main

    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("POSENC_CONFIG_DIR", "")  # --config-dir sets it for the process: undone after the test

    def run(*args: str):
        monkeypatch.setattr(sys, "argv", ["posenc", *map(str, args)])
        try:
            main()
            code = 0
        except SystemExit as e:
            code = e.code or 0
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def image_roots(tmp_path, monkeypatch):
    """Tiny CIFAR-10, MNIST and ImageFolder trees in tmp_path: {dataset: root}.

    The real CIFAR-10 files are checked against their md5; these small ones only have to exist.
    """
    import os
    import pickle

    import numpy as np
    import torchvision.datasets.cifar as cifar
    from PIL import Image

    rng = np.random.default_rng(0)
    cifar_root = tmp_path / "cifar"
    (cifar_root / "cifar-10-batches-py").mkdir(parents=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {"data": rng.integers(0, 255, (3, 3072), dtype=np.uint8), "labels": [1, 2, 3]}
        (cifar_root / "cifar-10-batches-py" / name).write_bytes(pickle.dumps(batch))
    (cifar_root / "cifar-10-batches-py" / "batches.meta").write_bytes(pickle.dumps({"label_names": list("0123456789")}))
    monkeypatch.setattr(cifar, "check_integrity", lambda path, md5=None: os.path.isfile(path))

    raw = tmp_path / "mnist" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for prefix, n in (("train", 12), ("t10k", 4)):
        for kind, array in (("images-idx3", rng.integers(0, 255, (n, 28, 28))), ("labels-idx1", np.arange(n) % 10)):
            header = bytes([0, 0, 0x08, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
            (raw / f"{prefix}-{kind}-ubyte").write_bytes(header + array.astype(np.uint8).tobytes())

    folder = tmp_path / "folder"
    for i, name in enumerate(("cat", "dog")):
        (folder / name).mkdir(parents=True)
        for j in range(5):
            Image.fromarray(np.full((12, 20, 3), 40 * i + j, dtype=np.uint8)).save(folder / name / f"{j}.png")
    return {"cifar10": cifar_root, "mnist": tmp_path / "mnist", "image_folder": folder}


@pytest.fixture(scope="session")
def real_models(tmp_path_factory):
    """Tiny real checkpoints (tests/hf_models.py): {"tied": folder, "untied": folder, "gguf": file,
    "hf_tied"/"hf_untied": the LlamaForCausalLM each was saved from}. Skipped without the hf extra."""
    pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    from hf_models import save_folder, tiny_llama, tiny_tokenizer, write_gguf

    root = tmp_path_factory.mktemp("real_models")
    tokenizer = tiny_tokenizer()
    out = {}
    for name, tied in (("tied", True), ("untied", False)):
        out[name] = save_folder(root / name, tied=tied, tokenizer=tokenizer)
        out[f"hf_{name}"] = tiny_llama(tied)
    (root / "gguf").mkdir()
    out["gguf"] = write_gguf(root / "gguf" / "tiny.gguf", out["hf_untied"], tokenizer)
    return out
