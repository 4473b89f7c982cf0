"""Hugging Face causal language models as deplodock programs, with no download.

A model is named by a hub id whose config the project ships (`frontend/configs/`, file name
= the id with `/` spelled `--`) or by a local directory holding `config.json` (and, for
`run`, `*.safetensors`). It is built from the config on the `meta` device, so compiling
needs neither weights nor memory, wrapped as `forward(input_ids) -> logits` (no KV cache)
and captured with `torch.export`.

Two substitutions, active only while exporting, keep the graph at the level deplodock
compiles:
- the architecture's RMSNorm modules (a pow/mean/rsqrt/mul chain in Hugging Face code)
  call `F.rms_norm`, so each is one `torch.rms_norm` op;
- attention is Hugging Face's SDPA path under the name `deplodock`, whose mask builder
  returns None: `forward(input_ids)` (no padding, no cache) means a plain causal mask, which
  SDPA's `is_causal` expresses, and the mask-building ops (cumsum, index, vmap) stay out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

CONFIG_DIR = Path(__file__).parent / "configs"

#: Architectures whose decoder layers capture to the supported op set.
SUPPORTED_MODEL_TYPES = ("llama", "qwen2", "qwen3")

#: RMSNorm classes computing `weight * x * rsqrt(mean(x^2) + eps)` (attribute `variance_epsilon`).
_RMS_NORMS = frozenset({"LlamaRMSNorm", "Qwen2RMSNorm", "Qwen3RMSNorm"})

#: `--dtype` spellings.
DTYPES: dict[str, torch.dtype] = {
    "fp32": torch.float32,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}

ATTENTION = "deplodock"

#: Module path of the decoder layers in every supported architecture (`model.layers.<i>`).
LAYER_PREFIX = "model.layers"


class ModelError(Exception):
    """A model that cannot be found, configured or built; the message is one line."""


# --- finding a model ---------------------------------------------------------------------------


def shipped_models() -> dict[str, Path]:
    """Hub id -> the config file the project ships for it."""
    return {p.stem.replace("--", "/"): p for p in sorted(CONFIG_DIR.glob("*.json"))}


@dataclass(frozen=True)
class ModelSource:
    """Where a model comes from: its name as given, its config dict, its directory if local."""

    name: str
    config: dict[str, Any]
    directory: Path | None = None

    @property
    def model_type(self) -> str:
        return str(self.config.get("model_type", ""))


def resolve_model(name: str) -> ModelSource:
    """The config of a shipped id or of a local directory; one-line errors otherwise."""
    path = Path(name)
    if path.is_dir():
        config_path = path / "config.json"
        if not config_path.is_file():
            raise ModelError(f"model directory {name} has no config.json")
        config = _read_json(config_path)
        source = ModelSource(name, config, path)
    elif name in (shipped := shipped_models()):
        source = ModelSource(name, _read_json(shipped[name]))
    else:
        raise ModelError(
            f"unknown model '{name}': not a local directory and not a shipped config "
            f"(shipped: {', '.join(shipped)}); models are never downloaded"
        )
    if source.model_type not in SUPPORTED_MODEL_TYPES:
        raise ModelError(
            f"model type '{source.model_type or '?'}' of {name} is not supported "
            f"(supported: {', '.join(SUPPORTED_MODEL_TYPES)})"
        )
    return source


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ModelError(f"cannot read {path}: {error}") from None
    if not isinstance(data, dict):
        raise ModelError(f"{path} is not a JSON object")
    return data


# --- building ------------------------------------------------------------------------------------


def make_config(source: ModelSource, layers: int | None = None) -> Any:
    """The transformers config of `source`, cut to its first `layers` decoder layers."""
    from transformers import AutoConfig

    values = dict(source.config)
    model_type = values.pop("model_type")
    _check_positive_sizes(source.name, values)
    total = int(values.get("num_hidden_layers", 0))
    if layers is not None:
        if not 1 <= layers <= total:
            raise ModelError(
                f"--layers {layers}: {source.name} has {total} layers (give 1 to {total})"
            )
        values["num_hidden_layers"] = layers
        if isinstance(values.get("layer_types"), list):
            values["layer_types"] = values["layer_types"][:layers]
    try:
        return AutoConfig.for_model(model_type, **values)
    except (TypeError, ValueError) as error:
        raise ModelError(f"bad config for {source.name}: {error}") from None


#: Config sizes transformers divides by or allocates from: zero or negative is a bad config.
POSITIVE_SIZES = (
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "num_hidden_layers",
    "vocab_size",
    "head_dim",
)


def _check_positive_sizes(name: str, values: dict[str, Any]) -> None:
    for key in POSITIVE_SIZES:
        value = values.get(key)
        if value is not None and (type(value) is not int or value <= 0):
            raise ModelError(f"bad config for {name}: {key} is {value!r} (need a positive integer)")


def build_causal_lm(
    config: Any, dtype: torch.dtype = torch.float32, device: str = "meta", seed: int = 0
) -> Any:
    """`AutoModelForCausalLM.from_config` on `device` (random init, seeded, off `meta`)."""
    from transformers import AutoModelForCausalLM

    register_attention()
    with torch.random.fork_rng(devices=[]), torch.device(device):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=dtype)
    return model.eval()


def register_attention() -> None:
    """Registers the `deplodock` attention implementation (SDPA, causal mask left to SDPA)."""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(ATTENTION, sdpa_attention_forward)
    AttentionMaskInterface.register(ATTENTION, _causal_mask_left_to_sdpa)


def _causal_mask_left_to_sdpa(
    batch_size: int,
    q_length: int,
    kv_length: int,
    q_offset: Any = 0,
    kv_offset: int = 0,
    attention_mask: torch.Tensor | None = None,
    local_size: int | None = None,
    **_: Any,
) -> None:
    """No mask tensor: SDPA applies `is_causal`, exact for a full prompt without padding."""
    if attention_mask is not None:
        raise ModelError("padding attention masks are not supported (pass input_ids only)")
    if not isinstance(q_offset, int) or q_offset or kv_offset or q_length != kv_length:
        raise ModelError("a KV cache is not supported: the model runs on the whole prompt")
    if local_size is not None and kv_length > local_size:
        raise ModelError(f"sliding-window attention with a window below {kv_length} tokens")


class _RMSNorm(nn.Module):
    """A Hugging Face RMSNorm as one `F.rms_norm` (same parameter, same name)."""

    def __init__(self, weight: nn.Parameter, eps: float):
        super().__init__()
        self.weight = weight
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


@contextmanager
def capture_ready(lm: nn.Module) -> Iterator[None]:
    """Swaps RMSNorms for `F.rms_norm` and selects the `deplodock` attention; restores both."""
    register_attention()
    swapped: list[tuple[nn.Module, str, nn.Module]] = []
    for parent in list(lm.modules()):
        for name, child in list(parent.named_children()):
            if type(child).__name__ in _RMS_NORMS:
                swapped.append((parent, name, child))
                setattr(parent, name, _RMSNorm(child.weight, float(child.variance_epsilon)))
    try:
        with attention_selected(lm, ATTENTION):
            yield
    finally:
        for parent, name, child in swapped:
            setattr(parent, name, child)


@contextmanager
def attention_selected(lm: nn.Module, implementation: str) -> Iterator[None]:
    """`lm` uses the registered attention `implementation` for the duration (restored after)."""
    previous = lm.config._attn_implementation
    lm.set_attn_implementation(implementation)
    try:
        yield
    finally:
        lm.set_attn_implementation(previous)


class CausalLMLogits(nn.Module):
    """`forward(input_ids) -> logits` of a Hugging Face causal LM, without a KV cache.

    The LM's children are registered as this module's children, so parameter names are the
    LM's own (`model.layers.0.self_attn.q_proj.weight`, `lm_head.weight`): the names in its
    safetensors and in the program's `deplodock.param` arguments.
    """

    def __init__(self, lm: nn.Module):
        super().__init__()
        for name, child in lm.named_children():
            self.add_module(name, child)
        object.__setattr__(self, "lm", lm)  # not a submodule: no `lm.` prefix on names

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.lm(input_ids=input_ids, use_cache=False, return_dict=False)[0]


def is_causal_lm(module: nn.Module) -> bool:
    """A transformers `PreTrainedModel` with a language-model head (without importing it)."""
    import sys

    transformers = sys.modules.get("transformers")
    if transformers is None or not isinstance(module, transformers.PreTrainedModel):
        return False
    return module.get_output_embeddings() is not None


def check_seq_len(source: ModelSource, config: Any, seq_len: int, flag: str = "--seq-len") -> None:
    """1 <= seq_len <= the model's `max_position_embeddings` (`flag`: the option it came in)."""
    limit = getattr(config, "max_position_embeddings", None)
    if seq_len < 1 or (limit is not None and seq_len > limit):
        raise ModelError(f"{flag} {seq_len}: {source.name} takes 1 to {limit} tokens")


