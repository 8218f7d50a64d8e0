//! Context variables: asyncio's `contextvars`, for tasks and callbacks.
//!
//! A *context* is an immutable map from variables to values, shared by `Arc`. Every thread
//! has a current context (empty until a variable is set). The runtime carries contexts the
//! way asyncio does:
//!
//! * a callback (`call_soon`, `call_later`, `call_soon_threadsafe`, ...) captures the current
//!   context when it is *scheduled* (on whatever thread schedules it) and runs inside it;
//! * a task captures its spawner's context when it is spawned, and each poll runs inside
//!   the task's own copy, so `set` inside a task stays in that task;
//! * changes made inside a callback or task are invisible outside it.
//!
//! Capturing is an `Arc` clone (nothing at all for an empty context), so spawning with a
//! context costs one atomic increment; `set` copies the map (copy-on-write), which is cheap
//! for the handful of variables programs use.
//!
//! # Releasing task contexts in batches
//!
//! The matching decrement, when a task finishes, is the expensive half: the tasks of one
//! spawner finish on every worker, so a decrement at each finish would take the counter's
//! cache line from the spawner, which increments it at every spawn, and the line would move
//! between CPUs all the time (docs/benchmarks.md, "context_spawn"). A worker therefore keeps
//! the contexts of the tasks that finish in a cycle and releases them when the cycle ends
//! ([`release_later`], [`release_deferred`]): consecutive releases of the same context
//! become a count, paid in one burst on a cache line the worker then holds. Only the last
//! context is kept: releasing a different one pays for the one held (so tasks of two
//! spawners finishing alternately gain nothing). The values in a context may thus be dropped
//! up to one `_run_once` cycle later than the last task that used it, on the same worker,
//! and after that task's result was published (to its `Task` and so to a `block_on`).
//! Threads that are not workers release at once.

use std::any::Any;
use std::cell::RefCell;
use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

type Value = Arc<dyn Any + Send + Sync>;

/// An immutable variable → value map, sorted by variable id.
#[derive(Default)]
pub(crate) struct ContextData {
    entries: Vec<(u64, Value)>,
}

impl ContextData {
    fn get(&self, id: u64) -> Option<&Value> {
        self.entries
            .binary_search_by_key(&id, |(k, _)| *k)
            .ok()
            .map(|i| &self.entries[i].1)
    }

    /// A copy with `id` set to `value` (or removed).
    fn with(&self, id: u64, value: Option<Value>) -> ContextData {
        let mut entries = self.entries.clone();
        match (entries.binary_search_by_key(&id, |(k, _)| *k), value) {
            (Ok(i), Some(v)) => entries[i].1 = v,
            (Ok(i), None) => {
                entries.remove(i);
            }
            (Err(i), Some(v)) => entries.insert(i, (id, v)),
            (Err(_), None) => {}
        }
        ContextData { entries }
    }
}

/// A captured context; `None` is the empty context.
pub(crate) type Context = Option<Arc<ContextData>>;

thread_local! {
    static CURRENT: RefCell<Context> = const { RefCell::new(None) };
}

/// The current context, to carry into a callback or task.
#[inline]
pub(crate) fn capture() -> Context {
    CURRENT.with(|c| c.borrow().clone())
}

/// Makes `ctx` current and returns the previous one (restore it with another `swap`).
#[inline]
pub(crate) fn swap(ctx: Context) -> Context {
    CURRENT.with(|c| c.replace(ctx))
}

/// Runs `f` inside `ctx`, then restores the previous context.
pub(crate) fn run_in<R>(ctx: &Context, f: impl FnOnce() -> R) -> R {
    struct Restore(Context);
    impl Drop for Restore {
        fn drop(&mut self) {
            swap(self.0.take());
        }
    }
    let _restore = Restore(swap(ctx.clone()));
    f()
}

/// A worker's deferred releases (see "Releasing task contexts in batches").
struct Deferred {
    /// Whether this thread defers (a worker between its first cycle and its exit).
    on: bool,
    /// The context released last, still held...
    held: Context,
    /// ...and how many more references to it were released since (forgotten `Arc`s).
    extra: usize,
}

impl Drop for Deferred {
    /// A thread that ends still holding deferred releases (a worker that died in the middle
    /// of a cycle) gives them up here; without this, the `extra` references would leak.
    fn drop(&mut self) {
        let (held, extra) = (self.held.take(), std::mem::take(&mut self.extra));
        // A panic out of a thread-local destructor aborts the process: a context value
        // whose destructor panics must not do that.
        let released =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| release(held, extra)));
        if released.is_err() {
            tracing::error!("eddy: a context value's destructor panicked at thread exit");
        }
    }
}

thread_local! {
    static DEFERRED: RefCell<Deferred> = const {
        RefCell::new(Deferred {
            on: false,
            held: None,
            extra: 0,
        })
    };
}

