//! A worker stuck in a long callback or task poll strands nothing: a sibling fires the timers
//! on its heap and runs the jobs queued behind it.
//!
//! In each test the stuck job waits for the very thing the sibling must do for it (with
//! [`PATIENCE`] as the limit), so the test passes only if the rescue happens while the worker
//! is stuck, however slowly the machine runs. How soon it happens is a benchmark's business.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use eddy::Builder;
use eddy_tests::{wait_until_all_workers_sleep, with_deadline, Anchors, PATIENCE};

/// Long enough for a broken rescue to fail instead of hang.
const LIMIT: Duration = Duration::from_secs(90);

const TIMER: Duration = Duration::from_millis(20);

/// How a stuck job waits for what its sibling must do.
#[derive(Clone, Copy, Debug)]
enum Stuck {
    /// Blocked in a system call (a sleep, a lock, a blocking read).
    Blocking,
    /// Spinning on the CPU.
    Spinning,
}

/// Waits up to [`PATIENCE`] for a message, blocking or spinning the calling thread.
fn stuck_until<T>(rx: &mpsc::Receiver<T>, how: Stuck) -> Option<T> {
    match how {
        Stuck::Blocking => rx.recv_timeout(PATIENCE).ok(),
        Stuck::Spinning => {
            let end = Instant::now() + PATIENCE;
            while Instant::now() < end {
                if let Ok(v) = rx.try_recv() {
                    return Some(v);
                }
                std::hint::spin_loop();
            }
            None
        }
    }
}

/// The brief's case: `eddy::call_later` from inside a callback (so on that worker's own
/// heap), then the callback is stuck until the timer has fired: a sibling must fire it.
/// Once with the worker blocked, once spinning.
#[test]
fn a_timer_set_by_a_stuck_callback_fires_while_it_is_stuck() {
    for how in [Stuck::Blocking, Stuck::Spinning] {
        with_deadline(LIMIT, move || {
            let rt = Builder::new().workers(2).build().unwrap();
            let (tx, rx) = mpsc::channel();
            rt.handle()
                .call_soon_threadsafe(move || {
                    let me = std::thread::current().id();
                    let scheduled = Instant::now();
                    let (fired_tx, fired_rx) = mpsc::channel();
                    eddy::call_later(TIMER, move || {
                        let _ = fired_tx.send((scheduled.elapsed(), std::thread::current().id()));
                    });
                    let fired = stuck_until(&fired_rx, how);
                    tx.send((me, fired)).unwrap();
                })
                .unwrap();
            let (stuck_thread, fired) = rx.recv().unwrap();
            let (after, fired_on) = fired.unwrap_or_else(|| {
                panic!("({how:?}) the timer had not fired after {PATIENCE:?} of being stuck")
            });
            assert!(after >= TIMER, "fired early: {after:?}");
            assert_ne!(fired_on, stuck_thread, "fired on the stuck worker itself?");
        });
    }
}

/// The same for a `sleep`: a task polls `sleep(20 ms)` on worker W (registering it on W's
/// heap), hands the sleep to a new task, and then stays stuck in the same poll until that
/// task reports that the sleep ended. A sibling must both take the new task and fire the
/// timer on W's heap.
#[test]
fn a_sleep_registered_on_a_stuck_worker_ends_while_it_is_stuck() {
    with_deadline(LIMIT, || {
        let rt = Builder::new().workers(2).build().unwrap();
        let blocker = rt.handle().spawn(async move {
            let scheduled = Instant::now();
            let mut sleep = Box::pin(eddy::time::sleep(TIMER));
            // First poll here, on this worker: the timer goes on this worker's heap.
            assert!(futures_lite::future::poll_once(&mut sleep).await.is_none());
            let (ended_tx, ended_rx) = mpsc::channel();
            drop(eddy::spawn(async move {
                sleep.await;
                let _ = ended_tx.send(scheduled.elapsed());
            }));
            ended_rx.recv_timeout(PATIENCE).ok()
        });
        let after = rt
            .block_on(blocker)
            .unwrap()
            .expect("the sleep had not ended while its worker was stuck");
        assert!(after >= TIMER, "sleep ended early: {after:?}");
    });
}

/// Stuck worker, harder case: the worker gets stuck right after a wake that bypasses the idle
/// bookkeeping, with its sibling asleep: a pinned (`spawn_local`) task of it is woken from a
/// foreign thread (the pinned inbox notifies the owner directly). The task sets a timer and
/// stays stuck until it fires.
#[test]
fn a_timer_of_a_worker_stuck_after_a_pinned_inbox_wake_fires() {
    stuck_after_direct_wake(WakeBy::ForeignThread);
}

/// As above, but the stuck worker wakes by its own timer: a pinned task's `sleep` ends (the
/// wake goes straight to the owner's pinned queue), then the task sets a timer and stays
/// stuck until it fires.
#[test]
fn a_timer_of_a_worker_stuck_after_its_own_sleep_fires() {
    stuck_after_direct_wake(WakeBy::OwnSleep);
}

