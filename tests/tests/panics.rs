//! Panics in tasks and callbacks are contained, reported and do not hurt the runtime.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use eddy::{Builder, TaskError};
use eddy_tests::{
    assert_child_test_passes, is_child, quiet_expected_panics, wait_until, with_deadline,
    ExceptionLog, ExpectedPayload, PanicOnDrop, Report, EXPECTED, PATIENCE,
};

/// A runtime with `workers` workers whose exception handler records into the returned log.
fn logged_runtime(workers: usize) -> (eddy::Runtime, ExceptionLog) {
    let log = ExceptionLog::new();
    let rt = Builder::new()
        .workers(workers)
        .exception_handler(log.handler())
        .build()
        .unwrap();
    (rt, log)
}

/// 10% of 100,000 tasks panic (some at once, some after a yield or a sleep): the other
/// 90,000 all complete, each panicked task gives `TaskError::Panicked` with its message to its
/// awaiter, and (since every panic was retrieved) nothing reaches the exception handler.
#[test]
fn ten_percent_of_100_000_tasks_panic_the_rest_complete() {
    const N: u64 = 100_000;
    quiet_expected_panics();
    with_deadline(Duration::from_secs(120), || {
        let (rt, log) = logged_runtime(2);
        let (ok, panicked, ok_sum) = rt.block_on(async {
            let tasks: Vec<_> = (0..N)
                .map(|i| {
                    eddy::spawn(async move {
                        match i % 30 {
                            10 => eddy::yield_now().await,
                            20 => eddy::time::sleep(Duration::from_millis(1)).await,
                            _ => {}
                        }
                        if i % 10 == 0 {
                            panic!("{EXPECTED} task {i} failed");
                        }
                        i
                    })
                })
                .collect();
            let (mut ok, mut panicked, mut ok_sum) = (0u64, 0u64, 0u64);
            for (i, t) in tasks.into_iter().enumerate() {
                match t.await {
                    Ok(v) => {
                        assert_eq!(v, i as u64);
                        ok += 1;
                        ok_sum += v;
                    }
                    Err(TaskError::Panicked(p)) => {
                        assert_eq!(i % 10, 0, "task {i} should not have panicked");
                        assert_eq!(p.message(), format!("{EXPECTED} task {i} failed"));
                        assert_eq!(p.location().file(), file!());
                        panicked += 1;
                    }
                    Err(e) => panic!("task {i}: {e}"),
                }
            }
            (ok, panicked, ok_sum)
        });
        assert_eq!(ok, 90_000);
        assert_eq!(panicked, 10_000);
        let all: u64 = N * (N - 1) / 2;
        let tenth: u64 = (0..N).step_by(10).sum();
        assert_eq!(ok_sum, all - tenth);
        // The runtime still serves.
        assert_eq!(
            rt.block_on(async { eddy::spawn(async { 5 }).await.unwrap() }),
            5
        );
        // Once the runtime is gone nothing more can be reported.
        drop(rt);
        assert!(
            log.is_empty(),
            "retrieved panics were reported: {:?}",
            log.reports().first()
        );
    });
}

