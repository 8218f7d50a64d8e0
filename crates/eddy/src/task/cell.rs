//! Building task cells: the future wrapper every task runs in, and the two spawn paths.
//!
//! [`TaskFuture`] is what `async-task` actually polls. Around the user's future it adds:
//!
//! 1. **Cancellation.** If the task was cancelled or the runtime closed, the next poll does
//!    not touch the user's future and completes with `Err(TaskError::Cancelled)`; the cell
//!    then drops the future.
//! 2. **Panic containment.** A panic in `poll` is caught and becomes
//!    `Err(TaskError::Panicked)`; the worker never sees it.
//! 3. **Registry membership.** On the first `Pending` the task's waker goes into the runtime's
//!    registry; it leaves on completion or drop (see `registry`).
//!
//! The wrapper borrows the task's [`TaskMeta`] from inside the same allocation. That borrow is
//! why we call `async_task::Builder::spawn_unchecked` (its documented purpose) rather than
//! `spawn`; the safety argument is written next to each call.

use std::future::Future;
use std::panic::{self, AssertUnwindSafe, Location};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use async_task::{Builder, ScheduleInfo, WithInfo};

use crate::contextvar::{self, Context as VarContext};
use crate::exception::ExceptionContext;
use crate::shared::Shared;
use crate::task::{Runnable, Task, TaskError, TaskMeta, TaskPanic};

pin_project_lite::pin_project! {
    /// The future inside every task cell (see the module docs).
    pub(crate) struct TaskFuture<'a, F> {
        meta: &'a TaskMeta,
        // The task's own context variables: a copy of its spawner's, current while it polls.
        context: VarContext,
        // `None` once dropped by us: `async-task` drops the future inside an abort-on-panic
        // guard, so we drop it first, inside `catch_unwind`.
        #[pin]
        inner: Option<F>,
    }

    impl<'a, F> PinnedDrop for TaskFuture<'a, F> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            this.meta.unregister();
            drop_contained(this.meta, this.inner);
        }
    }
}

/// Drops the user's future, reporting a panic of its destructor to the exception handler
/// instead of letting it reach `async-task` (which would abort the process).
fn drop_contained<F>(meta: &TaskMeta, inner: Pin<&mut Option<F>>) {
    if inner.is_none() {
        return;
    }
    let mut inner = inner;
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| inner.set(None))) {
        let message = if meta.shared.is_stopping() {
            "unhandled error during shutdown: a task's future panicked while being dropped"
        } else {
            "Exception while dropping a task's future"
        };
        let ctx = ExceptionContext::new(message)
            .with_panic(&*payload)
            .with_task(meta.id)
            .with_location(meta.location);
        meta.shared.handler.call(&ctx);
    }
}

impl<F: Future> Future for TaskFuture<'_, F> {
    type Output = Result<F::Output, TaskError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let meta = *this.meta;
        if meta.must_stop() {
            meta.unregister();
            drop_contained(meta, this.inner);
            return Poll::Ready(Err(TaskError::Cancelled));
        }
        let Some(inner) = this.inner.as_mut().as_pin_mut() else {
            // Unreachable in practice: `async-task` never polls a completed future.
            return Poll::Ready(Err(TaskError::Cancelled));
        };
        meta.mark_running();
        let outer = contextvar::swap(this.context.take());
        let polled = panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx)));
        *this.context = contextvar::swap(outer);
        let out = match polled {
            Ok(Poll::Ready(value)) => Ok(value),
            Ok(Poll::Pending) => {
                meta.mark_idle();
                return Poll::Pending;
            }
            Err(payload) => Err(TaskError::Panicked(TaskPanic::new(
                &*payload,
                meta.id,
                meta.location,
                meta.shared.handler.clone(),
            ))),
        };
        meta.unregister();
        drop_contained(meta, this.inner);
        Poll::Ready(out)
    }
}

