//! [`Job`]: one unit of work on a ready queue (a task to poll once, or a callback to run),
//! packed into one word.
//!
//! # Why one word
//!
//! Every poll moves a job through the ready queue twice: the wake pushes it into the
//! `crossbeam_deque::Worker`, phase 4 pops it. A two-word job (an enum of a tag and a
//! pointer, or a fat `Arc<dyn ..>`) is built on the stack with two 8-byte stores and then
//! copied with one 16-byte load, which the CPU cannot forward from the two stores, so each
//! move would stall until the stores retire. One word is stored and loaded whole
//! (docs/benchmark-log.md, "Why eddy misses"; docs/decisions.md, "A ready-queue job is one
//! word").
//!
//! # Encoding
//!
//! Task headers and callback headers are both aligned to at least 2 bytes (asserted at compile
//! time in `task::raw` and `callback`; 8 on 64-bit targets), so bit 0 of their address is
//! free: clear for a task, set for a callback ([`CALLBACK_TAG`]). The pointer carries the
//! reference of the [`Runnable`] or [`Callback`] it was made from; [`Job::unpack`] gives it
//! back, and dropping a `Job` drops it (so a dropped job cancels its task, as a dropped
//! `Runnable` does).
//!
//! Who may call: anyone who holds a job; this module is one of the few with `unsafe`, and the
//! only one that knows the encoding.

use std::fmt;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;

use crate::callback::Callback;
use crate::task::raw::Runnable;

/// Bit 0 of a job's address: set for a callback.
const CALLBACK_TAG: usize = 1;

/// One unit of work on a ready queue: a [`Runnable`] or a [`Callback`], in one word.
pub(crate) struct Job(NonNull<()>);

/// What a [`Job`] holds, unpacked.
pub(crate) enum UnpackedJob {
    /// Poll a task once.
    Task(Runnable),
    /// Run a callback (a cancelled one is skipped).
    Callback(Callback),
}

// SAFETY: a job owns one `Runnable` or one `Callback`, and both are `Send`.
unsafe impl Send for Job {}

impl Job {
    /// Unpacks the job, handing its reference to the result.
    #[inline]
    pub(crate) fn unpack(self) -> UnpackedJob {
        let ptr = ManuallyDrop::new(self).0;
        if ptr.addr().get() & CALLBACK_TAG == 0 {
            // SAFETY: an untagged job was made from `Runnable::into_raw` (`From<Runnable>`),
            // and the `ManuallyDrop` above makes this the only use of its reference.
            UnpackedJob::Task(unsafe { Runnable::from_raw(ptr) })
        } else {
            // SAFETY: a tagged job is the start of a callback cell plus `CALLBACK_TAG`
            // (`From<Callback>`), so stepping back stays inside that allocation and gives the
            // pointer `Callback::into_raw` returned, with its provenance.
            let untagged = unsafe { ptr.byte_sub(CALLBACK_TAG) };
            // SAFETY: that pointer came from `Callback::into_raw`, and this is the only use of
            // its reference.
            UnpackedJob::Callback(unsafe { Callback::from_raw(untagged) })
        }
    }

    /// The job's word, handing its reference to the caller: for a slot that holds a job in
    /// an atomic pointer (`worker::next_slot`). [`Job::from_ptr`] gives the job back.
    #[inline]
    pub(crate) fn into_ptr(self) -> NonNull<()> {
        ManuallyDrop::new(self).0
    }

    /// The job whose word [`Job::into_ptr`] gave.
    ///
    /// # Safety
    ///
    /// `ptr` came from `Job::into_ptr`, and this is the only call made with that word: it
    /// holds one reference, which the job returned takes.
    #[inline]
    pub(crate) unsafe fn from_ptr(ptr: NonNull<()>) -> Job {
        Job(ptr)
    }

    /// Which job this is, without taking it: the address of its task or callback (tagged).
    #[inline]
    pub(crate) fn addr(&self) -> usize {
        self.0.addr().get()
    }

    /// Disposes of a job that will never run because the runtime closed: a task is run once
    /// so that its cell sees the closed runtime and drops the future; a callback is cancelled,
    /// which drops its closure.
    pub(crate) fn discard(self) {
        match self.unpack() {
            UnpackedJob::Task(r) => r.run(),
            UnpackedJob::Callback(c) => {
                c.cancel();
            }
        }
    }
}

impl From<Runnable> for Job {
    #[inline]
    fn from(runnable: Runnable) -> Job {
        let ptr = runnable.into_raw();
        debug_assert_eq!(ptr.addr().get() & CALLBACK_TAG, 0, "task header misaligned");
        Job(ptr)
    }
}

impl From<Callback> for Job {
    #[inline]
    fn from(callback: Callback) -> Job {
        let ptr = callback.into_raw();
        debug_assert_eq!(ptr.addr().get() & CALLBACK_TAG, 0, "callback misaligned");
        Job(ptr.map_addr(|a| a | CALLBACK_TAG))
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        drop(Job(self.0).unpack());
    }
}

