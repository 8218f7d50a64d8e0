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
        if self
            .waker
            .lock()
            .as_ref()
            .is_some_and(|w| w.will_wake(waker))
        {
            return;
        }
        // Cloning the new waker and dropping the old one run user code: outside the lock,
        // as a waker's destructor may poll (and so lock) this very sleep.
        let new = waker.clone();
        let old = self.waker.lock().replace(new);
        drop(old);
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

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::task::Wake;
    use std::time::Duration;

    use super::*;

    /// A waker that, when its last copy is dropped, sets a new waker on `cell` (as a
    /// destructor that polls the sleep would).
    struct SetsWakerOnDrop {
        cell: Mutex<Option<Arc<SleepCell>>>,
    }

    impl Wake for SetsWakerOnDrop {
        fn wake(self: Arc<Self>) {}
    }

    /// A waker whose `wake` sets a new waker on `cell` (as a waker that polls the sleep
    /// inline would).
    struct SetsWakerOnWake {
        cell: Mutex<Option<Arc<SleepCell>>>,
    }

    impl Wake for SetsWakerOnWake {
        fn wake(self: Arc<Self>) {
            if let Some(cell) = self.cell.lock().take() {
                cell.set_waker(Waker::noop());
            }
        }
    }

    /// Runs `f` on a thread of its own and fails unless it returns: a deadlock fails the
    /// test instead of hanging the suite.
    fn returns(what: &str, f: impl FnOnce() + Send + 'static) {
        let (done_tx, done_rx) = mpsc::channel();
        std::thread::spawn(move || {
            f();
            done_tx.send(()).unwrap();
        });
        assert!(
            done_rx.recv_timeout(Duration::from_secs(60)).is_ok(),
            "{what} deadlocked"
        );
    }

    /// `fire` wakes outside the cell's lock: the waker may set a waker inline.
    #[test]
    fn a_waker_may_set_the_waker_again_while_it_is_woken() {
        let waker = Arc::new(SetsWakerOnWake {
            cell: Mutex::new(None),
        });
        let cell = SleepCell::new(Waker::from(waker.clone()));
        *waker.cell.lock() = Some(cell.clone());
        returns("firing the timer", move || cell.fire());
    }

    impl Drop for SetsWakerOnDrop {
        fn drop(&mut self) {
            if let Some(cell) = self.cell.lock().take() {
                cell.set_waker(Waker::noop());
            }
        }
    }

    /// The old waker is dropped outside the cell's lock: its destructor may lock it again.
    #[test]
    fn a_replaced_wakers_destructor_may_set_the_waker_again() {
        let first = Arc::new(SetsWakerOnDrop {
            cell: Mutex::new(None),
        });
        let cell = SleepCell::new(Waker::from(first.clone()));
        *first.cell.lock() = Some(cell.clone());
        drop(first);
        returns("replacing the waker", move || {
            let second = Arc::new(SetsWakerOnDrop {
                cell: Mutex::new(None),
            });
            cell.set_waker(&Waker::from(second));
        });
    }
}
