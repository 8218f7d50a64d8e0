//! [`Builder`]: spawning a task with options (a name, for dumps).

use std::future::Future;
use std::panic::Location;

use crate::task::handle::Task;

/// Spawns tasks with options; today, a name that shows in
/// [`Runtime::dump_tasks`](crate::Runtime::dump_tasks).
///
/// # Examples
///
/// ```
/// let rt = eddy::Runtime::new()?;
/// rt.block_on(async {
///     let t = eddy::task::Builder::new()
///         .name("ticker")
///         .spawn(std::future::pending::<()>());
///     let dump = eddy::RuntimeHandle::current().dump_tasks();
///     assert!(dump.iter().any(|i| i.name.as_deref() == Some("ticker")));
///     t.cancel();
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Default, Clone)]
pub struct Builder {
    name: Option<String>,
}

impl Builder {
    /// A builder with no options set.
    pub fn new() -> Self {
        Builder::default()
    }

    /// Names the task.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Spawns `future` on the current runtime, like [`eddy::spawn`](crate::spawn).
    ///
    /// # Panics
    ///
    /// Outside a runtime ("no eddy runtime on this thread").
    #[track_caller]
    pub fn spawn<F>(self, future: F) -> Task<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let shared = crate::context::current_shared()
            .unwrap_or_else(|| panic!("no eddy runtime on this thread: spawn needs one"));
        crate::worker::schedule::spawn_stealable(&shared, future, Location::caller(), self.name)
    }

    /// Spawns `future` on the runtime of `handle`, from any thread, like
    /// [`RuntimeHandle::spawn`](crate::RuntimeHandle::spawn).
    #[track_caller]
    pub fn spawn_on<F>(self, handle: &crate::RuntimeHandle, future: F) -> Task<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        crate::worker::schedule::spawn_stealable(
            handle.shared(),
            future,
            Location::caller(),
            self.name,
        )
    }

    /// Spawns a `!Send` future pinned to the current worker, like
    /// [`eddy::spawn_local`](crate::spawn_local).
    ///
    /// # Panics
    ///
    /// When the current thread is not an eddy worker.
    #[track_caller]
    pub fn spawn_local<F>(self, future: F) -> Task<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        crate::current::spawn_local_named(future, Location::caller(), self.name)
    }
}
