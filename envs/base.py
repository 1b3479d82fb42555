"""What every text environment shares: the episode bookkeeping and the parsing of answers."""

import random
from abc import ABC, abstractmethod


class TextEnv(ABC):
    """Base class: subclasses set `actions`, `symbols`, `instruction` and implement `_reset`, `_step`, `render`.

    `reset(seed)` draws everything random from one `random.Random(seed)`, so the same seed and the same
    actions give the same episode on every machine.
    """

    actions: list[str] = []
    symbols: dict[str, str] = {}
    instruction: str = ""
    success_means: str = ""  # what `info["success"]` says of an episode, for people reading trajectories

    def __init__(self) -> None:
        self._rng: random.Random | None = None
        self.done = False

    @property
    def rng(self) -> random.Random:
        """The episode's random source; only exists once reset() has seeded it."""
        if self._rng is None:
            raise RuntimeError("call reset() first: it seeds the episode's random source")
        return self._rng

    @property
    def _canonical_actions(self) -> dict[str, str]:
        return {action.lower(): action for action in self.actions}

    def parse_actions(self, answer: str) -> list[str]:
        """Split an answer on `||`; known words become canonical, unknown ones stay as written (invalid).

        Empty pieces ("Up ||", "Up || || Down") are dropped: they carry no action to judge.
        """
        canonical = self._canonical_actions
        words = (piece.strip() for piece in answer.split("||"))
        return [canonical.get(word.lower(), word) for word in words if word]

    def reset(self, seed: int | None = None) -> str:
        if seed is None:
            seed = random.SystemRandom().randrange(2**32)
        self._rng = random.Random(seed)
        self.done = False
        self._reset()
        return self.render()

    def step(self, action: str) -> tuple[str, float, bool, dict]:
        if self._rng is None:
            raise RuntimeError("call reset() before step()")
        if self.done:
            raise RuntimeError("the episode is over; call reset() to start a new one")
        if action not in self.actions:
            # Invalid words leave the state alone; the caller decides the format penalty.
            info = {"success": False, "action_is_valid": False, "action_is_effective": False}
            info.update(self._extra_info())
            return self.render(), 0.0, False, info
        reward, self.done, info = self._step(action)
        info["action_is_valid"] = True
        info.update(self._extra_info())
        return self.render(), reward, self.done, info

    def _extra_info(self) -> dict:
        """Environment-specific info entries added to every step (e.g. FrozenLake's position)."""
        return {}

    @abstractmethod
    def _reset(self) -> None: ...

    @abstractmethod
    def _step(self, action: str) -> tuple[float, bool, dict]:
        """Apply a valid action: (reward, done, info with success and action_is_effective, and "went": the
        action that took effect where the environment changed it, as slippery ice does)."""

    @abstractmethod
    def render(self) -> str: ...

    @abstractmethod
    def oracle_action(self) -> str:
        """An optimal action from the current state (the SFT baseline's teacher)."""

    def oracle_plan(self, length: int, actions_after: int) -> list[str] | None:
        """The oracle's `length` actions for one turn, chosen from the current state alone, as a model must
        choose them (it sees the state once a turn and writes the turn's actions at once);
        `actions_after`: the episode's actions left after this turn. None where the dynamics are
        deterministic: there oracle_action after oracle_action, each on the state the last one made, is a
        plan the model can read off the turn's state."""
        return None

    @abstractmethod
    def optimal_success(self, max_actions: int | None = None) -> float:
        """Success of the optimal policy from the current initial state (called right after reset)."""
