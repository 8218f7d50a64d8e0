//! "The current runtime": the thread-local that tells a thread which runtime it belongs to,
//! and the free functions (`eddy::spawn`, `eddy::call_soon`, ...) that act on it.
//!
//! A thread is in one of three states:
//!
//! * a **worker** of a runtime: submissions go straight to its own ready queue and timer
//!   heap, with no atomic read-modify-write on shared state;
//! * a **guest**: a thread inside `Runtime::block_on` or `run_forever`; submissions go
//!   through the runtime's `Injector` and wake a worker, as from any foreign thread;
//! * **outside**: the free functions panic with "no eddy runtime on this thread"
//!   (`RuntimeHandle::try_current` is the non-panicking check).
//!
//! Entering the worker or guest state while already in one of them panics with asyncio's
//! "this event loop is already running", because blocking a worker (or nesting `block_on`)
//! would stall every task that worker owns.

use std::cell::RefCell;
use std::future::Future;
use std::panic::Location;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::callback::{Callback, Handle, TimerHandle};
use crate::exception;
use crate::shared::{Job, Shared};
use crate::task::{self, Runnable, Task};
use crate::timer::TimerAction;
use crate::worker::Worker;

enum Current {
    Worker(Rc<Worker>),
    Guest(Arc<Shared>),
}

thread_local! {
    static CURRENT: RefCell<Option<Current>> = const { RefCell::new(None) };
}

const ALREADY_RUNNING: &str =
    "this event loop is already running: block_on and run_forever cannot be called from a \
     worker thread or from inside another block_on";
const NO_RUNTIME: &str = "no eddy runtime on this thread: call this from a task or callback of \
     a runtime, from inside Runtime::block_on, or use a RuntimeHandle";

/// Restores "outside" when dropped.
#[must_use]
pub(crate) struct EnterGuard(());

impl Drop for EnterGuard {
    fn drop(&mut self) {
        // Take the value out first: dropping an `Rc<Worker>` may run arbitrary drops.
        let old = CURRENT.with(|c| c.borrow_mut().take());
        drop(old);
        drop(exception::serve_here(None));
    }
}

fn enter(current: Current) -> EnterGuard {
    let handler = match &current {
        Current::Worker(w) => w.shared().handler.clone(),
        Current::Guest(s) => s.handler.clone(),
    };
    CURRENT.with(|c| {
        let mut c = c.borrow_mut();
        if c.is_some() {
            panic!("{ALREADY_RUNNING}");
        }
        *c = Some(current);
    });
    drop(exception::serve_here(Some(handler)));
    EnterGuard(())
}

/// Marks this thread as worker `worker` for the guard's lifetime.
pub(crate) fn enter_worker(worker: Rc<Worker>) -> EnterGuard {
    enter(Current::Worker(worker))
}

/// Marks this thread as a guest of `shared` (inside `block_on`/`run_forever`).
///
/// # Panics
///
/// Panics with "this event loop is already running" if the thread is already a worker or a
/// guest of any runtime.
pub(crate) fn enter_guest(shared: Arc<Shared>) -> EnterGuard {
    enter(Current::Guest(shared))
}

/// The runtime this thread belongs to, if any.
pub(crate) fn current_shared() -> Option<Arc<Shared>> {
    CURRENT.with(|c| match &*c.borrow() {
        Some(Current::Worker(w)) => Some(w.shared().clone()),
        Some(Current::Guest(s)) => Some(s.clone()),
        None => None,
    })
}

/// Runs `f` with this thread's worker if it is a worker of `shared`.
fn with_worker_of<R>(shared: &Arc<Shared>, f: impl FnOnce(Option<&Worker>) -> R) -> R {
    CURRENT.with(|c| match &*c.borrow() {
        Some(Current::Worker(w)) if Arc::ptr_eq(w.shared(), shared) => f(Some(w)),
        _ => f(None),
    })
}

/// True if this thread is a worker of `shared`.
pub(crate) fn is_worker_of(shared: &Arc<Shared>) -> bool {
    with_worker_of(shared, |w| w.is_some())
}

/// Pushes a woken stealable task to this thread's ready queue if this thread is a worker of
/// the task's runtime; otherwise gives it back.
pub(crate) fn push_if_worker_of(runnable: Runnable) -> Option<Runnable> {
    hand_to_this_worker(runnable, |_, _| true, |w, r| w.push_local(Job::from(r)))
}

