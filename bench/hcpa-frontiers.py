#!/usr/bin/env python3
"""How many distinct times does an HCPA time vector really hold? An experiment on the
reference model's traces (docs/hcpa.md, "Why every level costs").

A value's times at the open levels only change where a chain of dependences crosses the
start of an instance, so a time can be written as a *frontier*: the pairs (instance, L)
meaning "the longest chain ending here that began while `instance` was the newest one is L
long"; at level l its time is the largest L whose instance is at least level l's. A level's
critical path is then the largest L recorded with that level as its deepest, folded
outwards at each exit. This script replays a trace (the runtime's `timestamp_trace=`
option) with times as frontiers, checks that every region's statistics equal the
reference model's (so the representation is exact), and prints how many pairs the
values and stores held against how many levels were open: if frontiers were much shorter
than the open levels, the tool could do per value the work of a few levels instead of
all of them.

Usage: bench/hcpa-frontiers.py TRACE
"""

import bisect
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "hcpa"))
import reference as R  # noqa: E402

NONE = R.NONE


class Frontiers(R.Model):
    """The reference model with times as frontiers; memory, slots, arguments and results
    hold frontiers where the reference holds per-instance dictionaries."""

    def __init__(self, granularity, max_depth):
        super().__init__(granularity, max_depth)
        self.deepest = []  # per analysed level: the largest L whose deepest level it is
        self.values = []  # (open levels, pairs) per value computed
        self.stores = []  # the same per store

    def ids(self):
        return [level.instance for level in self.analysed()]

    def normalise(self, pairs):
        """One pair per set of levels (the largest L), none a smaller one covers."""
        ids = self.ids()
        best = {}
        for instance, length in pairs:
            m = bisect.bisect_right(ids, instance)  # the levels the pair reaches: 0..m
            if m and length > best.get(m, 0):
                best[m] = length
        out, covered = [], 0
        for m in sorted(best, reverse=True):
            if best[m] > covered:
                out.append((ids[m - 1], best[m]))
                covered = best[m]
        return out[::-1]

    def enter(self, region):
        super().enter(region)
        if len(self.levels) <= self.max_depth:
            self.deepest.append(0)

    def exit(self, region):
        if len(self.levels) - 1 < self.max_depth:
            cp = self.deepest.pop()
            self.levels[-1].cp = cp
            if self.deepest:
                self.deepest[-1] = max(self.deepest[-1], cp)
        super().exit(region)

    def slot_pairs(self, slot):
        if slot == NONE or not self.frames:
            return []
        return self.frames[-1][1].get(slot, [])

    def gather(self, cands, extra=()):
        pairs, floor = [], 0
        for slot, offset in cands:
            floor = max(floor, offset)  # a level the slot does not reach reads 0 + offset
            pairs += [(i, length + offset) for i, length in self.slot_pairs(slot)]
        for stored in extra:
            pairs += stored
        if floor:
            pairs.append((self.next_instance, floor))
        return self.normalise(pairs)

    def plus(self, pairs, cost):
        out = [(i, length + cost) for i, length in pairs]
        if cost:
            out.append((self.next_instance, cost))
        return self.normalise(out)

    def produce_pairs(self, pairs, dst=None):
        self.values.append((len(self.analysed()), len(pairs)))
        ids = self.ids()
        for instance, length in pairs:
            m = bisect.bisect_right(ids, instance)
            if m:
                self.deepest[m - 1] = max(self.deepest[m - 1], length)
        if dst is not None and dst != NONE and self.frames:
            self.frames[-1][1][dst] = pairs

    def ts(self, dst, cands):
        self.produce_pairs(self.gather(cands), dst)

    def hoist(self, dst, cands):
        if dst != NONE and self.frames:
            self.frames[-1][1][dst] = self.gather(cands)

    def phi(self, dst, src, off, cond):
        self.produce_pairs(self.gather([(src, off), (cond, 0)]), dst)

    def load(self, dst, addr, size, cost, cands):
        stored = [self.memory.get(g, []) for g in self.granules(addr, size)]
        self.produce_pairs(self.plus(self.gather(cands, stored), cost), dst)

    def store(self, addr, size, cost, cands):
        pairs = self.plus(self.gather(cands), cost)
        self.produce_pairs(pairs)
        self.stores.append((len(self.analysed()), len(pairs)))
        for g in self.granules(addr, size):
            self.memory[g] = pairs

    def mem(self, dst, src, length, cost8, cands):
        cost = cost8 * ((length + 7) // 8)
        self.work(cost)
        stored = [self.memory.get(g, []) for g in self.granules(src, length)] if src else []
        pairs = self.plus(self.gather(cands, stored), cost)
        self.produce_pairs(pairs)
        for g in self.granules(dst, length):
            self.memory[g] = pairs

    def arg(self, index, cands):
        pairs = self.gather(cands)
        self.produce_pairs(pairs)
        if self.pending and self.pending[-1]["depth"] == len(self.levels) - 1:
            self.pending[-1]["args"][index] = pairs

    def ret(self, cands):
        pairs = self.gather(cands)
        self.produce_pairs(pairs)
        call = self.returning_call()
        if call:
            call["returned"] = pairs

    def result(self, dst, cost):
        call = self.take_call()
        if call and call["entered"] and call["returned"] is not None:
            if dst != NONE and self.frames:
                self.frames[-1][1][dst] = self.normalise(call["returned"])
            return
        pairs = []
        for arg in call["args"].values() if call else []:
            pairs += arg
        pairs = self.normalise(pairs)
        if call and call["entered"]:
            self.produce_pairs(pairs, dst)
            return
        self.work(cost)
        self.produce_pairs(self.plus(pairs, cost), dst)


def statistics(model):
    stats = {}
    for region, s in model.stats.items():
        stats[region] = (int(s["instances"]), int(s["work"]), int(s["self_work"]),
                         int(s["critical_path"]), s["instance_work"], s["sp_denominator"])
    return model.program, stats


def replay(path, model):
    with open(path) as trace:
        R.replay(trace, model)
    while model.levels:
        model.exit(model.levels[-1].region)
    return model


def mean(rows, column):
    return sum(r[column] for r in rows) / len(rows) if rows else 0.0


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    path = sys.argv[1]
    frontiers = replay(path, Frontiers(4, 64))
    reference = replay(path, R.Model(4, 64))
    if statistics(frontiers) != statistics(reference):
        raise SystemExit("the frontier model disagrees with the reference model")
    print(f"exact: {len(reference.stats)} regions agree with the reference model")
    for name, rows in (("values", frontiers.values), ("stores", frontiers.stores)):
        print(f"{name}: {len(rows)}, open levels {mean(rows, 0):.1f} on average, "
              f"frontier pairs {mean(rows, 1):.1f}")


if __name__ == "__main__":
    main()
