//! Submitting work from threads the runtime does not own: `RuntimeHandle` from foreign
//! threads, wake-ups of parked workers, and `run_forever`/`stop`.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::time::{Duration, Instant};

use eddy::Builder;
use eddy_tests::{wait_until, wait_until_all_workers_sleep, with_deadline, DropCounter, PATIENCE};

/// The calling thread's id, as `/proc/self/task` names it.
fn tid() -> i32 {
    // SAFETY: gettid(2) has no preconditions.
    unsafe { libc::gettid() }
}

/// True while thread `tid` of this process sleeps in the kernel (state `S` in
/// `/proc/self/task/<tid>/stat`): blocked in a wait, neither running nor runnable.
fn is_asleep(tid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap_or_default();
    // The state follows the command name, which is in parentheses and may hold anything.
    stat.rsplit(')')
        .next()
        .and_then(|rest| rest.split_whitespace().next())
        == Some("S")
}

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
                >= TOTAL),
            "only {} of {TOTAL} callbacks ran",
            ran.load(Ordering::Acquire)
        );
        // Once the runtime is gone nothing can run any more: the counts are final.
        drop(rt);
        assert_eq!(ran.load(Ordering::Acquire), TOTAL);
        let expected_sum = (TOTAL as u64) * (TOTAL as u64 - 1) / 2;
        assert_eq!(sum.load(Ordering::Relaxed), expected_sum);
        let wrong: Vec<usize> = (0..TOTAL)
            .filter(|&i| flags[i].load(Ordering::Relaxed) != 1)
            .take(10)
            .collect();
        assert!(wrong.is_empty(), "items not run exactly once: {wrong:?}");
    });
}

/// Counts its drop in `dropped[i]`: the closure of callback `i` holds one.
struct DropFlag {
    dropped: &'static [AtomicU8],
    i: usize,
}

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.dropped[self.i].fetch_add(1, Ordering::Relaxed);
    }
}

/// 1,000,000 `call_soon_threadsafe` calls from 4 foreign threads, every other one cancelled
/// at once by one of 2 other foreign threads, racing the workers that run it: each callback
/// either ran exactly once or was cancelled (never both, never neither), and each closure
/// was dropped exactly once.
#[test]
fn million_threadsafe_callbacks_raced_by_cancels_run_or_cancel_exactly_once() {
    const SUBMITTERS: usize = 4;
    const CANCELLERS: usize = 2;
    const PER_THREAD: usize = 250_000;
    const TOTAL: usize = SUBMITTERS * PER_THREAD;
    const CANCEL_LAG: usize = 2;
    const WINDOW: usize = 16;
    fn leak() -> &'static [AtomicU8] {
        Box::leak((0..TOTAL).map(|_| AtomicU8::new(0)).collect::<Box<[_]>>())
    }
    with_deadline(Duration::from_secs(240), || {
        let rt = Builder::new().workers(2).build().unwrap();
        let (ran, cancelled, dropped) = (leak(), leak(), leak());
        // Callbacks of each submitter that ran or were cancelled.
        let settled: &'static [AtomicUsize; SUBMITTERS] =
            Box::leak(Box::new([const { AtomicUsize::new(0) }; SUBMITTERS]));
        let all_settled = || {
            settled
                .iter()
                .map(|s| s.load(Ordering::Acquire))
                .sum::<usize>()
        };
        let mut to_cancel = Vec::new();
        let cancellers: Vec<_> = (0..CANCELLERS)
            .map(|_| {
                let (tx, rx) = mpsc::sync_channel::<(usize, eddy::Handle)>(4096);
                to_cancel.push(tx);
                std::thread::spawn(move || {
                    for (i, h) in rx {
                        h.cancel();
                        if h.cancelled() {
                            cancelled[i].fetch_add(1, Ordering::Relaxed);
                            settled[i / PER_THREAD].fetch_add(1, Ordering::Release);
                        }
                    }
                })
            })
            .collect();
        let start = Arc::new(Barrier::new(SUBMITTERS));
        let submitters: Vec<_> = (0..SUBMITTERS)
            .map(|t| {
                let to_cancel = to_cancel[t % CANCELLERS].clone();
                let (handle, start) = (rt.handle(), start.clone());
                std::thread::spawn(move || {
                    let mut lagging = std::collections::VecDeque::new();
                    start.wait();
                    for (n, i) in (t * PER_THREAD..(t + 1) * PER_THREAD).enumerate() {
                        // A short queue, so that cancels meet callbacks about to run.
                        while n.saturating_sub(settled[t].load(Ordering::Acquire)) > WINDOW {
                            std::thread::yield_now();
                        }
                        let flag = DropFlag { dropped, i };
                        let h = handle
                            .call_soon_threadsafe(move || {
                                let flag = flag;
                                ran[flag.i].fetch_add(1, Ordering::Relaxed);
                                settled[flag.i / PER_THREAD].fetch_add(1, Ordering::Release);
                            })
                            .expect("runtime is open");
                        if i % 2 == 1 {
                            // Cancelled some submissions later, so that some of these
                            // races are won by the workers.
                            lagging.push_back((i, h));
                            if lagging.len() > CANCEL_LAG {
                                to_cancel.send(lagging.pop_front().unwrap()).unwrap();
                            }
                        }
                    }
                    lagging.into_iter().for_each(|c| to_cancel.send(c).unwrap());
                })
            })
            .collect();
        drop(to_cancel);
        submitters.into_iter().for_each(|s| s.join().unwrap());
        cancellers.into_iter().for_each(|c| c.join().unwrap());
        assert!(
            wait_until(Duration::from_secs(120), || all_settled() >= TOTAL),
            "only {} of {TOTAL} callbacks ran or were cancelled",
            all_settled()
        );
        // Once the runtime is gone nothing can run any more: the counts are final.
        drop(rt);
        let wrong: Vec<(usize, u8, u8, u8)> = (0..TOTAL)
            .map(|i| {
                let load = |a: &[AtomicU8]| a[i].load(Ordering::Relaxed);
                (i, load(ran), load(cancelled), load(dropped))
            })
            .filter(|&(_, ran, cancelled, dropped)| ran + cancelled != 1 || dropped != 1)
            .take(10)
            .collect();
        assert!(
            wrong.is_empty(),
            "(item, ran, cancelled, dropped) not run-or-cancelled and dropped exactly once: {wrong:?}"
        );
        let cancels = (0..TOTAL)
            .filter(|&i| cancelled[i].load(Ordering::Relaxed) == 1)
            .count();
        eprintln!("{cancels} of {} cancels won their race", TOTAL / 2);
    });
}

