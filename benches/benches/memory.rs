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

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::time::Duration;

use eddy_benches::workloads::pending_tasks;
use eddy_benches::{Countdown, Eddy, Runtime, Smol, Tokio, WORKERS};

/// The system allocator, counting.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);
/// Allocations by exact size (the last bucket holds every size >= `SIZE_BUCKETS - 1`).
const SIZE_BUCKETS: usize = 1025;
static BY_SIZE: [AtomicUsize; SIZE_BUCKETS] = [const { AtomicUsize::new(0) }; SIZE_BUCKETS];

#[inline]
fn count(size: usize) {
    LIVE.fetch_add(size as isize, Ordering::Relaxed);
    ALLOCATED.fetch_add(size, Ordering::Relaxed);
    ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    BY_SIZE[size.min(SIZE_BUCKETS - 1)].fetch_add(1, Ordering::Relaxed);
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so this
// allocator upholds exactly the contract `System` does; the counters are plain atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc::alloc`'s contract.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `alloc_zeroed`'s contract.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // `ptr` was allocated by `System` (through us) with `layout`, as the caller guarantees.
        // SAFETY: so forwarding unchanged is sound.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc::realloc`'s contract.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
            ALLOCATED.fetch_add(new_size, Ordering::Relaxed);
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[derive(Debug, Clone)]
struct Snapshot {
    live: isize,
    allocated: usize,
    allocations: usize,
    by_size: Vec<usize>,
}

fn snapshot() -> Snapshot {
    Snapshot {
        live: LIVE.load(Ordering::SeqCst),
        allocated: ALLOCATED.load(Ordering::SeqCst),
        allocations: ALLOCATIONS.load(Ordering::SeqCst),
        by_size: BY_SIZE.iter().map(|c| c.load(Ordering::SeqCst)).collect(),
    }
}

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
