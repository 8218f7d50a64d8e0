//! Tasks: futures driven by the workers, and the [`Task`] handle that awaits them.
//!
//! A task is one [`async_task`] allocation holding the future, its output slot, the schedule
//! function and a [`TaskMeta`] header of ours (id, spawn location, cancel flag, registry slot,
//! the runtime). We use `async-task` rather than a hand-written cell because it is one
//! allocation per task, its state machine is Miri-tested, and its waker vtable is already as
//! lean as ours would be (docs/architecture.md).
//!
//! Ownership and life cycle:
//!
//! * A [`Runnable`] in a ready queue means "poll me once". Whoever pops it runs it.
//! * Every task is entered in the runtime's [`registry::TaskRegistry`] when it is spawned and
//!   leaves it when its future completes or is dropped. The registry is what lets `cancel`,
//!   shutdown and `eddy::run` reach idle tasks that nobody will ever wake again (a plain
//!   `async-task` would leak them), and what task dumps list.
//! * The future we hand to `async-task` is a [`cell::TaskFuture`] around the user's future. It
//!   catches panics (of `poll` and of the future's destructor), turns cancellation into
//!   `Err(TaskError::Cancelled)`, keeps the task's context variables and its dump state.
//! * The [`Task`] handle detaches on drop (asyncio and tokio semantics: the task keeps
//!   running); its output is then dropped by the cell. If that output is an unretrieved panic,
//!   dropping it reports "Task exception was never retrieved" to the exception handler.
//! * Pinned tasks (`spawn_local`) are only ever polled and dropped on their owner worker.

mod builder;
pub(crate) mod cell;
mod dump;
mod error;
mod group;
mod handle;
mod join_set;
pub(crate) mod registry;
mod yield_now;

use std::fmt;
use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use builder::Builder;
pub use dump::{TaskInfo, TaskState};
pub use error::{TaskError, TaskPanic};
pub use group::{TaskFailure, TaskGroup, TaskGroupError};
pub use handle::Task;
pub use join_set::JoinSet;
pub use yield_now::{yield_now, YieldNow};

use crate::shared::Shared;

/// A runnable task of this runtime.
pub(crate) type Runnable = async_task::Runnable<TaskMeta>;

/// A task's identity, unique within its runtime.
///
/// # Examples
///
/// ```
/// let rt = eddy::Runtime::new()?;
/// let a = rt.handle().spawn(async {});
/// let b = rt.handle().spawn(async {});
/// assert_ne!(a.id(), b.id());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct TaskId(u64);

impl TaskId {
    /// The id as a number.
    pub fn as_u64(self) -> u64 {
        self.0
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "task {}", self.0)
    }
}

/// Our header inside each `async-task` allocation. Kept small (56 bytes): it is paid by every
/// task, and memory per pending task is one of the figures eddy is measured by.
pub(crate) struct TaskMeta {
    pub(crate) shared: Arc<Shared>,
    pub(crate) id: TaskId,
    pub(crate) location: &'static Location<'static>,
    /// Only named tasks pay for the name: a thin pointer, `None` otherwise (a `String`
    /// or `Box<str>` here would cost every task 16-24 bytes).
    #[allow(clippy::box_collection)]
    name: Option<Box<String>>,
    /// `coarse_now()` at spawn time, for the age in dumps.
    spawned_at: u64,
    /// Where the registry keeps this task; `registry::UNREGISTERED` once it left.
    slot: AtomicU32,
    /// Polls so far; only the poller writes it.
    polls: AtomicU32,
    /// The worker a pinned (`spawn_local`) task belongs to, or `NOT_PINNED`.
    owner: u32,
    /// A `TaskState` as `u8`; written by the schedule function and by the poller.
    state: AtomicU8,
    cancelled: AtomicBool,
}

const NOT_PINNED: u32 = u32::MAX;

/// A cheap monotonic reading in nanoseconds (`CLOCK_MONOTONIC_COARSE`: a few ns per call,
/// a few ms of resolution), for task ages, where a full clock read per spawn showed up in
/// profiles.
pub(crate) fn coarse_now() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64
}

impl TaskMeta {
    pub(crate) fn new(
        shared: Arc<Shared>,
        location: &'static Location<'static>,
        owner: Option<u32>,
        name: Option<String>,
    ) -> Self {
        TaskMeta {
            id: TaskId(shared.next_task_id()),
            shared,
            location,
            name: name.map(Box::new),
            spawned_at: coarse_now(),
            slot: AtomicU32::new(registry::UNREGISTERED),
            polls: AtomicU32::new(0),
            owner: owner.unwrap_or(NOT_PINNED),
            state: AtomicU8::new(TaskState::SCHEDULED),
            cancelled: AtomicBool::new(false),
        }
    }

    /// The worker a pinned task belongs to.
    #[inline]
    pub(crate) fn owner(&self) -> Option<u32> {
        (self.owner != NOT_PINNED).then_some(self.owner)
    }

    /// True when the task must stop at its next scheduling point: it was cancelled, or the
    /// runtime is cancelling all its tasks or shut down.
    #[inline]
    pub(crate) fn must_stop(&self) -> bool {
        self.cancelled.load(Ordering::Acquire) || self.shared.is_stopping()
    }

    /// Records where the registry keeps this task.
    pub(crate) fn publish_slot(&self, slot: u32) {
        self.slot.store(slot, Ordering::SeqCst);
    }

    /// Takes the task out of the registry (once; later calls do nothing).
    pub(crate) fn unregister(&self) {
        let slot = self.slot.swap(registry::UNREGISTERED, Ordering::AcqRel);
        if slot != registry::UNREGISTERED {
            self.shared.registry.unregister(slot, self.id);
        }
    }

    /// Asks the task to stop and makes sure it gets polled soon to notice.
    pub(crate) fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        let slot = self.slot.load(Ordering::SeqCst);
        if slot != registry::UNREGISTERED {
            self.shared.registry.wake(slot, self.id);
        }
    }

    #[inline]
    pub(crate) fn mark_scheduled(&self) {
        self.state.store(TaskState::SCHEDULED, Ordering::Relaxed);
    }

    /// A poll starts: running, one more poll.
    #[inline]
    pub(crate) fn mark_running(&self) {
        self.state.store(TaskState::RUNNING, Ordering::Relaxed);
        let polls = self.polls.load(Ordering::Relaxed);
        self.polls.store(polls.wrapping_add(1), Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn mark_idle(&self) {
        self.state.store(TaskState::IDLE, Ordering::Relaxed);
    }

    /// This task's line in a dump.
    pub(crate) fn info(&self, now: u64) -> TaskInfo {
        TaskInfo {
            id: self.id,
            name: self.name.as_deref().cloned(),
            location: self.location,
            state: TaskState::from_u8(self.state.load(Ordering::Relaxed)),
            polls: self.polls.load(Ordering::Relaxed),
            age: Duration::from_nanos(now.saturating_sub(self.spawned_at)),
        }
    }
}

impl fmt::Debug for TaskMeta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskMeta")
            .field("id", &self.id)
            .field("location", &self.location)
            .field("owner", &self.owner())
            .finish()
    }
}

pub(crate) use cell::{spawn_pinned, spawn_stealable, spawn_with};
