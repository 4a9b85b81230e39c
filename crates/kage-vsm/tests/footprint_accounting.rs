//! The footprint shadow's `heap_bytes()` equals, to the byte, what a counting allocator saw
//! it allocate and not free, after every step of programs that create tag tables, compress
//! and expand them and grow the level stack, with accesses of a few bytes and ranges of
//! up to 20000; and `take_changed()` reports every change.

mod counting;

use counting::live;

use kage_vsm::footprint::{Footprint, FpConfig, FpKind, MAX_LEVELS};

#[global_allocator]
static ALLOCATOR: counting::Counting = counting::Counting;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn run(config: FpConfig, seed: u64) {
    let start = live();
    let mut fp = Footprint::new(config);
    let mut last = fp.heap_bytes();
    assert_eq!(
        live() - start,
        last as isize,
        "{config:?}: after construction"
    );
    let mut rng = Rng(seed);
    let mut peak = 0;
    for step in 0..6000 {
        let r = rng.next();
        match r % 16 {
            0..=2 => {
                if fp.depth() < 80 {
                    fp.enter();
                }
            }
            3..=5 => {
                if fp.depth() > 0 {
                    fp.exit();
                }
            }
            6 => {
                // A sweep: tables fill up and collapse to one value.
                let base = (r >> 8) % 4 * 4096;
                for i in 0..512 {
                    fp.access(base + i * 8, 8);
                }
            }
            7 => {
                // A range (a hoisted loop): crosses tables, creates, fills and expands them.
                let addr = (r >> 8) % 40_000 + (((r >> 40) % 3) << 32);
                fp.access(addr, 1 + (r >> 44) % 20_000);
            }
            _ => {
                let addr = (r >> 8) % 40_000 + (((r >> 40) % 3) << 32);
                fp.access(addr, 1 + (r >> 50) % 64);
            }
        }
        let held = live() - start;
        peak = peak.max(held);
        assert_eq!(held, fp.heap_bytes() as isize, "{config:?}: step {step}");
        let changed = fp.take_changed();
        if fp.heap_bytes() != last {
            assert!(changed, "{config:?}: step {step}: heap changed unreported");
        }
        last = fp.heap_bytes();
    }
    assert!(peak > 0);
    drop(fp);
    assert_eq!(live() - start, 0, "{config:?}: after drop");
}

#[test]
fn heap_bytes_is_exact() {
    for kind in FpKind::ALL {
        for (location_shift, line_shift) in [(0, 6), (3, 6), (6, 6)] {
            for table_bits in [Some(6), Some(9), None] {
                let config = FpConfig {
                    kind,
                    location_shift,
                    line_shift,
                    table_bits,
                };
                run(config, 0x9e37_79b9_7f4a_7c15 ^ location_shift as u64);
            }
        }
    }
}

#[test]
fn depth_is_bounded_by_the_byte_tag() {
    let mut fp = Footprint::new(FpConfig::new(FpKind::Palette));
    for _ in 0..MAX_LEVELS - 1 {
        assert!(fp.enter());
    }
    assert!(!fp.enter(), "a level beyond the byte's range is refused");
    fp.access(0, 1);
    fp.flush();
    assert_eq!(fp.current(MAX_LEVELS - 2).locations, 1);
}
