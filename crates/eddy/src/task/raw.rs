//! The task cell's state machine: one allocation per task, one atomic word, three kinds of
//! reference ([`Runnable`], [`Waker`] and the join side of [`Task`](crate::Task)).
//!
//! This module is the only place that knows how a task's memory is laid out and when it is
//! freed. `cell` supplies the typed half (how to poll this particular future, where its
//! output goes); `registry` links live tasks into lists. Everything here is `unsafe`-heavy on
//! purpose, so that the rest of the runtime handles tasks through safe types.
//!
//! # Why our own cell
//!
//! A pending task holds its whole allocation for as long as it waits (docs/benchmarks.md,
//! "memory"). This cell therefore keeps one header of ours with the registry links in it, so
//! that a task is one allocation with no side entry elsewhere, and stores the future and its
//! output in one union, since the two are never live at once. docs/decisions.md ("Tasks live
//! in a cell of our own") says what it replaced.
//!
//! # The state word
//!
//! One atomic word per task holds its flags and reference count; what each flag means, who
//! owns the output and the awaiter slot, and every transition live in `state`. This module
//! acts on what the transitions return.

use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic::{self, AssertUnwindSafe};
use std::ptr::NonNull;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

use crate::task::dump::TaskState;
use crate::task::error::TaskError;
use crate::task::host::TaskHost;
use crate::task::meta::TaskMeta;
use crate::task::state::{AfterPending, State, Wake};

/// The typed operations of one kind of cell, filled in by `cell`.
pub(crate) struct VTable {
    /// Polls the future once, or only drops it when `stop` is true. On `Ready` the future is
    /// gone and the output is in the stage. Called only by the thread that set `RUNNING`.
    pub(crate) poll: unsafe fn(NonNull<Header>, &mut Context<'_>, stop: bool) -> Poll<()>,
    /// Moves the output out of the stage into `*out` (an `Option<Result<T, TaskError>>`).
    pub(crate) take_output: unsafe fn(NonNull<Header>, out: *mut ()),
    /// Drops the output in the stage.
    pub(crate) drop_output: unsafe fn(NonNull<Header>),
    /// Sends a woken task to its queue.
    pub(crate) schedule: fn(Runnable),
    /// The runtime the task belongs to (its cell keeps it after the header).
    pub(crate) host: unsafe fn(NonNull<Header>) -> NonNull<dyn TaskHost>,
    /// Frees the allocation (dropping the future first if it never completed).
    pub(crate) dealloc: unsafe fn(NonNull<Header>),
}

/// The first field of every task allocation (`#[repr(C)]`, so a pointer to the allocation is
/// a pointer to its header).
///
/// # Cold bytes first
///
/// The cold prefix (`COLD_PREFIX` bytes: the awaiter slot, the registry links, the spawn
/// location and the id) is touched only at spawn, on completion, by an awaiting `Task` and
/// in dumps; the state word, the vtable and the poll count, which every wake and poll touch,
/// come after it. The allocator places cells 16-byte aligned and often side by side, and the
/// cache line that holds the end of one cell can hold the whole prefix of the next. Were
/// those bytes hot, two tasks running on two workers would pass that line back and forth on
/// every poll (docs/benchmark-log.md, "Why eddy misses"). Aligning cells to cache lines, as
/// tokio does, would avoid it too, but costs a slow aligned allocation per spawn
/// (docs/decisions.md, "The task header starts with its cold fields").
#[repr(C)]
pub(crate) struct Header {
    /// The waker of whoever awaits the [`Task`](crate::Task) handle (see `JOIN_WAKER`).
    awaiter: UnsafeCell<Option<Waker>>,
    /// Cold fields first, then hot ones (see `TaskMeta`).
    pub(crate) meta: TaskMeta,
    state: State,
    vtable: &'static VTable,
}

// `Job` keeps its tag (`job::CALLBACK_TAG`) in the low bit of a header's address.
const _: () = assert!(std::mem::align_of::<Header>() >= 2);

/// Where the cold prefix ends; checked by a unit test.
#[cfg(test)]
pub(crate) const COLD_PREFIX: usize = 48;

impl Header {
    pub(crate) fn new(vtable: &'static VTable, meta: TaskMeta) -> Header {
        Header {
            awaiter: UnsafeCell::new(None),
            meta,
            state: State::new(),
            vtable,
        }
    }

