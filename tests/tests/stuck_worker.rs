//! A worker stuck in a long callback or task poll does not strand the timers on its heap: a
//! sibling fires them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use eddy::Builder;
use eddy_tests::{spin_for, with_deadline, Anchors};

const STUCK_FOR: Duration = Duration::from_millis(500);
const TIMER: Duration = Duration::from_millis(20);
/// How late (after scheduling) the 20 ms timer may fire: well before the 500 ms are over.
const LIMIT: Duration = Duration::from_millis(150);

/// The brief's case: `eddy::call_later` from inside a 500 ms callback (so on that worker's own
/// heap), then the callback blocks. The timer fires on the sibling well before the callback
/// ends. Once with the worker sleeping, once spinning.
#[test]
fn timer_scheduled_by_a_stuck_callback_fires_on_time() {
    for spin in [false, true] {
        with_deadline(Duration::from_secs(30), move || {
            let rt = Builder::new().workers(2).build().unwrap();
            let (tx, rx) = mpsc::channel();
            rt.handle()
                .call_soon_threadsafe(move || {
                    let me = std::thread::current().id();
                    let scheduled = Instant::now();
                    let fired = Arc::new(AtomicBool::new(false));
                    let f = fired.clone();
                    let tx2 = tx.clone();
                    eddy::call_later(TIMER, move || {
                        f.store(true, Ordering::SeqCst);
                        tx2.send(Ok((scheduled.elapsed(), std::thread::current().id() != me)))
                            .unwrap();
                    });
                    if spin {
                        spin_for(STUCK_FOR);
                    } else {
                        std::thread::sleep(STUCK_FOR);
                    }
                    if !fired.load(Ordering::SeqCst) {
                        tx.send(Err(scheduled.elapsed())).unwrap();
                    }
                })
                .unwrap();
            match rx.recv_timeout(Duration::from_secs(10)).unwrap() {
                Ok((after, elsewhere)) => {
                    assert!(after >= TIMER, "fired early: {after:?}");
                    assert!(
                        after < LIMIT,
                        "(spin={spin}) the 20 ms timer fired after {after:?}"
                    );
                    assert!(elsewhere, "fired on the stuck worker itself?");
                }
                Err(after) => panic!(
                    "(spin={spin}) the 20 ms timer had not fired when the 500 ms callback \
                     ended ({after:?})"
                ),
            }
        });
    }
}

/// The same for a `sleep`: a task polls `sleep(20 ms)` on worker W (registering it on W's
/// heap), hands the sleep to a new task (which the sibling steals), and then blocks W for
/// 500 ms inside the same poll. The sleep completes on the sibling within 150 ms.
#[test]
fn sleep_registered_on_a_stuck_worker_completes_on_time() {
    with_deadline(Duration::from_secs(30), || {
        let rt = Builder::new().workers(2).build().unwrap();
        let (tx, rx) = mpsc::channel();
        let blocker = rt.handle().spawn(async move {
            let scheduled = Instant::now();
            let mut sleep = Box::pin(eddy::time::sleep(TIMER));
            // First poll here, on this worker: the timer goes on this worker's heap.
            assert!(futures_lite::future::poll_once(&mut sleep).await.is_none());
            let tx2 = tx.clone();
            let waiter = eddy::spawn(async move {
                sleep.await;
                tx2.send(Ok(scheduled.elapsed())).unwrap();
            });
            drop(waiter);
            std::thread::sleep(STUCK_FOR);
            let _ = tx.send(Err(scheduled.elapsed()));
        });
        match rx.recv_timeout(Duration::from_secs(10)).unwrap() {
            Ok(after) => {
                assert!(after >= TIMER, "sleep ended early: {after:?}");
                assert!(after < LIMIT, "the 20 ms sleep ended after {after:?}");
            }
            Err(after) => panic!("the 20 ms sleep had not ended after {after:?}"),
        }
        rt.block_on(blocker).unwrap();
    });
}

/// Stuck worker, harder case: the worker that gets stuck was asleep (parked) when its sibling
/// last went to sleep, so the sibling's park deadline ignored that worker's heap; and it gets
/// stuck without going through the idle bookkeeping: a pinned (`spawn_local`) task of it is
/// woken from a foreign thread (the pinned inbox notifies the owner directly) and then runs
/// for 500 ms. A 100 ms timer on its heap must still fire on time.
#[test]
fn timer_of_a_worker_stuck_after_a_pinned_inbox_wake_fires_on_time() {
    stuck_after_direct_wake(WakeBy::ForeignThread);
}

/// As above, but the stuck worker wakes up by its own timer: a pinned task's `sleep` ends (the
/// wake goes straight to the owner's pinned queue), then the task runs for 500 ms.
#[test]
fn timer_of_a_worker_stuck_after_its_own_sleep_fires_on_time() {
    stuck_after_direct_wake(WakeBy::OwnSleep);
}

