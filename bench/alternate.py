#!/usr/bin/env python3
"""Two builds of one program, timed against each other: runs command A and command B
alternately N times (A B, B A, A B, ...: drift on a shared machine falls on both) and prints
the median CPU time (user + system, from wait4) and wall time of each, and B's CPU time as
a ratio to A's. Output of the commands is discarded; run it from a scratch directory, as
instrumented programs write their reports to the current one.

Usage: bench/alternate.py N command-A... -- command-B...

Example (two count builds of Lua kept aside from target/kage-bench/kage-count/lua):
    bench/alternate.py 9 /tmp/lua.before bench/programs/lua/bench.lua 150 \\
        -- /tmp/lua.after bench/programs/lua/bench.lua 150
"""
import os
import statistics
import sys
import time


def run(command):
    """Runs `command` with its output discarded; returns (CPU seconds, wall seconds)."""
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        try:
            os.execvp(command[0], command)
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    wall = time.monotonic() - start
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        sys.exit(f"alternate.py: {' '.join(command)} failed (wait status {status})")
    return usage.ru_utime + usage.ru_stime, wall


def main():
    if len(sys.argv) < 5 or "--" not in sys.argv[2:]:
        sys.exit(__doc__)
    runs = int(sys.argv[1])
    rest = sys.argv[2:]
    split = rest.index("--")
    commands = [rest[:split], rest[split + 1 :]]
    cpu, wall = [[], []], [[], []]
    for r in range(runs):
        for k in (0, 1) if r % 2 == 0 else (1, 0):
            c, w = run(commands[k])
            cpu[k].append(c)
            wall[k].append(w)
    for k, name in enumerate("AB"):
        print(
            f"{name}: CPU median {statistics.median(cpu[k]):.3f} s, wall median "
            f"{statistics.median(wall[k]):.3f} s (CPU min {min(cpu[k]):.3f} s)"
        )
    print(f"B/A CPU {statistics.median(cpu[1]) / statistics.median(cpu[0]):.3f}")


if __name__ == "__main__":
    main()
