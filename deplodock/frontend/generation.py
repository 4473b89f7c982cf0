"""A Hugging Face causal LM as one step of generation over a static KV cache.

`models.CausalLMLogits` runs a model on a whole prompt, without a cache: one compile per
length, and every new token would recompute the prompt. Generation needs a program that
takes the tokens of this step, *where* they go (`position`, the number of tokens already
in the cache) and the cache, and returns the logits and the cache with this step's keys and
values written in. `KvCacheStep` is that program, in PyTorch, built on the model's own
decoder layers (so Qwen3's q/k norms, biases, GQA and RoPE are the model's code, not a
copy):

    forward(input_ids[1, T], position[1], k_0, v_0, ..., k_{L-1}, v_{L-1})
        -> (logits[1, T, vocab], k_0', v_0', ...)           # each cache [1, kv_heads, max_len, d]

The same program serves every position: `position` is data (an int64 tensor), not a
constant, so the shapes, and therefore the compiled kernels, depend only on `T` and on the
cache's capacity `max_len` (docs/generation.md, "what is static and what is not"). Inside
each layer, during capture only:

- the cache is `_CacheWriter`: its `update` writes the step's keys and values at rows
  `position .. position + T - 1` (a `where` over the cache's rows, each row taking the new
  row `row - position` when it is one of this step's) and returns the whole cache;
- attention is the `deplodock-kv` implementation: SDPA over the whole cache with the
  mask `key <= position + query` (causal within the step, and blind to the rows past the
  step, which hold stale or no tokens yet). It is computed from `position` inside the
  layer, so loop fusion folds it into the attention kernel and no query x key buffer exists.

With `T = 1` this is the decode step; with `T` = a prompt bucket and `position = 0`, the
prefill (a prompt padded at its end is harmless: causal attention keeps the pad from the
real tokens, and the pad's cache rows are overwritten by the next steps before any query
can see them).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from deplodock.frontend import models

#: The attention implementation a `KvCacheStep` selects while it runs.
KV_ATTENTION = "deplodock-kv"


class _CacheWriter:
    """The `cache` a decoder layer updates (duck-typed as transformers' `Cache.update`):
    writes the step's rows into the layer's cache tensors, functionally, and keeps them."""

    def __init__(self, caches: tuple[torch.Tensor, ...], position: torch.Tensor):
        self.caches = caches
        self.position = position
        self.updated: list[torch.Tensor] = []

    def update(
        self, keys: torch.Tensor, values: torch.Tensor, layer_idx: int, **_: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        k_cache, v_cache = self.caches[2 * layer_idx], self.caches[2 * layer_idx + 1]
        written = (
            _write_rows(k_cache, keys, self.position),
            _write_rows(v_cache, values, self.position),
        )
        self.updated.extend(written)
        return written


def _write_rows(cache: torch.Tensor, rows: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
    """`cache` ([B, H, max_len, d]) with `rows` ([B, H, T, d]) at rows `position ..
    position + T - 1`: every cache row picks its new row (clamped) and keeps the old one
    unless it is one of this step's. No data-dependent write: a gather and a select."""
    steps, capacity = rows.shape[2], cache.shape[2]
    offset = torch.arange(capacity, device=cache.device) - position
    is_new = (offset >= 0) & (offset < steps)
    new_rows = rows.index_select(2, offset.clamp(0, steps - 1))
    return torch.where(is_new[:, None], new_rows.to(cache.dtype), cache)


def kv_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    kv_position: torch.Tensor | None = None,
    **_: Any,
) -> tuple[torch.Tensor, None]:
    """SDPA of the step's queries over the whole cache, a key visible to a query when its
    row is at most the query's position (`kv_position` + the query's index in the step)."""
    if kv_position is None:
        raise models.ModelError("the KV-cache attention needs the step's position")
    if getattr(module, "sliding_window", None) is not None:
        raise models.ModelError("sliding-window attention is not supported with a KV cache")
    steps, capacity = query.shape[2], key.shape[2]
    positions = kv_position + torch.arange(steps, device=query.device)
    visible = torch.arange(capacity, device=query.device)[None, :] <= positions[:, None]
    out = F.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=visible,
        scale=scaling,
        enable_gqa=query.shape[1] != key.shape[1],
    )
    return out.transpose(1, 2).contiguous(), None


def register_kv_attention() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(KV_ATTENTION, kv_attention)


class KvCacheStep(nn.Module):
    """One generation step of a transformers causal LM over caches of `max_len` rows.

    As `models.CausalLMLogits`, the LM's children are this module's children, so parameter
    names are the checkpoint's (`model.layers.0.self_attn.q_proj.weight`) and the layers'
    module paths are `model.layers.<i>` (the program is stamped per layer).
    """

    def __init__(self, lm: nn.Module, max_len: int):
        super().__init__()
        for name, child in lm.named_children():
            self.add_module(name, child)
        object.__setattr__(self, "lm", lm)
        self.max_len = max_len

    def forward(
        self, input_ids: torch.Tensor, position: torch.Tensor, *caches: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        body = self.lm.model
        steps = input_ids.shape[1]
        positions = (position + torch.arange(steps, device=input_ids.device))[None]
        hidden = body.embed_tokens(input_ids)
        rotary = body.rotary_emb(hidden, positions)
        cache = _CacheWriter(caches, position)
        for layer in body.layers:
            hidden = layer(
                hidden,
                attention_mask=None,
                position_ids=positions,
                cache=cache,
                position_embeddings=rotary,
                kv_position=position,
            )
        logits = self.lm.lm_head(body.norm(hidden))
        return (logits, *cache.updated)


@contextmanager
def kv_attention_selected(lm: nn.Module) -> Iterator[None]:
    """The `deplodock-kv` attention selected for the duration (restored after)."""
    register_kv_attention()
    with models.attention_selected(lm, KV_ATTENTION):
        yield


def cache_shape(config: Any, max_len: int) -> tuple[int, int, int, int]:
    """One layer's K (or V) cache: [1, kv_heads, max_len, head_dim]."""
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return (1, kv_heads, max_len, head_dim)


def empty_caches(
    config: Any, max_len: int, dtype: torch.dtype, device: str | torch.device = "cpu"
) -> list[torch.Tensor]:
    """The caches of every layer, K then V per layer, zeroed (a row is read only after a
    step wrote it, so zero is only a defined starting value)."""
    shape = cache_shape(config, max_len)
    return [
        torch.zeros(shape, dtype=dtype, device=device) for _ in range(2 * config.num_hidden_layers)
    ]