/// A detached task that panics is reported once as "Task exception was never retrieved", with
/// the panic text, the task id and where it was spawned. So is a finished panicked task whose
/// `Task` is dropped without being awaited (when it is dropped, not before); an awaited one
/// is not.
#[test]
fn unretrieved_task_panics_are_reported() {
    const N: usize = 1_000;
    quiet_expected_panics();
    with_deadline(PATIENCE * 2, || {
        let (rt, log) = logged_runtime(2);
        let handle = rt.handle();
        let line = line!() + 3;
        let mut ids = Vec::new();
        for i in 0..N {
            let t = handle.spawn(async move {
                if i % 2 == 0 {
                    eddy::yield_now().await;
                }
                panic!("{EXPECTED} detached {i}");
            });
            ids.push(t.id().as_u64());
            drop(t);
        }
        assert!(
            wait_until(PATIENCE, || log.len() >= N),
            "{} of {N} detached panics reported",
            log.len()
        );
        // Once the runtime is gone nothing more can be reported.
        drop(rt);
        let reports = log.reports();
        assert_eq!(reports.len(), N, "reported more than once?");
        let mut seen: Vec<u64> = reports.iter().map(|r| r.task.expect("task id")).collect();
        seen.sort_unstable();
        ids.sort_unstable();
        assert_eq!(seen, ids);
        for r in &reports {
            assert_eq!(r.message, "Task exception was never retrieved");
            let text = r.panic.as_deref().unwrap();
            assert!(text.starts_with(&format!("{EXPECTED} detached ")), "{text}");
            assert_eq!(r.location, Some((file!().to_string(), line)));
            assert!(r.display.contains("Task exception was never retrieved"));
            assert!(r.display.contains(text));
        }

        // Finished but never awaited: reported when the Task is dropped. One worker, so once
        // a callback submitted after the task finished has run, the worker is done with the
        // poll that finished it (and with anything it would report).
        let (rt, log) = logged_runtime(1);
        let t = rt
            .handle()
            .spawn(async { panic!("{EXPECTED} finished, not awaited") });
        assert!(wait_until(PATIENCE, || t.is_finished()));
        let (tx, rx) = mpsc::channel();
        rt.handle()
            .call_soon_threadsafe(move || tx.send(()).unwrap())
            .unwrap();
        rx.recv_timeout(PATIENCE).unwrap();
        assert!(log.is_empty(), "reported before the Task was dropped");
        drop(t);
        assert_eq!(log.len(), 1);
        assert_eq!(
            log.reports()[0].panic.as_deref(),
            Some(&*format!("{EXPECTED} finished, not awaited"))
        );

        // Awaited: not reported, up to the end of the runtime.
        let t = rt.handle().spawn(async { panic!("{EXPECTED} awaited") });
        let err = rt.block_on(t).unwrap_err();
        assert!(err.is_panic());
        assert!(err.to_string().contains("awaited"), "{err}");
        drop(err);
        drop(rt);
        // (The panic texts carry the marker that keeps them out of the output.)
        let messages: Vec<String> = log.reports().into_iter().map(|r| r.message).collect();
        assert_eq!(
            messages.len(),
            1,
            "an awaited panic was reported: {messages:?}"
        );
    });
}

/// A panicking callback is reported as "Exception in callback" with the panic text and the
/// file/line of the `call_soon` (or `call_later`, `call_soon_threadsafe`) call site; the
/// worker goes on running the next callbacks.
#[test]
fn panicking_callbacks_are_reported_with_their_call_site() {
    quiet_expected_panics();
    with_deadline(PATIENCE, || {
        let (rt, log) = logged_runtime(1);
        let after = Arc::new(AtomicUsize::new(0));
        let a = after.clone();
        let (soon_line, later_line) = rt.block_on(async move {
            let (tx, rx) = async_channel::bounded(1);
            let soon_line = line!() + 1;
            eddy::call_soon(|| panic!("{EXPECTED} boom"));
            let a2 = a.clone();
            eddy::call_soon(move || {
                a2.fetch_add(1, Ordering::SeqCst);
            });
            let later_line = line!() + 1;
            eddy::call_later(Duration::from_millis(5), || {
                std::panic::panic_any(ExpectedPayload);
            });
            eddy::call_later(Duration::from_millis(10), move || {
                a.fetch_add(1, Ordering::SeqCst);
                tx.try_send(()).unwrap();
            });
            rx.recv().await.unwrap();
            (soon_line, later_line)
        });
        let h = rt.handle();
        let threadsafe_line = line!() + 1;
        h.call_soon_threadsafe(|| panic!("{EXPECTED} from afar"))
            .unwrap();
        assert!(wait_until(PATIENCE, || log.len() == 3));
        assert_eq!(
            after.load(Ordering::SeqCst),
            2,
            "callbacks after a panic did not run"
        );
        let reports = log.reports();
        for r in &reports {
            assert_eq!(r.message, "Exception in callback");
            assert_eq!(r.task, None);
        }
        // The reports come in the order the callbacks ran, which is not the order they were
        // scheduled in: a callback submitted from outside the workers (`call_soon` on the
        // `block_on` thread) waits in the injector while a due timer's callback runs. So each
        // report is found by its panic text. (Failure messages name locations only: text with
        // the marker of expected panics would be kept out of the output.)
        let file = file!().to_string();
        let report = |text: &str| {
            let found: Vec<&Report> = reports
                .iter()
                .filter(|r| r.panic.as_deref() == Some(text))
                .collect();
            assert_eq!(
                found.len(),
                1,
                "reports of the panic at {:?}",
                found.first().map(|r| &r.location)
            );
            found[0].clone()
        };
        let boom = report(&format!("{EXPECTED} boom"));
        assert_eq!(boom.location, Some((file.clone(), soon_line)));
        assert!(boom.display.starts_with(&format!(
            "Exception in callback, scheduled at {file}:{soon_line}:"
        )));
        assert!(boom.display.ends_with(&format!(": {EXPECTED} boom")));
        let any = report("Box<dyn Any>");
        assert_eq!(any.location, Some((file.clone(), later_line)));
        let afar = report(&format!("{EXPECTED} from afar"));
        assert_eq!(afar.location, Some((file, threadsafe_line)));
    });
}

