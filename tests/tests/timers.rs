//! Timers: `call_later` / `call_at` / `sleep` ordering, punctuality and cancellation.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use eddy::{Builder, TimerHandle};
use eddy_tests::{wait_until, with_deadline, DropCounter, Rng};

/// 10,000 one-hour timers, all cancelled: none fires, each closure is dropped inside its
/// `cancel()`, and a short timer scheduled afterwards on the same heap still fires promptly.
/// Once from a worker (the free functions, the worker's own heap) and once through a
/// `RuntimeHandle` from a foreign thread.
#[test]
fn ten_thousand_cancelled_timers_never_fire_and_drop_at_cancel() {
    const N: usize = 10_000;
    with_deadline(Duration::from_secs(60), || {
        let rt = Builder::new().workers(2).build().unwrap();
        let fired = Arc::new(AtomicUsize::new(0));

        // From a worker.
        let drops = DropCounter::new();
        let (tx, rx) = mpsc::channel();
        let (d, f) = (drops.clone(), fired.clone());
        rt.handle()
            .call_soon_threadsafe(move || {
                let handles: Vec<TimerHandle> = (0..N)
                    .map(|_| {
                        let token = d.token();
                        let f = f.clone();
                        eddy::call_later(Duration::from_secs(3600), move || {
                            token.touch();
                            f.fetch_add(1, Ordering::SeqCst);
                        })
                    })
                    .collect();
                let mut dropped_at_cancel = true;
                for (i, h) in handles.iter().enumerate() {
                    h.cancel();
                    dropped_at_cancel &= d.count() == i + 1 && h.cancelled();
                }
                let start = Instant::now();
                eddy::call_later(Duration::from_millis(10), move || {
                    tx.send((dropped_at_cancel, start.elapsed())).unwrap();
                });
            })
            .unwrap();
        let (dropped_at_cancel, after) = rx.recv_timeout(Duration::from_secs(20)).unwrap();
        assert!(
            dropped_at_cancel,
            "a closure was not dropped by its cancel()"
        );
        assert_eq!(drops.count(), N);
        assert!(after >= Duration::from_millis(10));
        assert!(
            after < Duration::from_secs(2),
            "a 10 ms timer behind 10,000 cancelled ones took {after:?}"
        );

        // Through a handle, from this (foreign) thread.
        let drops = DropCounter::new();
        let handle = rt.handle();
        let handles: Vec<TimerHandle> = (0..N)
            .map(|_| {
                let token = drops.token();
                let f = fired.clone();
                handle
                    .call_later(Duration::from_secs(3600), move || {
                        token.touch();
                        f.fetch_add(1, Ordering::SeqCst);
                    })
                    .unwrap()
            })
            .collect();
        for (i, h) in handles.iter().enumerate() {
            h.cancel();
            assert_eq!(drops.count(), i + 1, "closure not dropped by cancel()");
            h.cancel();
            assert_eq!(drops.count(), i + 1, "second cancel dropped something");
        }
        let (tx, rx) = mpsc::channel();
        let start = Instant::now();
        handle
            .call_later(Duration::from_millis(10), move || {
                tx.send(()).unwrap();
            })
            .unwrap();
        rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert!(start.elapsed() < Duration::from_secs(2));
        assert_eq!(fired.load(Ordering::SeqCst), 0, "a cancelled timer fired");
    });
}

/// On one worker, 1,000 `call_later` timers with shuffled delays fire in deadline order
/// (`TimerHandle::when`, ties in scheduling order), and none fires before its deadline.
#[test]
fn timers_fire_in_deadline_order_on_one_worker() {
    const N: usize = 1_000;
    with_deadline(Duration::from_secs(60), || {
        let rt = Builder::new().workers(1).build().unwrap();
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
        let whens = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(
            wait_until(Duration::from_secs(20), || log.lock().unwrap().len() == N),
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
    with_deadline(Duration::from_secs(30), || {
        let rt = Builder::new().workers(1).build().unwrap();
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
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(*log.lock().unwrap(), (0..200).collect::<Vec<_>>());
    });
}

/// `sleep`, `sleep_until` and `timeout` on a multi-worker runtime: never early, not very late.
#[test]
fn sleeps_are_punctual() {
    with_deadline(Duration::from_secs(30), || {
        let rt = Builder::new().workers(2).build().unwrap();
        let lateness = rt.block_on(async {
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
                        assert!(Instant::now() >= until);
                        took - d
                    })
                })
                .collect();
            let mut worst = Duration::ZERO;
            for t in tasks {
                worst = worst.max(t.await.unwrap());
            }
            worst
        });
        assert!(
            lateness < Duration::from_millis(500),
            "a sleep was {lateness:?} late"
        );
        // A sleep in block_on itself.
        let start = Instant::now();
        rt.block_on(eddy::time::sleep(Duration::from_millis(30)));
        assert!(start.elapsed() >= Duration::from_millis(30));
    });
}