    /// The runtime the task belongs to.
    pub(crate) fn host(&self) -> &dyn TaskHost {
        // SAFETY: the vtable was chosen with the cell's type, and the host lives in the cell
        // as long as this header does.
        unsafe { (self.vtable.host)(NonNull::from(self)).as_ref() }
    }

    /// Whether the registry lists the task (read and changed only under its shard lock).
    pub(crate) fn is_registered(&self) -> bool {
        self.state.load().is_registered()
    }

    /// The registry unlinked the task (under its shard lock); its reference passes on.
    pub(crate) fn clear_registered(&self) {
        self.state.clear_registered();
    }

    /// Takes the awaiter's waker out of its slot, for `dealloc`.
    ///
    /// # Safety
    ///
    /// The last reference to the task is gone: nobody else can reach the slot.
    pub(crate) unsafe fn take_awaiter(&self) -> Option<Waker> {
        // SAFETY: per the contract, we are the slot's only user.
        unsafe { (*self.awaiter.get()).take() }
    }

    /// True once the future is gone and the output was written.
    #[inline]
    pub(crate) fn is_complete(&self) -> bool {
        self.state.load().is_complete()
    }

    /// Where the task is in its life, for dumps (a racy snapshot).
    pub(crate) fn dump_state(&self) -> TaskState {
        let s = self.state.peek();
        if s.is_running() {
            TaskState::Running
        } else if s.is_scheduled() {
            TaskState::Scheduled
        } else {
            TaskState::Idle
        }
    }
}

/// Makes a new reference of an existing one (clone of a waker, the registry's own).
///
/// # Safety
///
/// `ptr` must point to a live task header and the caller must hold a reference to it.
#[inline]
pub(crate) unsafe fn add_ref(ptr: NonNull<Header>) {
    // SAFETY: the caller holds a reference, so the header is alive.
    unsafe { ptr.as_ref() }.state.ref_inc();
}

/// Gives up one reference, freeing the task with the last one.
///
/// # Safety
///
/// The caller must hold the reference it gives up, and not use `ptr` afterwards.
#[inline]
pub(crate) unsafe fn drop_ref(ptr: NonNull<Header>) {
    // SAFETY: the caller still holds its reference here.
    let header = unsafe { ptr.as_ref() };
    // `ref_dec` takes `&State`, not the header: once our reference is given up another
    // thread may free the cell, and only the vtable (a `'static`) is read afterwards.
    let dealloc = header.vtable.dealloc;
    if header.state.ref_dec() {
        // SAFETY: that was the last reference; nobody can reach the task any more.
        unsafe { dealloc(ptr) };
    }
}

// ----- wakers -------------------------------------------------------------------------------

/// Whether `waker` is the task waker of the cell at `ptr` (not one wrapped by a combinator:
/// those are not recognised).
fn is_task_waker_of(waker: &Waker, ptr: NonNull<Header>) -> bool {
    std::ptr::eq(waker.vtable(), &WAKER_VTABLE) && waker.data() == ptr.as_ptr() as *const ()
}

static WAKER_VTABLE: RawWakerVTable =
    RawWakerVTable::new(waker_clone, waker_wake, waker_wake_by_ref, waker_drop);

/// A waker that owns one reference to the task.
///
/// # Safety
///
/// The caller transfers one reference it holds to the returned waker.
pub(crate) unsafe fn waker_from_ref(ptr: NonNull<Header>) -> Waker {
    // SAFETY: the data pointer is a task header with one reference for this waker, which is
    // what every function of `WAKER_VTABLE` expects.
    unsafe { Waker::from_raw(RawWaker::new(ptr.as_ptr() as *const (), &WAKER_VTABLE)) }
}

unsafe fn waker_clone(data: *const ()) -> RawWaker {
    let ptr = header_of(data);
    // SAFETY: a waker's data is a task header it holds a reference to.
    unsafe { add_ref(ptr) };
    RawWaker::new(data, &WAKER_VTABLE)
}

unsafe fn waker_wake(data: *const ()) {
    // SAFETY: the waker's reference is handed to `wake`, which consumes it.
    unsafe { wake(header_of(data), true) }
}

unsafe fn waker_wake_by_ref(data: *const ()) {
    // SAFETY: the waker keeps its reference across the call.
    unsafe { wake(header_of(data), false) }
}

unsafe fn waker_drop(data: *const ()) {
    // SAFETY: the waker owned one reference and is gone.
    unsafe { drop_ref(header_of(data)) }
}

fn header_of(data: *const ()) -> NonNull<Header> {
    NonNull::new(data as *mut Header).expect("task waker with a null pointer")
}

/// Wakes a task: queues it if it is idle, flags it if it is running, and does nothing more if
/// it is already queued or complete. With `consume`, one reference of the caller is used up
/// (moved into the new [`Runnable`] when there is one).
///
/// # Safety
///
/// The caller holds a reference to the task (and gives it up when `consume`).
pub(crate) unsafe fn wake(ptr: NonNull<Header>, consume: bool) {
    // SAFETY: the caller's reference keeps the header alive through the call.
    let header = unsafe { ptr.as_ref() };
    match header.state.wake(consume) {
        Wake::Schedule => (header.vtable.schedule)(Runnable { ptr }),
        Wake::Nothing => {}
        Wake::Complete => {
            if consume {
                // SAFETY: the caller's reference, which it gave us to consume.
                unsafe { drop_ref(ptr) };
            }
        }
    }
}

// ----- runnables ----------------------------------------------------------------------------

/// "Poll this task once": the unit that sits in ready queues. Holds one reference.
///
/// Dropping a `Runnable` without running it drops the task's future (the task completes as
/// cancelled). A runnable of a pinned task must therefore be run or dropped only on its owner
/// worker; code that finds one elsewhere leaks it with `mem::forget`.
pub(crate) struct Runnable {
    ptr: NonNull<Header>,
}

// SAFETY: a `Runnable` is a counted pointer to a task whose header is only shared immutably
// (its mutable parts are atomics or guarded by the state protocol). A runnable of a `!Send`
// (pinned) future is still sent, to its owner's inbox; `cell::spawn_pinned_on`'s contract and
// `Shared::schedule_pinned` make sure only the owner thread runs or drops it.
unsafe impl Send for Runnable {}

impl Runnable {
    /// Takes a reference the caller holds (the spawn's first runnable).
    ///
    /// # Safety
    ///
    /// The caller transfers a reference and the `SCHEDULED` bit it stands for.
    pub(crate) unsafe fn from_ref(ptr: NonNull<Header>) -> Runnable {
        Runnable { ptr }
    }