/// Spawns a `Send` task on `shared` and schedules it; it may run on any worker.
pub(crate) fn spawn_stealable<F>(
    shared: &Arc<Shared>,
    future: F,
    location: &'static Location<'static>,
) -> Task<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    spawn_with(shared, future, location, None, Shared::schedule_task)
}

/// [`spawn_stealable`] with a name for task dumps.
pub(crate) fn spawn_named<F>(
    shared: &Arc<Shared>,
    future: F,
    location: &'static Location<'static>,
    name: Option<String>,
) -> Task<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    spawn_with(shared, future, location, name, Shared::schedule_task)
}

/// Spawns a `Send` task whose wakes go to `schedule` (the workers, or the blocking pool).
pub(crate) fn spawn_with<F, S>(
    shared: &Arc<Shared>,
    future: F,
    location: &'static Location<'static>,
    name: Option<String>,
    schedule: S,
) -> Task<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Fn(Runnable) + Send + Sync + Copy + 'static,
{
    let meta = TaskMeta::new(shared.clone(), location, None, name);
    let schedule = WithInfo(move |runnable: Runnable, _info: ScheduleInfo| {
        runnable.metadata().mark_scheduled();
        schedule(runnable)
    });
    // SAFETY:
    // - `TaskFuture<F>` is `Send` because `F` is `Send` and `&TaskMeta` is `Send` (`TaskMeta`
    //   is `Sync`), so the runnable may be used and dropped on any thread.
    // - The only non-'static borrow in the future is of the task's own metadata, which the
    //   documentation of `spawn_unchecked` allows: the metadata lives as long as the cell.
    // - `schedule` is `Send + Sync + 'static` (bounded so above).
    // (End of SAFETY.)
    let (runnable, task) = unsafe {
        Builder::new()
            .metadata(meta)
            .spawn_unchecked(move |meta| wrap(meta, future), schedule)
    };
    start(shared, runnable, task)
}

/// Registers a new task and schedules its first poll.
fn start<T>(
    shared: &Shared,
    runnable: Runnable,
    task: async_task::Task<Result<T, TaskError>, TaskMeta>,
) -> Task<T> {
    let meta = runnable.metadata();
    meta.publish_slot(shared.registry.register(meta, runnable.waker()));
    runnable.schedule();
    Task::new(task)
}

/// Spawns a task pinned to worker `owner` (the current thread); it is never stolen.
pub(crate) fn spawn_pinned<F>(
    shared: &Arc<Shared>,
    owner: usize,
    future: F,
    location: &'static Location<'static>,
    name: Option<String>,
) -> Task<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let meta = TaskMeta::new(shared.clone(), location, Some(owner as u32), name);
    let schedule = WithInfo(|runnable: Runnable, _info: ScheduleInfo| {
        runnable.metadata().mark_scheduled();
        Shared::schedule_pinned(runnable);
    });
    // SAFETY:
    // - The future may be `!Send`. Its runnable is only ever run or dropped on worker `owner`,
    //   the thread calling this function: `Shared::schedule_pinned` routes runnables woken
    //   elsewhere to that worker's inbox, only that worker pops its inbox and pinned queue,
    //   and when that worker is gone a runnable reaching another thread is leaked, never
    //   dropped there.
    // - The output may be `!Send`; `Task<T>` is only `Send` when `T` is (async-task's bounds).
    // - The only non-'static borrow in the future is of the task's own metadata (allowed by
    //   `spawn_unchecked`'s contract); `schedule` is `Send + Sync + 'static`.
    // (End of SAFETY.)
    let (runnable, task) = unsafe {
        Builder::new()
            .metadata(meta)
            .spawn_unchecked(move |meta| wrap(meta, future), schedule)
    };
    start(shared, runnable, task)
}

fn wrap<F: Future>(meta: &TaskMeta, inner: F) -> TaskFuture<'_, F> {
    TaskFuture {
        meta,
        context: contextvar::capture(),
        inner: Some(inner),
    }
}
