#!/usr/bin/env bash
# A lent GPU session in one call: set-up, the GPU tests, a measured slice of the kernel suite
# in both dtypes, and per-kernel profiles printed beside the performance model.
#
#   bash bench/gpu_session.sh [SECONDS] [TIMING]   # on the GPU machine, from the repo root
#
# A lent machine is paid by the minute, so every step has a time limit and the whole run
# stays inside SECONDS (default 540): a step that would start too late is skipped. Each
# step's log goes under /tmp/gpu-session and the folder is packed into $OUT/results.tgz after
# every step, so whatever finished comes back even when the call is cut short. TIMING is
# bench.kernels' --timing: device (the default: GPU time alone, what the performance model
# predicts; the first run, 2026-11-26, measured latency) or latency.
#
# What the machine needs beyond its PyTorch: `.gpu/wheels/` (a copy of shared/gpu/wheels:
# xdsl, pycuda, filecheck, lit and their small dependencies). `.gpu/cache/` may hold
# cubins built ahead here with `python -m bench.precompile` (a cache hit only when nvcc's
# version matches; otherwise the machine builds its own).
set -u
budget=${1:-540}
timing=${2:-device}
out=${OUT:-/tmp/gpu-session-out}
res=/tmp/gpu-session
mkdir -p "$out" "$res/bench"
export res timing  # the steps run in child shells
start=$SECONDS
export PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1 XDG_CACHE_HOME="$PWD/.gpu/cache"
export PYTHONPATH="$PWD:/tmp/site"

pack() { tar czf "$out/results.tgz" -C "$res" . 2>/dev/null; }

# step NAME SECONDS CMD...: CMD with its output in $res/NAME.log, within the session's budget.
step() {
    local name=$1 limit=$2
    shift 2
    local left=$((budget - (SECONDS - start)))
    ((left < limit)) && limit=$left
    if ((limit < 15)); then
        echo "== $name: skipped (the budget is spent)"
        return
    fi
    echo "== $name (at most ${limit}s)"
    local t0=$SECONDS
    timeout -k 5 "$limit" bash -c '"$@"' _ "$@" >"$res/$name.log" 2>&1
    echo "   rc=$? in $((SECONDS - t0))s"
    tail -n 3 "$res/$name.log" | cut -c1-200 | sed 's/^/   /'
    pack
}

setup() {
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/wheels/*.whl
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
    nvcc --version | tail -2
    python3 -c "import torch, xdsl, pycuda.autoinit; print('torch', torch.__version__, \
        torch.cuda.get_device_name(), torch.cuda.get_device_properties(0))"
}

bench_slice() {  # bench_slice DTYPE PATTERN
    python3 -m bench.kernels --dtype "$1" -k "$2" --warmup 5 --iters 25 --timing "$timing" \
        --out "$res/bench"
}

gpu_tests() {  # in parallel and with a per-test limit where the plugins are there
    local extra=()
    python3 -c "import xdist" 2>/dev/null && extra+=(-n 4)
    python3 -c "import pytest_timeout" 2>/dev/null && extra+=(--timeout 240)
    python3 -m pytest -m gpu tests/gpu -q -rs -p no:cacheprovider "${extra[@]}"
}

profile() {  # per-kernel GPU times beside the model of this device: the cases it missed most
    python3 -m deplodock run --profile -c "nn.RMSNorm(3584)(torch.randn(1, 128, 3584))"
    python3 -m deplodock run --profile -c "torch.softmax(torch.randn(1, 28, 512, 512), dim=-1)"
    python3 -m deplodock run --profile -c \
        "nn.Linear(5632, 2048, bias=False)(F.silu(torch.randn(1, 512, 5632)) * torch.randn(1, 512, 5632))"
    python3 -m deplodock run --profile -c "nn.Linear(5632, 2048, bias=False)(torch.randn(1, 512, 5632))"
}

export -f setup gpu_tests bench_slice profile
step setup 45 setup
step gpu-tests 150 gpu_tests
step profile 75 profile
# The suite in slices of 14 cases (one model and sequence length, every op), about a minute
# each on an H200: as many as the budget allows, in this order.
for slice in qwen2.5-7b/s128 tinyllama-1.1b/s512 qwen2.5-7b/s512 tinyllama-1.1b/s32 \
    qwen2.5-7b/s32 tinyllama-1.1b/s128; do
    for dtype in fp32 bf16; do
        step "bench-$dtype-${slice//\//-}" 100 bench_slice "$dtype" "$slice"
    done
done
echo "== done in $((SECONDS - start))s; results in $out/results.tgz"
