//! Metrics counters under a known workload, and task dumps under load.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use eddy::task::TaskState;

/// `busy_time` leaves a park in progress out and never goes back. Both workers asleep for
/// 300 ms gain far less than that; and across snapshots taken while a worker parks and wakes
/// every millisecond, no worker's `busy_time` ever decreases. (Before, a park in progress
/// counted as busy until it ended, and then the figure dropped: a delta of two snapshots
/// could underflow.)
#[test]
fn busy_time_leaves_out_the_park_in_progress_and_never_decreases() {
    let rt = eddy::Builder::new().workers(2).build().unwrap();
    assert!(eddy_tests::wait_until_all_workers_sleep(
        &rt,
        Duration::from_secs(5)
    ));
    let asleep = rt.metrics();
    std::thread::sleep(Duration::from_millis(300));
    let later = rt.metrics();
    for (a, b) in asleep.workers.iter().zip(&later.workers) {
        let gained = b.busy_time.saturating_sub(a.busy_time);
        assert!(
            gained < Duration::from_millis(100),
            "asleep, yet busy for {gained:?}"
        );
    }

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
        // Some IO.
        let (a, b) = eddy::net::UnixStream::pair().unwrap();
        let reader = eddy::spawn(async move {
            let mut buf = [0u8; 1];
            a.read_exact(&mut buf).await.unwrap();
        });
        eddy::time::sleep(Duration::from_millis(10)).await;
        b.write_all(b"x").await.unwrap();
        reader.await.unwrap();
        eddy::spawn_blocking(|| ()).await.unwrap();
    });
    let m = rt.metrics();
    let w = &m.workers[0];
    assert!(w.tasks_polled >= 200, "{w:?}");
    assert!(w.callbacks_run >= 60, "50 call_soon + 10 call_later: {w:?}");
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

#[test]
fn steals_are_counted() {
    let rt = eddy::Builder::new().workers(2).build().unwrap();
    rt.block_on(async {
        eddy::spawn(async {
            let tasks: Vec<_> = (0..2000)
                .map(|_| {
                    eddy::spawn(async {
                        let t = Instant::now();
                        while t.elapsed() < Duration::from_micros(50) {}
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
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

#[test]
fn a_dump_under_load_lists_every_task_with_its_state() {
    let rt = eddy::Builder::new().workers(2).build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let spins = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for i in 0..2000 {
        let t = eddy::task::Builder::new()
            .name(format!("idle-{i}"))
            .spawn_on(&rt.handle(), std::future::pending::<()>());
        handles.push(t);
    }
    for i in 0..2 {
        let (stop, spins) = (stop.clone(), spins.clone());
        let t = eddy::task::Builder::new()
            .name(format!("busy-{i}"))
            .spawn_on(&rt.handle(), async move {
                while !stop.load(Ordering::Relaxed) {
                    spins.fetch_add(1, Ordering::Relaxed);
                    eddy::yield_now().await;
                }
            });
        handles.push(t);
    }
    std::thread::sleep(Duration::from_millis(50));
    let mut longest = Duration::ZERO;
    let mut dump = Vec::new();
    let mut busy_seen_active = 0;
    for _ in 0..20 {
        let t = Instant::now();
        dump = rt.dump_tasks();
        longest = longest.max(t.elapsed());
        busy_seen_active += dump
            .iter()
            .filter(|d| d.name.as_deref().is_some_and(|n| n.starts_with("busy-")))
            .filter(|d| d.state != TaskState::Idle)
            .count();
    }
    let spins_during = spins.load(Ordering::Relaxed);
    assert_eq!(dump.len(), 2002);
    let idle = dump
        .iter()
        .filter(|d| d.name.as_deref().is_some_and(|n| n.starts_with("idle-")))
        .collect::<Vec<_>>();
    assert_eq!(idle.len(), 2000);
    assert!(
        idle.iter()
            .all(|d| d.state == TaskState::Idle && d.polls == 1),
        "{}",
        idle[0]
    );
    let busy: Vec<_> = dump
        .iter()
        .filter(|d| d.name.as_deref().is_some_and(|n| n.starts_with("busy-")))
        .collect();
    assert_eq!(busy.len(), 2);
    assert!(busy.iter().all(|d| d.polls > 1));
    // A yielding task is scheduled or running nearly all the time (it is idle only in the
    // instant between its poll returning and its reschedule).
    assert!(busy_seen_active > 20, "{busy_seen_active} of 40 sightings");
    assert!(dump.iter().all(|d| d.age >= Duration::from_millis(40)));
    assert!(dump[0].location.file().ends_with("metrics_dump.rs"));
    assert!(dump[0].to_string().contains("idle-0"), "{}", dump[0]);
    assert!(
        longest < Duration::from_millis(100),
        "a dump took {longest:?}"
    );
    assert!(
        spins_during > 100,
        "the busy tasks kept running during the dumps"
    );
    stop.store(true, Ordering::Relaxed);
    for h in &handles {
        h.cancel();
    }
}
