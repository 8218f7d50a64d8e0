//! Misuse: nested or in-worker `block_on`, submitting to a closed runtime, absurd delays,
//! past deadlines, zero workers, double cancels, free functions outside a runtime.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use eddy::{Builder, Closed, Runtime, RuntimeHandle, TaskError};
use eddy_tests::{
    panic_text, quiet_expected_panics, wait_until, with_deadline, DropCounter, ExceptionLog,
    HeldJob, PATIENCE,
};
use futures_lite::future::poll_once;

const ALREADY_RUNNING: &str = "this event loop is already running";
const NO_RUNTIME: &str = "no eddy runtime on this thread";

fn assert_panics_with<R>(what: &str, expected: &str, f: impl FnOnce() -> R) {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(_) => panic!("{what}: did not panic"),
        Err(payload) => {
            let text = panic_text(&*payload);
            assert!(text.contains(expected), "{what}: panicked with {text:?}");
        }
    }
}

/// `block_on` (of this or another runtime) from inside a task panics with "this event loop is
/// already running"; the panic becomes the task's `TaskError::Panicked`.
#[test]
fn block_on_inside_a_task_panics() {
    quiet_expected_panics();
    with_deadline(PATIENCE, || {
        let rt = Arc::new(Builder::new().workers(2).build().unwrap());
        let other = Arc::new(Builder::new().workers(1).build().unwrap());
        for target in [rt.clone(), other.clone()] {
            let t = rt.handle().spawn(async move {
                target.block_on(async { 1 });
            });
            match rt.block_on(t) {
                Err(TaskError::Panicked(p)) => {
                    assert!(p.message().contains(ALREADY_RUNNING), "{}", p.message())
                }
                other => panic!("expected a panic, got {other:?}"),
            }
        }
        // run_forever too.
        let r2 = rt.clone();
        let t = rt.handle().spawn(async move { r2.run_forever() });
        let err = rt.block_on(t).unwrap_err();
        assert!(err.to_string().contains(ALREADY_RUNNING), "{err}");
        // The worker is fine afterwards.
        assert_eq!(
            rt.block_on(async { eddy::spawn(async { 3 }).await.unwrap() }),
            3
        );
        drop(other);
    });
}

/// `block_on` from inside a callback panics the same way; the panic goes to the exception
/// handler as "Exception in callback".
#[test]
fn block_on_inside_a_callback_panics() {
    quiet_expected_panics();
    with_deadline(PATIENCE, || {
        let log = ExceptionLog::new();
        let rt = Arc::new(
            Builder::new()
                .workers(1)
                .exception_handler(log.handler())
                .build()
                .unwrap(),
        );
        let (tx, rx) = mpsc::channel();
        let r2 = rt.clone();
        rt.handle()
            .call_soon_threadsafe(move || {
                let caught = catch_unwind(AssertUnwindSafe(|| r2.block_on(async {})));
                tx.send(caught.map_err(|p| panic_text(&*p))).unwrap();
            })
            .unwrap();
        let caught = rx.recv_timeout(PATIENCE).unwrap();
        assert!(caught.unwrap_err().contains(ALREADY_RUNNING));
        // Uncaught: reported.
        let r3 = rt.clone();
        rt.handle()
            .call_soon_threadsafe(move || r3.block_on(async {}))
            .unwrap();
        assert!(wait_until(PATIENCE, || log.len() == 1));
        let report = &log.reports()[0];
        assert_eq!(report.message, "Exception in callback");
        assert!(report.panic.as_deref().unwrap().contains(ALREADY_RUNNING));
    });
}

/// `block_on` inside `block_on` (same or another runtime) panics; the outer one keeps working
/// and afterwards the thread can `block_on` again. So can a thread whose `block_on` future
/// panicked.
#[test]
fn nested_block_on_panics_and_the_outer_survives() {
    quiet_expected_panics();
    with_deadline(PATIENCE, || {
        let rt = Builder::new().workers(1).build().unwrap();
        let other = Builder::new().workers(1).build().unwrap();
        let v = rt.block_on(async {
            assert_panics_with("same runtime", ALREADY_RUNNING, || rt.block_on(async {}));
            assert_panics_with("other runtime", ALREADY_RUNNING, || {
                other.block_on(async {})
            });
            assert_panics_with("run_forever", ALREADY_RUNNING, || rt.run_forever());
            // Still inside the outer block_on: the runtime is usable.
            eddy::spawn(async { 9 }).await.unwrap()
        });
        assert_eq!(v, 9);
        assert_eq!(other.block_on(async { 1 }), 1);
        // A block_on whose future panics leaves the thread clean.
        let r = catch_unwind(AssertUnwindSafe(|| {
            rt.block_on(async { panic!("{} from the future", eddy_tests::EXPECTED) })
        }));
        assert!(r.is_err());
        assert_eq!(rt.block_on(async { 2 }), 2);
        assert!(RuntimeHandle::try_current().is_none());
    });
}

