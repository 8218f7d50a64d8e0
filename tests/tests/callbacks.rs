//! asyncio's callback API: `call_soon` chains and order, `Handle` cancellation and locations.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use eddy::Builder;
use eddy_tests::{with_deadline, DropCounter};

/// Each callback schedules the next: a chain of 100,000 `eddy::call_soon` completes, and every
/// link runs exactly once.
#[test]
fn chain_of_100_000_call_soon_completes() {
    const LINKS: usize = 100_000;

    fn link(left: usize, count: Arc<AtomicUsize>, done: mpsc::Sender<()>) {
        count.fetch_add(1, Ordering::Relaxed);
        if left == 1 {
            done.send(()).unwrap();
        } else {
            eddy::call_soon(move || link(left - 1, count, done));
        }
    }

    with_deadline(Duration::from_secs(60), || {
        let rt = Builder::new().workers(2).build().unwrap();
        let count = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel();
        let c = count.clone();
        rt.handle()
            .call_soon_threadsafe(move || link(LINKS, c, tx))
            .unwrap();
        rx.recv_timeout(Duration::from_secs(50))
            .expect("the call_soon chain did not complete");
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(count.load(Ordering::Relaxed), LINKS);
    });
}

/// On one worker, callbacks run in the order they were scheduled (asyncio's FIFO ready queue),
/// whether they were scheduled from a callback or from a task.
#[test]
fn call_soon_runs_in_fifo_order_on_one_worker() {
    with_deadline(Duration::from_secs(30), || {
        let rt = Builder::new().workers(1).build().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let l = log.clone();
        rt.handle()
            .call_soon_threadsafe(move || {
                for i in 0..1_000u32 {
                    let l = l.clone();
                    eddy::call_soon(move || l.lock().unwrap().push(i));
                }
                eddy::call_soon(move || tx.send(()).unwrap());
            })
            .unwrap();
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(*log.lock().unwrap(), (0..1_000).collect::<Vec<_>>());

        // From a task: same order, and the callbacks run after the task's poll returns.
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        let task = rt.handle().spawn(async move {
            for i in 0..100u32 {
                let l = l.clone();
                eddy::call_soon(move || l.lock().unwrap().push(i));
            }
            let ran_during_poll = l.lock().unwrap().len();
            let (tx, rx) = async_channel::bounded(1);
            eddy::call_soon(move || tx.try_send(()).unwrap());
            rx.recv().await.unwrap();
            ran_during_poll
        });
        assert_eq!(rt.block_on(task).unwrap(), 0);
        assert_eq!(*log.lock().unwrap(), (0..100).collect::<Vec<_>>());
    });
}