#[derive(Clone, Copy, Debug)]
enum WakeBy {
    ForeignThread,
    OwnSleep,
}

fn stuck_after_direct_wake(how: WakeBy) {
    with_deadline(Duration::from_secs(30), move || {
        let rt = Builder::new()
            .workers(2)
            .thread_name("stuck")
            .build()
            .unwrap();
        let anchors = Anchors::new(&rt, "stuck", 2);
        // Let everything settle: both workers park.
        std::thread::sleep(Duration::from_millis(50));

        let (tx, rx) = mpsc::channel();
        let (go_tx, go_rx) = async_channel::bounded::<()>(1);
        let t0 = Instant::now();
        let timer_at = t0 + Duration::from_millis(100);
        // Worker 0: a timer at t0 + 100 ms on its own heap, then wait (pinned) for the signal
        // to block for 500 ms.
        anchors.run(0, move || async move {
            let tx2 = tx.clone();
            eddy::call_at(timer_at, move || {
                let _ = tx2.send(Ok(Instant::now()));
            });
            match how {
                WakeBy::ForeignThread => go_rx.recv().await.unwrap(),
                WakeBy::OwnSleep => eddy::time::sleep_until(t0 + Duration::from_millis(60)).await,
            }
            std::thread::sleep(STUCK_FOR);
            let _ = tx.send(Err(Instant::now()));
        });
        // Worker 1: wake at t0 + 40 ms by its own pinned sleep (no sibling is woken for that)
        // and go back to sleep while worker 0 is parked.
        anchors.run(1, move || async move {
            eddy::time::sleep_until(t0 + Duration::from_millis(40)).await;
        });
        if let WakeBy::ForeignThread = how {
            std::thread::sleep(
                (t0 + Duration::from_millis(60)).saturating_duration_since(Instant::now()),
            );
            go_tx.send_blocking(()).unwrap();
        }
        match rx.recv_timeout(Duration::from_secs(10)).unwrap() {
            Ok(at) => {
                let late = at.saturating_duration_since(timer_at);
                assert!(at >= timer_at, "fired early");
                assert!(
                    late < Duration::from_millis(100),
                    "({how:?}) the timer of the stuck worker fired {late:?} late"
                );
            }
            Err(at) => panic!(
                "({how:?}) the timer due at +100 ms had not fired when worker 0 got unstuck \
                 at +{:?}",
                at - t0
            ),
        }
        drop(anchors);
    });
}

/// A single task queued on a worker that then blocks for 500 ms is stolen by the parked
/// sibling (which keeps a watch on busy siblings) long before the block ends.
#[test]
fn a_task_queued_behind_a_stuck_worker_is_stolen() {
    let rt = Builder::new().workers(2).build().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    rt.handle()
        .call_soon_threadsafe(move || {
            let start = Instant::now();
            let tx2 = tx.clone();
            drop(eddy::spawn(async move {
                tx2.send(("task ran", start.elapsed())).unwrap();
            }));
            std::thread::sleep(Duration::from_millis(500));
            tx.send(("callback ended", start.elapsed())).unwrap();
        })
        .unwrap();
    let (first, at) = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(first, "task ran");
    assert!(at < Duration::from_millis(150), "the task waited {at:?}");
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(5)).unwrap().0,
        "callback ended"
    );
}

/// The same when the sibling is busy itself: it always has a job ready, so it never runs
/// out of work and never searches. It still takes the task queued behind the stuck worker,
/// because every 61 jobs it looks for siblings that stopped making progress.
#[test]
fn a_task_queued_behind_a_stuck_worker_is_stolen_by_a_busy_sibling() {
    with_deadline(Duration::from_secs(30), || {
        let rt = Builder::new()
            .workers(2)
            .thread_name("busy")
            .build()
            .unwrap();
        let anchors = Anchors::new(&rt, "busy", 2);
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        anchors.run(1, move || async move {
            while !s.load(Ordering::SeqCst) {
                eddy::task::yield_now().await;
            }
        });
        // Let the busy loop start before worker 0 gets stuck.
        std::thread::sleep(Duration::from_millis(20));
        let (tx, rx) = mpsc::channel();
        anchors.run(0, move || async move {
            let start = Instant::now();
            let tx2 = tx.clone();
            drop(eddy::spawn(async move {
                tx2.send(("task ran", start.elapsed())).unwrap();
            }));
            std::thread::sleep(STUCK_FOR);
            tx.send(("stuck job ended", start.elapsed())).unwrap();
        });
        let (first, at) = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        stop.store(true, Ordering::SeqCst);
        assert_eq!(first, "task ran", "the task waited for the stuck job");
        assert!(at < LIMIT, "the task waited {at:?}");
    });
}
