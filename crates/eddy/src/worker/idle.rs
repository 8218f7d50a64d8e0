//! Who is searching for work and who sleeps: the bookkeeping that keeps wake-ups cheap.
//!
//! Waking a parked worker costs an eventfd write on one side and an `epoll_wait` return plus
//! a context switch on the other (a cross-CPU round trip, far more than a short job), so eddy
//! wakes a worker only when it is likely to find something to do:
//!
//! * A worker is *searching* while it looks for work to steal. At most half of the workers
//!   search at once (tokio's rule), so that one new task does not send every idle thread
//!   through every sibling's queue.
//! * New work wakes a parked worker only when nobody is searching: a searcher will find it.
//! * A searcher that finds work stops searching; if it was the last one it wakes another
//!   parked worker, because where there was one job there may be more (the wake-up chain).
//! * The last searcher to give up re-checks every queue *after* saying so: that closes the
//!   window in which a submitter saw "somebody is searching" and did not wake anyone.
//!
//! The counters live in one atomic word (`searching` in the low 16 bits, `unparked` above),
//! the list of parked workers behind a mutex that is only taken on the park/unpark paths.

use crate::sync::atomic::{AtomicUsize, Ordering};
use crate::sync::Mutex;

const SEARCHING_MASK: usize = (1 << 16) - 1;
const UNPARKED_ONE: usize = 1 << 16;

#[derive(Debug)]
pub(crate) struct Idle {
    /// `searching | unparked << 16`.
    state: AtomicUsize,
    /// Indices of parked workers, most recently parked last.
    parked: Mutex<Vec<usize>>,
    num_workers: usize,
}

impl Idle {
    pub(crate) fn new(num_workers: usize) -> Self {
        Idle {
            state: AtomicUsize::new(num_workers * UNPARKED_ONE),
            parked: Mutex::new(Vec::with_capacity(num_workers)),
            num_workers,
        }
    }

    fn searching(state: usize) -> usize {
        state & SEARCHING_MASK
    }

    fn unparked(state: usize) -> usize {
        state >> 16
    }

    /// Should new work wake somebody? Only if nobody searches and somebody sleeps.
    #[inline]
    pub(crate) fn should_wake(&self) -> bool {
        let s = self.state.load(Ordering::SeqCst);
        Self::searching(s) == 0 && Self::unparked(s) < self.num_workers
    }

    /// Picks a parked worker to wake and counts it as awake and searching. The caller must
    /// notify it. `None` when nobody needs waking.
    pub(crate) fn worker_to_wake(&self) -> Option<usize> {
        if !self.should_wake() {
            return None;
        }
        let mut parked = self.parked.lock();
        if !self.should_wake() {
            return None;
        }
        let index = parked.pop()?;
        self.state.fetch_add(UNPARKED_ONE | 1, Ordering::SeqCst);
        Some(index)
    }

    /// True while some worker searches for work.
    pub(crate) fn anyone_searching(&self) -> bool {
        Self::searching(self.state.load(Ordering::SeqCst)) != 0
    }

    /// True when every worker is parked (the caller included, once it has called `park`).
    pub(crate) fn all_parked(&self) -> bool {
        Self::unparked(self.state.load(Ordering::SeqCst)) == 0
    }

    /// A worker wants to search. Refused when half of the workers already do.
    pub(crate) fn try_start_searching(&self) -> bool {
        let s = self.state.load(Ordering::SeqCst);
        if 2 * Self::searching(s) >= self.num_workers.max(2) {
            return false;
        }
        self.state.fetch_add(1, Ordering::SeqCst);
        true
    }

    /// A searcher stops searching (it found work). True if it was the last searcher.
    pub(crate) fn stop_searching(&self) -> bool {
        let prev = self.state.fetch_sub(1, Ordering::SeqCst);
        Self::searching(prev) == 1
    }

    /// Puts worker `index`, about to sleep, on the parked list (the sleep is the caller's).
    /// True if it was the last searcher, in which case the caller must re-check every queue
    /// before sleeping.
    pub(crate) fn list_parked(&self, index: usize, searching: bool) -> bool {
        let mut parked = self.parked.lock();
        let dec = UNPARKED_ONE + searching as usize;
        let prev = self.state.fetch_sub(dec, Ordering::SeqCst);
        parked.push(index);
        searching && Self::searching(prev) == 1
    }

