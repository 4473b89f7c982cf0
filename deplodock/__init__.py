"""deplodock: a hackable ML compiler from PyTorch to CUDA, built on xDSL."""
