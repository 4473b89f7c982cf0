"""The LLM kernel benchmark suite: `python -m bench.kernels` (see bench/kernels.py)."""
