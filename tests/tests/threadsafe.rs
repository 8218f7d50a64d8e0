//! Submitting work from threads the runtime does not own: `RuntimeHandle` from foreign
//! threads, wake-ups of parked workers, and `run_forever`/`stop`.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::time::{Duration, Instant};

use eddy::Builder;
use eddy_tests::{wait_until, with_deadline, DropCounter};

/// 1,000,000 `call_soon_threadsafe` calls from 4 foreign threads: every callback runs exactly
/// once (a flag per item, a counter and a sum of indices).
#[test]
fn million_threadsafe_callbacks_from_four_threads_run_exactly_once() {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 250_000;
    const TOTAL: usize = THREADS * PER_THREAD;
    with_deadline(Duration::from_secs(120), || {
        let rt = Builder::new().workers(2).build().unwrap();
        let flags: &'static [AtomicU8] =
            Box::leak((0..TOTAL).map(|_| AtomicU8::new(0)).collect::<Box<[_]>>());
        let ran: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
        let sum: &'static AtomicU64 = Box::leak(Box::new(AtomicU64::new(0)));
        let start = Arc::new(Barrier::new(THREADS));
        let submitters: Vec<_> = (0..THREADS)
            .map(|t| {
                let handle = rt.handle();
                let start = start.clone();
                std::thread::spawn(move || {
                    start.wait();
                    let mine = flags.iter().enumerate().skip(t * PER_THREAD);
                    for (i, flag) in mine.take(PER_THREAD) {
                        handle
                            .call_soon_threadsafe(move || {
                                flag.fetch_add(1, Ordering::Relaxed);
                                sum.fetch_add(i as u64, Ordering::Relaxed);
                                ran.fetch_add(1, Ordering::Release);
                            })
                            .expect("runtime is open");
                    }
                })
            })
            .collect();
        for s in submitters {
            s.join().unwrap();
        }
        assert!(
            wait_until(Duration::from_secs(60), || ran.load(Ordering::Acquire)
                == TOTAL),
            "only {} of {TOTAL} callbacks ran",
            ran.load(Ordering::Acquire)
        );
        // Anything run twice would show up a little later.
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(ran.load(Ordering::Acquire), TOTAL);
        let expected_sum = (TOTAL as u64) * (TOTAL as u64 - 1) / 2;
        assert_eq!(sum.load(Ordering::Relaxed), expected_sum);
        let wrong: Vec<usize> = (0..TOTAL)
            .filter(|&i| flags[i].load(Ordering::Relaxed) != 1)
            .take(10)
            .collect();
        assert!(wrong.is_empty(), "items not run exactly once: {wrong:?}");
        drop(rt);
    });
}