    /// The pointer, with this runnable's reference and `SCHEDULED` bit in it (for `Job`'s
    /// one-word encoding, which keeps a tag in the low bit: see the assertion under `Header`).
    #[inline]
    pub(crate) fn into_raw(self) -> NonNull<()> {
        ManuallyDrop::new(self).ptr.cast()
    }

    /// Takes back a runnable given out by [`into_raw`](Self::into_raw).
    ///
    /// # Safety
    ///
    /// `ptr` came from `into_raw`, and is turned back into a runnable only once.
    #[inline]
    pub(crate) unsafe fn from_raw(ptr: NonNull<()>) -> Runnable {
        Runnable { ptr: ptr.cast() }
    }

    /// The task's header.
    #[inline]
    pub(crate) fn meta(&self) -> &TaskMeta {
        // SAFETY: the runnable's reference keeps the header alive.
        unsafe { &self.ptr.as_ref().meta }
    }

    /// The task's header.
    #[inline]
    pub(crate) fn header(&self) -> NonNull<Header> {
        self.ptr
    }

    /// Sends the runnable to its queue (a spawn's first schedule).
    pub(crate) fn schedule(self) {
        // SAFETY: the runnable's reference keeps the header alive.
        let schedule = unsafe { self.ptr.as_ref().vtable.schedule };
        schedule(self)
    }

