//! `#[eddy::main]` and `#[eddy::test]`, and their compile errors (trybuild).
//!
//! The worker counts the attributes set are checked in child processes
//! ([`assert_child_test_passes`]), where the runtime under test is the only one, so its
//! worker threads can be counted.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use eddy_tests::{assert_child_test_passes, is_child, PATIENCE};

/// Threads of this process named like workers of a runtime with the default thread name
/// (`eddy-worker-N`; the monitor and blocking threads have other suffixes).
fn worker_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("list this process's threads")
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|comm| {
            comm.trim_end()
                .strip_prefix("eddy-worker-")
                .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
        })
        .count()
}

/// Checks, from inside a runtime, that it has exactly `n` workers: `n` callbacks that each
/// wait for all the others can all be running at once only on `n` distinct workers (so
/// there are at least `n`, each started and named), and then this process has exactly `n`
/// worker threads.
async fn assert_workers(n: usize) {
    let arrived = Arc::new((Mutex::new(0usize), Condvar::new()));
    let (tx, rx) = async_channel::unbounded();
    for _ in 0..n {
        let (arrived, tx) = (arrived.clone(), tx.clone());
        eddy::call_soon(move || {
            let (count, cv) = &*arrived;
            let mut count = count.lock().unwrap();
            *count += 1;
            cv.notify_all();
            let (count, _) = cv.wait_timeout_while(count, PATIENCE, |c| *c < n).unwrap();
            let all_there = *count >= n;
            drop(count);
            tx.try_send((all_there, std::thread::current().id()))
                .unwrap();
        });
    }
    let mut threads = Vec::new();
    for _ in 0..n {
        let (all_there, thread) = rx.recv().await.unwrap();
        assert!(all_there, "fewer than {n} workers ran at once");
        threads.push(thread);
    }
    threads.sort_unstable_by_key(|t| format!("{t:?}"));
    threads.dedup();
    assert_eq!(threads.len(), n, "the callbacks did not run on {n} threads");
    assert_eq!(worker_threads(), n, "worker threads in this process");
}

/// A test body runs on a runtime of its own, whose workers run what it spawns.
#[eddy::test]
async fn a_test_runs_on_its_own_runtime() {
    let on = eddy::spawn(async { std::thread::current().name().map(String::from) })
        .await
        .unwrap();
    assert!(on.unwrap().starts_with("eddy-worker"));
}

/// `#[eddy::test]` without arguments runs on two workers.
#[test]
fn a_test_has_two_workers_by_default() {
    assert_child_test_passes("child_a_test_has_two_workers_by_default");
}

#[eddy::test]
#[ignore = "run in a child process by a_test_has_two_workers_by_default"]
async fn child_a_test_has_two_workers_by_default() {
    if !is_child() {
        return;
    }
    assert_workers(2).await;
}

/// `#[eddy::test(workers = 3)]` runs on exactly three workers.
#[test]
fn the_worker_count_can_be_set() {
    assert_child_test_passes("child_the_worker_count_can_be_set");
}

#[eddy::test(workers = 3)]
#[ignore = "run in a child process by the_worker_count_can_be_set"]
async fn child_the_worker_count_can_be_set() {
    if !is_child() {
        return;
    }
    assert_workers(3).await;
}

/// `#[eddy::main(workers = 3)]` runs `main` on exactly three workers.
#[test]
fn main_sets_the_worker_count() {
    assert_child_test_passes("child_main_sets_the_worker_count");
}

#[eddy::main(workers = 3)]
async fn main_with_three_workers() {
    assert_workers(3).await;
}

#[test]
#[ignore = "run in a child process by main_sets_the_worker_count"]
fn child_main_sets_the_worker_count() {
    if !is_child() {
        return;
    }
    main_with_three_workers();
}

static LEFTOVERS_DROPPED: AtomicUsize = AtomicUsize::new(0);

struct Count;
impl Drop for Count {
    fn drop(&mut self) {
        LEFTOVERS_DROPPED.fetch_add(1, Ordering::SeqCst);
    }
}

/// `#[eddy::main]` works on any function name; this one is called by a test below.
#[eddy::main(workers = 2)]
async fn entry() -> u32 {
    let c = Count;
    drop(eddy::spawn(async move {
        let _c = c;
        std::future::pending::<()>().await
    }));
    eddy::spawn(async { 40 + 2 }).await.unwrap()
}

/// `#[eddy::main]` returns main's value and, as `eddy::run`, cancels the tasks left over.
#[test]
fn main_runs_with_eddy_run_semantics() {
    assert_eq!(entry(), 42);
    assert_eq!(
        LEFTOVERS_DROPPED.load(Ordering::SeqCst),
        1,
        "leftover task cancelled"
    );
}

/// Misused attributes fail to compile with the messages in `ui/*.stderr`.
#[test]
fn misuse_is_a_compile_error() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/*.rs");
}
