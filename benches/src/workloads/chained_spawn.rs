//! `chained_spawn`: a chain of 100,000 tasks, each spawning the next from inside itself;
//! the last one signals the waiting driver task.

use super::Workload;
use crate::runtimes::{Hung, JoinTask, Runtime};
use crate::util::Countdown;

/// Length of the chain.
pub const CHAIN: usize = 100_000;

/// See the module docs.
#[derive(Debug)]
pub struct ChainedSpawn;

fn link<R: Runtime>(left: usize, done: &'static Countdown) {
    R::spawn(async move {
        if left == 0 {
            done.hit();
        } else {
            link::<R>(left - 1, done);
        }
    })
    .detach();
}

impl Workload for ChainedSpawn {
    const NAME: &'static str = "chained_spawn";
    type State = &'static Countdown;

    fn setup() -> Self::State {
        Countdown::leak()
    }

    fn iteration<R: Runtime>(rt: &R, done: &Self::State) -> Result<(), Hung> {
        let done: &'static Countdown = done;
        done.reset(1);
        rt.run(async move {
            link::<R>(CHAIN - 1, done);
            done.wait().await;
        })
    }
}
