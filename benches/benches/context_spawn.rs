//! What a non-empty context costs a spawn, on eddy only (tokio and smol have no context
//! variables).
//!
//! One iteration: a task spawns 100,000 tasks with `eddy::spawn`; each decrements a shared
//! counter, and the spawner awaits the notification sent when it reaches zero (the same
//! work as `spawn_many_local`). Two benchmarks in the group `context_spawn`:
//!
//! * `empty`: the spawner's context is empty (nothing was ever set in it);
//! * `three_vars`: before spawning, the spawner sets three `eddy::ContextVar`s, so every
//!   task captures (and each of its polls runs inside) a context holding three values.
//!
//! The target is `three_vars` at most 1.10x `empty`. Both run on the same runtime, built once,
//! in the same process, so their ratio is not disturbed by the machine's run-to-run swings.

use std::sync::LazyLock;
use std::time::Duration;

use criterion::{Criterion, SamplingMode};
use eddy::ContextVar;
use eddy_benches::{Countdown, Eddy, Runtime, WORKERS};

/// Tasks per iteration.
const TASKS: usize = 100_000;

static A: LazyLock<ContextVar<u64>> = LazyLock::new(|| ContextVar::new(0));
static B: LazyLock<ContextVar<u64>> = LazyLock::new(|| ContextVar::new(0));
static C: LazyLock<ContextVar<u64>> = LazyLock::new(|| ContextVar::new(0));

/// Sets the three variables in the current (task's) context.
fn set_three() {
    A.set(1);
    B.set(2);
    C.set(3);
}

/// One iteration: spawn `TASKS` trivial tasks from inside a task and wait until all ran.
fn iteration(rt: &Eddy, done: &'static Countdown, with_context: bool) {
    done.reset(TASKS);
    rt.run(async move {
        if with_context {
            set_three();
        }
        for _ in 0..TASKS {
            drop(eddy::spawn(async move { done.hit() }));
        }
        done.wait().await;
    })
    .unwrap_or_else(|hung| panic!("context_spawn: {hung}"));
}

/// Untimed check that the spawned tasks really carry the three values (and that the
/// `empty` case really is empty).
fn check_contexts(rt: &Eddy) {
    let seen = rt
        .run(async {
            let empty = eddy::spawn(async { (A.get(), B.get(), C.get()) })
                .await
                .expect("probe task");
            set_three();
            let full = eddy::spawn(async { (A.get(), B.get(), C.get()) })
                .await
                .expect("probe task");
            (empty, full)
        })
        .expect("context probe hung");
    assert_eq!(seen, ((0, 0, 0), (1, 2, 3)), "context not carried");
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .configure_from_args();
    let rt = Eddy::build(WORKERS);
    check_contexts(&rt);
    let done = Countdown::leak();
    {
        let mut group = c.benchmark_group("context_spawn");
        group.sampling_mode(SamplingMode::Flat);
        group.bench_function("empty", |b| b.iter(|| iteration(&rt, done, false)));
        group.bench_function("three_vars", |b| b.iter(|| iteration(&rt, done, true)));
        group.finish();
    }
    drop(rt);
    c.final_summary();
}
