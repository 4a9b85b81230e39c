//! Nanoseconds per access of every implementation on the three patterns of
//! `support/workloads.rs`, with 64-bit tags (HCPA-like).
//!
//!     cargo bench -p kage-vsm
//!
//! The patterns run at the size the `vsm_table` example records (8 MiB arrays, 4M accesses)
//! with the paper's HCPA settings (`Config::hcpa()`), so the two measure the same thing: a
//! shorter run weighs the start-up of the adaptive structures (the VCache filling, the
//! uncompressed list shrinking to what the pattern needs) several times more than a
//! program's run would. Each iteration builds a fresh shadow and runs the whole pattern.

#[path = "support/workloads.rs"]
mod workloads;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use kage_vsm::{AnyVsm, Config, VectorShadow, VsmKind};
use std::time::Duration;
use workloads::Pattern;

const WORDS: u64 = 1 << 20;

fn access_time(c: &mut Criterion) {
    let config = Config::hcpa();
    for pattern in Pattern::ALL {
        let mut group = c.benchmark_group(pattern.name());
        group.throughput(Throughput::Elements(4 * WORDS));
        for kind in VsmKind::ALL {
            group.bench_with_input(BenchmarkId::from_parameter(kind), &kind, |b, &kind| {
                b.iter(|| {
                    let mut vsm = AnyVsm::<u64>::new(kind, &config);
                    pattern.run(&mut vsm, WORDS, &mut |_| {});
                    vsm.heap_bytes()
                })
            });
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    targets = access_time
}
criterion_main!(benches);
