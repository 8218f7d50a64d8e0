//! Structured concurrency: `TaskGroup` (first failure cancels the rest, every failure is
//! reported) and `JoinSet` (results as tasks finish); `interval`; thread hooks.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use eddy::time::MissedTickBehavior;
use eddy::{JoinSet, TaskFailure, TaskGroup};
use eddy_tests::{
    quiet_expected_panics, rt, wait_until, with_deadline, DropCounter, EXPECTED, PATIENCE,
};

/// `join` returns the values in spawn order although the tasks finish in the reverse order:
/// each task waits for the one spawned after it, which tells it as its last step.
#[test]
fn group_returns_values_in_spawn_order() {
    const N: u32 = 20;
    with_deadline(PATIENCE * 2, || {
        rt(2).block_on(async {
            let mut g = TaskGroup::<u32, String>::new();
            let (done_tx, mut done_rx): (Vec<_>, Vec<_>) =
                (0..N).map(|_| async_channel::bounded::<()>(1)).unzip();
            let _nobody_waits_for_the_first = done_rx.remove(0);
            let mut waits = done_rx.into_iter();
            for (i, done) in (0..N).zip(done_tx) {
                let wait_for_next = waits.next();
                g.spawn(async move {
                    if let Some(next) = wait_for_next {
                        next.recv().await.unwrap();
                    }
                    done.try_send(()).unwrap();
                    Ok(i)
                });
            }
            assert_eq!(g.join().await.unwrap(), (0..N).collect::<Vec<_>>());
        });
    });
}

/// The first failure cancels the other members (their futures are dropped, none goes on
/// to finish) and is the one failure `join` reports.
#[test]
fn first_failure_cancels_the_others() {
    with_deadline(PATIENCE * 2, || {
        let dropped = DropCounter::new();
        let finished = Arc::new(AtomicUsize::new(0));
        let (d, f) = (dropped.clone(), finished.clone());
        let err = rt(2).block_on(async move {
            let mut g = TaskGroup::<(), String>::new();
            for _ in 0..10 {
                let token = d.token();
                let f = f.clone();
                g.spawn(async move {
                    token.touch();
                    eddy::time::sleep(Duration::from_secs(3600)).await;
                    f.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                });
            }
            g.spawn(async { Err("first".to_string()) });
            g.join().await.unwrap_err()
        });
        assert_eq!(dropped.count(), 10, "the others were cancelled (dropped)");
        assert_eq!(finished.load(Ordering::SeqCst), 0);
        assert!(
            matches!(&err.failures[..], [TaskFailure::Error(e)] if e == "first"),
            "{err}"
        );
        assert!(err.to_string().contains("failed"), "{err}");
    });
}

/// Two members that both fail (one returns `Err`, one panics) before the group sees either
/// failure: `join` reports both. Each tells the test from inside its last poll, which
/// cancelling can no longer stop.
#[test]
fn every_failure_is_reported_errors_and_panics() {
    quiet_expected_panics();
    with_deadline(PATIENCE * 2, || {
        let err = rt(2).block_on(async {
            let (failing_tx, failing) = async_channel::unbounded::<()>();
            let mut g = TaskGroup::<(), &'static str>::new();
            let tx = failing_tx.clone();
            g.spawn(async move {
                tx.try_send(()).unwrap();
                Err("an error")
            });
            g.spawn(async move {
                failing_tx.try_send(()).unwrap();
                panic!("{EXPECTED} a panic")
            });
            failing.recv().await.unwrap();
            failing.recv().await.unwrap();
            g.join().await.unwrap_err()
        });
        let mut failures: Vec<String> = err
            .failures
            .iter()
            .map(|f| match f {
                TaskFailure::Error(e) => format!("error: {e}"),
                // Without the marker, which would keep a failed assertion quiet.
                TaskFailure::Panicked(p) => format!("panic:{}", p.message().replace(EXPECTED, "")),
            })
            .collect();
        failures.sort();
        assert_eq!(failures, ["error: an error", "panic: a panic"]);
    });
}

