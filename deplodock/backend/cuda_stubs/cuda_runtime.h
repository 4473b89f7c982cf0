// cuda_runtime.h for the CPU emulation: what it declares, cpu_simt.h defines (included first).
#pragma once
