//! Tests of the public API, and what the tests of the other files share: [`Rng`] and
//! [`EVENTS`], the table transitions counted by `forms::event`.

use super::*;
use std::cell::RefCell;
use std::collections::BTreeMap;

thread_local! {
    pub(super) static EVENTS: RefCell<BTreeMap<&'static str, usize>> = RefCell::default();
}

fn small(kind: FpKind) -> FpConfig {
    FpConfig {
        table_bits: Some(6),
        ..FpConfig::new(kind)
    }
}

pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Bytes from a few values, in runs: what tag tables hold.
    pub(super) fn bytes(&mut self, len: usize) -> Vec<u8> {
        let values: Vec<u8> = (0..1 + self.next() % 4)
            .map(|_| self.next() as u8)
            .collect();
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            let r = self.next();
            let run = 1 + (r >> 8) as usize % if r & 1 == 0 { 3 } else { 90 };
            let v = values[(r >> 32) as usize % values.len()];
            out.extend(std::iter::repeat_n(v, run.min(len - out.len())));
        }
        out
    }
}

#[test]
fn kinds_round_trip_through_their_names() {
    for kind in FpKind::ALL {
        assert_eq!(kind.name().parse::<FpKind>(), Ok(kind));
    }
    assert!("fast".parse::<FpKind>().unwrap_err().contains("palette"));
}

#[test]
fn nested_regions_count_inclusively() {
    for kind in FpKind::ALL {
        let mut fp = Footprint::new(small(kind));
        fp.access(0, 100); // no region: ignored
        assert!(fp.enter()); // f
        fp.access(0, 10);
        assert!(fp.enter()); // loop
        fp.access(5, 10); // 10 new for loop, 5 new for f
        fp.access(5, 10);
        let inner = fp.exit();
        assert_eq!(inner.locations, 10, "{kind}");
        assert_eq!(inner.lines, 1, "{kind}");
        assert!(fp.enter()); // loop again: a fresh instance
        fp.access(0, 1);
        fp.access(64, 1);
        assert_eq!(
            fp.exit(),
            Touched {
                locations: 2,
                lines: 2
            },
            "{kind}"
        );
        let outer = fp.exit();
        assert_eq!(
            outer,
            Touched {
                locations: 16,
                lines: 2
            },
            "{kind}"
        );
        assert_eq!(fp.total(), outer, "{kind}");
    }
}

#[test]
fn touched_by_counts_as_an_entered_and_exited_leaf() {
    // Random byte ranges, overlapping and touching, at each granularity: the leaf's count
    // without entering it equals entering, accessing and exiting.
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for location_shift in [0, 3, 6] {
        for _ in 0..200 {
            let config = FpConfig {
                location_shift,
                ..small(FpKind::DEFAULT)
            };
            let n = 1 + rng.next() % 40;
            let ranges: Vec<(u64, u64)> = (0..n)
                .map(|_| {
                    let first = 4096 + rng.next() % 600;
                    (first, first + rng.next() % 70)
                })
                .collect();
            let mut fp = Footprint::new(config);
            assert!(fp.enter());
            assert!(fp.enter());
            for &(first, last) in &ranges {
                fp.access(first, last - first + 1);
            }
            let entered = fp.exit();
            let mut pairs: Vec<[u64; 2]> = ranges.iter().map(|&(f, l)| [f, l]).collect();
            assert_eq!(fp.touched_by(&mut pairs), entered, "{location_shift}");
        }
    }
}
