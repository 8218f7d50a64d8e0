//! asyncio's callback API: `call_soon` chains and order, `Handle` cancellation and locations.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use eddy_tests::{rt, wait_until, with_deadline, DropCounter, HeldJob, PATIENCE};

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

    with_deadline(PATIENCE * 2, || {
        let rt = rt(2);
        let count = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel();
        let c = count.clone();
        rt.handle()
            .call_soon_threadsafe(move || link(LINKS, c, tx))
            .unwrap();
        rx.recv_timeout(PATIENCE)
            .expect("the call_soon chain did not complete");
        assert_eq!(count.load(Ordering::Relaxed), LINKS);
    });
}

/// On one worker, callbacks run in the order they were scheduled (asyncio's FIFO ready queue),
/// whether they were scheduled from a callback or from a task.
#[test]
fn call_soon_runs_in_fifo_order_on_one_worker() {
    with_deadline(PATIENCE * 2, || {
        let rt = rt(1);
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
        rx.recv_timeout(PATIENCE).unwrap();
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
/// `cancel()` changes nothing. Cancelling after the callback ran is a no-op. "Never runs" is
/// checked by a callback scheduled after the cancelled ones on the only worker: in FIFO
/// order they would have run before it.
#[test]
fn cancel_drops_the_closure_at_once_and_twice_is_harmless() {
    with_deadline(PATIENCE * 2, || {
        // One worker: while it runs a callback, nothing else can run.
        let rt = rt(1);
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
                // Per handle: cancelled() before, drops right after cancel(), cancelled() after.
                let mut fates = Vec::new();
                for h in &handles {
                    let before = h.cancelled();
                    h.cancel();
                    fates.push((before, d.count(), h.cancelled()));
                }
                // Twice.
                for h in &handles {
                    h.cancel();
                }
                let after_twice = (d.count(), handles.iter().all(|h| h.cancelled()));
                eddy::call_soon(move || {
                    tx.send((fates, after_twice, r.load(Ordering::SeqCst)))
                        .unwrap()
                });
            })
            .unwrap();
        let (fates, after_twice, ran_before) = rx.recv_timeout(PATIENCE).unwrap();
        assert_eq!(ran_before, 0, "a cancelled callback ran");
        for (n, &(before, dropped, after)) in fates.iter().enumerate() {
            assert!(!before && after, "cancelled() of handle {n}");
            // The n-th cancel dropped the n-th closure right away.
            assert_eq!(dropped, n + 1, "the closure was not dropped by cancel()");
        }
        assert_eq!(after_twice, (100, true), "after a second cancel()");
        assert_eq!(drops.count(), 100);

        // Cancelled from a foreign thread through a threadsafe handle, likewise (the only
        // worker is held meanwhile, so it cannot have started).
        let (held, job) = HeldJob::new();
        rt.handle().call_soon_threadsafe(job).unwrap();
        held.wait_started();
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
        assert!(h.cancelled());
        assert_eq!(drops.count(), 101);
        h.cancel();
        assert_eq!(drops.count(), 101);
        held.release();

        // Once it has started (here: it has run), cancel does nothing and `cancelled()` stays
        // false. It was scheduled after the cancelled one, and ran after it would have.
        let (tx, rx) = mpsc::channel();
        let r = ran.clone();
        let h = rt
            .handle()
            .call_soon_threadsafe(move || tx.send(r.load(Ordering::SeqCst)).unwrap())
            .unwrap();
        let ran_before = rx.recv_timeout(PATIENCE).unwrap();
        h.cancel();
        assert!(!h.cancelled());
        assert_eq!(ran_before, 0, "a cancelled callback ran");
    });
}

/// Cancelling from another thread while the callback may be starting (5,000 times, through
/// `call_soon_threadsafe` and `call_at`). Whichever wins, each callback's fate matches what
/// its handle says: cancelled, its closure was dropped by `cancel()` and it never runs; not
/// cancelled, it runs exactly once. Checked at once, and again for all of them after the
/// runtime has shut down, when nothing queued can run any more.
#[test]
fn cancel_racing_with_run_is_consistent() {
    const ROUNDS: u32 = 5_000;
    with_deadline(PATIENCE * 2, || {
        let rt = rt(2);
        let handle = rt.handle();
        let mut fates = Vec::with_capacity(ROUNDS as usize);
        let mut outcomes = [0usize; 2];
        for i in 0..ROUNDS {
            let ran = Arc::new(AtomicUsize::new(0));
            let r = ran.clone();
            let drops = DropCounter::new();
            let token = drops.token();
            let callback = move || {
                token.touch();
                r.fetch_add(1, Ordering::SeqCst);
            };
            let cancelled: Box<dyn Fn() -> bool> = if i % 2 == 0 {
                let h = handle.call_soon_threadsafe(callback).unwrap();
                let c = h.clone();
                std::thread::spawn(move || c.cancel()).join().unwrap();
                Box::new(move || h.cancelled())
            } else {
                let h = handle.call_at(eddy::time(), callback).unwrap();
                for _ in 0..(i % 7) * 20 {
                    std::hint::spin_loop();
                }
                h.cancel();
                Box::new(move || h.cancelled())
            };
            let was_cancelled = cancelled();
            if was_cancelled {
                assert_eq!(drops.count(), 1, "round {i}: cancelled but not dropped");
            } else {
                // The run won: it has started and finishes.
                assert!(
                    wait_until(PATIENCE, || ran.load(Ordering::SeqCst) == 1),
                    "round {i}: neither cancelled nor run"
                );
            }
            let runs = ran.load(Ordering::SeqCst);
            assert_eq!(
                runs,
                usize::from(!was_cancelled),
                "round {i}: ran {runs} times, cancelled={was_cancelled}"
            );
            outcomes[usize::from(was_cancelled)] += 1;
            fates.push((was_cancelled, cancelled, ran, drops));
        }
        drop(rt);
        for (i, (was_cancelled, cancelled, ran, drops)) in fates.into_iter().enumerate() {
            assert_eq!(cancelled(), was_cancelled, "round {i}: cancelled() changed");
            assert_eq!(
                ran.load(Ordering::SeqCst),
                usize::from(!was_cancelled),
                "round {i}: cancelled={was_cancelled}, and a late run"
            );
            assert_eq!(
                drops.count(),
                1,
                "round {i}: the closure is not dropped once"
            );
        }
        eprintln!(
            "ran first: {}, cancelled first: {}",
            outcomes[0], outcomes[1]
        );
    });
}

/// Cancelling while the callback is running (deterministically: it waits for us) does
/// nothing: it completes, and `cancelled()` stays false.
#[test]
fn cancel_while_running_is_a_no_op() {
    with_deadline(PATIENCE * 2, || {
        let rt = rt(2);
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
        started_rx.recv_timeout(PATIENCE).unwrap();
        h.cancel();
        h.cancel();
        assert!(!h.cancelled());
        go_tx.send(()).unwrap();
        done_rx.recv_timeout(PATIENCE).unwrap();
        assert!(!h.cancelled());
    });
}

/// `Handle::location` is where `call_soon` / `call_soon_threadsafe` was called.
#[test]
fn handles_know_where_they_were_scheduled() {
    let rt = rt(1);
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
