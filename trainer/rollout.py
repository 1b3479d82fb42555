"""Rollout: all P x N environments advance together, one batched generation per turn.

Token-in/token-out: a trajectory is the exact token ids of the conversation, with the model's sampled
tokens kept as sampled; `mask` is 1 on those tokens and 0 on everything else (template, observations,
the `<think>` opener we write ourselves).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

import envs
from trainer.config import RolloutConfig
from trainer.prefix import accepts, cache_keyword, cache_of, full_attention

SYSTEM = "You are a helpful assistant. You play text games: think step by step, then answer with actions."
THINK_FORMAT = (
    "Always answer in the format <think> [your thoughts] </think> <answer> [your answer] </answer> "
    "with nothing else."
)
ANSWER_FORMAT = "Always answer in the format <answer> [your answer] </answer> with nothing else."
THINK_RE = re.compile(r"<think>(.*?)</think>\s*<answer>(.*?)</answer>", re.S)
ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.S)
_REPLY_MARK, _USER_MARK = "@@REPLY@@", "@@USER@@"


def first_user_message(env, obs: str, max_per_turn: int, max_per_episode: int, thinking: bool) -> str:
    symbols = "".join(f"\n{s}: {meaning}" for s, meaning in env.symbols.items())
    return (
        f"{env.instruction}\n"
        + (f"Symbols:{symbols}\n" if symbols else "")
        + f"Available actions: {', '.join(env.actions)}.\n"
        f"You can take up to {max_per_turn} actions per turn, separated by ' || ', "
        f"and up to {max_per_episode} actions in total.\n"
        f"Turn 1:\nState:\n{obs}\n{THINK_FORMAT if thinking else ANSWER_FORMAT}"
    )


def next_user_message(reward: float, turn: int, obs: str, thinking: bool) -> str:
    return f"Reward: {round(reward, 3)}\nTurn {turn}:\nState:\n{obs}\n{THINK_FORMAT if thinking else ANSWER_FORMAT}"


class ChatFormat:
    """Chat messages -> token ids through the tokenizer's chat template, one turn at a time."""

    def __init__(self, tokenizer, thinking: bool = True):
        self.tokenizer, self.thinking = tokenizer, thinking
        self.opener = "<think>" if thinking else "<answer>"
        probe = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": _REPLY_MARK},
            {"role": "user", "content": _USER_MARK},
        ]
        full = tokenizer.apply_chat_template(probe, tokenize=False, add_generation_prompt=True)
        after = full[full.index(_REPLY_MARK) + len(_REPLY_MARK) :]
        self.before_user, self.after_user = after.split(_USER_MARK)
        self.stop_ids = stop_token_ids(tokenizer)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def first_prompt(self, user: str) -> list[int]:
        msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
        text = self.tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        return self.encode(text + self.opener)

    def next_prompt(self, user: str, reply_ids: list[int]) -> list[int]:
        """Tokens that follow the model's reply: end of its turn, the next user turn, the opener."""
        text = self.before_user + user + self.after_user + self.opener
        if reply_ids and reply_ids[-1] in self.stop_ids:  # the model already closed its turn itself
            closing = self.tokenizer.decode([reply_ids[-1]])
            if text.startswith(closing):
                text = text[len(closing) :]
        return self.encode(text)

    def parse(self, reply_text: str) -> tuple[str, str] | None:
        """(think, answer) of `opener + reply`, or None when the reply is not well formatted."""
        text = self.opener + reply_text
        if self.thinking:
            match = THINK_RE.search(text)
            return (match.group(1).strip(), match.group(2).strip()) if match else None
        match = ANSWER_RE.search(text)
        return ("", match.group(1).strip()) if match else None


def stop_token_ids(tokenizer) -> set[int]:
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    for token in ("<|im_end|>", "<|endoftext|>", "<|eot_id|>"):
        token_id = tokenizer.convert_tokens_to_ids(token)
        if isinstance(token_id, int) and token_id != tokenizer.unk_token_id:
            ids.add(token_id)
    return ids


