//! Source regions: the regions of a report as the source wrote them. An optimised build
//! reports the compiler's copies: a function inlined at two call sites is two function
//! regions (with `inlined_at`) beside the one the compiler emitted, a loop the optimiser
//! split (vector body and remainder) or versioned is two loop regions at the same line.
//! [`Report::by_source`] joins each such family into one region, nested as at `-O0`:
//! functions are roots (an inlined call joins its function, wherever it was inlined), a
//! loop hangs under the source region of its static parent, a body under its loop. The
//! joined regions' tool fields are combined per tool (count: sums; footprint: sums of
//! instances, weighted averages, extremes; working set: snapshots name the joined ids;
//! hcpa: sums, self-parallelism re-derived, parents and plan rows named by joined ids).
//! The report file keeps every copy; this is a view.

use std::collections::HashMap;

use kage_abi::SourceKey;

use serde_json::{json, Map, Value};

use super::{CountStats, FootprintStats, HcpaStats, Region, RegionKind, Report};
use super::{COUNT_TOOL, FOOTPRINT_TOOL, HCPA_KEY, HCPA_TOOL, PLAN_KEY, WORKING_SET_TOOL};

/// What joining copies and planning read of a static region: its place in the region tree
/// and what names its source region, borrowed (a runtime with thousands of regions plans
/// without copying their strings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionShape<'a> {
    pub id: u32,
    pub kind: RegionKind,
    pub parent: Option<u32>,
    pub line: u32,
    /// A function's linkage name, or its name when it has none.
    pub function: &'a str,
    pub file: &'a str,
}

impl<'a> RegionShape<'a> {
    /// The shape of a region with these fields (as [`Region`] names them).
    pub fn new(
        id: u32,
        kind: RegionKind,
        parent: Option<u32>,
        line: u32,
        (name, symbol, file): (&'a str, &'a str, &'a str),
    ) -> Self {
        RegionShape {
            id,
            kind,
            parent,
            line,
            function: kage_abi::key_function(name, symbol),
            file,
        }
    }
}

impl Region {
    /// What [`Report::by_source`] and the planner read of the region.
    pub fn shape(&self) -> RegionShape<'_> {
        let names = (&*self.name, &*self.symbol, &*self.file);
        RegionShape::new(self.id, self.kind, self.parent, self.line, names)
    }
}

/// The shapes of `regions`.
pub(crate) fn shapes(regions: &[Region]) -> Vec<RegionShape<'_>> {
    regions.iter().map(Region::shape).collect()
}

/// [`Report::source_ids`] of a list of regions (ids equal to indices, parents before
/// children, as [`crate::read_report`] checks).
pub(crate) fn source_ids_of(regions: &[RegionShape]) -> (Vec<u32>, usize) {
    let mut ids: HashMap<SourceKey<&str>, u32> = HashMap::new();
    let mut of = Vec::with_capacity(regions.len());
    for region in regions {
        let parent_source = region.parent.and_then(|p| of.get(p as usize).copied());
        let key = SourceKey::new(
            region.kind.abi(),
            parent_source,
            region.line,
            region.function,
            region.file,
        );
        let next = ids.len() as u32;
        of.push(*ids.entry(key).or_insert(next));
    }
    (of, ids.len())
}

impl Report {
    /// The source region of each static region, by id, and how many source regions there
    /// are. Source ids follow the static ids' order (a report without copies keeps its ids).
    pub fn source_ids(&self) -> (Vec<u32>, usize) {
        source_ids_of(&shapes(&self.regions))
    }

    /// The report with its compiler's copies of a region joined into one source region each
    /// (see the module docs). A report without copies comes back the same, but for inlined
    /// calls, which become their functions.
    pub fn by_source(&self) -> Report {
        let (of, count) = self.source_ids();
        let mut members: Vec<Vec<&Region>> = vec![Vec::new(); count];
        for (region, &source) in self.regions.iter().zip(&of) {
            members[source as usize].push(region);
        }
        let regions = (members.iter().enumerate())
            .map(|(id, copies)| {
                let first = copies[0];
                let parent = match first.kind {
                    RegionKind::Function => None,
                    _ => first.parent.map(|p| of[p as usize]),
                };
                Region {
                    id: id as u32,
                    kind: first.kind,
                    name: first.name.clone(),
                    symbol: first.symbol.clone(),
                    file: first.file.clone(),
                    line: copies
                        .iter()
                        .map(|r| r.line)
                        .filter(|&l| l != 0)
                        .min()
                        .unwrap_or(0),
                    end_line: copies.iter().map(|r| r.end_line).max().unwrap_or(0),
                    parent,
                    inlined_at: None,
                    metrics: self.joined_metrics(copies, &of),
                }
            })
            .collect();
        let mut joined = self.clone();
        joined.regions = regions;
        match self.tool.as_str() {
            WORKING_SET_TOOL => remap_snapshots(&mut joined.tool_data, &of),
            HCPA_TOOL => remap_plan(&mut joined.tool_data, &of),
            _ => {}
        }
        joined
    }

