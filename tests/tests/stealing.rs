//! Work stealing: work queued on a worker that cannot run it reaches an idle sibling.
//!
//! Each test makes stealing the only way to finish: the worker that queued the work blocks
//! until the work is done. Where the work runs first, and how fast it spreads, are
//! scheduling policies with unit tests of their own (`worker::siblings`, `worker::idle`)
//! and benchmarks; these tests check only that nothing stays stranded.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::time::Duration;

use eddy::Builder;
use eddy_tests::{wait_until, with_deadline, HeldJob, PATIENCE};

/// Long enough for a stealing bug to fail instead of hang, far beyond any honest run.
const LIMIT: Duration = Duration::from_secs(120);

const JOBS: usize = 1_000;

/// A task queues 1,000 tasks on its own worker and then blocks that worker until all of them
/// have finished: every one of them must be stolen and run by the sibling.
#[test]
fn tasks_queued_on_a_blocked_worker_are_stolen() {
    with_deadline(LIMIT, || {
        let rt = Builder::new().workers(2).build().unwrap();
        let (spawner, ran_on) = rt.block_on(async {
            eddy::spawn(async {
                let (done_tx, done_rx) = mpsc::channel();
                let ran_on = Arc::new(Mutex::new(Vec::with_capacity(JOBS)));
                for _ in 0..JOBS {
                    let (ran_on, done_tx) = (ran_on.clone(), done_tx.clone());
                    drop(eddy::spawn(async move {
                        let mut ran_on = ran_on.lock().unwrap();
                        ran_on.push(std::thread::current().id());
                        if ran_on.len() == JOBS {
                            done_tx.send(()).unwrap();
                        }
                    }));
                }
                // Block this worker: only the sibling can run what we queued.
                done_rx
                    .recv_timeout(PATIENCE)
                    .expect("tasks queued behind a blocked worker were never stolen");
                let ran_on = ran_on.lock().unwrap().clone();
                (std::thread::current().id(), ran_on)
            })
            .await
            .unwrap()
        });
        assert_eq!(ran_on.len(), JOBS);
        assert!(
            ran_on.iter().all(|&t| t != spawner),
            "a task ran on the blocked worker"
        );
    });
}

/// The same for callbacks: 1,000 `call_soon` from one callback that then blocks its worker.
#[test]
fn callbacks_queued_on_a_blocked_worker_are_stolen() {
    with_deadline(LIMIT, || {
        let rt = Builder::new().workers(2).build().unwrap();
        let (result_tx, result_rx) = mpsc::channel();
        rt.handle()
            .call_soon_threadsafe(move || {
                let (done_tx, done_rx) = mpsc::channel();
                let ran_on = Arc::new(Mutex::new(Vec::with_capacity(JOBS)));
                for _ in 0..JOBS {
                    let (ran_on, done_tx) = (ran_on.clone(), done_tx.clone());
                    eddy::call_soon(move || {
                        let mut ran_on = ran_on.lock().unwrap();
                        ran_on.push(std::thread::current().id());
                        if ran_on.len() == JOBS {
                            done_tx.send(()).unwrap();
                        }
                    });
                }
                let stolen = done_rx.recv_timeout(PATIENCE).is_ok();
                let ran_on = ran_on.lock().unwrap().clone();
                result_tx
                    .send((stolen, std::thread::current().id(), ran_on))
                    .unwrap();
            })
            .unwrap();
        let (stolen, spawner, ran_on) = result_rx.recv().unwrap();
        assert!(
            stolen,
            "callbacks queued behind a blocked worker were never stolen"
        );
        assert_eq!(ran_on.len(), JOBS);
        assert!(ran_on.iter().all(|&t| t != spawner));
    });
}

/// Tasks spawned from outside the workers (`block_on`, through the injector) reach every
/// worker: four tasks that wait for each other at a barrier can only finish when each of
/// the four workers runs one of them at the same time, whichever worker took them first.
#[test]
fn injected_tasks_reach_every_worker() {
    const WORKERS: usize = 4;
    with_deadline(LIMIT, || {
        let rt = Builder::new().workers(WORKERS).build().unwrap();
        let barrier = Arc::new(Barrier::new(WORKERS));
        let threads = rt.block_on(async {
            let tasks: Vec<_> = (0..WORKERS)
                .map(|_| {
                    let barrier = barrier.clone();
                    eddy::spawn(async move {
                        barrier.wait();
                        std::thread::current().id()
                    })
                })
                .collect();
            let mut threads = HashSet::new();
            for t in tasks {
                threads.insert(t.await.unwrap());
            }
            threads
        });
        assert_eq!(threads.len(), WORKERS);
    });
}

/// Tasks in one burst.
const BURST: usize = 32;