@dataclass
class Trajectory:
    group: int
    seed: int
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    reward: float = 0.0  # env rewards + format penalties
    success: bool = False
    turns: list[dict] = field(default_factory=list)
    final_state: str = ""  # the board after the last turn (each turn holds the board it was played on)
    done: bool = False
    actions: int = 0  # actions written (after the per-turn cut)
    executed: int = 0  # actions run in the environment (episode budget)
    valid_actions: int = 0
    format_ok: int = 0  # turns whose reply parsed
    think_tokens: int = 0

    @property
    def response_tokens(self) -> int:
        return sum(self.mask)

    def sample(self, tokenizer) -> dict:
        return {
            "group": self.group,
            "seed": self.seed,
            "reward": self.reward,
            "success": self.success,
            "turns": self.turns,
            "final_state": self.final_state,
            "text": tokenizer.decode(self.ids),
        }


@dataclass
class Conversation:
    """A batch's conversations on the model's side, kept from one turn to the next: the KV cache of every
    token so far, and the attention mask over it (0 on padding and on tokens sampled after a row stopped).
    A later turn then runs only its new tokens instead of the whole conversation again."""

    cache: Any = None
    attention: torch.Tensor | None = None

    def keep(self, rows: list[int]) -> None:
        """Only these rows go on (the others' episodes ended)."""
        if self.attention is not None and rows != list(range(self.attention.shape[0])):
            self.cache.reorder_cache(torch.tensor(rows, device=self.attention.device))
            self.attention = self.attention[rows]

    def mostly_dead_slots(self) -> bool:
        """Whether padding and tokens sampled after rows stopped fill over a third of the cache. Every turn
        adds the longest new prompt and the longest reply to every row, so a row that keeps stopping early
        carries a growing tail of masked slots; then prefilling the real conversations costs less."""
        return self.attention is not None and self.attention.shape[1] > 1.5 * int(self.attention.sum(1).max())


@torch.no_grad()
def generate(
    model,
    prompts: list[list[int]],
    limits: list[int],
    pad_id: int,
    stop_ids: set[int],
    tokenizer,
    temperature: float,
    top_p: float,
    conversation: Conversation | None = None,
) -> list[list[int]]:
    """Sample up to limits[i] tokens for each prompt (left padded, KV cache); stop at `</answer>` or EOS.

    With a `conversation` that holds a cache, each prompt is the row's new tokens since its last reply
    and is run on top of that cache; the conversation is left holding this turn's cache for the next.
    Identical prompts are prefilled once: a group's N episodes open with the same prompt, so the first
    turn's prefill runs on P rows instead of P x N, and the cache is then copied out to every row."""
    device = next(model.parameters()).device
    if conversation is not None and conversation.cache is not None:
        past, logits, attention = extend(model, conversation, prompts, pad_id)
    else:
        past, logits, attention = prefill(model, prompts, pad_id, device)
    kept = [attention]  # what a later turn attends to: not the tokens sampled after a row stopped
    B = len(prompts)
    generated: list[list[int]] = [[] for _ in range(B)]
    finished = [limit <= 0 for limit in limits]
    for _ in range(max(limits, default=0)):
        if all(finished):
            break
        next_ids = sample_token(logits.float(), temperature, top_p).tolist()
        kept.append(torch.tensor([[not f] for f in finished], dtype=attention.dtype, device=device))
        for i, t in enumerate(next_ids):
            if finished[i]:
                continue
            generated[i].append(t)
            tail = tokenizer.decode(generated[i][-6:])
            finished[i] = t in stop_ids or "</answer>" in tail or len(generated[i]) >= limits[i]
        step_ids = torch.tensor(next_ids, device=device).unsqueeze(1)  # finished rows keep going, ignored
        attention = torch.cat([attention, attention.new_ones((B, 1))], dim=1)
        past, logits = last_logits(model, step_ids, attention, past)
    if conversation is not None:
        conversation.cache, conversation.attention = past, torch.cat(kept, dim=1)
    return generated