/// `join_next` hands out each result as its task finishes: the tasks wait for the test's
/// word, which it gives in an order of its own, one task at a time.
#[test]
fn join_set_yields_results_as_tasks_finish() {
    quiet_expected_panics();
    with_deadline(PATIENCE * 2, || {
        rt(2).block_on(async {
            let mut set = JoinSet::new();
            let gates: Vec<async_channel::Sender<()>> = (0..3usize)
                .map(|i| {
                    let (go, wait) = async_channel::bounded::<()>(1);
                    set.spawn(async move {
                        wait.recv().await.unwrap();
                        i
                    });
                    go
                })
                .collect();
            set.spawn(async { panic!("{EXPECTED} in the set") });
            assert_eq!(set.len(), 4);
            // Only the panicking task can finish before a gate opens.
            let first = set.join_next().await.unwrap();
            assert!(first.unwrap_err().is_panic());
            for i in [1, 2, 0] {
                gates[i].send(()).await.unwrap();
                assert_eq!(set.join_next().await.unwrap().unwrap(), i);
            }
            assert!(set.is_empty());
            assert!(set.join_next().await.is_none());
        });
    });
}

/// Dropping a `JoinSet` cancels its tasks: their futures are dropped while the runtime runs
/// on.
#[test]
fn dropping_a_join_set_cancels_its_tasks() {
    with_deadline(PATIENCE * 2, || {
        let rt = rt(2);
        let drops = DropCounter::new();
        let polled = Arc::new(AtomicUsize::new(0));
        let (d, p) = (drops.clone(), polled.clone());
        let set = rt.block_on(async move {
            let mut set = JoinSet::new();
            for _ in 0..100 {
                let token = d.token();
                let p = p.clone();
                set.spawn(async move {
                    token.touch();
                    p.fetch_add(1, Ordering::SeqCst);
                    std::future::pending::<()>().await
                });
            }
            set
        });
        assert!(wait_until(PATIENCE, || polled.load(Ordering::SeqCst) == 100));
        assert_eq!(drops.count(), 0);
        drop(set);
        assert!(
            wait_until(PATIENCE, || drops.count() == 100),
            "{} of 100 tasks were dropped",
            drops.count()
        );
    });
}

/// `JoinSet::shutdown` cancels every task and returns once all of them have stopped.
#[test]
fn join_set_shutdown_waits_for_all() {
    with_deadline(PATIENCE * 2, || {
        let drops = DropCounter::new();
        let d = drops.clone();
        rt(2).block_on(async move {
            let mut set = JoinSet::new();
            for _ in 0..50 {
                let token = d.token();
                set.spawn(async move {
                    token.touch();
                    eddy::time::sleep(Duration::from_secs(3600)).await
                });
            }
            set.shutdown().await;
            assert!(set.is_empty());
            assert_eq!(d.count(), 50, "shutdown returned before every task stopped");
        });
    });
}

const PERIOD: Duration = Duration::from_millis(20);
/// Longer than three periods: a task busy this long misses ticks.
const STALL: Duration = Duration::from_millis(70);

/// `interval`: the first tick completes at once (it is scheduled when the interval is made),
/// then one tick per period, each returning the instant it was scheduled for and never
/// completing before it.
#[test]
fn interval_ticks_on_schedule() {
    with_deadline(PATIENCE * 2, || {
        rt(2).block_on(async {
            let before = eddy::time();
            let mut every = eddy::time::interval(PERIOD);
            let after = eddy::time();
            let first = every.tick().await;
            assert!(before <= first && first <= after, "the first tick is now");
            for i in 1..=3u32 {
                let t = every.tick().await;
                assert_eq!(t, first + PERIOD * i);
                assert!(eddy::time() >= t, "tick {i} came early");
            }
        });
    });
}

/// `MissedTickBehavior::Burst` (the default): after a stall, the missed ticks keep their
/// schedule and are all already due, so they come back to back.
#[test]
fn interval_burst_keeps_the_schedule_after_a_stall() {
    with_deadline(PATIENCE * 2, || {
        rt(2).block_on(async {
            let mut burst = eddy::time::interval(PERIOD);
            let base = burst.tick().await;
            std::thread::sleep(STALL); // the task is busy
            let stalled_until = eddy::time();
            for i in 1..=3u32 {
                let t = burst.tick().await;
                assert_eq!(t, base + PERIOD * i, "the schedule is kept");
                assert!(t <= stalled_until, "a missed tick was not due at once");
            }
        });
    });
}

