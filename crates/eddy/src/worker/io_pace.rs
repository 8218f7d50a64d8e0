//! The pace of IO work: when the jobs that an IO harvest queued on a worker are more than it
//! should run alone (docs/architecture.md, "Searching and parking").
//!
//! IO-woken jobs stay with the worker that harvested them (their sockets are registered
//! there) unless they add up to more than [`IO_SURPLUS`] at the worker's recent pace, or the
//! worker has not parked for [`SATURATED`]. Waking a sibling costs a wake-up, and on a
//! machine with more runnable threads than CPUs (a server beside its clients) a scheduler
//! slice for whoever then waits for a CPU; a backlog that this worker clears within half a
//! millisecond is not worth that, while a few long jobs, or a worker that never gets to
//! rest, are.
//!
//! [`IoPace`] is the rule as a plain value: the worker feeds it the phase-4 timings of its
//! IO cycles and asks it about its queue; it reads no clock and touches no queue itself.

use std::time::Duration;

/// How much queued IO-woken work (at this worker's recent pace) calls for a sibling's help.
const IO_SURPLUS: Duration = Duration::from_micros(500);

/// The same, by count, until the worker has timed any IO cycle.
const IO_BACKLOG_UNTIMED: usize = 16;

/// A worker that has not parked for this long is saturated: any backlog is surplus.
const SATURATED: Duration = Duration::from_millis(5);

/// One worker's moving average of the time an IO-woken job takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct IoPace {
    /// Nanoseconds per job; `None` until the first IO cycle was timed.
    job_ns: Option<u64>,
}

impl IoPace {
    /// Whether `queued` jobs waiting after an IO harvest are more than the worker should
    /// run alone, `awake_for` after it last woke from a park.
    pub(super) fn backlog_is_surplus(&self, queued: usize, awake_for: Duration) -> bool {
        let Some(pace) = self.job_ns else {
            return queued > IO_BACKLOG_UNTIMED;
        };
        queued as u64 * pace > IO_SURPLUS.as_nanos() as u64
            || (queued > 1 && awake_for >= SATURATED)
    }

    /// Folds one IO cycle's phase 4 (`jobs` jobs in `took`) into the average.
    pub(super) fn note(&mut self, took: Duration, jobs: usize) {
        if jobs == 0 {
            return;
        }
        let sample = (took.as_nanos() / jobs as u128).min(u64::MAX as u128) as u64;
        // Wall-clock time: a cycle in which the thread was preempted looks slow. One sample
        // may move the average at most as far as four times its value would.
        let new = match self.job_ns {
            None => sample,
            Some(old) => (old * 7 + sample.min(old.saturating_mul(4))) / 8,
        };
        self.job_ns = Some(new.max(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRESH: Duration = Duration::ZERO;

    fn paced(per_job: Duration) -> IoPace {
        let mut pace = IoPace::default();
        pace.note(per_job * 10, 10);
        pace
    }

    #[test]
    fn untimed_a_backlog_is_counted() {
        let pace = IoPace::default();
        assert!(!pace.backlog_is_surplus(IO_BACKLOG_UNTIMED, FRESH));
        assert!(pace.backlog_is_surplus(IO_BACKLOG_UNTIMED + 1, FRESH));
    }

    #[test]
    fn many_short_jobs_stay_a_few_long_ones_are_shared() {
        // 32 echoes of a few microseconds: far below the surplus.
        let short = paced(Duration::from_micros(5));
        assert!(!short.backlog_is_surplus(32, FRESH));
        // 4 jobs of a millisecond: well above it.
        let long = paced(Duration::from_millis(1));
        assert!(long.backlog_is_surplus(4, FRESH));
        // The boundary: exactly `IO_SURPLUS` of work is not yet surplus.
        let half_ms = paced(IO_SURPLUS / 10);
        assert!(!half_ms.backlog_is_surplus(10, FRESH));
        assert!(half_ms.backlog_is_surplus(11, FRESH));
    }

    #[test]
    fn a_saturated_worker_shares_any_backlog_but_a_single_job() {
        let short = paced(Duration::from_micros(5));
        assert!(short.backlog_is_surplus(2, SATURATED));
        assert!(!short.backlog_is_surplus(1, SATURATED));
        assert!(!short.backlog_is_surplus(2, SATURATED - Duration::from_nanos(1)));
    }

    #[test]
    fn one_slow_sample_moves_the_average_by_a_bounded_step() {
        let mut pace = paced(Duration::from_micros(10));
        assert_eq!(pace.job_ns, Some(10_000));
        // A cycle preempted for 4 ms: counted as at most four times the average.
        pace.note(Duration::from_millis(4), 1);
        assert_eq!(pace.job_ns, Some((10_000 * 7 + 40_000) / 8));
        // A faster sample pulls it down by an eighth of the difference.
        let before = pace.job_ns.unwrap();
        pace.note(Duration::ZERO, 1);
        assert_eq!(pace.job_ns, Some(before * 7 / 8));
    }

    #[test]
    fn a_cycle_without_jobs_changes_nothing_and_the_average_never_reaches_zero() {
        let mut pace = IoPace::default();
        pace.note(Duration::from_millis(1), 0);
        assert_eq!(pace, IoPace::default());
        pace.note(Duration::ZERO, 5);
        assert_eq!(pace.job_ns, Some(1));
    }
}
