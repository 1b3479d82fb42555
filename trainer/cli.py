"""python -m trainer {train, eval, sft, presets, build-tiny-model}."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys

import yaml


def _threads(count: int | None) -> None:
    import torch

    torch.set_num_threads(count or int(os.environ.get("ECHOLAB_THREADS", 0)) or min(os.cpu_count() or 1, 8))


def _config_errors(errors: dict[str, str]) -> int:
    for k, v in errors.items():
        print(f"config error: {k}: {v}", file=sys.stderr)
    return 2


def _train_config(args):
    """The config a new run starts with: preset (or --config alone) + file + flags."""
    from trainer.config import ConfigError, TrainConfig
    from trainer.overrides import apply_overrides, deep_merge, load_yaml

    user: dict = {}
    if args.config:
        try:
            with open(args.config) as f:
                loaded = load_yaml(f) or {}
        except OSError as e:
            raise ConfigError({"config": f"cannot read {args.config}: {e.strerror}"}) from None
        except yaml.YAMLError as e:
            raise ConfigError(
                {"config": f"{args.config} is not valid YAML: {str(e).splitlines()[0]}"}
            ) from None
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
    return (
        TrainConfig.from_dict(user)
        if args.config and not args.preset
        else TrainConfig.preset(args.preset or "starpo-s", **user)
    )


def _resumed_config(args, found: str):
    """A resumed run keeps the config it was started with (from its checkpoint); only --steps may change."""
    from trainer import checkpoint
    from trainer.config import ConfigError, TrainConfig
    from trainer.overrides import set_dotted

    changed = [
        flag
        for flag, value in (
            ("--preset", args.preset),
            ("--env", args.env),
            ("--model", args.model),
            ("--config", args.config),
            ("--set", args.set),
        )
        if value
    ]
    if changed:
        raise ConfigError(
            {
                "--resume": f"continues the run in {args.out} with its own config; "
                f"drop {', '.join(changed)} (only --steps may change)"
            }
        )
    cfg = checkpoint.load_config(found)
    if args.steps is None:
        return cfg
    values = cfg.to_dict()
    set_dotted(values, "schedule.steps", args.steps)
    return TrainConfig.from_dict(values)


def _stopping_notice() -> None:
    print("\nstopping: checkpointing after this step (Ctrl-C again to abort)", file=sys.stderr)


def cmd_train(args) -> int:
    from trainer import checkpoint
    from trainer.config import ConfigError
    from trainer.loop import FilterStarved, train
    from trainer.models import ModelLoadError
    from trainer.sink import JsonlSink
    from trainer.stopping import StopSignal

    found = checkpoint.latest(args.out) if os.path.isdir(args.out) else None
    if args.resume and found is None:
        print(f"error: nothing to resume: {args.out} holds no checkpoint", file=sys.stderr)
        return 2
    try:
        cfg = _resumed_config(args, found) if found is not None and args.resume else _train_config(args)
    except ConfigError as e:
        return _config_errors(e.errors)
    if not args.resume and found is not None:
        print(
            f"error: {args.out} holds checkpoints of another run (latest {os.path.basename(found)}); "
            "pass --resume to continue it, or choose another --out",
            file=sys.stderr,
        )
        return 2
    _threads(args.threads)
    sink = JsonlSink(args.out, cfg.to_yaml())
    try:
        with StopSignal(signal.SIGINT, _stopping_notice, abort_on_repeat=True) as stop:
            result = train(cfg, sink, args.out, should_stop=lambda: stop.asked, resume=args.resume)
    except ModelLoadError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except FilterStarved as e:
        print(f"stopped: {e}", file=sys.stderr)
        return 1
    print(result, file=sys.stderr)
    return 0


def cmd_eval(args) -> int:
    from trainer import checkpoint
    from trainer.config import ConfigError, TrainConfig
    from trainer.loop import Trainer
    from trainer.models import ModelLoadError
    from trainer.overrides import set_dotted

    if args.episodes < 1:
        print("error: --episodes must be >= 1", file=sys.stderr)
        return 2
    _threads(args.threads)
    try:
        path = checkpoint.find(args.checkpoint)
        values = checkpoint.load_config(path).to_dict()
        set_dotted(values, "rollout.val_seeds", args.episodes)
        set_dotted(values, "algorithm.kl_coef", 0.0)
        advantage_without_critic = "grpo" if values["rollout"]["group_size"] >= 2 else "ppo"
        set_dotted(values, "algorithm.advantage", advantage_without_critic)
        cfg = TrainConfig.from_dict(values)
        trainer = Trainer(cfg, init_dir=path)
    except ConfigError as e:
        return _config_errors(e.errors)
    except (FileNotFoundError, ModelLoadError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(
        json.dumps(
            {
                "checkpoint": path,
                "env": cfg.env.name,
                "episodes": args.episodes,
                "success": trainer.validate(),
            }
        )
    )
    return 0


def cmd_sft(args) -> int:
    from trainer.config import ConfigError, TrainConfig
    from trainer.models import ModelLoadError
    from trainer.overrides import apply_overrides
    from trainer.sft import sft

    if args.episodes < 1 or args.epochs < 1 or not 0 <= args.noise <= 1:
        print("error: --episodes and --epochs must be >= 1, --noise in [0, 1]", file=sys.stderr)
        return 2
    if os.path.exists(args.out) and os.listdir(args.out):
        print(f"error: --out {args.out} is not empty; choose a new folder", file=sys.stderr)
        return 2
    user: dict = {"env": {"name": args.env}, "model": {"name": args.model}}
    try:
        apply_overrides(user, args.set or [])
        cfg = TrainConfig.preset("starpo-s", **user)
    except ConfigError as e:
        return _config_errors(e.errors)
    _threads(args.threads)
    if os.path.isdir(args.out):
        os.rmdir(args.out)
    try:
        summary = sft(
            cfg,
            args.out,
            args.episodes,
            args.noise,
            args.epochs,
            args.lr,
            log=lambda message: print(message, file=sys.stderr),
        )
    except (ModelLoadError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps({"out": args.out, **summary}))
    return 0


def cmd_presets(args) -> int:
    from trainer.config import preset_table

    print(yaml.safe_dump(preset_table(), sort_keys=False))
    return 0


def cmd_build_tiny(args) -> int:
    _threads(args.threads)
    from trainer import tiny_model

    with tiny_model.build_lock(args.dir):
        tiny_model.build(
            args.dir, steps=args.steps, seed=args.seed, log=lambda message: print(message, file=sys.stderr)
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer", description="StarPO / StarPO-S trainer")
    sub = parser.add_subparsers(dest="command", required=True)
    train_parser = sub.add_parser("train", help="train a policy")
    from trainer.config import PRESET_HELP, PRESETS_HELP_TEXT

    train_parser.add_argument(
        "--preset", choices=list(PRESET_HELP), help=PRESETS_HELP_TEXT.replace("%", "%%")
    )
    train_parser.add_argument("--env")
    train_parser.add_argument("--model", help='hub id, local directory, or "tiny" (default)')
    train_parser.add_argument(
        "--config", help="YAML file with config overrides (or a full config without --preset)"
    )
    train_parser.add_argument("--set", action="append", metavar="SECTION.FIELD=VALUE")
    train_parser.add_argument("--steps", type=int)
    train_parser.add_argument("--out", required=True)
    train_parser.add_argument("--resume", action="store_true")
    train_parser.add_argument("--threads", type=int)
    train_parser.set_defaults(func=cmd_train)
    eval_parser = sub.add_parser("eval", help="success of a checkpoint on fixed validation seeds")
    eval_parser.add_argument("--checkpoint", required=True, help="a checkpoint dir or a run's out dir")
    eval_parser.add_argument("--episodes", type=int, default=256)
    eval_parser.add_argument("--threads", type=int)
    eval_parser.set_defaults(func=cmd_eval)
    sft_parser = sub.add_parser(
        "sft", help="supervised fine-tuning on oracle play: a model folder to start RL from"
    )
    sft_parser.add_argument("--env", required=True)
    sft_parser.add_argument("--episodes", type=int, default=1000)
    sft_parser.add_argument(
        "--out", required=True, help="a new folder (e.g. inside MODEL_ROOT) for the model"
    )
    sft_parser.add_argument("--model", default="tiny", help='hub id, local directory, or "tiny" (default)')
    sft_parser.add_argument("--noise", type=float, default=0.0, help="probability that an action is random")
    sft_parser.add_argument("--epochs", type=int, default=1)
    sft_parser.add_argument("--lr", type=float, help="default: the profile's actor lr")
    sft_parser.add_argument(
        "--set",
        action="append",
        metavar="SECTION.FIELD=VALUE",
        help="rollout shape, model.lora_rank, optim.micro_batch_size, seed, ...",
    )
    sft_parser.add_argument("--threads", type=int)
    sft_parser.set_defaults(func=cmd_sft)
    presets_parser = sub.add_parser("presets", help="print the presets")
    presets_parser.set_defaults(func=cmd_presets)
    build_parser = sub.add_parser("build-tiny-model", help="build the tiny local model into DIR")
    build_parser.add_argument("dir")
    build_parser.add_argument("--steps", type=int, default=150)
    build_parser.add_argument("--seed", type=int, default=0)
    build_parser.add_argument("--threads", type=int)
    build_parser.set_defaults(func=cmd_build_tiny)
    args = parser.parse_args(argv)
    return args.func(args)
