"""The sampled trajectories page's data: each stored sample as the template shows it, whatever shape
the trainer (or a bug) gave it, which sampled step a ?step= link means, and the board's legend."""

import json

import envs


def _mapping(value) -> dict:
    return value if isinstance(value, dict) else {}


def _text(value) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def trajectory(index: int, data) -> dict:
    """A sample as the template shows it, whatever shape the trainer (or a bug) gave it."""
    sample = _mapping(data)
    turns = sample.get("turns") if isinstance(sample.get("turns"), list) else []
    valid = [_mapping(turn).get("valid") for turn in turns]
    return {
        "index": index,
        "group": sample.get("group"),
        "seed": sample.get("seed"),
        "reward": sample.get("reward"),
        "success": sample.get("success"),
        "text": _text(sample.get("text")),
        "raw": "" if isinstance(data, dict) else _text(data),
        "format_valid": all(value is not False for value in valid) if turns else None,
        "final_state": _text(sample.get("final_state")),
        "turns": [
            {
                "state": _text(turn.get("state")),
                "think": _text(turn.get("think")),
                "answer": _text(turn.get("answer")),
                "unparsed": "reply" in turn,  # the reply as generated, when it was out of format
                "reply": _text(turn.get("reply")),
                "actions": ", ".join(map(_text, turn["actions"]))
                if isinstance(turn.get("actions"), list)
                else _text(turn.get("actions")),
                **_played(turn),
                "reward": turn.get("reward"),
                "valid": turn.get("valid"),
            }
            for turn in map(_mapping, turns)
        ],
    }


def _played(turn: dict) -> dict:
    """What took effect of a turn's actions: each one the environment moved otherwise ("Left went Down",
    slippery ice), those never played because the episode ended before them, and those written beyond
    the turn's limit (rollout.max_actions_per_turn), which were not read."""
    actions = turn.get("actions") if isinstance(turn.get("actions"), list) else []
    went = turn.get("went") if isinstance(turn.get("went"), list) else None
    played = turn.get("played", len(went) if went is not None else len(actions))
    played = played if isinstance(played, int) and 0 <= played <= len(actions) else len(actions)
    slips = [
        f"{_text(action)} went {_text(moved)}"
        for action, moved in zip(actions, went or [])
        if action != moved
    ]
    beyond = turn.get("beyond_limit") if isinstance(turn.get("beyond_limit"), list) else []
    return {
        "went": ", ".join(slips),
        "unplayed": ", ".join(map(_text, actions[played:])),
        "beyond_limit": ", ".join(map(_text, beyond)),
    }


def nearest_sampled(steps: list[int], asked: int) -> int | None:
    """The sampled step a link to `asked` means: the last one at or before it, else the first after."""
    before = [step for step in steps if step <= asked]
    return before[-1] if before else (steps[0] if steps else None)


def _env(config: dict) -> dict:
    """The run config's env section ({} for a run whose config has none: an imported run)."""
    return _mapping(_mapping(config).get("env"))


def success_means(config: dict) -> str:
    """What "success" means in the run's environment ("" for a run whose config names none)."""
    spec = envs.registry().get(_env(config).get("name", ""))
    return spec.env_class.success_means if spec else ""


def board_legend(config: dict) -> dict[str, str]:
    """Symbol -> meaning of the run's environment board, as the environment itself describes it to the
    model; empty for a run whose config names no environment that builds (an imported run)."""
    env = _env(config)
    try:
        return dict(envs.make(env.get("name", ""), **_mapping(env.get("params"))).symbols)
    except Exception:  # an unknown name or stale params: the page still shows the samples
        return {}
