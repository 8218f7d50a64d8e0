//! Timers: `call_later` / `call_at` / `sleep` ordering, deadlines and cancellation.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use eddy::TimerHandle;
use eddy_tests::{rt, wait_until, with_deadline, DropCounter, HeldJob, Rng, PATIENCE};

/// 10,000 timers, all cancelled before their deadline: each closure is dropped inside its
/// `cancel()`, a second `cancel()` changes nothing, and none fires, although their deadline
/// passes: a timer scheduled after them on the same (only) heap, with a later deadline,
/// fires, and by then not one of them has run. Once from the worker (the free functions)
/// and once through a `RuntimeHandle` from a foreign thread.
#[test]
fn ten_thousand_cancelled_timers_never_fire_and_drop_at_cancel() {
    const N: usize = 10_000;
    with_deadline(PATIENCE * 2, || {
        // One worker: while it runs the scheduling callback (or a held job) no timer fires.
        let rt = rt(1);
        let fired = Arc::new(AtomicUsize::new(0));

        // From the worker.
        let drops = DropCounter::new();
        let (tx, rx) = mpsc::channel();
        let (d, f) = (drops.clone(), fired.clone());
        rt.handle()
            .call_soon_threadsafe(move || {
                let soon = eddy::time() + Duration::from_millis(1);
                let handles: Vec<TimerHandle> = (0..N)
                    .map(|_| {
                        let token = d.token();
                        let f = f.clone();
                        eddy::call_at(soon, move || {
                            token.touch();
                            f.fetch_add(1, Ordering::SeqCst);
                        })
                    })
                    .collect();
                let mut dropped_at_cancel = true;
                for (i, h) in handles.iter().enumerate() {
                    h.cancel();
                    dropped_at_cancel &= d.count() == i + 1 && h.cancelled();
                    h.cancel();
                    dropped_at_cancel &= d.count() == i + 1;
                }
                let start = Instant::now();
                let f = f.clone();
                eddy::call_later(Duration::from_millis(10), move || {
                    let fired_before = f.load(Ordering::SeqCst);
                    tx.send((dropped_at_cancel, fired_before, start.elapsed()))
                        .unwrap();
                });
            })
            .unwrap();
        let (dropped_at_cancel, fired_before, after) = rx.recv_timeout(PATIENCE).unwrap();
        assert_eq!(fired_before, 0, "a cancelled timer fired");
        assert!(
            dropped_at_cancel,
            "a closure was not dropped by its (first) cancel(), or by a second one"
        );
        assert_eq!(drops.count(), N);
        assert!(after >= Duration::from_millis(10), "fired after {after:?}");

        // Through a handle, from this (foreign) thread, while the only worker is held: the
        // timers cannot fire before they are cancelled.
        let drops = DropCounter::new();
        let handle = rt.handle();
        let (held, job) = HeldJob::new();
        handle.call_soon_threadsafe(job).unwrap();
        held.wait_started();
        let handles: Vec<TimerHandle> = (0..N)
            .map(|_| {
                let token = drops.token();
                let f = fired.clone();
                handle
                    .call_later(Duration::from_millis(1), move || {
                        token.touch();
                        f.fetch_add(1, Ordering::SeqCst);
                    })
                    .unwrap()
            })
            .collect();
        for (i, h) in handles.iter().enumerate() {
            h.cancel();
            assert_eq!(drops.count(), i + 1, "closure not dropped by cancel()");
            assert!(h.cancelled());
            h.cancel();
            assert_eq!(drops.count(), i + 1, "second cancel dropped something");
        }
        let (tx, rx) = mpsc::channel();
        let f = fired.clone();
        handle
            .call_later(Duration::from_millis(10), move || {
                tx.send(f.load(Ordering::SeqCst)).unwrap();
            })
            .unwrap();
        held.release();
        let fired_before = rx.recv_timeout(PATIENCE).unwrap();
        assert_eq!(fired_before, 0, "a cancelled timer fired");
    });
}