    /// The tool fields of one source region's `copies`.
    fn joined_metrics(&self, copies: &[&Region], of: &[u32]) -> Map<String, Value> {
        if self.tool == HCPA_TOOL {
            // Even one copy's parents are renamed.
            return join_hcpa_metrics(self, copies, of)
                .unwrap_or_else(|| copies[0].metrics.clone());
        }
        if copies.len() == 1 {
            return copies[0].metrics.clone();
        }
        match self.tool.as_str() {
            COUNT_TOOL => {
                let mut joined = CountStats::default();
                let mut instances = Vec::with_capacity(copies.len());
                for region in copies {
                    let Some(stats) = CountStats::of(region) else {
                        return copies[0].metrics.clone();
                    };
                    instances.push(stats.instances);
                    joined.exclusive.add(&stats.exclusive);
                    // A copy inside another copy (a recursion inlined into itself) is
                    // already in that one's inclusive counters.
                    if !inside_a_copy(parent_in(&self.regions), region.shape(), of) {
                        joined.inclusive.add(&stats.inclusive);
                    }
                }
                let places = copies.iter().map(|r| (r.kind, r.parent));
                joined.instances = joined_instances(places, &instances);
                match serde_json::to_value(joined) {
                    Ok(Value::Object(map)) => map,
                    _ => copies[0].metrics.clone(),
                }
            }
            FOOTPRINT_TOOL => join_footprints(copies).unwrap_or_else(|| copies[0].metrics.clone()),
            _ => copies[0].metrics.clone(),
        }
    }
}

/// Whether a static ancestor of `region` has the same source region.
fn inside_a_copy(parent_of: impl Fn(u32) -> Option<u32>, region: RegionShape, of: &[u32]) -> bool {
    let source = of[region.id as usize];
    let mut at = region.parent;
    while let Some(p) = at {
        if of.get(p as usize) == Some(&source) {
            return true;
        }
        at = parent_of(p);
    }
    false
}

/// The static parent of region `id` of `regions`, for [`inside_a_copy`].
fn parent_in(regions: &[Region]) -> impl Fn(u32) -> Option<u32> + '_ {
    |id| {
        regions
            .get(id as usize)
            .filter(|r| r.id == id)
            .and_then(|r| r.parent)
    }
}

/// The instances of a source region whose copies ran `instances` times each. Copies in
/// different places (inlined at several call sites) add up; loops that are copies in the
/// same place (a vector body and its remainder, split by the optimiser) run one after the
/// other for each run of the source loop, so the one that ran most stands for them.
fn joined_instances(
    copies: impl Iterator<Item = (RegionKind, Option<u32>)>,
    instances: &[u64],
) -> u64 {
    let mut per_place: Vec<(Option<u32>, u64)> = Vec::new();
    for ((kind, parent), &n) in copies.zip(instances) {
        let place = (kind == RegionKind::Loop).then_some(parent).flatten();
        match per_place
            .iter_mut()
            .find(|(p, _)| place.is_some() && *p == place)
        {
            Some((_, most)) => *most = (*most).max(n),
            None => per_place.push((place, n)),
        }
    }
    per_place.iter().map(|&(_, n)| n).sum()
}