def example_input_ids(vocab_size: int, seq_len: int, seed: int = 0) -> torch.Tensor:
    """Reproducible random token ids of shape (1, seq_len)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (1, seq_len), generator=generator, dtype=torch.int64)


def describe(
    source: ModelSource, config: Any, seq_len: int, dtype: torch.dtype, kv_len: int | None = None
) -> str:
    """`Qwen/Qwen2.5-7B (qwen2, 28 layers, hidden 3584, seq 128, fp32)`; a decode step says
    `decode over 1024 cached rows` instead of its sequence length."""
    dtype_name = next(k for k, v in DTYPES.items() if v == dtype)
    tokens = f"seq {seq_len}" if kv_len is None else f"decode over {kv_len} cached rows"
    return (
        f"{source.name} ({source.model_type}, {config.num_hidden_layers} layers, "
        f"hidden {config.hidden_size}, {tokens}, {dtype_name})"
    )


# --- running -------------------------------------------------------------------------------------


def randomize_weights(lm: nn.Module, seed: int = 0) -> nn.Module:
    """Non-trivial random parameters (buffers such as `inv_freq` keep their computed values).

    Matrices get `randn / sqrt(fan_in)` so activations stay O(1) and attention is far from
    uniform; vectors (norm weights, biases) `uniform(0.5, 1.5)`.
    """
    from deplodock.frontend.expression import randomize_parameters

    return randomize_parameters(lm, seed, buffers=False)


@contextmanager
def _quiet_transformers() -> Iterator[None]:
    """transformers' progress bars and warnings off for the duration (restored as they
    were): its load report runs to many lines, and what it would report (a missing tensor)
    `weights.check_complete` has already said in one."""
    from transformers.utils import logging

    was_enabled = logging.is_progress_bar_enabled()
    verbosity = logging.get_verbosity()
    logging.disable_progress_bar()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)
        if was_enabled:
            logging.enable_progress_bar()


def reference_model(source: ModelSource, config: Any, seed: int = 0) -> Any:
    """The transformers model `run` compares with, in float32 on the CPU (standard SDPA).

    A directory with safetensors loads through `from_pretrained` (transformers' own loader,
    independent of `weights.bind_arguments`); otherwise the weights are random (seeded).
    """
    from transformers import AutoModelForCausalLM

    from deplodock.frontend.weights import check_complete, check_shapes, safetensors_files

    if source.directory is not None and safetensors_files(source.directory):
        meta = build_causal_lm(config, torch.float32, device="meta")
        expected = {k: v.shape for k, v in meta.state_dict().items()}
        check_shapes(source.directory, expected)
        check_complete(source.directory, expected, tied_names(meta))
        with _quiet_transformers():  # no progress bars on the tool's stderr
            model = AutoModelForCausalLM.from_pretrained(
                source.directory, config=config, attn_implementation="sdpa", dtype=torch.float32
            )
        return model.eval()
    return randomize_weights(build_causal_lm(config, torch.float32, device="cpu"), seed)


def tied_names(lm: nn.Module) -> list[list[str]]:
    """The names of each parameter known under several (tied: `lm_head.weight` and
    `model.embed_tokens.weight`), which a checkpoint stores once."""
    names: dict[int, list[str]] = {}
    for name, param in lm.named_parameters(remove_duplicate=False):
        names.setdefault(id(param), []).append(name)
    return [group for group in names.values() if len(group) > 1]


def checkpoint_weights(source: ModelSource, reference: nn.Module) -> dict[str, torch.Tensor]:
    """The weights `run` binds: the directory's safetensors, else the reference's parameters.

    Tied parameters are one tensor under several names (`lm_head.weight` and
    `model.embed_tokens.weight`); a checkpoint stores one of them and `torch.export` may
    name the argument after another, so every alias of a stored tensor is added.
    """
    from deplodock.frontend.weights import load_safetensors, safetensors_files

    if source.directory is not None and safetensors_files(source.directory):
        weights = load_safetensors(source.directory)
    else:
        weights = {name: p.detach() for name, p in reference.named_parameters()}
    for names in tied_names(reference):
        stored = next((weights[n] for n in names if n in weights), None)
        for name in names:
            if stored is not None:
                weights.setdefault(name, stored)
    return weights


def reference_logits(reference: nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    """The transformers forward in float64 (the model is converted back afterwards)."""
    reference.double()
    try:
        with torch.no_grad():
            out = reference(input_ids=input_ids, use_cache=False, return_dict=True)
        return out.logits.detach()
    finally:
        reference.float()