    /// Whether worker `index` is still on the parked list: false once a waker has taken it
    /// off (and counted it as searching), which a worker about to sleep must see, since the
    /// waker's notification may not reach it (`must_stay_awake`).
    pub(crate) fn is_listed(&self, index: usize) -> bool {
        self.parked.lock().contains(&index)
    }

    /// Called by a worker after its wait returned. If it is still on the parked list (a
    /// timeout or a notification meant for something else), it takes itself off and counts
    /// itself awake but not searching: returns false. If someone else took it off the list,
    /// that waker already counted it as awake and searching: returns true.
    pub(crate) fn unpark_self(&self, index: usize) -> bool {
        let mut parked = self.parked.lock();
        if let Some(pos) = parked.iter().position(|&i| i == index) {
            parked.swap_remove(pos);
            self.state.fetch_add(UNPARKED_ONE, Ordering::SeqCst);
            false
        } else {
            true
        }
    }

    /// Worker `index` died (a bug of ours) with its `searching` flag as given: it is taken
    /// off the parked list, and from then on it counts as parked and never searching, so
    /// that nobody waits for it to search and "every worker is parked" can still come true.
    /// Nobody wakes it: it is not on the list.
    pub(crate) fn retire(&self, index: usize, searching: bool) {
        let mut parked = self.parked.lock();
        if let Some(pos) = parked.iter().position(|&i| i == index) {
            // Counted parked (and not searching) already.
            parked.swap_remove(pos);
            return;
        }
        self.state
            .fetch_sub(UNPARKED_ONE + searching as usize, Ordering::SeqCst);
    }

    #[cfg(test)]
    fn counts(&self) -> (usize, usize) {
        let s = self.state.load(Ordering::SeqCst);
        (Self::searching(s), Self::unparked(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nobody_is_woken_while_all_are_awake() {
        let idle = Idle::new(2);
        assert!(!idle.should_wake());
        assert_eq!(idle.worker_to_wake(), None);
    }

    #[test]
    fn park_then_wake_counts_the_woken_as_searching() {
        let idle = Idle::new(2);
        assert!(!idle.list_parked(1, false));
        assert_eq!(idle.counts(), (0, 1));
        assert_eq!(idle.worker_to_wake(), Some(1));
        assert_eq!(idle.counts(), (1, 2));
        assert!(idle.unpark_self(1), "someone else unparked it");
        assert!(idle.stop_searching());
    }

    #[test]
    fn a_searcher_suppresses_wakeups() {
        let idle = Idle::new(4);
        idle.list_parked(3, false);
        assert!(idle.try_start_searching());
        assert_eq!(idle.worker_to_wake(), None);
        assert!(idle.stop_searching());
        assert_eq!(idle.worker_to_wake(), Some(3));
    }

    #[test]
    fn at_most_half_search() {
        let idle = Idle::new(4);
        assert!(idle.try_start_searching());
        assert!(idle.try_start_searching());
        assert!(!idle.try_start_searching());
        let idle = Idle::new(1);
        assert!(
            idle.try_start_searching(),
            "a single worker may always search"
        );
    }

    #[test]
    fn last_searcher_to_park_is_told() {
        let idle = Idle::new(2);
        assert!(idle.try_start_searching());
        assert!(idle.list_parked(0, true));
        assert!(!idle.list_parked(1, false));
    }

    #[test]
    fn a_retired_worker_counts_as_parked_and_is_never_woken() {
        let idle = Idle::new(2);
        assert!(idle.try_start_searching());
        idle.retire(0, true);
        assert_eq!(
            idle.counts(),
            (0, 1),
            "no longer searching, no longer awake"
        );
        idle.list_parked(1, false);
        assert!(idle.all_parked());
        assert_eq!(idle.worker_to_wake(), Some(1), "only the live one is woken");
        assert_eq!(idle.worker_to_wake(), None);

        let idle = Idle::new(2);
        idle.list_parked(0, false);
        idle.retire(0, false);
        assert_eq!(idle.counts(), (0, 2 - 1));
        assert_eq!(
            idle.worker_to_wake(),
            None,
            "a dead worker is not on the list"
        );
    }

    #[test]
    fn timeout_wakeup_takes_itself_off_the_list() {
        let idle = Idle::new(2);
        idle.list_parked(0, false);
        assert!(!idle.unpark_self(0));
        assert_eq!(idle.counts(), (0, 2));
        assert_eq!(idle.worker_to_wake(), None);
    }
}
