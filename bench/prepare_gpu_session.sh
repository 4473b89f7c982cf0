#!/usr/bin/env bash
# On the CPU machine, before a GPU session: fill `.gpu/` so the GPU's minutes go to timing.
#
#   bash bench/prepare_gpu_session.sh [JOBS]        # from the repo root; JOBS default 16
#
# .gpu/wheels  the project's dependencies beyond torch (shared/gpu/wheels: xdsl, pycuda, ...)
# .gpu/cache   the suite's cubins in both dtypes and the calibration sweep's modules and
#              cubins, built for sm_90 (`bench.precompile`, `bench.calibration_sweep
#              --precompile`); a GPU whose nvcc differs misses this cache and builds its own
# .gpu/commit  the commit, for session.json (a copied tree may have no git history)
set -eu
jobs=${1:-16}
mkdir -p .gpu/wheels .gpu/cache
if [ -d ../shared/gpu/wheels ]; then cp -n ../shared/gpu/wheels/*.whl .gpu/wheels/; fi
git rev-parse --short HEAD >.gpu/commit
export XDG_CACHE_HOME="$PWD/.gpu/cache"
python -m bench.precompile --dtype fp32 --dtype bf16 --jobs "$jobs"
python -m bench.calibration_sweep --precompile --jobs "$jobs" || true  # refused points: logged
echo "ready: $(du -sh .gpu | cut -f1) in .gpu/ (commit $(cat .gpu/commit))"
