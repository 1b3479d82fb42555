"""The RAGEN paper's ablations as one-click grid experiments, with the numbers the paper reports.

Each ablation is a preset and a grid; `create` builds an ExperimentSpec and saves it through
Experiment.create_with_runs, the path the form and the API use (grid expansion, trainer validation,
runs enqueued on commit). Paper numbers are the RAGEN paper's (arXiv 2504.20073,
its ablation tables and figures; Qwen2.5-0.5B-Instruct, 200 steps).
"""

from dataclasses import dataclass, field

from django.db import transaction

from trainer.config import TrainConfig
from trainer.overrides import get_dotted
from webapp.compare.selection import MAX_RUNS
from webapp.experiments import spec_parsing, specs
from webapp.experiments.models import Experiment

RESPONSES_PER_PROMPT = (1, 2, 4, 8, 16)
# An ablation opens on one compare page; the experiment's own run limit keeps it within the page's.
assert specs.MAX_RUNS <= MAX_RUNS


@dataclass(frozen=True)
class PaperResult:
    setting: str  # the group value it belongs to, as the compare page shows it
    env: str
    measure: str  # "success" (final training success) or "collapse" (first collapse step)
    reported: str


@dataclass(frozen=True)
class Ablation:
    key: str
    title: str
    question: str
    preset: str
    group_by: str  # the config field whose values are the ablation's settings
    default_env: str
    paper: tuple[PaperResult, ...]
    note: str = ""
    values: tuple = field(default=())
    val_envs: dict = field(default_factory=dict)  # training env -> the envs validated beside it
    capped_by: str = ""  # a config field that bounds group_by's effect: arms above it train alike

    def alike_arms(self, planned) -> str | None:
        """Why the planned runs' arms would train alike (each setting capped to the same value by
        `capped_by` on this environment), or None."""
        if not self.capped_by:
            return None
        settings, effective = set(), set()
        for run in planned:
            value, cap = get_dotted(run.config, self.group_by), get_dotted(run.config, self.capped_by)
            settings.add(value)
            effective.add(min(value, cap))
        if len(effective) == len(settings):
            return None
        caps = sorted({get_dotted(run.config, self.capped_by) for run in planned})
        return (
            f"on {planned[0].config['env']['name']}, {self.capped_by} is {', '.join(map(str, caps))}, so "
            f"{self.group_by} {', '.join(map(str, sorted(settings)))} allow only {len(effective)} different "
            f"setting{'s' if len(effective) != 1 else ''}: the arms would train alike; choose an environment "
            f"with more actions (the paper's: {self.default_env})"
        )

    def overrides(self, env: str) -> dict:
        """Settings every run of the ablation shares on `env` (generalization: where it is validated)."""
        if not self.val_envs:
            return {}
        return {"rollout": {"val_envs": list(self.val_envs.get(env, [env]))}}

    @property
    def settings(self) -> str:
        """The settings its runs take, as the form lists them before they are created."""
        if self.key == "responses-per-prompt":
            return ", ".join(map(str, RESPONSES_PER_PROMPT)) + " (those that divide the batch)"
        return ", ".join(map(str, self.values))

    def grid(self, base: TrainConfig) -> dict[str, list]:
        if self.key == "responses-per-prompt":
            return {
                "rollout": [
                    {"env_groups": total // n, "group_size": n}
                    for total in [base.rollout.env_groups * base.rollout.group_size]
                    for n in RESPONSES_PER_PROMPT
                    if total % n == 0
                ]
            }
        return {self.group_by: list(self.values)}


ABLATIONS = {
    a.key: a
    for a in [
        Ablation(
            "starpo-vs-starpo-s",
            "StarPO vs StarPO-S",
            "Do filtering, no KL and clip-higher (StarPO-S) keep training out of the Echo Trap?",
            preset="starpo",
            group_by=specs.GRID_PRESET_KEY,
            default_env="bandit",
            values=("starpo", "starpo-s"),
            paper=(
                PaperResult("starpo-s", "bandit", "success", "100%"),
                PaperResult("starpo-s", "sokoban", "success", "~21%"),
                PaperResult("starpo-s", "frozenlake", "success", "~20%"),
                PaperResult("starpo", "bandit", "collapse", "PPO holds until ~step 100 (GRPO collapses ~20)"),
                PaperResult("starpo", "sokoban", "collapse", "PPO holds until ~step 50 (GRPO collapses ~10)"),
            ),
        ),
        Ablation(
            "ppo-vs-grpo",
            "PPO vs GRPO (critic or group baseline)",
            "Does a learned critic (PPO with GAE) or the group's mean reward (GRPO) hold training out of the "
            "Echo Trap longer?",
            preset="starpo",
            group_by=specs.GRID_PRESET_KEY,
            default_env="bandit",
            values=("starpo", "grpo"),
            paper=(
                PaperResult("starpo", "bandit", "collapse", "PPO holds until ~step 100"),
                PaperResult("grpo", "bandit", "collapse", "collapse at ~step 20"),
                PaperResult("starpo", "sokoban", "collapse", "PPO holds until ~step 50"),
                PaperResult("grpo", "sokoban", "collapse", "collapse at ~step 10"),
                PaperResult("starpo", "frozenlake", "collapse", "collapses before GRPO"),
                PaperResult("grpo", "frozenlake", "collapse", "more stable than PPO here"),
            ),
            note="StarPO with each estimator, the rest of the preset alike: no filter, KL 0.001 (a reward "
            "penalty for PPO, a loss term for GRPO), clip 0.2. The paper found PPO steadier on Bandit and "
            "Sokoban and GRPO on FrozenLake.",
        ),
        Ablation(
            "filter-ratio",
            "Rollout filter ratio",
            "How much does keeping only the most uncertain groups delay the collapse?",
            preset="starpo-s",
            group_by="algorithm.filter_ratio",
            default_env="frozenlake",
            values=(0.25, 0.5, 0.75, 1.0),
            paper=(
                PaperResult("1.0", "frozenlake", "collapse", "collapse at ~step 100 (keep all = no filter)"),
                PaperResult("0.75", "frozenlake", "collapse", "collapse at ~step 140"),
                PaperResult("0.5", "frozenlake", "collapse", "no collapse in 200 steps"),
            ),
            note="StarPO-S with PPO, as in the paper; filter_ratio 1.0 keeps every group, i.e. no filtering.",
        ),
        Ablation(
            "responses-per-prompt",
            "Responses per prompt (task diversity)",
            "With the batch fixed, are more prompts with fewer responses each better?",
            preset="starpo",
            group_by="rollout.group_size",
            default_env="frozenlake",
            paper=(
                PaperResult("1", "frozenlake", "success", "12.5%"),
                PaperResult("4", "frozenlake", "success", "21.5% (best)"),
            ),
            note="Trajectories per step (prompts P x responses N) stay fixed at the preset's P x N for the "
            "model (8 x 16 = 128 in the paper); N runs over 1, 2, 4, 8, 16 where it divides the total and "
            "P = total / N. StarPO (PPO, no filter): N = 1 leaves every group with zero reward "
            "spread, which an uncertainty filter cannot rank and GRPO cannot normalise, so StarPO-S "
            "and GRPO would be invalid with N = 1.",
        ),
        Ablation(
            "actions-per-turn",
            "Max actions per turn (interaction granularity)",
            "How many actions should the agent take per turn?",
            preset="starpo-s",
            group_by="rollout.max_actions_per_turn",
            default_env="sokoban",
            values=(1, 2, 3, 4, 5, 6, 7),
            capped_by="rollout.max_actions_per_episode",  # Bandit's is 1: one action, whatever the turn allows
            paper=(
                PaperResult("1", "sokoban", "success", "12.1%"),
                PaperResult("5", "sokoban", "success", "28.1%"),
                PaperResult("6", "sokoban", "success", "33.6% (best)"),
                PaperResult("7", "sokoban", "success", "22.3%"),
            ),
            note="Max actions per trajectory stays at 10, over at most rollout.max_turns turns (5 by "
            "default): with one action a turn a trajectory takes at most 5 actions, a smaller budget than "
            "the other arms'.",
        ),
        Ablation(
            "generalization",
            "Generalization to other environments",
            "Does what a policy learns carry over to new names, new symbols and another game?",
            preset="starpo-s",
            group_by=specs.GRID_PRESET_KEY,
            default_env="bandit-teacher-engineer",
            values=("starpo", "starpo-s"),
            paper=(),
            val_envs={
                "bandit-teacher-engineer": ["bandit-teacher-engineer", "bandit-librarian-trader"],
                "bandit": ["bandit", "bandit-librarian-trader"],
                "sokoban": ["sokoban", "frozenlake", "sokoban-alternate"],
            },
            note="The paper's generalization setting: train on Bandit with Teacher/Engineer and validate on it "
            "and on Librarian/Trader, or train on Sokoban and validate on Sokoban, FrozenLake and Sokoban "
            "drawn with new symbols. Each is charted as val/<env>/success; other training environments "
            "validate on themselves.",
        ),
        Ablation(
            "updates-per-rollout",
            "Updates per rollout batch (freshness)",
            "Is one update per rollout batch (online-1) better than reusing a batch for several epochs?",
            preset="starpo-s",
            group_by="optim.updates_per_batch",
            default_env="sokoban",
            values=(1, 2, 5, 10),
            paper=(),
            note="The paper found online-1 best against 2, 5 and 10 updates per batch. With more than one "
            "epoch the policy moves away from the one that sampled the batch, so the clipped ratio, and "
            "with it StarPO-S's clip-higher, acts (with one epoch over one mini-batch the ratio is 1).",
        ),
        Ablation(
            "loss-aggregation",
            "Loss aggregation",
            "Does averaging per trajectory first (our default) or over all tokens (RAGEN's default now) matter?",
            preset="starpo-s",
            group_by="algorithm.loss_agg",
            default_env="sokoban",
            values=("seq-mean-token-mean", "token-mean"),
            paper=(),
            note="seq-mean-token-mean weighs every trajectory equally (the paper's code averaged tokens within "
            "micro-batches of 4, close to this); token-mean weighs long replies more.",
        ),
    ]
}


def build_spec(ablation: Ablation, env: str, model: str, seeds: list[int], steps: int | None):
    base = TrainConfig.preset(ablation.preset, model={"name": model})
    return specs.ExperimentSpec(
        name=f"Ablation: {ablation.title} on {env}",
        description=f"{ablation.question}\nOne-click paper ablation '{ablation.key}'. {ablation.note}".strip(),
        seeds=seeds,
        grid=spec_parsing.parse_grid(ablation.grid(base)),
        preset=ablation.preset,
        env={"name": env, "params": {}},
        model=model,
        steps=steps,
        overrides=ablation.overrides(env),
    )


def create(owner, ablation: Ablation, spec, planned) -> Experiment:
    """The ablation's experiment and its planned runs (build_spec, run_planning.plan), all or nothing."""
    with transaction.atomic():
        experiment = Experiment.create_with_runs(owner, spec, planned)
        experiment.ablation = ablation.key
        experiment.save(update_fields=["ablation"])
    return experiment


def paper_table(ablation: Ablation, runs, summaries: dict[int, dict], group_value) -> dict:
    """The paper's numbers beside ours: per paper result on an environment our runs trained on, the
    matching runs' last validation success (mean; their final training success before any validation)
    or first collapse steps. `elsewhere`: the paper's other environments, named once rather than a row
    each of "no run of ours" (all of them are rows when our runs trained on none)."""
    trained = {(run.config.get("env") or {}).get("name") for run in runs}
    results = [result for result in ablation.paper if result.env in trained] or list(ablation.paper)
    rows = []
    for result in results:
        matching = [
            run
            for run in runs
            if group_value(run, ablation.group_by) == result.setting
            and (run.config.get("env") or {}).get("name") == result.env
        ]
        rows.append(
            {"result": result, "runs": len(matching), "ours": _ours(result.measure, matching, summaries)}
        )
    elsewhere = sorted({result.env for result in ablation.paper} - {result.env for result in results})
    return {"rows": rows, "elsewhere": elsewhere}


def _ours(measure: str, runs, summaries) -> str:
    if not runs:
        return ""
    if measure == "success":
        # The paper reports validation success: ours too where the runs have validated, else training's.
        for key, kind in (("val_success", "validation"), ("final_success", "training")):
            values = [summaries[run.pk][key] for run in runs if summaries[run.pk].get(key) is not None]
            if values:
                return f"{100 * sum(values) / len(values):.1f}% ({kind}, mean of {len(values)})"
        return "no data yet"
    steps = [summaries[run.pk].get("first_collapse") for run in runs]
    return ", ".join(
        f"collapse at step {s}"
        if s is not None
        else (f"none in {run.step} steps" if run.step else "no data yet")
        for s, run in zip(steps, runs)
    )
