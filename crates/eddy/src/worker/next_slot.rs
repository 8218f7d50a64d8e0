//! The task a job hands over to: a task woken by the job that is running on its own worker
//! runs next, out of a one-job slot instead of the ready queue.
//!
//! # Why
//!
//! A task that wakes another and then waits (a channel send and a receive, a request and its
//! reply) hands the worker over. Through the ready queue the hand-over costs two locked
//! instructions besides the task's own state changes: crossbeam's FIFO `pop` is a
//! `fetch_add` on the queue's front, and a push onto a queue that already holds work fences
//! before it reads the idle state (`Worker::push_local`, the park handshake). The slot costs
//! a plain store to fill and one compare-and-swap to empty, and the task runs while what the
//! waker touched is still in this CPU's cache. Tokio's LIFO slot does the same for the same
//! reason.
//!
//! # What is different from tokio's
//!
//! Tokio's slot is the owner's alone, so a task in it waits for the whole of a long job that
//! runs after the wake (tokio#4730's family). Ours is an atomic pointer that others may
//! empty: the monitor takes the job out of a worker it finds stuck (`monitor::run`), and a
//! busy sibling out of one that finished no job between two of its looks (`siblings`). A job
//! left in the slot thus waits for the same rescue as jobs in the stuck worker's queue.
//!
//! # Invariants
//!
//! * Only the owner stores a job into the slot, and only into an empty one
//!   ([`NextSlot::put`]). Nobody else ever makes an empty slot full, so the owner's load then
//!   store cannot lose a job to a race.
//! * Everyone, the owner included, empties it with a compare-and-swap from the job it saw
//!   ([`NextSlot::take`]): of two takers of one job, one wins. The job is its own pointer, so
//!   a swap that succeeds takes exactly the job then in the slot.
//! * A job in the slot is one of phase 4's ready jobs: it counts in `RunOrder`, it keeps its
//!   worker from parking (`Worker::has_ready`), and shutdown drains it.

use std::ptr::{self, NonNull};

use crate::job::Job;
use crate::sync::atomic::{AtomicPtr, Ordering};

/// How many jobs in a row may come out of the slot before the ready queue's oldest job
/// runs: two tasks that wake each other must not starve the jobs queued behind them.
pub(crate) const NEXT_RUNS_IN_A_ROW: u8 = 3;

/// A one-job slot, filled by its worker, emptied by whoever takes the job first.
#[derive(Debug)]
pub(crate) struct NextSlot {
    job: AtomicPtr<()>,
}

impl NextSlot {
    pub(crate) fn new() -> Self {
        NextSlot {
            job: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// The owner only: puts `job` in the slot if it is empty, else gives it back.
    #[inline]
    pub(crate) fn put(&self, job: Job) -> Result<(), Job> {
        if !self.is_empty() {
            return Err(job);
        }
        self.put_ptr(job.into_ptr());
        Ok(())
    }

    /// Takes the job out of the slot, if there is one and nobody takes it first.
    #[inline]
    pub(crate) fn take(&self) -> Option<Job> {
        // SAFETY: the word came from `Job::into_ptr` in `put`, and the compare-and-swap in
        // `take_ptr` hands it to one taker only.
        self.take_ptr().map(|p| unsafe { Job::from_ptr(p) })
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.job.load(Ordering::Relaxed).is_null()
    }

    /// `put`'s store: the slot must be empty and the caller its owner. `Release`: a taker on
    /// another thread sees the job's contents.
    fn put_ptr(&self, job: NonNull<()>) {
        debug_assert!(self.is_empty(), "the owner filled a full slot");
        self.job.store(job.as_ptr(), Ordering::Release);
    }

    fn take_ptr(&self) -> Option<NonNull<()>> {
        let seen = NonNull::new(self.job.load(Ordering::Acquire))?;
        self.job
            .compare_exchange(
                seen.as_ptr(),
                ptr::null_mut(),
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .ok()
            .and(Some(seen))
    }
}

/// Where phase 4's next stealable job comes from: the slot, until it has had
/// [`NEXT_RUNS_IN_A_ROW`] turns in a row, then the ready queue once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct NextRuns {
    in_a_row: u8,
}

impl NextRuns {
    /// Whether the slot may give the next job.
    pub(crate) fn slot_may_run(&self) -> bool {
        self.in_a_row < NEXT_RUNS_IN_A_ROW
    }

    /// A job came out of the slot.
    pub(crate) fn ran_from_slot(&mut self) {
        self.in_a_row += 1;
    }

    /// A job came out of the ready queue: the slot may have its turns again.
    pub(crate) fn ran_from_queue(&mut self) {
        self.in_a_row = 0;
    }
}

#[cfg(all(test, not(eddy_loom)))]
mod tests {
    use super::*;

    fn word(n: usize) -> NonNull<()> {
        NonNull::new(ptr::without_provenance_mut(n * 8)).unwrap()
    }

    #[test]
    fn a_full_slot_refuses_another_job_and_gives_its_job_once() {
        let slot = NextSlot::new();
        assert!(slot.take_ptr().is_none(), "empty");
        slot.put_ptr(word(1));
        assert!(!slot.is_empty());
        assert_eq!(slot.take_ptr(), Some(word(1)));
        assert!(slot.take_ptr().is_none(), "taken once");
        assert!(slot.is_empty());
    }

    #[test]
    fn the_slot_runs_three_in_a_row_then_yields_to_the_queue() {
        let mut runs = NextRuns::default();
        for _ in 0..NEXT_RUNS_IN_A_ROW {
            assert!(runs.slot_may_run());
            runs.ran_from_slot();
        }
        assert!(!runs.slot_may_run(), "the queue's turn");
        runs.ran_from_queue();
        assert!(runs.slot_may_run());
    }
}

#[cfg(all(test, eddy_loom))]
mod loom_models {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// The owner fills the slot and takes from it while a sibling takes from it: the job is
    /// taken exactly once, and a job the owner puts after the sibling emptied it is not lost.
    #[test]
    fn a_job_in_the_slot_is_taken_once_by_the_owner_or_a_sibling() {
        crate::sync::model("next_slot_taken_once", || {
            let slot = Arc::new(NextSlot::new());
            slot.put_ptr(word(1));
            let thief = {
                let slot = slot.clone();
                thread::spawn(move || slot.take_ptr())
            };
            let mut taken = Vec::new();
            taken.extend(slot.take_ptr());
            // The owner puts again only into a slot it sees empty, as `put` does.
            let put_second = slot.is_empty();
            if put_second {
                slot.put_ptr(word(2));
            }
            taken.extend(slot.take_ptr());
            taken.extend(thief.join().unwrap());
            taken.extend(slot.take_ptr());
            let count = |n| taken.iter().filter(|&&w| w == word(n)).count();
            assert_eq!(count(1), 1, "the first job, taken exactly once: {taken:?}");
            assert_eq!(count(2), put_second as usize, "the second job: {taken:?}");
        });
    }

    fn word(n: usize) -> NonNull<()> {
        NonNull::new(ptr::without_provenance_mut(n * 8)).unwrap()
    }
}