/// A cancelled callback never runs, its closure is dropped inside `cancel()`, and a second
/// `cancel()` changes nothing. Cancelling after the callback ran is a no-op.
#[test]
fn cancel_drops_the_closure_at_once_and_twice_is_harmless() {
    with_deadline(Duration::from_secs(30), || {
        // One worker: while it runs a callback, nothing else can run.
        let rt = Builder::new().workers(1).build().unwrap();
        let drops = DropCounter::new();
        let ran = Arc::new(AtomicUsize::new(0));
        // Cancel from inside the callback that scheduled them: they cannot have run yet.
        let (tx, rx) = mpsc::channel();
        let d = drops.clone();
        let r = ran.clone();
        rt.handle()
            .call_soon_threadsafe(move || {
                let mut handles = Vec::new();
                for _ in 0..100 {
                    let token = d.token();
                    let r = r.clone();
                    handles.push(eddy::call_soon(move || {
                        token.touch();
                        r.fetch_add(1, Ordering::SeqCst);
                    }));
                }
                let mut counts = Vec::new();
                for h in &handles {
                    assert!(!h.cancelled());
                    h.cancel();
                    counts.push(d.count());
                    assert!(h.cancelled());
                }
                // Twice.
                for h in &handles {
                    h.cancel();
                    assert!(h.cancelled());
                }
                tx.send((counts, d.count())).unwrap();
            })
            .unwrap();
        let (counts, after_twice) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        // The n-th cancel dropped the n-th closure right away.
        assert_eq!(counts, (1..=100).collect::<Vec<_>>());
        assert_eq!(after_twice, 100);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(ran.load(Ordering::SeqCst), 0, "a cancelled callback ran");
        assert_eq!(drops.count(), 100);

        // Cancelled from a foreign thread through a threadsafe handle, likewise (the only
        // worker is held in a callback meanwhile).
        let (tx, rx) = mpsc::channel::<()>();
        let (held_tx, held_rx) = mpsc::channel();
        rt.handle()
            .call_soon_threadsafe(move || {
                held_tx.send(()).unwrap();
                let _ = rx.recv_timeout(Duration::from_secs(5));
            })
            .unwrap();
        held_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        let token = drops.token();
        let r = ran.clone();
        let h = rt
            .handle()
            .call_soon_threadsafe(move || {
                token.touch();
                r.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        h.cancel();
        assert_eq!(drops.count(), 101);
        h.cancel();
        assert_eq!(drops.count(), 101);
        drop(tx);

        // After it ran, cancel does nothing and `cancelled()` stays false.
        let (tx, rx) = mpsc::channel();
        let h = rt
            .handle()
            .call_soon_threadsafe(move || tx.send(()).unwrap())
            .unwrap();
        rx.recv_timeout(Duration::from_secs(5)).unwrap();
        std::thread::sleep(Duration::from_millis(10));
        h.cancel();
        assert!(!h.cancelled());
        assert_eq!(ran.load(Ordering::SeqCst), 0);
    });
}

/// Cancelling from another thread while the callback may be starting: the callback runs at
/// most once, and `cancelled()` is true exactly when it did not run (many iterations).
#[test]
fn cancel_racing_with_run_is_consistent() {
    with_deadline(Duration::from_secs(60), || {
        let rt = Builder::new().workers(2).build().unwrap();
        let handle = rt.handle();
        let mut outcomes = [0usize; 2];
        for i in 0..5_000u32 {
            let ran = Arc::new(AtomicUsize::new(0));
            let r = ran.clone();
            let drops = DropCounter::new();
            let token = drops.token();
            let h = if i % 2 == 0 {
                let h = handle
                    .call_soon_threadsafe(move || {
                        token.touch();
                        r.fetch_add(1, Ordering::SeqCst);
                    })
                    .unwrap();
                let c = h.clone();
                std::thread::spawn(move || c.cancel()).join().unwrap();
                Box::new(move || h.cancelled()) as Box<dyn Fn() -> bool>
            } else {
                let h = handle
                    .call_at(eddy::time(), move || {
                        token.touch();
                        r.fetch_add(1, Ordering::SeqCst);
                    })
                    .unwrap();
                for _ in 0..(i % 7) * 20 {
                    std::hint::spin_loop();
                }
                h.cancel();
                Box::new(move || h.cancelled()) as Box<dyn Fn() -> bool>
            };
            // Either it was cancelled (then its closure is gone already), or it ran or will.
            let cancelled = h();
            if cancelled {
                assert_eq!(drops.count(), 1, "iteration {i}: cancelled but not dropped");
            } else {
                assert!(
                    eddy_tests::wait_until(Duration::from_secs(5), || ran.load(Ordering::SeqCst)
                        == 1),
                    "iteration {i}: neither cancelled nor run"
                );
            }
            assert_eq!(h(), cancelled, "iteration {i}: cancelled() changed");
            let runs = ran.load(Ordering::SeqCst);
            assert_eq!(
                runs,
                usize::from(!cancelled),
                "iteration {i}: ran {runs} times, cancelled={cancelled}"
            );
            outcomes[usize::from(cancelled)] += 1;
        }
        // Both outcomes are expected to happen; print them for the record.
        eprintln!("ran: {}, cancelled: {}", outcomes[0], outcomes[1]);
    });
}

/// Cancelling while the callback is running (deterministically: it waits for us) does
/// nothing: it completes, and `cancelled()` stays false.
#[test]
fn cancel_while_running_is_a_no_op() {
    with_deadline(Duration::from_secs(30), || {
        let rt = Builder::new().workers(2).build().unwrap();
        let (started_tx, started_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let (done_tx, done_rx) = mpsc::channel();
        let h = rt
            .handle()
            .call_soon_threadsafe(move || {
                started_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                done_tx.send(()).unwrap();
            })
            .unwrap();
        started_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        h.cancel();
        h.cancel();
        assert!(!h.cancelled());
        go_tx.send(()).unwrap();
        done_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert!(!h.cancelled());
    });
}

/// `Handle::location` is where `call_soon` / `call_soon_threadsafe` was called.
#[test]
fn handles_know_where_they_were_scheduled() {
    let rt = Builder::new().workers(1).build().unwrap();
    let line = line!() + 1;
    let h = rt.handle().call_soon_threadsafe(|| ()).unwrap();
    assert_eq!(h.location().file(), file!());
    assert_eq!(h.location().line(), line);
    let (file, got, expected) = rt.block_on(async {
        let line = line!() + 1;
        let h = eddy::call_soon(|| ());
        let tline = line!() + 1;
        let t = eddy::call_later(Duration::from_secs(60), || ());
        assert_eq!(t.location().line(), tline);
        assert_eq!(t.location().file(), file!());
        t.cancel();
        (h.location().file().to_string(), h.location().line(), line)
    });
    assert_eq!(file, file!());
    assert_eq!(got, expected);
}
