#!/usr/bin/env python3
"""After a `kage-bench --tool footprint --variant ...` run: checks that every variant at the
same granularity reported the same footprints (every region's instances, average, minimum
and maximum bytes and lines; the totals, depth and access count), and that line counts agree
across granularities.

Usage: bench/compare-footprint.py [WORK_DIR]   (default: target/kage-bench)
"""
import json
import os
import sys

work = sys.argv[1] if len(sys.argv) > 1 else "target/kage-bench"
runs = os.path.join(work, "runs")
ok = True
for prog in sorted(os.listdir(runs)):
    reports = {}
    n = 0
    while True:
        path = os.path.join(runs, prog, f"kage.{prog}.{n}.json")
        if not os.path.exists(path):
            break
        with open(path) as f:
            r = json.load(f)
        if r.get("tool") == "footprint":
            reports[n] = r
        n += 1
    if not reports:
        continue
    groups = {}
    for n, r in reports.items():
        full = json.dumps(
            [[g["id"], g["footprint"]] for g in r["regions"]]
            + [r["total_bytes"], r["total_lines"], r["max_depth"], r["accesses"]],
            sort_keys=True,
        )
        groups.setdefault(r["granularity"], set()).add(full)
    lines = set(
        json.dumps(
            [[g["id"], {k: g["footprint"][k] for k in ("instances", "avg_lines", "min_lines", "max_lines")}]
             for g in r["regions"]] + [r["total_lines"]],
            sort_keys=True,
        )
        for r in reports.values()
    )
    same = all(len(v) == 1 for v in groups.values()) and len(lines) == 1
    ok &= same
    first = next(iter(reports.values()))
    print(
        f"{prog}: {len(reports)} reports, granularities {sorted(groups)}: "
        f"{'identical' if same else 'DIFFERENT'} "
        f"(regions entered {sum(1 for g in first['regions'] if g['footprint']['instances'] > 0)}, "
        f"max depth {first['max_depth']}, {first['accesses']} accesses)"
    )
sys.exit(0 if ok else 1)