/// Pushes a woken pinned task to its owner's queue if this thread is that owner.
pub(crate) fn push_pinned_if_owner(runnable: Runnable) -> Option<Runnable> {
    hand_to_this_worker(
        runnable,
        |w, r| r.meta().owner() == Some(w.index() as u32),
        |w, r| w.push_pinned(r),
    )
}

/// Gives `runnable` to `push` if this thread is a worker of its runtime and `accepts` it;
/// otherwise gives it back.
///
/// The runnable stays outside the thread-local's closure: if the thread-local is already gone
/// (a wake from another thread-local's destructor), `try_with` does not run the closure, and
/// a runnable moved into it would be dropped, which drops its future on this thread.
fn hand_to_this_worker(
    runnable: Runnable,
    accepts: impl FnOnce(&Worker, &Runnable) -> bool,
    push: impl FnOnce(&Worker, Runnable),
) -> Option<Runnable> {
    let mut runnable = Some(runnable);
    let _ = CURRENT.try_with(|c| {
        if let (Some(Current::Worker(w)), Some(r)) = (&*c.borrow(), &runnable) {
            if Arc::ptr_eq(w.shared(), &r.meta().shared) && accepts(w, r) {
                push(w, runnable.take().expect("checked above"));
            }
        }
    });
    runnable
}

fn current_or_panic() -> Arc<Shared> {
    current_shared().unwrap_or_else(|| panic!("{NO_RUNTIME}"))
}

/// Runs `f` with the current runtime, borrowed: the hot spawn path, where a clone of the
/// `Arc` (an increment and a decrement of a count that every task of the runtime also
/// touches) showed in profiles. `f` may spawn and wake (they borrow the thread-local too).
fn with_current_or_panic<R>(f: impl FnOnce(&Arc<Shared>) -> R) -> R {
    CURRENT.with(|c| match &*c.borrow() {
        Some(Current::Worker(w)) => f(w.shared()),
        Some(Current::Guest(s)) => f(s),
        None => panic!("{NO_RUNTIME}"),
    })
}

// ----- routing shared by the free functions and RuntimeHandle ---------------------------------

/// Queues a callback cell on `shared`: locally if this thread is one of its workers.
pub(crate) fn submit_callback(shared: &Arc<Shared>, cell: Callback) {
    let cell = with_worker_of(shared, |w| match w {
        Some(w) => {
            w.push_local(Job::from(cell));
            None
        }
        None => Some(cell),
    });
    if let Some(cell) = cell {
        shared.push_remote(Job::from(cell));
    }
}

/// Schedules a callback cell at `when` on this worker's heap, or on a heap chosen round-robin.
pub(crate) fn submit_timer(shared: &Arc<Shared>, when: Instant, cell: Callback) -> TimerHandle {
    let target = with_worker_of(shared, |w| w.map(Worker::index))
        .unwrap_or_else(|| shared.remote_home_worker());
    let queue = shared.workers[target].timers.clone();
    shared.add_timer(target, when, TimerAction::Callback(cell.clone()));
    TimerHandle { cell, when, queue }
}

/// The worker whose timer heap and reactor this thread should use: itself if it is a worker
/// of `shared`, else one chosen round-robin.
pub(crate) fn home_worker(shared: &Arc<Shared>) -> usize {
    with_worker_of(shared, |w| w.map(Worker::index)).unwrap_or_else(|| shared.remote_home_worker())
}

// ----- the free functions --------------------------------------------------------------------

/// Spawns a future on the current runtime; it may run on any worker.
///
/// Returns a [`Task`] that resolves to the future's output. Dropping the `Task` detaches the
/// task: it keeps running.
///
/// # Panics
///
/// Panics with "no eddy runtime on this thread" when called outside a runtime (not on a
/// worker, not inside `block_on`). Use [`RuntimeHandle::spawn`](crate::RuntimeHandle::spawn)
/// from other threads.
///
/// # Examples
///
/// ```
/// let rt = eddy::Runtime::new()?;
/// let v = rt.block_on(async { eddy::spawn(async { 6 * 7 }).await.unwrap() });
/// assert_eq!(v, 42);
/// # Ok::<(), std::io::Error>(())
/// ```
#[track_caller]
pub fn spawn<F>(future: F) -> Task<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let location = Location::caller();
    with_current_or_panic(|shared| task::spawn_stealable(shared, future, location))
}