    /// Polls the task once (see the module docs for what happens to the state).
    pub(crate) fn run(self) {
        let ptr = ManuallyDrop::new(self).ptr;
        // SAFETY: the runnable's reference and `SCHEDULED` bit are handed to `run`.
        unsafe { run(ptr, false) }
    }
}

impl Drop for Runnable {
    fn drop(&mut self) {
        // SAFETY: as in `run`; with `stop` the future is dropped instead of polled.
        unsafe { run(self.ptr, true) }
    }
}

impl fmt::Debug for Runnable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Runnable({})", self.meta().id)
    }
}

/// One step of a scheduled task.
///
/// # Safety
///
/// The caller hands over a runnable's reference (and its `SCHEDULED` bit).
unsafe fn run(ptr: NonNull<Header>, stop: bool) {
    // SAFETY: the runnable's reference keeps the header alive until we drop it below.
    let header = unsafe { ptr.as_ref() };
    let Ok(before) = header.state.start_run() else {
        // Not reachable while each runnable stands for one `SCHEDULED`; harmless anyway.
        // SAFETY: our reference.
        unsafe { drop_ref(ptr) };
        return;
    };
    // A host that stops is checked by the typed poll, which has it at hand.
    let stop = stop || before.is_cancelled();
    // SAFETY: `ptr` is a live task header, and the waker borrows the runnable's reference for
    // the poll: `ManuallyDrop` keeps it from giving that reference up, so there is no count
    // traffic unless the future clones it.
    let waker = ManuallyDrop::new(unsafe { waker_from_ref(ptr) });
    let mut cx = Context::from_waker(&waker);
    // SAFETY: we set `RUNNING`, so we alone may touch the stage.
    let polled = unsafe { (header.vtable.poll)(ptr, &mut cx, stop) };
    match polled {
        Poll::Pending => {
            // Idle again, giving up our reference in the same step unless the task was woken
            // while it ran: then it goes back to its queue with this same reference.
            match header.state.finish_pending() {
                AfterPending::Reschedule => (header.vtable.schedule)(Runnable { ptr }),
                AfterPending::Idle => {}
                // SAFETY: ours was the last reference; nobody else can reach the task.
                AfterPending::Free => unsafe { (header.vtable.dealloc)(ptr) },
            }
        }
        Poll::Ready(()) => {
            // SAFETY: the stage holds the output now; we hand over our reference.
            unsafe { complete(ptr) }
        }
    }
}

/// Publishes a finished task: `COMPLETE`, then the output to its owner and a wake to the
/// awaiter.
///
/// # Safety
///
/// Called by the runner (holding a reference, which this gives up) right after the future
/// finished and the output was written.
unsafe fn complete(ptr: NonNull<Header>) {
    // SAFETY: the runner's reference keeps the header alive.
    let header = unsafe { ptr.as_ref() };
    let old = header.state.complete();
    if !old.has_handle() {
        // Detached: nobody will ever read the output.
        // SAFETY: `HANDLE` was clear at `COMPLETE`, so the output is ours alone.
        unsafe { (header.vtable.drop_output)(ptr) };
    } else if old.has_join_waker() {
        // SAFETY: with `JOIN_WAKER` set the slot is read-only for everyone, and the handle
        // cannot clear the bit once `COMPLETE` is set, so a shared borrow of the slot is sound.
        if let Some(waker) = unsafe { &*header.awaiter.get() } {
            // Someone else's waker (another runtime's, say) may panic: that must not unwind
            // into the worker or skip our `drop_ref`.
            let woken = panic::catch_unwind(AssertUnwindSafe(|| waker.wake_by_ref()));
            if let Err(payload) = woken {
                let message = "Exception in the waker awaiting a task".to_string();
                header.meta.report_panic(header.host(), payload, message);
            }
        }
        if !header.state.unset_join_waker_after_complete().has_handle() {
            // The handle went while we held the slot, and left the waker to us.
            // SAFETY: `HANDLE` and `JOIN_WAKER` are clear after `COMPLETE`: nobody else
            // touches the slot any more.
            let awaiter = unsafe { (*header.awaiter.get()).take() };
            drop_awaiter(header, awaiter);
        }
    }
    // SAFETY: our reference.
    unsafe { drop_ref(ptr) };
}

