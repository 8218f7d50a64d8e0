//! Task dumps: what every live task is doing, without flags and without stopping anyone.

use std::fmt;
use std::panic::Location;
use std::time::Duration;

use crate::task::id::TaskId;

/// Where a task is in its life, as seen by [`Runtime::dump_tasks`](crate::Runtime::dump_tasks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    /// Waiting to be woken (its future returned `Pending`).
    Idle,
    /// Woken and queued on a worker (or the injector), not running yet.
    Scheduled,
    /// Being polled right now.
    Running,
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TaskState::Idle => "idle",
            TaskState::Scheduled => "scheduled",
            TaskState::Running => "running",
        })
    }
}

/// One live task in a [`Runtime::dump_tasks`](crate::Runtime::dump_tasks).
///
/// Its `Display` is one line: id, state, polls, age, name and spawn location.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TaskInfo {
    /// The task's id.
    pub id: TaskId,
    /// The name given with [`task::Builder::name`](crate::task::Builder::name).
    pub name: Option<String>,
    /// Where the task was spawned.
    pub location: &'static Location<'static>,
    /// Idle, scheduled or running.
    pub state: TaskState,
    /// How many times its future was polled.
    pub polls: u32,
    /// Time since it was spawned, in whole milliseconds of the kernel's coarse monotonic
    /// clock (which moves once a scheduler tick, a few milliseconds): cheap enough to
    /// read on every spawn.
    pub age: Duration,
}

impl fmt::Display for TaskInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:>10}  {:<9}  polls {:>6}  age {:>10.3?}  {}  spawned at {}",
            self.id.to_string(),
            self.state,
            self.polls,
            self.age,
            self.name.as_deref().unwrap_or("-"),
            self.location
        )
    }
}
