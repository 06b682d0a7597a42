#!/usr/bin/env python3
"""ab.py ROUNDS NAME=COMMAND... - an interleaved A/B of whole commands.

Runs each COMMAND once per round, the order rotated every round, and
prints for each its median wall time and CPU time (its own and every
descendant's it waited for), and the median of its per-round ratios to
the first COMMAND. Ratios of the same round are taken at the same
moment, so load that drifts during a run moves both sides of each ratio;
the medians of BENCH.md's A/Bs are this script's.

A COMMAND is split on blanks, never given to a shell. Each must exit 0.

Two builds compared this way must both be fresh copies, made just before
(cp BUILD DIR/ctx for each): a binary's page cache decides much of its
start, and one written an hour before, evicted and faulted back in by
execs, costs up to a fifth more CPU than a copy written a moment ago
(BENCH.md, "The sandbox start, issue 35's third round").
"""

import os
import resource
import statistics
import subprocess
import sys
import time


def main(argv):
    if len(argv) < 3 or not argv[1].isdigit() or any("=" not in a for a in argv[2:]):
        sys.stderr.write("usage: ab.py ROUNDS NAME=COMMAND NAME=COMMAND...\n")
        return 2
    rounds = int(argv[1])
    cmds = [a.split("=", 1) for a in argv[2:]]
    wall = {n: [] for n, _ in cmds}
    cpu = {n: [] for n, _ in cmds}
    with open(os.devnull, "w") as null:
        for r in range(rounds):
            k = r % len(cmds)
            for name, cmd in cmds[k:] + cmds[:k]:
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.monotonic()
                p = subprocess.run(cmd.split(), stdout=null, stderr=null)
                t1 = time.monotonic()
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                if p.returncode != 0:
                    sys.stderr.write(f"ab.py: {name} exited {p.returncode} in round {r + 1}\n")
                    return 1
                wall[name].append(t1 - t0)
                cpu[name].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            time.sleep(0.005)
    base = cmds[0][0]
    for name, _ in cmds:
        rw = statistics.median(a / b for a, b in zip(wall[name], wall[base]))
        rc = statistics.median(a / b for a, b in zip(cpu[name], cpu[base]) if b > 0)
        print(f"{name:12s} wall {statistics.median(wall[name]) * 1000:7.2f} ms  "
              f"cpu {statistics.median(cpu[name]) * 1000:7.2f} ms  "
              f"to {base}: wall {rw:.3f} cpu {rc:.3f}")
    with open("/proc/loadavg") as f:
        print("load", " ".join(f.read().split()[:3]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
