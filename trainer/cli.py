"""python -m trainer {train, eval, presets, build-tiny-model}."""
from __future__ import annotations

import argparse
import json
import os
import sys

import yaml


def _threads(n: int | None) -> None:
    import torch
    torch.set_num_threads(n or int(os.environ.get("ECHOLAB_THREADS", 0)) or min(os.cpu_count() or 1, 8))


def cmd_train(args) -> int:
    from trainer.config import ConfigError, TrainConfig, apply_overrides, deep_merge
    from trainer.loop import train
    from trainer.models import ModelLoadError
    from trainer.sink import JsonlSink
    user: dict = {}
    try:
        if args.config:
            with open(args.config) as f:
                loaded = yaml.safe_load(f) or {}
            if not isinstance(loaded, dict):
                raise ConfigError({"config": f"{args.config} must hold a mapping"})
            deep_merge(user, loaded)
        if args.env:
            deep_merge(user, {"env": {"name": args.env}})
        if args.model:
            deep_merge(user, {"model": {"name": args.model}})
        if args.steps is not None:
            deep_merge(user, {"schedule": {"steps": args.steps}})
        apply_overrides(user, args.set or [])
        cfg = TrainConfig.from_dict(user) if args.config and not args.preset \
            else TrainConfig.preset(args.preset or "starpo-s", **user)
    except ConfigError as e:
        for k, v in e.errors.items():
            print(f"config error: {k}: {v}", file=sys.stderr)
        return 2
    _threads(args.threads)
    sink = JsonlSink(args.out, cfg.to_yaml())
    try:
        result = train(cfg, sink, args.out, resume=args.resume)
    except ModelLoadError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    print(result, file=sys.stderr)
    return 0


def cmd_eval(args) -> int:
    from trainer import checkpoint
    from trainer.config import TrainConfig
    from trainer.loop import Trainer
    _threads(args.threads)
    path = checkpoint.find(args.checkpoint)
    with open(os.path.join(path, "config.yaml")) as f:
        cfg = TrainConfig.from_yaml(f.read())
    d = cfg.to_dict()
    d["rollout"]["val_seeds"] = args.episodes
    d["algorithm"]["kl_coef"] = 0.0
    d["algorithm"]["advantage"] = "grpo" if d["rollout"]["group_size"] >= 2 else "ppo"  # no critic needed
    cfg = TrainConfig.from_dict(d)
    trainer = Trainer(cfg, init_dir=path)
    print(json.dumps({"checkpoint": path, "env": cfg.env.name, "episodes": args.episodes,
                      "success": trainer.validate()}))
    return 0


def cmd_presets(args) -> int:
    from trainer.config import preset_table
    print(yaml.safe_dump(preset_table(), sort_keys=False))
    return 0


def cmd_build_tiny(args) -> int:
    _threads(args.threads)
    from trainer import tiny_model
    tiny_model.build(args.dir, steps=args.steps, seed=args.seed, log=lambda m: print(m, file=sys.stderr))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer", description="StarPO / StarPO-S trainer")
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train a policy")
    t.add_argument("--preset", choices=["starpo", "starpo-s", "grpo", "starpo-s-grpo"])
    t.add_argument("--env")
    t.add_argument("--model", help='hub id, local directory, or "tiny" (default)')
    t.add_argument("--config", help="YAML file with config overrides (or a full config without --preset)")
    t.add_argument("--set", action="append", metavar="SECTION.FIELD=VALUE")
    t.add_argument("--steps", type=int)
    t.add_argument("--out", required=True)
    t.add_argument("--resume", action="store_true")
    t.add_argument("--threads", type=int)
    t.set_defaults(func=cmd_train)
    e = sub.add_parser("eval", help="success of a checkpoint on fixed validation seeds")
    e.add_argument("--checkpoint", required=True, help="a checkpoint dir or a run's out dir")
    e.add_argument("--episodes", type=int, default=256)
    e.add_argument("--threads", type=int)
    e.set_defaults(func=cmd_eval)
    p = sub.add_parser("presets", help="print the presets")
    p.set_defaults(func=cmd_presets)
    b = sub.add_parser("build-tiny-model", help="build the tiny local model into DIR")
    b.add_argument("dir")
    b.add_argument("--steps", type=int, default=150)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--threads", type=int)
    b.set_defaults(func=cmd_build_tiny)
    args = parser.parse_args(argv)
    return args.func(args)
