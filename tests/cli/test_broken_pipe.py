"""`deplodock compile ... | head`: a reader that stops early ends the run quietly."""

from __future__ import annotations

import subprocess
import sys

SNIPPET = """
import sys
from deplodock.cli.errors import run_command

def command():
    print("first line", flush=True)
    raise BrokenPipeError(32, "Broken pipe")

sys.exit(run_command(command, "deplodock", traceback=False))
"""


def test_a_closed_pipe_is_a_quiet_success():
    result = subprocess.run(
        [sys.executable, "-c", SNIPPET], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    assert result.stderr == ""


def test_a_pipe_closed_by_the_reader_mid_output():
    """A real pipe: the reader takes one line of a long output and closes its end."""
    code = "from deplodock.cli.errors import run_command\nimport sys\n" + (
        "def command():\n"
        "    for i in range(200000):\n"
        "        print('x' * 80)\n"
        "    return 0\n"
        "sys.exit(run_command(command, 'deplodock', traceback=False))\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.readline()
    process.stdout.close()
    status = process.wait(timeout=60)
    assert status == 0
    assert process.stderr.read() == b""