/// A worker that went to sleep is woken by a foreign submission, every time: 2,000 rounds of
/// "submit, wait for it to run", and every 16th round starts only once every worker is
/// asleep. A lost wake-up shows up as a round that does not finish.
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
                .recv_timeout(PATIENCE)
                .unwrap_or_else(|_| panic!("round {round}: submission never ran (lost wake-up)"));
            assert_eq!(got, round);
            if round % 16 == 0 {
                assert!(
                    wait_until_all_workers_sleep(&rt, PATIENCE),
                    "round {round}: the workers never went to sleep"
                );
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

/// `RuntimeHandle::call_later` / `call_at` from a foreign thread all fire, none before its time.
#[test]
fn foreign_timers_fire_on_time() {
    with_deadline(PATIENCE * 2, || {
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
        // Ends when every callback has run and dropped its sender.
        let mut got = Vec::new();
        while let Ok((i, when)) = rx.recv_timeout(PATIENCE) {
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
        }
    });
}

/// `run_forever` returns after `stop()` from a foreign thread, not before; a `stop()` that
/// came first releases the next `run_forever` at once; each `stop()` releases one. Each stop
/// that must find `run_forever` waiting comes only once the waiting thread is asleep.
#[test]
fn run_forever_returns_after_stop_from_a_foreign_thread() {
    with_deadline(PATIENCE, || {
        let rt = Builder::new().workers(2).build().unwrap();
        let me = tid();
        let stopped = Arc::new(AtomicBool::new(false));
        let stopper = {
            let handle = rt.handle();
            let stopped = stopped.clone();
            std::thread::spawn(move || {
                wait_until(PATIENCE, || is_asleep(me));
                stopped.store(true, Ordering::SeqCst);
                handle.stop();
            })
        };
        rt.run_forever();
        assert!(
            stopped.load(Ordering::SeqCst),
            "run_forever returned before stop()"
        );
        stopper.join().unwrap();

        // A stop() that came first: the next run_forever returns at once (or the deadline
        // above fails the test).
        rt.handle().stop();
        rt.run_forever();

        // The request was consumed: the next run_forever waits again (for a stop from a
        // callback this time).
        let stopped = Arc::new(AtomicBool::new(false));
        let (handle, flag) = (rt.handle(), stopped.clone());
        rt.handle()
            .call_soon_threadsafe(move || {
                wait_until(PATIENCE, || is_asleep(me));
                flag.store(true, Ordering::SeqCst);
                handle.stop();
            })
            .unwrap();
        rt.run_forever();
        assert!(
            stopped.load(Ordering::SeqCst),
            "run_forever returned without a new stop()"
        );
    });
}

/// Foreign threads submit callbacks in a loop while the runtime is dropped, until a
/// submission fails. Returns, per submitter, whether the closure of its rejected submission
/// ran; checks that every closure was dropped exactly once and ran at most once.
fn race_submissions_with_shutdown() -> Vec<bool> {
    let rt = Builder::new().workers(2).build().unwrap();
    let drops = DropCounter::new();
    let submitted = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let handle = rt.handle();
            let drops = drops.clone();
            let submitted = submitted.clone();
            std::thread::spawn(move || {
                // How many times each closure of this thread ran, in submission order.
                let mut runs: Vec<Arc<AtomicU8>> = Vec::new();
                loop {
                    let token = drops.token();
                    let this_ran = Arc::new(AtomicU8::new(0));
                    runs.push(this_ran.clone());
                    submitted.fetch_add(1, Ordering::SeqCst);
                    let res = handle.call_soon_threadsafe(move || {
                        token.touch();
                        this_ran.fetch_add(1, Ordering::SeqCst);
                    });
                    if res.is_err() {
                        return runs;
                    }
                }
            })
        })
        .collect();
    // Shut down while both threads are submitting.
    assert!(wait_until(PATIENCE, || submitted.load(Ordering::SeqCst) >= 200));
    drop(rt);
    let runs: Vec<Vec<Arc<AtomicU8>>> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let submitted = submitted.load(Ordering::SeqCst);
    assert!(
        wait_until(PATIENCE, || drops.count() == submitted),
        "{submitted} closures submitted, {} dropped",
        drops.count()
    );
    assert_eq!(drops.count(), submitted, "a closure was dropped twice");
    assert_eq!(runs.iter().map(Vec::len).sum::<usize>(), submitted);
    for (t, runs) in runs.iter().enumerate() {
        for (i, r) in runs.iter().enumerate() {
            let r = r.load(Ordering::SeqCst);
            assert!(r <= 1, "thread {t}: closure {i} ran {r} times");
        }
    }
    runs.iter()
        .map(|runs| runs.last().unwrap().load(Ordering::SeqCst) == 1)
        .collect()
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
