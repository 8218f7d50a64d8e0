//! The free functions (`eddy::spawn`, `eddy::call_soon`, `eddy::time`, ...) that act on the
//! runtime of the calling thread: asyncio's methods of "the running loop".

use std::future::Future;
use std::panic::Location;
use std::time::{Duration, Instant};

use crate::callback::{Callback, Handle, TimerHandle};
use crate::context::{self, current_or_panic, current_shared, with_current_or_panic};
use crate::task::cell;
use crate::task::handle::Task;
use crate::worker::schedule::{spawn_stealable, submit_callback, submit_timer, Pinned};

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
    with_current_or_panic(|shared| spawn_stealable(shared, future, location, None))
}

/// Spawns a `!Send` future pinned to the current worker: it is never stolen, and wakes from
/// any thread are routed back to this worker.
///
/// # Panics
///
/// Panics if the current thread is not a worker of an eddy runtime. A thread inside
/// [`Runtime::block_on`](crate::Runtime::block_on) is not a worker (it only waits for its one
/// future; asyncio's loop thread, which runs everything, has no counterpart here): spawn a
/// task with [`spawn`] and call `spawn_local` from inside it, as below. The panic message
/// says so.
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

/// The panic of `spawn_local` on a thread of no runtime.
const SPAWN_LOCAL_OUTSIDE: &str = "no eddy runtime on this thread: spawn_local must be called \
     on an eddy worker thread (from a task or callback)";

/// The panic of `spawn_local` on a thread that serves a runtime without being one of its
/// workers (inside `block_on`, or a `spawn_blocking` job), with what to do instead.
const SPAWN_LOCAL_IN_BLOCK_ON: &str = "spawn_local must be called on an eddy worker thread, \
     and this thread is not a worker: it is inside Runtime::block_on (waiting for its one \
     future) or runs a spawn_blocking job. Spawn a task with eddy::spawn and call \
     spawn_local inside it, creating the !Send values there too: eddy::spawn(async { let rc \
     = Rc::new(..); eddy::spawn_local(async move { .. }).await })";

pub(crate) fn spawn_local_named<F>(
    future: F,
    location: &'static Location<'static>,
    name: Option<String>,
) -> Task<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let Some((shared, index)) = context::current_worker() else {
        if context::current_shared().is_some() {
            panic!("{SPAWN_LOCAL_IN_BLOCK_ON}")
        }
        panic!("{SPAWN_LOCAL_OUTSIDE}")
    };
    cell::spawn_pinned_on::<F, Pinned>(&shared, index, future, location, name)
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
