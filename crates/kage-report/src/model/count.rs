//! The `count` tool's part of the report: per region, how many loads and stores it made and
//! how many bytes they moved, inclusive and exclusive of the regions nested in it; at the top
//! level the totals.

use super::{Region, Report};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The value of `"tool"` in a report of the count tool.
pub const COUNT_TOOL: &str = "count";

/// Access counters of one region, in one direction of inclusion.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    pub loads: u64,
    pub stores: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

impl Counters {
    pub fn add(&mut self, other: &Counters) {
        self.loads += other.loads;
        self.stores += other.stores;
        self.bytes_read += other.bytes_read;
        self.bytes_written += other.bytes_written;
    }
}

/// The `count` tool's per-region results, flattened into the region's JSON object.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountStats {
    /// Dynamic instances (calls, loop entries, iterations).
    pub instances: u64,
    /// Accesses made while the region or any region nested in it at run time was active.
    /// Recursive instances are counted once, in the outermost one.
    #[serde(flatten)]
    pub inclusive: Counters,
    /// Accesses made while the region was the innermost active one.
    #[serde(flatten, with = "self_prefixed")]
    pub exclusive: Counters,
}

impl CountStats {
    /// Reads the `count` fields of a region; `None` when they are absent or malformed.
    pub fn of(region: &Region) -> Option<CountStats> {
        serde_json::from_value(Value::Object(region.metrics.clone())).ok()
    }
}

/// Serialises [`Counters`] with every field name prefixed by `self_`.
mod self_prefixed {
    use super::Counters;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct SelfCounters {
        self_loads: u64,
        self_stores: u64,
        self_bytes_read: u64,
        self_bytes_written: u64,
    }

    pub fn serialize<S: Serializer>(c: &Counters, s: S) -> Result<S::Ok, S::Error> {
        SelfCounters {
            self_loads: c.loads,
            self_stores: c.stores,
            self_bytes_read: c.bytes_read,
            self_bytes_written: c.bytes_written,
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Counters, D::Error> {
        let c = SelfCounters::deserialize(d)?;
        Ok(Counters {
            loads: c.self_loads,
            stores: c.self_stores,
            bytes_read: c.self_bytes_read,
            bytes_written: c.self_bytes_written,
        })
    }
}

impl Report {
    /// The `count` tool's `"totals"`: every access the program made, whichever region it fell in.
    pub fn count_totals(&self) -> Option<Counters> {
        serde_json::from_value(self.tool_data.get("totals")?.clone()).ok()
    }
}
