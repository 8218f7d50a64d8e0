//! User code that panics where the runtime calls it for its own reasons (a waker woken by IO
//! readiness or a timer, a destructor run at shutdown or when a cell is freed, a thread hook)
//! goes to the exception handler; the worker goes on, and dropping the runtime returns
//! without raising the panic.

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::task::{Context, Wake, Waker};
use std::time::Duration;

use eddy::Builder;
use eddy_tests::{
    quiet_expected_panics, with_deadline, ExceptionLog, PanicOnDrop, EXPECTED, PATIENCE,
};

/// Long enough for a dead worker to show as a hang instead of hanging CI.
const LIMIT: Duration = Duration::from_secs(90);

/// A waker whose `wake` panics (a foreign executor's, say).
struct PanickingWaker;

impl Wake for PanickingWaker {
    fn wake(self: Arc<Self>) {
        panic!("{EXPECTED} in a waker");
    }
}

fn panicking_waker() -> Waker {
    Waker::from(Arc::new(PanickingWaker))
}

/// The runtime still runs a callback and a task after the fault.
fn still_serves(rt: &eddy::Runtime) {
    let (tx, rx) = mpsc::channel();
    rt.handle()
        .call_soon_threadsafe(move || tx.send(()).unwrap())
        .unwrap();
    rx.recv_timeout(PATIENCE)
        .expect("the worker no longer runs callbacks");
    let t = rt.handle().spawn(async { 7 });
    assert_eq!(rt.block_on(t).unwrap(), 7);
}

fn one_worker(log: &ExceptionLog) -> eddy::Runtime {
    Builder::new()
        .workers(1)
        .exception_handler(log.handler())
        .build()
        .unwrap()
}

/// Polls `fut` once with `waker` (on whatever thread calls this), expecting it to wait.
fn poll_pending_with<F: Future>(fut: Pin<&mut F>, waker: &Waker) {
    let mut cx = Context::from_waker(waker);
    assert!(fut.poll(&mut cx).is_pending());
}

/// A read polled with a panicking waker on the only worker; data arrives, the worker's
/// harvest wakes it.
#[test]
fn a_waker_that_panics_when_io_wakes_it_is_contained() {
    quiet_expected_panics();
    with_deadline(LIMIT, || {
        let log = ExceptionLog::new();
        let rt = one_worker(&log);
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let (registered_tx, registered) = mpsc::channel();
        rt.handle()
            .call_soon_threadsafe(move || {
                let ours = eddy::net::UnixStream::from_std(ours).unwrap();
                let mut buf = [0u8; 4];
                {
                    let read = pin!(ours.read(&mut buf));
                    poll_pending_with(read, &panicking_waker());
                }
                // Kept alive (registered, with its panicking waker) for the rest of the test.
                std::mem::forget(ours);
                registered_tx.send(()).unwrap();
            })
            .unwrap();
        registered.recv().unwrap();
        std::io::Write::write_all(&mut &theirs, b"ping").unwrap();
        assert!(
            eddy_tests::wait_until(PATIENCE, || log.len() == 1),
            "no report of the panicking waker"
        );
        let report = &log.reports()[0];
        assert!(report.message.contains("waker"), "{report:?}");
        assert!(report.message.contains("IO"), "{report:?}");
        still_serves(&rt);
        drop(rt);
    });
}

/// A `sleep` polled with a panicking waker on the only worker; its timer fires.
#[test]
fn a_waker_that_panics_when_a_timer_wakes_it_is_contained() {
    quiet_expected_panics();
    with_deadline(LIMIT, || {
        let log = ExceptionLog::new();
        let rt = one_worker(&log);
        rt.handle()
            .call_soon_threadsafe(move || {
                let sleep = Box::pin(eddy::time::sleep(Duration::from_millis(1)));
                let mut sleep = sleep;
                poll_pending_with(sleep.as_mut(), &panicking_waker());
                std::mem::forget(sleep);
            })
            .unwrap();
        assert!(
            eddy_tests::wait_until(PATIENCE, || log.len() == 1),
            "no report of the panicking waker"
        );
        let report = &log.reports()[0];
        assert!(report.message.contains("waker"), "{report:?}");
        assert!(report.message.contains("timer"), "{report:?}");
        still_serves(&rt);
        drop(rt);
    });
}