/// The `"footprint"` object of several copies: instances added, averages weighted by
/// instances, extremes over the copies that ran.
fn join_footprints(copies: &[&Region]) -> Option<Map<String, Value>> {
    let stats: Vec<FootprintStats> = (copies.iter())
        .map(|r| FootprintStats::of(r))
        .collect::<Result<_, _>>()
        .ok()?;
    let ran: Vec<&FootprintStats> = stats.iter().filter(|s| s.instances > 0).collect();
    let instances: u64 = ran.iter().map(|s| s.instances).sum();
    let counted: Vec<u64> = stats.iter().map(|s| s.instances).collect();
    let weighted = |f: fn(&FootprintStats) -> f64| -> f64 {
        match instances {
            0 => 0.0,
            n => ran.iter().map(|s| f(s) * s.instances as f64).sum::<f64>() / n as f64,
        }
    };
    let min = |f: fn(&FootprintStats) -> u64| ran.iter().map(|s| f(s)).min().unwrap_or(0);
    let max = |f: fn(&FootprintStats) -> u64| ran.iter().map(|s| f(s)).max().unwrap_or(0);
    let joined = FootprintStats {
        instances: joined_instances(copies.iter().map(|r| (r.kind, r.parent)), &counted),
        avg_bytes: weighted(|s| s.avg_bytes),
        min_bytes: min(|s| s.min_bytes),
        max_bytes: max(|s| s.max_bytes),
        avg_lines: weighted(|s| s.avg_lines),
        min_lines: min(|s| s.min_lines),
        max_lines: max(|s| s.max_lines),
        share: ran.iter().map(|s| s.share).fold(0.0, f64::max),
    };
    let mut metrics = copies[0].metrics.clone();
    metrics.insert("footprint".into(), joined.to_value());
    Some(metrics)
}

/// The hcpa statistics of one source region made of `copies` (`stats[i]` those of
/// `copies[i]`, `None` for a copy that never ran), `None` when no copy ran. `instances` as
/// for the other tools (copies in different places add up; loop copies in the same place,
/// which run one after the other for each run of the source loop, count as the one that ran
/// most); `work` and `critical_path` add up over the copies not inside another copy (a
/// recursion inlined into itself is already in the outer copy's), `self_work` over all;
/// `self_parallelism` is re-derived as the work-weighted harmonic mean Σ work / Σ (work /
/// SP) over the copies, `total_parallelism` as work / critical path (1 without a critical
/// path), `coverage` as work / `program_work` (the copies' sum when that is 0); `parents`
/// become source ids (sorted, each once), `parents_truncated` is true when any copy's is.
pub(crate) fn join_hcpa(
    parent_of: impl Fn(u32) -> Option<u32>,
    copies: &[RegionShape],
    stats: &[Option<&HcpaStats>],
    of: &[u32],
    program_work: u64,
) -> Option<HcpaStats> {
    let ran: Vec<(RegionShape, &HcpaStats)> = (copies.iter().zip(stats))
        .filter_map(|(&region, stats)| stats.map(|s| (region, s)))
        .collect();
    if ran.is_empty() {
        return None;
    }
    let (ran_regions, instances): (Vec<RegionShape>, Vec<u64>) =
        ran.iter().map(|&(r, s)| (r, s.instances)).unzip();
    let mut joined = HcpaStats {
        instances: joined_instances(ran_regions.iter().map(|r| (r.kind, r.parent)), &instances),
        ..HcpaStats::default()
    };
    let mut coverage = 0.0;
    let mut time = 0.0;
    let mut weighted_work = 0.0;
    for &(region, s) in &ran {
        joined.self_work += s.self_work;
        if !inside_a_copy(&parent_of, region, of) {
            joined.work += s.work;
            joined.critical_path += s.critical_path;
            coverage += s.coverage;
        }
        if s.self_parallelism > 0.0 {
            weighted_work += s.work as f64;
            time += s.work as f64 / s.self_parallelism;
        }
        joined
            .parents
            .extend((s.parents.iter()).filter_map(|&p| of.get(p as usize).copied()));
        joined.parents_truncated |= s.parents_truncated;
    }
    joined.parents.sort_unstable();
    joined.parents.dedup();
    joined.self_parallelism = if time > 0.0 {
        weighted_work / time
    } else if ran.len() == 1 {
        ran[0].1.self_parallelism
    } else {
        1.0
    };
    joined.total_parallelism = match joined.critical_path {
        0 => 1.0,
        cp => joined.work as f64 / cp as f64,
    };
    joined.coverage = match program_work {
        0 => coverage,
        w => joined.work as f64 / w as f64,
    };
    Some(joined)
}