/// Drops `held` and `extra` more references to it.
fn release(held: Context, extra: usize) {
    if let Some(held) = held {
        let ptr = Arc::as_ptr(&held);
        for _ in 0..extra {
            // SAFETY: each of the `extra` references was an `Arc` of this same allocation
            // that `release_later` forgot, so its strong count includes them, and `held`
            // keeps one more until it is dropped below: this gives up a reference we own, and
            // never frees the allocation.
            unsafe { Arc::decrement_strong_count(ptr) };
        }
        drop(held);
    }
}

/// Makes this thread defer task-context releases to [`release_deferred`] (`true`: a worker
/// starting) or release at once (`false`: a worker exiting, which then calls
/// [`release_deferred`] for what it still holds).
pub(crate) fn defer_releases(on: bool) {
    DEFERRED.with(|d| d.borrow_mut().on = on);
}

/// Gives up a finished task's context: at the end of this worker's cycle, or at once on
/// other threads.
#[inline]
pub(crate) fn release_later(ctx: Context) {
    let Some(arc) = ctx else { return };
    // `try_with`: during thread-local destruction (a value dropped late by another local),
    // release at once.
    let mut arc = Some(arc);
    let replaced = DEFERRED.try_with(|d| {
        let arc = arc.take().expect("taken once");
        let mut d = d.borrow_mut();
        if !d.on {
            return Some((Some(arc), 0));
        }
        match &d.held {
            Some(held) if Arc::ptr_eq(held, &arc) => {
                // Kept as a count; the reference is given up in `release`.
                std::mem::forget(arc);
                d.extra += 1;
                None
            }
            _ => {
                let extra = std::mem::take(&mut d.extra);
                Some((d.held.replace(arc), extra))
            }
        }
    });
    // Outside the borrow: dropping a context runs its values' destructors, which may use
    // context variables or finish other tasks (and so come back here).
    match replaced {
        Ok(Some((held, extra))) => release(held, extra),
        Ok(None) => {}
        Err(_) => drop(arc),
    }
}

/// Releases what [`release_later`] deferred on this thread (a worker, at the end of a cycle),
/// including what the destructors run meanwhile handed back to it.
pub(crate) fn release_deferred() {
    loop {
        let (held, extra) = DEFERRED.with(|d| {
            let mut d = d.borrow_mut();
            (d.held.take(), std::mem::take(&mut d.extra))
        });
        if held.is_none() {
            return;
        }
        release(held, extra);
    }
}

static NEXT_VAR: AtomicU64 = AtomicU64::new(1);

/// A context variable (asyncio's `contextvars.ContextVar`): a value per context, with a
/// default.
///
/// # Examples
///
/// ```
/// use eddy::ContextVar;
///
/// static REQUEST_ID: std::sync::LazyLock<ContextVar<u64>> =
///     std::sync::LazyLock::new(|| ContextVar::new(0));
///
/// let rt = eddy::Runtime::new()?;
/// rt.block_on(async {
///     REQUEST_ID.set(7);
///     // A task starts with a copy of its spawner's context...
///     let seen = eddy::spawn(async {
///         let inherited = REQUEST_ID.get();
///         REQUEST_ID.set(8); // ...and its changes stay inside it.
///         inherited
///     })
///     .await
///     .unwrap();
///     assert_eq!(seen, 7);
///     assert_eq!(REQUEST_ID.get(), 7);
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct ContextVar<T> {
    id: u64,
    default: T,
}

impl<T> fmt::Debug for ContextVar<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContextVar").field("id", &self.id).finish()
    }
}

/// What [`ContextVar::set`] returns: [`ContextVar::reset`] with it restores the value the
/// variable had before that `set`.
pub struct Token<T> {
    var: u64,
    previous: Option<Value>,
    _marker: PhantomData<fn() -> T>,
}

impl<T> fmt::Debug for Token<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token").field("var", &self.var).finish()
    }
}

