//! Callback cells and the public [`Handle`] / [`TimerHandle`] that cancel them.
//!
//! A callback scheduled with `call_soon`, `call_later`, `call_at` or `call_soon_threadsafe` lives
//! in one heap allocation, a [`CallbackCell`], shared by the ready queue (or timer heap) and the
//! user's handle. The cell is a tiny state machine:
//!
//! ```text
//!            run() wins the CAS            the closure has returned (or panicked)
//!   PENDING ────────────────────► RUNNING ─────────────────────────────► DONE
//!      │
//!      │ cancel() wins the CAS: the closure is dropped at once
//!      ▼
//!   CANCELLED
//! ```
//!
//! Invariant: only the thread that moves the state out of `PENDING` ever touches the closure
//! slot. That is what makes the `UnsafeCell` sound, and what gives "runs at most once" and
//! "cancelled callbacks never run, their closures are dropped promptly" for free, whichever
//! threads race. This module is one of the two that contain `unsafe` (the other is
//! `task::spawn`).

use std::cell::UnsafeCell;
use std::fmt;
use std::panic::Location;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::contextvar::{self, Context};
use crate::timer::TimerQueue;

const PENDING: u8 = 0;
const RUNNING: u8 = 1;
const DONE: u8 = 2;
const CANCELLED: u8 = 3;

/// The type-erased face of a callback cell, as the queues see it.
pub(crate) trait Callback: Send + Sync + 'static {
    /// Runs the closure if nobody ran or cancelled it before. A panic propagates to the
    /// caller (the worker catches it); the cell still ends in `DONE`.
    fn run(&self);
    /// Cancels the callback if it is still pending; true if this call cancelled it.
    fn cancel(&self) -> bool;
    /// True when the callback was cancelled before it ran.
    fn cancelled(&self) -> bool;
    /// Where the callback was scheduled.
    fn location(&self) -> &'static Location<'static>;
}

/// One scheduled callback: state, closure slot and the place it was scheduled from.
pub(crate) struct CallbackCell<F> {
    state: AtomicU8,
    location: &'static Location<'static>,
    /// The context variables captured when the callback was scheduled.
    context: Context,
    slot: UnsafeCell<Option<F>>,
}

// SAFETY: the closure slot is only accessed by the single thread that won the CAS out of
// PENDING (see the module docs), so sharing the cell between threads never gives two threads
// access to `F` at once; `F: Send` lets that one thread be any thread.
unsafe impl<F: Send> Sync for CallbackCell<F> {}

impl<F: FnOnce() + Send + 'static> CallbackCell<F> {
    pub(crate) fn new(f: F, location: &'static Location<'static>) -> Arc<Self> {
        Arc::new(CallbackCell {
            state: AtomicU8::new(PENDING),
            location,
            context: contextvar::capture(),
            slot: UnsafeCell::new(Some(f)),
        })
    }

    fn claim(&self, to: u8) -> bool {
        self.state
            .compare_exchange(PENDING, to, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

impl<F: FnOnce() + Send + 'static> Callback for CallbackCell<F> {
    fn run(&self) {
        if !self.claim(RUNNING) {
            return;
        }
        /// Marks the cell done even when the closure panics.
        struct Done<'a>(&'a AtomicU8);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.store(DONE, Ordering::Release);
            }
        }
        let _done = Done(&self.state);
        // This thread just moved the state from PENDING to RUNNING, and no other thread
        // touches the slot after the state has left PENDING.
        // SAFETY: so this access to the slot is exclusive.
        let f = unsafe { (*self.slot.get()).take() };
        if let Some(f) = f {
            contextvar::run_in(&self.context, f);
        }
    }

    fn cancel(&self) -> bool {
        if !self.claim(CANCELLED) {
            return false;
        }
        // This thread just moved the state from PENDING to CANCELLED.
        // SAFETY: the slot is exclusively ours (module invariant).
        let f = unsafe { (*self.slot.get()).take() };
        drop(f);
        true
    }

    fn cancelled(&self) -> bool {
        self.state.load(Ordering::Acquire) == CANCELLED
    }

    fn location(&self) -> &'static Location<'static> {
        self.location
    }
}