impl fmt::Debug for Job {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Borrow the contents without giving up the reference.
        let work = ManuallyDrop::new(Job(self.0).unpack());
        match &*work {
            UnpackedJob::Task(r) => write!(f, "Task({})", r.meta().id),
            UnpackedJob::Callback(c) => write!(f, "Callback({})", c.location()),
        }
    }
}

#[cfg(test)]
mod tests {
    //! Driven by hand, without workers, so that Miri can run them
    //! (`cargo +nightly miri test -p eddy --lib job::`).

    use std::future::Future;
    use std::panic::Location;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::task::{Context, Poll, Waker};

    use super::{Job, UnpackedJob};
    use crate::callback::Callback;
    use crate::task::cell::spawn_on;
    use crate::task::cell::Queue;
    use crate::task::cell::Woken;
    use crate::task::error::TaskError;
    use crate::task::raw::Runnable;
    use crate::worker::shared::Shared;

    static SPAWNED: Mutex<Vec<Runnable>> = Mutex::new(Vec::new());

    struct Keep;

    impl Queue for Keep {
        type Host = Arc<Shared>;

        fn schedule(task: Woken<Self>) {
            SPAWNED.lock().unwrap().push(task.into_runnable());
        }
    }

    /// A callback that counts its runs, and the count.
    fn counting_callback() -> (Callback, Arc<AtomicUsize>) {
        let ran = Arc::new(AtomicUsize::new(0));
        let counter = ran.clone();
        let callback = Callback::new(
            move || {
                counter.fetch_add(1, Ordering::SeqCst);
            },
            Location::caller(),
        );
        (callback, ran)
    }

    #[test]
    fn a_job_is_one_word() {
        assert_eq!(std::mem::size_of::<Job>(), std::mem::size_of::<usize>());
        assert_eq!(
            std::mem::size_of::<Option<Job>>(),
            std::mem::size_of::<usize>()
        );
    }

    #[test]
    fn a_callback_comes_back_out_and_runs_once() {
        let (callback, ran) = counting_callback();
        let handle = callback.clone();
        let job = Job::from(callback);
        assert!(format!("{job:?}").starts_with("Callback("));
        match job.unpack() {
            UnpackedJob::Callback(c) => c.run(),
            UnpackedJob::Task(_) => panic!("a callback job unpacked as a task"),
        }
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        assert!(!handle.cancel(), "it ran");
    }

    #[test]
    fn a_job_through_its_word_keeps_its_reference_and_runs_once() {
        let (callback, ran) = counting_callback();
        let handle = callback.clone();
        let job = Job::from(callback);
        let addr = job.addr();
        let word = job.into_ptr();
        assert_eq!(word.addr().get(), addr);
        assert!(!handle.cancelled());
        // SAFETY: the word came from `into_ptr` just above, and is used once.
        let job = unsafe { Job::from_ptr(word) };
        match job.unpack() {
            UnpackedJob::Callback(c) => c.run(),
            UnpackedJob::Task(_) => panic!("a callback job unpacked as a task"),
        }
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn dropping_a_callback_job_keeps_the_handle_valid_and_never_runs_it() {
        let (callback, ran) = counting_callback();
        let handle = callback.clone();
        drop(Job::from(callback));
        assert!(handle.cancel(), "still pending after the job was dropped");
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        assert_eq!(Arc::strong_count(&ran), 1, "cancel dropped the closure");
    }

    #[test]
    fn dropping_a_callback_job_with_the_last_reference_drops_the_closure_once() {
        struct DropCount(Arc<AtomicUsize>);
        impl Drop for DropCount {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let drops = Arc::new(AtomicUsize::new(0));
        let guard = DropCount(drops.clone());
        let callback = Callback::new(move || drop(guard), Location::caller());
        let other = callback.clone();
        drop(Job::from(callback));
        assert_eq!(
            drops.load(Ordering::SeqCst),
            0,
            "a clone still holds the cell"
        );
        drop(Job::from(other));
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_task_comes_back_out_and_polls_and_a_dropped_one_is_cancelled() {
        let shared = Shared::for_tests();
        let mut done = spawn_on::<_, Keep>(&shared, async { 7 }, Location::caller(), None);
        let mut dropped = spawn_on::<_, Keep>(&shared, async { 8 }, Location::caller(), None);
        let (first, second) = {
            let mut spawned = SPAWNED.lock().unwrap();
            assert_eq!(spawned.len(), 2);
            let second = spawned.pop().unwrap();
            (spawned.pop().unwrap(), second)
        };
        let job = Job::from(first);
        assert!(format!("{job:?}").starts_with("Task("));
        match job.unpack() {
            UnpackedJob::Task(r) => r.run(),
            UnpackedJob::Callback(_) => panic!("a task job unpacked as a callback"),
        }
        drop(Job::from(second));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(matches!(
            Pin::new(&mut done).poll(&mut cx),
            Poll::Ready(Ok(7))
        ));
        assert!(matches!(
            Pin::new(&mut dropped).poll(&mut cx),
            Poll::Ready(Err(TaskError::Cancelled))
        ));
    }
}
