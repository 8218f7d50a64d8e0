//! "The current runtime": the thread-local that tells a thread which runtime it belongs to,
//! and, on a worker, which worker it is.
//!
//! A thread is in one of three states:
//!
//! * a **worker** of a runtime: submissions go straight to its own ready queue and timer
//!   heap, with no atomic read-modify-write on shared state (`worker::schedule`);
//! * a **guest**: a thread inside `Runtime::block_on` or `run_forever`; submissions go
//!   through the runtime's `Injector` and wake a worker, as from any foreign thread;
//! * **outside**: the free functions (`current`) panic with "no eddy runtime on this thread"
//!   (`RuntimeHandle::try_current` is the non-panicking check).
//!
//! Entering the worker or guest state while already in one of them panics with asyncio's
//! "this event loop is already running", because blocking a worker (or nesting `block_on`)
//! would stall every task that worker owns.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use crate::exception;
use crate::worker::shared::Shared;
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
pub(crate) fn with_worker_of<R>(shared: &Arc<Shared>, f: impl FnOnce(Option<&Worker>) -> R) -> R {
    CURRENT.with(|c| match &*c.borrow() {
        Some(Current::Worker(w)) if Arc::ptr_eq(w.shared(), shared) => f(Some(w)),
        _ => f(None),
    })
}

/// True if this thread is a worker of `shared`.
pub(crate) fn is_worker_of(shared: &Arc<Shared>) -> bool {
    with_worker_of(shared, |w| w.is_some())
}

/// Runs `f` with this thread's worker, if it is a worker of any runtime and the thread-local
/// still exists (a wake from another thread-local's destructor may come after it is gone).
pub(crate) fn try_with_worker(f: impl FnOnce(&Worker)) {
    let _ = CURRENT.try_with(|c| {
        if let Some(Current::Worker(w)) = &*c.borrow() {
            f(w);
        }
    });
}

/// The runtime and index of this thread's worker, if it is a worker.
pub(crate) fn current_worker() -> Option<(Arc<Shared>, usize)> {
    CURRENT.with(|c| match &*c.borrow() {
        Some(Current::Worker(w)) => Some((w.shared().clone(), w.index())),
        _ => None,
    })
}

pub(crate) fn current_or_panic() -> Arc<Shared> {
    current_shared().unwrap_or_else(|| panic!("{NO_RUNTIME}"))
}

/// Runs `f` with the current runtime, borrowed: the hot spawn path, where a clone of the
/// `Arc` would add an increment and a decrement of a count that every task of the runtime
/// also touches. `f` may spawn and wake (they borrow the thread-local too).
pub(crate) fn with_current_or_panic<R>(f: impl FnOnce(&Arc<Shared>) -> R) -> R {
    CURRENT.with(|c| match &*c.borrow() {
        Some(Current::Worker(w)) => f(w.shared()),
        Some(Current::Guest(s)) => f(s),
        None => panic!("{NO_RUNTIME}"),
    })
}
