"""The unit of tuning: one loop-level kernel, on its own, and the key it is known by.

A program's kernels are tuned one at a time (identical kernels once): the search runs the
scheduling passes on a *standalone* module that holds one kernel and a `@forward` that
launches it once on its arguments, so a candidate's modeled or measured time is that
kernel's alone, and the interpreters can run it as a program.

A kernel is known by its structural hash: a SHA-256 of the structural key `dedupe-kernels`
uses (everything but its name and value names), so two kernels that compute the same thing
on the same shapes share a hash across programs, runs and machines (the cache key of
`cache.py`).
"""

from __future__ import annotations

import hashlib

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Region

from deplodock.dialects import loop
from deplodock.dialects.queries import structural_key, written_arguments


def loop_kernels(module: ModuleOp) -> list[loop.KernelOp]:
    """The `loop.kernel`s of a loop-level module, in order."""
    return [op for op in module.ops if isinstance(op, loop.KernelOp)]


def kernel_hash(kernel: loop.KernelOp) -> str:
    """The structural hash of a loop-level kernel (64 hex digits): a digest of the key
    `dedupe-kernels` merges kernels by (`queries.structural_key`, without the name), so the
    tuner and the pipeline agree on which kernels are the same. The key's text is its repr,
    deterministic for a given xDSL (pinned exactly)."""
    key = structural_key(kernel, ignore=("sym_name",))
    return hashlib.sha256(repr(key).encode()).hexdigest()


def standalone(kernel: loop.KernelOp) -> ModuleOp:
    """A module of a copy of `kernel` (its name kept) and `@forward`, which takes the
    kernel's buffers as arguments, launches it once and returns the buffers it writes (in
    argument order), so running it gives the kernel's outputs."""
    types = list(kernel.arg_types)
    written = sorted(written_arguments(kernel))
    body = Block(arg_types=types)
    outputs = [body.args[i] for i in written]
    body.add_ops([loop.LaunchOp(kernel.sym_name.data, list(body.args)), func.ReturnOp(*outputs)])
    forward = func.FuncOp("forward", (types, [types[i] for i in written]), Region(body))
    return ModuleOp([kernel.clone(), forward])
