"""The embedded tiny model: a byte-level BPE tokenizer and a ~1M-parameter Qwen2, built locally.

Warm-started with a short supervised pass on well-formatted replies holding random valid actions, over
real environment prompts, so replies mostly parse but the games are not solved. Downloads nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

import torch

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
FORMAT_TOKENS = ["<think>", "</think>", "<answer>", "</answer>", "||"]
THOUGHTS = [
    "i",
    "should",
    "move",
    "towards",
    "the",
    "goal",
    ".",
    "the",
    "box",
    "is",
    "near",
    ",",
    "so",
    "go",
    "there",
    "first",
    ".",
    "avoid",
    "the",
    "hole",
    "and",
    "walk",
    "around",
    "it",
    ".",
    "this",
    "arm",
    "looks",
    "risky",
    "but",
    "may",
    "pay",
    "more",
    ".",
    "let",
    "me",
    "try",
    "this",
    "way",
    ".",
    "i",
    "think",
    "that",
    "is",
    "safe",
    ".",
    "the",
    "target",
    "is",
    "up",
    "and",
    "left",
    ".",
    "push",
    "it",
    "right",
]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def default_dir() -> str:
    if os.environ.get("MODEL_ROOT"):
        return os.path.join(os.environ["MODEL_ROOT"], "tiny")
    repo = Path(__file__).resolve().parent.parent
    return os.path.join(os.environ.get("ECHOLAB_VAR", str(repo / "var")), "models", "tiny")


def ensure(path: str | None = None, log=print) -> str:
    """The tiny model's directory, built on first use. One build at a time: a caller that finds one under
    way (`./echolab run` builds it in the background while a worker is asked to train, or parallel test
    processes) waits for it."""
    path = path or default_dir()
    if not _built(path):
        with build_lock(path):
            if not _built(path):
                build(path, log=log)
    return path


@contextlib.contextmanager
def build_lock(path: str):
    """Held while the model at `path` is built (ensure, `python -m trainer build-tiny`): a second build
    waits for the first rather than replacing the folder under it."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(f"{os.path.abspath(path)}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process dies
        yield


def _built(path: str) -> bool:
    return os.path.exists(os.path.join(path, "config.json"))


def _reply(rng: random.Random, actions: list[str], max_actions: int, thinking: bool) -> str:
    acts = " || ".join(rng.choice(actions) for _ in range(rng.randint(1, max_actions)))
    if not thinking:
        return f" {acts} </answer>"
    think = " ".join(rng.choice(THOUGHTS) for _ in range(rng.randint(3, 10)))
    return f" {think} </think> <answer> {acts} </answer>"


def _dialogues(count: int, rng: random.Random) -> list[list[tuple[str, str, bool]]]:
    """`count` random dialogues over all environments: [(user message, reply, thinking), ...] per dialogue."""
    import envs
    from trainer.rollout import first_user_message, next_user_message

    names = sorted(envs.registry())  # every registered variant: their words must be in the vocabulary
    out = []
    for index in range(count):
        env = envs.make(names[index % len(names)])
        thinking = rng.random() < 0.85
        obs = env.reset(seed=rng.randrange(10**9))
        per_turn = rng.choice([1, 2, 3, 5])
        user = first_user_message(env, obs, per_turn, 10, thinking)
        dialogue = []
        for turn in range(1, rng.choice([1, 1, 2, 3]) + 1):
            reply = _reply(rng, env.actions, min(per_turn, 3), thinking)
            dialogue.append((user, reply, thinking))
            reward, done = 0.0, False
            for action in env.parse_actions(reply.split("<answer>")[-1].replace("</answer>", "")):
                obs, action_reward, done, _ = env.step(action)
                reward += action_reward
                if done:
                    break
            if done:
                break
            user = next_user_message(reward, turn + 1, obs, thinking)
        out.append(dialogue)
    return out


def build_tokenizer(texts: list[str], vocab_size: int = 1024):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(texts, trainer=trainer)
    bpe.add_tokens([AddedToken(t, normalized=False) for t in FORMAT_TOKENS])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token=None
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build(
    out_dir: str, steps: int = 150, seed: int = 0, dialogues: int = 1200, batch: int = 8, log=print
) -> dict:
    """Build tokenizer + model, warm-start for `steps` batches, save_pretrained to out_dir (atomically)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from trainer.rollout import SYSTEM, ChatFormat

    t0 = time.time()
    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)  # a destination that cannot be made fails now, not after training
    rng = random.Random(seed)
    torch.manual_seed(seed)
    data = _dialogues(dialogues, rng)
    texts = [SYSTEM] + [user + reply for dialogue in data for user, reply, _ in dialogue] + [CHAT_TEMPLATE]
    tokenizer = build_tokenizer(texts)
    chats = {True: ChatFormat(tokenizer, True), False: ChatFormat(tokenizer, False)}
    examples = []  # (ids, mask): the rollout's own token layout, loss on the replies only
    for dialogue in data:
        first_user, _, thinking = dialogue[0]
        chat = chats[thinking]
        ids = chat.first_prompt(first_user)
        mask = [0] * len(ids)
        for turn, (user, reply, _) in enumerate(dialogue):
            if turn:
                following = chat.next_prompt(user, ids)
                ids, mask = ids + following, mask + [0] * len(following)
            reply_ids = chat.encode(reply)
            ids, mask = ids + reply_ids, mask + [1] * len(reply_ids)
        examples.append((ids, mask))
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=384,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    model.train()
    loss = torch.tensor(float("nan"))
    for step in range(steps):
        rows = [examples[rng.randrange(len(examples))] for _ in range(batch)]
        T = max(len(ids) for ids, _ in rows)
        input_ids = torch.full((batch, T), tokenizer.pad_token_id)
        labels = torch.full((batch, T), -100)
        attention = torch.zeros((batch, T), dtype=torch.long)
        for i, (ids, mask) in enumerate(rows):
            input_ids[i, : len(ids)] = torch.tensor(ids)
            attention[i, : len(ids)] = 1
            labels[i, : len(ids)] = torch.where(torch.tensor(mask) == 1, torch.tensor(ids), -100)
        for param_group in optimizer.param_groups:
            param_group["lr"] = 3e-3 * min(1.0, (step + 1) / 20)
        loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if log and (step % 50 == 0 or step == steps - 1):
            log(f"tiny model warm-start {step + 1}/{steps}: loss {loss.item():.3f}")
    model.eval()
    loss = loss.detach()
    tmp = tempfile.mkdtemp(prefix=".tiny-", dir=parent)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    os.replace(tmp, out_dir)
    stats = {
        "params": sum(p.numel() for p in model.parameters()),
        "vocab": len(tokenizer),
        "final_loss": round(loss.item(), 4),
        "seconds": round(time.time() - t0, 1),
    }
    if log:
        log(f"tiny model saved to {out_dir}: {stats}")
    return stats