/// A task spawns a burst while the sibling sleeps: the sibling is woken for it, and part of
/// the burst may be handed to it before it is up (then taken back if it is slow to come).
/// Whatever the timing, every task of every burst runs exactly once.
#[test]
fn every_task_of_a_burst_runs_exactly_once() {
    with_deadline(LIMIT, || {
        let rt = Builder::new().workers(2).build().unwrap();
        for _ in 0..200 {
            let runs: Arc<Vec<AtomicUsize>> =
                Arc::new((0..BURST).map(|_| AtomicUsize::new(0)).collect());
            let counted = runs.clone();
            rt.block_on(async move {
                eddy::spawn(async move {
                    let tasks: Vec<_> = (0..BURST)
                        .map(|i| {
                            let counted = counted.clone();
                            eddy::spawn(async move {
                                counted[i].fetch_add(1, Ordering::SeqCst);
                                eddy::yield_now().await;
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
            let runs: Vec<usize> = runs.iter().map(|r| r.load(Ordering::SeqCst)).collect();
            assert_eq!(runs, vec![1; BURST]);
        }
    });
}

/// Bursts handed to a sibling are never stranded by shutdown: 300 runtimes each shut down
/// right after a task spawned a burst of never-finishing tasks, and every task's future is
/// dropped exactly once, by the time the runtime is gone.
#[test]
fn handed_bursts_are_dropped_exactly_once_at_shutdown() {
    with_deadline(LIMIT, || {
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
    const LOCAL: usize = 200;
    with_deadline(LIMIT, || {
        // No stand-ins: with S and B holding both workers, a spare could take the callbacks
        // before B starts, and the stealing this test checks would not be needed.
        let rt = Builder::new().workers(2).spare_workers(0).build().unwrap();
        let handle = rt.handle();
        // One worker is held by S, so that the other takes P, then B, below.
        let (s, s_job) = HeldJob::new();
        handle.call_soon_threadsafe(s_job).unwrap();
        s.wait_started();

        // P queues LOCAL callbacks on its own worker, then puts B into the injector, so that
        // B runs from the worker's maintenance within its next 61 jobs, and blocks there.
        let ran = Arc::new(AtomicUsize::new(0));
        let (b, b_job) = HeldJob::new();
        let (p_ran, p_handle) = (ran.clone(), handle.clone());
        handle
            .call_soon_threadsafe(move || {
                for _ in 0..LOCAL {
                    let ran = p_ran.clone();
                    eddy::call_soon(move || {
                        ran.fetch_add(1, Ordering::SeqCst);
                    });
                }
                // From a foreign thread, so that it goes to the injector.
                std::thread::spawn(move || p_handle.call_soon_threadsafe(b_job).unwrap())
                    .join()
                    .unwrap();
            })
            .unwrap();
        b.wait_started();
        assert!(
            ran.load(Ordering::SeqCst) < LOCAL,
            "B ran after P's callbacks: this test needs it to run among them"
        );

        // Free the other worker: it must steal and run every callback B's worker left.
        s.release();
        let all_ran = wait_until(PATIENCE, || ran.load(Ordering::SeqCst) == LOCAL);
        b.release();
        assert!(all_ran, "callbacks stranded while B blocked its worker");
    });
}

/// More sockets than a fresh worker runs alone after one harvest (its IO pace is untimed, so
/// more than 16 woken tasks count as a backlog worth a sibling).
const BACKLOG: usize = 24;

/// A worker that wakes from its park to an IO backlog asks for a sibling's help only once it
/// is off the parked list: were it still on it, the sibling it woke would be itself (the list
/// hands out the most recently parked first) and the worker meant to help would sleep on.
/// With one worker the only parked worker is the one harvesting, so the wake-up is always
/// that mistake if the order is wrong; `Worker::wake_sibling` debug-asserts against it, and
/// the worker would die on the assertion, leaving every echo below unanswered.
#[test]
fn a_worker_woken_by_an_io_backlog_does_not_wake_itself() {
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream as StdUnixStream;

    with_deadline(LIMIT, || {
        let log = eddy_tests::ExceptionLog::new();
        let rt = Builder::new()
            .workers(1)
            .spare_workers(0)
            .exception_handler(log.handler())
            .build()
            .unwrap();
        let handle = rt.handle();
        let mut peers = Vec::new();
        for _ in 0..BACKLOG {
            let (ours, theirs) = StdUnixStream::pair().unwrap();
            drop(handle.spawn(async move {
                let ours = eddy::net::UnixStream::from_std(ours).unwrap();
                let mut buf = [0u8; 64];
                while let Ok(n @ 1..) = ours.read(&mut buf).await {
                    ours.write_all(&buf[..n]).await.unwrap();
                }
            }));
            theirs.set_read_timeout(Some(PATIENCE)).unwrap();
            peers.push(theirs);
        }
        // Every echo task has registered its socket and waits for a read.
        assert!(
            eddy_tests::wait_until_all_workers_sleep(&rt, PATIENCE),
            "the worker never went to sleep"
        );

        // The worker is held while every peer writes, so that its next park finds all of
        // them ready in one harvest.
        let (held, job) = HeldJob::new();
        handle.call_soon_threadsafe(job).unwrap();
        held.wait_started();
        for peer in &mut peers {
            peer.write_all(b"ping").unwrap();
        }
        held.release();

        for (i, peer) in peers.iter_mut().enumerate() {
            let mut buf = [0u8; 4];
            peer.read_exact(&mut buf)
                .unwrap_or_else(|e| panic!("no echo on socket {i}: {e}"));
            assert_eq!(&buf, b"ping");
        }
        assert!(log.is_empty(), "reports: {:?}", log.reports());
    });
}
