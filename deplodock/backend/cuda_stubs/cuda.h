// cuda.h for the CPU emulation: its CUtensorMap is the emulation's TensorMap2d (cpu_simt.h).
#pragma once
