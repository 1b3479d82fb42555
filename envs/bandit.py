"""Two-armed bandit (single turn): can the model reason about risk from the arms' names alone?

The low-risk arm always pays a constant; the high-risk arm pays `high_risk_reward` with probability
`high_risk_prob`, else 0. Which name sits on arm A is drawn per seed, so the letter carries no signal.
"""

from diagnostics.quoting import quoted
from envs.base import TextEnv
from envs.spec import Param, ParamError

PARAMS = [
    Param(
        "low_risk_name",
        "str",
        "Phoenix",
        label="Low-risk arm's name",
        help="Name of the arm that always pays the constant reward.",
    ),
    Param(
        "high_risk_name",
        "str",
        "Dragon",
        label="High-risk arm's name",
        help="Name of the arm that pays big, rarely.",
    ),
    Param(
        "low_risk_reward",
        "float",
        0.1,
        min=0.0,
        max=1.0,
        label="Low-risk arm's payout",
        help="Constant payout of the low-risk arm (0.1 in the public code, 0.15 in the paper).",
    ),
    Param(
        "high_risk_reward",
        "float",
        1.0,
        min=0.0,
        max=100.0,
        label="High-risk arm's payout",
        help="Payout of the high-risk arm when it pays.",
    ),
    Param(
        "high_risk_prob",
        "float",
        0.25,
        min=0.0,
        max=1.0,
        label="High-risk arm's chance of paying",
        help="Probability that the high-risk arm pays.",
    ),
]

# One pull per episode, as RAGEN plays it (config/_1_bandit.yaml: max_turn 1, max_actions_per_turn 1,
# response_length 500).
ROLLOUT = {"max_turns": 1, "max_actions_per_turn": 1, "max_actions_per_episode": 1, "max_new_tokens": 500}

# (low-risk name, high-risk name): the pairs the paper trains and tests on; "reversed" swaps the roles
# so that the intuitive reading of the names points to the wrong arm.
NAME_PAIRS = {
    "phoenix-dragon": ("Phoenix", "Dragon"),
    "teacher-engineer": ("Teacher", "Engineer"),
    "librarian-trader": ("Librarian", "Trader"),
}

INSTRUCTION = (
    "You are playing a bandit game. There are two arms, A and B, each with a name; the state shows which "
    "name is on which arm. Each arm's reward distribution is related to its name: think about what the "
    "names suggest. Pull one arm to maximise your expected reward: answer with the arm's letter (A or B) "
    "or its name. You get one pull."
)


def check_params(owner: str, params: dict) -> dict:
    names = {}
    for field in ("low_risk_name", "high_risk_name"):
        name = params[field].strip()
        if not name or "||" in name or name.upper() in ("A", "B"):
            raise ParamError(
                field,
                f"{owner}.{field} must be a non-empty name other than A or B "
                f"and without '||', got {quoted(params[field])}",
            )
        names[field] = name
    if names["low_risk_name"].lower() == names["high_risk_name"].lower():
        raise ParamError(
            "high_risk_name",
            f"{owner}.high_risk_name must differ from low_risk_name, got {quoted(names['high_risk_name'])} twice",
        )
    return {**params, **names}


class BanditEnv(TextEnv):
    symbols: dict[str, str] = {}
    instruction = INSTRUCTION
    success_means = (
        "the arm with the higher expected payoff was chosen, whatever this one pull paid (the risky arm "
        "often pays 0)"
    )

    def __init__(self, low_risk_name, high_risk_name, low_risk_reward, high_risk_reward, high_risk_prob):
        super().__init__()
        self.low_risk_name = low_risk_name
        self.high_risk_name = high_risk_name
        self.low_risk_reward = low_risk_reward
        self.high_risk_reward = high_risk_reward
        self.high_risk_prob = high_risk_prob
        self.actions = ["A", "B", low_risk_name, high_risk_name]
        self.arms: dict[str, str] = {}  # letter -> name, drawn per seed
        self.feedback = ""

    @property
    def best_names(self) -> set[str]:
        """The arms with the highest expected value (both when they tie)."""
        low_ev = self.low_risk_reward
        high_ev = self.high_risk_prob * self.high_risk_reward
        return {
            name
            for name, ev in ((self.low_risk_name, low_ev), (self.high_risk_name, high_ev))
            if ev == max(low_ev, high_ev)
        }

    def _reset(self) -> None:
        names = [self.low_risk_name, self.high_risk_name]
        self.rng.shuffle(names)
        self.arms = {"A": names[0], "B": names[1]}
        self.feedback = ""

    def _step(self, action: str) -> tuple[float, bool, dict]:
        name = self.arms.get(action, action)
        if name == self.low_risk_name:
            reward = self.low_risk_reward
        else:
            reward = self.high_risk_reward if self.rng.random() < self.high_risk_prob else 0.0
        self.feedback = f"{name}: {reward:g} points"
        return reward, True, {"success": name in self.best_names, "action_is_effective": True, "arm": name}

    def render(self) -> str:
        if self.feedback:
            return self.feedback
        return f"A: {self.arms['A']}\nB: {self.arms['B']}"

    def oracle_action(self) -> str:
        return sorted(self.best_names)[0]

    def optimal_success(self, max_actions: int | None = None) -> float:
        # Success is defined as choosing a highest-EV arm, so play that arm and report what step() says.
        _, _, _, info = self.step(self.oracle_action())
        return float(info["success"])
