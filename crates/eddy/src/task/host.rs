//! What a task needs from the runtime it belongs to, as a trait that the scheduler implements
//! (`worker::shared::Shared`): the task layer names no scheduler type, so it sits below the
//! scheduler that drives it.
//!
//! Each cell keeps its host (the [`Queue::Host`](super::cell::Queue::Host) of the queue it was
//! spawned on) right after its header. Code that knows the cell's type reaches it directly;
//! the type-erased paths (`raw`: completion, panic reports) go through the cell's vtable.

use std::any::Any;
use std::ptr::NonNull;

use super::raw::Header;
use crate::exception::ExceptionHandler;

/// The runtime half of a task: its registry, its exception handler, its ids and whether it
/// shuts down.
pub(crate) trait TaskHost: Send + Sync + 'static {
    /// Lists a new task in the host's registry (for dumps and shutdown), under `name` if it
    /// has one; the registry takes the reference `raw::Header::new` made for it.
    fn register(&self, task: NonNull<Header>, name: Option<String>);

    /// Takes a task whose future is gone off the registry, with the registry's reference.
    fn unregister(&self, task: NonNull<Header>);

    /// Where panics of the task machinery and of user destructors are reported.
    fn handler(&self) -> &ExceptionHandler;

    /// A number no other task of this host has had, for [`TaskId`](super::TaskId).
    fn next_task_id(&self) -> u64;

    /// Whether the host shuts down: a poll then drops the future instead of polling it.
    fn is_stopping(&self) -> bool;

    /// Reports a panic of a context variable's destructor, run as a task finished.
    fn report_context_drop_panic(&self, payload: Box<dyn Any + Send>);
}
