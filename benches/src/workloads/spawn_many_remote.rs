//! `spawn_many_remote`: the benchmark thread (not a runtime thread) spawns 100,000 tasks
//! through a handle (eddy `RuntimeHandle::spawn`, tokio `Handle::spawn`, smol
//! `Executor::spawn`); each decrements a shared counter and the benchmark thread blocks until
//! it reaches zero.

use super::Workload;
use crate::runtimes::{Hung, JoinTask, Runtime, HANG_TIMEOUT};
use crate::util::Countdown;

/// Tasks per iteration.
pub const TASKS: usize = 100_000;

/// See the module docs.
#[derive(Debug)]
pub struct SpawnManyRemote;

impl Workload for SpawnManyRemote {
    const NAME: &'static str = "spawn_many_remote";
    type State = &'static Countdown;

    fn setup() -> Self::State {
        Countdown::leak()
    }

    fn iteration<R: Runtime>(rt: &R, done: &Self::State) -> Result<(), Hung> {
        let done: &'static Countdown = done;
        done.reset(TASKS);
        let h = rt.handle();
        for _ in 0..TASKS {
            R::spawn_remote(&h, async move { done.hit() }).detach();
        }
        done.wait_blocking(HANG_TIMEOUT)
            .map_err(|_| Hung { runtime: R::NAME })
    }
}
