//! `threadsafe`: two foreign (non-runtime) threads submit 500,000 closures each; every
//! closure increments a counter and the benchmark thread waits until all 1,000,000 ran.
//! eddy uses `RuntimeHandle::call_soon_threadsafe`; tokio (`Handle::spawn`) and smol
//! (`Executor::spawn`) spawn a task around the closure, their nearest equivalent.
//!
//! The two submitter threads are scoped threads started per iteration (about 50 µs, the same
//! for every runtime, against an iteration of tens of milliseconds).

use super::Workload;
use crate::runtimes::{Hung, Runtime, HANG_TIMEOUT};
use crate::util::Countdown;

/// Submitting threads.
pub const THREADS: usize = 2;
/// Submissions in all (split evenly between the threads).
pub const SUBMISSIONS: usize = 1_000_000;

/// See the module docs.
#[derive(Debug)]
pub struct Threadsafe;

impl Workload for Threadsafe {
    const NAME: &'static str = "threadsafe";
    type State = &'static Countdown;

    fn setup() -> Self::State {
        Countdown::leak()
    }

    fn iteration<R: Runtime>(rt: &R, done: &Self::State) -> Result<(), Hung> {
        let done: &'static Countdown = done;
        done.reset(SUBMISSIONS);
        let h = rt.handle();
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                let h = h.clone();
                s.spawn(move || {
                    for _ in 0..SUBMISSIONS / THREADS {
                        R::call_soon_threadsafe(&h, move || done.hit());
                    }
                });
            }
        });
        done.wait_blocking(HANG_TIMEOUT)
            .map_err(|_| Hung { runtime: R::NAME })
    }
}
