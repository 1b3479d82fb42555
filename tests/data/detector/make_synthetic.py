"""Write the synthetic part of the detector's labelled set: python tests/data/detector/make_synthetic.py

Deterministic (seeded). The runs are shaped like the timelines the RAGEN paper reports for
Qwen2.5-0.5B (FrozenLake PPO: reward std drops ~40, reward collapses ~90; Bandit PPO: std bottoms ~70,
reward peaks ~120, gradient spike ~170; Sokoban PPO: std and reward fall together ~10, gradient spike
~110; GRPO collapses earlier), plus healthy runs: a plateau, a noisy plateau, a solved task, all with
entropy and thinking length shrinking slowly as they do in healthy training.

Each step is simulated, not drawn from curves: 8 groups x 16 rollouts; each group's rollouts succeed
with the group's probability, and with probability 1 - diversity(t) the whole group echoes one
template (identical replies, identical rewards). So in-group std and zero-std groups come out of the
same rollouts as success, as in a real run. Labels come from the latent success curve.
Real runs of our trainer go into the same folder, each with its entry in labels.json.
"""

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
GROUPS, GROUP_SIZE = 8, 16

# Our keys -> the keys a run logged by veRL (RAGEN) or TRL writes, to exercise diagnostics.aliases.
KEY_STYLES = {
    "ours": {},
    "verl": {
        "train/reward_mean": "critic/score/mean",
        "train/reward_std_in_group": "rollout/in_group_std",
        "actor/entropy": "actor/entropy_loss",
        "response/tokens_mean": "response_length/mean",
    },
    "trl": {
        "train/reward_mean": "reward",
        "train/frac_zero_std_groups": "frac_reward_zero_std",
        "actor/entropy": "entropy",
        "actor/grad_norm": "grad_norm",
        "response/tokens_mean": "completions/mean_length",
    },
}
# veRL and TRL do not log success or thinking length; the detector falls back to mean reward. TRL logs no
# in-group reward std: its `reward_std` is the std over the whole batch (written for TRL runs only).
NOT_LOGGED = {
    "ours": {"reward_std"},
    "verl": {"train/success", "val/success", "response/think_tokens_mean", "reward_std"},
    "trl": {"train/success", "val/success", "response/think_tokens_mean", "train/reward_std_in_group"},
}


def sigmoid(t, centre, width):
    return 1 / (1 + np.exp(-(t - centre) / width))


@dataclass
class Scenario:
    name: str
    case: str
    steps: int = 200
    start: float = 0.05  # success before learning
    peak: float = 0.3
    rise_at: float = 25  # learning: centre and width of the rise
    rise_width: float = 6
    fall_at: float | None = None  # collapse: centre and width of the fall; None = healthy
    fall_width: float = 5
    floor: float = 0.1  # success after the collapse, as a fraction of the peak
    echo_at: float = 150  # diversity: when replies start echoing one template
    echo_width: float = 20
    min_diversity: float = 0.75
    erratic_at: float | None = None  # entropy turns erratic (and rises) from here
    spikes: list = field(default_factory=list)  # gradient-norm spikes at these steps
    nan_spike: bool = False  # the first spike is a NaN, as a blown-up step logs it
    style: str = "ours"
    fmt: str = "csv"
    groups: int = GROUPS  # P x N rollouts per step; fewer make a noisier success estimate
    group_size: int = GROUP_SIZE

    def success(self, t):
        p = self.start + (self.peak - self.start) * sigmoid(t, self.rise_at, self.rise_width)
        if self.fall_at is not None:
            p = p * (1 - (1 - self.floor) * sigmoid(t, self.fall_at, self.fall_width))
        return p

    def diversity(self, t):
        return 1 - (1 - self.min_diversity) * sigmoid(t, self.echo_at, self.echo_width)


def half_peak_step(scenario):
    t = np.arange(scenario.steps)
    p = scenario.success(t)
    top = int(np.argmax(p))
    below = np.nonzero(p[top:] < p[top] / 2)[0]
    return int(top + below[0]) if len(below) else None


