//! The workloads, one module each. Each is written once, generically over
//! [`Runtime`](crate::Runtime), and implements [`Workload`] so that the criterion harness
//! can run it on eddy, tokio and smol side by side.

use crate::runtimes::{Hung, Runtime};

pub mod call_soon;
pub mod chained_spawn;
pub mod pending_tasks;
pub mod ping_pong;
pub mod spawn_many_local;
pub mod spawn_many_remote;
pub mod threadsafe;
pub mod timers;
pub mod wake_latency;
pub mod yield_many;

/// One benchmark workload.
pub trait Workload {
    /// The criterion group name.
    const NAME: &'static str;
    /// State built once per runtime, outside the timed loop (latches, counters).
    type State;
    /// Builds the state.
    fn setup() -> Self::State;
    /// Runs one complete iteration on `rt` and returns when all of its work is done.
    fn iteration<R: Runtime>(rt: &R, state: &Self::State) -> Result<(), Hung>;
}
