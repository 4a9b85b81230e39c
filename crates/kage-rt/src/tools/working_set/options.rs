//! The working-set tool's options, declared as data for the options table, and their typed
//! reading ([`WsOptions`]). `line_size=` is a common option (`crate::options::LINE_SIZE`).

use crate::options::{non_empty, OptionDef, Options};

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

    pub fn from_name(name: &str) -> Option<IntervalUnit> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, u)| *u)
    }

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

const INTERVAL_UNIT: OptionDef = OptionDef {
    name: "interval_unit",
    default: "wall",
    help: "working-set: what intervals measure: wall (time), cpu (process CPU time), \
           accesses (memory accesses), instructions (hardware counter; falls back to cpu)",
    parse: |v| match IntervalUnit::from_name(v) {
        Some(u) => Ok(u.option_name().to_string()),
        None => Err("expected wall, cpu, accesses or instructions".into()),
    },
};

/// Checked against the unit only when the tool starts ([`WsOptions::interval_length`]).
const INTERVAL: OptionDef = OptionDef {
    name: "interval",
    default: "10ms",
    help: "working-set: the snapshot interval: a duration (10ms, 500us, 1s) for wall and \
           cpu, a count (100000, 50k, 2M) for accesses and instructions (default for \
           those: 10M)",
    parse: |v| non_empty(v, "an interval"),
};

const SNAPSHOTS: OptionDef = OptionDef {
    name: "snapshots",
    default: "128",
    help: "working-set: snapshots kept; when full, adjacent pairs are merged (their \
           union) and the interval doubles",
    parse: |v| match v.parse::<u32>() {
        Ok(n) if n >= 2 => Ok(n.to_string()),
        _ => Err("expected an integer of at least 2".into()),
    },
};

const SNAPSHOT_MIB: OptionDef = OptionDef {
    name: "snapshot_mib",
    default: "2",
    help: "working-set: memory (MiB) the kept snapshots' compressed bitmaps may take; \
           beyond it adjacent snapshots are merged as when there are too many",
    parse: |v| match v.parse::<u32>() {
        Ok(n) if n >= 1 => Ok(n.to_string()),
        _ => Err("expected a positive integer".into()),
    },
};

const TRACE: OptionDef = OptionDef {
    name: "trace",
    default: "",
    help: "working-set, test-only (programs built with KAGE_WS_TRACE=1): write every \
           access with its interval to this file",
    parse: |v| Ok(v.to_string()),
};

/// The working-set tool's options (`tools::TOOLS`).
pub static OPTIONS: &[OptionDef] = &[INTERVAL_UNIT, INTERVAL, SNAPSHOTS, SNAPSHOT_MIB, TRACE];

/// The working-set options in force, typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WsOptions {
    /// What the interval is measured in.
    pub interval_unit: IntervalUnit,
    /// The interval as written (`10ms`, `1000000`); checked against the unit by
    /// [`WsOptions::interval_length`].
    pub interval: String,
    /// The most snapshots kept before adjacent ones are merged.
    pub snapshots: u32,
    /// The most memory (MiB) the kept snapshots' bitmaps may take before adjacent ones are
    /// merged.
    pub snapshot_mib: u32,
    /// Test-only: file that receives every traced access ("" for none).
    pub trace: String,
}

impl WsOptions {
    /// Reads the values in force (parsed by their [`OptionDef`]s already).
    pub fn from(opts: &Options) -> WsOptions {
        let number = |d: &OptionDef| -> u32 {
            let default = d.default.parse().unwrap_or(1);
            opts.get(d).parse().unwrap_or(default)
        };
        WsOptions {
            interval_unit: IntervalUnit::from_name(opts.get(&INTERVAL_UNIT))
                .unwrap_or(IntervalUnit::WallTime),
            interval: opts.get(&INTERVAL).to_string(),
            snapshots: number(&SNAPSHOTS),
            snapshot_mib: number(&SNAPSHOT_MIB),
            trace: opts.get(&TRACE).to_string(),
        }
    }

    /// The interval length in its unit. A count unit with the (time) default gets 10M;
    /// anything else that does not parse is an error for the caller to report.
    pub fn interval_length(&self) -> Result<u64, String> {
        let default_is_time = self.interval == INTERVAL.default;
        match parse_interval(&self.interval, self.interval_unit) {
            Err(_) if default_is_time && !self.interval_unit.is_time() => Ok(10_000_000),
            r => r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> (WsOptions, Vec<String>) {
        let (o, w) = Options::parse(s, &[OPTIONS]);
        (WsOptions::from(&o), w)
    }

    #[test]
    fn defaults() {
        let (o, w) = parse("");
        assert!(w.is_empty());
        assert_eq!(
            o,
            WsOptions {
                interval_unit: IntervalUnit::WallTime,
                interval: "10ms".into(),
                snapshots: 128,
                snapshot_mib: 2,
                trace: String::new(),
            }
        );
        assert_eq!(WsOptions::from(&Options::default()), o, "without the table");
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
        let (o, w) = parse("interval_unit=accesses");
        assert!(w.is_empty());
        assert_eq!(o.interval_length(), Ok(10_000_000));
        let (o, _) = parse("interval_unit=accesses:interval=10ms");
        assert_eq!(o.interval_length(), Ok(10_000_000)); // the default spelled out
        let (o, _) = parse("interval_unit=cpu:interval=7");
        assert!(o.interval_length().is_err());
        let (o, w) = Options::parse("line_size=48:snapshots=1:interval_unit=cycles", &[OPTIONS]);
        assert_eq!(w.len(), 3, "{w:?}");
        assert_eq!((o.line_size(), WsOptions::from(&o).snapshots), (64, 128));
        for (name, unit) in IntervalUnit::ALL {
            assert_eq!(IntervalUnit::from_name(name), Some(unit));
            assert_eq!(unit.option_name(), name);
        }
    }
}
