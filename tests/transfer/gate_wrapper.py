"""An exec_prefix for a test host: a command's stdout stops after LIMIT bytes until GATE
exists, then flows on (usage: gate_wrapper.py GATE LIMIT -- COMMAND...).

A test that cuts a relay's connections mid-way needs the source still unread when the
cut lands. Worker processes read ahead of what the engine hears from them, and on a busy
machine the engine can hear of the first byte after the last one was read; holding each
of the source's streams at LIMIT bytes until the test has cut (and made GATE) removes
that race instead of hoping the cut is early enough.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time


def main() -> int:
    gate, limit = sys.argv[1], int(sys.argv[2])
    command = sys.argv[4:] if sys.argv[3] == "--" else sys.argv[3:]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE)  # stdin and stderr: ours
    assert proc.stdout is not None
    out = sys.stdout.buffer
    passed = 0
    try:
        while chunk := proc.stdout.read1(1 << 16):
            free = max(0, limit - passed)
            if len(chunk) > free and not os.path.exists(gate):
                out.write(chunk[:free])
                out.flush()
                passed += free
                chunk = chunk[free:]
                while not os.path.exists(gate):
                    time.sleep(0.01)
            out.write(chunk)
            out.flush()
            passed += len(chunk)
    except BrokenPipeError:  # the session was cut: so is this side of it
        proc.kill()
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main())
