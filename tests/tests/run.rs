//! `eddy::run` / `Runtime::run`: asyncio.run's shutdown (cancel leftovers, wait, report) and
//! its Ctrl-C handling (checked in child processes that receive a real SIGINT).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct DropCount(Arc<AtomicUsize>);
impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn recording_runtime(timeout: Duration) -> (eddy::Runtime, Arc<Mutex<Vec<String>>>) {
    let reports = Arc::new(Mutex::new(Vec::new()));
    let r = reports.clone();
    let rt = eddy::Builder::new()
        .workers(2)
        .run_shutdown_timeout(timeout)
        .exception_handler(move |ctx: &eddy::ExceptionContext| {
            r.lock().unwrap().push(ctx.to_string());
        })
        .build()
        .unwrap();
    (rt, reports)
}

#[test]
fn run_returns_the_value_and_cancels_leftover_tasks() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let d = dropped.clone();
    let (rt, reports) = recording_runtime(Duration::from_secs(5));
    let out = rt
        .run(async move {
            for _ in 0..1000 {
                let guard = DropCount(d.clone());
                drop(eddy::spawn(async move {
                    let _guard = guard;
                    std::future::pending::<()>().await
                }));
            }
            let guard = DropCount(d.clone());
            drop(eddy::spawn(async move {
                let _guard = guard;
                eddy::time::sleep(Duration::from_secs(3600)).await
            }));
            eddy::yield_now().await;
            "main done"
        })
        .unwrap();
    assert_eq!(out, "main done");
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1001,
        "every leftover task was dropped"
    );
    assert!(
        reports.lock().unwrap().is_empty(),
        "{:?}",
        reports.lock().unwrap()
    );
}

struct PanicOnDrop;
impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        panic!("destructor failed");
    }
}

#[test]
fn errors_during_shutdown_are_reported() {
    let (rt, reports) = recording_runtime(Duration::from_secs(5));
    rt.run(async {
        let bomb = PanicOnDrop; // owned by the task's future from the start
        drop(eddy::spawn(async move {
            let _bomb = bomb;
            std::future::pending::<()>().await
        }));
        eddy::yield_now().await;
    })
    .unwrap();
    let reports = reports.lock().unwrap();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert!(
        reports[0].contains("unhandled error during shutdown"),
        "{}",
        reports[0]
    );
    assert!(reports[0].contains("destructor failed"), "{}", reports[0]);
}

#[test]
fn tasks_that_will_not_stop_are_reported_as_pending() {
    let (rt, reports) = recording_runtime(Duration::from_millis(200));
    let start = Instant::now();
    rt.run(async {
        // An idle task...
        let (polled_tx, polled_rx) = async_channel::bounded::<()>(1);
        drop(eddy::spawn(async move {
            polled_tx.send(()).await.unwrap();
            std::future::pending::<()>().await
        }));
        polled_rx.recv().await.unwrap();
        // ...and both workers stuck for longer than the shutdown timeout, so nobody can
        // poll it to cancel it.
        let busy = Arc::new(AtomicUsize::new(0));
        for _ in 0..2 {
            let busy = busy.clone();
            drop(eddy::spawn(async move {
                busy.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(700));
            }));
        }
        // Wait on this thread (not with an eddy timer: the workers are the ones stuck).
        while busy.load(Ordering::SeqCst) < 2 {
            std::thread::sleep(Duration::from_millis(1));
        }
    })
    .unwrap();
    let elapsed = start.elapsed();
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    let reports = reports.lock().unwrap();
    assert!(
        reports
            .iter()
            .any(|r| r.contains("Task was destroyed but it is pending!")
                && r.contains("tests/tests/run.rs")),
        "{reports:?}"
    );
}

const CHILD_ENV: &str = "EDDY_RUN_CHILD";

/// The program the Ctrl-C tests run in a child process.
#[test]
fn run_child() {
    let Ok(mode) = std::env::var(CHILD_ENV) else {
        return;
    };
    let rt = eddy::Builder::new()
        .workers(2)
        .run_shutdown_timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let res = rt.run(async move {
        if mode == "stuck-shutdown" {
            // Make the shutdown take long: a worker busy for 10 s cannot drop its tasks.
            drop(eddy::spawn(async {
                std::thread::sleep(Duration::from_secs(10));
            }));
        }
        println!("READY");
        std::future::pending::<()>().await
    });
    match res {
        Err(eddy::RunError::Interrupted) => println!("INTERRUPTED"),
        other => println!("UNEXPECTED {other:?}"),
    }
}

fn spawn_child(
    mode: &str,
) -> (
    std::process::Child,
    std::io::Lines<BufReader<std::process::ChildStdout>>,
) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "run_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, mode)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

fn wait_for(lines: &mut std::io::Lines<BufReader<std::process::ChildStdout>>, what: &str) {
    for line in lines.by_ref() {
        if line.unwrap().contains(what) {
            return;
        }
    }
    panic!("the child ended before printing {what}");
}

fn sigint(child: &std::process::Child) {
    // SAFETY: kill(2) has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
}

#[test]
fn first_ctrl_c_cancels_main_and_run_returns_interrupted() {
    let (mut child, mut lines) = spawn_child("plain");
    wait_for(&mut lines, "READY");
    std::thread::sleep(Duration::from_millis(50));
    sigint(&child);
    wait_for(&mut lines, "INTERRUPTED");
    assert!(child.wait().unwrap().success());
}

#[test]
fn second_ctrl_c_exits_at_once() {
    use std::os::unix::process::ExitStatusExt;
    let (mut child, mut lines) = spawn_child("stuck-shutdown");
    wait_for(&mut lines, "READY");
    std::thread::sleep(Duration::from_millis(50));
    sigint(&child); // cancels main; the shutdown then waits on the busy worker
    std::thread::sleep(Duration::from_millis(300));
    let second = Instant::now();
    sigint(&child);
    let status = child.wait().unwrap();
    assert!(
        second.elapsed() < Duration::from_secs(3),
        "{:?}",
        second.elapsed()
    );
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}");
}
