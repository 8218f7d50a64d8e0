//! Tasks: spawning, awaiting, cancelling, detaching, `spawn_local`, `yield_now` fairness,
//! `timeout`, and `block_on`.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use eddy::task::TaskState;
use eddy::{RuntimeHandle, TaskError, TaskId};
use eddy_tests::{rt, wait_until, with_deadline, DropCounter, PATIENCE};

/// Waits (up to [`PATIENCE`]) until task `id` has been polled and is idle: its future returned
/// `Pending` and nothing has woken it since. True if it got there.
fn wait_until_idle(handle: &RuntimeHandle, id: TaskId) -> bool {
    wait_until(PATIENCE, || {
        handle
            .dump_tasks()
            .iter()
            .any(|t| t.id == id && t.state == TaskState::Idle && t.polls > 0)
    })
}

/// `block_on` runs spawned tasks and returns their results; task ids are distinct.
#[test]
fn block_on_runs_spawned_tasks() {
    with_deadline(PATIENCE * 2, || {
        let rt = rt(2);
        let (sum, ids) = rt.block_on(async {
            let tasks: Vec<_> = (0..1_000u64)
                .map(|i| {
                    eddy::spawn(async move {
                        eddy::yield_now().await;
                        i * 3
                    })
                })
                .collect();
            let mut ids: Vec<u64> = tasks.iter().map(|t| t.id().as_u64()).collect();
            ids.sort_unstable();
            ids.dedup();
            let mut sum = 0;
            for t in tasks {
                sum += t.await.unwrap();
            }
            (sum, ids.len())
        });
        assert_eq!(sum, 3 * 999 * 1_000 / 2);
        assert_eq!(ids, 1_000, "task ids are not unique");
        // Nested: tasks spawning tasks, awaited from a task.
        let v = rt.block_on(async {
            eddy::spawn(async {
                let inner = eddy::spawn(async { eddy::spawn(async { 5 }).await.unwrap() + 1 });
                inner.await.unwrap() * 2
            })
            .await
            .unwrap()
        });
        assert_eq!(v, 12);
        // From a foreign thread, awaited by a plain executor.
        let t = rt.handle().spawn(async { "hi" });
        assert_eq!(futures_lite::future::block_on(t).unwrap(), "hi");
    });
}

struct PendingWithToken {
    _token: eddy_tests::DropToken,
    polled: Option<mpsc::Sender<()>>,
}

impl Future for PendingWithToken {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if let Some(tx) = self.polled.take() {
            tx.send(()).unwrap();
        }
        Poll::Pending
    }
}

/// Cancelling a pending (idle) task: awaiting it gives `Err(Cancelled)` and its future is
/// dropped. Also for a task cancelled before its first poll, and from a foreign thread; and
/// cancelling a task that awaits another leaves the awaited one running.
#[test]
fn cancel_pending_task_drops_future_and_gives_cancelled() {
    with_deadline(PATIENCE * 2, || {
        let rt = rt(2);
        let drops = DropCounter::new();

        // Idle task (polled once, nobody holds its waker).
        let (tx, rx) = mpsc::channel();
        let task = rt.handle().spawn(PendingWithToken {
            _token: drops.token(),
            polled: Some(tx),
        });
        rx.recv_timeout(PATIENCE).unwrap();
        assert_eq!(drops.count(), 0);
        assert!(!task.is_finished());
        task.cancel();
        assert!(
            wait_until(PATIENCE, || drops.count() == 1),
            "the cancelled task's future was not dropped"
        );
        assert!(wait_until(PATIENCE, || task.is_finished()));
        let err = rt.block_on(task).unwrap_err();
        assert!(err.is_cancelled(), "{err:?}");
        assert!(matches!(err, TaskError::Cancelled));

        // Cancelled by another task before its first poll.
        let d = drops.clone();
        let res = rt.block_on(async move {
            let token = d.token();
            let t = eddy::spawn(async move {
                token.touch();
                std::future::pending::<()>().await;
            });
            t.cancel();
            t.cancel(); // twice is harmless
            t.await
        });
        assert!(res.unwrap_err().is_cancelled());
        assert_eq!(drops.count(), 2);

        // A task waiting on a channel, cancelled from a foreign thread.
        let (_keep_tx, chan_rx) = async_channel::bounded::<()>(1);
        let token = drops.token();
        let t = rt.handle().spawn(async move {
            token.touch();
            let _ = chan_rx.recv().await;
            "finished"
        });
        assert!(wait_until_idle(&rt.handle(), t.id()), "it never waited");
        std::thread::scope(|s| {
            s.spawn(|| t.cancel());
        });
        assert!(rt.block_on(t).unwrap_err().is_cancelled());
        assert_eq!(drops.count(), 3);

        // Cancelling a task that awaits another cancels only the awaiter: the awaited task
        // is detached (its Task handle is dropped with the awaiter's future) and lives on,
        // answering pings.
        let (ping, pings) = async_channel::unbounded::<()>();
        let (pong, pongs) = async_channel::unbounded::<()>();
        let token = drops.token();
        let inner = rt.handle().spawn(async move {
            token.touch();
            while pings.recv().await.is_ok() {
                pong.send(()).await.unwrap();
            }
        });
        let awaiter = rt.handle().spawn(inner);
        assert!(
            wait_until_idle(&rt.handle(), awaiter.id()),
            "it never awaited"
        );
        awaiter.cancel();
        assert!(rt.block_on(awaiter).unwrap_err().is_cancelled());
        ping.send_blocking(())
            .expect("the awaited task was cancelled too");
        pongs
            .recv_blocking()
            .expect("the awaited task was cancelled too");
        assert_eq!(drops.count(), 3, "dropping a Task must not cancel it");
        drop(rt);
        assert_eq!(drops.count(), 4, "shutdown drops the detached task");
    });
}

