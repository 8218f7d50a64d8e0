//! Work stealing: work submitted on one worker spreads to its idle sibling.

use std::collections::HashMap;
use std::sync::{mpsc, Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

use eddy::Builder;
use eddy_tests::{spin_for, with_deadline};

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
