//! Runtime options: one declared table, read from `KAGE_OPTIONS` (`key=value` items
//! separated by `:` or `,`), in the style of the sanitizers' flags.

use std::collections::BTreeMap;

/// The line sizes `line_size=` accepts (powers of two), and the working-set build's
/// `KAGE_WS_LINE_SIZE` too.
pub const LINE_SIZES: std::ops::RangeInclusive<u64> = 16..=4096;

/// The options in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub tool: String,
    pub output: String,
    pub enabled: bool,
    pub handle_signals: bool,
    pub verbosity: u32,
    pub help: bool,
    /// working-set: bytes per cache line (a power of two, 16..=4096).
    pub line_size: u64,
    /// working-set: what the interval is measured in.
    pub interval_unit: IntervalUnit,
    /// working-set: the interval as written (`10ms`, `1000000`); checked against the unit
    /// by [`Options::interval_length`].
    pub interval: String,
    /// working-set: the most snapshots kept before adjacent ones are merged.
    pub snapshots: u32,
    /// working-set: the most memory (MiB) the kept snapshots' bitmaps may take before
    /// adjacent ones are merged.
    pub snapshot_mib: u32,
    /// working-set, test-only: file that receives every traced access.
    pub trace: String,
    /// footprint: the vector shadow memory implementation (`kage_vsm::footprint::FpKind`).
    pub vsm: String,
    /// footprint: what a location is: `byte`, `word` or `line`.
    pub granularity: String,
    /// footprint: loop bodies (one instance per iteration) are regions too.
    pub loop_bodies: bool,
}

/// The unit of working-set intervals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntervalUnit {
    Accesses,
    WallTime,
    CpuTime,
    Instructions,
}

impl IntervalUnit {
    pub const ALL: [(&'static str, IntervalUnit); 4] = [
        ("wall", IntervalUnit::WallTime),
        ("cpu", IntervalUnit::CpuTime),
        ("accesses", IntervalUnit::Accesses),
        ("instructions", IntervalUnit::Instructions),
    ];

    pub fn option_name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, u)| *u == self)
            .map(|(n, _)| *n)
            .unwrap_or("wall")
    }

    /// The unit of `start`/`end` in the report.
    pub fn to_report(self) -> kage_report::IntervalUnit {
        match self {
            IntervalUnit::Accesses => kage_report::IntervalUnit::Accesses,
            IntervalUnit::WallTime => kage_report::IntervalUnit::WallNs,
            IntervalUnit::CpuTime => kage_report::IntervalUnit::CpuNs,
            IntervalUnit::Instructions => kage_report::IntervalUnit::Instructions,
        }
    }

    pub fn is_time(self) -> bool {
        matches!(self, IntervalUnit::WallTime | IntervalUnit::CpuTime)
    }
}

/// Parses an interval length for `unit`: a duration (`500us`, `10ms`, `2s`, `100ns`) for time
/// units, a count with an optional `k`, `M` or `G` suffix for the others. Never zero.
pub fn parse_interval(v: &str, unit: IntervalUnit) -> Result<u64, String> {
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (digits, suffix) = v.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("'{v}' does not start with a number"))?;
    let scale: u64 = if unit.is_time() {
        match suffix {
            "ns" => 1,
            "us" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            _ => {
                return Err(format!(
                    "'{v}': a time interval needs a unit: ns, us, ms or s"
                ))
            }
        }
    } else {
        match suffix {
            "" => 1,
            "k" => 1_000,
            "M" => 1_000_000,
            "G" => 1_000_000_000,
            _ => return Err(format!("'{v}': a count takes no unit but k, M or G")),
        }
    };
    match n.checked_mul(scale) {
        Some(0) => Err("the interval must not be zero".into()),
        Some(x) => Ok(x),
        None => Err(format!("'{v}' is too large")),
    }
}

/// One declared option: its name, default, help text, and how it is parsed and shown.
pub struct OptionDef {
    pub name: &'static str,
    pub default: &'static str,
    pub help: &'static str,
    set: fn(&mut Options, &str) -> Result<(), String>,
    get: fn(&Options) -> String,
}

fn parse_bool(v: &str) -> Result<bool, String> {
    match v {
        "1" => Ok(true),
        "0" => Ok(false),
        _ => Err("expected 0 or 1".into()),
    }
}