/// Cancelling a finished task does nothing: its result is still there.
#[test]
fn cancel_after_completion_keeps_the_result() {
    let rt = rt(1);
    let t = rt.handle().spawn(async { 7 });
    assert!(wait_until(PATIENCE, || t.is_finished()));
    t.cancel();
    assert_eq!(rt.block_on(t).unwrap(), 7);
}

/// Dropping a `Task` detaches it: the task still runs to the end.
#[test]
fn dropping_a_task_detaches_it() {
    with_deadline(PATIENCE * 2, || {
        let rt = rt(2);
        let done = Arc::new(AtomicUsize::new(0));
        let d = done.clone();
        rt.block_on(async move {
            for _ in 0..100 {
                let d = d.clone();
                let t = eddy::spawn(async move {
                    eddy::time::sleep(Duration::from_millis(20)).await;
                    eddy::yield_now().await;
                    d.fetch_add(1, Ordering::SeqCst);
                });
                drop(t);
            }
        });
        assert!(
            wait_until(PATIENCE, || done.load(Ordering::SeqCst) == 100),
            "only {} of 100 detached tasks finished",
            done.load(Ordering::SeqCst)
        );
    });
}

/// Records the thread of every poll of the inner future.
struct ThreadCheck<F> {
    inner: Pin<Box<F>>,
    threads: Rc<std::cell::RefCell<Vec<ThreadId>>>,
}

impl<F: Future> Future for ThreadCheck<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.threads.borrow_mut().push(std::thread::current().id());
        self.inner.as_mut().poll(cx)
    }
}

/// `spawn_local` runs a `!Send` future (it holds an `Rc`), woken from a foreign thread (an
/// async-channel sender), always on the worker that spawned it, while the other worker is
/// kept busy with stealable work. Every 50 messages the sender waits until the task is idle,
/// so that wake-ups of an idle pinned task from the foreign thread are sure to happen.
#[test]
fn spawn_local_rc_future_woken_from_foreign_thread_stays_on_its_worker() {
    const MESSAGES: u64 = 500;
    const IDLE_EVERY: u64 = 50;
    with_deadline(PATIENCE * 2, || {
        let rt = rt(2);
        let (tx, rx) = async_channel::unbounded::<u64>();
        let (id_tx, id_rx) = mpsc::channel();
        let outer = rt.handle().spawn(async move {
            let owner = std::thread::current().id();
            let check = {
                let seen = Rc::new(Cell::new(0u64));
                let threads = Rc::new(std::cell::RefCell::new(Vec::new()));
                let local = eddy::spawn_local(ThreadCheck {
                    inner: Box::pin(async move {
                        let mut sum = 0;
                        while let Ok(v) = rx.recv().await {
                            seen.set(seen.get() + 1);
                            sum += v;
                        }
                        (sum, seen.get())
                    }),
                    threads: threads.clone(),
                });
                id_tx.send(local.id()).unwrap();
                // Pinned to the same worker, so it may look at the `Rc` once the other is done.
                eddy::spawn_local(async move {
                    let (sum, seen) = local.await.unwrap();
                    let threads = threads.borrow();
                    let elsewhere = threads.iter().filter(|&&t| t != owner).count();
                    (sum, seen, threads.len(), elsewhere)
                })
            };
            check.await.unwrap()
        });
        // Busy stealable work so the other worker is active and tries to steal.
        let busy: Vec<_> = (0..200)
            .map(|_| {
                rt.handle().spawn(async {
                    eddy_tests::spin_for(Duration::from_micros(200));
                    eddy::yield_now().await;
                })
            })
            .collect();
        let handle = rt.handle();
        let sender = std::thread::spawn(move || {
            let local = id_rx.recv_timeout(PATIENCE).unwrap();
            for i in 0..MESSAGES {
                if i % IDLE_EVERY == 0 {
                    assert!(
                        wait_until_idle(&handle, local),
                        "the local task never waited for message {i}"
                    );
                }
                tx.send_blocking(i).unwrap();
            }
        });
        sender.join().unwrap();
        let (sum, seen, polls, elsewhere) = rt.block_on(outer).unwrap();
        assert_eq!(seen, MESSAGES);
        assert_eq!(sum, MESSAGES * (MESSAGES - 1) / 2);
        // The first poll, one poll after each wake of the idle task, the last one.
        let woken_idle = (MESSAGES / IDLE_EVERY) as usize;
        assert!(
            polls > woken_idle,
            "the local task was polled {polls} times"
        );
        assert_eq!(
            elsewhere, 0,
            "{elsewhere} of {polls} polls ran on another thread"
        );
        for b in busy {
            rt.block_on(b).unwrap();
        }
    });
}

