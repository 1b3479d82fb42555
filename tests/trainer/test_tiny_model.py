"""The tiny model is built once: `./echolab run` builds it in the background on a first start, and a
worker asked to train meanwhile waits for that build instead of starting a second beside it."""

import os
import threading
import time

from trainer import tiny_model


def test_a_second_caller_waits_for_the_build_under_way(tmp_path, monkeypatch):
    builds = []

    def slow_build(path, log=print):
        builds.append(path)
        time.sleep(0.5)  # long enough for the second caller to arrive while this one builds
        os.makedirs(path)
        (tmp_path / "models" / "tiny" / "config.json").write_text("{}")

    monkeypatch.setattr(tiny_model, "build", slow_build)
    path = str(tmp_path / "models" / "tiny")
    done = []
    callers = [threading.Thread(target=lambda: done.append(tiny_model.ensure(path))) for _ in range(2)]
    for caller in callers:
        caller.start()
        time.sleep(0.1)
    for caller in callers:
        caller.join()
    assert builds == [path] and done == [path, path]
