//! Heap entries and what they do when their deadline passes.

use std::cmp::Ordering as CmpOrdering;
use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::task::Waker;
use std::time::Instant;

use parking_lot::Mutex;

use crate::callback::Callback;

/// What a timer does when it is due.
pub(crate) enum TimerAction {
    /// A `call_later`/`call_at` callback: becomes a job on the ready queue.
    Callback(Callback),
    /// A `sleep`: wakes the task that awaits it.
    Wake(Arc<SleepCell>),
}

impl TimerAction {
    pub(crate) fn is_cancelled(&self) -> bool {
        match self {
            TimerAction::Callback(c) => c.cancelled(),
            TimerAction::Wake(s) => s.is_cancelled(),
        }
    }
}

impl fmt::Debug for TimerAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimerAction::Callback(c) => write!(f, "Callback({})", c.location()),
            TimerAction::Wake(_) => f.write_str("Wake"),
        }
    }
}

/// One heap entry. Ordered so that `BinaryHeap` (a max-heap) pops the earliest deadline
/// first, and among equal deadlines the one scheduled first.
#[derive(Debug)]
pub(crate) struct TimerEntry {
    pub(crate) when: Instant,
    pub(crate) seq: u64,
    pub(crate) action: TimerAction,
}

impl PartialEq for TimerEntry {
    fn eq(&self, other: &Self) -> bool {
        self.when == other.when && self.seq == other.seq
    }
}
impl Eq for TimerEntry {}
impl PartialOrd for TimerEntry {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl Ord for TimerEntry {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (other.when, other.seq).cmp(&(self.when, self.seq))
    }
}

const SLEEPING: u8 = 0;
const FIRED: u8 = 1;
const CANCELLED: u8 = 2;

/// The shared half of a `Sleep`: whether the deadline passed, and whom to wake.
#[derive(Debug)]
pub(crate) struct SleepCell {
    state: AtomicU8,
    waker: Mutex<Option<Waker>>,
}

impl SleepCell {
    pub(crate) fn new(waker: Waker) -> Arc<Self> {
        Arc::new(SleepCell {
            state: AtomicU8::new(SLEEPING),
            waker: Mutex::new(Some(waker)),
        })
    }

    /// The deadline passed: mark it and wake the sleeper.
    pub(crate) fn fire(&self) {
        if self
            .state
            .compare_exchange(SLEEPING, FIRED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            // Out of the lock first: a waker may poll (and so `set_waker`) inline.
            let waker = self.waker.lock().take();
            if let Some(w) = waker {
                w.wake();
            }
        }
    }

    pub(crate) fn has_fired(&self) -> bool {
        self.state.load(Ordering::Acquire) == FIRED
    }

    /// Replaces the waker to call when the deadline passes.
    pub(crate) fn set_waker(&self, waker: &Waker) {
        let mut slot = self.waker.lock();
        match &*slot {
            Some(w) if w.will_wake(waker) => {}
            _ => *slot = Some(waker.clone()),
        }
    }

    /// The sleeper went away before the deadline; true if this call cancelled it.
    pub(crate) fn cancel(&self) -> bool {
        let won = self
            .state
            .compare_exchange(SLEEPING, CANCELLED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if won {
            // Out of the lock: a waker's destructor is user code.
            let waker = self.waker.lock().take();
            drop(waker);
        }
        won
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.state.load(Ordering::Acquire) == CANCELLED
    }
}
