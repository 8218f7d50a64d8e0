//! `pending_tasks`: spawns tasks that stay pending forever, to measure what one pending task
//! costs in memory (see the `memory` bench target, which counts allocations).
//!
//! A driver task spawns `n` tasks from inside the runtime. Each task holds a small state
//! (one `u64`), reports its first poll, then awaits `std::future::pending()`, whose waker
//! nobody keeps: the task is idle and only the runtime knows about it. The driver returns
//! once every task has been polled once (so that whatever a runtime does on a task's first
//! `Pending`, such as eddy's registry entry, is included).

use std::hint::black_box;

use crate::runtimes::{Hung, JoinTask, Runtime};
use crate::util::Countdown;

/// Spawns `n` forever-pending tasks on `rt` and returns once all of them were polled once.
pub fn spawn_pending<R: Runtime>(rt: &R, n: usize, polled: &'static Countdown) -> Result<(), Hung> {
    polled.reset(n);
    rt.run(async move {
        for i in 0..n {
            let state = i as u64;
            R::spawn(async move {
                polled.hit();
                std::future::pending::<()>().await;
                black_box(state);
            })
            .detach();
        }
        polled.wait().await;
    })
}
