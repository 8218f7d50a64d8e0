//! What the runtime knows about each task, inside its header: its place in the registry,
//! where it was spawned, its id, its poll count, its owner if pinned, its age.

use std::any::Any;
use std::cell::UnsafeCell;
use std::fmt;
use std::num::NonZeroU32;
use std::panic::Location;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::dump::{TaskInfo, TaskState};
use super::host::TaskHost;
use super::id::TaskId;
use super::raw::Header;
use crate::exception::ExceptionContext;

/// A task's links in its registry shard's list (`registry`), read and written only under
/// that shard's lock.
#[derive(Debug)]
pub(crate) struct Links(pub(super) UnsafeCell<LinkPtrs>);

/// The neighbours of a task in its shard's list.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LinkPtrs {
    pub(crate) prev: Option<NonNull<Header>>,
    pub(crate) next: Option<NonNull<Header>>,
}

impl Links {
    pub(crate) fn new() -> Self {
        Links(UnsafeCell::new(LinkPtrs {
            prev: None,
            next: None,
        }))
    }
}

/// What the runtime knows about a task, inside its header (`raw::Header`). Every field is
/// paid by every task, pending ones included (docs/benchmarks.md, "memory"), so names live
/// in the registry's side table and the spawn time is a 32-bit reading.
///
/// `#[repr(C)]`, cold fields first: with the header's awaiter slot they make the cold prefix
/// of every cell (`raw::COLD_PREFIX`), which no poll or wake touches (see `raw::Header`).
#[repr(C)]
pub(crate) struct TaskMeta {
    /// This task's place in its registry list (guarded by the registry's shard lock).
    pub(crate) links: Links,
    pub(crate) location: &'static Location<'static>,
    pub(crate) id: TaskId,
    /// Polls so far; only the poller writes it.
    pub(super) polls: AtomicU32,
    /// The worker a pinned (`spawn_local`) task belongs to, as its index plus one (so that
    /// `None` costs no space).
    pub(super) owner: Option<NonZeroU32>,
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
            links: Links::new(),
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
