//! Metrics without flags: counters every worker keeps about itself, and the snapshot
//! [`Runtime::metrics`](crate::Runtime::metrics) reads from them.
//!
//! Cost is the design constraint (the hot paths must not slow down measurably): each
//! counter is written only by its own worker, with a relaxed load and store (no atomic
//! read-modify-write), on a cache line no other thread writes. Readers may see a value a few
//! increments old; figures of different workers are not taken at the same instant. The one
//! value a reader writes is the high-water mark that keeps `busy_time` monotonic (a
//! `fetch_max` per snapshot, not on any hot path).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::worker::shared::{Shared, WorkerSlot};

/// A counter with a single writer.
#[derive(Debug, Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`. Only the owning worker may call this.
    #[inline]
    pub(crate) fn add(&self, n: u64) {
        self.0.store(
            self.0.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// What one worker counts about itself (written by that worker only).
#[derive(Debug)]
pub(crate) struct WorkerCounters {
    pub(crate) tasks_polled: Counter,
    pub(crate) callbacks_run: Counter,
    pub(crate) steal_operations: Counter,
    pub(crate) stolen_items: Counter,
    pub(crate) parks: Counter,
    pub(crate) guest_parks: Counter,
    pub(crate) wakeups: Counter,
    pub(crate) io_events: Counter,
    pub(crate) timers_fired: Counter,
    pub(crate) parked_ns: Counter,
    /// While a park is in progress: when it began, in nanoseconds since `started`, plus one;
    /// zero while awake. Lets a snapshot leave the park in progress out of `busy_time`.
    park_began: AtomicU64,
    /// The largest `busy_time` reported so far (nanoseconds): snapshots never go back.
    busy_reported: AtomicU64,
    started: Instant,
}

impl WorkerCounters {
    pub(crate) fn new() -> Self {
        WorkerCounters {
            tasks_polled: Counter::default(),
            callbacks_run: Counter::default(),
            steal_operations: Counter::default(),
            stolen_items: Counter::default(),
            parks: Counter::default(),
            guest_parks: Counter::default(),
            wakeups: Counter::default(),
            io_events: Counter::default(),
            timers_fired: Counter::default(),
            parked_ns: Counter::default(),
            park_began: AtomicU64::new(0),
            busy_reported: AtomicU64::new(0),
            started: Instant::now(),
        }
    }

    /// The worker starts a park at `at` (the owning worker only).
    pub(crate) fn park_begins(&self, at: Instant) {
        let since = at.saturating_duration_since(self.started).as_nanos() as u64;
        self.park_began.store(since + 1, Ordering::Relaxed);
    }

    /// The worker woke from the park it began at `began` (the owning worker only).
    pub(crate) fn park_ends(&self, began: Instant, woke: Instant) {
        self.parked_ns
            .add(woke.saturating_duration_since(began).as_nanos() as u64);
        // Release: a snapshot that sees the park ended also sees it in `parked_ns`.
        self.park_began.store(0, Ordering::Release);
    }

    /// Time not spent parked up to `now`, never less than an earlier answer.
    ///
    /// A snapshot that reads `park_began` just before the worker wakes and `parked_ns` just
    /// after counts that park twice; the previous, larger answer stands then.
    fn busy_time(&self, now: Instant) -> Duration {
        let up = now.saturating_duration_since(self.started).as_nanos() as u64;
        let began = self.park_began.load(Ordering::Acquire);
        let parking = if began == 0 {
            0
        } else {
            up.saturating_sub(began - 1)
        };
        let busy = up
            .saturating_sub(self.parked_ns.get())
            .saturating_sub(parking);
        let reported = self.busy_reported.fetch_max(busy, Ordering::Relaxed);
        Duration::from_nanos(busy.max(reported))
    }
}

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
        ready_queue_depth: w.stealer.len() + w.handed.len(),
        busy_time: c.busy_time(now),
    }
}
