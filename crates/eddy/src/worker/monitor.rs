//! The monitor: Go's `sysmon`, reduced to one job: notice a worker stuck in a long job and
//! wake a parked sibling to serve what the stuck worker cannot (its queued tasks, its due
//! timers, its IO).
//!
//! Why a thread and not timeouts on the parked workers: a parked worker that woke up every
//! few milliseconds to look at busy siblings, and busy workers that notified parked ones to
//! keep such a watch, cost a park/wake round trip (then seven system calls: `polling`'s five
//! per wait, the eventfd write, the timerfd; still two context switches now that a park is
//! one `epoll_wait`) several thousand times a second on a busy server, which doubled eddy's
//! server CPU per request. The monitor costs one sleeping thread:
//!
//! * once every worker is parked and none ran a cycle for a whole interval, it sleeps on a
//!   condition variable until one wakes up (a worker leaving its park checks one flag, and
//!   signals only if the monitor sleeps);
//! * otherwise it wakes every [`CHECK_INTERVAL`], and for each awake worker whose cycle
//!   counter has not moved since the last check (one job has run for a whole interval) and
//!   that has something waiting (queued jobs, timers, IO sources), it notifies one parked
//!   sibling. The sibling's loop does the rest (`Worker::rescue_stuck_siblings`, stealing).
//!
//! So a stuck worker's work is picked up within one to two intervals (5-10 ms).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::shared::Shared;

/// How often the monitor looks at awake workers.
pub(crate) const CHECK_INTERVAL: Duration = Duration::from_millis(5);

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
    let mut active = true;
    while !shared.is_closed() {
        {
            let mut guard = state.lock.lock();
            if !active && shared.idle.all_parked() {
                state.idle.store(true, Ordering::SeqCst);
                // Re-check after publishing `idle`: a worker that woke in between either saw
                // the flag (and will signal) or is visible as awake here.
                if shared.idle.all_parked() && !shared.is_closed() {
                    state.cv.wait(&mut guard);
                }
                state.idle.store(false, Ordering::SeqCst);
                active = true;
                continue;
            }
            state.cv.wait_for(&mut guard, CHECK_INTERVAL);
        }
        active = false;
        for (i, w) in shared.workers.iter().enumerate() {
            let cycles = w.cycles();
            active |= cycles != last_cycles[i];
            let stuck = !w.is_parked() && cycles == last_cycles[i];
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
    }
}
