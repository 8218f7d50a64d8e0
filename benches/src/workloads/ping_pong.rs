//! `ping_pong`: 10 pairs of tasks; in each pair one task sends a ping over an
//! `async-channel` `bounded(1)` and awaits the pong on another, 10,000 round trips.

use super::Workload;
use crate::runtimes::{Hung, JoinTask, Runtime};
use crate::util::Countdown;

/// Pairs of tasks.
pub const PAIRS: usize = 10;
/// Round trips per pair.
pub const ROUNDS: usize = 10_000;

/// See the module docs.
#[derive(Debug)]
pub struct PingPong;

impl Workload for PingPong {
    const NAME: &'static str = "ping_pong";
    type State = &'static Countdown;

    fn setup() -> Self::State {
        Countdown::leak()
    }

    fn iteration<R: Runtime>(rt: &R, done: &Self::State) -> Result<(), Hung> {
        let done: &'static Countdown = done;
        done.reset(PAIRS);
        rt.run(async move {
            for _ in 0..PAIRS {
                let (ping_tx, ping_rx) = async_channel::bounded::<()>(1);
                let (pong_tx, pong_rx) = async_channel::bounded::<()>(1);
                R::spawn(async move {
                    for _ in 0..ROUNDS {
                        ping_rx.recv().await.expect("ping channel closed");
                        pong_tx.send(()).await.expect("pong channel closed");
                    }
                })
                .detach();
                R::spawn(async move {
                    for _ in 0..ROUNDS {
                        ping_tx.send(()).await.expect("ping channel closed");
                        pong_rx.recv().await.expect("pong channel closed");
                    }
                    done.hit();
                })
                .detach();
            }
            done.wait().await;
        })
    }
}