/// 10,000 panicking callbacks among 90,000 good ones on 2 workers: all good ones run, every
/// panic is reported exactly once.
#[test]
fn many_panicking_callbacks_do_not_disturb_the_others() {
    quiet_expected_panics();
    with_deadline(Duration::from_secs(60), || {
        let (rt, log) = logged_runtime(2);
        let good = Arc::new(AtomicUsize::new(0));
        let handle = rt.handle();
        for i in 0..100_000u32 {
            let good = good.clone();
            handle
                .call_soon_threadsafe(move || {
                    if i % 10 == 0 {
                        panic!("{EXPECTED} cb {i}");
                    }
                    good.fetch_add(1, Ordering::Relaxed);
                })
                .unwrap();
        }
        assert!(wait_until(Duration::from_secs(50), || good
            .load(Ordering::Relaxed)
            == 90_000
            && log.len() >= 10_000));
        // Once the runtime is gone nothing more can be reported.
        drop(rt);
        assert_eq!(good.load(Ordering::Relaxed), 90_000);
        assert_eq!(log.len(), 10_000);
        assert_eq!(log.count("Exception in callback"), 10_000);
    });
}

/// An exception handler that panics itself is contained: the runtime keeps working and later
/// errors still reach the handler.
#[test]
fn panicking_exception_handler_is_contained() {
    quiet_expected_panics();
    with_deadline(PATIENCE, || {
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let rt = Builder::new()
            .workers(1)
            .exception_handler(move |_ctx: &eddy::ExceptionContext| {
                c.fetch_add(1, Ordering::SeqCst);
                panic!("{EXPECTED} in the handler");
            })
            .build()
            .unwrap();
        for _ in 0..3 {
            rt.handle()
                .call_soon_threadsafe(|| panic!("{EXPECTED} cb"))
                .unwrap();
        }
        drop(rt.handle().spawn(async { panic!("{EXPECTED} task") }));
        assert!(wait_until(PATIENCE, || calls.load(Ordering::SeqCst) == 4));
        let (tx, rx) = mpsc::channel();
        rt.handle()
            .call_soon_threadsafe(move || tx.send(()).unwrap())
            .unwrap();
        rx.recv_timeout(PATIENCE).unwrap();
        assert_eq!(
            rt.block_on(async { eddy::spawn(async { 1 }).await.unwrap() }),
            1
        );
    });
}

/// A future that completes (after one yield) while still owning a `PanicOnDrop`: its
/// destructor, run by the task cell after completion, panics.
struct ReadyThenPanicOnDrop {
    _bomb: PanicOnDrop,
    yielded: bool,
}