/// `MissedTickBehavior::Skip`: after a stall, the missed tick fires once, late, and the next
/// tick is the first slot of the original schedule after it.
#[test]
fn interval_skip_drops_the_missed_ticks() {
    with_deadline(PATIENCE * 2, || {
        rt(2).block_on(async {
            let mut skip = eddy::time::interval(PERIOD);
            skip.set_missed_tick_behavior(MissedTickBehavior::Skip);
            let base = skip.tick().await;
            std::thread::sleep(STALL); // the task is busy
            let before = eddy::time();
            let late = skip.tick().await;
            let after = eddy::time();
            assert_eq!(late, base + PERIOD, "the missed tick fires once, late");
            let next = skip.tick().await;
            let offset = (next - base).as_nanos();
            assert_eq!(offset % PERIOD.as_nanos(), 0, "off the original schedule");
            assert!(next > before, "a missed slot was not skipped");
            assert!(
                next <= after + PERIOD,
                "a slot after the late tick was skipped"
            );
            assert!(eddy::time() >= next);
        });
    });
}

/// `MissedTickBehavior::Delay`: after a stall, the schedule restarts one period after the
/// late tick.
#[test]
fn interval_delay_restarts_the_schedule() {
    with_deadline(PATIENCE * 2, || {
        rt(2).block_on(async {
            let mut delay = eddy::time::interval(PERIOD);
            delay.set_missed_tick_behavior(MissedTickBehavior::Delay);
            let base = delay.tick().await;
            std::thread::sleep(STALL); // the task is busy
            let before = eddy::time();
            let late = delay.tick().await;
            let after = eddy::time();
            assert_eq!(late, base + PERIOD);
            let next = delay.tick().await;
            assert!(
                before + PERIOD <= next && next <= after + PERIOD,
                "the next tick is not one period after the late one"
            );
            assert!(eddy::time() >= next);
        });
    });
}

/// `interval` refuses a zero period.
#[test]
#[should_panic(expected = "non-zero")]
fn a_zero_period_panics() {
    let _ = eddy::time::interval(Duration::ZERO);
}

/// The start and stop hooks run on every thread the runtime starts: both workers and the
/// blocking thread.
#[test]
fn thread_hooks_run_on_every_runtime_thread() {
    with_deadline(PATIENCE * 2, || {
        let started = Arc::new(std::sync::Mutex::new(Vec::new()));
        let stopped = Arc::new(AtomicUsize::new(0));
        let (s, t) = (started.clone(), stopped.clone());
        let rt = eddy::Builder::new()
            .workers(2)
            .on_thread_start(move || {
                s.lock()
                    .unwrap()
                    .push(std::thread::current().name().unwrap_or("").to_string())
            })
            .on_thread_stop(move || {
                t.fetch_add(1, Ordering::SeqCst);
            })
            .build()
            .unwrap();
        rt.block_on(async { eddy::spawn_blocking(|| ()).await.unwrap() });
        drop(rt);
        let names = started.lock().unwrap().clone();
        let workers = names
            .iter()
            .filter(|n| n.starts_with("eddy-worker") && !n.contains("blocking"));
        assert_eq!(workers.count(), 2, "{names:?}");
        assert_eq!(
            names.iter().filter(|n| n.contains("blocking")).count(),
            1,
            "{names:?}"
        );
        assert_eq!(names.len(), 3, "{names:?}");
        // Shutdown waits for the workers; the idle blocking thread leaves on its own.
        assert!(stopped.load(Ordering::SeqCst) >= 2, "a worker's stop hook");
        assert!(
            wait_until(PATIENCE, || stopped.load(Ordering::SeqCst) == 3),
            "{} of 3 threads ran their stop hook",
            stopped.load(Ordering::SeqCst)
        );
    });
}
