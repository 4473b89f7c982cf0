#!/usr/bin/env bash
# A lent GPU session in one call, within 9 minutes from a bare H100 or H200 (bench/gpu_session.py
# says what runs, in which order, and why):
#
#   bash bench/gpu_session.sh                       # on the GPU machine, from the repo root
#   bash bench/gpu_session.sh --budget 540 --out "$OUT"
#   bash bench/gpu_session.sh --emulate             # anywhere: the plan on a virtual clock
#   bash bench/gpu_session.sh --plan                # the steps, their expected times and why
#
# Results are packed into $OUT/results.tgz (default /tmp/gpu-session-out) after every step.
# The machine needs its own torch with CUDA and nvcc; `.gpu/` carries the rest from the CPU
# machine (`bash bench/prepare_gpu_session.sh` makes it: wheels, cubins, the commit).
set -u
export PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1
export XDG_CACHE_HOME="$PWD/.gpu/cache"          # the cubins and sweep modules built ahead
export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
exec "${PYTHON:-python3}" -m bench.gpu_session "$@"