/// On one worker, 1,000 `call_later` timers with shuffled delays fire in deadline order
/// (`TimerHandle::when`, ties in scheduling order), and none fires before its deadline.
#[test]
fn timers_fire_in_deadline_order_on_one_worker() {
    const N: usize = 1_000;
    with_deadline(PATIENCE * 2, || {
        let rt = rt(1);
        let log: Arc<Mutex<Vec<(usize, Instant)>>> = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let l = log.clone();
        rt.handle()
            .call_soon_threadsafe(move || {
                let mut delays: Vec<u64> = (0..N as u64).map(|i| i / 2).collect(); // some ties
                Rng::new(0x5eed).shuffle(&mut delays);
                let whens: Vec<Instant> = delays
                    .iter()
                    .enumerate()
                    .map(|(i, &d)| {
                        let l = l.clone();
                        // 0..500 half-milliseconds (0..250 ms), in shuffled order.
                        eddy::call_later(Duration::from_micros(d * 500), move || {
                            l.lock().unwrap().push((i, Instant::now()));
                        })
                        .when()
                    })
                    .collect();
                tx.send(whens).unwrap();
            })
            .unwrap();
        let whens = rx.recv_timeout(PATIENCE).unwrap();
        assert!(
            wait_until(PATIENCE, || log.lock().unwrap().len() == N),
            "only {} timers fired",
            log.lock().unwrap().len()
        );
        let log = log.lock().unwrap().clone();
        let mut expected: Vec<usize> = (0..N).collect();
        expected.sort_by_key(|&i| (whens[i], i));
        let got: Vec<usize> = log.iter().map(|&(i, _)| i).collect();
        assert_eq!(got, expected, "timers did not fire in deadline order");
        for &(i, at) in &log {
            assert!(at >= whens[i], "timer {i} fired before its deadline");
        }
    });
}

/// `call_at` with the very same deadline: they fire in the order they were scheduled.
#[test]
fn equal_deadlines_fire_in_scheduling_order() {
    with_deadline(PATIENCE * 2, || {
        let rt = rt(1);
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        let (tx, rx) = mpsc::channel();
        rt.handle()
            .call_soon_threadsafe(move || {
                let at = eddy::time() + Duration::from_millis(20);
                for i in 0..200u32 {
                    let l = l.clone();
                    eddy::call_at(at, move || l.lock().unwrap().push(i));
                }
                eddy::call_at(at, move || tx.send(()).unwrap());
            })
            .unwrap();
        rx.recv_timeout(PATIENCE).unwrap();
        assert_eq!(*log.lock().unwrap(), (0..200).collect::<Vec<_>>());
    });
}

