"""`deplodock.generator(model, max_len)`: generate tokens with compiled prefill and decode steps.

    gen = deplodock.generator(model, max_len=256)            # the emitted C, on the CPU
    out = gen.generate(prompt_ids, max_new_tokens=32)      # greedy: out.ids
    out = gen.generate(prompt_ids, 32, do_sample=True, temperature=0.8, top_p=0.9, seed=1)

A step is `frontend.generation.KvCacheStep`: the tokens of the step, their position and the
caches in; the logits and the updated caches out. Its shapes depend only on the step's token
count `T` and on `max_len`, so a program is compiled once per `T` and serves every position:
the decode step (`T = 1`) is compiled once for the whole generation and for every later one,
and a prompt runs as one prefill step of `T` = the next power of two (at most `max_len`),
padded at its end. `Generator.compiles` counts the programs compiled.

The caches live in the generator between steps (allocated once per `generate`, filled in
place of the old ones as each step returns them); the host's work per token is the sampled
id and the position. docs/generation.md says what is static, what is runtime data, and
what is left for the GPU (CUDA graphs, writing the cache in place).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

#: Told each generated token: (its id, how many so far, seconds since the prompt went in).
TokenCallback = Callable[[int, int, float], None]


class GenerationError(ValueError):
    """A request `generate` cannot serve (a prompt too long, a bad token id); one line."""


@dataclass(frozen=True)
class Sampling:
    """How the next token is chosen from the logits: greedy (`do_sample` False), or drawn
    from the softmax at `temperature`, cut to the `top_k` most likely and to the smallest
    set of probability `top_p` (transformers' order: temperature, top-k, top-p)."""

    do_sample: bool = False
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self) -> None:
        if self.temperature <= 0:
            raise GenerationError(f"temperature {self.temperature}: give a positive number")
        if self.top_k is not None and self.top_k < 1:
            raise GenerationError(f"top-k {self.top_k}: give at least 1")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise GenerationError(f"top-p {self.top_p}: give a number in (0, 1]")

    def choose(self, logits: torch.Tensor, rng: torch.Generator) -> int:
        """The next token id from one row of logits (float32 or wider)."""
        if not self.do_sample:
            return int(torch.argmax(logits))
        scores = logits.double() / self.temperature
        if self.top_k is not None and self.top_k < scores.numel():
            kth = torch.topk(scores, self.top_k).values[-1]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        if self.top_p is not None and self.top_p < 1:
            ordered, order = torch.sort(scores, descending=True)
            cumulative = torch.softmax(ordered, -1).cumsum(-1)
            drop = cumulative - torch.softmax(ordered, -1) >= self.top_p  # keeps the first
            scores = scores.masked_fill(
                torch.zeros_like(drop).scatter(0, order, drop), float("-inf")
            )
        probabilities = torch.softmax(scores, -1)
        return int(torch.multinomial(probabilities, 1, generator=rng))


@dataclass
class Generation:
    """What `generate` returns: the new ids, each step's logits (when kept) and timings."""

    ids: list[int]
    logits: list[torch.Tensor] = field(default_factory=list)
    prefill_s: float = 0.0
    decode_s: float = 0.0

    @property
    def tokens_per_s(self) -> float:
        """New tokens after the first over the decode time (the first comes from the prefill)."""
        decoded = len(self.ids) - 1
        return decoded / self.decode_s if decoded > 0 and self.decode_s > 0 else 0.0