/// After shutdown, every `RuntimeHandle` submission fails with `Closed` (or, for `spawn`, a
/// task that resolves to `Cancelled`), and the closure or future is dropped at once, never
/// run.
#[test]
fn submitting_after_shutdown_is_refused_and_drops_the_closure() {
    with_deadline(PATIENCE, || {
        let rt = Builder::new().workers(2).build().unwrap();
        let handle = rt.handle();
        // Dropping waits until the workers have exited: nothing can run after this.
        drop(rt);
        assert!(handle.is_closed());
        let drops = DropCounter::new();
        let ran = Arc::new(AtomicUsize::new(0));

        let (token, r) = (drops.token(), ran.clone());
        let err = handle
            .call_soon_threadsafe(move || {
                token.touch();
                r.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap_err();
        assert_eq!(err, Closed);
        assert_eq!(err.to_string(), "event loop is closed");
        assert_eq!(drops.count(), 1);

        let (token, r) = (drops.token(), ran.clone());
        let err = handle
            .call_later(Duration::from_millis(1), move || {
                token.touch();
                r.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap_err();
        assert_eq!(err, Closed);
        assert_eq!(drops.count(), 2);

        let (token, r) = (drops.token(), ran.clone());
        assert!(handle
            .call_at(Instant::now(), move || {
                token.touch();
                r.fetch_add(1, Ordering::SeqCst);
            })
            .is_err());
        assert_eq!(drops.count(), 3);

        let (token, r) = (drops.token(), ran.clone());
        let t = handle.spawn(async move {
            token.touch();
            r.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(
            drops.count(),
            4,
            "the future of a refused spawn was not dropped"
        );
        let res = futures_lite::future::block_on(t);
        assert!(res.unwrap_err().is_cancelled());
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        // stop() on a closed runtime is harmless.
        handle.stop();
    });
}

/// `call_later(Duration::MAX)` and `sleep(Duration::MAX)` do not panic and never fire;
/// `timeout(Duration::MAX, ..)` passes a ready value through. One worker, so one timer heap:
/// its timers fire in deadline order, and a `Duration::MAX` timer whose deadline wrapped
/// around would have fired before a 30 ms one.
#[test]
fn huge_delays_never_fire_and_do_not_panic() {
    with_deadline(PATIENCE, || {
        let rt = Builder::new().workers(1).build().unwrap();
        let fired = Arc::new(AtomicUsize::new(0));
        let a_year = Duration::from_secs(365 * 24 * 3600);
        let f = fired.clone();
        let h = rt
            .handle()
            .call_later(Duration::MAX, move || {
                f.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        assert!(h.when() > Instant::now() + a_year);
        let f = fired.clone();
        let (soon_tx, soon_rx) = mpsc::channel();
        rt.block_on(async move {
            let h = eddy::call_later(Duration::MAX, {
                let f = f.clone();
                move || {
                    f.fetch_add(1, Ordering::SeqCst);
                }
            });
            assert!(!h.cancelled());
            assert!(h.when() > Instant::now() + a_year);
            let slept =
                eddy::time::timeout(Duration::from_millis(50), eddy::time::sleep(Duration::MAX))
                    .await;
            assert!(slept.is_err(), "sleep(Duration::MAX) ended");
            let v = eddy::time::timeout(Duration::MAX, async { 5 }).await;
            assert_eq!(v, Ok(5));
            // A task sleeping forever, next to a short timer that proves time passes.
            drop(eddy::spawn(eddy::time::sleep(Duration::MAX)));
            eddy::call_later(Duration::from_millis(30), move || {
                soon_tx.send(f.load(Ordering::SeqCst)).unwrap()
            });
        });
        let fired_before = soon_rx.recv_timeout(PATIENCE).unwrap();
        assert_eq!(fired_before, 0, "a Duration::MAX timer fired");
        h.cancel();
        assert!(h.cancelled());
    });
}

/// A deadline in the past runs at once: `call_at(past)` and `sleep_until(past)` need no time
/// to pass. Checked on a paused clock, which moves only to reach a deadline: the callback
/// runs, and the sleep completes on its first poll, with the clock where it was.
#[test]
fn past_deadlines_run_promptly() {
    with_deadline(PATIENCE, || {
        let rt = Builder::new()
            .workers(2)
            .start_paused(true)
            .build()
            .unwrap();
        let t0 = rt.block_on(async { eddy::time() });
        let past = t0.checked_sub(Duration::from_secs(1)).unwrap_or(t0);
        let (tx, rx) = mpsc::channel();
        let tx2 = tx.clone();
        rt.handle()
            .call_at(past, move || tx2.send(("handle", eddy::time())).unwrap())
            .unwrap();
        assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), ("handle", t0));
        rt.block_on(async move {
            eddy::call_at(past, move || tx.send(("free", eddy::time())).unwrap());
            assert!(
                poll_once(eddy::time::sleep_until(past)).await.is_some(),
                "sleep_until(past) did not complete on its first poll"
            );
            assert_eq!(eddy::time(), t0);
        });
        assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), ("free", t0));
    });
}

/// `Builder::workers(0).build()` fails with `InvalidInput`.
#[test]
fn zero_workers_is_invalid_input() {
    let err = Builder::new().workers(0).build().unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    let err = Builder::new().workers(1 << 20).build().unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}

/// Cancelling twice (callback and timer handles, and clones of a handle) is harmless.
#[test]
fn cancelling_twice_is_harmless() {
    with_deadline(PATIENCE, || {
        let rt = Builder::new().workers(1).build().unwrap();
        let drops = DropCounter::new();
        let token = drops.token();
        let t = rt
            .handle()
            .call_later(Duration::from_secs(60), move || token.touch())
            .unwrap();
        t.cancel();
        t.cancel();
        assert!(t.cancelled());
        assert_eq!(drops.count(), 1);
        // The only worker is held, so the callback below cannot start before it is cancelled.
        let (held, job) = HeldJob::new();
        rt.handle().call_soon_threadsafe(job).unwrap();
        held.wait_started();
        let token = drops.token();
        let h = rt
            .handle()
            .call_soon_threadsafe(move || token.touch())
            .unwrap();
        let h2 = h.clone();
        h.cancel();
        h2.cancel();
        h.cancel();
        assert!(h.cancelled() && h2.cancelled());
        assert_eq!(drops.count(), 2);
        held.release();
    });
}

/// The free functions panic outside a runtime with "no eddy runtime on this thread";
/// `spawn_local` panics outside a worker (also inside `block_on`); `RuntimeHandle::current`
/// panics and `try_current` is `None`.
#[test]
fn free_functions_outside_a_runtime_panic() {
    quiet_expected_panics();
    assert_panics_with("spawn", NO_RUNTIME, || drop(eddy::spawn(async {})));
    assert_panics_with("call_soon", NO_RUNTIME, || eddy::call_soon(|| ()));
    assert_panics_with("call_later", NO_RUNTIME, || {
        eddy::call_later(Duration::from_millis(1), || ())
    });
    assert_panics_with("call_at", NO_RUNTIME, || {
        eddy::call_at(Instant::now(), || ())
    });
    assert_panics_with("sleep", NO_RUNTIME, || {
        futures_lite::future::block_on(eddy::time::sleep(Duration::from_millis(1)))
    });
    assert_panics_with("RuntimeHandle::current", NO_RUNTIME, RuntimeHandle::current);
    assert!(RuntimeHandle::try_current().is_none());
    assert_panics_with("spawn_local", NO_RUNTIME, || {
        drop(eddy::spawn_local(async {}))
    });
    // Inside block_on: spawn works, spawn_local does not (not a worker).
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        assert!(RuntimeHandle::try_current().is_some());
        // The message says what to do instead.
        assert_panics_with(
            "spawn_local in block_on",
            "this thread is not a worker: it is inside Runtime::block_on",
            || drop(eddy::spawn_local(async {})),
        );
        assert_panics_with(
            "spawn_local in block_on",
            "Spawn a task with eddy::spawn and call spawn_local inside it",
            || drop(eddy::spawn_local(async {})),
        );
    });
    // Outside again after block_on returned, and on a thread the runtime never saw.
    assert_panics_with("spawn after block_on", NO_RUNTIME, || {
        drop(eddy::spawn(async {}))
    });
    std::thread::spawn(|| {
        assert_panics_with("call_soon in a thread", NO_RUNTIME, || {
            eddy::call_soon(|| ())
        });
    })
    .join()
    .unwrap();
}

/// Dropping the `Runtime` from one of its own worker threads (the last `Arc<Runtime>` held by
/// a callback) does not deadlock that worker (it cannot wait for itself to exit): the drop
/// returns and the runtime is closed.
#[test]
fn dropping_the_runtime_on_its_own_worker_does_not_deadlock() {
    quiet_expected_panics();
    with_deadline(PATIENCE, || {
        let rt = Builder::new().workers(2).build().unwrap();
        let handle = rt.handle();
        let (tx, rx) = mpsc::channel();
        let drops = DropCounter::new();
        let token = drops.token();
        // Something pending for the shutdown to drop.
        drop(handle.spawn(async move {
            token.touch();
            std::future::pending::<()>().await
        }));
        handle
            .call_soon_threadsafe(move || {
                drop(rt);
                tx.send(()).unwrap();
            })
            .unwrap();
        rx.recv_timeout(PATIENCE)
            .expect("the worker that dropped the runtime never came back");
        assert!(handle.is_closed());
        assert!(wait_until(PATIENCE, || drops.count() == 1));
    });
}
