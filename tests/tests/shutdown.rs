//! Shutdown: prompt, drops everything pending, and leaves no awaiter hanging.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use eddy::{Builder, Task};
use eddy_tests::{spin_for, wait_until, with_deadline, Anchors, DropCounter};

const TASKS: usize = 100_000;
const TIMERS: usize = 100_000;

/// 100,000 pending tasks (idle: awaiting `pending()` or a channel nobody sends on, each holding
/// a drop token) and 100,000 pending one-hour timers: `shutdown_timeout` returns promptly and
/// everything is dropped. Awaiting one of the tasks afterwards (from another runtime, or a
/// plain executor) gives `Err(Cancelled)`.
#[test]
fn shutdown_with_100_000_pending_tasks_and_timers_is_prompt_and_drops_all() {
    with_deadline(Duration::from_secs(120), || {
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
        assert!(
            wait_until(Duration::from_secs(60), || polled.load(Ordering::Relaxed)
                == TASKS),
            "only {} tasks were polled",
            polled.load(Ordering::Relaxed)
        );
        assert_eq!(drops.count(), 0);

        let start = Instant::now();
        rt.shutdown_timeout(Duration::from_secs(10));
        let took = start.elapsed();
        eprintln!("shutdown took {took:?}");
        assert!(took < Duration::from_secs(5), "shutdown took {took:?}");
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
    with_deadline(Duration::from_secs(60), || {
        let rt = Builder::new().workers(2).build().unwrap();
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
        assert!(wait_until(Duration::from_secs(10), || asleep
            .load(Ordering::SeqCst)
            == 1_000));
        // Hold both workers so that what comes next stays queued.
        let (release_tx, release_rx) = async_channel::bounded::<()>(1);
        let held = Arc::new(AtomicUsize::new(0));
        for _ in 0..2 {
            let rx = release_rx.clone();
            let held = held.clone();
            handle
                .call_soon_threadsafe(move || {
                    held.fetch_add(1, Ordering::SeqCst);
                    let _ = rx.recv_blocking();
                })
                .unwrap();
        }
        assert!(wait_until(Duration::from_secs(5), || held
            .load(Ordering::SeqCst)
            == 2));
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
        // Release the workers only after the drop below has closed the runtime.
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(release_tx);
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

/// `shutdown_timeout` with a worker stuck in a long callback returns after about the timeout,
/// not after the callback; the stuck worker drops its own leftovers when it finishes.
#[test]
fn shutdown_timeout_does_not_wait_for_a_stuck_worker() {
    with_deadline(Duration::from_secs(30), || {
        let rt = Builder::new().workers(2).build().unwrap();
        let handle = rt.handle();
        let drops = DropCounter::new();
        let (started_tx, started_rx) = mpsc::channel();
        let finished = Arc::new(AtomicUsize::new(0));
        let f = finished.clone();
        let d = drops.clone();
        handle
            .call_soon_threadsafe(move || {
                // Work queued behind us on this worker.
                for _ in 0..100 {
                    let token = d.token();
                    eddy::call_soon(move || token.touch());
                }
                started_tx.send(()).unwrap();
                std::thread::sleep(Duration::from_millis(1_000));
                f.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        started_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        let start = Instant::now();
        rt.shutdown_timeout(Duration::from_millis(100));
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(100),
            "returned after {took:?}"
        );
        assert!(
            took < Duration::from_millis(800),
            "waited for the stuck worker: {took:?}"
        );
        assert!(handle.is_closed());
        // The stuck callback finishes later, and the leftovers are dropped (by the sibling
        // that stole them, or by the stuck worker on its way out).
        assert!(wait_until(Duration::from_secs(5), || finished
            .load(Ordering::SeqCst)
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
    with_deadline(Duration::from_secs(30), || {
        let rt = Builder::new().workers(2).thread_name("sd").build().unwrap();
        let anchors = Anchors::new(&rt, "sd", 2);
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (_keep, never) = async_channel::bounded::<()>(1);
        for w in 0..2 {
            for _ in 0..50 {
                let log = log.clone();
                let never = never.clone();
                anchors.run(w, move || async move {
                    let guard = RecordDropThread(log);
                    let rc = std::rc::Rc::new(guard);
                    drop(eddy::spawn_local(async move {
                        let _rc = rc;
                        let _ = never.recv().await;
                    }));
                });
            }
        }
        std::thread::sleep(Duration::from_millis(50));
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
    with_deadline(Duration::from_secs(60), || {
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
            anchors.run(round % 2, move || async move {
                let t = eddy::spawn_local(async move {
                    let _token = token;
                    let _not_send = std::rc::Rc::new(());
                    let mut n = 0;
                    while let Ok(v) = rx.recv().await {
                        n += v;
                    }
                    n
                });
                task_tx.send(t).unwrap();
            });
            let task = task_rx.recv_timeout(Duration::from_secs(5)).unwrap();
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
            std::thread::sleep(Duration::from_millis(5));
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
            let r = with_deadline(Duration::from_secs(5), move || {
                futures_lite::future::block_on(task)
            });
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
    with_deadline(Duration::from_secs(30), || {
        let rt = Builder::new().workers(2).build().unwrap();
        let refused = Arc::new(AtomicUsize::new(0));
        for _ in 0..100 {
            let guard = SubmitOnDrop(rt.handle(), refused.clone());
            drop(rt.handle().spawn(async move {
                let _guard = guard;
                std::future::pending::<()>().await;
            }));
        }
        std::thread::sleep(Duration::from_millis(50));
        drop(rt);
        assert_eq!(refused.load(Ordering::SeqCst), 100 * 1000);
    });
}
