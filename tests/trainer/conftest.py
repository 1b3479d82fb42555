import os

import pytest
import torch

torch.set_num_threads(1)  # the machine is shared; the tiny model is fast enough single-threaded


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """The tiny model, built once per session with a short warm-start; "tiny" resolves to it."""
    from trainer import tiny_model
    root = os.environ.get("ECHOLAB_TEST_MODEL_ROOT") or str(tmp_path_factory.mktemp("models"))
    path = os.path.join(root, "tiny")
    old = os.environ.get("MODEL_ROOT")
    os.environ["MODEL_ROOT"] = root
    if not os.path.exists(os.path.join(path, "config.json")):
        tiny_model.build(path, steps=40, log=None)
    yield path
    if old is None:
        os.environ.pop("MODEL_ROOT", None)
    else:
        os.environ["MODEL_ROOT"] = old
