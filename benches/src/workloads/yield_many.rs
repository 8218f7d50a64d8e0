//! `yield_many`: 200 tasks each yield to the scheduler 1,000 times (eddy `eddy::yield_now`,
//! tokio `tokio::task::yield_now`, smol `futures_lite::future::yield_now`).

use super::Workload;
use crate::runtimes::{Hung, JoinTask, Runtime};
use crate::util::Countdown;

/// Tasks per iteration.
pub const TASKS: usize = 200;
/// Yields per task.
pub const YIELDS: usize = 1_000;

/// See the module docs.
#[derive(Debug)]
pub struct YieldMany;

impl Workload for YieldMany {
    const NAME: &'static str = "yield_many";
    type State = &'static Countdown;

    fn setup() -> Self::State {
        Countdown::leak()
    }

    fn iteration<R: Runtime>(rt: &R, done: &Self::State) -> Result<(), Hung> {
        let done: &'static Countdown = done;
        done.reset(TASKS);
        rt.run(async move {
            for _ in 0..TASKS {
                R::spawn(async move {
                    for _ in 0..YIELDS {
                        R::yield_now().await;
                    }
                    done.hit();
                })
                .detach();
            }
            done.wait().await;
        })
    }
}
