"""Token-in/token-out rollouts with the tiny model: the loss mask covers exactly the model's tokens."""

import pytest
import torch

import envs
from trainer import rollout as R
from trainer.config import TrainConfig
from trainer.models import ModelLoadError, load_policy, one_line


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    return load_policy(TrainConfig().model, with_critic=False, with_reference=False)


def runs(mask: list[int]) -> list[tuple[int, int]]:
    out, start = [], None
    for i, m in enumerate(mask + [0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            out.append((start, i))
            start = None
    return out


def play(policy, chat, env_name, rollout_cfg, seeds, groups, context_len=None, keep_cache=True):
    """One rollout of the tiny policy, sampling at temperature 1."""
    return R.rollout(
        policy.model,
        policy.tokenizer,
        chat,
        env_name,
        {},
        seeds,
        groups,
        rollout_cfg,
        1.0,
        context_len or policy.context_len,
        keep_cache=keep_cache,
    )


def opening(chat, seed):
    """The first prompt of a FrozenLake episode."""
    env = envs.make("frozenlake")
    return R.opening_ids(chat, env, env.reset(seed=seed), TrainConfig().rollout)


def greedy(policy, chat, prompts, limits, conversation=None):
    """generate's replies at temperature 0."""
    tokenizer = policy.tokenizer
    return R.generate(
        policy.model,
        prompts,
        limits,
        tokenizer.pad_token_id,
        chat.stop_ids,
        tokenizer,
        0.0,
        1.0,
        conversation,
    )


def test_loss_mask_is_exactly_the_generated_tokens(policy, monkeypatch):
    produced: dict[int, list[list[int]]] = {}
    real_generate = R.generate

    def recording_generate(model, prompts, *args, **kwargs):
        replies = real_generate(model, prompts, *args, **kwargs)
        for p, reply in zip(prompts, replies):
            produced.setdefault(id(p), []).append(reply)
        return replies

    monkeypatch.setattr(R, "generate", recording_generate)
    cfg = TrainConfig.preset(
        "starpo", env={"name": "frozenlake"}, rollout={"max_turns": 3, "max_new_tokens": 40}
    )
    chat = R.ChatFormat(policy.tokenizer, True)
    torch.manual_seed(0)
    trajs = play(policy, chat, "frozenlake", cfg.rollout, [5, 5, 6, 6], [0, 0, 1, 1])
    multi_turn = 0
    for t in trajs:
        spans = runs(t.mask)
        assert len(spans) == len(t.turns)
        multi_turn += len(spans) > 1
        replies = [t.ids[a:b] for a, b in spans]
        # every masked-in run is one reply, exactly as sampled, and is preceded by the `<think>` opener
        all_produced = [r for rs in produced.values() for r in rs]
        assert all(reply in all_produced for reply in replies)
        for a, _ in spans:
            assert policy.tokenizer.decode(t.ids[:a]).endswith("<think>")
        masked_out = policy.tokenizer.decode([i for i, m in zip(t.ids, t.mask) if not m])
        assert "Turn 1:" in masked_out and f"Turn {len(t.turns)}:" in masked_out
        # the turn texts parsed from the decoded replies
        for reply, turn in zip(replies, t.turns):
            text = policy.tokenizer.decode(reply, skip_special_tokens=True)
            parsed = chat.parse(text)
            assert (parsed[1] if parsed else "") == turn["answer"]
            assert turn.get("reply") == (None if parsed else text)  # kept only when out of format
    assert multi_turn > 0


def test_parse_and_format_penalty():
    class Tok:
        def apply_chat_template(self, msgs, tokenize, add_generation_prompt):
            text = "".join(f"[{m['role']}]{m['content']}[end]" for m in msgs)
            return text + ("[assistant]" if add_generation_prompt else "")

        eos_token_id = None

        def convert_tokens_to_ids(self, t):
            return None

    chat = R.ChatFormat(Tok(), True)
    assert (chat.before_user, chat.after_user) == ("[end][user]", "[end][assistant]")
    assert chat.parse(" go left </think> <answer> Left || Up </answer>") == ("go left", "Left || Up")
    assert chat.parse(" go left <answer> Left </answer>") is None
    assert R.ChatFormat(Tok(), False).parse(" Left </answer>") == ("", "Left")


def test_context_overflow_ends_trajectory_with_penalty(policy):
    cfg = TrainConfig.preset(
        "starpo", env={"name": "sokoban"}, rollout={"max_turns": 5, "max_new_tokens": 40}
    )
    chat = R.ChatFormat(policy.tokenizer, True)
    env = envs.make("sokoban")
    prompt_len = len(chat.first_prompt(R.first_user_message(env, env.reset(seed=3), 5, 10, True)))
    torch.manual_seed(0)
    trajs = play(policy, chat, "sokoban", cfg.rollout, [3, 3], [0, 0], context_len=prompt_len + 5)
    for t in trajs:
        assert t.done and len(t.turns) == 1 and len(t.ids) <= prompt_len + 5
        assert t.reward <= cfg.rollout.format_penalty + 1e-9


def test_missing_model_dir_is_one_line_error():
    m = TrainConfig().model
    m.name = "/nonexistent/model/dir"
    with pytest.raises(ModelLoadError) as e:
        load_policy(m, with_critic=False, with_reference=False)
    assert "\n" not in str(e.value) and "does not exist" in str(e.value)


def test_identical_prompts_are_prefilled_once_and_continue_as_if_prefilled_alone(policy):
    chat = R.ChatFormat(policy.tokenizer, True)
    first = opening(chat, 1)
    second = first + chat.encode(" </think> <answer>")  # continues differently: with an action
    prefill_rows, logit_positions = [], set()
    hook = policy.model.register_forward_pre_hook(
        lambda module, args, kwargs: prefill_rows.append(kwargs["input_ids"].shape), with_kwargs=True
    )
    # a long conversation's logits at every position would outweigh the model: only the last is computed
    logits_hook = policy.model.register_forward_hook(
        lambda module, args, out: logit_positions.add(out.logits.shape[1])
    )
    try:
        together = greedy(policy, chat, [first, second, first, first, second], [12] * 5)
        assert prefill_rows[0] == (2, len(second))  # two distinct prompts, left padded to the longer
        alone = [greedy(policy, chat, [first], [12])[0], greedy(policy, chat, [second], [12])[0]]
    finally:
        hook.remove()
        logits_hook.remove()
    assert logit_positions == {1}
    assert together == [alone[0], alone[1], alone[0], alone[0], alone[1]]
    assert alone[0] != alone[1]


@pytest.mark.parametrize("env_name", ["frozenlake", "sokoban"])
def test_later_turns_from_the_cache_sample_what_prefilling_the_whole_conversation_samples(policy, env_name):
    cfg = TrainConfig.preset("starpo", env={"name": env_name}, rollout={"max_new_tokens": 40})
    chat = R.ChatFormat(policy.tokenizer, True)
    played = []
    for keep_cache in (True, False):
        torch.manual_seed(0)
        seeds, groups = [5, 5, 5, 6, 6, 7], [0, 0, 0, 1, 1, 2]
        trajs = play(policy, chat, env_name, cfg.rollout, seeds, groups, keep_cache=keep_cache)
        played.append([(t.ids, t.mask, t.reward) for t in trajs])
    assert played[0] == played[1]
    turns = [len(runs(mask)) for _, mask, _ in played[0]]
    assert max(turns) >= 3 and len(set(turns)) > 1  # later turns ran with some episodes already over


def test_a_row_that_stopped_early_continues_without_what_was_sampled_after_it_stopped(policy):
    chat = R.ChatFormat(policy.tokenizer, True)
    prompts = [opening(chat, 1), opening(chat, 2)]
    conversation = R.Conversation()
    replies = greedy(policy, chat, prompts, [3, 30], conversation)
    assert len(replies[0]) == 3 < len(replies[1])  # row 0's cache then holds tokens past its reply
    assert conversation.attention.sum(1).tolist() == [len(p) + len(r) for p, r in zip(prompts, replies)]
    following = chat.encode(" </think> <answer>")
    continued = greedy(policy, chat, [following, following[1:]], [20, 20], conversation)
    fresh = [
        greedy(policy, chat, [prompts[0] + replies[0] + following], [20])[0],
        greedy(policy, chat, [prompts[1] + replies[1] + following[1:]], [20])[0],
    ]
    assert continued == fresh


def test_a_cache_mostly_of_dead_slots_is_dropped_for_a_fresh_prefill():
    mostly_real = R.Conversation(attention=torch.tensor([[0, 0, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]]))
    mostly_dead = R.Conversation(attention=torch.tensor([[1, 0, 0, 0, 0, 1, 0], [1, 1, 0, 0, 0, 0, 0]]))
    assert not mostly_real.mostly_dead_slots() and mostly_dead.mostly_dead_slots()
    assert not R.Conversation().mostly_dead_slots()


def test_a_loader_error_keeps_its_whole_reason_on_one_line():
    # transformers explains over several lines; the first alone ended at "from one of:" on a run's page.
    error = ValueError(
        "Couldn't instantiate the backend tokenizer from one of: \n(1) a `tokenizers` library serialization "
        "file, \n(2) a slow tokenizer instance to convert or \n(3) an equivalent slow tokenizer class."
    )
    assert one_line(error) == (
        "Couldn't instantiate the backend tokenizer from one of: (1) a `tokenizers` library serialization "
        "file, (2) a slow tokenizer instance to convert or (3) an equivalent slow tokenizer class."
    )
    assert one_line(ValueError("x" * 1000)) == "x" * 599 + "…"
    assert one_line(ValueError()) == "ValueError"


def test_each_turn_says_where_the_ice_slid_an_action_and_the_sample_ends_with_the_last_board(policy):
    # The trajectory viewer showed "Left -> Left" over a board where the player slid down, and never the board
    # after the last turn. Replaying each episode's actions from its seed gives back what the turns recorded.
    cfg = TrainConfig.preset(
        "starpo", env={"name": "frozenlake"}, rollout={"max_turns": 3, "max_new_tokens": 40}
    )
    chat = R.ChatFormat(policy.tokenizer, True)
    torch.manual_seed(0)
    trajs = play(policy, chat, "frozenlake", cfg.rollout, [5, 5, 6, 6, 7, 7], [0, 0, 1, 1, 2, 2])
    executed = slid = 0
    for t in trajs:
        env = envs.make("frozenlake")
        board = env.reset(seed=t.seed)
        for turn in t.turns:
            assert turn["state"] == board
            went = []
            for action in turn["actions"]:
                board, _, done, info = env.step(action)
                went.append(info.get("went", action))
                executed += 1
                if done:
                    break
            slid += went != turn["actions"][: len(went)]
            assert turn.get("went", turn["actions"][: len(went)]) == went
            assert turn.get("played", len(turn["actions"])) == len(went)
            # the actions written past the turn's limit are kept aside, as the page says they were not read
            written = env.parse_actions(turn["answer"]) if "reply" not in turn else []
            assert turn.get("beyond_limit", []) == written[cfg.rollout.max_actions_per_turn :]
        assert t.sample(policy.tokenizer)["final_state"] == board
    assert executed > 0
    assert slid > 0  # slippery by default: some action slid, so "went" was recorded
