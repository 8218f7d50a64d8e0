//! Metrics counters under a known workload, and task dumps under load.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use eddy::task::TaskState;

/// `busy_time` leaves a park in progress out and never goes back. A worker that stays in
/// one park between two snapshots (its park and wake-up counts unchanged) gains no busy
/// time, however long the park lasts; and across snapshots taken while a worker parks and
/// wakes every millisecond, no worker's `busy_time` ever decreases. (Before, a park in
/// progress counted as busy until it ended, and then the figure dropped: a delta of two
/// snapshots could underflow.)
#[test]
fn busy_time_leaves_out_the_park_in_progress_and_never_decreases() {
    let rt = eddy::Builder::new().workers(2).build().unwrap();
    assert!(eddy_tests::wait_until_all_workers_sleep(
        &rt,
        eddy_tests::PATIENCE
    ));
    let asleep = rt.metrics();
    // Lets the park in progress grow long: the property holds for any length.
    std::thread::sleep(Duration::from_millis(50));
    let later = rt.metrics();
    for (a, b) in asleep.workers.iter().zip(&later.workers) {
        if (a.parks, a.wakeups) == (b.parks, b.wakeups) {
            assert_eq!(a.busy_time, b.busy_time, "asleep, yet busier: {a:?} {b:?}");
        }
    }
    assert!(
        asleep
            .workers
            .iter()
            .zip(&later.workers)
            .any(|(a, b)| (a.parks, a.wakeups) == (b.parks, b.wakeups)),
        "no worker stayed asleep with nothing to do"
    );

    let done = Arc::new(AtomicBool::new(false));
    let ticking = done.clone();
    let ticker = rt.handle().spawn(async move {
        while !ticking.load(Ordering::SeqCst) {
            eddy::time::sleep(Duration::from_millis(1)).await;
        }
    });
    let mut last = rt.metrics();
    for _ in 0..300 {
        std::thread::sleep(Duration::from_micros(700));
        let now = rt.metrics();
        for (a, b) in last.workers.iter().zip(&now.workers) {
            assert!(
                b.busy_time >= a.busy_time,
                "busy_time went back from {:?} to {:?}",
                a.busy_time,
                b.busy_time
            );
        }
        last = now;
    }
    done.store(true, Ordering::SeqCst);
    rt.block_on(ticker).unwrap();
}

#[test]
fn counters_move_as_the_workload_says() {
    let rt = eddy::Builder::new().workers(1).build().unwrap();
    let before = rt.metrics();
    assert_eq!(before.workers[0].tasks_polled, 0);
    rt.block_on(async {
        // 100 tasks that yield once: two polls each.
        let tasks: Vec<_> = (0..100)
            .map(|_| eddy::spawn(async { eddy::yield_now().await }))
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        // 50 callbacks, 2 more cancelled (not run, not counted).
        let (tx, rx) = async_channel::unbounded();
        for _ in 0..50 {
            let tx = tx.clone();
            eddy::call_soon(move || tx.try_send(()).unwrap());
        }
        for _ in 0..2 {
            eddy::call_soon(|| unreachable!()).cancel();
        }
        for _ in 0..50 {
            rx.recv().await.unwrap();
        }
        // 10 timers fire, 5 are cancelled.
        for i in 0..10u64 {
            let tx = tx.clone();
            eddy::call_later(Duration::from_millis(i), move || tx.try_send(()).unwrap());
        }
        for _ in 0..5 {
            eddy::call_later(Duration::from_secs(60), || unreachable!()).cancel();
        }
        for _ in 0..10 {
            rx.recv().await.unwrap();
        }
        // Some IO: the read is pending (registered) before the byte arrives, so its
        // readiness is an event the worker harvests.
        let (a, b) = eddy::net::UnixStream::pair().unwrap();
        let (pending_tx, pending_rx) = async_channel::bounded(1);
        let reader = eddy::spawn(async move {
            let mut buf = [0u8; 1];
            let mut read = std::pin::pin!(a.read_exact(&mut buf));
            std::future::poll_fn(|cx| {
                let r = read.as_mut().poll(cx);
                if r.is_pending() {
                    let _ = pending_tx.try_send(());
                }
                r
            })
            .await
            .unwrap();
        });
        pending_rx.recv().await.unwrap();
        b.write_all(b"x").await.unwrap();
        reader.await.unwrap();
        eddy::spawn_blocking(|| ()).await.unwrap();
    });
    // A park and a wake-up for certain: the idle worker is woken by a foreign thread.
    assert!(eddy_tests::wait_until_all_workers_sleep(
        &rt,
        eddy_tests::PATIENCE
    ));
    let (tx, rx) = std::sync::mpsc::channel();
    rt.handle()
        .call_soon_threadsafe(move || tx.send(()).unwrap())
        .unwrap();
    rx.recv().unwrap();
    let m = rt.metrics();
    let w = &m.workers[0];
    assert!(w.tasks_polled >= 200, "{w:?}");
    assert!(
        w.callbacks_run >= 61,
        "50 call_soon + 10 call_later + 1 threadsafe: {w:?}"
    );
    assert!(w.timers_fired >= 10, "{w:?}");
    assert_eq!(w.timers_cancelled, 5, "{w:?}");
    // Cancelled entries at the top of the heap are popped by the tidy phase.
    assert_eq!(
        (w.timer_heap_size, w.timers_cancelled_in_heap),
        (0, 0),
        "{w:?}"
    );
    assert!(w.parks >= 1 && w.wakeups >= 1, "{w:?}");
    assert!(w.io_events >= 1, "{w:?}");
    assert!(w.busy_time > Duration::ZERO);
    assert_eq!(m.live_tasks, 0);
    assert!(m.blocking_threads >= 1);
}

