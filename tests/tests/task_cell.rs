//! The task cell under cross-thread pressure: wakes from many threads never poll a task twice
//! at once and never lose the last wake; completion racing with join, detach and cancel
//! hands every output to exactly one owner; and foreign wakers or panic payloads that panic
//! themselves never take a worker down.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use eddy::{Builder, TaskError};
use eddy_tests::{
    quiet_expected_panics, rt, wait_until, with_deadline, DropCounter, ExceptionLog, PanicOnDrop,
    Rng, PATIENCE,
};

/// A task's end of a tick source: foreign threads add ticks and wake the stored waker.
#[derive(Default)]
struct Ticks {
    count: AtomicU64,
    waker: Mutex<Option<Waker>>,
    /// Set while the task's future is inside `poll`.
    in_poll: AtomicBool,
    polls: AtomicU64,
}

/// Completes once `target` ticks were seen; fails the test if polled twice at once.
struct UntilTicks {
    ticks: Arc<Ticks>,
    target: u64,
}

impl Future for UntilTicks {
    type Output = u64;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u64> {
        let t = &self.ticks;
        assert!(
            !t.in_poll.swap(true, Ordering::SeqCst),
            "a task was polled on two threads at once"
        );
        t.polls.fetch_add(1, Ordering::Relaxed);
        // Register before looking, so that a tick after the look always finds our waker.
        *t.waker.lock().unwrap() = Some(cx.waker().clone());
        let seen = t.count.load(Ordering::SeqCst);
        t.in_poll.store(false, Ordering::SeqCst);
        if seen >= self.target {
            Poll::Ready(seen)
        } else {
            Poll::Pending
        }
    }
}

