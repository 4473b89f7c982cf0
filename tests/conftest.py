"""Session-wide test isolation.

`deplodock compile` and `run` replay the schedules of the tune cache under
`$XDG_CACHE_HOME/deplodock/`, so a developer's tuned kernels would change what the tests
see. The session gets its own cache root (the nvcc build cache and capture cache there start
empty, as they do in CI); a test that needs another still sets its own.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

_ROOT = tempfile.mkdtemp(prefix="deplodock-test-cache-")
os.environ["XDG_CACHE_HOME"] = _ROOT
atexit.register(shutil.rmtree, _ROOT, ignore_errors=True)
