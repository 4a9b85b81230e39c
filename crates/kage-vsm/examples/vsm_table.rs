//! Time and memory of every VSM implementation on the benchmark patterns, as a markdown
//! table (recorded in `crates/kage-vsm/RESULTS.md`).
//!
//!     cargo run --release -p kage-vsm --example vsm_table [-- --quick] [--pattern P] [--kind K] [--tags u64|bool]
//!
//! ns/access is the median of up to 5 runs (fewer when they take over 20 s in all), each
//! on a fresh shadow, so it includes growing it; memory is `heap_bytes()` sampled every
//! 4096 accesses (peak) and at the end, divided by the number of distinct shadowed words
//! the pattern touched; for the kinds with a VCache, the VStorage's own peak is shown too
//! (what garbage collection and compression act on). The last columns: tag tables stored
//! as a constant difference from the level above / LZ4-compressed at the end, and the
//! clock list's capacity then (it adapts).

#[path = "../benches/support/workloads.rs"]
mod workloads;

use std::ops::Range;
use std::time::{Duration, Instant};

use kage_vsm::{AnyVsm, Config, Granularity, Stats, Tag, VectorShadow, VersionStack, VsmKind};
use workloads::{BenchTag, Pattern};

/// Counts the distinct words a pattern touches.
struct Recorder {
    versions: VersionStack,
    seen: Vec<bool>,
    distinct: u64,
}

impl Recorder {
    fn touch(&mut self, addr: u64) {
        let word = ((addr - 0x5555_5555_0000) / 8) as usize;
        if !self.seen[word] {
            self.seen[word] = true;
            self.distinct += 1;
        }
    }
}

impl<T: Tag> VectorShadow<T> for Recorder {
    fn enter(&mut self) {
        self.versions.enter();
    }
    fn exit(&mut self) {
        self.versions.exit();
    }
    fn depth(&self) -> usize {
        self.versions.depth()
    }
    fn versions(&self) -> &VersionStack {
        &self.versions
    }
    fn read(&mut self, addr: u64, out: &mut Vec<T>) {
        self.touch(addr);
        out.clear();
    }
    fn write_with(&mut self, addr: u64, _: Range<usize>, _: T, _: &mut impl FnMut(usize)) {
        self.touch(addr);
    }
    fn update(&mut self, addr: u64, _: impl FnOnce(&mut [T])) {
        self.touch(addr);
    }
    fn heap_bytes(&self) -> usize {
        0
    }
    fn stats(&self) -> Stats {
        Stats::default()
    }
}

struct Row {
    ns: f64,
    runs: usize,
    peak: usize,
    /// Peak bytes of the VStorage alone (kinds with a VCache).
    storage_peak: Option<usize>,
    end: usize,
    distinct: u64,
    stats: Stats,
}

/// Up to 5 timed runs (fewer once `budget` is spent; at least one), each on a fresh shadow;
/// memory and counters come from the first.
fn measure<T: BenchTag>(
    kind: VsmKind,
    pattern: Pattern,
    words: u64,
    config: &Config,
    budget: Duration,
) -> Row {
    let mut recorder = Recorder {
        versions: VersionStack::new(),
        seen: vec![false; words as usize],
        distinct: 0,
    };
    pattern.run::<T, _>(&mut recorder, words, &mut |_| {});
    let mut times = Vec::new();
    let mut first = None;
    let started = Instant::now();
    while times.len() < 5 && (times.is_empty() || started.elapsed() < budget) {
        let (mut peak, mut storage_peak) = (0, None);
        let start = Instant::now();
        let mut vsm = AnyVsm::<T>::new(kind, config);
        let accesses = pattern.run(&mut vsm, words, &mut |vsm: &AnyVsm<T>| {
            peak = peak.max(vsm.heap_bytes());
            if let AnyVsm::Cached(cached) = vsm {
                let bytes = cached.storage().heap_bytes();
                storage_peak = Some(storage_peak.unwrap_or(0).max(bytes));
            }
        });
        first.get_or_insert((peak, storage_peak, vsm.heap_bytes(), vsm.stats()));
        drop(vsm);
        times.push(start.elapsed().as_secs_f64() * 1e9 / accesses as f64);
    }
    times.sort_by(f64::total_cmp);
    let (peak, storage_peak, end, stats) = first.expect("one run");
    Row {
        ns: times[(times.len() - 1) / 2],
        runs: times.len(),
        peak,
        storage_peak,
        end,
        distinct: recorder.distinct,
        stats,
    }
}

fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|line| {
            line.strip_prefix("model name")
                .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{model}, {cores} cores")
}

struct Options {
    quick: bool,
    vcache_kib: Option<u64>,
    victim_kib: Option<u64>,
    patterns: Vec<Pattern>,
    kinds: Vec<VsmKind>,
    tags: Vec<String>,
}

