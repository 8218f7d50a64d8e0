//! The [`Task`] handle.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::task::error::TaskError;
use crate::task::id::TaskId;
use crate::task::raw::JoinHandle;

/// A handle to a spawned task: a future that resolves to the task's result.
///
/// * Awaiting it gives `Ok(value)`, or `Err(TaskError::Panicked)` if the future panicked, or
///   `Err(TaskError::Cancelled)` if it was cancelled or the runtime shut down first.
/// * [`cancel`](Task::cancel) asks the task to stop: its future is dropped the next time it
///   would be polled.
/// * Dropping the handle *detaches* the task: it keeps running, as in asyncio and tokio.
///
/// # Panics
///
/// Polling a `Task` again after it returned `Ready` panics. A task that awaits its own
/// `Task` panics with "Task cannot await on itself" (asyncio raises the same), which ends
/// that task as [`TaskError::Panicked`] instead of leaving it waiting for itself forever.
///
/// # Examples
///
/// ```
/// let rt = eddy::Runtime::new()?;
/// let sum = rt.block_on(async {
///     let a = eddy::spawn(async { 1 + 2 });
///     let b = eddy::spawn(async { 3 + 4 });
///     a.await.unwrap() + b.await.unwrap()
/// });
/// assert_eq!(sum, 10);
/// # Ok::<(), std::io::Error>(())
/// ```
#[must_use = "dropping a Task detaches it; use `let _ = ...` to make that explicit"]
pub struct Task<T> {
    /// `None` once the output was taken. Dropping the join handle detaches the task.
    inner: Option<JoinHandle<T>>,
    id: TaskId,
}

impl<T> Task<T> {
    pub(crate) fn new(inner: JoinHandle<T>) -> Self {
        let id = inner.meta().id;
        Task {
            inner: Some(inner),
            id,
        }
    }

    /// Cancels the task: its future is dropped at its next scheduling point (at once if it
    /// is idle) and awaiting this handle gives [`TaskError::Cancelled`]. Does nothing if the
    /// task already finished.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = eddy::Runtime::new()?;
    /// let res = rt.block_on(async {
    ///     let t = eddy::spawn(std::future::pending::<()>());
    ///     t.cancel();
    ///     t.await
    /// });
    /// assert!(res.unwrap_err().is_cancelled());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn cancel(&self) {
        if let Some(inner) = &self.inner {
            inner.cancel();
        }
    }

    /// True once the task has produced its result (or was cancelled and has stopped).
    pub fn is_finished(&self) -> bool {
        self.inner.as_ref().is_none_or(|t| t.is_finished())
    }

    /// The task's id.
    pub fn id(&self) -> TaskId {
        self.id
    }
}

impl<T> Future for Task<T> {
    type Output = Result<T, TaskError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self
            .inner
            .as_mut()
            .expect("eddy::Task polled after it returned Ready");
        match inner.poll_join(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(()) => {
                let handle = self.inner.take().expect("checked above");
                let mut out = handle.into_output();
                if let Err(TaskError::Panicked(p)) = &mut out {
                    p.retrieve();
                }
                Poll::Ready(out)
            }
        }
    }
}

impl<T> fmt::Debug for Task<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Task")
            .field("id", &self.id)
            .field("finished", &self.is_finished())
            .finish()
    }
}
