//! Context variables travel with callbacks and tasks, asyncio style: captured when a
//! callback is scheduled (on any thread) or a task is spawned, and isolated afterwards.

use std::sync::mpsc;
use std::sync::LazyLock;
use std::time::Duration;

use eddy::ContextVar;
use eddy_tests::{rt, wait_until, DropCounter, DropToken, PanicOnDrop, PATIENCE};

static USER: LazyLock<ContextVar<&'static str>> = LazyLock::new(|| ContextVar::new("nobody"));
static DEPTH: LazyLock<ContextVar<u32>> = LazyLock::new(|| ContextVar::new(0));

/// A task starts with a copy of its spawner's context: it sees what was set before the
/// spawn, not after, and its own `set` survives its polls but never reaches the spawner.
#[eddy::test]
async fn tasks_start_with_a_copy_and_keep_their_changes_to_themselves() {
    let _ = USER.set("alice");
    let child = eddy::spawn(async {
        let inherited = USER.get();
        let _ = USER.set("bob");
        eddy::yield_now().await; // the change survives across polls (and workers)
        eddy::time::sleep(Duration::from_millis(5)).await;
        (inherited, USER.get())
    });
    let _ = USER.set("carol"); // after the spawn: the child does not see it
    assert_eq!(child.await.unwrap(), ("alice", "bob"));
    assert_eq!(USER.get(), "carol");
}

/// 100 tasks that each set the same variable and yield see only their own value.
#[eddy::test]
async fn sibling_tasks_are_isolated() {
    let tasks: Vec<_> = (0..100u32)
        .map(|i| {
            eddy::spawn(async move {
                let _ = DEPTH.set(i);
                for _ in 0..5 {
                    eddy::yield_now().await;
                    assert_eq!(DEPTH.get(), i);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(DEPTH.get(), 0);
}

/// `call_soon` and `call_later` run in the context of the moment they were scheduled; a
/// change made inside a callback is discarded after it, and a later change by the scheduler
/// is not seen by them.
#[test]
fn callbacks_run_in_the_context_captured_when_scheduled() {
    let rt = rt(2);
    let mut got = rt.block_on(async move {
        let (tx, rx) = async_channel::unbounded();
        let _ = USER.set("scheduler");
        let tx2 = tx.clone();
        eddy::call_soon(move || {
            let seen = USER.get();
            let _ = USER.set("changed inside"); // discarded after the callback
            tx2.try_send(("call_soon", seen)).unwrap();
        });
        eddy::call_later(Duration::from_millis(5), move || {
            tx.try_send(("call_later", USER.get())).unwrap();
        });
        let _ = USER.set("later value");
        let got = vec![rx.recv().await.unwrap(), rx.recv().await.unwrap()];
        assert_eq!(USER.get(), "later value");
        got
    });
    got.sort();
    assert_eq!(
        got,
        vec![("call_later", "scheduler"), ("call_soon", "scheduler")]
    );
}

/// `call_soon_threadsafe` captures the context of the (foreign) thread that calls it, and the
/// worker that ran the callback keeps nothing of it afterwards.
#[test]
fn foreign_thread_callbacks_carry_the_foreign_threads_context() {
    // One worker: the callbacks below all run on the same thread.
    let rt = rt(1);
    let handle = rt.handle();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = USER.set("foreign");
        handle
            .call_soon_threadsafe(move || tx.send(USER.get()).unwrap())
            .unwrap();
        // The worker's change to its own copy never reaches this thread.
        assert_eq!(USER.get(), "foreign");
    })
    .join()
    .unwrap();
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), "foreign");
    // The worker that ran it keeps nothing of that context: a callback scheduled from a
    // thread without one, and a task spawned from there, see the default.
    let (tx, rx) = mpsc::channel();
    rt.handle()
        .call_soon_threadsafe(move || tx.send(USER.get()).unwrap())
        .unwrap();
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), "nobody");
    let after = rt.block_on(async { eddy::spawn(async { USER.get() }).await.unwrap() });
    assert_eq!(after, "nobody");
}

/// `reset` with a token restores the value from before the matching `set`.
#[eddy::test]
async fn reset_restores_the_previous_value() {
    let t1 = DEPTH.set(1);
    let t2 = DEPTH.set(2);
    DEPTH.reset(t2);
    assert_eq!(DEPTH.get(), 1);
    DEPTH.reset(t1);
    assert_eq!(DEPTH.get(), 0);
}

