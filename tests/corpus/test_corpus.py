"""The bad-input corpus (`cases.toml`): every case runs in-process, and each must end with its
exit status, its message fragment, no traceback and no damaged or partial file.

A case names the command (`argv`, the tool first), the status and a fragment of the first
line of stderr; the input it needs is built in a fresh directory from one of:

- `input`: the text of `{in}` (`in.mlir`);
- `input_from`: the RMSNorm example at a level (`torch` ... `cuda`), optionally edited by
  `replace` (pairs of old, new; each old must occur) or cut to its first `truncate` bytes;
- `input_hex`: the bytes of `{in}`, as hex;
- `input_gen`: a generator below and its argument (`"nested_modules 3000"`);
- `model`: a tiny llama `config.json` in `{model}/`, updated by this table (`model_raw`: the
  file's text as is; `weights`: the bytes of `{model}/model.safetensors`, as text;
  `checkpoint`: a real one of random weights, less the tensors whose names contain a `drop`
  fragment, with a NaN in each `nan` tensor).

`{example}` is the untouched torch-level example; `{full}` and `{null}` are `/dev/full` and
`/dev/null`, or for root twins of them in the directory (`tests.cli.invoke.device`), also in
`message`; `{out}` (`out.mlir`) holds `previous` before
the run unless `output_absent`, and must hold exactly that after a failed run. Every file in
the directory before the run must be unchanged after it (status 0 cases may add `{out}`),
and no other file may appear.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cli.invoke import DEVICES, device, invoke

CORPUS = Path(__file__).with_name("cases.toml")
EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "rmsnorm.mlir"
LEVELS = ("torch", "tensor", "loop", "tile", "kernel", "cuda")
PREVIOUS = "previous contents\n"

#: A llama small enough to build in a blink; `model` cases update it.
TINY_LLAMA: dict[str, Any] = {
    "model_type": "llama",
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 64,
    "max_position_embeddings": 64,
}

CASES: list[dict[str, Any]] = tomllib.loads(CORPUS.read_text())["case"]


def nested_modules(levels: int) -> str:
    return "builtin.module {\n" * levels + "}\n" * levels


def nested_attribute(levels: int) -> str:
    return "builtin.module attributes {a = " + "[" * levels + "]" * levels + "} {\n}\n"


def nested_type(levels: int) -> str:
    inner = "f32"
    for _ in range(levels):
        inner = f"tuple<{inner}>"
    return f"builtin.module attributes {{a = {inner}}} {{\n}}\n"


def nested_regions(levels: int) -> str:
    """`kernel.if` inside `kernel.if`, `levels` deep: ops inside regions inside ops."""
    opening = "kernel.if %c {\n" * levels
    return f"func.func @forward(%c: i1) {{\n{opening}{'}' * levels}\nfunc.return\n}}\n"


def long_sum(terms: int) -> str:
    return "torch.randn(4)" + " + 1.0" * terms


GENERATORS: dict[str, Callable[[int], str]] = {
    "nested_modules": nested_modules,
    "nested_attribute": nested_attribute,
    "nested_type": nested_type,
    "nested_regions": nested_regions,
    "long_sum": long_sum,
}


@pytest.fixture(scope="module")
def levels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The RMSNorm example at every level, lowered once (in-process) for all the cases."""
    texts = {"torch": EXAMPLE.read_text()}
    for level in LEVELS[1:]:
        result = invoke("deplodock-opt", [str(EXAMPLE), "-p", f"lower-to-{level}"])
        assert result.status == 0, result.stderr
        texts[level] = result.stdout
    return texts


