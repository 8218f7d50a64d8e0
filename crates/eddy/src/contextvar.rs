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

    #[test]
    #[should_panic(expected = "different ContextVar")]
    fn reset_with_a_foreign_token_panics() {
        let a = ContextVar::new(0u8);
        let b = ContextVar::new(0u8);
        let t = a.set(1);
        b.reset(t);
    }
}