/// Spawns a `!Send` future pinned to the current worker: it is never stolen, and wakes from
/// any thread are routed back to this worker.
///
/// # Panics
///
/// Panics if the current thread is not a worker of an eddy runtime (a `block_on` thread is
/// not a worker: spawn a task first and call `spawn_local` from inside it).
///
/// # Examples
///
/// ```
/// use std::rc::Rc;
///
/// let rt = eddy::Runtime::new()?;
/// let n = rt.block_on(async {
///     eddy::spawn(async {
///         let shared = Rc::new(5); // !Send
///         let local = eddy::spawn_local(async move { *shared + 1 });
///         local.await.unwrap()
///     })
///     .await
///     .unwrap()
/// });
/// assert_eq!(n, 6);
/// # Ok::<(), std::io::Error>(())
/// ```
#[track_caller]
pub fn spawn_local<F>(future: F) -> Task<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    spawn_local_named(future, Location::caller(), None)
}

pub(crate) fn spawn_local_named<F>(
    future: F,
    location: &'static Location<'static>,
    name: Option<String>,
) -> Task<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let (shared, index) = CURRENT.with(|c| match &*c.borrow() {
        Some(Current::Worker(w)) => (w.shared().clone(), w.index()),
        _ => {
            panic!("spawn_local must be called on an eddy worker thread (from a task or callback)")
        }
    });
    task::spawn_pinned(&shared, index, future, location, name)
}

/// Schedules `f` to run in the next cycle of the current worker's loop (asyncio's
/// `call_soon`). Callbacks are stealable: an idle sibling may run it.
///
/// # Panics
///
/// Panics with "no eddy runtime on this thread" outside a runtime; use
/// [`RuntimeHandle::call_soon_threadsafe`](crate::RuntimeHandle::call_soon_threadsafe) there.
///
/// # Examples
///
/// ```
/// let rt = eddy::Runtime::new()?;
/// let (tx, rx) = std::sync::mpsc::channel();
/// rt.block_on(async move {
///     eddy::call_soon(move || tx.send("ran").unwrap());
/// });
/// assert_eq!(rx.recv().unwrap(), "ran");
/// # Ok::<(), std::io::Error>(())
/// ```
#[track_caller]
pub fn call_soon<F>(f: F) -> Handle
where
    F: FnOnce() + Send + 'static,
{
    let location = Location::caller();
    let shared = current_or_panic();
    let cell: Callback = Callback::new(f, location);
    submit_callback(&shared, cell.clone());
    Handle { cell }
}

/// Schedules `f` to run after `delay` (asyncio's `call_later`). Huge delays never fire;
/// `Duration::ZERO` runs in the next cycle.
///
/// # Panics
///
/// Panics with "no eddy runtime on this thread" outside a runtime.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let rt = eddy::Runtime::new()?;
/// let (tx, rx) = std::sync::mpsc::channel();
/// rt.block_on(async move {
///     eddy::call_later(Duration::from_millis(5), move || tx.send(()).unwrap());
/// });
/// rx.recv().unwrap();
/// # Ok::<(), std::io::Error>(())
/// ```
#[track_caller]
pub fn call_later<F>(delay: Duration, f: F) -> TimerHandle
where
    F: FnOnce() + Send + 'static,
{
    let shared = current_or_panic();
    let when = shared.clock.deadline_after(delay);
    submit_timer(&shared, when, Callback::new(f, Location::caller()))
}

/// Schedules `f` to run at `when` (asyncio's `call_at`). A deadline in the past runs in the
/// next cycle.
///
/// # Panics
///
/// Panics with "no eddy runtime on this thread" outside a runtime.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let rt = eddy::Runtime::new()?;
/// rt.block_on(async {
///     let t = eddy::call_at(eddy::time() + Duration::from_secs(60), || unreachable!());
///     t.cancel();
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
#[track_caller]
pub fn call_at<F>(when: Instant, f: F) -> TimerHandle
where
    F: FnOnce() + Send + 'static,
{
    call_at_inner(when, f, Location::caller())
}

fn call_at_inner<F>(when: Instant, f: F, location: &'static Location<'static>) -> TimerHandle
where
    F: FnOnce() + Send + 'static,
{
    let shared = current_or_panic();
    submit_timer(&shared, when, Callback::new(f, location))
}

/// The loop's clock (asyncio's `loop.time()`): a monotonic [`Instant`], the scale of
/// [`call_at`] and [`TimerHandle::when`]. On a runtime built with
/// [`Builder::start_paused`](crate::Builder::start_paused) this is the paused clock; outside
/// a runtime it is `Instant::now()`.
///
/// # Examples
///
/// ```
/// let a = eddy::time();
/// let b = eddy::time();
/// assert!(b >= a);
/// ```
pub fn time() -> Instant {
    match current_shared() {
        Some(shared) => shared.clock.now(),
        None => Instant::now(),
    }
}
