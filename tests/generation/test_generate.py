"""Generation (`deplodock/generation.py`, `frontend/generation.py`): compiled prefill and
decode steps against transformers' own `generate`, on tiny random models whose shapes no
other test uses (GQA 3:1 and 5:1, head dims 8 and 16).

The comparison is token for token and logit for logit: transformers runs its model with its
own dynamic cache in float32, deplodock runs the emitted CUDA C of its steps on the CPU (or
the kernel-level interpreter in the quick tests).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from deplodock.frontend import models
from deplodock.frontend.generation import _write_rows
from deplodock.generation import GenerationError, Generator, Sampling
from tests.api.test_api_cuda import loads  # noqa: F401  (the emulated CUDA target)

#: Tiny configs: (model type, sizes); vocab 120, 2 layers.
CONFIGS: dict[str, dict[str, Any]] = {
    "qwen2-gqa3": dict(model_type="qwen2", hidden_size=48, intermediate_size=96,
                       num_attention_heads=6, num_key_value_heads=2, head_dim=8),
    "llama-gqa5": dict(model_type="llama", hidden_size=80, intermediate_size=144,
                       num_attention_heads=5, num_key_value_heads=1, head_dim=16),
}  # fmt: skip


def tiny_lm(name: str, seed: int = 0) -> Any:
    from transformers import AutoConfig, AutoModelForCausalLM

    values = dict(CONFIGS[name])
    config = AutoConfig.for_model(
        values.pop("model_type"), vocab_size=120, num_hidden_layers=2,
        max_position_embeddings=256, tie_word_embeddings=False, **values,
    )  # fmt: skip
    torch.manual_seed(seed)
    lm = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    return models.randomize_weights(lm.eval(), seed)


def prompt_of(length: int, vocab: int = 120) -> list[int]:
    return torch.randint(
        0, vocab, (length,), generator=torch.Generator().manual_seed(length)
    ).tolist()


def transformers_greedy(
    lm: Any, prompt: list[int], new_tokens: int
) -> tuple[list[int], list[torch.Tensor]]:
    with torch.no_grad():
        out = lm.generate(
            torch.tensor([prompt]), max_new_tokens=new_tokens, do_sample=False,
            output_logits=True, return_dict_in_generate=True, eos_token_id=None, pad_token_id=0,
        )  # fmt: skip
    return out.sequences[0, len(prompt) :].tolist(), [row[0] for row in out.logits]


def relative_error(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    return float((ours.double() - theirs.double()).abs().max() / theirs.double().abs().max())


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_greedy_ids_and_logits_match_transformers_through_the_emitted_c(name: str) -> None:
    lm = tiny_lm(name)
    generator = Generator(lm, max_len=96)  # stage cuda: the emitted C, run on the CPU
    assert generator.stage == "cuda"
    decode_programs = set()
    for length in (1, 7, 33):
        prompt = prompt_of(length)
        ours = generator.generate(prompt, 32, keep_logits=True)
        ids, logits = transformers_greedy(lm, prompt, 32)
        assert ours.ids == ids, (length, ours.ids, ids)
        errors = [relative_error(a, b) for a, b in zip(ours.logits, logits, strict=True)]
        assert max(errors) <= 1e-4, (length, max(errors))
        decode_programs.add(id(generator.programs[1]))
    # one decode program served every step of every prompt; prompts of 1, 7 and 33 tokens
    # ran as prefills of 1 (the decode program itself), 8 and 64 tokens
    assert len(decode_programs) == 1
    assert sorted(generator.programs) == [1, 8, 64] and generator.compiles == 3


def test_a_prompt_and_its_continuation_match_transformers_at_the_kernel_level() -> None:
    lm = tiny_lm("qwen2-gqa3", seed=4)
    generator = Generator(lm, max_len=24, stage="kernel")
    prompt = prompt_of(5)
    ours = generator.generate(prompt, 6, keep_logits=True)
    ids, logits = transformers_greedy(lm, prompt, 6)
    assert ours.ids == ids
    assert max(relative_error(a, b) for a, b in zip(ours.logits, logits, strict=True)) <= 1e-4
    assert generator.compiles == 2  # the prefill of 8 and the decode step


def test_generation_stops_at_eos_and_when_the_cache_is_full() -> None:
    lm = tiny_lm("qwen2-gqa3", seed=4)
    generator = Generator(lm, max_len=8, stage="kernel")
    full = generator.generate(prompt_of(5), 10)
    assert len(full.ids) == 4  # positions 5, 6, 7 are decoded after the prefill's token
    stopped = generator.generate(prompt_of(5), 10, eos_token_id=full.ids[1])
    assert stopped.ids == full.ids[: full.ids.index(full.ids[1]) + 1]


def test_the_cache_rows_of_a_step_are_written_at_its_position() -> None:
    torch.manual_seed(0)
    cache, rows = torch.randn(1, 2, 10, 4), torch.randn(1, 2, 3, 4)
    for position in (0, 4, 7, 9):
        expected = cache.clone()
        fits = min(3, 10 - position)
        expected[:, :, position : position + fits] = rows[:, :, :fits]
        assert torch.equal(_write_rows(cache, rows, torch.tensor([position])), expected)


def test_sampling_with_a_seed_is_reproducible_and_its_cuts_hold() -> None:
    logits = torch.randn(50, generator=torch.Generator().manual_seed(0))
    sampling = Sampling(do_sample=True, temperature=1.5, top_k=10, top_p=0.9)
    draws = [sampling.choose(logits, torch.Generator().manual_seed(5)) for _ in range(2)]
    assert draws[0] == draws[1]
    rng = torch.Generator().manual_seed(1)
    many = {sampling.choose(logits, rng) for _ in range(300)}
    top10 = torch.topk(logits, 10)
    probabilities = torch.softmax(top10.values.double() / 1.5, -1)
    nucleus = int((probabilities.cumsum(-1) < 0.9).sum()) + 1  # the smallest set of >= 0.9
    assert many <= set(top10.indices[:nucleus].tolist()) and len(many) > 1
    assert nucleus < 10  # the top-p cut took something away
    greedy = int(torch.argmax(logits))
    assert Sampling(do_sample=True, top_k=1).choose(logits, rng) == greedy
    assert Sampling(do_sample=True, top_p=1e-6).choose(logits, rng) == greedy
    assert Sampling().choose(logits, rng) == greedy


@pytest.mark.parametrize(
    ("prompt", "max_len", "fragment"),
    [
        ([], 16, "the prompt is empty"),
        ([1, 500, 2], 16, "prompt token 1 is 500: ids run from 0 to 119"),
        ([1] * 20, 16, "the prompt has 20 tokens, more than max_len 16"),
    ],
)
def test_a_bad_request_is_one_line(prompt: list[int], max_len: int, fragment: str) -> None:
    generator = Generator(tiny_lm("qwen2-gqa3"), max_len=max_len, stage="kernel")
    with pytest.raises(GenerationError, match=fragment):
        generator.generate(prompt, 4)
    assert generator.compiles == 0  # refused before anything was compiled


def test_bad_sampling_settings_are_refused() -> None:
    for kwargs, fragment in [
        ({"temperature": 0.0}, "temperature 0.0"),
        ({"top_k": 0}, "top-k 0"),
        ({"top_p": 1.5}, "top-p 1.5"),
    ]:
        with pytest.raises(GenerationError, match=fragment):
            Sampling(do_sample=True, **kwargs)


def test_the_cuda_device_path_generates_what_transformers_does(loads: list) -> None:  # noqa: F811
    """`device="cuda"` on the CPU emulation of the GPU runtime (`tests/gpu/emulation.py`,
    the `loads` fixture of the API's CUDA tests): the programs are built as for a GPU and
    each step exchanges device tensors (here CPU ones) with the loaded program."""
    lm = tiny_lm("llama-gqa5", seed=3)
    generator = Generator(lm, max_len=16, device="cuda")
    prompt = prompt_of(3)
    ours = generator.generate(prompt, 5, keep_logits=True)
    ids, logits = transformers_greedy(lm, prompt, 5)
    assert ours.ids == ids
    assert max(relative_error(a, b) for a, b in zip(ours.logits, logits, strict=True)) <= 1e-4
    assert len(loads) == 2  # the prefill of 4 and the decode step, each loaded once
