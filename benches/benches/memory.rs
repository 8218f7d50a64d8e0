//! Memory per pending task on eddy, tokio and smol, measured with a counting global
//! allocator (which is why this is its own bench target: the timing benches run on the plain
//! system allocator). Not a criterion bench: it prints one line per runtime.
//!
//! For each runtime: build it (2 workers), let it settle, take a snapshot of the allocator's
//! counters, spawn `PENDING_TASKS` (default 100,000) tasks that stay pending forever (see
//! `eddy_benches::workloads::pending_tasks`), wait until all were polled once, let the
//! workers park, and take a second snapshot. Reported per task:
//!
//! * `live`: bytes still allocated (the steady-state cost of a pending task, including any
//!   side structure that grew for it, such as a registry or a slab);
//! * `allocated`: all bytes allocated on the way, freed or not, and the number of allocations;
//! * the allocation sizes made at least once per two tasks (the task cell itself).

use std::time::Duration;

use eddy_benches::counting::{snapshot, Counting, Snapshot, SIZE_BUCKETS};
use eddy_benches::workloads::pending_tasks;
use eddy_benches::{Countdown, Eddy, Runtime, Smol, Tokio, WORKERS};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The allocation sizes made at least `n / 2` times between two snapshots, as
/// "`size` B x `count`", so that the per-task allocation (the task cell) can be read off.
fn frequent_sizes(before: &Snapshot, after: &Snapshot, n: usize) -> String {
    let mut out: Vec<String> = after
        .by_size
        .iter()
        .zip(&before.by_size)
        .enumerate()
        .filter(|(_, (a, b))| *a - *b >= n / 2)
        .map(|(size, (a, b))| {
            let more = if size == SIZE_BUCKETS - 1 { "+" } else { "" };
            format!("{size}{more} B x {}", a - b)
        })
        .collect();
    if out.is_empty() {
        out.push("none".to_string());
    }
    out.join(", ")
}

const SETTLE: Duration = Duration::from_millis(200);

fn measure<R: Runtime>(n: usize) {
    let rt = R::build(WORKERS);
    let polled = Countdown::leak();
    // Warm the runtime up (thread-locals, first-use allocations) with one short round trip.
    rt.run(async {}).expect("warm-up");
    std::thread::sleep(SETTLE);
    let before = snapshot();
    if let Err(hung) = pending_tasks::spawn_pending(&rt, n, polled) {
        println!("memory/{:<6} SKIPPED: {hung}", R::NAME);
        std::mem::forget(rt);
        return;
    }
    std::thread::sleep(SETTLE);
    let after = snapshot();
    let live = (after.live - before.live) as f64 / n as f64;
    let allocated = (after.allocated - before.allocated) as f64 / n as f64;
    let allocations = (after.allocations - before.allocations) as f64 / n as f64;
    println!(
        "memory/{:<6} {n} pending tasks: live {live:>7.1} B/task  allocated {allocated:>7.1} B/task in {allocations:.2} allocations/task  (frequent sizes: {})",
        R::NAME,
        frequent_sizes(&before, &after, n)
    );
    drop(rt);
}

fn main() {
    let n = std::env::var("PENDING_TASKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    println!("memory per pending task, {WORKERS} workers");
    measure::<Eddy>(n);
    measure::<Tokio>(n);
    measure::<Smol>(n);
}
