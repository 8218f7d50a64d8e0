//! Callback cells and the public [`Handle`] / [`TimerHandle`] that cancel them.
//!
//! A callback scheduled with `call_soon`, `call_later`, `call_at` or `call_soon_threadsafe` lives
//! in one heap allocation, a cell, shared by the ready queue (or timer heap) and the user's
//! handle through counted [`Callback`] pointers. The cell is a tiny state machine:
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
//! slot (or, for a callback that never left `PENDING`, the thread that drops the last
//! reference, which is alone with the cell by then). That is what makes the `UnsafeCell`
//! sound, and what gives "runs at most once" and "cancelled callbacks never run, their
//! closures are dropped promptly" for free, whichever threads race.
//!
//! # Why a thin pointer of our own
//!
//! A [`Callback`] is one word: the cell starts with an untyped header (reference count, state,
//! a vtable of the two typed operations, the location and context), so nothing needs the fat
//! pointer of an `Arc<dyn Trait>`. That keeps a [`Job`](crate::job::Job) one word too, which
//! is what the ready queue moves on every push and pop (see `job` for what a two-word job
//! would cost). The count and the free mirror `task::raw`'s: `Release` on every drop,
//! `Acquire` before the free.

use crate::sync::atomic::{fence, AtomicU8, AtomicUsize, Ordering};
use std::cell::UnsafeCell;
use std::fmt;
use std::panic::Location;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Instant;

use crate::contextvar::{self, Context};
use crate::exception;
use crate::timer::TimerQueue;

const PENDING: u8 = 0;
const RUNNING: u8 = 1;
const DONE: u8 = 2;
const CANCELLED: u8 = 3;

/// The untyped start of every cell (`#[repr(C)]`, the first field of [`CallbackCell`]).
#[repr(C)]
struct Header {
    refs: AtomicUsize,
    vtable: &'static VTable,
    location: &'static Location<'static>,
    /// The context variables captured when the callback was scheduled.
    context: Context,
    state: AtomicU8,
}

// `Job` keeps its tag (`job::CALLBACK_TAG`) in the low bit of a header's address.
const _: () = assert!(std::mem::align_of::<Header>() >= 2);

/// The operations that need the closure's type.
struct VTable {
    /// Takes the closure out of the slot and runs it inside the cell's context, or only
    /// drops it. Only the thread that moved the state out of `PENDING` may call it.
    take: unsafe fn(NonNull<Header>, run: bool),
    /// Frees the cell, dropping a closure that is still in it.
    dealloc: unsafe fn(NonNull<Header>),
}

#[repr(C)]
struct CallbackCell<F> {
    header: Header,
    slot: UnsafeCell<Option<F>>,
}

impl<F: FnOnce() + Send + 'static> CallbackCell<F> {
    const VTABLE: VTable = VTable {
        take: Self::take,
        dealloc: Self::dealloc,
    };

    /// # Safety
    ///
    /// `ptr` is the header of a live `CallbackCell<F>` (true of every call through its vtable), and
    /// the caller moved the state out of `PENDING`.
    unsafe fn take(ptr: NonNull<Header>, run: bool) {
        // SAFETY: the header is the first field of a `#[repr(C)]` cell of this type.
        let cell = unsafe { ptr.cast::<Self>().as_ref() };
        // SAFETY: the caller moved the state out of `PENDING`, so the slot is ours alone
        // (module invariant).
        let f = unsafe { (*cell.slot.get()).take() };
        match f {
            Some(f) if run => contextvar::run_in(&cell.header.context, f),
            // Cancelled: by a handle, a timer heap's tidy, or the runtime's shutdown, all
            // places that must go on if the closure's destructor panics.
            f => {
                exception::contain_here("Exception while dropping a cancelled callback", || {
                    drop(f)
                });
            }
        }
    }

    /// # Safety
    ///
    /// `ptr` is the header of a `CallbackCell<F>` made by `Callback::new`, and its last reference
    /// is gone.
    unsafe fn dealloc(ptr: NonNull<Header>) {
        // SAFETY: the cell was made by `Box::new` in `Callback::new`, nobody can reach it.
        let cell = unsafe { Box::from_raw(ptr.cast::<Self>().as_ptr()) };
        // Whoever drops the last reference (often a worker, after running it) must go on if
        // the closure (never run nor cancelled) or a context value panics when dropped.
        exception::contain_here(
            "Exception while freeing a callback (its closure or context)",
            || drop(cell),
        );
    }
}

/// A counted pointer to one callback cell, as the queues, timer heaps and handles hold it.
pub(crate) struct Callback {
    ptr: NonNull<Header>,
}

