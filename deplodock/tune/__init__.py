"""The autotuner: SP-MCTS over the schedule knobs the tile passes declare (issue #11).

- `kernels.py`: one loop kernel on its own, and its structural hash;
- `space.py`: its schedule space, one tree level per tunable pass;
- `mcts.py`: the search;
- `check.py`: each candidate against the loop level, in the CPU interpreter;
  `footprint.py`: which blocks write and read which elements, so it may run a sample;
- `evaluate.py`: the performance model as the score; `measure.py`: a GPU;
- `cache.py`: the results, in SQLite; `replay.py`: the winners back into a compile;
- `tuner.py`: a program's kernels, one after the other, under one budget;
- `report.py`: the ranked table and the best-so-far chart.
"""
