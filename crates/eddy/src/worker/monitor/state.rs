//! The monitor's half of `Shared`: what a waking worker touches to make the monitor watch
//! again, and what the monitor sleeps on. Plain state below `shared`; the monitor's loop
//! (`monitor`) is above it.

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::{Condvar, Mutex};

/// The monitor's half of `Shared`.
#[derive(Debug, Default)]
pub(crate) struct MonitorState {
    /// True while the monitor sleeps without a timeout (every worker was parked).
    pub(super) idle: AtomicBool,
    /// Tests only: how many looks it made.
    #[cfg(test)]
    pub(super) looks: std::sync::atomic::AtomicU64,
    /// Tests only: how many times a look found a worker blocked in a job (`thread_state`).
    #[cfg(test)]
    pub(super) blocked_seen: std::sync::atomic::AtomicU64,
    pub(super) lock: Mutex<()>,
    pub(super) cv: Condvar,
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

    /// Wakes the monitor for shutdown.
    pub(crate) fn shutdown(&self) {
        let _guard = self.lock.lock();
        self.idle.store(false, Ordering::SeqCst);
        self.cv.notify_one();
    }
}