/// 1,000 tasks x 1,000 ticks = 1,000,000 wakes from 4 foreign threads (each tick a
/// `wake_by_ref` or a `wake` of a clone, while the task may be idle, queued or running).
/// Every task sees its last tick (no wake lost), none is ever polled twice at once, and no
/// task is polled more often than it was woken (plus its first poll).
#[test]
fn a_million_foreign_wakes_lose_nothing_and_never_poll_twice_at_once() {
    const TASKS: usize = 1_000;
    const TICKS: u64 = 1_000;
    const THREADS: usize = 4;
    with_deadline(PATIENCE * 4, || {
        let rt = rt(2);
        let all: Vec<Arc<Ticks>> = (0..TASKS).map(|_| Arc::default()).collect();
        let tasks: Vec<_> = all
            .iter()
            .map(|t| {
                rt.handle().spawn(UntilTicks {
                    ticks: t.clone(),
                    target: TICKS,
                })
            })
            .collect();
        let per_thread = TICKS / THREADS as u64;
        let threads: Vec<_> = (0..THREADS)
            .map(|n| {
                let all = all.clone();
                std::thread::spawn(move || {
                    let mut rng = Rng::new(n as u64 + 1);
                    for _ in 0..per_thread {
                        for t in &all {
                            t.count.fetch_add(1, Ordering::SeqCst);
                            let waker = t.waker.lock().unwrap().clone();
                            match (waker, rng.below(2)) {
                                (Some(w), 0) => w.wake_by_ref(),
                                (Some(w), _) => w.wake(),
                                (None, _) => {}
                            }
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let seen: Vec<u64> = rt.block_on(async {
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.unwrap());
            }
            out
        });
        assert!(
            seen.iter().all(|&s| s == TICKS),
            "every task saw every tick"
        );
        for t in &all {
            let polls = t.polls.load(Ordering::Relaxed);
            assert!(polls <= TICKS + 1, "{polls} polls for {TICKS} wakes");
        }
        assert_eq!(rt.metrics().live_tasks, 0);
    });
}

/// An output value that counts its drops.
struct Output(#[allow(dead_code)] eddy_tests::DropToken);

/// 200,000 tasks finish while their handles are, at random, awaited, dropped (detached) or
/// cancelled from the spawning thread at the same moment. Each task's future is dropped
/// exactly once, whoever won the race; a task whose cancel won made no output, and every
/// other task's output is dropped exactly once (by its awaiter, or by the runner when
/// detached): no leak, no double drop.
#[test]
fn completion_racing_join_detach_and_cancel_drops_everything_exactly_once() {
    const N: usize = 200_000;
    with_deadline(PATIENCE * 4, || {
        let rt = rt(2);
        let outputs = DropCounter::new();
        let futures = DropCounter::new();
        let results = rt.block_on(async {
            let mut rng = Rng::new(7);
            let (mut joined, mut cancelled) = (0usize, 0usize);
            let mut batch = Vec::new();
            for i in 0..N {
                let (outputs, fut) = (outputs.clone(), futures.token());
                batch.push(eddy::spawn(async move {
                    fut.touch();
                    if i % 3 == 0 {
                        eddy::yield_now().await;
                    }
                    // The output's token is made only when the output is.
                    Output(outputs.token())
                }));
                if batch.len() == 64 {
                    for t in batch.drain(..) {
                        match rng.below(3) {
                            0 => {
                                t.await.unwrap();
                                joined += 1;
                            }
                            1 => drop(t),
                            _ => {
                                t.cancel();
                                match t.await {
                                    Ok(_) => joined += 1,
                                    Err(e) => {
                                        assert!(e.is_cancelled());
                                        cancelled += 1;
                                    }
                                }
                            }
                        }
                    }
                }
            }
            (joined, cancelled)
        });
        assert!(
            wait_until(PATIENCE, || futures.count() == N),
            "every future dropped once: {} of {N}",
            futures.count()
        );
        // A cancelled task never produced an output; every other one was dropped once.
        let (joined, cancelled) = results;
        assert!(
            wait_until(PATIENCE, || {
                outputs.count() == N - cancelled && rt.metrics().live_tasks == 0
            }),
            "outputs dropped: {} of {}, live tasks: {}",
            outputs.count(),
            N - cancelled,
            rt.metrics().live_tasks
        );
        assert_eq!(futures.count(), N, "no future dropped twice");
        assert_eq!(outputs.count(), N - cancelled, "no output dropped twice");
        eprintln!("joined: {joined}, cancelled first: {cancelled}");
    });
}

/// A waker that panics when woken, to await a task from outside any runtime.
struct PanickyWaker;

impl Wake for PanickyWaker {
    fn wake(self: Arc<Self>) {
        panic!("this waker always panics");
    }
}

/// The waker awaiting a task belongs to someone else and may panic when the task completes
/// and wakes it: the panic goes to the exception handler, the worker keeps serving, and the
/// output is still there for the awaiter.
#[test]
fn a_panicking_awaiter_waker_is_reported_and_the_worker_survives() {
    quiet_expected_panics();
    with_deadline(PATIENCE * 2, || {
        let log = ExceptionLog::new();
        let rt = Builder::new()
            .workers(1)
            .exception_handler(log.handler())
            .build()
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let mut task = rt.handle().spawn(async move {
            // Finish only after the handle was polled with the panicky waker.
            let _ = eddy::spawn_blocking(move || rx.recv()).await;
            42
        });
        let waker = Waker::from(Arc::new(PanickyWaker));
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut task).poll(&mut cx).is_pending());
        tx.send(()).unwrap();
        assert!(wait_until(PATIENCE, || task.is_finished()));
        assert!(wait_until(PATIENCE, || log
            .count("Exception in the waker awaiting a task")
            == 1));
        match Pin::new(&mut task).poll(&mut cx) {
            Poll::Ready(Ok(42)) => {}
            other => panic!("expected the output, got {other:?}"),
        }
        assert_eq!(
            rt.block_on(async { eddy::spawn(async { 7 }).await })
                .unwrap(),
            7
        );
    });
}

/// A task that panics with a payload whose own destructor panics: the awaiter still gets
/// `TaskError::Panicked`, and the only worker keeps running tasks afterwards.
#[test]
fn a_panic_payload_that_panics_on_drop_does_not_kill_the_worker() {
    quiet_expected_panics();
    with_deadline(PATIENCE * 2, || {
        let rt = rt(1);
        let res = rt.block_on(async {
            eddy::spawn(async {
                // A panic payload whose destructor panics too.
                std::panic::panic_any(PanicOnDrop("a panic payload's destructor"));
            })
            .await
        });
        assert!(matches!(res, Err(TaskError::Panicked(_))), "{res:?}");
        let after = rt.block_on(async { eddy::spawn(async { 1 + 1 }).await });
        assert_eq!(after.unwrap(), 2);
    });
}

/// Named tasks keep their names in a side table, which forgets them when the task ends.
#[test]
fn names_of_finished_tasks_are_forgotten() {
    with_deadline(PATIENCE * 2, || {
        let rt = rt(2);
        let counter = Arc::new(AtomicUsize::new(0));
        rt.block_on(async {
            let mut tasks = Vec::new();
            for i in 0..100 {
                let c = counter.clone();
                tasks.push(eddy::task::Builder::new().name(format!("named-{i}")).spawn(
                    async move {
                        c.fetch_add(1, Ordering::SeqCst);
                    },
                ));
            }
            let idle = eddy::task::Builder::new()
                .name("still-here".to_string())
                .spawn(std::future::pending::<()>());
            for t in tasks {
                t.await.unwrap();
            }
            let dump = eddy::RuntimeHandle::current().dump_tasks();
            let names: Vec<_> = dump.iter().filter_map(|t| t.name.clone()).collect();
            assert_eq!(names, vec!["still-here".to_string()]);
            idle.cancel();
            assert!(idle.await.unwrap_err().is_cancelled());
        });
        assert_eq!(counter.load(Ordering::SeqCst), 100);
        assert!(rt.dump_tasks().is_empty());
    });
}

/// Counts wakes; its strong count tells who still holds it.
#[derive(Default)]
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Once a task is complete and its handle gave up (output taken, or the handle dropped), the
/// cell no longer holds the awaiter's waker, even while a stray waker of the task keeps the
/// cell itself alive: a completed task must not keep its awaiter, and what the awaiter
/// holds, alive.
#[test]
fn a_completed_task_lets_go_of_its_awaiters_waker() {
    with_deadline(PATIENCE * 2, || {
        let rt = rt(2);
        for take_output in [true, false] {
            let stray: Arc<Mutex<Option<Waker>>> = Arc::default();
            let (release, released) = async_channel::bounded::<()>(1);
            let s = stray.clone();
            let mut task = rt.handle().spawn(async move {
                std::future::poll_fn(|cx| {
                    *s.lock().unwrap() = Some(cx.waker().clone());
                    Poll::Ready(())
                })
                .await;
                released.recv().await.unwrap();
                7
            });
            let awaiter = Arc::new(CountingWaker::default());
            let waker = Waker::from(awaiter.clone());
            let polled = Pin::new(&mut task).poll(&mut Context::from_waker(&waker));
            assert!(polled.is_pending());
            drop(waker);
            release.send_blocking(()).unwrap();
            assert!(
                wait_until(PATIENCE, || awaiter.0.load(Ordering::SeqCst) == 1),
                "the awaiter was not woken"
            );
            if take_output {
                assert_eq!(rt.block_on(task).unwrap(), 7);
            } else {
                drop(task);
            }
            assert!(
                stray.lock().unwrap().is_some(),
                "the stray waker keeps the cell"
            );
            assert!(
                wait_until(PATIENCE, || Arc::strong_count(&awaiter) == 1),
                "the completed task still holds its awaiter's waker (output taken: {take_output})"
            );
        }
    });
}
