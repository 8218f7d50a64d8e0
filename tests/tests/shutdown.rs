//! Shutdown: drops everything pending, does not wait for a stuck worker past its timeout,
//! and leaves no awaiter hanging.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use eddy::{Builder, Task};
use eddy_tests::{spin_for, wait_until, with_deadline, Anchors, DropCounter, HeldJob, PATIENCE};

const TASKS: usize = 100_000;
const TIMERS: usize = 100_000;

/// 100,000 pending tasks (idle: awaiting `pending()` or a channel nobody sends on, each holding
/// a drop token) and 100,000 pending one-hour timers: `shutdown_timeout` returns (without
/// hanging) and everything is dropped. Awaiting one of the tasks afterwards (from another
/// runtime, or a plain executor) gives `Err(Cancelled)`.
#[test]
fn shutdown_with_100_000_pending_tasks_and_timers_drops_all() {
    with_deadline(PATIENCE * 4, || {
        let rt = Builder::new().workers(2).build().unwrap();
        let handle = rt.handle();
        let drops = DropCounter::new();
        let polled = Arc::new(AtomicUsize::new(0));
        let (never_tx, never_rx) = async_channel::bounded::<()>(1);
        let mut tasks: Vec<Task<()>> = Vec::with_capacity(TASKS);
        for i in 0..TASKS {
            let token = drops.token();
            let polled = polled.clone();
            let rx = never_rx.clone();
            tasks.push(handle.spawn(async move {
                token.touch();
                polled.fetch_add(1, Ordering::Relaxed);
                if i % 2 == 0 {
                    std::future::pending::<()>().await;
                } else {
                    let _ = rx.recv().await;
                }
            }));
        }
        drop(never_rx);
        for _ in 0..TIMERS {
            let token = drops.token();
            handle
                .call_later(Duration::from_secs(3600), move || token.touch())
                .unwrap();
        }
        // 100,000 first polls: twice the usual patience.
        assert!(
            wait_until(PATIENCE * 2, || polled.load(Ordering::Relaxed) == TASKS),
            "only {} tasks were polled",
            polled.load(Ordering::Relaxed)
        );
        assert_eq!(drops.count(), 0);

        rt.shutdown_timeout(PATIENCE);
        assert_eq!(drops.count(), TASKS + TIMERS, "not everything was dropped");
        assert!(handle.is_closed());
        drop(never_tx);

        // Awaiting tasks of the dead runtime: Cancelled, no hang.
        let other = Builder::new().workers(1).build().unwrap();
        let mut tasks = tasks.into_iter();
        for t in tasks.by_ref().take(100) {
            assert!(other.block_on(t).unwrap_err().is_cancelled());
        }
        for t in tasks {
            assert!(futures_lite::future::block_on(t)
                .unwrap_err()
                .is_cancelled());
        }
    });
}

/// `Drop` of the runtime does the same as `shutdown_timeout`, including for tasks sleeping on
/// timers and for tasks and callbacks that were queued but never ran (they do not run after
/// the close; they are dropped and the tasks resolve to `Cancelled`).
#[test]
fn dropping_the_runtime_drops_queued_and_sleeping_work() {
    with_deadline(PATIENCE * 2, || {
        // No stand-ins for held workers: a spare would run the work this test keeps queued.
        let rt = Builder::new().workers(2).spare_workers(0).build().unwrap();
        let handle = rt.handle();
        let drops = DropCounter::new();
        let ran = Arc::new(AtomicUsize::new(0));
        // Tasks asleep on one-hour timers.
        let asleep = Arc::new(AtomicUsize::new(0));
        let sleepers: Vec<_> = (0..1_000)
            .map(|_| {
                let token = drops.token();
                let asleep = asleep.clone();
                handle.spawn(async move {
                    token.touch();
                    asleep.fetch_add(1, Ordering::SeqCst);
                    eddy::time::sleep(Duration::from_secs(3600)).await;
                })
            })
            .collect();
        assert!(wait_until(PATIENCE, || asleep.load(Ordering::SeqCst) == 1_000));
        // Hold both workers so that what comes next stays queued.
        let held: Vec<HeldJob> = (0..2)
            .map(|_| {
                let (held, job) = HeldJob::new();
                handle.call_soon_threadsafe(job).unwrap();
                held
            })
            .collect();
        for h in &held {
            h.wait_started();
        }
        let mut queued = Vec::new();
        for _ in 0..1_000 {
            let token = drops.token();
            let r = ran.clone();
            queued.push(handle.spawn(async move {
                token.touch();
                r.fetch_add(1, Ordering::SeqCst);
            }));
            let token = drops.token();
            let r = ran.clone();
            handle
                .call_soon_threadsafe(move || {
                    token.touch();
                    r.fetch_add(1, Ordering::SeqCst);
                })
                .unwrap();
        }
        // Release the workers only once the drop below has closed the runtime.
        let h = handle.clone();
        let releaser = std::thread::spawn(move || {
            assert!(wait_until(PATIENCE, || h.is_closed()), "never closed");
            drop(held);
        });
        drop(rt);
        releaser.join().unwrap();
        assert_eq!(drops.count(), 3_000);
        assert_eq!(
            ran.load(Ordering::SeqCst),
            0,
            "queued work ran after the close"
        );
        for t in queued.into_iter().chain(sleepers) {
            assert!(futures_lite::future::block_on(t)
                .unwrap_err()
                .is_cancelled());
        }
    });
}

