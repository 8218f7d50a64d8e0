//! The user's thread start and stop hooks ([`Builder::on_thread_start`] and
//! [`Builder::on_thread_stop`]), run on every thread the runtime starts: workers, spares and
//! blocking threads.
//!
//! [`Builder::on_thread_start`]: crate::Builder::on_thread_start
//! [`Builder::on_thread_stop`]: crate::Builder::on_thread_stop

use std::fmt;
use std::sync::Arc;

use crate::exception::ExceptionHandler;

/// Callbacks run on every thread the runtime starts (workers and blocking threads).
#[derive(Clone, Default)]
pub(crate) struct ThreadHooks {
    pub(crate) on_start: Option<Arc<dyn Fn() + Send + Sync>>,
    pub(crate) on_stop: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl ThreadHooks {
    /// Runs `body` between the start and stop hooks. A hook that panics is reported to
    /// `handler`; the thread goes on (or ends) as if it had returned.
    pub(crate) fn wrap(&self, handler: &ExceptionHandler, body: impl FnOnce()) {
        if let Some(f) = &self.on_start {
            handler.contain("Exception in the on_thread_start hook", || f());
        }
        struct Stop<'a>(&'a ThreadHooks, &'a ExceptionHandler);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                if let Some(f) = &self.0.on_stop {
                    self.1
                        .contain("Exception in the on_thread_stop hook", || f());
                }
            }
        }
        let _stop = Stop(self, handler);
        body();
    }
}

impl fmt::Debug for ThreadHooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadHooks")
            .field("on_start", &self.on_start.is_some())
            .field("on_stop", &self.on_stop.is_some())
            .finish()
    }
}
