//! Why awaiting a task can fail.

use std::any::Any;
use std::error::Error;
use std::fmt;
use std::panic::Location;

use crate::exception::{panic_message, ExceptionContext, ExceptionHandler};
use crate::task::id::TaskId;

/// The error of awaiting a [`Task`](crate::Task) that did not return a value.
///
/// # Examples
///
/// ```
/// let rt = eddy::Runtime::new()?;
/// let err = rt.block_on(async { eddy::spawn(async { panic!("oops") }).await }).unwrap_err();
/// match err {
///     eddy::TaskError::Panicked(p) => assert_eq!(p.message(), "oops"),
///     other => panic!("{other}"),
/// }
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub enum TaskError {
    /// The task was cancelled with [`Task::cancel`](crate::Task::cancel), or the runtime shut
    /// down before it finished.
    Cancelled,
    /// The task's future panicked.
    Panicked(TaskPanic),
}

impl TaskError {
    /// True for [`TaskError::Cancelled`].
    pub fn is_cancelled(&self) -> bool {
        matches!(self, TaskError::Cancelled)
    }

    /// True for [`TaskError::Panicked`].
    pub fn is_panic(&self) -> bool {
        matches!(self, TaskError::Panicked(_))
    }
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskError::Cancelled => f.write_str("task was cancelled"),
            TaskError::Panicked(p) => write!(f, "{} panicked: {}", p.task_id(), p.message()),
        }
    }
}

impl Error for TaskError {}

/// What is known about a task that panicked.
///
/// If nobody retrieves it (the [`Task`](crate::Task) was dropped, or dropped before it was
/// awaited), dropping this value reports "Task exception was never retrieved" to the
/// runtime's exception handler, as asyncio does for an exception nobody looked at.
pub struct TaskPanic(Box<PanicInfo>);

/// Boxed so that every task's output slot (`Result<T, TaskError>`) stays small.
struct PanicInfo {
    message: String,
    task_id: TaskId,
    location: &'static Location<'static>,
    /// Present until the panic is handed to an awaiter.
    unretrieved: Option<ExceptionHandler>,
}

impl TaskPanic {
    pub(crate) fn new(
        payload: &(dyn Any + Send),
        task_id: TaskId,
        location: &'static Location<'static>,
        handler: ExceptionHandler,
    ) -> Self {
        TaskPanic(Box::new(PanicInfo {
            message: panic_message(payload),
            task_id,
            location,
            unretrieved: Some(handler),
        }))
    }

    /// Marks the panic as seen by its awaiter: no report on drop.
    pub(crate) fn retrieve(&mut self) {
        self.0.unretrieved = None;
    }

    /// The panic's message (`"Box<dyn Any>"` for payloads that are not strings).
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// The task that panicked.
    pub fn task_id(&self) -> TaskId {
        self.0.task_id
    }

    /// Where the task was spawned.
    pub fn location(&self) -> &'static Location<'static> {
        self.0.location
    }
}

impl fmt::Debug for TaskPanic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskPanic")
            .field("message", &self.0.message)
            .field("task_id", &self.0.task_id)
            .field("location", &self.0.location)
            .finish()
    }
}

impl Drop for TaskPanic {
    fn drop(&mut self) {
        if let Some(handler) = self.0.unretrieved.take() {
            let ctx = ExceptionContext::new("Task exception was never retrieved")
                .with_panic_message(std::mem::take(&mut self.0.message))
                .with_task(self.0.task_id)
                .with_location(self.0.location);
            handler.call(&ctx);
        }
    }
}