/// `yield_now` fairness: on a one-worker runtime, a task that loops on `yield_now` forever
/// does not starve other tasks, callbacks (local or from foreign threads) or timers.
#[test]
fn yield_now_loop_does_not_starve_others() {
    with_deadline(PATIENCE * 2, || {
        let rt = rt(1);
        let spins = Arc::new(AtomicUsize::new(0));
        let s = spins.clone();
        let hog = rt.handle().spawn(async move {
            loop {
                s.fetch_add(1, Ordering::Relaxed);
                eddy::yield_now().await;
            }
        });
        assert!(wait_until(PATIENCE, || spins.load(Ordering::Relaxed) > 100));
        // A task from a foreign thread (through the injector).
        let other = rt.handle().spawn(async {
            let mut n = 0;
            for _ in 0..10 {
                eddy::yield_now().await;
                n += 1;
            }
            n
        });
        assert_eq!(futures_lite::future::block_on(other).unwrap(), 10);
        // A foreign callback.
        let (tx, rx) = mpsc::channel();
        rt.handle()
            .call_soon_threadsafe(move || tx.send(()).unwrap())
            .unwrap();
        rx.recv_timeout(PATIENCE)
            .expect("a foreign callback starved");
        // A timer and a sleep.
        let (tx, rx) = mpsc::channel();
        rt.handle()
            .call_later(Duration::from_millis(20), move || tx.send(()).unwrap())
            .unwrap();
        rx.recv_timeout(PATIENCE).expect("a timer starved");
        let slept = rt.block_on(async {
            let t = Instant::now();
            eddy::time::sleep(Duration::from_millis(20)).await;
            t.elapsed()
        });
        assert!(slept >= Duration::from_millis(20));
        // And the hog kept running all along.
        let before = spins.load(Ordering::Relaxed);
        assert!(wait_until(PATIENCE, || spins.load(Ordering::Relaxed) > before + 100));
        hog.cancel();
        assert!(rt.block_on(hog).unwrap_err().is_cancelled());
    });
}

/// The same for a pinned hog: a `spawn_local` task that loops on `yield_now` goes back to its
/// worker's pinned queue each time, and must not run again ahead of the stealable tasks and
/// callbacks that were already waiting (on one worker nobody else could run them).
#[test]
fn pinned_yield_now_loop_does_not_starve_stealable_jobs() {
    with_deadline(PATIENCE * 2, || {
        let rt = rt(1);
        let spins = Arc::new(AtomicUsize::new(0));
        let s = spins.clone();
        let (hog_tx, hog_rx) = mpsc::channel();
        rt.handle()
            .call_soon_threadsafe(move || {
                let hog = eddy::spawn_local(async move {
                    loop {
                        s.fetch_add(1, Ordering::Relaxed);
                        eddy::yield_now().await;
                    }
                });
                // A task and a callback queued from the worker itself, behind the hog.
                let (tx, rx) = mpsc::channel();
                let tx2 = tx.clone();
                drop(eddy::spawn(async move { tx.send("task").unwrap() }));
                eddy::call_soon(move || tx2.send("callback").unwrap());
                hog_tx.send((hog, rx)).unwrap();
            })
            .unwrap();
        let (hog, rx) = hog_rx.recv_timeout(PATIENCE).unwrap();
        let mut got = [
            rx.recv_timeout(PATIENCE).expect("starved"),
            rx.recv_timeout(PATIENCE).expect("starved"),
        ];
        got.sort();
        assert_eq!(got, ["callback", "task"]);
        assert!(spins.load(Ordering::Relaxed) > 0);
        hog.cancel();
        assert!(rt.block_on(hog).unwrap_err().is_cancelled());
    });
}