def simulate(scenario, seed):
    rng = np.random.default_rng(seed)
    rows = []
    entropy, think = 1.3 * rng.uniform(0.9, 1.1), 140 * rng.uniform(0.9, 1.1)
    grad_base = 0.6 * rng.uniform(0.8, 1.2)
    groups, group_size = scenario.groups, scenario.group_size
    difficulty = rng.normal(0, 0.08, groups)  # initial states differ in how hard they are
    for t in range(scenario.steps):
        p, diversity = scenario.success(t), scenario.diversity(t)
        group_p = np.clip(p + difficulty + rng.normal(0, 0.05, groups), 0, 1)
        echoing = rng.random(groups) > diversity
        outcomes = rng.random((groups, group_size)) < group_p[:, None]
        invalid = rng.random((groups, group_size)) < 0.05
        outcomes[echoing] = outcomes[echoing][:, :1]  # one template per echoing group
        invalid[echoing] = invalid[echoing][:, :1]
        rewards = outcomes - 0.1 * invalid
        group_std = rewards.std(axis=1)

        # Healthy: entropy and thinking shrink slowly. Echoing: both fall faster, entropy then jumps.
        # Squared, so the mild echo of healthy runs barely speeds the decline and the heavy one does.
        echo = 1 - diversity
        entropy *= 1 - 0.002 - 0.02 * echo**2
        think *= 1 - 0.0015 - 0.03 * echo**2
        erratic = scenario.erratic_at is not None and t >= scenario.erratic_at
        entropy_now = entropy * (1 + (0.5 if erratic else 0)) + rng.normal(0, 0.2 if erratic else 0.01)
        grad = grad_base * np.exp(rng.normal(0, 0.25)) * (1 + 2 * echo)
        if t in scenario.spikes:
            blown_up = scenario.nan_spike and t == scenario.spikes[0]
            grad = float("nan") if blown_up else grad * rng.uniform(30, 300)
        row = {
            "step": t,
            "train/success": outcomes.mean(),
            "train/reward_mean": rewards.mean(),
            "train/reward_std_in_group": group_std.mean(),
            "reward_std": rewards.std(ddof=1),  # TRL's: every group's rewards together
            "train/frac_zero_std_groups": np.mean(group_std < 1e-9),
            "actor/entropy": max(entropy_now, 0.01),
            "actor/grad_norm": grad,
            "response/think_tokens_mean": think * np.exp(rng.normal(0, 0.05)),
        }
        row["response/tokens_mean"] = row["response/think_tokens_mean"] + 25 + rng.normal(0, 2)
        if t % 10 == 0:
            row["val/success"] = rng.binomial(256, p) / 256
        rows.append(row)
    return [rename(row, scenario.style) for row in rows]


def rename(row, style):
    renamed = KEY_STYLES[style]
    return {renamed.get(k, k): v for k, v in row.items() if k not in NOT_LOGGED[style]}


def write(rows, path, fmt):
    def tidy(v):
        return v if isinstance(v, int) else float(f"{v:.5g}")

    if fmt == "jsonl":
        path.write_text("".join(json.dumps({k: tidy(v) for k, v in row.items()}) + "\n" for row in rows))
        return
    columns = list(dict.fromkeys(k for row in rows for k in row))
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for row in rows:
            writer.writerow(["" if k not in row else tidy(row[k]) for k in columns])