/// Drops the awaiter's waker on a worker: someone else's code, which may panic.
fn drop_awaiter(header: &Header, awaiter: Option<Waker>) {
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(move || drop(awaiter))) {
        header
            .meta
            .report_drop_panic(header.host(), payload, "the waker awaiting a task");
    }
}

// ----- the join side ------------------------------------------------------------------------

/// The join side of a task: owns the `HANDLE` bit and one reference. [`Task`](crate::Task)
/// wraps it.
pub(crate) struct JoinHandle<T> {
    ptr: NonNull<Header>,
    _output: PhantomData<T>,
}

// SAFETY: the join side only touches the output (a `T`) and atomics; it may move between
// threads when `T` may (the same bounds as `std::thread::JoinHandle`'s result).
unsafe impl<T: Send> Send for JoinHandle<T> {}
// SAFETY: `&JoinHandle` only reads atomics and the task id, and wakes the task.
unsafe impl<T> Sync for JoinHandle<T> {}

// The handle never pins the output.
impl<T> Unpin for JoinHandle<T> {}

impl<T> JoinHandle<T> {
    /// # Safety
    ///
    /// The caller transfers a reference and the `HANDLE` bit, for a task whose output is a
    /// `Result<T, TaskError>`.
    pub(crate) unsafe fn from_ref(ptr: NonNull<Header>) -> Self {
        JoinHandle {
            ptr,
            _output: PhantomData,
        }
    }

    fn header(&self) -> &Header {
        // SAFETY: our reference keeps the header alive.
        unsafe { self.ptr.as_ref() }
    }

    pub(crate) fn meta(&self) -> &TaskMeta {
        &self.header().meta
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.header().state.load().is_complete()
    }

    /// Sets `CANCELLED` and wakes the task so that its next poll drops the future.
    pub(crate) fn cancel(&self) {
        if self.header().state.cancel() {
            // SAFETY: we hold a reference and keep it.
            unsafe { wake(self.ptr, false) };
        }
    }

    /// Polls for the output; `Ready` consumes the handle (the caller must not use it again).
    ///
    /// Panics with "Task cannot await on itself" (asyncio's message) when the waker is the
    /// task's own: it would wait forever, and its waker in its own awaiter slot would keep
    /// its cell alive.
    pub(crate) fn poll_join(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let header = self.header();
        let state = header.state.load();
        if state.is_complete() {
            return Poll::Ready(());
        }
        if is_task_waker_of(cx.waker(), self.ptr) {
            panic!("Task cannot await on itself");
        }
        if state.has_join_waker() {
            // SAFETY: the slot is read-only while `JOIN_WAKER` is set.
            let same = unsafe { &*header.awaiter.get() }
                .as_ref()
                .is_some_and(|w| w.will_wake(cx.waker()));
            if same {
                return Poll::Pending;
            }
            // Take the slot back to replace the waker.
            if header.state.unset_join_waker().is_err() {
                return Poll::Ready(());
            }
        }
        // SAFETY: `JOIN_WAKER` is clear: the slot is ours.
        let previous = unsafe { (*header.awaiter.get()).replace(cx.waker().clone()) };
        // After the slot is handed over: the old waker is someone else's code.
        let handed = header.state.set_join_waker();
        drop(previous);
        if handed.is_err() {
            return Poll::Ready(());
        }
        Poll::Pending
    }

