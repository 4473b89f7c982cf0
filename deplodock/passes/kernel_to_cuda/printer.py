"""The CUDA C printer: one `kernel.func` -> one `extern "C" __global__` function.

The kernel dialect maps op for op onto CUDA constructs, so this is a straight walk of the
body. Readability of the output matters (it is what users read and what nvcc reports on):
C names come from SSA name hints, constants are literals, a pure scalar op used once in
the same block is inlined into its user instead of getting a variable, and one whose result
nothing printed reads is left out (nvcc would warn of a variable never referenced). Buffers
are flat pointers indexed row-major; an argument the kernel never stores to is `const`.

Asynchronous copies and vector accesses print as calls of the device primitives of
`backend/cpu_simt.h` (GPU side inline PTX, CPU side the emulation), which such a kernel
includes: `dd_cp_async_16(&s[i], &x[j], p)`, `dd_cp_async_commit()`,
`dd_cp_async_wait<1>()`, `dd_load_vector<float, 4>(&x[i])` (a `dd_vec<float, 4>` whose
`.v[k]` are the elements) and `dd_store_vector<float, 4>(&y[i], dd_vec<float, 4>{{a, b, c,
d}})`. Shared arrays they touch are declared `__align__(16)`. A kernel whose shared arrays
exceed the static 48 KiB takes them from dynamic shared memory instead, one line per array,
`DD_DYNAMIC_SHARED(float, a_s, 8192, 32768);` (type, name, elements, byte offset; each array
starts on a 16-byte boundary), and its launch opts in to that many bytes. A
`kernel.mma_sync` declares its four results and passes them to the helper that writes them:
`float d0, d1, d2, d3;` then `dd_mma_m16n8k16(d0, d1, d2, d3, a0, ..., a7, b0, ..., b3, c0,
..., c3);` (the type of A and B, `__nv_bfloat16` or `__half`, picks the PTX instruction);
a tf32 one calls `dd_mma_m16n8k8_tf32(d0, ..., a0, ..., a3, b0, b1, c0, ..., c3)`, and
`kernel.split_tf32` is `float hi, lo; dd_split_tf32(x, hi, lo);`. A `kernel.ldmatrix`
declares its fragment elements the same way: `__nv_bfloat16 r0, ..., r7;` then
`dd_ldmatrix<4, false>(&a_s[i], r0, ..., r7);` (matrices, `.trans`; the address is this
lane's row). The sm_90a warpgroup MMA: `kernel.wgmma_desc` is `dd_wgmma_desc(&a_s[i], a_s,
0x...ull)` (the fields other than the address encoded here), the fence, commit and wait are
`dd_wgmma_fence()`, `dd_wgmma_commit()`, `dd_wgmma_wait<N>()`, and `kernel.wgmma` declares
`float d0 = c0, ...;` and prints its PTX inline for the GPU (the operand list grows with N)
next to `dd_wgmma_emulate<N>(...)` for the CPU; its operands' arrays are `__align__(1024)`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue

from deplodock.dialects import kernel
from deplodock.dialects.common.wgmma import OPERAND_ALIGNMENT, ptx_wgmma
from deplodock.dialects.effects import dead_ops, is_pure
from deplodock.dialects.element_types import ELEMENT_TYPES, buffer_bytes
from deplodock.dialects.hardware import (
    FULL_WARP_MASK,
    MAX_SHARED_BYTES,
    MAX_VECTOR_BYTES,
    needs_dynamic_shared,
)
from deplodock.dialects.queries import unique_name, written_buffers
from deplodock.passes.kernel_to_cuda.exprs import (
    Expr,
    PrinterError,
    c_type,
    element_c_type,
    linear_index,
    name,
)
from deplodock.passes.kernel_to_cuda.scalar import C_FUNCTION_NAMES, ScalarContext, scalar_expr

INDENT = "  "
# A pure expression longer than this gets a variable even when it has a single use.
INLINE_LIMIT = 72
INT32_MAX = 2**31 - 1

#: Names a C variable must not take: keywords (with C++'s alternative operator spellings such
#: as `and` / `or`, which an SSA name like `%or` would otherwise become), CUDA builtins and
#: the functions the printer calls.
RESERVED_NAMES = (
    frozenset(
        """auto bool break case char const continue default do double else enum extern float for
    goto if inline int long register restrict return short signed sizeof static struct switch
    typedef union unsigned void volatile while class namespace template this new delete true
    false nullptr operator private public protected virtual friend using typename asm
    threadIdx blockIdx blockDim gridDim warpSize half float2 float4 dim3 uint3 min max abs
    NAN INFINITY and and_eq bitand bitor compl not not_eq or or_eq xor xor_eq""".split()
    )
    | C_FUNCTION_NAMES
)


def _elements(t: MemRefType) -> int:
    return math.prod(t.get_shape())


def needs_64bit_index(func: kernel.FuncOp) -> bool:
    """Whether an index may exceed `int` (any buffer or loop extent beyond 2^31 - 1)."""
    extents = [_elements(a.type) for a in func.body.block.args if isinstance(a.type, MemRefType)]
    extents += [_elements(op.result.type) for op in func.shared_allocs()]
    extents += [op.upper for op in func.walk() if isinstance(op, kernel.ForOp)]
    extents.append(func.grid_size * func.block_size)
    return max(extents, default=0) > INT32_MAX


def _element_types(func: kernel.FuncOp) -> Iterable[Attribute]:
    for op in func.walk():
        for v in (*op.results, *op.operands):
            yield v.type.element_type if isinstance(v.type, MemRefType) else v.type
    for a in func.body.block.args:
        if isinstance(a.type, MemRefType):
            yield a.type.element_type


#: The device header that defines the cp.async, vector-access and mma.sync primitives.
DEVICE_HEADER = "cpu_simt.h"

#: The device header's warp-wide m16n8k16 MMA (`kernel.mma_sync`).
MMA_HELPER = "dd_mma_m16n8k16"
#: ... and its m16n8k8 MMA on tf32 operands (`kernel.mma_sync ... : tf32`).
MMA_TF32_HELPER = "dd_mma_m16n8k8_tf32"
#: The device header's warp-wide load of MMA fragments from shared memory (`kernel.ldmatrix`).
LDMATRIX_HELPER = "dd_ldmatrix"
#: The device header's split of an fp32 value into two tf32 ones (`kernel.split_tf32`).
SPLIT_TF32_HELPER = "dd_split_tf32"

#: Kernel ops printed as calls of the device header's primitives.
PRIMITIVE_OPS = (
    kernel.CpAsyncOp,
    kernel.CpAsyncCommitOp,
    kernel.CpAsyncWaitOp,
    kernel.LoadVectorOp,
    kernel.StoreVectorOp,
    kernel.MmaSyncOp,
    kernel.LdmatrixOp,
    kernel.SplitTf32Op,
    kernel.WgmmaDescOp,
    kernel.WgmmaFenceOp,
    kernel.WgmmaOp,
    kernel.WgmmaCommitOp,
    kernel.WgmmaWaitOp,
)


def uses_primitives(func: kernel.FuncOp) -> bool:
    return needs_dynamic_shared(func.shared_bytes()) or any(
        isinstance(op, PRIMITIVE_OPS) for op in func.walk()
    )


def includes(func: kernel.FuncOp) -> list[str]:
    """The CUDA headers the kernel's element types need (`cuda_fp16.h`, `cuda_bf16.h`), in
    the order f16 then bf16, then the device header when it uses its primitives."""
    headers = set()
    for t in _element_types(func):
        if t in ELEMENT_TYPES and (header := ELEMENT_TYPES[t].include) is not None:
            headers.add(header)
    order = [info.include for info in ELEMENT_TYPES.values() if info.include is not None]
    return [h for h in order if h in headers] + ([DEVICE_HEADER] if uses_primitives(func) else [])


def unread_ops(func: kernel.FuncOp) -> set[Operation]:
    """Ops whose results nothing printed reads, also through other such ops (a coordinate a
    pass computed and no index used; `effects.dead_ops`): the printer leaves them out, since
    a variable declared and never referenced is what nvcc warns of."""
    return {op for op in dead_ops(list(func.walk())) if op.results}


def _vector_aligned_buffers(func: kernel.FuncOp) -> set[SSAValue]:
    """Shared arrays that a cp.async, a vector access or an ldmatrix touches (they need
    16-byte alignment)."""
    buffers: set[SSAValue] = set()
    for op in func.walk():
        if isinstance(op, kernel.CpAsyncOp):
            buffers.add(op.dst)
        elif isinstance(op, kernel.LoadVectorOp | kernel.StoreVectorOp | kernel.LdmatrixOp):
            buffers.add(op.memref)
    return buffers


def _wgmma_buffers(func: kernel.FuncOp) -> set[SSAValue]:
    """Shared arrays a wgmma descriptor points into (aligned to `OPERAND_ALIGNMENT`)."""
    return {op.memref for op in func.walk() if isinstance(op, kernel.WgmmaDescOp)}


@dataclass(frozen=True)
class PrintedKernel:
    """One kernel's CUDA C and the facts about it the host code needs."""

    #: The `extern "C" __global__` function, without `#include` lines.
    source: str
    #: The headers it needs (`cuda_bf16.h`), each included once per translation unit.
    includes: list[str]
    #: Per argument: True when the kernel never stores to it (a `const T*` parameter).
    readonly: list[bool]
    #: Bytes of dynamic shared memory its launch must ask for (0: static arrays only).
    dynamic_shared_bytes: int = 0