/// Local-queue fairness on one worker: tasks that yield in turn interleave (each `yield_now`
/// sends the task to the back of the queue).
#[test]
fn yielding_tasks_interleave_round_robin() {
    let rt = rt(1);
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let l = log.clone();
    rt.block_on(async move {
        let (tx, rx) = async_channel::bounded(1);
        // Spawned from a callback, on the worker: all three start in the same cycle.
        let l2 = l.clone();
        eddy::call_soon(move || {
            let tasks: Vec<_> = (0..3u32)
                .map(|id| {
                    let l = l2.clone();
                    eddy::spawn(async move {
                        for round in 0..3u32 {
                            l.lock().unwrap().push((round, id));
                            eddy::yield_now().await;
                        }
                    })
                })
                .collect();
            drop(tx.try_send(tasks));
        });
        for t in rx.recv().await.unwrap() {
            t.await.unwrap();
        }
    });
    let log = log.lock().unwrap().clone();
    let expected: Vec<(u32, u32)> = (0..3).flat_map(|r| (0..3).map(move |i| (r, i))).collect();
    assert_eq!(log, expected);
}

/// `timeout`: gives `Elapsed` after the duration (not before) and drops the inner future;
/// passes the value through when the future is quicker. Also inside 100 tasks at once.
#[test]
fn timeout_works() {
    with_deadline(PATIENCE * 2, || {
        let rt = rt(2);
        let drops = DropCounter::new();
        let token = drops.token();
        let (res, took) = rt.block_on(async move {
            let start = Instant::now();
            let res = eddy::time::timeout(Duration::from_millis(30), async move {
                token.touch();
                std::future::pending::<u32>().await
            })
            .await;
            (res, start.elapsed())
        });
        let err = res.unwrap_err();
        assert_eq!(err.to_string(), "deadline has elapsed");
        assert!(
            took >= Duration::from_millis(30),
            "timed out early: {took:?}"
        );
        assert_eq!(drops.count(), 1, "the timed-out future was not dropped");

        // A generous limit around a short sleep.
        let v = rt.block_on(eddy::time::timeout(PATIENCE, async {
            eddy::time::sleep(Duration::from_millis(5)).await;
            41 + 1
        }));
        assert_eq!(v, Ok(42));

        // Inside tasks, many at once: half of them with a generous limit around a future that
        // is ready at its second poll, half with a short one around a future that never is.
        let results = rt.block_on(async {
            let ts: Vec<_> = (0..100u64)
                .map(|i| {
                    let quick = i % 2 == 0;
                    let limit = if quick {
                        PATIENCE
                    } else {
                        Duration::from_millis(50)
                    };
                    eddy::spawn(eddy::time::timeout(limit, async move {
                        if quick {
                            eddy::yield_now().await;
                        } else {
                            std::future::pending::<()>().await;
                        }
                        i
                    }))
                })
                .collect();
            let mut ok = 0;
            let mut elapsed = 0;
            for (i, t) in ts.into_iter().enumerate() {
                match t.await.unwrap() {
                    Ok(v) => {
                        assert_eq!(v, i as u64);
                        assert_eq!(i % 2, 0, "a pending future finished");
                        ok += 1
                    }
                    Err(_) => {
                        assert_eq!(i % 2, 1, "a ready future timed out");
                        elapsed += 1
                    }
                }
            }
            (ok, elapsed)
        });
        assert_eq!(results, (50, 50));
    });
}

/// A task awaited from another runtime's `block_on`, and a task awaiting a task of another
/// runtime.
#[test]
fn tasks_can_be_awaited_across_runtimes() {
    with_deadline(PATIENCE * 2, || {
        let a = rt(1);
        let b = rt(1);
        let ta = a.handle().spawn(async {
            eddy::time::sleep(Duration::from_millis(10)).await;
            1
        });
        assert_eq!(b.block_on(ta).unwrap(), 1);
        let ha = a.handle();
        let tb = b.handle().spawn(async move {
            let inner = ha.spawn(async {
                eddy::time::sleep(Duration::from_millis(10)).await;
                2
            });
            inner.await.unwrap() + 1
        });
        assert_eq!(a.block_on(tb).unwrap(), 3);
    });
}