impl<T: Clone + Send + Sync + 'static> ContextVar<T> {
    /// A new variable with `default` as its value in every context that did not set it.
    pub fn new(default: T) -> Self {
        ContextVar {
            id: NEXT_VAR.fetch_add(1, Ordering::Relaxed),
            default,
        }
    }

    /// The value in the current context (the default if it was never set here).
    pub fn get(&self) -> T {
        self.with(T::clone)
    }

    /// Calls `f` with a reference to the current value, without cloning it.
    pub fn with<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        CURRENT.with(|c| {
            let ctx = c.borrow();
            match ctx.as_ref().and_then(|d| d.get(self.id)) {
                Some(v) => f(v
                    .downcast_ref::<T>()
                    .expect("context values are keyed by type")),
                None => f(&self.default),
            }
        })
    }

    /// Sets the value in the current context. Returns a token for [`reset`](ContextVar::reset).
    pub fn set(&self, value: T) -> Token<T> {
        let previous = self.replace(Some(Arc::new(value)));
        Token {
            var: self.id,
            previous,
            _marker: PhantomData,
        }
    }

    /// Restores the value the variable had before the `set` that returned `token`.
    ///
    /// # Panics
    ///
    /// Panics if `token` came from another variable.
    pub fn reset(&self, token: Token<T>) {
        assert_eq!(
            token.var, self.id,
            "ContextVar::reset: the token was created by a different ContextVar"
        );
        self.replace(token.previous);
    }

    fn replace(&self, value: Option<Value>) -> Option<Value> {
        CURRENT.with(|c| {
            let mut ctx = c.borrow_mut();
            let data = ctx.get_or_insert_with(Default::default);
            let previous = data.get(self.id).cloned();
            *data = Arc::new(data.with(self.id, value));
            previous
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread that exits with releases still deferred (it never reached the end of its
    /// cycle) gives up every reference it deferred, the counted ones included.
    #[test]
    fn deferred_releases_are_given_up_when_the_thread_exits() {
        let ctx = Arc::new(ContextData::default());
        let theirs = ctx.clone();
        std::thread::spawn(move || {
            defer_releases(true);
            // Three references to one context: one held, two counted.
            for _ in 0..3 {
                release_later(Some(theirs.clone()));
            }
            drop(theirs);
        })
        .join()
        .unwrap();
        assert_eq!(Arc::strong_count(&ctx), 1, "deferred references leaked");
    }

    #[test]
    fn set_get_reset() {
        let v = ContextVar::new(1u32);
        let w = ContextVar::new("w");
        assert_eq!(v.get(), 1);
        let t1 = v.set(2);
        let t2 = v.set(3);
        w.set("x");
        assert_eq!((v.get(), w.get()), (3, "x"));
        v.reset(t2);
        assert_eq!(v.get(), 2);
        v.reset(t1);
        assert_eq!(v.get(), 1);
        assert_eq!(w.get(), "x");
    }

    #[test]
    fn captured_contexts_are_snapshots() {
        let v = ContextVar::new(0u32);
        v.set(5);
        let snap = capture();
        v.set(6);
        assert_eq!(run_in(&snap, || v.get()), 5);
        assert_eq!(v.get(), 6);
        let inner = run_in(&snap, || {
            v.set(9);
            v.get()
        });
        assert_eq!(inner, 9);
        assert_eq!(
            run_in(&snap, || v.get()),
            5,
            "changes inside run_in do not leak into the snapshot"
        );
    }

    /// A context holding one value, and a handle to watch its count.
    fn context_with_value() -> (Context, Arc<ContextData>) {
        let data = Arc::new(ContextData::default().with(u64::MAX, Some(Arc::new(1u8))));
        (Some(data.clone()), data)
    }

    #[test]
    fn a_thread_that_does_not_defer_releases_at_once() {
        let (ctx, watch) = context_with_value();
        assert_eq!(Arc::strong_count(&watch), 2);
        release_later(ctx);
        assert_eq!(Arc::strong_count(&watch), 1);
    }

    #[test]
    fn deferred_releases_of_one_context_are_paid_at_the_end_of_the_cycle() {
        defer_releases(true);
        let (first, watch) = context_with_value();
        for _ in 0..4 {
            release_later(first.clone());
        }
        release_later(first);
        assert_eq!(Arc::strong_count(&watch), 6, "five releases deferred");
        release_deferred();
        assert_eq!(Arc::strong_count(&watch), 1, "all five paid, none twice");

        // A different context pays for the one held before it.
        let (a, watch_a) = context_with_value();
        let (b, watch_b) = context_with_value();
        release_later(a.clone());
        release_later(a);
        release_later(b);
        assert_eq!(Arc::strong_count(&watch_a), 1);
        assert_eq!(Arc::strong_count(&watch_b), 2);
        defer_releases(false);
        assert_eq!(
            Arc::strong_count(&watch_b),
            2,
            "turning deferral off keeps what is held"
        );
        release_deferred();
        assert_eq!(Arc::strong_count(&watch_b), 1);
        release_later(Some(watch_b.clone()));
        assert_eq!(
            Arc::strong_count(&watch_b),
            1,
            "with deferral off, released at once"
        );
    }

    /// A value whose destructor releases another task's context (as finishing a task inline
    /// would): the release it makes is paid too, not left held, and it does not find the
    /// thread-local borrowed.
    #[test]
    fn a_release_made_by_a_released_value_is_paid_in_the_same_call() {
        struct ReleasesOnDrop(std::sync::Mutex<Context>);
        impl Drop for ReleasesOnDrop {
            fn drop(&mut self) {
                release_later(self.0.lock().unwrap().take());
            }
        }
        let (inner, watch_inner) = context_with_value();
        let value: Value = Arc::new(ReleasesOnDrop(std::sync::Mutex::new(inner)));
        let outer = Some(Arc::new(ContextData::default().with(u64::MAX, Some(value))));
        defer_releases(true);
        release_later(outer);
        assert_eq!(Arc::strong_count(&watch_inner), 2, "still inside `outer`");
        release_deferred();
        assert_eq!(
            Arc::strong_count(&watch_inner),
            1,
            "released while `outer` was, and paid before `release_deferred` returned"
        );
        defer_releases(false);
    }

    #[test]
    #[should_panic(expected = "different ContextVar")]
    fn reset_with_a_foreign_token_panics() {
        let a = ContextVar::new(0u8);
        let b = ContextVar::new(0u8);
        let t = a.set(1);
        b.reset(t);
    }
}