def prefill(model, prompts: list[list[int]], pad_id: int, device) -> tuple[Any, torch.Tensor, torch.Tensor]:
    """(cache, last logits, attention mask) of the left-padded prompts, each distinct prompt run once."""
    distinct: dict[tuple[int, ...], int] = {}
    row_of = torch.tensor([distinct.setdefault(tuple(p), len(distinct)) for p in prompts], device=device)
    input_ids, attention = left_padded(list(distinct), pad_id, device)
    past, logits = last_logits(model, input_ids, attention)
    if len(distinct) < len(prompts):
        past.reorder_cache(row_of)
        logits, attention = logits[row_of], attention[row_of]
    return past, logits, attention


def extend(
    model, conversation: Conversation, prompts: list[list[int]], pad_id: int
) -> tuple[Any, torch.Tensor, torch.Tensor]:
    """(cache, last logits, attention mask) of the conversation continued by each row's new tokens."""
    assert conversation.attention is not None
    input_ids, new = left_padded(prompts, pad_id, conversation.attention.device)
    attention = torch.cat([conversation.attention, new], dim=1)
    past, logits = last_logits(model, input_ids, attention, conversation.cache)
    return past, logits, attention


def left_padded(rows: Sequence[Sequence[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    T = max(len(row) for row in rows)
    ids = torch.full((len(rows), T), pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), T), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, T - len(row) :] = torch.tensor(list(row))
        attention[i, T - len(row) :] = 1
    return ids.to(device), attention.to(device)


def last_logits(model, input_ids, attention, cache=None) -> tuple[Any, torch.Tensor]:
    """One forward of input_ids, the last columns of `attention`, on top of `cache` (None: from the start),
    with the KV cache on: (the cache, the last position's logits). Positions count a row's attended tokens
    only, so padding and tokens masked out after a row stopped take none."""
    positions = (attention.cumsum(-1) - 1).clamp(min=0)[:, -input_ids.shape[1] :]
    # The last position's logits only, where the model allows: all of them, for a long conversation and a
    # 150k vocabulary, would take more memory than the model (128 rows x 2,000 tokens x 151,936 in bf16: 78 GB).
    last_only = {"logits_to_keep": 1} if accepts(model, "logits_to_keep") else {}
    with_cache = {cache_keyword(model): cache} if cache is not None else {}
    out = model(
        input_ids=input_ids,
        attention_mask=attention,
        position_ids=positions,
        use_cache=True,
        **last_only,
        **with_cache,
    )
    return cache_of(out), out.logits[:, -1, :]


def sample_token(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    if temperature == 0:
        return logits.argmax(-1)
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        drop = sorted_p.cumsum(-1) - sorted_p > top_p  # keep the smallest prefix reaching top_p
        sorted_p = sorted_p.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
    # sampled on the logits' device: a GPU's rows x vocabulary would otherwise cross to the host every token
    return torch.multinomial(probs, 1).squeeze(-1)


def opening_ids(chat: ChatFormat, env, obs: str, rollout_cfg: RolloutConfig) -> list[int]:
    """An episode's first prompt as token ids: the chat template around the environment's first message."""
    return chat.first_prompt(
        first_user_message(
            env,
            obs,
            rollout_cfg.max_actions_per_turn,
            rollout_cfg.max_actions_per_episode,
            rollout_cfg.thinking,
        )
    )


def rollout(
    model,
    tokenizer,
    chat: ChatFormat,
    env_name: str,
    env_params: dict,
    seeds: list[int],
    groups: list[int],
    rollout_cfg: RolloutConfig,
    temperature: float,
    context_len: int,
    keep_cache: bool = True,
) -> list[Trajectory]:
    """Play one episode per seed, all environments together. Each turn continues from the KV cache of the
    conversation so far, for models whose layers all attend to the whole sequence (a sliding window or a
    recurrent state would count the masked slots); keep_cache=False prefills every turn's whole
    conversation instead (the same tokens up to float rounding; bench/rollout_turns.py compares them)."""
    envs_ = [envs.make(env_name, **env_params) for _ in seeds]
    trajs = [Trajectory(group=group, seed=seed) for group, seed in zip(groups, seeds)]
    states = []
    for env, traj in zip(envs_, trajs):
        obs = env.reset(seed=traj.seed)
        states.append(obs)
        traj.ids = opening_ids(chat, env, obs, rollout_cfg)
        traj.mask = [0] * len(traj.ids)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    keep_cache = keep_cache and full_attention(model)
    conversation = Conversation()
    in_cache: list[int] = []  # the trajectory of each cached row
    new_tokens = [traj.ids for traj in trajs]  # what each conversation has that the cache does not
    for turn in range(1, rollout_cfg.max_turns + 1):
        active = [i for i, traj in enumerate(trajs) if not traj.done]
        if not active:
            break
        if in_cache:
            conversation.keep([in_cache.index(i) for i in active])
        if conversation.mostly_dead_slots():
            conversation = Conversation()
        in_cache = active
        limits = [min(rollout_cfg.max_new_tokens, context_len - len(trajs[i].ids)) for i in active]
        replies = generate(
            model,
            [new_tokens[i] if conversation.cache is not None else trajs[i].ids for i in active],
            limits,
            pad_id,
            chat.stop_ids,
            tokenizer,
            temperature,
            rollout_cfg.top_p,
            conversation if keep_cache else None,
        )
        for i, limit, reply in zip(active, limits, replies):
            traj, env, state = trajs[i], envs_[i], states[i]
            traj.ids += reply
            traj.mask += [1] * len(reply)
            text = tokenizer.decode(reply, skip_special_tokens=True)
            parsed = chat.parse(text)
            overflow = (
                limit < rollout_cfg.max_new_tokens and parsed is None
            )  # the reply ran into the context end
            think, answer = parsed if parsed else ("", "")
            written = env.parse_actions(answer) if parsed else []
            words = written[: rollout_cfg.max_actions_per_turn]
            valid = [word for word in words if word in env.actions]
            turn_ok = parsed is not None and len(valid) > 0 and len(valid) == len(words)
            traj.format_ok += parsed is not None
            traj.actions += len(words)
            traj.valid_actions += len(valid)
            traj.think_tokens += len(chat.encode(think)) if think else 0
            turn_reward, done, went = 0.0, False, []
            for action in valid:
                if traj.executed >= rollout_cfg.max_actions_per_episode:
                    break
                states[i], action_reward, done, info = env.step(action)
                went.append(info.get("went", action))
                traj.executed += 1
                turn_reward += action_reward
                traj.success = traj.success or bool(info.get("success", False))
                if done:
                    break
            env_reward = turn_reward
            turn_reward += 0.0 if turn_ok else rollout_cfg.format_penalty
            traj.reward += turn_reward
            traj.turns.append(
                {
                    "state": state,
                    "think": think,
                    "answer": answer,
                    # A reply out of format has no think or answer: the page shows the text itself.
                    **({} if parsed else {"reply": text}),
                    "actions": valid,
                    # what took effect, where the environment changed an action (slippery ice), and how
                    # many were played, where the episode ended before the last
                    **({"went": went} if went != valid[: len(went)] else {}),
                    **({"played": len(went)} if len(went) < len(valid) else {}),
                    # and the actions written beyond the turn's limit, which were not read
                    **({"beyond_limit": written[len(words) :]} if len(written) > len(words) else {}),
                    "reward": turn_reward,
                    "valid": turn_ok,
                }
            )
            traj.final_state = states[i]
            traj.done = (
                done
                or overflow
                or turn == rollout_cfg.max_turns
                or traj.executed >= rollout_cfg.max_actions_per_episode
            )
            if not traj.done:  # the model is told the environment's reward only, as in RAGEN (no penalty)
                following = chat.next_prompt(
                    next_user_message(env_reward, turn + 1, states[i], rollout_cfg.thinking), reply
                )
                if (
                    len(traj.ids) + len(following) >= context_len
                ):  # no room for another reply: end here, penalised
                    traj.reward += rollout_cfg.format_penalty
                    traj.done = True
                else:
                    traj.ids += following
                    traj.mask += [0] * len(following)
                    new_tokens[i] = following
    return trajs