/// Stress: 2,000 tasks that keep receiving from a foreign thread are cancelled from another
/// foreign thread at random moments (some before their first poll, some while running, some
/// while idle). Every `Task` resolves (value or `Cancelled`, no hang), and every future is
/// dropped exactly once.
#[test]
fn cancel_at_random_moments_always_resolves_and_drops() {
    const N: usize = 2_000;
    with_deadline(PATIENCE * 2, || {
        let rt = rt(2);
        let drops = DropCounter::new();
        let (tx, rx) = async_channel::bounded::<u32>(64);
        let tasks: Vec<_> = (0..N)
            .map(|i| {
                let token = drops.token();
                let rx = rx.clone();
                rt.handle().spawn(async move {
                    token.touch();
                    let mut got = 0u32;
                    // Each task wants a few messages; some also sleep or yield.
                    while got < 3 {
                        match rx.recv().await {
                            Ok(_) => got += 1,
                            Err(_) => break,
                        }
                        match i % 3 {
                            0 => eddy::yield_now().await,
                            1 => eddy::time::sleep(Duration::from_micros(100)).await,
                            _ => {}
                        }
                    }
                    got
                })
            })
            .collect();
        drop(rx);
        let tasks = Arc::new(tasks);
        let t2 = tasks.clone();
        let canceller = std::thread::spawn(move || {
            let mut rng = eddy_tests::Rng::new(42);
            let mut order: Vec<usize> = (0..N).collect();
            rng.shuffle(&mut order);
            for (k, i) in order.into_iter().enumerate() {
                // Spreads the cancels over the tasks' lives; not synchronisation: every
                // outcome of every race is valid.
                if k % 50 == 0 {
                    std::thread::sleep(Duration::from_micros(rng.below(500)));
                }
                if i % 4 != 0 {
                    t2[i].cancel();
                }
            }
        });
        let feeder = std::thread::spawn(move || {
            // Enough for every task that is not cancelled (N / 4 of them, 3 each).
            for v in 0..(N as u32 * 3) {
                if tx.send_blocking(v).is_err() {
                    break;
                }
            }
        });
        canceller.join().unwrap();
        let tasks = Arc::try_unwrap(tasks).unwrap();
        let (mut ok, mut cancelled) = (0, 0);
        for (i, t) in tasks.into_iter().enumerate() {
            match rt.block_on(t) {
                Ok(got) => {
                    assert!(got <= 3);
                    // There are messages for every task that is not cancelled.
                    assert!(i % 4 != 0 || got == 3, "task {i} got {got} messages");
                    ok += 1;
                }
                Err(e) => {
                    assert!(e.is_cancelled(), "task {i}: {e}");
                    assert_ne!(i % 4, 0, "task {i} was never cancelled");
                    cancelled += 1;
                }
            }
        }
        assert!(ok >= N / 4, "{ok} tasks finished");
        assert_eq!(ok + cancelled, N);
        assert_eq!(drops.count(), N, "some cancelled futures were not dropped");
        drop(rt);
        feeder.join().unwrap();
    });
}

/// A pinned task woken again and again by a task on the *other* worker (through the owner's
/// inbox) stays on its worker and sees every message.
#[test]
fn spawn_local_woken_from_a_sibling_worker() {
    with_deadline(PATIENCE * 2, || {
        let rt = eddy::Builder::new()
            .workers(2)
            .thread_name("sib")
            .build()
            .unwrap();
        let anchors = eddy_tests::Anchors::new(&rt, "sib", 2);
        let (tx, rx) = async_channel::bounded::<u32>(1);
        let (done_tx, done_rx) = mpsc::channel();
        anchors.run(0, move || async move {
            let me = std::thread::current().id();
            let local = eddy::spawn_local(async move {
                let not_send = Rc::new(Cell::new(0u32));
                while let Ok(v) = rx.recv().await {
                    assert_eq!(std::thread::current().id(), me);
                    not_send.set(not_send.get() + v);
                }
                not_send.get()
            });
            done_tx.send(local.await.unwrap()).unwrap();
        });
        anchors.run(1, move || async move {
            for _ in 0..2_000 {
                tx.send(1).await.unwrap();
            }
        });
        assert_eq!(done_rx.recv_timeout(PATIENCE).unwrap(), 2_000);
    });
}