/// A worker that went to sleep is woken by a foreign submission, every time: 2,000 rounds of
/// "submit, wait for it to run" with a short pause so that the workers park in between. A
/// lost wake-up shows up as a round that does not finish.
#[test]
fn parked_workers_are_always_woken_by_foreign_submissions() {
    with_deadline(Duration::from_secs(60), || {
        let rt = Builder::new().workers(2).build().unwrap();
        let handle = rt.handle();
        for round in 0..2_000u32 {
            let (tx, rx) = mpsc::channel();
            if round % 2 == 0 {
                handle
                    .call_soon_threadsafe(move || tx.send(round).unwrap())
                    .unwrap();
            } else {
                drop(handle.spawn(async move { tx.send(round).unwrap() }));
            }
            let got = rx
                .recv_timeout(Duration::from_secs(5))
                .unwrap_or_else(|_| panic!("round {round}: submission never ran (lost wake-up)"));
            assert_eq!(got, round);
            if round % 16 == 0 {
                // Let every worker park.
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    });
}

/// Ping-pong between a foreign thread and tasks: each side waits for the other, 5,000 times.
#[test]
fn ping_pong_between_foreign_thread_and_tasks() {
    with_deadline(Duration::from_secs(60), || {
        let rt = Builder::new().workers(2).build().unwrap();
        let (to_rt, from_test) = async_channel::bounded::<u32>(1);
        let (to_test, from_rt) = async_channel::bounded::<u32>(1);
        let echo = rt.handle().spawn(async move {
            let mut n = 0u32;
            while let Ok(v) = from_test.recv().await {
                to_test.send(v + 1).await.unwrap();
                n += 1;
            }
            n
        });
        for i in 0..5_000u32 {
            to_rt.send_blocking(i).unwrap();
            assert_eq!(from_rt.recv_blocking().unwrap(), i + 1);
        }
        drop(to_rt);
        assert_eq!(rt.block_on(echo).unwrap(), 5_000);
    });
}

/// `RuntimeHandle::call_later` / `call_at` from a foreign thread fire, not before their time.
#[test]
fn foreign_timers_fire_on_time() {
    with_deadline(Duration::from_secs(30), || {
        let rt = Builder::new().workers(2).build().unwrap();
        let handle = rt.handle();
        let (tx, rx) = mpsc::channel();
        let start = Instant::now();
        for i in 0..20u64 {
            let tx = tx.clone();
            let t = handle
                .call_later(Duration::from_millis(10 + i * 5), move || {
                    tx.send((i, Instant::now())).unwrap();
                })
                .unwrap();
            assert!(t.when() >= start + Duration::from_millis(10 + i * 5));
        }
        let tx2 = tx.clone();
        let at = Instant::now() + Duration::from_millis(30);
        handle
            .call_at(at, move || tx2.send((99, Instant::now())).unwrap())
            .unwrap();
        drop(tx);
        let mut got = Vec::new();
        while let Ok((i, when)) = rx.recv_timeout(Duration::from_secs(5)) {
            got.push((i, when));
        }
        assert_eq!(got.len(), 21, "some timers never fired: {got:?}");
        for (i, when) in got {
            let due = if i == 99 {
                at
            } else {
                start + Duration::from_millis(10 + i * 5)
            };
            assert!(when >= due, "timer {i} fired early");
            assert!(
                when < due + Duration::from_secs(1),
                "timer {i} fired {:?} late",
                when - due
            );
        }
    });
}

/// `run_forever` returns after `stop()` from a foreign thread, not before; a `stop()` that
/// came first releases the next `run_forever` at once; each `stop()` releases one.
#[test]
fn run_forever_returns_after_stop_from_a_foreign_thread() {
    with_deadline(Duration::from_secs(30), || {
        let rt = Builder::new().workers(2).build().unwrap();
        let handle = rt.handle();
        let start = Instant::now();
        let stopper = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            handle.stop();
        });
        rt.run_forever();
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_millis(100),
            "run_forever returned before stop(): {waited:?}"
        );
        stopper.join().unwrap();

        // A stop() that came first: the next run_forever returns at once.
        rt.handle().stop();
        let start = Instant::now();
        rt.run_forever();
        assert!(start.elapsed() < Duration::from_secs(2));

        // The request was consumed: the next run_forever waits again (for a stop from a
        // callback this time).
        let handle = rt.handle();
        let stop_after = Duration::from_millis(50);
        rt.handle()
            .call_later(stop_after, move || handle.stop())
            .unwrap();
        let start = Instant::now();
        rt.run_forever();
        assert!(start.elapsed() >= stop_after);
    });
}

/// Foreign threads submit callbacks in a loop while the runtime is dropped, until a
/// submission fails. Returns, per submitter, whether the closure of its rejected submission
/// ran; checks that every closure was dropped exactly once (after running or without).
fn race_submissions_with_shutdown() -> Vec<bool> {
    let rt = Builder::new().workers(2).build().unwrap();
    let drops = DropCounter::new();
    let ran = Arc::new(AtomicUsize::new(0));
    let submitted = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let handle = rt.handle();
            let drops = drops.clone();
            let ran = ran.clone();
            let submitted = submitted.clone();
            std::thread::spawn(move || loop {
                let token = drops.token();
                let ran = ran.clone();
                let this_ran = Arc::new(AtomicBool::new(false));
                let flag = this_ran.clone();
                submitted.fetch_add(1, Ordering::SeqCst);
                let res = handle.call_soon_threadsafe(move || {
                    token.touch();
                    flag.store(true, Ordering::SeqCst);
                    ran.fetch_add(1, Ordering::SeqCst);
                });
                if res.is_err() {
                    break this_ran;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(5));
    drop(rt);
    let rejected_ran: Vec<bool> = threads
        .into_iter()
        .map(|t| t.join().unwrap().load(Ordering::SeqCst))
        .collect();
    assert!(
        wait_until(Duration::from_secs(5), || drops.count()
            == submitted.load(Ordering::SeqCst)),
        "{} closures submitted, {} dropped",
        submitted.load(Ordering::SeqCst),
        drops.count()
    );
    assert!(ran.load(Ordering::SeqCst) <= submitted.load(Ordering::SeqCst));
    rejected_ran
}

/// Dropping a runtime while foreign threads still submit: every closure is run or dropped,
/// none is lost (leaked), and the submitters see `Closed` in the end.
#[test]
fn submissions_racing_with_shutdown_are_run_or_dropped() {
    with_deadline(Duration::from_secs(60), || {
        for _ in 0..20 {
            race_submissions_with_shutdown();
        }
    });
}

/// `call_soon_threadsafe` documents that on `Err(Closed)` the closure "is dropped, never run".
/// Racing submissions with shutdown (100 runtimes), a rejected closure must never have run.
#[test]
fn rejected_submissions_never_run() {
    with_deadline(Duration::from_secs(60), || {
        for round in 0..100 {
            let rejected_ran = race_submissions_with_shutdown();
            assert!(
                !rejected_ran.contains(&true),
                "round {round}: call_soon_threadsafe returned Err(Closed) but its closure ran"
            );
        }
    });
}
