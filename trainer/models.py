"""Load the policy (any causal LM, full fine-tuning or LoRA), its reference and the critic.

Precision: on CUDA with dtype bfloat16 the trainable weights stay float32 (updates of lr 1e-6 vanish in
bf16) and forwards run under bf16 autocast; frozen weights (LoRA base, reference copy) are bf16.
"""

from __future__ import annotations

import contextlib
import copy
import os
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

from trainer import prefix
from trainer.config import TINY_MODEL, ModelConfig

if TYPE_CHECKING:  # transformers is imported lazily at run time: it takes seconds
    from transformers import PreTrainedTokenizerBase

# ChatML, used when a tokenizer has no chat template of its own (documented in docs/TRAINER.md).
DEFAULT_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class ModelLoadError(RuntimeError):
    """A model that cannot be loaded; the message is one line."""


def resolve(name: str) -> tuple[str, bool]:
    """(path or hub id, is_local_dir). "tiny" is built on first use."""
    if name == TINY_MODEL:
        from trainer import tiny_model

        return tiny_model.ensure(), True
    if name.startswith((".", "/", "~")) or os.path.exists(name):
        path = os.path.expanduser(name)
        if not os.path.isdir(path):
            raise ModelLoadError(f"model directory {path!r} does not exist")
        return path, True
    return name, False


def pick_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def pick_dtype(name: str, device: torch.device) -> torch.dtype:
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return getattr(torch, name)


def one_line(error: Exception, limit: int = 600) -> str:
    """An error's whole message on one line (transformers' loaders explain over several lines; the first
    alone ends at "from one of:"), cut at `limit` characters."""
    text = " ".join(line.strip() for line in str(error).splitlines() if line.strip()) or type(error).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def load_tokenizer(path: str, local: bool):
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(path, local_files_only=local)
    except Exception as e:  # noqa: BLE001 - any loader failure becomes one line for the user
        raise ModelLoadError(f"cannot load tokenizer of {path!r}: {one_line(e)}") from None
    if not tok.chat_template:
        warnings.warn(
            f"tokenizer of {path!r} has no chat template; using the default ChatML template", stacklevel=2
        )
        tok.chat_template = DEFAULT_CHAT_TEMPLATE
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def load_causal_lm(path: str, local: bool, dtype: torch.dtype, device: torch.device):
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, local_files_only=local)
    except Exception as e:  # noqa: BLE001
        raise ModelLoadError(f"cannot load model {path!r}: {one_line(e)}") from None
    # transformers types .to() through a decorator that claims the model as its first argument
    return model.to(device)  # type: ignore[arg-type]


class Critic(nn.Module):
    """V(prefix): a value head (Linear on the last hidden state) on its own copy of the backbone."""

    def __init__(self, backbone: nn.Module, hidden_size: int):
        super().__init__()
        self.backbone = backbone
        self.value_head = nn.Linear(hidden_size, 1, dtype=torch.float32)
        nn.init.normal_(self.value_head.weight, std=0.01)
        nn.init.zeros_(self.value_head.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = prefix.forward(self.backbone, input_ids, attention_mask, lambda out: out.last_hidden_state)
        return self.value_head(hidden.float()).squeeze(-1)


@dataclass
class Policy:
    model: nn.Module
    tokenizer: PreTrainedTokenizerBase
    critic: Critic | None
    ref_model: nn.Module | None  # full fine-tuning with KL on; LoRA uses the disabled adapter instead
    lora: bool
    device: torch.device
    compute_dtype: torch.dtype
    context_len: int
    base_path: str

    def autocast(self):
        if self.compute_dtype == torch.float32:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.compute_dtype)

    @contextlib.contextmanager
    def reference(self):
        """The reference policy as a module: the base model (adapter disabled) or the frozen copy."""
        if self.lora:
            # nn.Module.__getattr__ is typed Tensor | Module; this is PeftModel.disable_adapter
            with self.model.disable_adapter():  # type: ignore[operator]
                yield self.model
        else:
            yield self.ref_model


def load_policy(
    model_cfg: ModelConfig, with_critic: bool, with_reference: bool, init_dir: str | None = None
) -> Policy:
    """Build policy (+critic, +reference). init_dir: a checkpoint's policy/critic to start from."""
    path, local = resolve(
        model_cfg.warm_start or model_cfg.name
    )  # a warm start keeps model.name's profile, not its weights
    device = pick_device()
    dtype = pick_dtype(model_cfg.dtype, device)
    lora = model_cfg.lora_rank > 0
    tokenizer = load_tokenizer(path, local)
    base = load_causal_lm(path, local, dtype if lora else torch.float32, device)
    ref_model = None
    if with_reference and not lora:
        ref_model = copy.deepcopy(base).to(dtype).eval().requires_grad_(False)
    critic = None
    if with_critic:
        critic = Critic(copy.deepcopy(base.base_model), base.config.hidden_size).to(device)
        if lora:
            from peft import LoraConfig, get_peft_model

            critic.backbone = get_peft_model(
                critic.backbone,
                LoraConfig(
                    r=model_cfg.lora_rank,
                    lora_alpha=model_cfg.lora_alpha,
                    lora_dropout=model_cfg.lora_dropout,
                    target_modules=model_cfg.lora_target_modules,
                    task_type="FEATURE_EXTRACTION",
                ),
            )
        if model_cfg.gradient_checkpointing:
            # nn.Module.__getattr__ is typed Tensor | Module; this is the transformers model's method
            critic.backbone.activation_checkpointing_enable()  # type: ignore[operator]
        if init_dir:
            state = torch.load(os.path.join(init_dir, "critic.pt"), map_location=device)
            critic.load_state_dict(state, strict=False)
    if init_dir and not lora:
        base = load_causal_lm(os.path.join(init_dir, "policy"), True, torch.float32, device)
    if lora:
        from peft import LoraConfig, PeftModel, get_peft_model

        if init_dir:
            model = PeftModel.from_pretrained(base, os.path.join(init_dir, "policy"), is_trainable=True)
        else:
            model = get_peft_model(
                base,
                LoraConfig(
                    r=model_cfg.lora_rank,
                    lora_alpha=model_cfg.lora_alpha,
                    lora_dropout=model_cfg.lora_dropout,
                    target_modules=model_cfg.lora_target_modules,
                    task_type="CAUSAL_LM",
                ),
            )
    else:
        model = base
    if model_cfg.gradient_checkpointing:
        model.activation_checkpointing_enable()  # transformers 5: gradient_checkpointing_enable is its old name
        if lora:
            model.enable_input_require_grads()
    context_len = int(getattr(base.config, "max_position_embeddings", 2048) or 2048)
    return Policy(
        model=model,
        tokenizer=tokenizer,
        critic=critic,
        ref_model=ref_model,
        lora=lora,
        device=device,
        compute_dtype=dtype,
        context_len=context_len,
        base_path=path,
    )


def trainable_state(module: nn.Module) -> dict[str, torch.Tensor]:
    names = {name for name, param in module.named_parameters() if param.requires_grad}
    return {name: tensor.detach().cpu() for name, tensor in module.state_dict().items() if name in names}
