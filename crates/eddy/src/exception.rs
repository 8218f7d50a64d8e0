//! The runtime's exception handler: where panics in callbacks and tasks go.
//!
//! asyncio never lets an exception raised by a callback escape the loop: it hands it to
//! `loop.call_exception_handler(context)` with a context map. eddy does the same with
//! [`ExceptionContext`]. A panic is caught at the job boundary by the worker (callbacks) or by
//! the task cell (tasks), turned into a context and given to the handler set with
//! [`Builder::exception_handler`](crate::Builder::exception_handler); the default handler logs
//! it through `tracing` at error level.
//!
//! Invariant: a handler that panics itself is caught too and logged, so no panic of any kind
//! can unwind through a worker's loop.

use std::any::Any;
use std::cell::RefCell;
use std::fmt;
use std::panic::{self, AssertUnwindSafe, Location};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::task::id::TaskId;

/// The type of a user exception handler.
pub(crate) type HandlerFn = dyn Fn(&ExceptionContext) + Send + Sync + 'static;

/// What the runtime knows about an error it could not hand to anyone else.
///
/// This is the Rust shape of asyncio's exception-handler context map: a message, the panic
/// text, the task involved (if any) and the place in the source where the failing callback or
/// task was scheduled.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let (tx, reports) = std::sync::mpsc::channel();
/// let rt = eddy::Builder::new()
///     .workers(1)
///     .exception_handler(move |ctx: &eddy::ExceptionContext| {
///         let _ = tx.send(ctx.panic_message().unwrap_or("").to_string());
///     })
///     .build()?;
/// rt.block_on(async {
///     eddy::call_soon(|| panic!("boom"));
/// });
/// assert_eq!(reports.recv_timeout(Duration::from_secs(60))?, "boom");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct ExceptionContext {
    message: String,
    panic_message: Option<String>,
    task_id: Option<TaskId>,
    location: Option<&'static Location<'static>>,
}

impl ExceptionContext {
    /// A context with only a message: what a library or application reports through
    /// [`RuntimeHandle::call_exception_handler`](crate::RuntimeHandle::call_exception_handler).
    pub fn new(message: impl Into<String>) -> Self {
        ExceptionContext {
            message: message.into(),
            panic_message: None,
            task_id: None,
            location: None,
        }
    }

    pub(crate) fn with_panic(mut self, payload: &(dyn Any + Send)) -> Self {
        self.panic_message = Some(panic_message(payload));
        self
    }

    /// Adds the text of a panic (or of any error) behind the message.
    pub fn with_panic_message(mut self, text: impl Into<String>) -> Self {
        self.panic_message = Some(text.into());
        self
    }

    /// Names the task involved.
    pub fn with_task(mut self, id: TaskId) -> Self {
        self.task_id = Some(id);
        self
    }

    /// Names the place in the source the report is about.
    pub fn with_location(mut self, location: &'static Location<'static>) -> Self {
        self.location = Some(location);
        self
    }

    /// What went wrong, in asyncio's words (for example `"Exception in callback"` or
    /// `"Task exception was never retrieved"`).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The panic's message, when the error was a panic with a string payload.
    pub fn panic_message(&self) -> Option<&str> {
        self.panic_message.as_deref()
    }

    /// The task that failed, when the error came from a task.
    pub fn task_id(&self) -> Option<TaskId> {
        self.task_id
    }

    /// Where the failing callback or task was scheduled (`call_soon`, `spawn`, ...).
    pub fn location(&self) -> Option<&'static Location<'static>> {
        self.location
    }
}

impl fmt::Display for ExceptionContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(id) = self.task_id {
            write!(f, " ({id})")?;
        }
        if let Some(loc) = self.location {
            write!(f, ", scheduled at {loc}")?;
        }
        if let Some(msg) = &self.panic_message {
            write!(f, ": {msg}")?;
        }
        Ok(())
    }
}

/// Turns a panic payload into text: `&str` and `String` payloads as they are, others as a
/// placeholder (what std's own panic hook prints too).
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "Box<dyn Any>".to_string()
    }
}

/// Drops a caught panic's payload without letting a panicking destructor of the payload
/// unwind any further (a payload built with `panic_any` may have one). A second payload out
/// of that destructor is leaked: dropping it could panic again.
pub(crate) fn drop_payload(payload: Box<dyn Any + Send>) {
    if let Err(again) = panic::catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(again);
    }
}

/// The exception handler of one runtime: the user's, or the default that logs. Clones share
/// one slot, so [`set`](ExceptionHandler::set) reaches every thread of the runtime at once.
#[derive(Clone)]
pub(crate) struct ExceptionHandler {
    user: Arc<RwLock<Option<Arc<HandlerFn>>>>,
}

impl ExceptionHandler {
    pub(crate) fn new(user: Option<Arc<HandlerFn>>) -> Self {
        ExceptionHandler {
            user: Arc::new(RwLock::new(user)),
        }
    }

    /// Replaces the user's handler (`None`: back to the default). A call already running
    /// finishes with the handler it started with.
    pub(crate) fn set(&self, user: Option<Arc<HandlerFn>>) {
        // The old handler is dropped after the lock is released: its destructor is user code.
        let old = std::mem::replace(&mut *self.user.write(), user);
        if let Some(old) = old {
            contain_here("dropping the replaced exception handler", move || drop(old));
        }
    }