/// Tasks queued on a worker that then blocks until they are done can only run if its
/// sibling steals them: the steals show in the counters.
#[test]
fn steals_are_counted() {
    let rt = eddy::Builder::new().workers(2).build().unwrap();
    rt.block_on(async {
        eddy::spawn(async {
            let (done_tx, done_rx) = std::sync::mpsc::channel();
            let left = Arc::new(AtomicUsize::new(200));
            for _ in 0..200 {
                let (left, done_tx) = (left.clone(), done_tx.clone());
                drop(eddy::spawn(async move {
                    if left.fetch_sub(1, Ordering::SeqCst) == 1 {
                        done_tx.send(()).unwrap();
                    }
                }));
            }
            done_rx
                .recv_timeout(eddy_tests::PATIENCE)
                .expect("the tasks were never stolen");
        })
        .await
        .unwrap();
    });
    let m = rt.metrics();
    let steals: u64 = m.workers.iter().map(|w| w.steal_operations).sum();
    let stolen: u64 = m.workers.iter().map(|w| w.stolen_items).sum();
    assert!(steals > 0, "{m:?}");
    assert!(stolen >= steals, "{m:?}");
}

/// How far a task's age may fall short of the time since its spawn: ages are counted in
/// whole milliseconds of the kernel's coarse monotonic clock, which moves once a tick.
fn age_resolution() -> Duration {
    let mut res = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `res` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut res) };
    assert_eq!(rc, 0);
    Duration::new(res.tv_sec as u64, res.tv_nsec as u32) + Duration::from_millis(1)
}

/// A dump taken while two tasks keep both workers busy lists every task once, with its
/// name, state, polls, age and spawn location.
#[test]
fn a_dump_under_load_lists_every_task_with_its_state() {
    let rt = eddy::Builder::new().workers(2).build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for i in 0..2000 {
        let t = eddy::task::Builder::new()
            .name(format!("idle-{i}"))
            .spawn_on(&rt.handle(), std::future::pending::<()>());
        handles.push(t);
    }
    for i in 0..2 {
        let stop = stop.clone();
        let t = eddy::task::Builder::new()
            .name(format!("busy-{i}"))
            .spawn_on(&rt.handle(), async move {
                while !stop.load(Ordering::Relaxed) {
                    eddy::yield_now().await;
                }
            });
        handles.push(t);
    }
    let spawned = Instant::now();
    let named = |d: &eddy::task::TaskInfo, prefix: &str| {
        d.name.as_deref().is_some_and(|n| n.starts_with(prefix))
    };
    // Every idle task has been polled once (and waits), every busy one more than once; a
    // yielding task is idle only in the instant between its poll and its reschedule, so a
    // few dumps see each of them scheduled or running.
    let mut seen_active = [false; 2];
    let mut dump = Vec::new();
    let settled = eddy_tests::wait_until(eddy_tests::PATIENCE, || {
        let before = Instant::now();
        dump = rt.dump_tasks();
        for d in dump.iter().filter(|d| named(d, "busy-")) {
            assert!(d.age + age_resolution() >= before - spawned, "{d}");
            if d.state != TaskState::Idle {
                seen_active[(d.name.as_deref() == Some("busy-1")) as usize] = true;
            }
        }
        let idle_polled = dump
            .iter()
            .filter(|d| named(d, "idle-"))
            .all(|d| d.state == TaskState::Idle && d.polls == 1);
        let busy_polled = dump
            .iter()
            .filter(|d| named(d, "busy-"))
            .all(|d| d.polls > 1);
        idle_polled && busy_polled && seen_active == [true, true]
    });
    stop.store(true, Ordering::Relaxed);
    assert_eq!(dump.len(), 2002);
    assert_eq!(dump.iter().filter(|d| named(d, "idle-")).count(), 2000);
    assert_eq!(dump.iter().filter(|d| named(d, "busy-")).count(), 2);
    assert!(
        settled,
        "idle tasks not all polled once and waiting, or busy tasks never seen active: {seen_active:?}"
    );
    assert!(dump[0].location.file().ends_with("metrics_dump.rs"));
    assert!(dump[0].to_string().contains("idle-0"), "{}", dump[0]);
    for h in &handles {
        h.cancel();
    }
}
