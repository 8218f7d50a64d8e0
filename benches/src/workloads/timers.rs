//! `timers`: a task schedules 200,000 timers with pseudo-random delays in 0..20 ms (a
//! fixed-seed LCG, the same sequence on every runtime), then cancels every second one, and
//! waits until the other 100,000 have fired.
//!
//! * eddy: `eddy::call_later` + `TimerHandle::cancel`.
//! * tokio: a task per timer doing `tokio::time::sleep(d).await`; cancelled with
//!   `JoinHandle::abort`.
//! * smol: a task per timer awaiting `async_io::Timer::after(d)`; cancelled by dropping the
//!   `Task`.
//!
//! Before cancelling, the driver yields until every timer is registered (tokio and smol
//! register a sleep when the timer task first polls it; eddy's `call_later` registers at
//! once), so that each runtime really removes half of its timers from its timer structure.
//! A cancelled timer whose short delay ran out before the cancel fires harmlessly.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::Workload;
use crate::runtimes::{Hung, Runtime};
use crate::util::{Countdown, Lcg};

/// Timers per iteration (half of them cancelled).
pub const TIMERS: usize = 200_000;
/// Delays are uniform in `0..MAX_DELAY_US` microseconds.
pub const MAX_DELAY_US: u64 = 20_000;
/// The LCG seed.
pub const SEED: u64 = 0x005E_ED0F_7133;

/// See the module docs.
#[derive(Debug)]
pub struct Timers;

/// Per-runtime state of [`Timers`].
#[derive(Debug)]
pub struct TimersState {
    done: &'static Countdown,
    armed: &'static AtomicUsize,
}

impl Workload for Timers {
    const NAME: &'static str = "timers";
    type State = TimersState;

    fn setup() -> Self::State {
        TimersState {
            done: Countdown::leak(),
            armed: Box::leak(Box::new(AtomicUsize::new(0))),
        }
    }

    fn iteration<R: Runtime>(rt: &R, state: &Self::State) -> Result<(), Hung> {
        let (done, armed) = (state.done, state.armed);
        done.reset(TIMERS / 2);
        armed.store(0, Ordering::SeqCst);
        rt.run(async move {
            let mut lcg = Lcg::new(SEED);
            let mut to_cancel = Vec::with_capacity(TIMERS / 2);
            for i in 0..TIMERS {
                let delay = Duration::from_micros(lcg.next() % MAX_DELAY_US);
                if i % 2 == 0 {
                    R::keep_timer(R::call_later(delay, armed, move || done.hit()));
                } else {
                    to_cancel.push(R::call_later(delay, armed, || ()));
                }
            }
            while armed.load(Ordering::Acquire) < TIMERS {
                R::yield_now().await;
            }
            for t in to_cancel {
                R::cancel_timer(t);
            }
            done.wait().await;
        })
    }
}