/// `shutdown_timeout` with a worker stuck in a callback (that the test holds until
/// `shutdown_timeout` has returned) waits for the timeout, then returns without it; the
/// callback finishes later, and the work queued behind it is all gone by then (run by a
/// sibling that stole it before the close, or dropped).
#[test]
fn shutdown_timeout_does_not_wait_for_a_stuck_worker() {
    const TIMEOUT: Duration = Duration::from_millis(100);
    with_deadline(PATIENCE * 2, || {
        let rt = Builder::new().workers(2).build().unwrap();
        let handle = rt.handle();
        let drops = DropCounter::new();
        let (started_tx, started_rx) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let finished = Arc::new(AtomicUsize::new(0));
        let (f, d) = (finished.clone(), drops.clone());
        handle
            .call_soon_threadsafe(move || {
                // Work queued behind us on this worker.
                for _ in 0..100 {
                    let token = d.token();
                    eddy::call_soon(move || token.touch());
                }
                started_tx.send(()).unwrap();
                // Until the test lets go (or gives up and drops its end).
                let _ = released.recv();
                f.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        started_rx.recv_timeout(PATIENCE).unwrap();
        let start = Instant::now();
        rt.shutdown_timeout(TIMEOUT);
        let took = start.elapsed();
        assert!(took >= TIMEOUT, "returned after {took:?}");
        assert_eq!(finished.load(Ordering::SeqCst), 0);
        assert!(handle.is_closed());
        drop(release);
        assert!(wait_until(PATIENCE, || finished.load(Ordering::SeqCst)
            == 1
            && drops.count() == 100));
    });
}

/// Pending pinned (`spawn_local`) tasks are dropped at shutdown on their own worker thread.
#[test]
fn pending_local_tasks_are_dropped_on_their_worker_at_shutdown() {
    struct RecordDropThread(Arc<std::sync::Mutex<Vec<String>>>);
    impl Drop for RecordDropThread {
        fn drop(&mut self) {
            let name = std::thread::current().name().unwrap_or("?").to_string();
            self.0.lock().unwrap().push(name);
        }
    }
    with_deadline(PATIENCE * 2, || {
        let rt = Builder::new().workers(2).thread_name("sd").build().unwrap();
        let anchors = Anchors::new(&rt, "sd", 2);
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let polled = Arc::new(AtomicUsize::new(0));
        let (_keep, never) = async_channel::bounded::<()>(1);
        for w in 0..2 {
            for _ in 0..50 {
                let log = log.clone();
                let never = never.clone();
                let polled = polled.clone();
                anchors.run(w, move || async move {
                    let guard = RecordDropThread(log);
                    let rc = std::rc::Rc::new(guard);
                    drop(eddy::spawn_local(async move {
                        let _rc = rc;
                        polled.fetch_add(1, Ordering::SeqCst);
                        let _ = never.recv().await;
                    }));
                });
            }
        }
        // Every local task is pending on its worker.
        assert!(wait_until(PATIENCE, || polled.load(Ordering::SeqCst) == 100));
        drop(rt);
        let log = log.lock().unwrap();
        assert_eq!(log.len(), 100, "not every local task was dropped");
        let on_0 = log.iter().filter(|n| *n == "sd-0").count();
        let on_1 = log.iter().filter(|n| *n == "sd-1").count();
        assert_eq!(
            (on_0, on_1),
            (50, 50),
            "dropped on the wrong threads: {log:?}"
        );
    });
}

/// A pinned task that keeps being woken from a foreign thread while the runtime shuts down is
/// still dropped (on its worker) by the time shutdown returns, and awaiting it does not hang.
/// (A wake that arrives after `close` must not strand the task.)
#[test]
fn local_task_woken_during_shutdown_is_dropped() {
    with_deadline(PATIENCE * 4, || {
        for round in 0..200 {
            let rt = Builder::new()
                .workers(2)
                .thread_name("sdw")
                .build()
                .unwrap();
            let anchors = Anchors::new(&rt, "sdw", 2);
            let drops = DropCounter::new();
            let (tx, rx) = async_channel::unbounded::<u64>();
            let (task_tx, task_rx) = mpsc::channel();
            let token = drops.token();
            let received = Arc::new(AtomicUsize::new(0));
            let got = received.clone();
            anchors.run(round % 2, move || async move {
                let t = eddy::spawn_local(async move {
                    let _token = token;
                    let _not_send = std::rc::Rc::new(());
                    let mut n = 0;
                    while let Ok(v) = rx.recv().await {
                        got.fetch_add(1, Ordering::Relaxed);
                        n += v;
                    }
                    n
                });
                task_tx.send(t).unwrap();
            });
            let task = task_rx.recv_timeout(PATIENCE).unwrap();
            let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let s = stop.clone();
            let sender = std::thread::spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    if tx.try_send(1).is_err() {
                        break;
                    }
                    spin_for(Duration::from_micros(2));
                }
                tx
            });
            // The sender is waking the task now: shut down in the middle of that.
            assert!(wait_until(PATIENCE, || received.load(Ordering::Relaxed) > 0));
            drop(anchors);
            drop(rt);
            stop.store(true, Ordering::Relaxed);
            let tx = sender.join().unwrap();
            drop(tx);
            assert_eq!(
                drops.count(),
                1,
                "round {round}: the local task was not dropped"
            );
            let r = with_deadline(PATIENCE, move || futures_lite::future::block_on(task));
            assert!(r.unwrap_err().is_cancelled());
        }
    });
}

