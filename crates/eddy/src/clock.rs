//! The runtime's clock: real monotonic time, or a paused clock for tests.
//!
//! Every deadline the runtime computes (`call_later`, `sleep`, `interval`, the timer heaps'
//! "due" test, `eddy::time()`) reads this clock. Normally it is `Instant::now()`. Built with
//! [`Builder::start_paused`](crate::Builder::start_paused), it stands still: it moves only by
//! [`time::advance`](crate::time::advance), or by *auto-advance*: when every worker is idle
//! (parked, nothing queued) and no blocking job runs, the last worker to park jumps the
//! clock straight to the earliest timer deadline of any heap. Tests of timeouts and retries
//! that would take hours of real time then finish in milliseconds, with any number of
//! workers (tokio allows a paused clock only on its single-threaded runtime).
//!
//! The paused clock is an offset from the instant the runtime was built; it only grows
//! (`fetch_max`), so concurrent advances never move time backwards.
//!
//! A jump is decided from several reads (is every worker parked, is a `block_on` thread
//! awake, which deadline is earliest) that no lock makes one snapshot. Between them a worker
//! may wake, fire the timer that was earliest and set a later one: a jump to the deadline
//! read after that would skip the new timer. So every wake-up of a worker or a `block_on`
//! thread is counted ([`Clock::note_wake`]), and [`Clock::jump_if_quiet`] moves the clock
//! only if no wake-up was counted while it decided, checked under the same lock that counts
//! them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

#[derive(Debug)]
pub(crate) struct Clock {
    start: Instant,
    paused: bool,
    /// Nanoseconds since `start` (paused clock only).
    offset: AtomicU64,
    /// Wake-ups of workers and `block_on` threads so far (paused clock only).
    wakes: Mutex<u64>,
}

impl Clock {
    pub(crate) fn new(start: Instant, paused: bool) -> Self {
        Clock {
            start,
            paused,
            offset: AtomicU64::new(0),
            wakes: Mutex::new(0),
        }
    }

    /// Records that a worker or a `block_on` thread woke up: a jump being decided right now
    /// must not happen. Call it before the thread touches any timer or runs any job.
    #[inline]
    pub(crate) fn note_wake(&self) {
        if self.paused {
            *self.wakes.lock() += 1;
        }
    }

    /// Paused clock: asks `quiet_until` whether the runtime is idle and, if so, for the
    /// deadline to jump to; moves the clock there unless something woke up meanwhile. True
    /// if the clock moved.
    pub(crate) fn jump_if_quiet(&self, quiet_until: impl FnOnce() -> Option<Instant>) -> bool {
        debug_assert!(self.paused);
        let seen = *self.wakes.lock();
        let Some(to) = quiet_until() else {
            return false;
        };
        let wakes = self.wakes.lock();
        if *wakes != seen {
            return false;
        }
        self.advance_to(to);
        true
    }

    #[inline]
    pub(crate) fn is_paused(&self) -> bool {
        self.paused
    }

    /// The current time of this runtime.
    #[inline]
    pub(crate) fn now(&self) -> Instant {
        if self.paused {
            self.start + Duration::from_nanos(self.offset.load(Ordering::Acquire))
        } else {
            Instant::now()
        }
    }

    /// A deadline `delay` from now, clamped so that huge delays never overflow.
    pub(crate) fn deadline_after(&self, delay: Duration) -> Instant {
        crate::timer::deadline_from(self.now(), delay)
    }

    /// Moves a paused clock forward by `d`.
    pub(crate) fn advance(&self, d: Duration) {
        let d = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let _ = self
            .offset
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |o| {
                Some(o.saturating_add(d))
            });
    }

    /// Moves a paused clock forward to `t` (never backwards).
    pub(crate) fn advance_to(&self, t: Instant) {
        let target = t.saturating_duration_since(self.start).as_nanos();
        let target = u64::try_from(target).unwrap_or(u64::MAX);
        self.offset.fetch_max(target, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paused_clock_moves_only_forward_and_only_when_told() {
        let start = Instant::now();
        let c = Clock::new(start, true);
        assert_eq!(c.now(), start);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(c.now(), start, "real time passing does not move it");
        c.advance(Duration::from_secs(3600));
        assert_eq!(c.now(), start + Duration::from_secs(3600));
        c.advance_to(start + Duration::from_secs(10));
        assert_eq!(
            c.now(),
            start + Duration::from_secs(3600),
            "never backwards"
        );
        c.advance_to(start + Duration::from_secs(7200));
        assert_eq!(c.now(), start + Duration::from_secs(7200));
    }

    #[test]
    fn a_jump_is_dropped_when_something_woke_while_it_was_decided() {
        let start = Instant::now();
        let c = Clock::new(start, true);
        let to = start + Duration::from_secs(60);
        assert!(!c.jump_if_quiet(|| None), "not quiet: no jump");
        assert_eq!(c.now(), start);
        let woke_meanwhile = c.jump_if_quiet(|| {
            c.note_wake();
            Some(to)
        });
        assert!(!woke_meanwhile);
        assert_eq!(
            c.now(),
            start,
            "a wake-up during the decision cancels the jump"
        );
        assert!(c.jump_if_quiet(|| Some(to)));
        assert_eq!(c.now(), to);
    }

    #[test]
    fn real_clock_follows_instant_now() {
        let c = Clock::new(Instant::now(), false);
        let a = c.now();
        std::thread::sleep(Duration::from_millis(2));
        assert!(c.now() >= a + Duration::from_millis(2));
    }
}