#[derive(Clone, Copy, Debug)]
enum WakeBy {
    ForeignThread,
    OwnSleep,
}

fn stuck_after_direct_wake(how: WakeBy) {
    with_deadline(LIMIT, move || {
        let rt = Builder::new()
            .workers(2)
            .thread_name("stuck")
            .build()
            .unwrap();
        let anchors = Anchors::new(&rt, "stuck", 2);
        assert!(
            wait_until_all_workers_sleep(&rt, PATIENCE),
            "the workers did not go to sleep"
        );

        let (tx, rx) = mpsc::channel::<(ThreadId, Option<ThreadId>)>();
        let (go_tx, go_rx) = async_channel::bounded::<()>(1);
        anchors.run(0, move || async move {
            match how {
                WakeBy::ForeignThread => go_rx.recv().await.unwrap(),
                WakeBy::OwnSleep => eddy::time::sleep(Duration::from_millis(10)).await,
            }
            let (fired_tx, fired_rx) = mpsc::channel();
            eddy::call_later(TIMER, move || {
                let _ = fired_tx.send(std::thread::current().id());
            });
            let fired_on = fired_rx.recv_timeout(PATIENCE).ok();
            let _ = tx.send((std::thread::current().id(), fired_on));
        });
        if let WakeBy::ForeignThread = how {
            // Worker 0 has gone back to sleep waiting for the message.
            assert!(wait_until_all_workers_sleep(&rt, PATIENCE));
            go_tx.send_blocking(()).unwrap();
        }
        let (stuck, fired_on) = rx.recv().unwrap();
        let fired_on = fired_on.unwrap_or_else(|| {
            panic!("({how:?}) the timer of the stuck worker had not fired after {PATIENCE:?}")
        });
        assert_ne!(fired_on, stuck);
        drop(anchors);
    });
}

/// A single task queued on a worker that then blocks (too little to wake a sibling for when
/// it is queued) is still taken by the parked sibling while the worker is blocked.
#[test]
fn a_task_queued_behind_a_stuck_worker_is_stolen() {
    with_deadline(LIMIT, || {
        let rt = Builder::new().workers(2).build().unwrap();
        let (tx, rx) = mpsc::channel();
        rt.handle()
            .call_soon_threadsafe(move || {
                let (ran_tx, ran_rx) = mpsc::channel();
                drop(eddy::spawn(async move {
                    let _ = ran_tx.send(());
                }));
                tx.send(ran_rx.recv_timeout(PATIENCE).is_ok()).unwrap();
            })
            .unwrap();
        assert!(
            rx.recv().unwrap(),
            "the task waited for the stuck job to end"
        );
    });
}

/// The same when the sibling is busy itself: it always has a job ready, so it never runs
/// out of work and never searches. It still takes the task queued behind the stuck worker,
/// because a busy worker looks for siblings that stopped making progress.
#[test]
fn a_task_queued_behind_a_stuck_worker_is_stolen_by_a_busy_sibling() {
    queued_behind_a_stuck_worker_run_on_a_busy_sibling(1);
}

/// The same with a whole queue behind the stuck worker: the busy sibling takes all of it,
/// not only the batch an idle thief would take.
#[test]
fn every_task_queued_behind_a_stuck_worker_runs_on_a_busy_sibling() {
    queued_behind_a_stuck_worker_run_on_a_busy_sibling(300);
}

/// Worker 1 always has a job ready; worker 0 queues `tasks` tasks and then blocks until they
/// have all run (or `PATIENCE` passes).
fn queued_behind_a_stuck_worker_run_on_a_busy_sibling(tasks: usize) {
    with_deadline(LIMIT, move || {
        let rt = Builder::new()
            .workers(2)
            .thread_name("busy")
            .build()
            .unwrap();
        let anchors = Anchors::new(&rt, "busy", 2);
        let stop = Arc::new(AtomicBool::new(false));
        let (busy_tx, busy_rx) = mpsc::channel();
        let s = stop.clone();
        anchors.run(1, move || async move {
            let _ = busy_tx.send(());
            while !s.load(Ordering::SeqCst) {
                eddy::task::yield_now().await;
            }
        });
        busy_rx.recv().unwrap();
        let (tx, rx) = mpsc::channel();
        anchors.run(0, move || async move {
            let (ran_tx, ran_rx) = mpsc::channel();
            for _ in 0..tasks {
                let ran_tx = ran_tx.clone();
                drop(eddy::spawn(async move {
                    let _ = ran_tx.send(());
                }));
            }
            let deadline = Instant::now() + PATIENCE;
            let all_ran = (0..tasks).all(|_| {
                let left = deadline.saturating_duration_since(Instant::now());
                ran_rx.recv_timeout(left).is_ok()
            });
            let _ = tx.send(all_ran);
        });
        let stolen = rx.recv().unwrap();
        stop.store(true, Ordering::SeqCst);
        assert!(stolen, "a task waited for the stuck job to end");
    });
}