// SAFETY: the closure slot is only accessed by the single thread that won the CAS out of
// PENDING, or by the one that freed the cell (module invariant), so sharing the cell never
// gives two threads access to the closure at once, and `Callback::new` requires it to be
// `Send`, so that thread may be any thread. The rest of the header is atomics, `'static`
// references and a `Send + Sync` context (checked below).
unsafe impl Send for Callback {}
// SAFETY: as for `Send`.
unsafe impl Sync for Callback {}

// The context is shared by every holder of the cell: it must stay `Send + Sync` for the two
// impls above to hold.
const _: fn() = || {
    fn shareable<T: Send + Sync>() {}
    shareable::<Context>();
};

impl Callback {
    /// A new cell holding `f`, with the current context variables.
    pub(crate) fn new<F: FnOnce() + Send + 'static>(
        f: F,
        location: &'static Location<'static>,
    ) -> Callback {
        let cell = Box::new(CallbackCell {
            header: Header {
                refs: AtomicUsize::new(1),
                vtable: &CallbackCell::<F>::VTABLE,
                location,
                context: contextvar::capture(),
                state: AtomicU8::new(PENDING),
            },
            slot: UnsafeCell::new(Some(f)),
        });
        Callback {
            ptr: NonNull::from(Box::leak(cell)).cast(),
        }
    }

    fn header(&self) -> &Header {
        // SAFETY: our reference keeps the cell alive.
        unsafe { self.ptr.as_ref() }
    }

    fn claim(&self, to: u8) -> bool {
        self.header()
            .state
            .compare_exchange(PENDING, to, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Runs the closure if nobody ran or cancelled it before. A panic propagates to the
    /// caller (the worker catches it); the cell still ends in `DONE`.
    pub(crate) fn run(&self) {
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
        let _done = Done(&self.header().state);
        // SAFETY: this thread just moved the state out of `PENDING`, so it may take the slot,
        // through the live cell's own vtable.
        unsafe { (self.header().vtable.take)(self.ptr, true) };
    }

    /// Cancels the callback if it is still pending, dropping its closure; true if this call
    /// cancelled it.
    pub(crate) fn cancel(&self) -> bool {
        if !self.claim(CANCELLED) {
            return false;
        }
        // SAFETY: as in `run`.
        unsafe { (self.header().vtable.take)(self.ptr, false) };
        true
    }

    /// True when the callback was cancelled before it ran.
    pub(crate) fn cancelled(&self) -> bool {
        self.header().state.load(Ordering::Acquire) == CANCELLED
    }

    /// Where the callback was scheduled.
    pub(crate) fn location(&self) -> &'static Location<'static> {
        self.header().location
    }

    /// The pointer, with this reference in it (for `Job`'s one-word encoding).
    pub(crate) fn into_raw(self) -> NonNull<()> {
        std::mem::ManuallyDrop::new(self).ptr.cast()
    }

    /// Takes back a reference given out by [`into_raw`](Self::into_raw).
    ///
    /// # Safety
    ///
    /// `ptr` came from `into_raw`, and its reference is used only once.
    pub(crate) unsafe fn from_raw(ptr: NonNull<()>) -> Callback {
        Callback { ptr: ptr.cast() }
    }
}

impl Clone for Callback {
    fn clone(&self) -> Callback {
        let old = self.header().refs.fetch_add(1, Ordering::Relaxed);
        if old > isize::MAX as usize {
            // Billions of handles: a leak in the program; continuing would wrap the count.
            std::process::abort();
        }
        Callback { ptr: self.ptr }
    }
}

impl Drop for Callback {
    fn drop(&mut self) {
        if self.header().refs.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // Pairs with the release of every other reference: their uses happen before the free.
        fence(Ordering::Acquire);
        // SAFETY: that was the last reference; the vtable is the cell's own.
        unsafe { (self.header().vtable.dealloc)(self.ptr) };
    }
}

impl fmt::Debug for Callback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Callback")
            .field("location", &self.location())
            .field("cancelled", &self.cancelled())
            .finish()
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
    pub(crate) cell: Callback,
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
/// more than `MIN_SCHEDULED_FOR_REBUILD` entries, more than half of them cancelled).
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
    pub(crate) cell: Callback,
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
        let cell = Callback::new(
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
        let cell = Callback::new(move || drop(guard), Location::caller());
        assert!(cell.cancel());
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert!(!cell.cancel(), "second cancel is a no-op");
        cell.run();
        assert!(cell.cancelled());
    }

    #[test]
    fn panicking_closure_still_ends_done_and_is_dropped_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let guard = DropCount(drops.clone());
        let cell = Callback::new(
            move || {
                let _guard = guard;
                panic!("x")
            },
            Location::caller(),
        );
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cell.run()));
        assert!(r.is_err());
        assert_eq!(cell.header().state.load(Ordering::SeqCst), DONE);
        assert_eq!(
            drops.load(Ordering::SeqCst),
            1,
            "the unwind dropped the closure"
        );
        assert!(!cell.cancel());
        drop(cell);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn dropping_the_last_reference_drops_a_closure_that_never_ran() {
        let drops = Arc::new(AtomicUsize::new(0));
        let guard = DropCount(drops.clone());
        let cell = Callback::new(move || drop(guard), Location::caller());
        let other = cell.clone();
        drop(cell);
        assert_eq!(drops.load(Ordering::SeqCst), 0, "a reference is left");
        drop(other);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_callback_is_one_word() {
        assert_eq!(
            std::mem::size_of::<Callback>(),
            std::mem::size_of::<usize>()
        );
    }

    #[test]
    fn race_run_and_cancel() {
        for _ in 0..2_000 {
            let n = Arc::new(AtomicUsize::new(0));
            let m = n.clone();
            let cell = Callback::new(
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

/// Loom models of the cell (`RUSTFLAGS="--cfg eddy_loom"`, run by `.ci/run`): the real
/// [`Callback`], whose count and state use loom's atomics in that build. The closure's
/// captures touch a loom `UnsafeCell` when the closure runs and when it is dropped, so two
/// threads reaching the closure slot at once fail the model.
#[cfg(all(test, eddy_loom))]
mod loom_models {
    use super::*;
    use loom::sync::atomic::AtomicUsize;
    use loom::sync::Arc;
    use loom::thread;

    /// Runs and drops of one closure, in a cell that only one thread may touch at a time.
    struct Counts(loom::cell::UnsafeCell<(usize, usize)>);

    // SAFETY: loom tracks every access to the inner cell and fails the model if two threads
    // ever overlap; sharing it is what the model is for.
    unsafe impl Sync for Counts {}
    // SAFETY: as for `Sync`.
    unsafe impl Send for Counts {}

    impl Counts {
        fn get(&self) -> (usize, usize) {
            // SAFETY: called once every other thread is done.
            self.0.with(|c| unsafe { *c })
        }
    }

    /// What the closure holds.
    struct Captures(Arc<Counts>);

    impl Captures {
        fn ran(&self) {
            // SAFETY: the model checks exactly that nobody else is in here.
            self.0 .0.with_mut(|c| unsafe { (*c).0 += 1 });
        }
    }

    impl Drop for Captures {
        fn drop(&mut self) {
            // SAFETY: as in `ran`.
            self.0 .0.with_mut(|c| unsafe { (*c).1 += 1 });
        }
    }

    fn callback() -> (Callback, Arc<Counts>) {
        let counts = Arc::new(Counts(loom::cell::UnsafeCell::new((0, 0))));
        let captures = Captures(counts.clone());
        let cb = Callback::new(move || captures.ran(), Location::caller());
        (cb, counts)
    }

    /// A worker runs the callback and drops its reference while the handle cancels it and
    /// drops its own: the closure runs at most once, exactly one of the run and the cancel
    /// wins, the closure is dropped once, and the cell is freed by whoever is last.
    #[test]
    fn run_races_cancel() {
        crate::sync::model("callback: run races cancel", || {
            let (queued, counts) = callback();
            let handle = queued.clone();
            let cancel_won = Arc::new(AtomicUsize::new(0));
            let runner = thread::spawn(move || {
                queued.run();
                drop(queued);
            });
            let won = cancel_won.clone();
            let canceller = thread::spawn(move || {
                if handle.cancel() {
                    assert!(handle.cancelled());
                    won.store(1, Ordering::SeqCst);
                }
                drop(handle);
            });
            runner.join().unwrap();
            canceller.join().unwrap();
            let (runs, drops) = counts.get();
            assert!(runs <= 1, "ran twice");
            assert_eq!(
                runs + cancel_won.load(Ordering::SeqCst),
                1,
                "not exactly one winner"
            );
            assert_eq!(drops, 1, "closure not dropped exactly once");
        });
    }

    /// Two references dropped at once on two threads, the closure never run nor cancelled:
    /// the last one frees the cell and the closure with it, once.
    #[test]
    fn last_references_race() {
        crate::sync::model("callback: last references race", || {
            let (a, counts) = callback();
            let b = a.clone();
            let other = thread::spawn(move || drop(b));
            drop(a);
            other.join().unwrap();
            let (runs, drops) = counts.get();
            assert_eq!((runs, drops), (0, 1));
        });
    }
}