    /// Calls the handler. Never unwinds: a panicking handler is logged and forgotten.
    pub(crate) fn call(&self, ctx: &ExceptionContext) {
        // Cloned out so that the handler runs without the lock (it may set a new handler).
        let user = self.user.read().clone();
        match user {
            None => default_exception_handler(ctx),
            Some(user) => {
                if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| user(ctx))) {
                    tracing::error!(
                        "the exception handler panicked ({}) while handling: {ctx}",
                        panic_message(&*payload)
                    );
                    drop_payload(payload);
                }
                // The last reference to a replaced handler may be this one.
                contain_here("dropping the replaced exception handler", move || {
                    drop(user)
                });
            }
        }
    }
}

impl ExceptionHandler {
    /// Runs `f`, user code that the runtime calls for its own reasons (a waker, a destructor,
    /// a thread hook). A panic goes to the handler, with `what` as the message, and no
    /// further. True if `f` returned.
    pub(crate) fn contain(&self, what: &str, f: impl FnOnce()) -> bool {
        match panic::catch_unwind(AssertUnwindSafe(f)) {
            Ok(()) => true,
            Err(payload) => {
                self.call(&ExceptionContext::new(what).with_panic(&*payload));
                drop_payload(payload);
                false
            }
        }
    }
}

thread_local! {
    /// The handler of the runtime this thread serves, while it serves one (set by
    /// `context` when a thread becomes a worker or enters `block_on`).
    static HERE: RefCell<Option<ExceptionHandler>> = const { RefCell::new(None) };
}

/// Records which runtime's handler [`contain_here`] uses on this thread (`None`: none);
/// returns the one recorded before.
pub(crate) fn serve_here(handler: Option<ExceptionHandler>) -> Option<ExceptionHandler> {
    // During the thread's destruction its locals may be gone: nothing to record then.
    HERE.try_with(|h| std::mem::replace(&mut *h.borrow_mut(), handler))
        .ok()
        .flatten()
}

impl ExceptionHandler {
    /// Runs `f` with this handler as the one [`contain_here`] reports to on this thread:
    /// for work a runtime does on a thread that is not its own (its shutdown, on the
    /// thread that drops it).
    pub(crate) fn serving<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Restore(Option<ExceptionHandler>);
        impl Drop for Restore {
            fn drop(&mut self) {
                serve_here(self.0.take());
            }
        }
        let _restore = Restore(serve_here(Some(self.clone())));
        f()
    }
}

/// [`ExceptionHandler::contain`] with the handler of the runtime this thread serves (a
/// worker, a blocking-pool or `block_on` thread), or the default handler on any other
/// thread: for user code run where no runtime is at hand, such as a destructor run by
/// whoever drops the last reference to a cell.
pub(crate) fn contain_here(what: &str, f: impl FnOnce()) -> bool {
    let Err(payload) = panic::catch_unwind(AssertUnwindSafe(f)) else {
        return true;
    };
    let ctx = ExceptionContext::new(what).with_panic(&*payload);
    let handler = HERE.try_with(|h| h.borrow().clone()).ok().flatten();
    match handler {
        Some(handler) => handler.call(&ctx),
        None => default_exception_handler(&ctx),
    }
    drop_payload(payload);
    false
}

impl fmt::Debug for ExceptionHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExceptionHandler")
            .field("custom", &self.user.read().is_some())
            .finish()
    }
}

/// What the runtime does with a report when no handler was set: logs it through `tracing` at
/// error level (asyncio's `loop.default_exception_handler`). A handler of your own can call it
/// for the reports it does not treat itself.
///
/// # Examples
///
/// ```
/// let rt = eddy::Builder::new()
///     .exception_handler(|ctx: &eddy::ExceptionContext| {
///         if ctx.panic_message() != Some("expected") {
///             eddy::default_exception_handler(ctx);
///         }
///     })
///     .build()?;
/// # drop(rt);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn default_exception_handler(ctx: &ExceptionContext) {
    tracing::error!(
        message = ctx.message(),
        task = ctx.task_id().map(|t| t.as_u64()),
        location = ctx.location().map(|l| l.to_string()),
        panic = ctx.panic_message(),
        "{ctx}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_text() {
        let a: Box<dyn Any + Send> = Box::new("static");
        let b: Box<dyn Any + Send> = Box::new(String::from("owned"));
        let c: Box<dyn Any + Send> = Box::new(7u32);
        assert_eq!(panic_message(&*a), "static");
        assert_eq!(panic_message(&*b), "owned");
        assert_eq!(panic_message(&*c), "Box<dyn Any>");
    }

    #[test]
    fn panicking_handler_is_contained() {
        let h = ExceptionHandler::new(Some(Arc::new(|_: &ExceptionContext| panic!("inner"))));
        h.call(&ExceptionContext::new("outer"));
    }

    #[test]
    fn display_names_everything() {
        let ctx = ExceptionContext::new("Exception in callback")
            .with_panic_message("boom")
            .with_location(Location::caller());
        let text = ctx.to_string();
        assert!(text.starts_with("Exception in callback, scheduled at "));
        assert!(text.ends_with(": boom"));
    }
}
