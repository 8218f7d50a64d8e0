//! The counters each worker keeps about itself, written by that worker only (see the notes
//! of `metrics` for what that costs and what readers may see).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

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
    pub(super) fn busy_time(&self, now: Instant) -> Duration {
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
