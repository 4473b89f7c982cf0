"""The GPU-free performance model: what a kernel does on a GPU, and how long it would take.

Two halves, kept apart on purpose:

- **counters** (`trace.py`, `memory.py`, `instructions.py`, `occupancy.py`): facts about the
  kernel, exact for the blocks that were traced: sectors per global request, shared-memory
  wavefronts and bank conflicts, the instruction mix by pipe, unique bytes, bytes in flight,
  occupancy from ptxas' registers and shared memory;
- **the time model** (`model.py`): a small analytic model that turns counters and a device
  (`devices.py`) into a *modeled* time, with a handful of constants fitted on measurements
  (deplodock's own kernels on an H200, published H100 rows; `calibration.json`, written by
  `bench/model_calibration.py`, with each family's error band on held-out rows);
- **% of speed-of-light** (`sol.py`): the one definition every report uses, the program's
  ideal time (datasheet roofs) over its whole time, launches included.

Every figure the model prints is labelled "modeled", with its family's error band; measured
times need a GPU.
"""