/// The hcpa metrics of one source region's `copies` in `report` (see [`join_hcpa`]):
/// `None` when a copy's are not as documented.
fn join_hcpa_metrics(
    report: &Report,
    copies: &[&Region],
    of: &[u32],
) -> Option<Map<String, Value>> {
    let stats: Vec<Option<HcpaStats>> = (copies.iter())
        .map(|r| HcpaStats::of(r))
        .collect::<Result<_, _>>()
        .ok()?;
    let program_work = (report.tool_data.get(HCPA_KEY))
        .and_then(|hcpa| hcpa.get("work"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let refs: Vec<Option<&HcpaStats>> = stats.iter().map(Option::as_ref).collect();
    let mut metrics = copies[0].metrics.clone();
    let copies: Vec<RegionShape> = copies.iter().map(|r| r.shape()).collect();
    match join_hcpa(parent_in(&report.regions), &copies, &refs, of, program_work) {
        Some(joined) => metrics.insert(HCPA_KEY.into(), joined.to_value()),
        None => metrics.remove(HCPA_KEY),
    };
    Some(metrics)
}

/// Every source region's hcpa statistics, from the static `regions` and their `stats` (by
/// id): the source region of each static region (as [`Report::source_ids`]), the first copy
/// of each source region (its representative), and the joined statistics ([`join_hcpa`]).
pub(crate) struct HcpaBySource {
    pub of: Vec<u32>,
    pub first: Vec<u32>,
    pub stats: Vec<Option<HcpaStats>>,
}

pub(crate) fn hcpa_by_source(
    regions: &[RegionShape],
    stats: &[Option<HcpaStats>],
    program_work: u64,
) -> HcpaBySource {
    let (of, count) = source_ids_of(regions);
    let mut members: Vec<Vec<RegionShape>> = vec![Vec::new(); count];
    for (region, &source) in regions.iter().zip(&of) {
        members[source as usize].push(*region);
    }
    let parent_of = |id: u32| {
        (regions.get(id as usize))
            .filter(|r| r.id == id)
            .and_then(|r| r.parent)
    };
    let joined = (members.iter())
        .map(|copies| {
            let refs: Vec<Option<&HcpaStats>> = (copies.iter())
                .map(|r| stats.get(r.id as usize).and_then(Option::as_ref))
                .collect();
            join_hcpa(parent_of, copies, &refs, &of, program_work)
        })
        .collect();
    HcpaBySource {
        first: members.iter().map(|copies| copies[0].id).collect(),
        of,
        stats: joined,
    }
}

/// Rewrites the region ids the plan's rows name (`"plan"[i]."region"`).
fn remap_plan(tool_data: &mut Map<String, Value>, of: &[u32]) {
    let Some(Value::Array(rows)) = tool_data.get_mut(PLAN_KEY) else {
        return;
    };
    for row in rows {
        if let Some(id) = row.get_mut("region") {
            if let Some(source) = id.as_u64().and_then(|i| of.get(i as usize)) {
                *id = json!(source);
            }
        }
    }
}

/// Rewrites the region ids the working set's snapshots name (`"snapshots"[i]."regions"`).
fn remap_snapshots(tool_data: &mut Map<String, Value>, of: &[u32]) {
    let Some(Value::Array(snapshots)) = tool_data.get_mut("snapshots") else {
        return;
    };
    for snapshot in snapshots {
        if let Some(Value::Array(ids)) = snapshot.get_mut("regions") {
            for id in ids.iter_mut() {
                if let Some(source) = id.as_u64().and_then(|i| of.get(i as usize)) {
                    *id = json!(source);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_report;

    /// A count report: `main` (0) with `sum` inlined twice in it (1 and 4, at lines 20 and
    /// 21), each with its loop split in two (a vector body and a remainder at line 10), and
    /// `sum` emitted too (7) with its loop (8).
    fn report() -> Report {
        let region = |id: u32,
                      kind: &str,
                      name: &str,
                      line: u32,
                      parent: Option<u32>,
                      at: Option<u32>,
                      n: u64,
                      bytes: u64| {
            json!({
                "id": id, "kind": kind, "name": name, "symbol": name, "file": "/s/a.c",
                "line": line, "end_line": line + 1, "parent": parent,
                "inlined_at": at.map(|l| json!({"file": "/s/a.c", "line": l, "column": 3})),
                "instances": n, "loads": bytes / 8, "stores": 0, "bytes_read": bytes,
                "bytes_written": 0, "self_loads": 0, "self_stores": 0, "self_bytes_read": 0,
                "self_bytes_written": 0
            })
        };
        let mut regions = vec![
            region(0, "function", "main", 19, None, None, 1, 1600),
            region(1, "function", "sum", 8, Some(0), Some(20), 1, 800),
            region(2, "loop", "sum", 10, Some(1), None, 1, 768),
            region(3, "loop", "sum", 10, Some(1), None, 1, 32),
            region(4, "function", "sum", 8, Some(0), Some(21), 1, 800),
            region(5, "loop", "sum", 10, Some(4), None, 1, 800),
            region(6, "function", "helper", 30, None, None, 0, 0),
            region(7, "function", "sum", 8, None, None, 3, 2400),
            region(8, "loop", "sum", 10, Some(7), None, 3, 2400),
        ];
        for r in &mut regions {
            if r["inlined_at"].is_null() {
                r.as_object_mut().unwrap().remove("inlined_at");
            }
        }
        let text = json!({
            "format": "kage-report", "version": 1, "tool": "count", "program": "/p",
            "args": [], "pid": 1, "end": {"how": "exit", "code": 0}, "complete": true,
            "threads": 1, "options": {}, "regions": regions,
            "totals": {"loads": 200, "stores": 0, "bytes_read": 1600, "bytes_written": 0},
            "unattributed": {"loads": 0, "stores": 0, "bytes_read": 0, "bytes_written": 0}
        });
        parse_report(std::path::Path::new("r.json"), text.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn copies_join_into_source_regions_shaped_as_at_o0() {
        let report = report();
        let (of, count) = report.source_ids();
        // main, sum, sum's loop (all four copies), helper.
        assert_eq!(of, [0, 1, 2, 2, 1, 2, 3, 1, 2]);
        assert_eq!(count, 4);
        let joined = report.by_source();
        let shape: Vec<(RegionKind, &str, Option<u32>, u32)> = (joined.regions.iter())
            .map(|r| (r.kind, r.name.as_str(), r.parent, r.line))
            .collect();
        assert_eq!(
            shape,
            [
                (RegionKind::Function, "main", None, 19),
                (RegionKind::Function, "sum", None, 8),
                (RegionKind::Loop, "sum", Some(1), 10),
                (RegionKind::Function, "helper", None, 30),
            ]
        );
        let sum = CountStats::of(&joined.regions[1]).unwrap();
        assert_eq!(sum.instances, 5);
        assert_eq!(sum.inclusive.bytes_read, 800 + 800 + 2400);
        // The split loop's two copies in one inlined call count once per run.
        let sum_loop = CountStats::of(&joined.regions[2]).unwrap();
        assert_eq!(
            (sum_loop.instances, sum_loop.inclusive.bytes_read),
            (5, 4000)
        );
        assert!(joined.regions.iter().all(|r| r.inlined_at.is_none()));
        // A report without copies keeps its regions and ids.
        let mut plain = report.clone();
        plain.regions.truncate(1);
        assert_eq!(plain.by_source().regions, plain.regions);
    }

    #[test]
    fn a_copy_inside_another_is_not_counted_twice() {
        let mut report = report();
        // sum inlined into the emitted sum's loop (a recursion inlined into itself).
        report.regions[4].parent = Some(8);
        let joined = report.by_source();
        let sum = CountStats::of(&joined.regions[1]).unwrap();
        assert_eq!(sum.instances, 5);
        assert_eq!(sum.inclusive.bytes_read, 800 + 2400);
    }

    #[test]
    fn footprints_join_by_instances_and_extremes() {
        let mut report = report();
        report.tool = FOOTPRINT_TOOL.into();
        let stats = |n: u64, avg: f64, min: u64, max: u64| FootprintStats {
            instances: n,
            avg_bytes: avg,
            min_bytes: min,
            max_bytes: max,
            avg_lines: avg / 64.0,
            min_lines: min / 64,
            max_lines: max / 64,
            share: max as f64 / 8000.0,
        };
        let set = |r: &mut Region, s: FootprintStats| {
            r.metrics.insert("footprint".into(), s.to_value());
        };
        for r in &mut report.regions {
            set(r, stats(0, 0.0, 0, 0));
        }
        set(&mut report.regions[1], stats(1, 640.0, 640, 640));
        set(&mut report.regions[4], stats(1, 1280.0, 1280, 1280));
        set(&mut report.regions[7], stats(2, 320.0, 128, 512));
        let joined = report.by_source();
        let sum = FootprintStats::of(&joined.regions[1]).unwrap();
        assert_eq!(sum.instances, 4);
        assert_eq!(sum.avg_bytes, (640.0 + 1280.0 + 2.0 * 320.0) / 4.0);
        assert_eq!((sum.min_bytes, sum.max_bytes), (128, 1280));
        assert_eq!(sum.share, 1280.0 / 8000.0);
    }

    #[test]
    fn working_set_snapshots_name_the_source_regions() {
        let mut tool_data = Map::new();
        tool_data.insert(
            "snapshots".into(),
            json!([{"regions": [0, 4, 5]}, {"regions": []}]),
        );
        remap_snapshots(&mut tool_data, &[0, 1, 2, 2, 1, 2]);
        assert_eq!(tool_data["snapshots"][0]["regions"], json!([0, 1, 2]));
    }
}
