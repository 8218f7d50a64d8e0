//! `spawn_many_local`: a task spawns 100,000 tasks (eddy `eddy::spawn`, tokio `tokio::spawn`,
//! smol `Executor::spawn` on a worker); each decrements a shared counter, and the spawner
//! awaits the notification sent when it reaches zero.

use super::Workload;
use crate::runtimes::{Hung, JoinTask, Runtime};
use crate::util::Countdown;

/// Tasks per iteration.
pub const TASKS: usize = 100_000;

/// See the module docs.
#[derive(Debug)]
pub struct SpawnManyLocal;

impl Workload for SpawnManyLocal {
    const NAME: &'static str = "spawn_many_local";
    type State = &'static Countdown;

    fn setup() -> Self::State {
        Countdown::leak()
    }

    fn iteration<R: Runtime>(rt: &R, done: &Self::State) -> Result<(), Hung> {
        let done: &'static Countdown = done;
        done.reset(TASKS);
        rt.run(async move {
            for _ in 0..TASKS {
                R::spawn(async move { done.hit() }).detach();
            }
            done.wait().await;
        })
    }
}
