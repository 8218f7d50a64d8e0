//! Small helpers shared by the workloads: a countdown latch, a fixed-seed LCG and a
//! blocking `block_on` with a timeout (so that a runtime that hangs fails loudly instead of
//! stalling the whole suite).

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// A countdown latch: `reset(n)`, then `n` calls to [`hit`](Countdown::hit); the last one
/// wakes whoever waits in [`wait`](Countdown::wait) or [`wait_blocking`](Countdown::wait_blocking).
///
/// It is runtime-agnostic (an `async-channel` of capacity 1 carries the signal) and meant to
/// be leaked once per benchmark ([`Countdown::leak`]) so that tasks can capture a
/// `&'static Countdown` instead of cloning an `Arc` each.
#[derive(Debug)]
pub struct Countdown {
    remaining: AtomicUsize,
    tx: async_channel::Sender<()>,
    rx: async_channel::Receiver<()>,
}

impl Countdown {
    /// A new latch with a `'static` lifetime (one small leak per benchmark).
    pub fn leak() -> &'static Countdown {
        let (tx, rx) = async_channel::bounded(1);
        Box::leak(Box::new(Countdown {
            remaining: AtomicUsize::new(0),
            tx,
            rx,
        }))
    }

    /// Arms the latch for `n` hits. Must not race with hits of a previous round.
    pub fn reset(&self, n: usize) {
        while self.rx.try_recv().is_ok() {}
        self.remaining.store(n, Ordering::SeqCst);
    }

    /// Counts one hit; the last one signals.
    #[inline]
    pub fn hit(&self) {
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            let _ = self.tx.try_send(());
        }
    }

    /// Hits still missing.
    pub fn remaining(&self) -> usize {
        self.remaining.load(Ordering::Acquire)
    }

    /// Waits (asynchronously, on any runtime) for the last hit.
    pub async fn wait(&self) {
        self.rx.recv().await.expect("countdown channel closed");
    }

    /// Blocks the calling thread until the last hit, or fails after `timeout`.
    pub fn wait_blocking(&self, timeout: Duration) -> Result<(), TimedOut> {
        block_on_timeout(self.wait(), timeout).ok_or(TimedOut)
    }
}

/// [`block_on_timeout`] gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimedOut;

/// A 64-bit linear congruential generator (Knuth's MMIX constants) with a fixed seed, so
/// that every runtime sees the same sequence of "random" delays.
#[derive(Debug, Clone)]
pub struct Lcg(u64);

impl Lcg {
    /// A generator starting at `seed`.
    pub fn new(seed: u64) -> Self {
        Lcg(seed)
    }

    /// The next value (the high 31 bits of the state, which are the well-mixed ones).
    #[inline]
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
}

struct Unparker(Thread);

impl Wake for Unparker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `future` on the calling thread, parking between polls, for at most `timeout`.
/// `None` if it did not finish in time (the future is then dropped).
pub fn block_on_timeout<F: Future>(future: F, timeout: Duration) -> Option<F::Output> {
    let deadline = Instant::now() + timeout;
    let waker = Waker::from(Arc::new(Unparker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return Some(out);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        std::thread::park_timeout(deadline - now);
    }
}