    /// After `poll_join` returned `Ready`: the output (this gives up the handle).
    pub(crate) fn into_output(self) -> Result<T, TaskError> {
        let this = ManuallyDrop::new(self);
        let header = this.header();
        let old = header.state.drop_handle();
        debug_assert!(old.is_complete(), "output taken before completion");
        let mut out: Option<Result<T, TaskError>> = None;
        // SAFETY: `COMPLETE` was observed with `HANDLE` set, so the output is ours, and `out`
        // has the type the cell writes (`from_ref`'s contract).
        unsafe { (header.vtable.take_output)(this.ptr, &mut out as *mut _ as *mut ()) };
        // SAFETY: the slot is ours unless the runner still holds it (see `drop_handle`).
        let awaiter = (!old.has_join_waker()).then(|| unsafe { (*header.awaiter.get()).take() });
        // SAFETY: our reference; the waker (which may panic on drop) is dropped after.
        unsafe { drop_ref(this.ptr) };
        drop(awaiter);
        out.expect("task output missing")
    }
}

impl<T> Drop for JoinHandle<T> {
    /// Detaches: the task keeps running; its output is dropped by whoever sees the other
    /// side go (see `HANDLE` in `state`).
    fn drop(&mut self) {
        let header = self.header();
        let old = header.state.drop_handle();
        if old.is_complete() {
            // SAFETY: the runner saw `HANDLE` set when it completed the task, so the output is
            // ours to drop.
            unsafe { (header.vtable.drop_output)(self.ptr) };
        }
        // Not complete: `drop_handle` cleared `JOIN_WAKER` with `HANDLE`, so the slot is ours
        // (and `complete` will leave it alone). Complete: ours unless the runner still holds
        // it, which then drops the waker itself. Either way drop the waker now rather than
        // keep the awaiter alive with the cell.
        let slot_is_ours = !old.is_complete() || !old.has_join_waker();
        // SAFETY: when `slot_is_ours` holds, the runner neither holds the slot nor will touch it
        // again, so nobody else touches it.
        let awaiter = slot_is_ours.then(|| unsafe { (*header.awaiter.get()).take() });
        // SAFETY: our reference; the waker (which may panic on drop) is dropped after.
        unsafe { drop_ref(self.ptr) };
        drop(awaiter);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header is what every task pays before its future (docs/benchmarks.md, "memory").
    /// Growing it is a visible cost, so it takes a deliberate change of the size asserted
    /// here.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn the_header_stays_80_bytes() {
        assert_eq!(std::mem::size_of::<Header>(), 80);
    }

    /// The fields that wakes and polls touch lie past the cold prefix, and the prefix is what
    /// the cold fields fill (see "Cold bytes first" on `Header`). The hot list is what
    /// `run`, `wake`, `cell::Cell::poll`, `TaskMeta::count_poll`, `Shared::schedule_task`,
    /// `Shared::schedule_pinned` and `worker::schedule::hand_to_this_worker` read or write (the
    /// host they also read lies after the header, in the typed cell); a new
    /// per-poll use of a cold field (`id`, `location`) is not caught here, only in review.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn hot_fields_lie_past_the_cold_prefix() {
        use std::mem::offset_of;
        let hot = [
            offset_of!(Header, state),
            offset_of!(Header, vtable),
            offset_of!(Header, meta.polls),
            offset_of!(Header, meta.owner),
        ];
        assert!(
            hot.iter().all(|&at| at >= COLD_PREFIX),
            "hot field inside: {hot:?}"
        );
        assert_eq!(offset_of!(Header, meta.id) + 8, COLD_PREFIX);
        assert!(offset_of!(Header, awaiter) < COLD_PREFIX);
        assert!(offset_of!(Header, meta.links) < COLD_PREFIX);
        assert!(offset_of!(Header, meta.location) < COLD_PREFIX);
    }
}
