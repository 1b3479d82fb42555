"""Atomic checkpoints: OUT/checkpoints/step_NNNNNN/{policy/, critic.pt, optim.pt, rng.pt, state.json, config.yaml}.

`step` in a checkpoint is the next step to run. Written to a temp dir, then renamed into place.
"""

from __future__ import annotations

import json
import os
import random
import shutil

import torch

from trainer.checkpoint_files import checkpoint_root, list_checkpoints, step_of
from trainer.models import trainable_state


def save(
    out_dir: str, step: int, policy, actor_opt, critic_opt, config_yaml: str, seed_counter: int, writer: str
) -> str:
    """A checkpoint to resume at `step`, marked as the `writer`'s (one attempt at the run: see prune)."""
    root = checkpoint_root(out_dir)
    os.makedirs(root, exist_ok=True)
    final = os.path.join(root, f"step_{step:06d}")
    tmp = os.path.join(root, f".tmp-step_{step:06d}-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    policy.model.save_pretrained(os.path.join(tmp, "policy"))
    policy.tokenizer.save_pretrained(os.path.join(tmp, "policy"))
    if policy.critic is not None:
        torch.save(trainable_state(policy.critic), os.path.join(tmp, "critic.pt"))
    torch.save(
        {"actor": actor_opt.state_dict(), "critic": critic_opt.state_dict() if critic_opt else None},
        os.path.join(tmp, "optim.pt"),
    )
    rng = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    torch.save(rng, os.path.join(tmp, "rng.pt"))
    with open(os.path.join(tmp, "config.yaml"), "w") as f:
        f.write(config_yaml)
    with open(os.path.join(tmp, "state.json"), "w") as f:
        json.dump({"step": step, "seed_counter": seed_counter, "writer": writer}, f)
    if os.path.exists(final):
        shutil.rmtree(final)
    os.replace(tmp, final)
    return final


def prune(out_dir: str, keep: int, writer: str, since: int, resumable: int | None) -> list[str]:
    """Delete all but the newest `keep` checkpoints, and never the newest one at or before step `resumable`
    (the last step whose metrics are stored: a checkpoint past it cannot be resumed without a gap, see
    drop_after; None when every step is stored). Only the `writer`'s own checkpoints and those at or before
    `since` (where it started: an earlier attempt's) are its to delete; one ahead of `since` by another
    writer is an attempt that owns the run now, while this one lost it without knowing yet (its database
    away). Returns the deleted paths."""
    candidates = [
        path for path in list_checkpoints(out_dir) if _writer(path) == writer or step_of(path) <= since
    ]
    kept = set(candidates[-keep:])
    if resumable is not None:
        kept.update([path for path in list_checkpoints(out_dir) if step_of(path) <= resumable][-1:])
    deleted = [path for path in candidates if path not in kept]
    for path in deleted:
        shutil.rmtree(path, ignore_errors=True)
    return deleted


def _writer(path: str) -> str | None:
    try:
        with open(os.path.join(path, "state.json")) as f:
            return json.load(f).get("writer")
    except (OSError, ValueError):
        return None


def drop_after(out_dir: str, step: int) -> list[str]:
    """Delete the checkpoints that resume after `step` (a run's steps stored elsewhere end there: one written
    just before its process died, ahead of the steps it had not stored yet); returns their paths."""
    ahead = [path for path in list_checkpoints(out_dir) if step_of(path) > step]
    for path in ahead:
        shutil.rmtree(path, ignore_errors=True)
    return ahead


def latest(out_dir: str) -> str | None:
    found = list_checkpoints(out_dir)
    return found[-1] if found else None


def find(path: str) -> str:
    """A checkpoint dir, or a run's out dir (then its latest checkpoint)."""
    if os.path.exists(os.path.join(path, "state.json")):
        return path
    found = latest(path)
    if found is None:
        raise FileNotFoundError(f"no checkpoint in {path!r}")
    return found


def load_config(path: str):
    """The TrainConfig a checkpoint was saved with."""
    from trainer.config import TrainConfig

    with open(os.path.join(path, "config.yaml")) as f:
        return TrainConfig.from_yaml(f.read())


def load_state(path: str) -> dict:
    with open(os.path.join(path, "state.json")) as f:
        state = json.load(f)
    state["optim"] = torch.load(os.path.join(path, "optim.pt"), weights_only=False)
    state["rng"] = torch.load(os.path.join(path, "rng.pt"), weights_only=False)
    return state


def restore_rng(rng: dict) -> None:
    random.setstate(rng["python"])
    torch.set_rng_state(rng["torch"])
    if "cuda" in rng and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])
