// cpu_simt.h for the CPU emulation: the translation unit starts with the header itself.
#pragma once