/// A task sets a context variable to a value whose destructor panics, schedules a callback
/// (which captures the context) and drops the handle; the task ends. The callback cell then
/// holds the last reference to the context, and freeing the cell drops the value.
#[test]
fn a_context_value_that_panics_when_a_callback_cell_frees_it_is_contained() {
    quiet_expected_panics();
    with_deadline(LIMIT, || {
        let log = ExceptionLog::new();
        let rt = one_worker(&log);
        static BOMB: std::sync::LazyLock<eddy::ContextVar<Option<Arc<PanicOnDrop>>>> =
            std::sync::LazyLock::new(|| eddy::ContextVar::new(None));
        let (ran_tx, ran) = mpsc::channel();
        let task = rt.handle().spawn(async move {
            BOMB.set(Some(Arc::new(PanicOnDrop("a destructor"))));
            drop(eddy::call_soon(move || ran_tx.send(()).unwrap()));
        });
        rt.block_on(task).unwrap();
        ran.recv_timeout(PATIENCE).unwrap();
        assert!(
            eddy_tests::wait_until(PATIENCE, || log.len() == 1),
            "no report of the panicking context value"
        );
        assert!(
            log.reports()[0].message.contains("context"),
            "{:?}",
            log.reports()
        );
        still_serves(&rt);
        drop(rt);
    });
}

/// A pending task whose future panics when dropped.
async fn pending_with_bomb() {
    let _bomb = PanicOnDrop("a destructor");
    std::future::pending::<()>().await
}

/// 100 pending `call_later` closures and 100 pending tasks whose destructors panic: dropping
/// the runtime drops them all, reports each panic, and neither hangs nor panics itself.
#[test]
fn destructors_that_panic_at_shutdown_do_not_escape_drop() {
    quiet_expected_panics();
    with_deadline(LIMIT, || {
        let log = ExceptionLog::new();
        let rt = Builder::new()
            .workers(2)
            .exception_handler(log.handler())
            .build()
            .unwrap();
        let handle = rt.handle();
        let polled = Arc::new(AtomicUsize::new(0));
        for _ in 0..100 {
            let bomb = PanicOnDrop("a destructor");
            handle
                .call_later(Duration::from_secs(3600), move || drop(bomb))
                .unwrap();
            let polled = polled.clone();
            drop(handle.spawn(async move {
                polled.fetch_add(1, Ordering::SeqCst);
                pending_with_bomb().await
            }));
        }
        assert!(eddy_tests::wait_until(PATIENCE, || polled
            .load(Ordering::SeqCst)
            == 100));
        let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(rt)));
        assert!(
            dropped.is_ok(),
            "a destructor's panic escaped drop(runtime)"
        );
        assert_eq!(log.len(), 200, "{:?}", log.reports().first());
    });
}

/// A thread-start hook that panics: the panic is reported for each thread and the runtime
/// works all the same.
#[test]
fn a_panicking_thread_start_hook_is_contained() {
    quiet_expected_panics();
    with_deadline(LIMIT, || {
        let log = ExceptionLog::new();
        let rt = Builder::new()
            .workers(2)
            .exception_handler(log.handler())
            .on_thread_start(|| panic!("{EXPECTED} in on_thread_start"))
            .build()
            .unwrap();
        still_serves(&rt);
        assert!(
            eddy_tests::wait_until(PATIENCE, || log.len() >= 2),
            "the hook's panics were not reported: {:?}",
            log.reports()
        );
        assert!(log.reports()[0].message.contains("thread"));
        drop(rt);
    });
}
