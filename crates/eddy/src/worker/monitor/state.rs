//! The monitor's half of `Shared`: what a waking worker touches to make the monitor watch
//! again, and what the monitor sleeps on. Plain state below `shared`; the monitor's loop
//! (`monitor`) is above it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::alarm::Alarm;

/// How long after a worker wakes a sleeping monitor its first look comes: long enough that
/// the look does not compete with the worker's first jobs, as short as the IO grace, so that
/// a long job among them is seen as soon as one look later could see it.
const FIRST_LOOK_AFTER_WAKE: Duration = crate::reactor::STUCK_IO_GRACE;

/// The monitor's half of `Shared`.
#[derive(Debug, Default)]
pub(crate) struct MonitorState {
    /// True while the monitor sleeps without a look set (every worker was parked).
    pub(super) idle: AtomicBool,
    /// What the monitor sleeps on while `idle` (`alarm`); none where there is no monitor
    /// (one worker, unit tests of a runtime without threads).
    pub(super) alarm: Option<Alarm>,
    /// What it waits on between looks: one futex wait with a timeout, a system call fewer
    /// per look than setting the alarm and reading it. Signalled only at shutdown.
    pub(super) lock: Mutex<()>,
    pub(super) cv: Condvar,
    /// Tests only: how many looks it made.
    #[cfg(test)]
    pub(super) looks: std::sync::atomic::AtomicU64,
    /// Tests only: how many times a look found a worker blocked in a job (`thread_state`).
    #[cfg(test)]
    pub(super) blocked_seen: std::sync::atomic::AtomicU64,
}

impl MonitorState {
    /// The state of a runtime whose monitor sleeps on `alarm`.
    pub(crate) fn with_alarm(alarm: Alarm) -> MonitorState {
        MonitorState {
            alarm: Some(alarm),
            ..MonitorState::default()
        }
    }

    /// A worker left its park, or a thread outside the runtime just woke one: make sure the
    /// monitor looks again. If it sleeps, its alarm is set for [`FIRST_LOOK_AFTER_WAKE`]
    /// from now: no thread is woken on the worker's way to the job it woke up for (`alarm`).
    #[inline]
    pub(crate) fn worker_awake(&self) {
        if self.idle.load(Ordering::SeqCst) && self.idle.swap(false, Ordering::SeqCst) {
            if let Some(alarm) = &self.alarm {
                alarm.set(FIRST_LOOK_AFTER_WAKE);
            }
        }
    }

    /// Looks the monitor has made so far.
    #[cfg(test)]
    pub(crate) fn looks(&self) -> u64 {
        self.looks.load(Ordering::SeqCst)
    }

    /// Times a look found a worker blocked in a job.
    #[cfg(test)]
    pub(crate) fn blocked_seen(&self) -> u64 {
        self.blocked_seen.load(Ordering::SeqCst)
    }

    /// Whether the monitor sleeps until a worker wakes.
    #[cfg(test)]
    pub(crate) fn is_asleep(&self) -> bool {
        self.idle.load(Ordering::SeqCst)
    }

    /// Wakes the monitor for shutdown (the caller marked the runtime closed first), from
    /// either of its sleeps.
    pub(crate) fn shutdown(&self) {
        {
            let _guard = self.lock.lock();
            self.idle.store(false, Ordering::SeqCst);
            self.cv.notify_one();
        }
        if let Some(alarm) = &self.alarm {
            alarm.set(Duration::ZERO);
        }
    }
}
