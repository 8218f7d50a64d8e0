//! `Builder::worker_time_slice`: the runtime's own threads (its workers, its monitor and a
//! spare once one starts) ask Linux for the configured scheduler slice, so that a rescuer
//! that wakes on the CPU of a worker spinning in a long job preempts it instead of waiting
//! for a timer tick. Blocking-pool threads run user code that blocks or computes at length,
//! and run with the kernel's slice. Read back from `/proc/self/task/*/sched` (`se.slice`), which shows the
//! slice a thread runs with; kernels before 6.12 ignore the request, and there the tests
//! only check that the runtime still works.

use std::time::Duration;

use eddy_tests::{wait_until, with_deadline, Anchors, HeldJob, PATIENCE};

const LIMIT: Duration = Duration::from_secs(90);

/// A slice no kernel picks by itself, so that a thread showing it asked for it.
const ASKED: Duration = Duration::from_millis(7);

/// Whether this kernel honours a thread's own slice request (6.12 and later) and shows it.
fn kernel_honours_slices() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release.trim().split(['.', '-']);
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (major, minor) >= (6, 12) && own_slice_of("self").is_some()
}

/// `se.slice` of `/proc/<task>/sched`, in nanoseconds.
fn own_slice_of(task: &str) -> Option<u64> {
    let sched = std::fs::read_to_string(format!("/proc/{task}/sched")).ok()?;
    sched
        .lines()
        .find(|l| l.trim_start().starts_with("se.slice"))?
        .rsplit(':')
        .next()?
        .trim()
        .parse()
        .ok()
}

/// The threads of this process whose name starts with `prefix`, with their slices.
fn threads_named(prefix: &str) -> Vec<(String, Option<u64>)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let tid = entry.file_name().to_string_lossy().into_owned();
        let name = std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
            .unwrap_or_default()
            .trim()
            .to_string();
        if name.starts_with(prefix) {
            found.push((name, own_slice_of(&format!("self/task/{tid}"))));
        }
    }
    found
}

#[test]
fn workers_the_monitor_and_spares_run_with_the_slice_they_asked_for() {
    with_deadline(LIMIT, || {
        let rt = eddy::Builder::new()
            .workers(2)
            .thread_name("tsl")
            .worker_time_slice(Some(ASKED))
            .build()
            .unwrap();
        // Hold both workers, so that the monitor starts a spare.
        let anchors = Anchors::new(&rt, "tsl", 2);
        let held: Vec<HeldJob> = (0..2)
            .map(|w| {
                let (held, job) = HeldJob::new();
                anchors.run(w, move || async move { job() });
                held.wait_started();
                held
            })
            .collect();
        // Work from outside, which only a spare can run now.
        let (ran_tx, ran) = std::sync::mpsc::channel();
        drop(rt.handle().spawn(async move { ran_tx.send(()).unwrap() }));
        ran.recv_timeout(PATIENCE)
            .expect("no spare ran a task while every worker was held");
        assert!(!threads_named("tsl-spare").is_empty(), "no spare thread");
        // A blocking-pool thread, for contrast.
        let (in_pool, pool_job) = HeldJob::new();
        let pool_task = rt
            .handle()
            .spawn(async move { eddy::spawn_blocking(pool_job).await });
        in_pool.wait_started();

        if kernel_honours_slices() {
            let threads = threads_named("tsl-");
            let asked = ASKED.as_nanos() as u64;
            // The test thread's, which nothing here changed.
            let kernel_default = own_slice_of("thread-self");
            for kind in ["tsl-0", "tsl-1", "tsl-monitor", "tsl-spare"] {
                assert!(
                    threads.iter().any(|(n, _)| n.starts_with(kind)),
                    "no thread named {kind}: {threads:?}"
                );
            }
            for (name, slice) in &threads {
                if name.starts_with("tsl-blocking") {
                    assert_eq!(*slice, kernel_default, "{name} runs user code that blocks");
                } else {
                    assert_eq!(*slice, Some(asked), "{name}: {threads:?}");
                }
            }
            assert!(threads.iter().any(|(n, _)| n.starts_with("tsl-blocking")));
        } else {
            eprintln!("this kernel does not honour per-thread slices: only the runtime is checked");
        }
        in_pool.release();
        drop(held);
        rt.block_on(pool_task).unwrap().unwrap();
    });
}

#[test]
fn without_a_slice_the_threads_keep_the_one_they_inherit() {
    with_deadline(LIMIT, || {
        let rt = eddy::Builder::new()
            .workers(2)
            .thread_name("tsn")
            .worker_time_slice(None)
            .build()
            .unwrap();
        assert_eq!(
            rt.block_on(async { eddy::spawn(async { 5 }).await })
                .unwrap(),
            5
        );
        if kernel_honours_slices() {
            let inherited = own_slice_of("thread-self");
            // A new thread names itself once it runs: wait for all three.
            let all_named = || {
                let names: Vec<String> = threads_named("tsn-").into_iter().map(|t| t.0).collect();
                ["tsn-0", "tsn-1", "tsn-monitor"]
                    .iter()
                    .all(|n| names.iter().any(|m| m == n))
            };
            assert!(
                wait_until(PATIENCE, all_named),
                "{:?}",
                threads_named("tsn-")
            );
            let threads = threads_named("tsn-");
            for (name, slice) in &threads {
                assert_eq!(*slice, inherited, "{name}: {threads:?}");
            }
        }
    });
}

#[test]
fn a_slice_the_kernel_would_not_honour_is_refused_at_build() {
    for bad in [
        Duration::ZERO,
        Duration::from_micros(99),
        Duration::from_millis(101),
    ] {
        let err = eddy::Builder::new()
            .workers(1)
            .worker_time_slice(Some(bad))
            .build()
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{bad:?}");
        assert!(err.to_string().contains("time slice"), "{err}");
    }
}
