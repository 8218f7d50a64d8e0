//! Metrics without flags: counters every worker keeps about itself (`counters`), and the
//! snapshot [`Runtime::metrics`](crate::Runtime::metrics) reads from them.
//!
//! Cost is the design constraint (the hot paths must not slow down measurably): each
//! counter is written only by its own worker, with a relaxed load and store (no atomic
//! read-modify-write), on a cache line no other thread writes. Readers may see a value a few
//! increments old; figures of different workers are not taken at the same instant. The one
//! value a reader writes is the high-water mark that keeps `busy_time` monotonic (a
//! `fetch_max` per snapshot, not on any hot path).

pub(crate) mod counters;

use std::time::{Duration, Instant};

use crate::worker::shared::{Shared, WorkerSlot};

/// One worker's counters and queue sizes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerMetrics {
    /// Task polls run by this worker.
    pub tasks_polled: u64,
    /// Callbacks run by this worker (cancelled ones are not counted).
    pub callbacks_run: u64,
    /// Successful steals of a batch from a sibling's ready queue.
    pub steal_operations: u64,
    /// Jobs taken by those steals.
    pub stolen_items: u64,
    /// Times the worker went to sleep in its poller.
    pub parks: u64,
    /// Of those parks, the ones it slept through as a sibling's guest: its epoll handed to
    /// that sibling, which served its IO meanwhile.
    pub guest_parks: u64,
    /// Times it woke up again (notification, timeout or IO).
    pub wakeups: u64,
    /// IO readiness events it harvested (from its own poller or a stuck sibling's).
    pub io_events: u64,
    /// Timers it fired (its own, or a stuck sibling's).
    pub timers_fired: u64,
    /// Timers of its heap cancelled before they fired.
    pub timers_cancelled: u64,
    /// Entries in its timer heap, cancelled ones included.
    pub timer_heap_size: usize,
    /// Cancelled entries still in the heap (asyncio's `_timer_cancelled_count`).
    pub timers_cancelled_in_heap: usize,
    /// Times the heap was rebuilt by the tidy rule (more than 100 entries, more than half
    /// of them cancelled).
    pub timer_heap_rebuilds: usize,
    /// Jobs in its stealable ready queue, and jobs a sibling handed it that it has not
    /// taken yet.
    pub ready_queue_depth: usize,
    /// Time not spent parked since the worker started (a park in progress counts as
    /// parked). Never less than in an earlier snapshot of the same runtime.
    pub busy_time: Duration,
}

/// A snapshot of a runtime; see [`Runtime::metrics`](crate::Runtime::metrics).
///
/// # Examples
///
/// ```
/// let rt = eddy::Builder::new().workers(2).build()?;
/// rt.block_on(async { eddy::spawn(async {}).await.unwrap() });
/// let m = rt.metrics();
/// assert_eq!(m.workers.len(), 2);
/// assert!(m.workers.iter().map(|w| w.tasks_polled).sum::<u64>() >= 1);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RuntimeMetrics {
    /// One entry per worker, by index.
    pub workers: Vec<WorkerMetrics>,
    /// One entry per spare worker (`Builder::spare_workers`), started or not: the loops that
    /// stand in while every worker is stuck in a long job.
    pub spares: Vec<WorkerMetrics>,
    /// Jobs waiting in the global injector.
    pub injector_depth: usize,
    /// Tasks spawned and not finished.
    pub live_tasks: usize,
    /// Threads alive in the blocking pool.
    pub blocking_threads: usize,
}

pub(crate) fn snapshot(shared: &Shared) -> RuntimeMetrics {
    let now = Instant::now();
    let (workers, spares) = shared.workers.split_at(shared.regular);
    RuntimeMetrics {
        workers: workers.iter().map(|w| worker_metrics(w, now)).collect(),
        spares: spares.iter().map(|w| worker_metrics(w, now)).collect(),
        injector_depth: shared.injector.len(),
        live_tasks: shared.registry.len(),
        blocking_threads: shared.blocking.threads(),
    }
}

fn worker_metrics(w: &WorkerSlot, now: Instant) -> WorkerMetrics {
    let c = &w.counters;
    WorkerMetrics {
        tasks_polled: c.tasks_polled.get(),
        callbacks_run: c.callbacks_run.get(),
        steal_operations: c.steal_operations.get(),
        stolen_items: c.stolen_items.get(),
        parks: c.parks.get(),
        guest_parks: c.guest_parks.get(),
        wakeups: c.wakeups.get(),
        io_events: c.io_events.get(),
        timers_fired: c.timers_fired.get(),
        timers_cancelled: w.timers.cancelled_total(),
        timer_heap_size: w.timers.len(),
        timers_cancelled_in_heap: w.timers.cancelled_count(),
        timer_heap_rebuilds: w.timers.rebuilds(),
        ready_queue_depth: w.stealer.len() + w.burst_share.len(),
        busy_time: c.busy_time(now),
    }
}