SCENARIOS = [
    Scenario(
        "frozenlake-ppo",
        "FrozenLake PPO: std drops ~40, success collapses ~90",
        peak=0.3,
        rise_at=20,
        echo_at=40,
        echo_width=4,
        min_diversity=0.1,
        fall_at=88,
        fall_width=4,
        erratic_at=70,
        spikes=[100, 130],
    ),
    Scenario(
        "bandit-ppo",
        "Bandit PPO: std bottoms ~70, reward peaks ~120, grad spike ~170",
        start=0.3,
        peak=0.85,
        rise_at=50,
        rise_width=15,
        echo_at=55,
        echo_width=7,
        min_diversity=0.1,
        fall_at=140,
        fall_width=6,
        erratic_at=125,
        spikes=[170],
        style="verl",
        fmt="jsonl",
    ),
    Scenario(
        "sokoban-ppo",
        "Sokoban PPO (hard): std and success fall together ~10, grad spike ~110",
        start=0.08,
        peak=0.3,
        rise_at=3,
        rise_width=1.5,
        echo_at=10,
        echo_width=2,
        min_diversity=0.15,
        fall_at=16,
        fall_width=2,
        erratic_at=30,
        spikes=[110],
        nan_spike=True,
    ),
    Scenario(
        "bandit-grpo",
        "Bandit GRPO: collapses earlier than PPO, ~30",
        start=0.3,
        peak=0.75,
        rise_at=8,
        rise_width=3,
        echo_at=12,
        echo_width=3,
        min_diversity=0.1,
        fall_at=30,
        fall_width=3,
        erratic_at=25,
        spikes=[45],
        style="trl",
        fmt="jsonl",
    ),
    Scenario(
        "sokoban-grpo",
        "Sokoban GRPO: collapses early, ~20",
        start=0.08,
        peak=0.25,
        rise_at=4,
        rise_width=1.5,
        echo_at=9,
        echo_width=2,
        min_diversity=0.1,
        fall_at=20,
        fall_width=2,
        erratic_at=22,
        spikes=[40],
    ),
    Scenario(
        "frozenlake-grpo-healthy",
        "FrozenLake GRPO: learns, plateaus ~0.2, no collapse",
        peak=0.2,
        rise_at=30,
        rise_width=10,
    ),
    Scenario(
        "sokoban-starpo-s-healthy",
        "Sokoban StarPO-S: plateau ~0.21, slow entropy and thinking decline",
        start=0.08,
        peak=0.21,
        rise_at=40,
        rise_width=15,
        min_diversity=0.8,
    ),
    Scenario(
        "bandit-starpo-s-solved",
        "Bandit StarPO-S: solves the task (success ~0.97), groups agree",
        start=0.3,
        peak=0.97,
        rise_at=40,
        rise_width=12,
        echo_at=120,
        min_diversity=0.6,
    ),
    Scenario(
        "frozenlake-noisy-healthy",
        "FrozenLake PPO with filtering: noisy plateau ~0.4, no collapse",
        peak=0.4,
        rise_at=35,
        rise_width=12,
        echo_at=170,
        echo_width=30,
        min_diversity=0.6,
    ),
    # The false alarms of issue 16, as a user met them.
    Scenario(
        "frozenlake-never-learns",
        "never learns: success noisy around 0.07 (P=4 x N=8), no real peak",
        start=0.07,
        peak=0.07,
        steps=120,
        min_diversity=0.9,
        groups=4,
        group_size=8,
    ),
    Scenario(
        "bandit-converging",
        "Bandit StarPO-S: success climbs 0.35 -> 0.9 over 150 steps, groups agree "
        "as it does; one gradient spike at 80 that recovers",
        start=0.35,
        peak=0.9,
        rise_at=70,
        rise_width=25,
        echo_at=500,
        min_diversity=0.9,
        spikes=[80],
        groups=4,
        group_size=8,
        fmt="jsonl",
    ),
]
SEEDS = {"healthy": (0, 1), "collapse": (0, 1, 2)}


def main():
    labels_path = HERE / "labels.json"
    labels = json.loads(labels_path.read_text()) if labels_path.exists() else {"runs": {}}
    labels["about"] = (
        "One entry per metric file in this folder. collapse: does the run fall into the "
        "Echo Trap; half_peak_step: first step after the peak where success is below half of "
        "it. See diagnostics/calibration.py."
    )
    for scenario in SCENARIOS:
        collapses = scenario.fall_at is not None
        for seed in SEEDS["collapse" if collapses else "healthy"]:
            name = f"{scenario.name}-s{seed}.{scenario.fmt}"
            write(simulate(scenario, seed), HERE / name, scenario.fmt)
            label = {"collapse": collapses, "source": "synthetic", "case": scenario.case}
            if collapses:
                label["half_peak_step"] = half_peak_step(scenario)
            labels["runs"][name] = label
    labels_path.write_text(json.dumps(labels, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
