//! The criterion harness shared by the timing bench targets: one group per workload, with
//! one benchmark per runtime, each runtime built once outside the timed loop.

use std::time::Duration;

use criterion::{BenchmarkGroup, Criterion, SamplingMode};
use eddy_benches::{Eddy, Runtime, Smol, Tokio, Workload, WORKERS};

/// Runs workload `W` on eddy, tokio and smol in this process, then prints criterion's summary.
pub(crate) fn main<W: Workload>() {
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .configure_from_args();
    {
        let mut group = c.benchmark_group(W::NAME);
        group.sampling_mode(SamplingMode::Flat);
        bench_on::<Eddy, W>(&mut group);
        bench_on::<Tokio, W>(&mut group);
        bench_on::<Smol, W>(&mut group);
        group.finish();
    }
    c.final_summary();
}

fn bench_on<R: Runtime, W: Workload>(
    group: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>,
) {
    let rt = R::build(WORKERS);
    let state = W::setup();
    // One untimed probe: a runtime that hangs is reported and skipped, not waited on forever.
    if let Err(hung) = W::iteration(&rt, &state) {
        eprintln!("SKIPPED {}/{}: {hung}", W::NAME, R::NAME);
        // Its workers may be stuck: do not wait for them in the runtime's destructor.
        std::mem::forget(rt);
        return;
    }
    group.bench_function(R::NAME, |b| {
        b.iter(|| {
            W::iteration(&rt, &state).unwrap_or_else(|hung| panic!("{}: {hung}", W::NAME));
        });
    });
    drop(rt);
}
