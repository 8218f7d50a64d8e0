//! Tasks: futures driven by the workers, and the [`Task`] handle that awaits them.
//!
//! A task is one allocation of our own (`raw` and `cell`) holding the header (awaiter,
//! `TaskMeta`, state word), then the future and later its output: see `raw`'s notes, and
//! docs/architecture.md ("Why our own cell") for why it is ours.
//!
//! Ownership and life cycle:
//!
//! * A `Runnable` in a ready queue means "poll me once". Whoever pops it runs it; dropping
//!   it unrun drops the future.
//! * Every task is linked into the runtime's `registry::TaskRegistry` when it is spawned and
//!   leaves it when its future completes or is dropped. The registry is what lets shutdown
//!   and `eddy::run` reach idle tasks that nobody will ever wake again, and what task dumps
//!   list.
//! * Each poll runs inside the cell's guard (`cell`): it catches panics (of `poll` and of the
//!   destructors), turns cancellation into `Err(TaskError::Cancelled)`, and keeps the task's
//!   context variables.
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
pub(crate) mod host;
pub(crate) mod id;
mod join_set;
pub(crate) mod raw;
pub(crate) mod registry;
pub(crate) mod state;
mod yield_now;

use std::any::Any;
use std::fmt;
use std::num::NonZeroU32;
use std::panic::Location;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

pub use builder::Builder;
pub use dump::{TaskInfo, TaskState};
pub use error::{TaskError, TaskPanic};
pub use group::{TaskFailure, TaskGroup, TaskGroupError};
pub use handle::Task;
pub use id::TaskId;
pub use join_set::JoinSet;
pub use yield_now::{yield_now, YieldNow};

use crate::exception::ExceptionContext;
use host::TaskHost;

pub(crate) use raw::Runnable;

/// What the runtime knows about a task, inside its header (`raw::Header`). Every field is
/// paid by every task, pending ones included (docs/benchmarks.md, "memory"), so names live
/// in the registry's side table and the spawn time is a 32-bit reading.
///
/// `#[repr(C)]`, cold fields first: with the header's awaiter slot they make the cold prefix
/// of every cell (`raw::COLD_PREFIX`), which no poll or wake touches (see `raw::Header`).
#[repr(C)]
pub(crate) struct TaskMeta {
    /// This task's place in its registry list (guarded by the registry's shard lock).
    pub(crate) links: registry::Links,
    pub(crate) location: &'static Location<'static>,
    pub(crate) id: TaskId,
    /// Polls so far; only the poller writes it.
    polls: AtomicU32,
    /// The worker a pinned (`spawn_local`) task belongs to, as its index plus one (so that
    /// `None` costs no space).
    owner: Option<NonZeroU32>,
    /// `coarse_now()` at spawn time in milliseconds, truncated to 32 bits: ages in dumps are
    /// exact up to 49 days and wrap after that.
    spawned_at_ms: u32,
    /// Whether the registry holds a name for this task.
    pub(crate) named: bool,
}

/// A cheap monotonic reading in nanoseconds (`CLOCK_MONOTONIC_COARSE`: the time of the last
/// kernel tick, so cheaper than a full clock read and only as fine as the tick), for task
/// ages: every spawn takes one, and a dump's ages need no finer resolution.
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
        id: u64,
        location: &'static Location<'static>,
        owner: Option<u32>,
        named: bool,
    ) -> Self {
        TaskMeta {
            id: TaskId::new(id),
            location,
            links: registry::Links::new(),
            spawned_at_ms: (coarse_now() / 1_000_000) as u32,
            polls: AtomicU32::new(0),
            owner: owner.map(|index| {
                NonZeroU32::MIN
                    .checked_add(index)
                    .expect("fewer than u32::MAX workers")
            }),
            named,
        }
    }

    /// The worker a pinned task belongs to.
    #[inline]
    pub(crate) fn owner(&self) -> Option<u32> {
        self.owner.map(|owner| owner.get() - 1)
    }

    /// A poll starts.
    #[inline]
    pub(crate) fn count_poll(&self) {
        let polls = self.polls.load(Ordering::Relaxed);
        self.polls.store(polls.wrapping_add(1), Ordering::Relaxed);
    }

    /// Reports a panicking destructor (or waker) to the exception handler instead of
    /// unwinding into the worker (or, at shutdown, into whoever drops the runtime).
    pub(crate) fn report_drop_panic(
        &self,
        host: &dyn TaskHost,
        payload: Box<dyn Any + Send>,
        what: &str,
    ) {
        let message = if host.is_stopping() {
            format!("unhandled error during shutdown: {what} panicked while being dropped")
        } else {
            format!("Exception while dropping {what}")
        };
        self.report_panic(host, payload, message);
    }

    /// Gives a caught panic of this task's machinery to the exception handler.
    pub(crate) fn report_panic(
        &self,
        host: &dyn TaskHost,
        payload: Box<dyn Any + Send>,
        message: String,
    ) {
        let ctx = ExceptionContext::new(message)
            .with_panic(&*payload)
            .with_task(self.id)
            .with_location(self.location);
        host.handler().call(&ctx);
        crate::exception::drop_payload(payload);
    }

    /// This task's line in a dump.
    pub(crate) fn info(&self, now: u64, state: TaskState, name: Option<String>) -> TaskInfo {
        let now_ms = (now / 1_000_000) as u32;
        TaskInfo {
            id: self.id,
            name,
            location: self.location,
            state,
            polls: self.polls.load(Ordering::Relaxed),
            age: Duration::from_millis(u64::from(now_ms.wrapping_sub(self.spawned_at_ms))),
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

pub(crate) use cell::{spawn_on, spawn_pinned_on, Queue, Woken};
