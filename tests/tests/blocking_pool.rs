//! `spawn_blocking`: results, thread limits, keep-alive, panics and cancellation.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn runs_off_the_workers_and_returns_the_value() {
    let rt = eddy::Builder::new().workers(1).build().unwrap();
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

#[test]
fn never_more_threads_than_the_limit() {
    let rt = eddy::Builder::new()
        .workers(1)
        .max_blocking_threads(3)
        .build()
        .unwrap();
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    rt.block_on(async {
        let jobs: Vec<_> = (0..12)
            .map(|_| {
                let (running, peak) = (running.clone(), peak.clone());
                eddy::spawn_blocking(move || {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(20));
                    running.fetch_sub(1, Ordering::SeqCst);
                })
            })
            .collect();
        for j in jobs {
            j.await.unwrap();
        }
    });
    assert_eq!(
        peak.load(Ordering::SeqCst),
        3,
        "all 3 threads used, never more"
    );
    assert!(rt.metrics().blocking_threads <= 3);
}

#[test]
fn idle_threads_exit_after_the_keep_alive() {
    let rt = eddy::Builder::new()
        .workers(1)
        .thread_keep_alive(Duration::from_millis(50))
        .build()
        .unwrap();
    rt.block_on(async {
        let jobs: Vec<_> = (0..4)
            .map(|_| eddy::spawn_blocking(|| std::thread::sleep(Duration::from_millis(20))))
            .collect();
        for j in jobs {
            j.await.unwrap();
        }
    });
    assert!(rt.metrics().blocking_threads >= 1);
    let deadline = Instant::now() + Duration::from_secs(5);
    while rt.metrics().blocking_threads > 0 {
        assert!(
            Instant::now() < deadline,
            "idle blocking threads never exited"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_panic_is_a_task_error_and_cancel_before_start_skips_the_job() {
    let rt = eddy::Builder::new()
        .workers(1)
        .max_blocking_threads(1)
        .build()
        .unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    rt.block_on(async {
        let err = eddy::spawn_blocking(|| panic!("blocking boom"))
            .await
            .unwrap_err();
        match err {
            eddy::TaskError::Panicked(p) => assert_eq!(p.message(), "blocking boom"),
            other => panic!("{other}"),
        }
        // The single thread is busy; the second job waits in the queue and is cancelled.
        let busy = eddy::spawn_blocking(|| std::thread::sleep(Duration::from_millis(100)));
        let r = ran.clone();
        let queued = eddy::spawn_blocking(move || {
            r.fetch_add(1, Ordering::SeqCst);
        });
        queued.cancel();
        assert!(queued.await.unwrap_err().is_cancelled());
        busy.await.unwrap();
    });
    assert_eq!(ran.load(Ordering::SeqCst), 0);
}

#[test]
fn zero_blocking_threads_is_invalid() {
    let err = eddy::Builder::new()
        .max_blocking_threads(0)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}

#[test]
fn blocking_jobs_can_use_the_runtime() {
    let rt = eddy::Builder::new().workers(1).build().unwrap();
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