fn table<T: BenchTag>(label: &str, sizes: &[(Pattern, u64)], config: &Config, options: &Options) {
    println!("\n### {label}\n");
    println!("| pattern | kind | ns/access | runs | × baseline time | peak heap MiB | VStorage peak MiB | bytes/addr (peak) | bytes/addr (end) | × baseline memory | VCache hits | constant / LZ4 / narrow tables (end) | list (end) |");
    println!("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    let budget = Duration::from_secs(if options.quick { 5 } else { 20 });
    for &(pattern, words) in sizes
        .iter()
        .filter(|(pattern, _)| options.patterns.contains(pattern))
    {
        let mut baseline: Option<(f64, usize)> = None;
        for &kind in &options.kinds {
            let row = measure::<T>(kind, pattern, words, config, budget);
            let (base_ns, base_peak) = *baseline.get_or_insert((row.ns, row.peak));
            let lookups = row.stats.cache_hits + row.stats.cache_misses;
            let hit_rate = if lookups == 0 {
                "–".to_owned()
            } else {
                format!(
                    "{:.1}%",
                    100.0 * row.stats.cache_hits as f64 / lookups as f64
                )
            };
            let list = if row.stats.victim_tables == 0 {
                "–".to_owned()
            } else {
                row.stats.victim_tables.to_string()
            };
            println!(
                "| {} | {} | {:.1} | {} | {:.2} | {:.1} | {} | {:.1} | {:.1} | {:.3} | {} | {} / {} / {} | {} |",
                pattern.name(),
                kind,
                row.ns,
                row.runs,
                row.ns / base_ns,
                row.peak as f64 / (1 << 20) as f64,
                row.storage_peak.map_or("–".to_owned(), |bytes| format!(
                    "{:.1}",
                    bytes as f64 / (1 << 20) as f64
                )),
                row.peak as f64 / row.distinct as f64,
                row.end as f64 / row.distinct as f64,
                row.peak as f64 / base_peak as f64,
                hit_rate,
                row.stats.constant_tables,
                row.stats.packed_tables,
                row.stats.narrow_tables,
                list,
            );
        }
    }
}

/// `--quick` (quarter sizes), `--pattern NAME`, `--kind NAME`, `--tags u64|bool` (each
/// repeatable; default: all), `--vcache-kib N` and `--victim-kib N` (address space the
/// VCache and the uncompressed list cover; default: the paper's 1024 and 4096).
fn options() -> Options {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let values = |flag: &str| -> Vec<String> {
        args.windows(2)
            .filter(|pair| pair[0] == flag)
            .map(|pair| pair[1].clone())
            .collect()
    };
    let mut patterns: Vec<Pattern> = values("--pattern")
        .iter()
        .map(|name| {
            *Pattern::ALL
                .iter()
                .find(|p| p.name() == name)
                .expect("pattern")
        })
        .collect();
    if patterns.is_empty() {
        patterns = Pattern::ALL.to_vec();
    }
    let mut kinds: Vec<VsmKind> = values("--kind")
        .iter()
        .map(|name| name.parse().expect("kind"))
        .collect();
    if kinds.is_empty() {
        kinds = VsmKind::ALL.to_vec();
    }
    let mut tags = values("--tags");
    if tags.is_empty() {
        tags = vec!["u64".to_owned(), "bool".to_owned()];
    }
    let kib = |flag: &str| values(flag).first().map(|v| v.parse::<u64>().expect("KiB"));
    Options {
        quick: args.iter().any(|arg| arg == "--quick"),
        vcache_kib: kib("--vcache-kib"),
        victim_kib: kib("--victim-kib"),
        patterns,
        kinds,
        tags,
    }
}

fn main() {
    let options = options();
    let scale = if options.quick { 4 } else { 1 };
    let config = Config::from_spans(
        Granularity::Word,
        4 << 10,
        64 << 20,
        options.vcache_kib.unwrap_or(1 << 10) << 10,
        options.victim_kib.unwrap_or(4 << 10) << 10,
    );
    let sizes = [
        (Pattern::Stream, (1 << 20) / scale),
        (Pattern::Random, (1 << 20) / scale),
        (Pattern::Deep, (1 << 20) / scale),
    ];
    println!("Machine: {}", machine());
    println!(
        "Config: 8-byte words; tag tables of {} words (4 KiB); VCache {} lines ({} KiB); {} uncompressed level tables ({} KiB); free list {} tables{}",
        config.table_units(),
        config.vcache_lines,
        (config.vcache_lines * 8) >> 10,
        config.victim_tables,
        config.victim_tables * 4,
        config.free_tables,
        if config == Config::hcpa() { " (`Config::hcpa()`, the paper's HCPA settings)" } else { "" },
    );
    println!(
        "Array sizes (words): {}",
        sizes
            .iter()
            .map(|(p, w)| format!("{} {} ({} MiB)", p.name(), w, (w * 8) >> 20))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let distinct: Vec<String> = sizes
        .iter()
        .map(|&(pattern, words)| {
            let mut recorder = Recorder {
                versions: VersionStack::new(),
                seen: vec![false; words as usize],
                distinct: 0,
            };
            pattern.run::<u64, _>(&mut recorder, words, &mut |_| {});
            format!("{} {}", pattern.name(), recorder.distinct)
        })
        .collect();
    println!("Distinct words touched: {}", distinct.join(", "));
    if options.tags.iter().any(|t| t == "u64") {
        table::<u64>(
            "64-bit timestamp tags (HCPA-like): stores write every level",
            &sizes,
            &config,
            &options,
        );
    }
    if options.tags.iter().any(|t| t == "bool") {
        table::<bool>(
            "1-bit presence tags (footprint-like): stores through the first-touch hook",
            &sizes,
            &config,
            &options,
        );
    }
}