/// Dropping a pending `sleep` (here: through `timeout` completing first, and through task
/// cancellation) cancels its timer: it does not wake anyone later, and many of them do not
/// slow the heap down.
#[test]
fn dropped_sleeps_do_not_fire() {
    with_deadline(Duration::from_secs(30), || {
        let rt = Builder::new().workers(1).build().unwrap();
        let polls = Arc::new(AtomicUsize::new(0));
        let p = polls.clone();
        rt.block_on(async move {
            for _ in 0..5_000 {
                let r = eddy::time::timeout(Duration::from_millis(30), async {
                    p.fetch_add(1, Ordering::SeqCst);
                })
                .await;
                assert!(r.is_ok());
            }
            // 5,000 dead 30 ms timers are in the heaps now; a 40 ms sleep still works and
            // nothing else happens meanwhile.
            let start = Instant::now();
            eddy::time::sleep(Duration::from_millis(40)).await;
            assert!(start.elapsed() < Duration::from_secs(2));
        });
        assert_eq!(polls.load(Ordering::SeqCst), 5_000);
    });
}

/// asyncio's tidy rule keeps a count of cancelled entries per heap. A `TimerHandle` cancelled
/// after its timer became due (moved to the ready queue) but before it ran must not count as
/// a cancelled entry *still in the heap*: otherwise the count stays inflated forever and the
/// heap is rebuilt (O(n)) on every loop cycle.
///
/// Measured as the time of a 2,000-link `call_soon` chain (one loop cycle per link) next to
/// 10,000 live one-hour timers, with and without 20,000 such cancellations beforehand.
#[test]
fn cancelling_due_timers_does_not_inflate_the_tidy_count() {
    fn chain_time(inflate: bool) -> Duration {
        const LIVE: usize = 10_000;
        const DUE: usize = 20_000;
        const LINKS: usize = 2_000;
        let rt = Builder::new().workers(1).build().unwrap();
        let (tx, rx) = mpsc::channel();
        rt.handle()
            .call_soon_threadsafe(move || {
                let keep: Vec<TimerHandle> = (0..LIVE)
                    .map(|_| eddy::call_later(Duration::from_secs(3600), || ()))
                    .collect();
                std::mem::forget(keep);
                if inflate {
                    // DUE timers due at once. The first to run cancels all the others, which
                    // are already out of the heap (in the ready queue) by then.
                    let handles: Arc<Mutex<Vec<TimerHandle>>> = Arc::default();
                    let h2 = handles.clone();
                    let now = eddy::time();
                    let first = eddy::call_at(now, move || {
                        for h in h2.lock().unwrap().iter() {
                            h.cancel();
                        }
                    });
                    let mut hs = handles.lock().unwrap();
                    hs.extend((1..DUE).map(|_| eddy::call_at(now, || ())));
                    drop(hs);
                    drop(first);
                }
                // Give the due timers one cycle, then time the chain.
                eddy::call_later(Duration::from_millis(20), move || {
                    fn link(left: usize, start: Instant, tx: mpsc::Sender<Duration>) {
                        if left == 0 {
                            tx.send(start.elapsed()).unwrap();
                        } else {
                            eddy::call_soon(move || link(left - 1, start, tx));
                        }
                    }
                    link(LINKS, Instant::now(), tx);
                });
            })
            .unwrap();
        rx.recv_timeout(Duration::from_secs(60)).unwrap()
    }
    with_deadline(Duration::from_secs(100), || {
        let baseline = chain_time(false);
        let inflated = chain_time(true);
        eprintln!("chain: {baseline:?} without, {inflated:?} after cancelling due timers");
        assert!(
            inflated < baseline * 5 + Duration::from_millis(100),
            "cancelling 20,000 already-due timers made every later loop cycle slow: \
             {inflated:?} vs {baseline:?} (the heap's cancelled count stays inflated and the \
             heap is rebuilt on every cycle)"
        );
    });
}

/// Stress for the timer wake paths: 10,000 tasks on 2 workers sleep random short times (0 to
/// 20 ms, several times each); every sleep ends, none early.
#[test]
fn ten_thousand_random_sleeps_all_end() {
    with_deadline(Duration::from_secs(60), || {
        let rt = Builder::new().workers(2).build().unwrap();
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
