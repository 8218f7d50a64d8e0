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
pub(crate) mod dump;
pub(crate) mod error;
mod group;
pub(crate) mod handle;
pub(crate) mod host;
pub(crate) mod id;
pub(crate) mod join_set;
pub(crate) mod meta;
pub(crate) mod raw;
pub(crate) mod registry;
pub(crate) mod state;
mod yield_now;

pub use builder::Builder;
pub use dump::{TaskInfo, TaskState};
pub use error::{TaskError, TaskPanic};
pub use group::{TaskFailure, TaskGroup, TaskGroupError};
pub use handle::Task;
pub use id::TaskId;
pub use join_set::JoinSet;
pub use yield_now::{yield_now, YieldNow};
