#!/usr/bin/env python3
"""The reference model of hierarchical critical path analysis (docs/hcpa.md), written
separately from the runtime: it replays a trace of the timestamp events one thread made
(the runtime's `hcpa_trace=` option) with plain dictionaries, no versions, no shadow
memory, and prints per-region statistics as JSON.

Every value keeps its time per *instance* it was produced in (a dict from instance id to
time); reading it at a level looks up that level's current instance, and a value from
another instance reads 0. That is the definition, without the runtime's optimisations.

Usage: reference.py TRACE [--granularity G] [--regions REPORT] > stats.json

With `--regions`, the runtime's report names the compiler's copies of a source region (a
function and its inlined calls, a loop split in two, a loop in each copy of an inlined
function: docs/report-schema.md, "Source regions"), and recursion counts once per source
region; without it, per region.
Trace lines (one event each; `s:o` is a candidate, slot s plus offset o, s = 4294967295
for a constant):
    enter R | exit R | frame SLOTS FN | work COST | ts DST s:o... | hoist DST s:o...
    phi DST SRC OFF COND
    load DST ADDR SIZE COST s:o... | store ADDR SIZE COST s:o...
    mem DST SRC LEN COST8 s:o... | call FN | arg I s:o... | ret s:o... | result DST COST
    leaf WORK CP R... (a static leaf, inside the calls before it that hold nothing else)
"""

import json
import sys
from collections import defaultdict

NONE = 0xFFFFFFFF


class Level:
    def __init__(self, region, instance):
        self.region = region
        self.instance = instance
        self.work = 0
        self.cp = 0
        self.children_work = 0
        self.children_cp = 0


def source_regions(report_path):
    """Each region id of a report -> the first region of its source region: functions by
    linkage name (name without one) and file, a loop by its parent's source region and its
    first line, a body by its loop's source region."""
    with open(report_path) as f:
        regions = json.load(f)["regions"]
    first, source = {}, {}
    for r in regions:  # parents come before their children
        if r["kind"] == "function":
            key = ("function", r.get("symbol") or r["name"], r["file"])
        elif r["kind"] == "loop":
            key = ("loop", source.get(r["parent"]), r["line"])
        else:
            key = ("body", source.get(r["parent"]))
        source[r["id"]] = first.setdefault(key, r["id"])
    return source


