"""The charts a run page draws: the standard ones, then one per other key the run logged."""

from webapp.experiments.models import Run
from webapp.metrics.api import MAX_KEYS

# Chart id -> title, metric keys, y axis type. The page draws them in this order.
CHARTS = [
    {"id": "success", "title": "Success (train and validation)", "keys": ["train/success", "val/success"]},
    {"id": "reward", "title": "Reward mean", "keys": ["train/reward_mean"]},
    {"id": "reward_std", "title": "In-group reward std", "keys": ["train/reward_std_in_group"], "log": True},
    {"id": "zero_std", "title": "Fraction of zero-std groups", "keys": ["train/frac_zero_std_groups"]},
    {"id": "entropy", "title": "Entropy", "keys": ["actor/entropy"]},
    {"id": "grad_norm", "title": "Gradient norm", "keys": ["actor/grad_norm"], "log": True},
    {
        "id": "length",
        "title": "Thinking and response length (tokens)",
        "keys": ["response/think_tokens_mean", "response/tokens_mean"],
    },
    {"id": "format", "title": "Format-valid rate", "keys": ["train/format_valid"]},
    {"id": "clip", "title": "Clip fraction", "keys": ["actor/clip_frac", "actor/clip_frac_high"]},
    {"id": "kl", "title": "KL", "keys": ["actor/approx_kl", "actor/kl_ref"]},
]


def standard_charts(config: dict) -> list[dict]:
    """CHARTS, then one validation-success chart per environment in the run's rollout.val_envs."""
    val_envs = _mapping(_mapping(config).get("rollout")).get("val_envs") or []
    return CHARTS + [
        {"id": f"val_{name}", "title": f"Validation success on {name}", "keys": [f"val/{name}/success"]}
        for name in val_envs
        if isinstance(name, str)
    ]


def chart_sections(run: Run) -> list[dict]:
    """The standard charts, then one chart per other key the run logged (custom keys, other trainers'
    columns), as many as one metrics request may ask for; each group a section the page can fold."""
    standard = standard_charts(run.config)
    charted = [key for chart in standard for key in chart["keys"]]
    others = sorted(set(run.latest_metrics) - set(charted))[: MAX_KEYS - len(charted)]
    sections = [{"id": "training", "title": "Training", "charts": standard}]
    if others:
        sections.append(
            {
                "id": "logged",
                "title": f"Other logged keys ({len(others)})",
                "charts": [
                    {"id": f"logged-{index}", "title": key, "keys": [key]} for index, key in enumerate(others)
                ],
            }
        )
    return sections


def _mapping(value) -> dict:
    return value if isinstance(value, dict) else {}