class Generator:
    """A causal LM's prefill and decode programs, compiled on first use and kept."""

    def __init__(self, lm: nn.Module, max_len: int, device: str = "cpu", stage: str | None = None):
        from deplodock.api import TARGETS
        from deplodock.frontend.models import is_causal_lm

        if not is_causal_lm(lm):
            raise GenerationError(f"{type(lm).__name__} is not a transformers causal LM")
        if device not in TARGETS:
            raise GenerationError(f"unknown device '{device}' (available: {', '.join(TARGETS)})")
        limit = getattr(lm.config, "max_position_embeddings", None)
        if max_len < 1 or (limit is not None and max_len > limit):
            raise GenerationError(f"max_len {max_len}: the model takes 1 to {limit} positions")
        self.lm = lm
        self.max_len = max_len
        self.device = device
        # on the CPU the emitted C runs (the exact source nvcc would build)
        self.stage = stage or "cuda"
        self.dtype = next(lm.parameters()).dtype
        self.programs: dict[int, Any] = {}
        self._loader = TARGETS[device].open()

    @property
    def compiles(self) -> int:
        """Programs compiled so far: one per step length, each kept."""
        return len(self.programs)

    @property
    def vocab_size(self) -> int:
        return int(self.lm.config.vocab_size)

    def program(self, steps: int) -> Any:
        """The compiled step of `steps` tokens (compiled on first use)."""
        compiled = self.programs.get(steps)
        if compiled is None:
            compiled = self.programs[steps] = self._compile(steps)
        return compiled

    def _compile(self, steps: int) -> Any:
        from deplodock.api import CompiledModule, output_dtypes
        from deplodock.driver import capture_kv_step, lower_program
        from deplodock.frontend.generation import empty_caches

        ids = torch.zeros(1, steps, dtype=torch.int64)
        caches = empty_caches(self.lm.config, self.max_len, self.dtype)
        program, ep = capture_kv_step(
            self.lm, self.max_len, (ids, torch.zeros(1, dtype=torch.int64), *caches)
        )
        lower_program(program, self.stage)
        executor = self._loader(program, dict(ep.constants))
        assert program.torch_module is not None
        return CompiledModule(
            program, program.torch_module, executor, self.device, output_dtypes(ep)
        )

    def prefill_steps(self, prompt_len: int) -> int:
        """The prefill's token count for a prompt: the next power of two, at most `max_len`
        (so prompts share a few programs; the pad at the end is causally invisible)."""
        return min(1 << (prompt_len - 1).bit_length(), self.max_len)

    def generate(
        self,
        prompt_ids: Sequence[int],
        max_new_tokens: int,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int = 0,
        eos_token_id: int | Sequence[int] | None = None,
        keep_logits: bool = False,
        on_token: TokenCallback | None = None,
    ) -> Generation:
        """Up to `max_new_tokens` new ids after `prompt_ids`, stopping after an EOS id (kept)
        or when the cache is full; the token is chosen as `Sampling` says (greedy unless
        `do_sample`), with a generator seeded by `seed`. The programs it needs are compiled
        first, so the prefill and decode times are run times."""
        prompt = self._check_prompt(prompt_ids, max_new_tokens)
        sampling = Sampling(do_sample, temperature, top_k, top_p)
        rng = torch.Generator().manual_seed(seed)
        stops = {eos_token_id} if isinstance(eos_token_id, int) else set(eos_token_id or ())
        from deplodock.frontend.generation import empty_caches

        steps = self.prefill_steps(len(prompt))
        self.program(steps)  # both compiled before the clock starts
        self.program(1)
        caches = empty_caches(self.lm.config, self.max_len, self.dtype)
        result = Generation([])
        start = time.perf_counter()
        padded = prompt + [0] * (steps - len(prompt))
        logits, caches = self._step(padded, 0, caches)
        row = logits[len(prompt) - 1]
        result.prefill_s = time.perf_counter() - start
        position = len(prompt)
        while True:
            token = sampling.choose(row.float(), rng)
            result.ids.append(token)
            if keep_logits:
                result.logits.append(row)
            if on_token is not None:
                on_token(token, len(result.ids), time.perf_counter() - start)
            if token in stops or len(result.ids) == max_new_tokens or position == self.max_len:
                break
            logits, caches = self._step([token], position, caches)
            row = logits[0]
            position += 1
        result.decode_s = time.perf_counter() - start - result.prefill_s
        return result

    def _step(
        self, ids: list[int], position: int, caches: list[torch.Tensor]
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        compiled = self.program(len(ids))
        outputs = compiled(
            torch.tensor([ids], dtype=torch.int64),
            torch.tensor([position], dtype=torch.int64),
            *caches,
        )
        return outputs[0][0], list(outputs[1:])

    def _check_prompt(self, prompt_ids: Sequence[int], max_new_tokens: int) -> list[int]:
        prompt = [int(i) for i in prompt_ids]
        if not prompt:
            raise GenerationError("the prompt is empty: give at least one token")
        for index, token in enumerate(prompt):
            if not 0 <= token < self.vocab_size:
                raise GenerationError(
                    f"prompt token {index} is {token}: ids run from 0 to {self.vocab_size - 1}"
                )
        if len(prompt) > self.max_len:
            raise GenerationError(
                f"the prompt has {len(prompt)} tokens, more than max_len {self.max_len}"
            )
        if max_new_tokens < 1:
            raise GenerationError(f"max_new_tokens {max_new_tokens}: give at least 1")
        return prompt


def generator(
    model: nn.Module, max_len: int = 2048, device: str = "cpu", stage: str | None = None
) -> Generator:
    """The generator of a transformers causal LM (see the module doc)."""
    return Generator(model, max_len, device, stage)


def report_progress(total: int, stream: Any = None) -> TokenCallback:
    """A `TokenCallback` writing `N/total tokens, X tok/s` to `stream`: one line redrawn on a
    terminal, a line per token otherwise. The rate counts the tokens after the first (which
    the prefill makes) over the time since the first."""
    stream = stream if stream is not None else sys.stderr
    first: list[float] = []
    redraw = stream.isatty()

    def told(token: int, count: int, seconds: float) -> None:
        if not first:
            first.append(seconds)
        elapsed = seconds - first[0]
        rate = f", {(count - 1) / elapsed:.2f} tok/s" if count > 1 and elapsed > 0 else ""
        text = f"{count}/{total} tokens{rate}"
        if redraw:
            stream.write(f"\r{text}" + ("\n" if count == total else ""))
        else:
            stream.write(f"{text}\n")
        stream.flush()

    return told