/// A worker releases the contexts of finished tasks at the end of its cycle, not at once
/// (eddy::contextvar, "Releasing task contexts in batches"): a value a task set is still
/// dropped soon after the task finishes, while the worker keeps running, and when the
/// runtime shuts down.
#[test]
fn values_a_finished_task_set_are_dropped_soon_after() {
    use std::sync::Arc;

    static GUARD: LazyLock<ContextVar<Option<Arc<DropToken>>>> =
        LazyLock::new(|| ContextVar::new(None));

    let rt = rt(2);
    let drops = DropCounter::new();
    let token = Arc::new(drops.token());
    let task = rt.handle().spawn(async move {
        let _ = GUARD.set(Some(token));
    });
    rt.block_on(task).unwrap();
    // The task's context held the only copy.
    assert!(wait_until(PATIENCE, || drops.count() > 0));
    assert_eq!(drops.count(), 1, "dropped once");

    let drops = DropCounter::new();
    let token = Arc::new(drops.token());
    let pending = rt.handle().spawn(async move {
        let _ = GUARD.set(Some(token));
        std::future::pending::<()>().await
    });
    drop(pending);
    drop(rt);
    assert_eq!(drops.count(), 1, "a cancelled task's value, at shutdown");
}

/// A context value whose destructor panics, released by a worker at the end of its cycle:
/// the exception handler hears of it and the worker goes on serving.
#[test]
fn a_panicking_context_value_is_reported_and_the_worker_survives() {
    use std::sync::{Arc, Mutex};

    const BOMB_TEXT: &str = "a context value";
    static BOMB: LazyLock<ContextVar<Option<Arc<PanicOnDrop>>>> =
        LazyLock::new(|| ContextVar::new(None));

    let reports = Arc::new(Mutex::new(Vec::new()));
    let seen = reports.clone();
    let rt = eddy::Builder::new()
        .workers(1)
        .exception_handler(move |ctx| {
            seen.lock().unwrap().push((
                ctx.message().to_string(),
                ctx.panic_message().map(str::to_string),
                ctx.task_id(),
            ))
        })
        .build()
        .unwrap();
    let task = rt.handle().spawn(async {
        let _ = BOMB.set(Some(Arc::new(PanicOnDrop(BOMB_TEXT))));
    });
    rt.block_on(task).unwrap();
    let reported = wait_until(PATIENCE, || {
        reports.lock().unwrap().iter().any(|(m, p, _)| {
            m.contains("dropping a task's context")
                && p.as_deref() == Some(&*PanicOnDrop::message(BOMB_TEXT))
        })
    });
    assert!(reported, "{:?}", reports.lock().unwrap());
    // The only worker still runs callbacks after it released the context.
    let (tx, rx) = mpsc::channel();
    rt.handle()
        .call_soon_threadsafe(move || tx.send(()).unwrap())
        .unwrap();
    if rx.recv_timeout(PATIENCE).is_err() {
        // Dropping the runtime would wait for the dead worker forever.
        std::mem::forget(rt);
        panic!("the worker died releasing a context");
    }

    // Two tasks with different contexts finishing in one cycle: the second pays for the
    // first's context, inside its own completion. The report must not name the second task.
    static OTHER: LazyLock<ContextVar<u32>> = LazyLock::new(|| ContextVar::new(0));
    reports.lock().unwrap().clear();
    // Spawned by a task on the only worker, both wait in its queue for the same phase 4.
    let spawner = rt.handle().spawn(async {
        let first = eddy::spawn(async {
            let _ = BOMB.set(Some(Arc::new(PanicOnDrop(BOMB_TEXT))));
        });
        let second = eddy::spawn(async {
            let _ = OTHER.set(1);
        });
        (first, second)
    });
    rt.block_on(async {
        let (first, second) = spawner.await.unwrap();
        first.await.unwrap();
        second.await.unwrap();
    });
    assert!(wait_until(PATIENCE, || !reports.lock().unwrap().is_empty()));
    let reports = reports.lock().unwrap();
    assert_eq!(reports.len(), 1, "{reports:?}");
    let (message, panic, task) = &reports[0];
    assert!(message.contains("dropping a task's context"), "{message}");
    assert_eq!(panic.as_deref(), Some(&*PanicOnDrop::message(BOMB_TEXT)));
    assert_eq!(*task, None, "which task held the context last is not known");
}