/// A callback scheduled with [`call_soon`](crate::call_soon) or
/// [`RuntimeHandle::call_soon_threadsafe`](crate::RuntimeHandle::call_soon_threadsafe).
///
/// Dropping the handle does not cancel the callback; [`cancel`](Handle::cancel) does, from any
/// thread. A cancelled callback never runs and its closure is dropped inside `cancel`.
/// Cancelling after the callback ran (or while it is running) does nothing.
///
/// # Examples
///
/// ```
/// use std::sync::mpsc;
///
/// let rt = eddy::Builder::new().workers(1).build()?;
/// // Keep the only worker busy so the callback below cannot start before `cancel`.
/// let (release, wait) = mpsc::channel::<()>();
/// rt.handle().call_soon_threadsafe(move || wait.recv().unwrap())?;
/// let handle = rt.handle().call_soon_threadsafe(|| unreachable!())?;
/// handle.cancel();
/// assert!(handle.cancelled());
/// release.send(())?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Handle {
    pub(crate) cell: Arc<dyn Callback>,
}

impl Handle {
    /// Cancels the callback if it has not started yet; its closure is dropped at once.
    pub fn cancel(&self) {
        self.cell.cancel();
    }

    /// True when the callback was cancelled before it ran.
    pub fn cancelled(&self) -> bool {
        self.cell.cancelled()
    }

    /// Where the callback was scheduled.
    pub fn location(&self) -> &'static Location<'static> {
        self.cell.location()
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("location", &self.cell.location())
            .field("cancelled", &self.cancelled())
            .finish()
    }
}

/// A callback scheduled for a point in time with [`call_later`](crate::call_later) or
/// [`call_at`](crate::call_at).
///
/// Like [`Handle`], plus the deadline. Cancelling also tells the timer heap that holds the
/// entry, which counts cancelled entries to decide when to rebuild itself (asyncio's rule:
/// more than 100 entries, more than half of them cancelled).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let rt = eddy::Runtime::new()?;
/// let timer = rt.handle().call_later(Duration::from_secs(3600), || unreachable!())?;
/// assert!(timer.when() > std::time::Instant::now());
/// timer.cancel();
/// assert!(timer.cancelled());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct TimerHandle {
    pub(crate) cell: Arc<dyn Callback>,
    pub(crate) when: Instant,
    pub(crate) queue: Arc<TimerQueue>,
}

impl TimerHandle {
    /// Cancels the callback if it has not started yet; its closure is dropped at once.
    pub fn cancel(&self) {
        if self.cell.cancel() {
            self.queue.note_cancelled();
        }
    }

    /// True when the callback was cancelled before it ran.
    pub fn cancelled(&self) -> bool {
        self.cell.cancelled()
    }

    /// The deadline the callback is scheduled for.
    pub fn when(&self) -> Instant {
        self.when
    }

    /// Where the callback was scheduled.
    pub fn location(&self) -> &'static Location<'static> {
        self.cell.location()
    }
}

impl fmt::Debug for TimerHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerHandle")
            .field("when", &self.when)
            .field("location", &self.cell.location())
            .field("cancelled", &self.cancelled())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    struct DropCount(Arc<AtomicUsize>);
    impl Drop for DropCount {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn runs_once() {
        let n = Arc::new(AtomicUsize::new(0));
        let m = n.clone();
        let cell = CallbackCell::new(
            move || {
                m.fetch_add(1, Ordering::SeqCst);
            },
            Location::caller(),
        );
        cell.run();
        cell.run();
        assert_eq!(n.load(Ordering::SeqCst), 1);
        assert!(!cell.cancel(), "cancel after run is a no-op");
        assert!(!cell.cancelled());
    }

    #[test]
    fn cancel_drops_closure_at_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let guard = DropCount(drops.clone());
        let cell = CallbackCell::new(move || drop(guard), Location::caller());
        assert!(cell.cancel());
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert!(!cell.cancel(), "second cancel is a no-op");
        cell.run();
        assert!(cell.cancelled());
    }

    #[test]
    fn panicking_closure_still_ends_done() {
        let cell = CallbackCell::new(|| panic!("x"), Location::caller());
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cell.run()));
        assert!(r.is_err());
        assert_eq!(cell.state.load(Ordering::SeqCst), DONE);
        assert!(!cell.cancel());
    }

    #[test]
    fn race_run_and_cancel() {
        for _ in 0..2_000 {
            let n = Arc::new(AtomicUsize::new(0));
            let m = n.clone();
            let cell = CallbackCell::new(
                move || {
                    m.fetch_add(1, Ordering::SeqCst);
                },
                Location::caller(),
            );
            let c2 = cell.clone();
            let t = std::thread::spawn(move || c2.cancel());
            cell.run();
            let cancelled = t.join().unwrap();
            let ran = n.load(Ordering::SeqCst);
            assert_eq!(ran + cancelled as usize, 1);
            assert_eq!(cell.cancelled(), cancelled);
        }
    }
}
