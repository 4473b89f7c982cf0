"""`deplodock generate`: a model's next tokens from compiled prefill and decode steps.

    deplodock generate TinyLlama/TinyLlama-1.1B-Chat-v1.0 --weights ./tinyllama --prompt "Hi"
    deplodock generate Qwen/Qwen2.5-7B --layers 2 --prompt-ids 151644,872,198 --max-new-tokens 16

Without `--weights` the weights are random (seeded) and the prompt is token ids; with a
weights directory holding a tokenizer, `--prompt TEXT` is tokenized and the output decoded.
The new ids (or the text) go to stdout; progress and tokens per second to stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

#: Random weights are built on the CPU in full: past this a model needs `--weights`.
MAX_RANDOM_PARAMETERS = 2_000_000_000


def add_generate_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "generate",
        help="generate tokens with a model (compiled prefill and decode steps)",
        description="Generate tokens with a Hugging Face causal LM: the prompt runs as one "
        "compiled prefill step and each new token as one compiled decode step over a KV cache "
        "of --max-len rows; the decode step is compiled once and serves every position. On "
        "the CPU the steps run as the emitted CUDA C.",
    )
    parser.set_defaults(handler=run_generate, code=None)
    parser.add_argument(
        "source", metavar="MODEL", help="a shipped model id or a directory with config.json"
    )
    parser.add_argument(
        "--weights",
        type=Path,
        metavar="DIR",
        help="load the weights (and the tokenizer, when there is one) from DIR; default: "
        "random weights, seeded",
    )
    prompt = parser.add_mutually_exclusive_group(required=True)
    prompt.add_argument("--prompt", metavar="TEXT", help="text (needs a tokenizer in --weights)")
    prompt.add_argument("--prompt-ids", metavar="IDS", help="token ids, comma-separated")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="(default: 32)")
    parser.add_argument(
        "--max-len",
        type=int,
        help="KV cache rows (default: prompt + new tokens, rounded up to a multiple of 64)",
    )
    parser.add_argument("--layers", type=int, help="keep the first N decoder layers")
    parser.add_argument("--dtype", choices=("fp32", "bf16", "fp16"), default="fp32")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument(
        "--ir",
        choices=("kernel", "cuda"),
        help="on the CPU: run the emitted CUDA C (cuda, the default) or interpret the kernel "
        "level (kernel: no C compiler needed, slower per step)",
    )
    sample = parser.add_argument_group("sampling (default: greedy)")
    sample.add_argument("--do-sample", action="store_true", help="draw from the distribution")
    sample.add_argument("--temperature", type=float, default=1.0)
    sample.add_argument("--top-k", type=int)
    sample.add_argument("--top-p", type=float)
    sample.add_argument("--seed", type=int, default=0, help="sampling and random weights")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="timings on stderr")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    parser.add_argument("--traceback", action="store_true", help="show Python tracebacks")


def parse_ids(text: str) -> list[int]:
    """`--prompt-ids 1,2,3` as ints; one line naming the bad item otherwise."""
    if not text.strip():
        raise ValueError("--prompt-ids is empty: give at least one token id")
    items = [item.strip() for item in text.split(",")]
    ids = []
    for index, item in enumerate(items):
        try:
            ids.append(int(item))
        except ValueError:
            raise ValueError(f"--prompt-ids: item {index} '{item}' is not an integer") from None
    return ids


def default_max_len(prompt_len: int, new_tokens: int) -> int:
    return -(-(prompt_len + new_tokens) // 64) * 64


def run_generate(args: argparse.Namespace) -> int:
    import torch

    from deplodock.frontend import models
    from deplodock.generation import Generator, Sampling, report_progress

    if args.ir is not None and args.device == "cuda":
        raise ValueError("--ir goes with --device cpu (the GPU runs the cuda level)")
    if args.device == "cuda":
        from deplodock.backend.device import require_cuda

        require_cuda()  # "no CUDA device: <why>", before a model is built
    source = models.resolve_model(args.source)
    config = models.make_config(source, args.layers)
    tokenizer = load_tokenizer(args.weights) if args.weights is not None else None
    if args.prompt is not None and tokenizer is None:
        where = f"{args.weights} holds none" if args.weights else "give --weights DIR"
        raise ValueError(f"--prompt needs a tokenizer ({where}); or give --prompt-ids")
    if args.prompt is not None:
        assert tokenizer is not None
        prompt = [int(i) for i in tokenizer(args.prompt)["input_ids"]]
    else:
        prompt = parse_ids(args.prompt_ids)
    Sampling(args.do_sample, args.temperature, args.top_k, args.top_p)  # refused before loading
    lm = load_model(source, config, args.weights, args.seed).to(models.DTYPES[args.dtype])
    max_len = args.max_len or min(
        default_max_len(len(prompt), args.max_new_tokens),
        getattr(config, "max_position_embeddings", 1 << 30),
    )
    generator = Generator(lm, max_len, args.device, args.ir)
    progress = None if args.quiet else report_progress(args.max_new_tokens)
    with torch.no_grad():
        result = generator.generate(
            prompt,
            args.max_new_tokens,
            args.do_sample,
            args.temperature,
            args.top_k,
            args.top_p,
            seed=args.seed,
            eos_token_id=getattr(config, "eos_token_id", None),
            on_token=progress,
        )
    if progress is not None and sys.stderr.isatty() and len(result.ids) < args.max_new_tokens:
        print(file=sys.stderr)  # end the progress line an EOS cut short
    if tokenizer is not None:
        print(tokenizer.decode(result.ids))
    else:
        print(",".join(map(str, result.ids)))
    print(
        f"deplodock: {len(result.ids)} tokens; prefill {result.prefill_s:.2f} s "
        f"({len(prompt)} tokens), decode {result.tokens_per_s:.2f} tok/s on {args.device}; "
        f"{generator.compiles} program(s) compiled",
        file=sys.stderr,
    )
    return 0


def check_directory(directory: Path) -> None:
    if not directory.is_dir():
        why = "not a directory" if directory.exists() else "no such directory"
        raise ValueError(f"--weights {directory}: {why}")


def load_tokenizer(directory: Path) -> Any:
    """The tokenizer saved in `directory`, or None when it holds none."""
    check_directory(directory)
    if not any((directory / name).is_file() for name in TOKENIZER_FILES):
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(directory)


TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "vocab.json")


def load_model(source: Any, config: Any, weights: Path | None, seed: int) -> Any:
    """The transformers model in float32 on the CPU: the checkpoint in `weights`, or random
    weights (seeded; refused past `MAX_RANDOM_PARAMETERS`)."""
    from dataclasses import replace

    from deplodock.frontend import models
    from deplodock.frontend.weights import safetensors_files

    if weights is not None:
        check_directory(weights)
        if not safetensors_files(weights):
            raise ValueError(f"--weights {weights}: no *.safetensors in it")
        return models.reference_model(replace(source, directory=weights), config, seed)
    meta = models.build_causal_lm(config, device="meta")
    count = sum(p.numel() for p in meta.parameters())
    if count > MAX_RANDOM_PARAMETERS:
        raise ValueError(
            f"{source.name} has {count:.2e} parameters: too many for random weights here "
            "(give --weights DIR or fewer --layers)"
        )
    return models.reference_model(source, config, seed)