fn parse_u32(v: &str) -> Result<u32, String> {
    v.parse()
        .map_err(|_| "expected a non-negative integer".into())
}

/// Every option the runtime knows. `help=1` prints this table.
pub static OPTIONS: &[OptionDef] = &[
    OptionDef {
        name: "tool",
        default: "count",
        help: "analysis tool to run (see the tool list printed with help=1); programs built \
               with KAGE_TOOL=working-set default to working-set",
        set: |o, v| {
            if v.is_empty() {
                return Err("expected a tool name".into());
            }
            o.tool = v.to_string();
            Ok(())
        },
        get: |o| o.tool.clone(),
    },
    OptionDef {
        name: "output",
        default: "kage.%e.%p.json",
        help: "report path; %e = executable name, %p = pid (a forked child without %p \
               inserts .<pid> before .json)",
        set: |o, v| {
            if v.is_empty() {
                return Err("expected a path".into());
            }
            o.output = v.to_string();
            Ok(())
        },
        get: |o| o.output.clone(),
    },
    OptionDef {
        name: "enabled",
        default: "1",
        help: "1: deliver memory accesses to the tool from the start; 0: start off \
               (the program turns it on with kage_set_enabled(1))",
        set: |o, v| parse_bool(v).map(|b| o.enabled = b),
        get: |o| (o.enabled as u8).to_string(),
    },
    OptionDef {
        name: "handle_signals",
        default: "1",
        help: "1: write a (best effort) report on fatal signals whose handler is the default one",
        set: |o, v| parse_bool(v).map(|b| o.handle_signals = b),
        get: |o| (o.handle_signals as u8).to_string(),
    },
    OptionDef {
        name: "verbosity",
        default: "0",
        help: "0: quiet; 1: print the report path; 2: also print module registrations",
        set: |o, v| parse_u32(v).map(|n| o.verbosity = n),
        get: |o| o.verbosity.to_string(),
    },
    OptionDef {
        name: "line_size",
        default: "64",
        help: "working-set, footprint: cache line size in bytes (a power of two from 16 to 4096); \
               a program built for the working-set tool defaults to, and needs at least, the \
               line size it was built with (KAGE_WS_LINE_SIZE)",
        set: |o, v| match v.parse::<u64>() {
            Ok(n) if n.is_power_of_two() && LINE_SIZES.contains(&n) => {
                o.line_size = n;
                Ok(())
            }
            _ => Err("expected a power of two from 16 to 4096".into()),
        },
        get: |o| o.line_size.to_string(),
    },
    OptionDef {
        name: "interval_unit",
        default: "wall",
        help: "working-set: what intervals measure: wall (time), cpu (process CPU time), \
               accesses (memory accesses), instructions (hardware counter; falls back to cpu)",
        set: |o, v| match IntervalUnit::ALL.iter().find(|(n, _)| *n == v) {
            Some((_, u)) => {
                o.interval_unit = *u;
                Ok(())
            }
            None => Err("expected wall, cpu, accesses or instructions".into()),
        },
        get: |o| o.interval_unit.option_name().to_string(),
    },
    OptionDef {
        name: "interval",
        default: "10ms",
        help: "working-set: the snapshot interval: a duration (10ms, 500us, 1s) for wall and \
               cpu, a count (100000, 50k, 2M) for accesses and instructions (default for \
               those: 10M)",
        set: |o, v| {
            if v.is_empty() {
                return Err("expected an interval".into());
            }
            o.interval = v.to_string();
            Ok(())
        },
        get: |o| o.interval.clone(),
    },
    OptionDef {
        name: "snapshots",
        default: "128",
        help: "working-set: snapshots kept; when full, adjacent pairs are merged (their \
               union) and the interval doubles",
        set: |o, v| match v.parse::<u32>() {
            Ok(n) if n >= 2 => {
                o.snapshots = n;
                Ok(())
            }
            _ => Err("expected an integer of at least 2".into()),
        },
        get: |o| o.snapshots.to_string(),
    },
    OptionDef {
        name: "snapshot_mib",
        default: "2",
        help: "working-set: memory (MiB) the kept snapshots' compressed bitmaps may take; \
               beyond it adjacent snapshots are merged as when there are too many",
        set: |o, v| match v.parse::<u32>() {
            Ok(n) if n >= 1 => {
                o.snapshot_mib = n;
                Ok(())
            }
            _ => Err("expected a positive integer".into()),
        },
        get: |o| o.snapshot_mib.to_string(),
    },
    OptionDef {
        name: "trace",
        default: "",
        help: "working-set, test-only (programs built with KAGE_WS_TRACE=1): write every \
               access with its interval to this file",
        set: |o, v| {
            o.trace = v.to_string();
            Ok(())
        },
        get: |o| o.trace.clone(),
    },
    OptionDef {
        name: "vsm",
        default: "palette",
        help: "footprint: the vector shadow memory: baseline (a version per tag), slim \
               (SlimTV), bulk (SlimTV+BulkTV, 64 KiB tag tables), palette (BulkTV, 4 KiB \
               tag tables stored as one value, a bit or a byte per location)",
        set: |o, v| {
            v.parse::<kage_vsm::FpKind>()?;
            o.vsm = v.to_string();
            Ok(())
        },
        get: |o| o.vsm.clone(),
    },
    OptionDef {
        name: "granularity",
        default: "byte",
        help: "footprint: what a location is: byte, word (8 bytes) or line (line_size bytes)",
        set: |o, v| match kage_vsm::Granularity::from_name(v) {
            Some(_) => {
                o.granularity = v.to_string();
                Ok(())
            }
            None => Err("expected byte, word or line".into()),
        },
        get: |o| o.granularity.clone(),
    },
    OptionDef {
        name: "loop_bodies",
        default: "0",
        help: "footprint: 1: loop bodies are regions too (one instance per iteration)",
        set: |o, v| parse_bool(v).map(|b| o.loop_bodies = b),
        get: |o| (o.loop_bodies as u8).to_string(),
    },
    OptionDef {
        name: "help",
        default: "0",
        help: "1: print every option with its default and help to stderr, then run",
        set: |o, v| parse_bool(v).map(|b| o.help = b),
        get: |o| (o.help as u8).to_string(),
    },
];