/// Work submitted from inside destructors that run during shutdown is refused cleanly.
#[test]
fn destructors_running_at_shutdown_may_touch_the_runtime() {
    struct SubmitOnDrop(eddy::RuntimeHandle, Arc<AtomicUsize>);
    impl Drop for SubmitOnDrop {
        fn drop(&mut self) {
            let ran = self.1.clone();
            if self
                .0
                .call_soon_threadsafe(move || {
                    ran.fetch_add(1, Ordering::SeqCst);
                })
                .is_err()
            {
                self.1.fetch_add(1000, Ordering::SeqCst);
            }
            drop(self.0.spawn(async {}));
        }
    }
    with_deadline(PATIENCE * 2, || {
        let rt = Builder::new().workers(2).build().unwrap();
        let refused = Arc::new(AtomicUsize::new(0));
        let polled = Arc::new(AtomicUsize::new(0));
        for _ in 0..100 {
            let guard = SubmitOnDrop(rt.handle(), refused.clone());
            let polled = polled.clone();
            drop(rt.handle().spawn(async move {
                let _guard = guard;
                polled.fetch_add(1, Ordering::SeqCst);
                std::future::pending::<()>().await;
            }));
        }
        // Every task is pending, so its guard is dropped by the shutdown.
        assert!(wait_until(PATIENCE, || polled.load(Ordering::SeqCst) == 100));
        drop(rt);
        assert_eq!(refused.load(Ordering::SeqCst), 100 * 1000);
    });
}
