//! Nanoseconds per access of every implementation on the three patterns of
//! `support/workloads.rs`, with 64-bit tags (HCPA-like).
//!
//!     cargo bench -p kage-vsm
//!
//! The patterns run at a quarter of the size the `vsm_table` example uses (2 MiB arrays),
//! with the VCache and the uncompressed list scaled down by the same factor (256 KiB and
//! 1 MiB of address space), so that the structures meet the same pressure in less time.
//! Each iteration builds a fresh shadow and runs the whole pattern.

#[path = "support/workloads.rs"]
mod workloads;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use kage_vsm::{AnyVsm, Config, Granularity, VectorShadow, VsmKind};
use std::time::Duration;
use workloads::Pattern;

const WORDS: u64 = 1 << 18;

fn config() -> Config {
    Config::from_spans(Granularity::Word, 4 << 10, 64 << 20, 256 << 10, 1 << 20)
}

fn access_time(c: &mut Criterion) {
    let config = config();
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
        .measurement_time(Duration::from_secs(3));
    targets = access_time
}
criterion_main!(benches);