impl std::future::Future for ReadyThenPanicOnDrop {
    type Output = u32;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<u32> {
        if self.yielded {
            std::task::Poll::Ready(5)
        } else {
            self.yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }
}

/// A task whose future panics while being dropped after it completed: the worker survives and
/// reports "Exception while dropping a task's future" (as `worker::run_job` intends), and
/// awaiting the task gives an answer instead of hanging. Run in a child process because the
/// failure mode is an abort of the whole process.
#[test]
fn panic_in_a_finished_futures_destructor_is_contained() {
    assert_child_test_passes("child_panic_in_a_finished_futures_destructor");
}

#[test]
#[ignore = "run in a child process by panic_in_a_finished_futures_destructor_is_contained"]
fn child_panic_in_a_finished_futures_destructor() {
    if !is_child() {
        return;
    }
    quiet_expected_panics();
    with_deadline(PATIENCE * 2, || {
        let (rt, log) = logged_runtime(1);
        let t = rt.handle().spawn(ReadyThenPanicOnDrop {
            _bomb: PanicOnDrop("a future's destructor"),
            yielded: false,
        });
        assert!(wait_until(PATIENCE, || log.len() == 1));
        let r = log.reports()[0].clone();
        assert_eq!(
            r.message, "Exception while dropping a task's future",
            "{r:?}"
        );
        assert_eq!(
            r.panic.as_deref(),
            Some(&*format!("{EXPECTED} in a future's destructor"))
        );
        // The worker still runs things.
        let (tx, rx) = mpsc::channel();
        rt.handle()
            .call_soon_threadsafe(move || tx.send(()).unwrap())
            .unwrap();
        rx.recv_timeout(PATIENCE).unwrap();
        // Awaiting the task gives an answer (any); the deadline above fails a hang.
        let _answer = rt.block_on(t);
    });
}

/// A task that awaits its own `Task` is asyncio's "Task cannot await on itself": the await
/// panics, the task ends as panicked (reported, since nobody else can retrieve it) and its
/// cell is freed, instead of the task waiting for itself forever with its own waker keeping
/// its cell alive.
#[test]
fn a_task_awaiting_itself_panics_instead_of_waiting_forever() {
    with_deadline(PATIENCE, || {
        let (rt, log) = logged_runtime(2);
        let (tx, rx) = async_channel::bounded::<eddy::Task<()>>(1);
        let me = rt.handle().spawn(async move {
            let me = rx.recv().await.unwrap();
            let _ = me.await;
        });
        tx.send_blocking(me).unwrap();
        assert!(
            wait_until(PATIENCE, || log.len() == 1),
            "the self-await was not reported"
        );
        let report = &log.reports()[0];
        assert_eq!(report.message, "Task exception was never retrieved");
        assert_eq!(report.panic.as_deref(), Some("Task cannot await on itself"));
        assert!(
            wait_until(PATIENCE, || rt.metrics().live_tasks == 0),
            "the task's cell outlived it"
        );
    });
}

/// `set_exception_handler` on a running runtime reaches its workers at once: a callback
/// panic, an unretrieved task panic and a report of our own all go to the new handler, none
/// to the one set at build time.
#[test]
fn an_exception_handler_set_after_build_gets_every_report() {
    quiet_expected_panics();
    let (rt, first) = logged_runtime(2);
    // Let both workers run (and pick up the first handler) before it is replaced.
    rt.block_on(async {
        let tasks: Vec<_> = (0..64).map(|_| eddy::spawn(eddy::yield_now())).collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    let second = ExceptionLog::new();
    rt.handle().set_exception_handler(second.handler());
    rt.block_on(async {
        eddy::call_soon(|| std::panic::panic_any(ExpectedPayload));
        drop(eddy::spawn(async {
            std::panic::panic_any(ExpectedPayload)
        }));
    });
    rt.handle().call_exception_handler(
        &eddy::ExceptionContext::new("our own report").with_panic_message("why"),
    );
    assert!(
        wait_until(PATIENCE, || second.len() == 3),
        "{:?}",
        second.reports()
    );
    assert_eq!(second.count("our own report"), 1);
    assert!(second
        .reports()
        .iter()
        .any(|r| r.message == "our own report" && r.panic.as_deref() == Some("why")));
    assert!(first.is_empty(), "{:?}", first.reports());
}

/// After `reset_exception_handler` reports go to the default handler (which logs), no longer
/// to the user's.
#[test]
fn a_reset_exception_handler_no_longer_gets_reports() {
    quiet_expected_panics();
    let (rt, log) = logged_runtime(1);
    rt.handle().reset_exception_handler();
    let (tx, after) = mpsc::channel();
    rt.block_on(async move {
        // One worker runs its callbacks in order: the second runs after the first's report.
        eddy::call_soon(|| std::panic::panic_any(ExpectedPayload));
        eddy::call_soon(move || tx.send(()).unwrap());
    });
    after.recv_timeout(PATIENCE).unwrap();
    assert!(log.is_empty(), "{:?}", log.reports());
    // The slot still works: a handler set again gets the next report.
    let again = ExceptionLog::new();
    rt.handle().set_exception_handler(again.handler());
    rt.handle()
        .call_exception_handler(&eddy::ExceptionContext::new("after the reset"));
    assert_eq!(again.count("after the reset"), 1);
    assert!(log.is_empty(), "{:?}", log.reports());
}

/// A handler may replace the handler from inside itself (it runs without the runtime's
/// lock on the handler slot): no deadlock, and the next report goes to the replacement.
#[test]
fn a_handler_can_replace_itself() {
    quiet_expected_panics();
    with_deadline(PATIENCE, || {
        let rt = eddy_tests::rt(1);
        let handle = rt.handle();
        let replacement = ExceptionLog::new();
        let for_handler = replacement.clone();
        rt.handle()
            .set_exception_handler(move |_: &eddy::ExceptionContext| {
                handle.set_exception_handler(for_handler.handler());
            });
        rt.handle()
            .call_exception_handler(&eddy::ExceptionContext::new("first"));
        rt.handle()
            .call_exception_handler(&eddy::ExceptionContext::new("second"));
        assert_eq!(replacement.count("first"), 0);
        assert_eq!(replacement.count("second"), 1);
    });
}