class KernelPrinter:
    """Prints one `kernel.func`; `print_kernel(func)` is the entry point."""

    def __init__(self, func: kernel.FuncOp):
        self.func = func
        self.index_type = "long long" if needs_64bit_index(func) else "int"
        self.lines: list[str] = []
        self.depth = 1
        self.used_names: set[str] = set(RESERVED_NAMES) | {func.sym_name.data}
        self.values: dict[SSAValue, Expr] = {}
        self.counter = 0
        self._nonneg: dict[SSAValue, bool] = {}
        self.scalar_ctx = ScalarContext(self.index_type, self.nonneg)
        #: Past the static limit, the next shared array's byte offset in dynamic shared memory.
        self.dynamic_offset: int | None = 0 if needs_dynamic_shared(func.shared_bytes()) else None
        self.unread = unread_ops(func)
        #: C variables that hold a wgmma's accumulator registers (a next wgmma reuses them).
        self.accumulators: set[str] = set()

    # ---- names ---------------------------------------------------------------------------

    def unique(self, base: str) -> str:
        return unique_name(base, self.used_names)

    def fresh(self, value: SSAValue, fallback: str = "v") -> str:
        """A C name for `value`: its sanitized name hint, else `<fallback><N>`."""
        base = re.sub(r"\W", "_", value.name_hint or "")
        if base and (base[0].isdigit() or base.startswith("__")):
            base = f"{fallback}_{base}"
        if not base:
            base = f"{fallback}{self.counter}"
            self.counter += 1
        return self.unique(base)

    def line(self, text: str) -> None:
        self.lines.append(INDENT * self.depth + text)

    def ctype(self, t: Attribute) -> str:
        return c_type(t, self.index_type)

    def declare(self, value: SSAValue, expr: Expr, const: bool = True) -> str:
        var = self.fresh(value)
        qual = "const " if const else ""
        self.line(f"{qual}{self.ctype(value.type)} {var} = {expr.text};")
        self.values[value] = name(var)
        return var

    # ---- analysis ------------------------------------------------------------------------

    def nonneg(self, value: SSAValue) -> bool:
        """Whether an integer value is provably >= 0 (then `/` and `%` are floor ops)."""
        if value not in self._nonneg:
            self._nonneg[value] = False  # cycles (iter_args) are not provable
            self._nonneg[value] = self._compute_nonneg(value)
        return self._nonneg[value]

    def _compute_nonneg(self, value: SSAValue) -> bool:
        if isinstance(value, BlockArgument):
            owner = value.block.parent_op()
            return isinstance(owner, kernel.ForOp) and value.index == 0 and self.nonneg(owner.lb)
        op = value.owner
        match op:
            case kernel.ThreadIdOp() | kernel.BlockIdOp():
                return True
            case arith.ConstantOp():
                v = getattr(op.value, "value", None)
                return v is not None and v.data >= 0
            case arith.AddiOp() | arith.MuliOp() | arith.DivSIOp() | arith.RemSIOp():
                return all(self.nonneg(o) for o in op.operands)
            case arith.FloorDivSIOp() | arith.CeilDivSIOp() | arith.MinSIOp():
                return all(self.nonneg(o) for o in op.operands)
            case arith.MaxSIOp():
                return any(self.nonneg(o) for o in op.operands)
            case arith.SelectOp():
                return self.nonneg(op.operands[1]) and self.nonneg(op.operands[2])
            case arith.IndexCastOp() | arith.ExtSIOp() | arith.ExtUIOp():
                return self.nonneg(op.operands[0])
            case _:
                return False

    def inlinable(self, op: Operation, expr: Expr) -> bool:
        """A pure single-use scalar op whose user is in the same block is printed inline."""
        if len(op.results) != 1 or len(expr.text) > INLINE_LIMIT:
            return False
        uses = list(op.results[0].uses)
        if len(uses) != 1:
            return False
        user = uses[0].operation
        if isinstance(user, kernel.YieldOp) and len(user.operands) > 1:
            return False  # parallel assignment of iter_args reads plain variables
        return user.parent_block() is op.parent_block()

    # ---- printing ------------------------------------------------------------------------

    def print_kernel(self) -> PrintedKernel:
        func = self.func
        stored = written_buffers(func)
        params = []
        for arg in func.body.block.args:
            assert isinstance(arg.type, MemRefType)
            var = self.fresh(arg, "arg")
            qual = "" if arg in stored else "const "
            params.append(f"{qual}{element_c_type(arg.type.element_type)}* __restrict__ {var}")
            self.values[arg] = name(var)
        head = (
            f'extern "C" __global__ void __launch_bounds__({func.block_size}) '
            f"{func.sym_name.data}({', '.join(params)}) {{"
        )
        self.print_block(func.body.block)
        source = "\n".join([head, *self.lines, "}"]) + "\n"
        readonly = [arg not in stored for arg in func.body.block.args]
        dynamic = self.dynamic_offset or 0
        if dynamic > MAX_SHARED_BYTES:
            raise PrinterError(
                f"its shared arrays take {dynamic} bytes on 16-byte boundaries, more than the "
                f"{MAX_SHARED_BYTES} a block may have"
            )
        return PrintedKernel(source, includes(func), readonly, dynamic)

    def print_block(self, block: Block) -> None:
        for op in block.ops:
            self.print_op(op)

    def operand(self, value: SSAValue) -> Expr:
        return self.values[value]

    def element(self, buf: SSAValue, indices: Iterable[SSAValue]) -> str:
        assert isinstance(buf.type, MemRefType)
        offset = linear_index([self.operand(i) for i in indices], buf.type.get_shape())
        return f"{self.operand(buf).text}[{offset.text}]"

    def print_op(self, op: Operation) -> None:
        if op in self.unread:
            return
        match op:
            case kernel.ThreadIdOp():
                self.declare(op.result, name("threadIdx.x"))
            case kernel.BlockIdOp():
                self.declare(op.result, name("blockIdx.x"))
            case kernel.SharedAllocOp():
                t = op.result.type
                var = self.fresh(op.result, "smem")
                align = (
                    f"__align__({MAX_VECTOR_BYTES}) "
                    if op.result in _vector_aligned_buffers(self.func)
                    else ""
                )
                wgmma_operand = op.result in _wgmma_buffers(self.func)
                if wgmma_operand:
                    align = f"__align__({OPERAND_ALIGNMENT}) "
                ctype = element_c_type(t.element_type)
                if wgmma_operand and self.dynamic_offset is not None:
                    raise PrinterError("a wgmma operand in dynamic shared memory is not supported")
                if self.dynamic_offset is None:
                    self.line(f"__shared__ {align}{ctype} {var}[{_elements(t)}];")
                else:
                    offset = self.dynamic_offset
                    self.line(f"DD_DYNAMIC_SHARED({ctype}, {var}, {_elements(t)}, {offset});")
                    size = buffer_bytes(t)
                    self.dynamic_offset += -(-size // MAX_VECTOR_BYTES) * MAX_VECTOR_BYTES
                self.values[op.result] = name(var)
            case kernel.CpAsyncOp():
                dst = self.element(op.dst, op.dst_indices)
                src = self.element(op.src, op.src_indices)
                pred = "true" if op.pred is None else self.operand(op.pred).text
                self.line(f"dd_cp_async_{op.num_bytes}(&{dst}, &{src}, {pred});")
            case kernel.CpAsyncCommitOp():
                self.line("dd_cp_async_commit();")
            case kernel.CpAsyncWaitOp():
                self.line(f"dd_cp_async_wait<{op.groups}>();")
            case kernel.LoadVectorOp():
                self.print_load_vector(op)
            case kernel.StoreVectorOp():
                args = self.vector_args(op.memref, op.width)
                values = ", ".join(self.operand(v).text for v in op.values)
                at = self.element(op.memref, op.indices)
                self.line(f"dd_store_vector<{args}>(&{at}, dd_vec<{args}>{{{{{values}}}}});")
            case kernel.LoadOp():
                self.declare(op.res, name(self.element(op.memref, op.indices)))
            case kernel.StoreOp():
                value = self.operand(op.value).text
                self.line(f"{self.element(op.memref, op.indices)} = {value};")
            case kernel.AtomicAddOp():
                value = self.operand(op.value).text
                self.line(f"atomicAdd(&{self.element(op.memref, op.indices)}, {value});")
            case kernel.BarrierOp():
                self.line("__syncthreads();")
            case kernel.ShflXorOp():
                v = self.operand(op.value).text
                mask = op.mask.value.data
                full = f"{FULL_WARP_MASK:#x}u"
                self.declare(op.result, name(f"__shfl_xor_sync({full}, {v}, {mask})"))
            case kernel.MmaSyncOp():
                self.print_mma_sync(op)
            case kernel.LdmatrixOp():
                self.print_ldmatrix(op)
            case kernel.WgmmaDescOp():
                self.print_wgmma_desc(op)
            case kernel.WgmmaFenceOp():
                self.line("dd_wgmma_fence();")
            case kernel.WgmmaOp():
                self.print_wgmma(op)
            case kernel.WgmmaCommitOp():
                self.line("dd_wgmma_commit();")
            case kernel.WgmmaWaitOp():
                self.line(f"dd_wgmma_wait<{op.groups}>();")
            case kernel.SplitTf32Op():
                hi, lo = self.fresh(op.hi, "hi"), self.fresh(op.lo, "lo")
                self.line(f"float {hi}, {lo};")
                self.line(f"{SPLIT_TF32_HELPER}({self.operand(op.input).text}, {hi}, {lo});")
                self.values[op.hi], self.values[op.lo] = name(hi), name(lo)
            case kernel.ForOp():
                self.print_for(op)
            case kernel.IfOp():
                self.line(f"if ({self.operand(op.cond).text}) {{")
                self.depth += 1
                self.print_block(op.body.block)
                self.depth -= 1
                self.line("}")
            case kernel.YieldOp() | kernel.ReturnOp():
                pass  # loops assign their iter_args themselves; the kernel just ends
            case _ if is_pure(op):  # a C expression, inlined where used once
                self.print_scalar(op)
            case _:
                raise PrinterError(f"no CUDA C translation for {op.name}")

    def vector_args(self, buf: SSAValue, width: int) -> str:
        """`float, 4`: the template arguments of a vector of `width` elements of `buf`."""
        assert isinstance(buf.type, MemRefType)
        return f"{element_c_type(buf.type.element_type)}, {width}"

    def print_load_vector(self, op: kernel.LoadVectorOp) -> None:
        args = self.vector_args(op.memref, op.width)
        base = re.sub(r"\W", "_", op.res[0].name_hint or "")
        var = self.unique(f"{base}_vec" if base and not base[0].isdigit() else "vec")
        at = self.element(op.memref, op.indices)
        self.line(f"const dd_vec<{args}> {var} = dd_load_vector<{args}>(&{at});")
        for k, result in enumerate(op.res):
            self.declare(result, name(f"{var}.v[{k}]"))

    def print_mma_sync(self, op: kernel.MmaSyncOp) -> None:
        """`float d0, ...;` then one `dd_mma_m16n8k16(d0, ..., a0, ..., c3);`: the helper
        writes D through references, so the results are plain (non-const) variables."""
        results = [self.fresh(d, "d") for d in op.d]
        self.line(f"{self.ctype(op.d[0].type)} {', '.join(results)};")
        operands = [self.operand(v).text for v in (*op.a, *op.b, *op.c)]
        helper = MMA_TF32_HELPER if op.is_tf32 else MMA_HELPER
        self.line(f"{helper}({', '.join([*results, *operands])});")
        for d, var in zip(op.d, results, strict=True):
            self.values[d] = name(var)

    def print_ldmatrix(self, op: kernel.LdmatrixOp) -> None:
        """`__nv_bfloat16 r0, ...;` then `dd_ldmatrix<4, false>(&s[...], r0, ...);`: the
        helper writes each lane's fragment elements through references."""
        results = [self.fresh(r, "r") for r in op.res]
        self.line(f"{self.ctype(op.res[0].type)} {', '.join(results)};")
        at = self.element(op.memref, op.indices)
        trans = "true" if op.is_trans else "false"
        self.line(f"{LDMATRIX_HELPER}<{op.count}, {trans}>(&{at}, {', '.join(results)});")
        for r, var in zip(op.res, results, strict=True):
            self.values[r] = name(var)

    # ---- wgmma (sm_90a; common/wgmma.py) ---------------------------------------------------

    def print_wgmma_desc(self, op: kernel.WgmmaDescOp) -> None:
        """`const unsigned long long da = dd_wgmma_desc(&a_s[i], a_s, 0x...ull);`: the
        descriptor's fields other than the start address, encoded here (their one home)."""
        fields = op.descriptor(0).encode()
        at = self.element(op.memref, op.indices)
        array = self.operand(op.memref).text
        self.declare(op.res, name(f"dd_wgmma_desc(&{at}, {array}, {fields:#x}ull)"))

    def print_wgmma(self, op: kernel.WgmmaOp) -> None:
        """`float d0 = c0, ...;` then the PTX inline (its operand list grows with N) for the
        GPU, `dd_wgmma_emulate<N>(...)` for the CPU (`cpu_simt.h`). An accumulator that is
        the only use of an earlier wgmma's result is that result's variable, updated in
        place: copying it would read a register the earlier wgmma may still be writing."""
        results, fresh = [], []
        for c, d in zip(op.c, op.d, strict=True):
            init = self.operand(c).text
            if init in self.accumulators and c.has_one_use():
                results.append(init)  # chained in place: no copy of a register in flight
                continue
            results.append(self.fresh(d, "d"))
            fresh.append(f"{results[-1]} = {init}")
        if fresh:
            self.line(f"float {', '.join(fresh)};")
        self.accumulators.update(results)
        da, db = self.operand(op.a_desc).text, self.operand(op.b_desc).text
        assert isinstance(op.a_buf.type, MemRefType)
        element = {"bf16": "bf16", "f16": "f16", "f32": "tf32"}[str(op.a_buf.type.element_type)]
        n = len(results)
        ptx = ptx_wgmma(op.shape, element, [f"%{i}" for i in range(n)], f"%{n}", f"%{n + 1}")
        outputs = ", ".join(f'"+f"({d})' for d in results)
        self.line("#if defined(__CUDA_ARCH__)")
        self.line(
            f'asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, 1, 0;\\n{ptx}\\n}}\\n" '
            f': {outputs} : "l"({da}), "l"({db}) : "memory");'
        )
        self.line("#elif !defined(__CUDACC__)")
        a, b = self.operand(op.a_buf).text, self.operand(op.b_buf).text
        targets = ", ".join(f"&{d}" for d in results)
        self.line(f"dd_wgmma_emulate<{op.shape.n}>({da}, {db}, {a}, {b}, {{{targets}}});")
        self.line("#endif")
        for d, var in zip(op.d, results, strict=True):
            self.values[d] = name(var)

    def print_scalar(self, op: Operation) -> None:
        if len(op.results) != 1:
            raise PrinterError(f"no CUDA C translation for {op.name}")
        expr = scalar_expr(op, [self.operand(o) for o in op.operands], self.scalar_ctx)
        if expr.const is not None or self.inlinable(op, expr):
            self.values[op.results[0]] = expr  # a literal, or inlined into its single user
        else:
            self.declare(op.results[0], expr)

    def print_for(self, op: kernel.ForOp) -> None:
        carried: list[tuple[str, str]] = []  # (C type, variable) per iter_arg
        for arg, init, res in zip(op.iter_args, op.inits, op.res, strict=True):
            var = self.fresh(arg if arg.name_hint else res, "acc")
            ctype = self.ctype(arg.type)
            self.line(f"{ctype} {var} = {self.operand(init).text};")
            self.values[arg] = self.values[res] = name(var)
            carried.append((ctype, var))
        iv = self.fresh(op.induction_var, "i")
        self.values[op.induction_var] = name(iv)
        step = "++" + iv if op.step_value == 1 else f"{iv} += {op.step_value}"
        lb = self.operand(op.lb).text
        if "unroll" in op.attributes:  # marked by tile-unroll: a small constant trip count
            self.line("#pragma unroll")
        self.line(f"for ({self.index_type} {iv} = {lb}; {iv} < {op.upper}; {step}) {{")
        self.depth += 1
        self.print_block(op.body.block)
        terminator = op.body.block.last_op
        if carried and isinstance(terminator, kernel.YieldOp):
            self.assign_carried(carried, [self.operand(v) for v in terminator.arguments])
        self.depth -= 1
        self.line("}")

    def assign_carried(self, carried: list[tuple[str, str]], values: list[Expr]) -> None:
        """`acc = next;` per iter_arg, via temporaries when one reads a variable already updated."""
        pending = [(t, v, e) for (t, v), e in zip(carried, values, strict=True) if e.text != v]
        assigned: set[str] = set()
        clash = False
        for _, var, e in pending:
            clash = clash or e.text in assigned
            assigned.add(var)
        if clash:
            temps = []
            for ctype, var, e in pending:
                tmp = self.unique(f"{var}_next")
                self.line(f"const {ctype} {tmp} = {e.text};")
                temps.append((ctype, var, name(tmp)))
            pending = temps
        for _, var, e in pending:
            self.line(f"{var} = {e.text};")


def print_kernel(func: kernel.FuncOp) -> PrintedKernel:
    """The CUDA C of one kernel, its headers and which arguments it only reads."""
    return KernelPrinter(func).print_kernel()
