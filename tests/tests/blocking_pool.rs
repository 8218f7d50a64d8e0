//! `spawn_blocking`: results, thread limits, keep-alive, panics and cancellation.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eddy_tests::{rt, wait_until, with_deadline, HeldJob, PATIENCE};

/// A blocking job runs on a blocking thread, not on a worker, and its value is the task's
/// output.
#[test]
fn runs_off_the_workers_and_returns_the_value() {
    let rt = rt(1);
    let (worker, blocking, v) = rt.block_on(async {
        let worker = eddy::spawn(async { std::thread::current().name().map(String::from) })
            .await
            .unwrap();
        let (name, v) =
            eddy::spawn_blocking(|| (std::thread::current().name().map(String::from), 41 + 1))
                .await
                .unwrap();
        (worker, name, v)
    });
    assert_eq!(v, 42);
    assert!(worker.unwrap().starts_with("eddy-worker"));
    assert!(blocking.unwrap().contains("blocking"));
}

/// With `max_blocking_threads(3)`, 12 jobs that each block until the test lets them go:
/// exactly 3 start (the pool is used up to its limit), the pool never has more than 3
/// threads, and once released the 9 queued jobs all run too, never more than 3 at once.
#[test]
fn never_more_threads_than_the_limit() {
    const LIMIT: usize = 3;
    const JOBS: usize = 12;
    with_deadline(PATIENCE * 2, || {
        let rt = eddy::Builder::new()
            .workers(1)
            .max_blocking_threads(LIMIT)
            .build()
            .unwrap();
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let started = Arc::new(AtomicUsize::new(0));
        // Every job waits on this until the test drops the sender.
        let (release, gate) = async_channel::bounded::<()>(1);
        let jobs = rt.block_on(async {
            (0..JOBS)
                .map(|_| {
                    let (running, peak, started) = (running.clone(), peak.clone(), started.clone());
                    let gate = gate.clone();
                    eddy::spawn_blocking(move || {
                        started.fetch_add(1, Ordering::SeqCst);
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(now, Ordering::SeqCst);
                        let _ = gate.recv_blocking();
                        running.fetch_sub(1, Ordering::SeqCst);
                    })
                })
                .collect::<Vec<_>>()
        });
        assert!(
            wait_until(PATIENCE, || running.load(Ordering::SeqCst) == LIMIT),
            "{} jobs run at once, the limit is {LIMIT}",
            running.load(Ordering::SeqCst)
        );
        // The threads are created when the jobs are submitted, all of them by now.
        assert_eq!(rt.metrics().blocking_threads, LIMIT);
        assert_eq!(
            started.load(Ordering::SeqCst),
            LIMIT,
            "a queued job started"
        );

        drop(release);
        rt.block_on(async {
            for j in jobs {
                j.await.unwrap();
            }
        });
        assert_eq!(started.load(Ordering::SeqCst), JOBS, "every queued job ran");
        assert_eq!(peak.load(Ordering::SeqCst), LIMIT, "more jobs ran at once");
        assert!(rt.metrics().blocking_threads <= LIMIT);
    });
}

/// A blocking thread idle for the keep-alive exits, and not before: it is alive while its
/// job runs, and gone some time (at least the keep-alive) after the job returned.
#[test]
fn idle_threads_exit_after_the_keep_alive() {
    const KEEP_ALIVE: Duration = Duration::from_millis(50);
    with_deadline(PATIENCE * 2, || {
        let rt = eddy::Builder::new()
            .workers(1)
            .max_blocking_threads(1)
            .thread_keep_alive(KEEP_ALIVE)
            .build()
            .unwrap();
        let (held, job) = HeldJob::new();
        let returned_at = Arc::new(Mutex::new(None));
        let r = returned_at.clone();
        let task = rt.handle().spawn(async move {
            eddy::spawn_blocking(move || {
                job();
                *r.lock().unwrap() = Some(Instant::now());
            })
            .await
        });
        held.wait_started();
        assert_eq!(rt.metrics().blocking_threads, 1);
        held.release();
        rt.block_on(task).unwrap().unwrap();
        assert!(
            wait_until(PATIENCE, || rt.metrics().blocking_threads == 0),
            "the idle blocking thread never exited"
        );
        let gone_at = Instant::now();
        let returned_at = returned_at.lock().unwrap().expect("the job returned");
        assert!(
            gone_at >= returned_at + KEEP_ALIVE,
            "the thread exited before its keep-alive"
        );
    });
}

/// A panic in a blocking job is the task's error; a job cancelled while it waits in the
/// queue (the only thread is held by another job) never runs.
#[test]
fn a_panic_is_a_task_error_and_cancel_before_start_skips_the_job() {
    eddy_tests::quiet_expected_panics();
    with_deadline(PATIENCE * 2, || {
        let rt = eddy::Builder::new()
            .workers(1)
            .max_blocking_threads(1)
            .build()
            .unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let err = rt
            .block_on(async {
                eddy::spawn_blocking(|| panic!("{} blocking boom", eddy_tests::EXPECTED)).await
            })
            .unwrap_err();
        match err {
            eddy::TaskError::Panicked(p) => {
                assert!(p.message().ends_with("blocking boom"), "{}", p.message())
            }
            other => panic!("{other}"),
        }
        // The single thread is held; the second job waits in the queue and is cancelled.
        let (held, job) = HeldJob::new();
        let r = ran.clone();
        let (busy, queued) = rt.block_on(async move {
            let busy = eddy::spawn_blocking(job);
            let queued = eddy::spawn_blocking(move || {
                r.fetch_add(1, Ordering::SeqCst);
            });
            (busy, queued)
        });
        held.wait_started();
        queued.cancel();
        held.release();
        assert!(rt.block_on(queued).unwrap_err().is_cancelled());
        rt.block_on(busy).unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 0, "the cancelled job ran");
    });
}

/// `max_blocking_threads(0)` is refused when the runtime is built.
#[test]
fn zero_blocking_threads_is_invalid() {
    let err = eddy::Builder::new()
        .max_blocking_threads(0)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}

/// Inside a blocking job the runtime is current: it may spawn tasks.
#[test]
fn blocking_jobs_can_use_the_runtime() {
    let rt = rt(1);
    let v = rt.block_on(async {
        eddy::spawn_blocking(|| {
            let t = eddy::spawn(async { 7 });
            eddy::RuntimeHandle::current();
            t
        })
        .await
        .unwrap()
        .await
        .unwrap()
    });
    assert_eq!(v, 7);
}