def build_input(case: dict[str, Any], directory: Path, levels: dict[str, str]) -> None:
    """Writes what the case's command reads (see the module docstring)."""
    target = directory / "in.mlir"
    if "input" in case:
        target.write_text(case["input"])
    elif "input_from" in case:
        text = levels[case["input_from"]]
        for old, new in case.get("replace", []):
            assert old in text, f"{case['id']}: {old!r} is not in the {case['input_from']} level"
            text = text.replace(old, new)
        data = text.encode()
        target.write_bytes(data[: case["truncate"]] if "truncate" in case else data)
    elif "input_hex" in case:
        target.write_bytes(bytes.fromhex(case["input_hex"]))
    elif "input_gen" in case:
        name, argument = case["input_gen"].split()
        target.write_text(GENERATORS[name](int(argument)))
    if "model" in case or "model_raw" in case:
        model = directory / "model"
        model.mkdir()
        config = case.get("model_raw")
        if config is None:
            values = TINY_LLAMA | case["model"]
            config = json.dumps({k: v for k, v in values.items() if v != "<absent>"})
        (model / "config.json").write_text(config)
        if "weights" in case:
            (model / "model.safetensors").write_text(case["weights"])
        if "checkpoint" in case:
            build_checkpoint(model, case["checkpoint"])
    if not case.get("output_absent", False):
        (directory / "out.mlir").write_text(PREVIOUS)
    for name in DEVICES:
        if any(f"{{{name}}}" in argument for argument in case["argv"]):
            device(directory, name)


def build_checkpoint(model: Path, spec: dict[str, Any]) -> None:
    """`model.safetensors` of a random model of `model/config.json`, edited by `spec`."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    lm = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model))
    tensors = {
        name: tensor.detach().clone()
        for name, tensor in lm.state_dict().items()
        if not any(fragment in name for fragment in spec.get("drop", []))
    }
    for name in spec.get("nan", []):
        tensors[name].view(-1)[0] = float("nan")
    save_file(tensors, model / "model.safetensors", metadata={"format": "pt"})


def expand(argument: str, directory: Path) -> str:
    """`{in}`, `{out}`, `{model}`, `{tmp}`, `{example}`, `{full}`, `{null}` and
    `{gen:NAME N}` in an argument."""
    if argument.startswith("{gen:"):
        name, count = argument.removeprefix("{gen:").removesuffix("}").split()
        return GENERATORS[name](int(count))
    for name in DEVICES:
        if f"{{{name}}}" in argument:
            argument = argument.replace(f"{{{name}}}", str(device(directory, name)))
    return (
        argument.replace("{in}", str(directory / "in.mlir"))
        .replace("{out}", str(directory / "out.mlir"))
        .replace("{model}", str(directory / "model"))
        .replace("{tmp}", str(directory))
        .replace("{example}", str(EXAMPLE))
    )


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under `directory` (links as their target text), by relative path."""
    return {
        str(p.relative_to(directory)): (
            p.read_bytes() if p.is_file() else b"<dir>" if p.is_dir() else b"<device>"
        )
        for p in sorted(directory.rglob("*"))
    }


def check_message(case: dict[str, Any], stderr: str, directory: Path) -> None:
    """The fragment in the message line, the first (a usage error too is one line)."""
    lines = stderr.strip().splitlines()
    message = expand(case["message"], directory)
    if not message:  # a success that has nothing to say
        assert not lines, stderr
        return
    assert lines, f"{case['id']}: nothing on stderr"
    assert message in lines[0], f"{case['id']}: {lines[0]!r}"
    assert len(lines) <= case.get("lines", 1), f"{case['id']}: {len(lines)} lines:\n{stderr}"


def test_corpus_is_large_and_ids_are_unique() -> None:
    ids = [case["id"] for case in CASES]
    assert len(ids) >= 100
    assert len(set(ids)) == len(ids), [i for i in ids if ids.count(i) > 1]


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_bad_input(case: dict[str, Any], levels: dict[str, str], tmp_path: Path) -> None:
    build_input(case, tmp_path, levels)
    before = snapshot(tmp_path)
    tool, *argv = [expand(a, tmp_path) for a in case["argv"]]
    result = invoke(tool, argv, cwd=tmp_path)
    assert "Traceback" not in result.output, result.output
    assert result.status == case["status"], f"{case['id']}: {result.output}"
    check_message(case, result.stderr, tmp_path)
    after = snapshot(tmp_path)
    if case["status"] == 0:  # a successful run may write {out}
        before.pop("out.mlir", None)
        after.pop("out.mlir", None)
    assert after == before, f"{case['id']}: files changed: {sorted(set(after) ^ set(before))}"
