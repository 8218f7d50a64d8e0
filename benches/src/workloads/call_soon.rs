//! `call_soon`: a task schedules 1,000,000 callbacks that each increment a counter; the last
//! one signals. eddy uses `eddy::call_soon` (a callback on the worker's ready queue); tokio
//! and smol have no callback API, so the nearest equivalent, a task around the closure, is
//! spawned instead.

use super::Workload;
use crate::runtimes::{Hung, Runtime};
use crate::util::Countdown;

/// Callbacks per iteration.
pub const CALLBACKS: usize = 1_000_000;

/// See the module docs.
#[derive(Debug)]
pub struct CallSoon;

impl Workload for CallSoon {
    const NAME: &'static str = "call_soon";
    type State = &'static Countdown;

    fn setup() -> Self::State {
        Countdown::leak()
    }

    fn iteration<R: Runtime>(rt: &R, done: &Self::State) -> Result<(), Hung> {
        let done: &'static Countdown = done;
        done.reset(CALLBACKS);
        rt.run(async move {
            for _ in 0..CALLBACKS {
                R::call_soon(move || done.hit());
            }
            done.wait().await;
        })
    }
}
