//! Work stealing: work submitted on one worker spreads to its idle sibling.

use std::collections::HashMap;
use std::sync::{mpsc, Arc, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use eddy::Builder;
// Each test measures where work lands on a 2-worker runtime: they run one at a time.
use eddy_tests::{one_at_a_time, spin_for, wait_until_all_workers_sleep, with_deadline};

const JOBS: usize = 10_000;
const WORK: Duration = Duration::from_micros(50);
/// Each of the 2 workers must have run at least this many of the 10,000 jobs.
const MIN_SHARE: usize = 200;

fn shares(ids: &[ThreadId]) -> Vec<usize> {
    let mut by_thread: HashMap<ThreadId, usize> = HashMap::new();
    for id in ids {
        *by_thread.entry(*id).or_default() += 1;
    }
    let mut v: Vec<usize> = by_thread.into_values().collect();
    v.sort_unstable();
    v
}

/// 10,000 CPU-ish tasks (~50 µs each) spawned from one task on a 2-worker runtime run on both
/// worker threads.
#[test]
fn tasks_spawned_from_one_worker_run_on_both() {
    let _turn = one_at_a_time();
    with_deadline(Duration::from_secs(60), || {
        let rt = Builder::new().workers(2).build().unwrap();
        let ids = rt.block_on(async {
            eddy::spawn(async {
                let tasks: Vec<_> = (0..JOBS)
                    .map(|_| {
                        eddy::spawn(async {
                            spin_for(WORK);
                            std::thread::current().id()
                        })
                    })
                    .collect();
                let mut ids = Vec::with_capacity(JOBS);
                for t in tasks {
                    ids.push(t.await.unwrap());
                }
                ids
            })
            .await
            .unwrap()
        });
        let shares = shares(&ids);
        eprintln!("tasks per worker: {shares:?}");
        assert_eq!(shares.len(), 2, "tasks ran on {} thread(s)", shares.len());
        assert!(shares[0] >= MIN_SHARE, "lopsided: {shares:?}");
    });
}

/// The same for callbacks: 10,000 `call_soon` from one callback are stolen too.
#[test]
fn callbacks_scheduled_from_one_worker_run_on_both() {
    let _turn = one_at_a_time();
    with_deadline(Duration::from_secs(60), || {
        let rt = Builder::new().workers(2).build().unwrap();
        let ids = Arc::new(Mutex::new(Vec::with_capacity(JOBS)));
        let (tx, rx) = mpsc::channel();
        let i2 = ids.clone();
        rt.handle()
            .call_soon_threadsafe(move || {
                for _ in 0..JOBS {
                    let ids = i2.clone();
                    let tx = tx.clone();
                    eddy::call_soon(move || {
                        spin_for(WORK);
                        let mut ids = ids.lock().unwrap();
                        ids.push(std::thread::current().id());
                        if ids.len() == JOBS {
                            tx.send(()).unwrap();
                        }
                    });
                }
            })
            .unwrap();
        rx.recv_timeout(Duration::from_secs(50)).unwrap();
        let shares = shares(&ids.lock().unwrap());
        eprintln!("callbacks per worker: {shares:?}");
        assert_eq!(
            shares.len(),
            2,
            "callbacks ran on {} thread(s)",
            shares.len()
        );
        assert!(shares[0] >= MIN_SHARE, "lopsided: {shares:?}");
    });
}

/// Tasks that wake each other keep spreading: a fan-out of sleeping tasks spawned from inside
/// `block_on` (the injector) on 4 workers runs on more than one thread and all complete.
#[test]
fn injected_tasks_spread_over_workers() {
    let _turn = one_at_a_time();
    with_deadline(Duration::from_secs(60), || {
        let rt = Builder::new().workers(4).build().unwrap();
        let ids = rt.block_on(async {
            let tasks: Vec<_> = (0..2_000)
                .map(|i| {
                    eddy::spawn(async move {
                        if i % 3 == 0 {
                            eddy::time::sleep(Duration::from_millis(1)).await;
                        }
                        spin_for(WORK);
                        std::thread::current().id()
                    })
                })
                .collect();
            let mut ids = Vec::new();
            for t in tasks {
                ids.push(t.await.unwrap());
            }
            ids
        });
        let shares = shares(&ids);
        eprintln!("injected tasks per worker: {shares:?}");
        assert!(shares.len() >= 2, "all tasks ran on one thread");
    });
}

/// Tasks in one burst.
const BURST: usize = 32;

/// Spawns a burst of `BURST` tasks from one task while the other worker sleeps; returns, per
/// task, the thread of its first poll. Each task then yields for 2 ms, so a worker with
/// tasks of the burst stays busy (as with long-lived tasks; an idle spawner takes back what
/// it handed to a sibling that is not up yet).
fn first_polls_of_a_burst(rt: &eddy::Runtime) -> Vec<ThreadId> {
    let first_polls = Arc::new(Mutex::new(Vec::with_capacity(BURST)));
    let polls = first_polls.clone();
    rt.block_on(async move {
        eddy::spawn(async move {
            let tasks: Vec<_> = (0..BURST)
                .map(|_| {
                    let polls = polls.clone();
                    eddy::spawn(async move {
                        polls.lock().unwrap().push(std::thread::current().id());
                        let until = Instant::now() + Duration::from_millis(2);
                        while Instant::now() < until {
                            eddy::yield_now().await;
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        })
        .await
        .unwrap()
    });
    let ids = first_polls.lock().unwrap().clone();
    ids
}

/// When a task spawns a burst and the sibling woken for it is not up yet by the time the
/// burst is about to run, the newer half is handed to that sibling before anything is
/// polled, so each task's first poll (where a task typically allocates what it keeps)
/// happens on the worker that goes on running it. Without the hand-off the spawning worker
/// has polled all 32 (a few µs) before the sibling runs (20-100 µs): the sibling
/// first-polled a quarter or more in 0 rounds of 20 then (3 runs), in 18-20 with it (5 runs).
#[test]
fn a_burst_is_shared_with_the_woken_sibling_before_its_first_polls() {
    let _turn = one_at_a_time();
    with_deadline(Duration::from_secs(60), || {
        let rt = Builder::new().workers(2).build().unwrap();
        let mut shared_rounds = 0;
        for _ in 0..20 {
            assert!(
                wait_until_all_workers_sleep(&rt, Duration::from_secs(5)),
                "the workers did not go to sleep"
            );
            let shares = shares(&first_polls_of_a_burst(&rt));
            eprintln!("first polls per worker: {shares:?}");
            assert_eq!(shares.iter().sum::<usize>(), BURST);
            if shares.len() == 2 && shares[0] >= BURST / 4 {
                shared_rounds += 1;
            }
        }
        assert!(
            shared_rounds >= 15,
            "the woken sibling first-polled a share of the burst in only {shared_rounds} of 20 rounds"
        );
    });
}

/// Bursts handed to a sibling are never stranded by shutdown: 300 runtimes each shut down
/// right after a task spawned a burst of never-finishing tasks, and every task's future is
/// dropped exactly once, by the time the runtime is gone.
#[test]
fn handed_bursts_are_dropped_exactly_once_at_shutdown() {
    let _turn = one_at_a_time();
    with_deadline(Duration::from_secs(120), || {
        for _ in 0..300 {
            let drops = eddy_tests::DropCounter::new();
            let rt = Builder::new().workers(2).build().unwrap();
            let spawner = drops.clone();
            rt.block_on(async move {
                eddy::spawn(async move {
                    for _ in 0..BURST {
                        let token = spawner.token();
                        drop(eddy::spawn(async move {
                            token.touch();
                            std::future::pending::<()>().await
                        }));
                    }
                })
                .await
                .unwrap()
            });
            drop(rt);
            assert_eq!(drops.count(), BURST, "futures dropped by shutdown");
        }
    });
}

/// Every 61 jobs a busy worker runs one job from the injector (fairness). When that job
/// blocks, the jobs left in the worker's ready queue must still be stealable: none may be
/// held back by the worker, taken out of the queue just before it turned to the injector.
#[test]
fn a_blocking_injector_job_strands_none_of_the_ready_queue() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    const LOCAL: usize = 200;
    let _turn = one_at_a_time();
    with_deadline(Duration::from_secs(60), || {
        let rt = Builder::new().workers(2).build().unwrap();
        let handle = rt.handle();
        // One worker is held by S, so that the other takes P, then B, below.
        let (release_s, wait_s) = mpsc::channel::<()>();
        let s_running = Arc::new(AtomicBool::new(false));
        let flag = s_running.clone();
        handle
            .call_soon_threadsafe(move || {
                flag.store(true, Ordering::SeqCst);
                let _ = wait_s.recv();
            })
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !s_running.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(s_running.load(Ordering::SeqCst), "S never ran");

        // P queues LOCAL callbacks on its own worker, then puts B into the injector, so that
        // B runs from the worker's maintenance within its next 61 jobs.
        let ran = Arc::new(AtomicUsize::new(0));
        let b_running = Arc::new(AtomicBool::new(false));
        let (release_b, wait_b) = mpsc::channel::<()>();
        let wait_b = Arc::new(Mutex::new(wait_b));
        let (p_ran, b_flag, p_handle) = (ran.clone(), b_running.clone(), handle.clone());
        handle
            .call_soon_threadsafe(move || {
                for _ in 0..LOCAL {
                    let ran = p_ran.clone();
                    eddy::call_soon(move || {
                        ran.fetch_add(1, Ordering::SeqCst);
                    });
                }
                std::thread::spawn(move || {
                    p_handle
                        .call_soon_threadsafe(move || {
                            b_flag.store(true, Ordering::SeqCst);
                            let _ = wait_b.lock().unwrap().recv();
                        })
                        .unwrap();
                })
                .join()
                .unwrap();
            })
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !b_running.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(b_running.load(Ordering::SeqCst), "B never ran");

        // Free the other worker: it must steal and run every callback B's worker left.
        release_s.send(()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while ran.load(Ordering::SeqCst) < LOCAL && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let done = ran.load(Ordering::SeqCst);
        release_b.send(()).unwrap();
        assert_eq!(done, LOCAL, "callbacks stranded while B blocked its worker");
    });
}
