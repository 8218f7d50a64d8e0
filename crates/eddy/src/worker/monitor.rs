//! The monitor: Go's `sysmon`, reduced to one job: notice a worker stuck in a long job and
//! wake a parked sibling to serve what the stuck worker cannot (its queued tasks, its due
//! timers, its IO).
//!
//! Why a thread and not timeouts on the parked workers: a parked worker that woke up every
//! few milliseconds to look at busy siblings, and busy workers that notified parked ones to
//! keep such a watch, cost a park/wake round trip (then seven system calls: `polling`'s five
//! per wait, the eventfd write, the timerfd; still two context switches now that a park is
//! one `epoll_wait`) several thousand times a second on a busy server, which doubled eddy's
//! server CPU per request. The monitor costs one sleeping thread, and looks only as often
//! as a look can help ([`MonitorPace`]):
//!
//! * once every worker is parked and none ran a cycle for a whole look, it sleeps on a
//!   condition variable until one wakes up (a worker leaving its park checks one flag, and
//!   signals only if the monitor sleeps);
//! * while some workers are awake and others parked, it looks every [`WATCH_INTERVAL`]: a
//!   parked sibling is what serves a stuck worker, and the sooner it is sent, the less a
//!   stuck worker's sockets and timers wait;
//! * while every worker is awake it looks every [`BUSY_INTERVAL`]: there is nobody parked to
//!   send, and busy workers look after each other between jobs (`siblings`).
//!
//! At each look, for each awake worker whose cycle counter has not moved since the last
//! look (one cycle, one job or many, has run for a whole interval) and that has something
//! waiting (queued jobs, timers, IO sources), it notifies one parked sibling. The sibling's
//! loop does the rest (`Worker::rescue_stuck_siblings`: it nests the stuck worker's epoll in
//! its own, fires its timers, steals its queue).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::shared::Shared;

/// How often the monitor looks while some workers are awake and others parked: a stuck
/// worker's IO waits up to about twice this for its rescuer. The IO grace itself, so that
/// the sibling it sends finds the stuck worker past it.
pub(crate) const WATCH_INTERVAL: Duration = crate::reactor::STUCK_IO_GRACE;

/// How often it looks while every worker is awake: nobody could be sent anyway.
pub(crate) const BUSY_INTERVAL: Duration = Duration::from_millis(5);

/// When the monitor looks next, from what it saw at this look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MonitorPace {
    /// Sleep until a worker wakes: every worker is parked and none moved since last time.
    UntilWoken,
    /// Look again after this long.
    After(Duration),
}

impl MonitorPace {
    /// `awake`: workers not parked now; `parked`: workers parked now; `moved`: whether any
    /// worker completed a cycle since the previous look.
    pub(crate) fn next(awake: usize, parked: usize, moved: bool) -> MonitorPace {
        if awake == 0 && !moved {
            MonitorPace::UntilWoken
        } else if parked > 0 {
            MonitorPace::After(WATCH_INTERVAL)
        } else {
            MonitorPace::After(BUSY_INTERVAL)
        }
    }
}

/// The monitor's half of `Shared`.
#[derive(Debug, Default)]
pub(crate) struct MonitorState {
    /// True while the monitor sleeps without a timeout (every worker was parked).
    idle: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
}

impl MonitorState {
    /// A worker left its park: make sure the monitor watches again.
    #[inline]
    pub(crate) fn worker_awake(&self) {
        if self.idle.load(Ordering::SeqCst) {
            let _guard = self.lock.lock();
            self.idle.store(false, Ordering::SeqCst);
            self.cv.notify_one();
        }
    }

    /// Wakes the monitor for shutdown.
    pub(crate) fn shutdown(&self) {
        let _guard = self.lock.lock();
        self.idle.store(false, Ordering::SeqCst);
        self.cv.notify_one();
    }
}

/// The monitor thread's loop; returns when the runtime closes.
pub(crate) fn run(shared: &Shared) {
    let state = &shared.monitor;
    let mut last_cycles: Vec<u64> = vec![0; shared.workers.len()];
    // Whether any worker completed a cycle during the last interval. The monitor sleeps
    // without a timeout only after a whole quiet interval: a server that parks between
    // requests would otherwise put it to sleep at every look, and every request would pay a
    // futex wake-up for it (`worker_awake`) on its way in.
    let mut pace = MonitorPace::After(WATCH_INTERVAL);
    while !shared.is_closed() {
        {
            let mut guard = state.lock.lock();
            match pace {
                MonitorPace::UntilWoken => {
                    state.idle.store(true, Ordering::SeqCst);
                    // Re-check after publishing `idle`: a worker that woke in between either
                    // saw the flag (and will signal) or is visible as awake here.
                    if shared.idle.all_parked() && !shared.is_closed() {
                        state.cv.wait(&mut guard);
                    }
                    state.idle.store(false, Ordering::SeqCst);
                }
                MonitorPace::After(interval) => {
                    state.cv.wait_for(&mut guard, interval);
                }
            }
        }
        let mut moved = false;
        let (mut awake, mut parked) = (0, 0);
        for (i, w) in shared.workers.iter().enumerate() {
            if w.dead.load(Ordering::Relaxed) && !needs_adopting(w) {
                // Gone, and what it left is served where it was adopted.
                continue;
            }
            let cycles = w.cycles();
            moved |= cycles != last_cycles[i];
            let is_parked = w.is_parked();
            if is_parked {
                parked += 1;
            } else {
                awake += 1;
            }
            let stuck = !is_parked && cycles == last_cycles[i];
            last_cycles[i] = cycles;
            if stuck && w.has_pending_work() {
                if let Some(sibling) = shared
                    .workers
                    .iter()
                    .enumerate()
                    .find(|(j, s)| *j != i && s.is_parked())
                {
                    sibling.1.notify();
                }
            }
        }
        pace = MonitorPace::next(awake, parked, moved);
    }
}

/// Whether a dead worker still has something no sibling serves yet: queued jobs, or a
/// timer heap and sockets that no sibling has adopted (nested its epoll) yet.
fn needs_adopting(w: &crate::shared::WorkerSlot) -> bool {
    !w.stealer.is_empty()
        || !w.handed.is_empty()
        || w.io_host.load(Ordering::SeqCst) == crate::worker::handoff::NO_HOST
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runtime_with_nothing_to_do_is_not_watched() {
        assert_eq!(MonitorPace::next(0, 2, false), MonitorPace::UntilWoken);
    }

    #[test]
    fn one_more_look_after_the_last_worker_parked() {
        // It ran a cycle since the previous look: it may park and wake again at once.
        assert_eq!(
            MonitorPace::next(0, 2, true),
            MonitorPace::After(WATCH_INTERVAL)
        );
    }

    #[test]
    fn awake_workers_beside_parked_ones_are_watched_closely() {
        assert_eq!(
            MonitorPace::next(1, 1, true),
            MonitorPace::After(WATCH_INTERVAL)
        );
        assert_eq!(
            MonitorPace::next(1, 1, false),
            MonitorPace::After(WATCH_INTERVAL),
            "a worker stuck in one job moves nothing"
        );
    }

    #[test]
    fn with_every_worker_awake_there_is_nobody_to_send() {
        assert_eq!(
            MonitorPace::next(2, 0, true),
            MonitorPace::After(BUSY_INTERVAL)
        );
    }
}
