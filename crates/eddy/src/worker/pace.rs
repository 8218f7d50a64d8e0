//! The pace of IO work: when the jobs that an IO harvest queued on a worker are more than it
//! should run alone (docs/architecture.md, "Searching and parking").
//!
//! Each worker times phase 4 of the cycles in which IO queued work and keeps a moving
//! average per job (`Worker::io_job_ns`). IO-woken jobs stay with the worker that harvested
//! them (their sockets are registered there) unless they add up to more than
//! [`IO_SURPLUS`] at that pace, or the worker has not parked for [`SATURATED`]. Only the
//! owning worker calls these, from `run_fired`, `stop_searching` and `run_once`.

use std::time::Duration;

use super::Worker;

/// How much queued IO-woken work (at this worker's recent pace) calls for a sibling's help
/// (see `io_backlog_is_surplus`).
const IO_SURPLUS: Duration = Duration::from_micros(500);

/// The same, by count, until the worker has timed any IO cycle.
const IO_BACKLOG_UNTIMED: usize = 16;

/// A worker that has not parked for this long is saturated: any backlog is surplus.
const SATURATED: Duration = Duration::from_millis(5);

impl Worker {
    /// Whether the jobs queued here are more than this worker should run alone after an IO
    /// harvest: more than `IO_SURPLUS` of work at its recent pace, or any backlog once the
    /// worker has run for `SATURATED` without a park. Waking a sibling costs a wake-up,
    /// and on a machine with more runnable threads than CPUs (a server beside its clients) a
    /// scheduler slice (3-4 ms here) for whoever then waits for a CPU; a backlog that this
    /// worker clears within half a millisecond is not worth that, while a few long jobs, or
    /// a worker that never gets to rest, are.
    pub(super) fn io_backlog_is_surplus(&self) -> bool {
        let queued = self.ready.len();
        let pace = self.io_job_ns.get();
        if pace == 0 {
            return queued > IO_BACKLOG_UNTIMED;
        }
        queued as u64 * pace > IO_SURPLUS.as_nanos() as u64
            || (queued > 1 && self.awake_since.get().elapsed() >= SATURATED)
    }

    /// Folds one IO cycle's phase 4 (`jobs` jobs in `took`) into the pace estimate.
    pub(super) fn note_io_pace(&self, took: Duration, jobs: usize) {
        if jobs == 0 {
            return;
        }
        let sample = took.as_nanos() as u64 / jobs as u64;
        let old = self.io_job_ns.get();
        // Wall-clock time: a cycle in which the thread was preempted looks slow. One sample
        // may move the average at most as far as four times its value would.
        let new = if old == 0 {
            sample
        } else {
            (old * 7 + sample.min(old * 4)) / 8
        };
        self.io_job_ns.set(new.max(1));
    }
}
