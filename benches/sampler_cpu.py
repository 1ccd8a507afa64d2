#!/usr/bin/env python3
"""CPU cost of the telemetry sampler on a node, measured from /proc.

Runs src/telemetry/sampler.sh exactly as flightdeck does (`sh -c SCRIPT flightdeck-sampler
MS`) in its own process group, reads its records from a pipe (as the SSH channel would),
and after a warm-up sums utime+stime of every process in the group (the shell, its
nvidia-smi readers) plus the children they reaped (date, sleep), at the start and the end
of the measuring window. Prints the CPU time per record and as a share of one core.

Usage: python3 benches/sampler_cpu.py [SECONDS=60] [INTERVAL_MS=1000] [SHELL=sh]
"""
import os
import select
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = open(os.path.join(HERE, "..", "src", "telemetry", "sampler.sh")).read()
TICK = os.sysconf("SC_CLK_TCK")


def group_ticks(pgid):
    """utime+stime+cutime+cstime of every process in the process group, in ticks."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        # fields[0] is field 3 (state); pgrp is field 5, utime..cstime are 14..17.
        if int(fields[2]) != pgid:
            continue
        total += sum(int(x) for x in fields[11:15])
    return total


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
    ms = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    shell = sys.argv[3] if len(sys.argv) > 3 else "sh"
    p = subprocess.Popen([shell, "-c", SCRIPT, "flightdeck-sampler", str(ms)],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    records = 0
    buf = b""

    def pump(until):
        nonlocal records, buf
        while time.monotonic() < until:
            r, _, _ = select.select([p.stdout], [], [], 0.05)
            if r:
                chunk = os.read(p.stdout.fileno(), 65536)
                if not chunk:
                    raise SystemExit("the sampler exited")
                buf += chunk
                *lines, buf = buf.split(b"\n")
                records += sum(1 for l in lines if l.startswith(b"@e "))

    pump(time.monotonic() + 3.0)  # warm-up: clock and GPU probes, first records
    t0, c0, r0 = time.monotonic(), group_ticks(p.pid), records
    pump(t0 + seconds)
    t1, c1, r1 = time.monotonic(), group_ticks(p.pid), records
    os.killpg(p.pid, signal.SIGTERM)
    p.wait()
    cpu = (c1 - c0) / TICK
    n = r1 - r0
    print(f"interval {ms} ms, {shell}: {n} records in {t1 - t0:.1f} s; "
          f"CPU {cpu * 1000:.0f} ms = {100 * cpu / (t1 - t0):.3f}% of one core, "
          f"{1000 * cpu / max(n, 1):.2f} ms per record (clock tick {1000 / TICK:.0f} ms)")


if __name__ == "__main__":
    main()
