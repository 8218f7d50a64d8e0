//! `#[eddy::main]` and `#[eddy::test]`, and their compile errors (trybuild).

use std::sync::atomic::{AtomicUsize, Ordering};

#[eddy::test]
async fn a_test_runs_on_its_own_runtime() {
    let on = eddy::spawn(async { std::thread::current().name().map(String::from) })
        .await
        .unwrap();
    assert!(on.unwrap().starts_with("eddy-worker"));
}

#[eddy::test(workers = 1)]
async fn the_worker_count_can_be_set() {
    // With one worker, a pinned task and a stealable one run on the same thread.
    let a = eddy::spawn(async { std::thread::current().id() })
        .await
        .unwrap();
    let b = eddy::spawn(async { std::thread::current().id() })
        .await
        .unwrap();
    assert_eq!(a, b);
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

#[test]
fn main_runs_with_eddy_run_semantics() {
    assert_eq!(entry(), 42);
    assert_eq!(
        LEFTOVERS_DROPPED.load(Ordering::SeqCst),
        1,
        "leftover task cancelled"
    );
}

#[test]
fn misuse_is_a_compile_error() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/*.rs");
}
