#!/usr/bin/env python3
"""Start-up time to first frame, measured from outside the process.

Runs the release binary in a fresh pseudo-terminal (160x48) with an empty
FLIGHTDECK_HOME, and times from just before fork/exec until the first frame is complete
on the pty (the end of its synchronized update, ESC[?2026l); then sends `q` and waits
for a clean exit. Repeats N times and prints min, median, p95 and max.

Usage: cargo build --release && python3 benches/startup.py [N]
"""
import fcntl
import os
import pty
import select
import statistics
import struct
import sys
import tempfile
import termios
import time

BIN = os.path.join(os.path.dirname(__file__), "..", "target", "release", "flightdeck")
MARKER = b"\x1b[?2026l"  # end of synchronized update: the first frame is complete


def once(home):
    env = {"PATH": os.environ.get("PATH", ""), "HOME": home, "FLIGHTDECK_HOME": home,
           "TERM": "xterm-256color", "LANG": "C.UTF-8"}
    start = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 48, 160, 0, 0))
        os.execve(BIN, [BIN], env)
    seen = b""
    first = None
    deadline = start + 10
    while first is None and time.perf_counter() < deadline:
        r, _, _ = select.select([fd], [], [], 0.5)
        if r:
            try:
                seen += os.read(fd, 65536)
            except OSError:
                break
            if MARKER in seen:
                first = time.perf_counter() - start
    os.write(fd, b"q")
    while True:
        try:
            r, _, _ = select.select([fd], [], [], 2)
            if not r or not os.read(fd, 65536):
                break
        except OSError:
            break
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    if first is None:
        raise SystemExit(f"no first frame within 10 s; output: {seen[-400:]!r}")
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"flightdeck exited with {status}")
    return first


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    with tempfile.TemporaryDirectory() as home:
        once(home)  # warm the page cache
        times = sorted(once(home) * 1000 for _ in range(n))
    p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]
    print(f"start-up to first frame, {n} runs, ms: min {times[0]:.1f}  median "
          f"{statistics.median(times):.1f}  p95 {p95:.1f}  max {times[-1]:.1f}")


if __name__ == "__main__":
    main()