impl Default for Options {
    fn default() -> Self {
        let mut o = Options {
            tool: String::new(),
            output: String::new(),
            enabled: true,
            handle_signals: true,
            verbosity: 0,
            help: false,
            line_size: 64,
            interval_unit: IntervalUnit::WallTime,
            interval: String::new(),
            snapshots: 128,
            snapshot_mib: 2,
            trace: String::new(),
            vsm: String::new(),
            granularity: String::new(),
            loop_bodies: false,
        };
        for d in OPTIONS {
            // The declared defaults are valid by construction (tested below).
            let _ = (d.set)(&mut o, d.default);
        }
        o
    }
}

impl Options {
    /// Parses a `KAGE_OPTIONS` string. Returns the options and one warning per problem
    /// (unknown option, bad value, item without `=`); a bad item keeps the default.
    pub fn parse(s: &str) -> (Options, Vec<String>) {
        let mut o = Options::default();
        let mut warnings = Vec::new();
        for item in s.split([':', ',']) {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            let Some((k, v)) = item.split_once('=') else {
                warnings.push(format!("KAGE_OPTIONS: '{item}' is not key=value; ignored"));
                continue;
            };
            let (k, v) = (k.trim(), v.trim());
            match OPTIONS.iter().find(|d| d.name == k) {
                None => warnings.push(format!(
                    "KAGE_OPTIONS: unknown option '{k}' ignored; known options: {}",
                    OPTIONS
                        .iter()
                        .map(|d| d.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
                Some(d) => {
                    if let Err(e) = (d.set)(&mut o, v) {
                        warnings.push(format!(
                            "KAGE_OPTIONS: bad value '{v}' for option '{k}' ({e}); using the default '{}'",
                            d.default
                        ));
                    }
                }
            }
        }
        (o, warnings)
    }

    /// The working-set interval length in its unit. A count unit with the (time) default
    /// gets 10M; anything else that does not parse is an error for the caller to report.
    pub fn interval_length(&self) -> Result<u64, String> {
        let default_is_time = self.interval == "10ms";
        match parse_interval(&self.interval, self.interval_unit) {
            Err(_) if default_is_time && !self.interval_unit.is_time() => Ok(10_000_000),
            r => r,
        }
    }

    /// Whether the `KAGE_OPTIONS` string `s` sets option `name` (to anything).
    pub fn is_set(s: &str, name: &str) -> bool {
        s.split([':', ','])
            .filter_map(|item| item.split_once('='))
            .any(|(k, _)| k.trim() == name)
    }

    /// Every option with the value in force, for the report.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        OPTIONS
            .iter()
            .map(|d| (d.name.to_string(), (d.get)(self)))
            .collect()
    }

    /// The `help=1` text: every option with its default and help, then the tools.
    pub fn help_text() -> String {
        let mut s = String::from("kage: runtime options (KAGE_OPTIONS=key=value:key=value...)\n");
        for d in OPTIONS {
            s += &format!("  {:<15} default: {:<17} {}\n", d.name, d.default, d.help);
        }
        s += "kage: tools (tool=...)\n";
        for t in crate::tools::TOOLS {
            s += &format!("  {:<15} {}\n", t.name, t.help);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let o = Options::default();
        assert_eq!(o.tool, "count");
        assert_eq!(o.output, "kage.%e.%p.json");
        assert!(o.enabled && o.handle_signals && !o.help);
        assert_eq!(o.verbosity, 0);
        for d in OPTIONS {
            let mut x = Options::default();
            assert!(
                (d.set)(&mut x, d.default).is_ok(),
                "default of {} parses",
                d.name
            );
        }
    }

    #[test]
    fn parse_both_separators() {
        let (o, w) = Options::parse("tool=count:output=/tmp/x.json,enabled=0 : verbosity=2");
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(o.output, "/tmp/x.json");
        assert!(!o.enabled);
        assert_eq!(o.verbosity, 2);
        assert_eq!(Options::parse("").0, Options::default());
    }

    #[test]
    fn unknown_and_bad_values_warn_and_keep_defaults() {
        let (o, w) = Options::parse("bogus=3:enabled=yes:verbosity=-1:novalue:help=1");
        assert_eq!(w.len(), 4, "{w:?}");
        assert!(w[0].contains("unknown option 'bogus'") && w[0].contains("handle_signals"));
        assert!(w[1].contains("'yes'") && w[1].contains("enabled"));
        assert!(w[2].contains("verbosity"));
        assert!(w[3].contains("novalue"));
        assert!(o.enabled);
        assert_eq!(o.verbosity, 0);
        assert!(o.help);
    }

    #[test]
    fn intervals_follow_their_unit() {
        use IntervalUnit::*;
        assert_eq!(parse_interval("10ms", WallTime), Ok(10_000_000));
        assert_eq!(parse_interval("500us", CpuTime), Ok(500_000));
        assert_eq!(parse_interval("2s", WallTime), Ok(2_000_000_000));
        assert_eq!(parse_interval("50k", Accesses), Ok(50_000));
        assert_eq!(parse_interval("3M", Instructions), Ok(3_000_000));
        assert_eq!(parse_interval("1234", Accesses), Ok(1234));
        assert!(parse_interval("10", WallTime)
            .unwrap_err()
            .contains("needs a unit"));
        assert!(parse_interval("10ms", Accesses).is_err());
        assert!(parse_interval("0", Accesses).is_err());
        assert!(parse_interval("ms", WallTime).is_err());
        let (o, w) = Options::parse("interval_unit=accesses");
        assert!(w.is_empty());
        assert_eq!(o.interval_length(), Ok(10_000_000));
        let (o, _) = Options::parse("interval_unit=accesses:interval=10ms");
        assert_eq!(o.interval_length(), Ok(10_000_000)); // the default spelled out
        let (o, _) = Options::parse("interval_unit=cpu:interval=7");
        assert!(o.interval_length().is_err());
        let (o, w) = Options::parse("line_size=48:snapshots=1:interval_unit=cycles");
        assert_eq!(w.len(), 3, "{w:?}");
        assert_eq!((o.line_size, o.snapshots), (64, 128));
    }

    #[test]
    fn map_has_every_option() {
        let (o, _) = Options::parse("enabled=0");
        let m = o.to_map();
        assert_eq!(m.len(), OPTIONS.len());
        assert_eq!(m["enabled"], "0");
        assert_eq!(m["tool"], "count");
        let h = Options::help_text();
        for d in OPTIONS {
            assert!(h.contains(d.name) && h.contains(d.help));
        }
        assert!(h.contains("count"));
    }
}