class Model:
    def __init__(self, granularity, max_depth, source=None):
        self.granularity = granularity
        self.max_depth = max_depth
        self.source = source or {}
        self.levels = []
        self.next_instance = 0
        self.frames = []  # (depth, {slot: {instance: time}})
        self.memory = {}  # granule -> {instance: time}
        self.pending = []  # dicts: depth, fn, args, entered, returned
        self.stats = defaultdict(lambda: defaultdict(float))
        self.parents = defaultdict(set)
        self.program = {"work": 0, "critical_path": 0}
        self.skipped = 0

    # Levels ---------------------------------------------------------------------------
    def analysed(self):
        return self.levels[: self.max_depth]

    def enter(self, region):
        self.next_instance += 1
        if self.levels and len(self.levels) < self.max_depth:
            self.parents[region].add(self.levels[-1].region)
        self.levels.append(Level(region, self.next_instance))

    def exit(self, region):
        depth = len(self.levels) - 1
        level = self.levels.pop()
        assert level.region == region, "unbalanced trace"
        self.frames = [f for f in self.frames if f[0] < depth]
        self.pending = [p for p in self.pending if p["depth"] < depth]
        if depth >= self.max_depth:
            self.skipped += 1
            return
        self_work = level.work - level.children_work
        sp = (self_work + level.children_cp) / level.cp if level.cp else 1.0
        s = self.stats[region]
        s["instances"] += 1
        s["self_work"] += self_work
        s["sp_denominator"] += level.work / sp
        s["instance_work"] += level.work
        mine = self.source.get(region, region)
        if not any(self.source.get(l.region, l.region) == mine for l in self.levels):
            s["work"] += level.work
            s["critical_path"] += level.cp
        if self.levels:
            parent = self.levels[-1]
            parent.children_work += level.work
            parent.children_cp += level.cp
        else:
            self.program["work"] += level.work
            self.program["critical_path"] += level.cp

    def leaf(self, regions, work, cp):
        """A static leaf inside calls that hold nothing but it (`regions`, outermost first):
        an instance of each, one inside the other, with this work and critical path."""
        base = len(self.levels)
        for region in regions:
            self.enter(region)
        self.work(work)
        for level in self.levels[base : self.max_depth]:
            level.cp = cp
        for region in reversed(regions):
            self.exit(region)

    # Times ----------------------------------------------------------------------------
    def read(self, times, depth):
        """A value's time at each analysed level (0 when produced in another instance)."""
        return [times.get(l.instance, 0) for l in self.analysed()[:depth]]

    def slot_times(self, slot):
        if slot == NONE or not self.frames:
            return None
        return self.frames[-1][1].get(slot, {})

    def max_of(self, cands, extra=()):
        n = len(self.analysed())
        t = [0] * n
        for slot, offset in cands:
            times = self.slot_times(slot)
            values = [0] * n if times is None else self.read(times, n)
            t = [max(a, b + offset) for a, b in zip(t, values)]
        for times in extra:
            values = self.read(times, n)
            t = [max(a, b) for a, b in zip(t, values)]
        return t

    def as_times(self, t):
        return {l.instance: x for l, x in zip(self.analysed(), t)}

    def produce(self, t, dst=None):
        for l, x in zip(self.analysed(), t):
            l.cp = max(l.cp, x)
        if dst is not None and dst != NONE and self.frames:
            self.frames[-1][1][dst] = self.as_times(t)

    def granules(self, addr, size):
        g = self.granularity
        return range(addr // g, (addr + size - 1) // g + 1) if size else range(0)

    # Events ---------------------------------------------------------------------------
    def work(self, cost):
        for l in self.analysed():
            l.work += cost

    def frame(self, slots, fn):
        depth = len(self.levels) - 1
        values = {}
        top = self.pending[-1] if self.pending else None
        if top and top["fn"] == fn and top["depth"] == depth - 1 and not top["entered"]:
            top["entered"] = True
            for i, times in top["args"].items():
                values[i] = times
        self.frames.append((depth, values))

    def ts(self, dst, cands):
        self.produce(self.max_of(cands), dst)

    def hoist(self, dst, cands):
        """As ts, without raising any critical path."""
        if dst != NONE and self.frames:
            self.frames[-1][1][dst] = self.as_times(self.max_of(cands))

    def phi(self, dst, src, off, cond):
        self.produce(self.max_of([(src, off), (cond, 0)]), dst)

    def load(self, dst, addr, size, cost, cands):
        stored = [self.memory.get(g, {}) for g in self.granules(addr, size)]
        t = [x + cost for x in self.max_of(cands, stored)]
        self.produce(t, dst)

    def store(self, addr, size, cost, cands):
        t = [x + cost for x in self.max_of(cands)]
        self.produce(t)
        for g in self.granules(addr, size):
            self.memory[g] = self.as_times(t)

    def mem(self, dst, src, length, cost8, cands):
        cost = cost8 * ((length + 7) // 8)
        self.work(cost)
        stored = [self.memory.get(g, {}) for g in self.granules(src, length)] if src else []
        t = [x + cost for x in self.max_of(cands, stored)]
        self.produce(t)
        for g in self.granules(dst, length):
            self.memory[g] = self.as_times(t)

    def call(self, fn):
        depth = len(self.levels) - 1
        self.pending = [p for p in self.pending if p["depth"] < depth]
        self.pending.append({"depth": depth, "fn": fn, "args": {}, "entered": False,
                             "returned": None})

    def arg(self, index, cands):
        t = self.max_of(cands)
        self.produce(t)  # the argument's folded computation is on the caller's paths
        if self.pending and self.pending[-1]["depth"] == len(self.levels) - 1:
            self.pending[-1]["args"][index] = self.as_times(t)

    # The call protocol (which pending call a return or a result belongs to), whatever the
    # times are: bench/hcpa-frontiers.py replays it with other times.
    def returning_call(self):
        """The pending call that entered the function now returning, or None."""
        depth = len(self.levels) - 1
        for p in reversed(self.pending):
            if p["depth"] < depth and p["entered"]:
                return p
        return None

    def take_call(self):
        """Closes the pending calls made at this level (and deeper); the innermost of this
        level's, or None."""
        depth = len(self.levels) - 1
        mine = [p for p in self.pending if p["depth"] == depth]
        self.pending = [p for p in self.pending if p["depth"] < depth]
        return mine[-1] if mine else None

    def ret(self, cands):
        # The returned value, for the pending call that entered this function.
        t = self.max_of(cands)
        self.produce(t)  # so is the returned value's
        call = self.returning_call()
        if call:
            call["returned"] = self.as_times(t)

    def result(self, dst, cost):
        call = self.take_call()
        n = len(self.analysed())
        if call and call["entered"] and call["returned"] is not None:
            t = self.read(call["returned"], n)
            if dst != NONE and self.frames:
                self.frames[-1][1][dst] = self.as_times(t)
            return
        # Not instrumented (charged its cost), or entered and left without returning (a
        # longjmp or an exception out of it, to this level): the arguments' times.
        t = [0] * n
        for times in (call["args"].values() if call else []):
            t = [max(a, b) for a, b in zip(t, self.read(times, n))]
        if call and call["entered"]:
            self.produce(t, dst)
            return
        self.work(cost)
        self.produce([x + cost for x in t], dst)


def candidates(words):
    out = []
    for w in words:
        s, o = w.split(":")
        out.append((int(s), int(o)))
    return out


def replay(lines, model):
    for line in lines:
        f = line.split()
        if not f:
            continue
        op, a = f[0], f[1:]
        if op == "enter":
            model.enter(int(a[0]))
        elif op == "exit":
            model.exit(int(a[0]))
        elif op == "frame":
            model.frame(int(a[0]), int(a[1], 16))
        elif op == "leaf":
            model.leaf([int(r) for r in a[2:]], int(a[0]), int(a[1]))
        elif op == "work":
            model.work(int(a[0]))
        elif op == "ts":
            model.ts(int(a[0]), candidates(a[1:]))
        elif op == "hoist":
            model.hoist(int(a[0]), candidates(a[1:]))
        elif op == "phi":
            model.phi(*map(int, a[:4]))
        elif op == "load":
            model.load(int(a[0]), int(a[1], 16), int(a[2]), int(a[3]), candidates(a[4:]))
        elif op == "store":
            model.store(int(a[0], 16), int(a[1]), int(a[2]), candidates(a[3:]))
        elif op == "mem":
            model.mem(int(a[0], 16), int(a[1], 16), int(a[2]), int(a[3]), candidates(a[4:]))
        elif op == "call":
            model.call(int(a[0], 16))
        elif op == "arg":
            model.arg(int(a[0]), candidates(a[1:]))
        elif op == "ret":
            model.ret(candidates(a))
        elif op == "result":
            model.result(int(a[0]), int(a[1]))
        else:
            raise SystemExit(f"unknown trace event: {line!r}")


def main():
    args = sys.argv[1:]
    granularity, max_depth = 4, 64
    if "--granularity" in args:
        i = args.index("--granularity")
        granularity = int(args[i + 1])
        del args[i : i + 2]
    if "--max-depth" in args:
        i = args.index("--max-depth")
        max_depth = int(args[i + 1])
        del args[i : i + 2]
    source = None
    if "--regions" in args:
        i = args.index("--regions")
        source = source_regions(args[i + 1])
        del args[i : i + 2]
    model = Model(granularity, max_depth, source)
    with open(args[0]) as f:
        replay(f, model)
    while model.levels:  # the program ended with regions open
        model.exit(model.levels[-1].region)
    regions = {}
    for region, s in sorted(model.stats.items()):
        work = int(s["work"])
        cp = int(s["critical_path"])
        regions[str(region)] = {
            "instances": int(s["instances"]),
            "work": work,
            "self_work": int(s["self_work"]),
            "critical_path": cp,
            "self_parallelism": s["instance_work"] / s["sp_denominator"]
            if s["sp_denominator"] else 1.0,
            "parents": sorted(model.parents[region]),
        }
    json.dump({"program": model.program, "skipped_instances": model.skipped,
               "regions": regions}, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