/// `sleep`, `sleep_until` and `timeout` on a multi-worker runtime, in tasks and in
/// `block_on`: none of them ends before its time.
#[test]
fn sleeps_and_timeouts_never_end_early() {
    with_deadline(PATIENCE * 2, || {
        let rt = rt(2);
        rt.block_on(async {
            let tasks: Vec<_> = (1..=50u64)
                .map(|i| {
                    eddy::spawn(async move {
                        let d = Duration::from_millis(i * 2);
                        let start = Instant::now();
                        eddy::time::sleep(d).await;
                        let took = start.elapsed();
                        assert!(took >= d, "sleep({d:?}) returned after {took:?}");
                        let until = eddy::time() + d;
                        eddy::time::sleep_until(until).await;
                        assert!(Instant::now() >= until, "sleep_until returned early");
                        let start = Instant::now();
                        let r = eddy::time::timeout(d, std::future::pending::<()>()).await;
                        let took = start.elapsed();
                        assert!(r.is_err());
                        assert!(took >= d, "timeout({d:?}) elapsed after {took:?}");
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        });
        // A sleep in block_on itself.
        let start = Instant::now();
        rt.block_on(eddy::time::sleep(Duration::from_millis(30)));
        assert!(start.elapsed() >= Duration::from_millis(30));
    });
}

/// Counts the wakes it is given.
#[derive(Default)]
struct CountingWaker(AtomicUsize);

impl CountingWaker {
    fn wakes(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Pending on its first poll without keeping the waker, ready on the second.
#[derive(Default)]
struct ReadyOnSecondPoll(bool);

impl Future for ReadyOnSecondPoll {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// Polls its inner future with a waker of its own instead of the task's, and reports the
/// first poll.
struct PolledWith<F> {
    inner: Pin<Box<F>>,
    waker: Waker,
    polled: Option<mpsc::Sender<()>>,
}

impl<F: Future> Future for PolledWith<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<F::Output> {
        let waker = self.waker.clone();
        let polled = self.inner.as_mut().poll(&mut Context::from_waker(&waker));
        if let Some(tx) = self.polled.take() {
            let _ = tx.send(());
        }
        polled
    }
}

/// A one-worker runtime on a paused clock, with a blocking job running until the test
/// releases it: until then no deadline can pass, as the clock jumps only when nothing runs.
/// The returned task finishes once the job is released.
fn paused_and_held() -> (
    eddy::Runtime,
    HeldJob,
    eddy::Task<Result<(), eddy::TaskError>>,
) {
    let rt = eddy::Builder::new()
        .workers(1)
        .start_paused(true)
        .build()
        .unwrap();
    let (held, job) = HeldJob::new();
    let blocker = rt.handle().spawn(async { eddy::spawn_blocking(job).await });
    held.wait_started();
    (rt, held, blocker)
}

/// A `sleep` dropped before its deadline, because the `timeout` around it finished first
/// (5,000 times), cancels its timer: once its deadline has passed (a sleep with a later
/// deadline on the same heap has ended), it has woken nobody, and its entry has left the heap.
#[test]
fn a_sleep_dropped_with_its_timeout_never_fires() {
    const TIMEOUTS: usize = 5_000;
    const DELAY: Duration = Duration::from_millis(30);
    with_deadline(PATIENCE * 2, || {
        let (rt, held, blocker) = paused_and_held();
        let waker = Arc::new(CountingWaker::default());
        let w = waker.clone();
        rt.block_on(rt.handle().spawn(async move {
            let waker = Waker::from(w);
            let mut cx = Context::from_waker(&waker);
            for _ in 0..TIMEOUTS {
                // The first poll registers the sleep (with our waker), the second finishes
                // the inner future; the sleep is dropped with the `Timeout`.
                let mut t = Box::pin(eddy::time::timeout(DELAY, ReadyOnSecondPoll::default()));
                assert!(t.as_mut().poll(&mut cx).is_pending());
                assert_eq!(t.as_mut().poll(&mut cx), Poll::Ready(Ok(())));
            }
        }))
        .unwrap();

        // Let the clock jump past every deadline: to this later sleep's, on the same heap.
        held.release();
        rt.block_on(blocker).unwrap().unwrap();
        rt.block_on(async { eddy::time::sleep(DELAY * 2).await });
        assert_eq!(waker.wakes(), 0, "a dropped sleep woke its waker");
        let heap = &rt.metrics().workers[0];
        assert_eq!(
            heap.timers_cancelled, TIMEOUTS as u64,
            "each dropped sleep cancels its timer"
        );
        assert_eq!(heap.timer_heap_size, 0, "dead timers stayed in the heap");
    });
}

/// The `sleep` of a task cancelled while it sleeps is dropped with the task's future and
/// cancels its timer: once its deadline has passed (a later sleep on the same heap has
/// ended), it has woken nobody, and its entry has left the heap. 100 tasks.
#[test]
fn the_sleep_of_a_cancelled_task_never_fires() {
    const TASKS: usize = 100;
    const DELAY: Duration = Duration::from_millis(30);
    with_deadline(PATIENCE * 2, || {
        // A cancelled task drops its future at its next poll, some loop cycles later: the
        // paused clock keeps the deadlines from passing before that.
        let (rt, held, blocker) = paused_and_held();
        let waker = Arc::new(CountingWaker::default());
        let (polled_tx, polled_rx) = mpsc::channel();
        let sleepers: Vec<_> = (0..TASKS)
            .map(|_| {
                rt.handle().spawn(PolledWith {
                    inner: Box::pin(async { eddy::time::sleep(DELAY).await }),
                    waker: Waker::from(waker.clone()),
                    polled: Some(polled_tx.clone()),
                })
            })
            .collect();
        for _ in 0..TASKS {
            polled_rx
                .recv_timeout(PATIENCE)
                .expect("a sleeper was never polled");
        }
        for t in &sleepers {
            t.cancel();
        }
        for t in sleepers {
            assert!(rt.block_on(t).unwrap_err().is_cancelled());
        }

        // Let the clock jump past every deadline: to this later sleep's, on the same heap.
        held.release();
        rt.block_on(blocker).unwrap().unwrap();
        rt.block_on(async { eddy::time::sleep(DELAY * 2).await });
        assert_eq!(
            waker.wakes(),
            0,
            "the sleep of a cancelled task woke its waker"
        );
        let heap = &rt.metrics().workers[0];
        assert_eq!(
            heap.timers_cancelled, TASKS as u64,
            "each dropped sleep cancels its timer"
        );
        assert_eq!(heap.timer_heap_size, 0, "dead timers stayed in the heap");
    });
}

/// asyncio's tidy rule keeps a count of cancelled entries per heap. A `TimerHandle` cancelled
/// after its timer became due (moved to the ready queue) but before it ran must not leave
/// that count inflated: otherwise the heap is rebuilt (O(n)) on every later loop cycle. Such
/// a cancel may cost at most one rebuild, which finds nothing to remove and resets the count.
///
/// 20,000 timers due at once next to 10,000 live one-hour timers on one worker; the first
/// due one cancels all the others, then a 2,000-link `call_soon` chain runs one loop cycle
/// per link.
#[test]
fn cancelling_due_timers_does_not_inflate_the_tidy_count() {
    const LIVE: usize = 10_000;
    const DUE: usize = 20_000;
    const LINKS: usize = 2_000;
    with_deadline(PATIENCE * 2, || {
        let rt = rt(1);
        let (tx, rx) = mpsc::channel();
        rt.handle()
            .call_soon_threadsafe(move || {
                for _ in 0..LIVE {
                    let _live = eddy::call_later(Duration::from_secs(3600), || ());
                }
                // Due at once: the next phase 3 moves them all to the ready queue, where the
                // first to run cancels all the others.
                let handles: Arc<Mutex<Vec<TimerHandle>>> = Arc::default();
                let h2 = handles.clone();
                let now = eddy::time();
                let _first = eddy::call_at(now, move || {
                    for h in h2.lock().unwrap().iter() {
                        h.cancel();
                    }
                    fn link(left: usize, tx: mpsc::Sender<()>) {
                        if left == 0 {
                            tx.send(()).unwrap();
                        } else {
                            eddy::call_soon(move || link(left - 1, tx));
                        }
                    }
                    link(LINKS, tx);
                });
                handles
                    .lock()
                    .unwrap()
                    .extend((1..DUE).map(|_| eddy::call_at(now, || ())));
            })
            .unwrap();
        rx.recv_timeout(PATIENCE).expect("the chain did not finish");
        let heap = &rt.metrics().workers[0];
        assert_eq!(
            heap.timers_cancelled,
            (DUE - 1) as u64,
            "the due timers were cancelled through their handles"
        );
        assert_eq!(heap.timer_heap_size, LIVE, "the live timers are all there");
        assert_eq!(
            heap.timers_cancelled_in_heap, 0,
            "the count stayed inflated"
        );
        assert!(
            heap.timer_heap_rebuilds <= 1,
            "the heap was rebuilt {} times in {LINKS} loop cycles: the count of cancelled \
             entries stayed inflated",
            heap.timer_heap_rebuilds
        );
    });
}

/// Stress for the timer wake paths: 10,000 tasks on 2 workers sleep random short times (0 to
/// 20 ms, several times each); every sleep ends, none early.
#[test]
fn ten_thousand_random_sleeps_all_end() {
    with_deadline(PATIENCE * 2, || {
        let rt = rt(2);
        let early = Arc::new(AtomicUsize::new(0));
        let e = early.clone();
        let done = rt.block_on(async move {
            let tasks: Vec<_> = (0..10_000u64)
                .map(|i| {
                    let e = e.clone();
                    eddy::spawn(async move {
                        let mut rng = Rng::new(i + 1);
                        for _ in 0..3 {
                            let d = Duration::from_micros(rng.below(20_000));
                            let start = Instant::now();
                            eddy::time::sleep(d).await;
                            if start.elapsed() < d {
                                e.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                    })
                })
                .collect();
            let mut done = 0;
            for t in tasks {
                t.await.unwrap();
                done += 1;
            }
            done
        });
        assert_eq!(done, 10_000);
        assert_eq!(early.load(Ordering::SeqCst), 0, "sleeps ended early");
    });
}
