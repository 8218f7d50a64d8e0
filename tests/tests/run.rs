//! `eddy::run` / `Runtime::run`: asyncio.run's shutdown (cancel leftovers, wait, report) and
//! its Ctrl-C handling (checked in child processes that receive a real SIGINT).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use eddy_tests::{wait_until, with_deadline, DropCounter, HeldJob, PanicOnDrop, PATIENCE};

fn recording_runtime(timeout: Duration) -> (eddy::Runtime, Arc<Mutex<Vec<String>>>) {
    let reports = Arc::new(Mutex::new(Vec::new()));
    let r = reports.clone();
    let rt = eddy::Builder::new()
        .workers(2)
        // No stand-ins for held workers: a test that holds both must mean nobody polls.
        .spare_workers(0)
        .run_shutdown_timeout(timeout)
        .exception_handler(move |ctx: &eddy::ExceptionContext| {
            r.lock().unwrap().push(ctx.to_string());
        })
        .build()
        .unwrap();
    (rt, reports)
}

/// `run` returns main's value and drops every task left over (idle ones and one sleeping for
/// an hour), reporting nothing.
#[test]
fn run_returns_the_value_and_cancels_leftover_tasks() {
    let dropped = DropCounter::new();
    let d = dropped.clone();
    let (rt, reports) = recording_runtime(PATIENCE);
    let out = rt
        .run(async move {
            for _ in 0..1000 {
                let guard = d.token();
                drop(eddy::spawn(async move {
                    let _guard = guard;
                    std::future::pending::<()>().await
                }));
            }
            let guard = d.token();
            drop(eddy::spawn(async move {
                let _guard = guard;
                eddy::time::sleep(Duration::from_secs(3600)).await
            }));
            eddy::yield_now().await;
            "main done"
        })
        .unwrap();
    assert_eq!(out, "main done");
    assert_eq!(dropped.count(), 1001, "every leftover task was dropped");
    assert!(
        reports.lock().unwrap().is_empty(),
        "{:?}",
        reports.lock().unwrap()
    );
}

/// A destructor that panics while the shutdown cancels its task is reported to the exception
/// handler as an unhandled error during shutdown.
#[test]
fn errors_during_shutdown_are_reported() {
    let (rt, reports) = recording_runtime(PATIENCE);
    rt.run(async {
        let bomb = PanicOnDrop("a destructor"); // owned by the task's future from the start
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
    assert!(reports[0].contains("in a destructor"), "{}", reports[0]);
}

/// Tasks that cannot be cancelled within the shutdown timeout (both workers are held until
/// `run` has returned, so nobody can poll them) are reported as pending, with where they were
/// spawned, and `run` returns without waiting for the workers.
#[test]
fn tasks_that_will_not_stop_are_reported_as_pending() {
    with_deadline(PATIENCE, || {
        let (rt, reports) = recording_runtime(Duration::from_millis(200));
        let handle = rt.handle();
        let held = [HeldJob::new(), HeldJob::new()];
        let mut jobs = Vec::new();
        let held: Vec<HeldJob> = held
            .into_iter()
            .map(|(held, job)| {
                jobs.push(job);
                held
            })
            .collect();
        let mut spawn_line = 0;
        rt.run(async {
            // An idle task...
            let (polled_tx, polled_rx) = async_channel::bounded::<()>(1);
            spawn_line = line!() + 1;
            drop(eddy::spawn(async move {
                polled_tx.send(()).await.unwrap();
                std::future::pending::<()>().await
            }));
            polled_rx.recv().await.unwrap();
            // ...and both workers held (each held job blocks the worker that runs it, so two
            // started jobs are on two workers) until `run` has returned.
            for job in jobs {
                handle.call_soon_threadsafe(job).unwrap();
            }
            for h in &held {
                h.wait_started();
            }
        })
        .unwrap();
        for h in &held {
            h.release();
        }
        let reports = reports.lock().unwrap();
        let pending: Vec<&String> = reports
            .iter()
            .filter(|r| r.contains("Task was destroyed but it is pending!"))
            .collect();
        assert_eq!(pending.len(), 1, "{reports:?}");
        let at = format!("{}:{spawn_line}:", file!());
        assert!(pending[0].contains(&at), "not spawned at {at}: {reports:?}");
    });
}

const CHILD_ENV: &str = "EDDY_RUN_CHILD";

/// Prints `CANCELLING` when dropped: tells the parent that the shutdown has begun to cancel
/// tasks, which happens after `run` dropped its SIGINT listener.
struct AnnounceDrop;
impl Drop for AnnounceDrop {
    fn drop(&mut self) {
        println!("CANCELLING");
    }
}

/// The program the Ctrl-C tests run in a child process.
#[test]
fn run_child() {
    let Ok(mode) = std::env::var(CHILD_ENV) else {
        return;
    };
    let rt = eddy::Builder::new()
        .workers(2)
        .run_shutdown_timeout(PATIENCE)
        .build()
        .unwrap();
    let res = rt.run(async move {
        if mode == "stuck-shutdown" {
            // Make the shutdown take long: a worker busy in a long job cannot drop its
            // tasks (the parent ends this process long before the job would end).
            let (busy_tx, busy_rx) = async_channel::bounded::<()>(1);
            drop(eddy::spawn(async move {
                busy_tx.send(()).await.unwrap();
                std::thread::sleep(PATIENCE * 4);
            }));
            busy_rx.recv().await.unwrap();
            // An idle task the shutdown cancels on the other worker.
            let (polled_tx, polled_rx) = async_channel::bounded::<()>(1);
            drop(eddy::spawn(async move {
                let _announce = AnnounceDrop;
                polled_tx.send(()).await.unwrap();
                std::future::pending::<()>().await
            }));
            polled_rx.recv().await.unwrap();
        }
        println!("READY");
        std::future::pending::<()>().await
    });
    match res {
        Err(eddy::RunError::Interrupted) => println!("INTERRUPTED"),
        other => println!("UNEXPECTED {other:?}"),
    }
}

/// A child process running `run_child`, its stdout read line by line on a thread of its own
/// so that every wait has a deadline. Killed when dropped (a failing test leaves nothing).
struct Child {
    process: std::process::Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Child {
    fn spawn(mode: &str) -> Child {
        let mut process = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "run_child", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, mode)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(process.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Child {
            process,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits (up to [`PATIENCE`]) for a line that contains `what`.
    fn wait_for(&mut self, what: &str) {
        loop {
            match self.lines.recv_timeout(PATIENCE) {
                Ok(line) => {
                    let found = line.contains(what);
                    self.seen.push(line);
                    if found {
                        return;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!("the child did not print {what}: {:?}", self.seen)
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    panic!("the child ended before printing {what}: {:?}", self.seen)
                }
            }
        }
    }

    fn sigint(&self) {
        let pid = self.process.id() as i32;
        // SAFETY: kill(2) has no memory-safety preconditions.
        let sent = unsafe { libc::kill(pid, libc::SIGINT) };
        assert_eq!(sent, 0);
    }

    /// Waits (up to [`PATIENCE`]) for the child to exit; returns its status and every line
    /// it printed.
    fn wait(&mut self) -> (std::process::ExitStatus, Vec<String>) {
        let exited = wait_until(PATIENCE, || {
            self.process
                .try_wait()
                .expect("wait for the child")
                .is_some()
        });
        assert!(exited, "the child did not exit: {:?}", self.seen);
        let status = self.process.wait().unwrap();
        // The pipe is closed now: the reader thread sends what is left, then hangs up.
        while let Ok(line) = self.lines.recv_timeout(PATIENCE) {
            self.seen.push(line);
        }
        (status, self.seen.clone())
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// The first Ctrl-C cancels the main future and `run` returns `RunError::Interrupted`.
#[test]
fn first_ctrl_c_cancels_main_and_run_returns_interrupted() {
    let mut child = Child::spawn("plain");
    // `run` registers its SIGINT listener before it polls the main future, which prints
    // READY on its first poll.
    child.wait_for("READY");
    child.sigint();
    child.wait_for("INTERRUPTED");
    let (status, lines) = child.wait();
    assert!(status.success(), "{status}: {lines:?}");
}

/// A second Ctrl-C during the shutdown that the first one started terminates the process by
/// SIGINT at once: the shutdown (which would wait up to the run timeout for a worker held in
/// a long job) does not run to its end, so INTERRUPTED is never printed.
#[test]
fn second_ctrl_c_exits_at_once() {
    use std::os::unix::process::ExitStatusExt;
    let mut child = Child::spawn("stuck-shutdown");
    child.wait_for("READY");
    child.sigint(); // cancels main; the shutdown then waits on the busy worker
    child.wait_for("CANCELLING");
    child.sigint();
    let (status, lines) = child.wait();
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status}: {lines:?}");
    assert!(
        !lines.iter().any(|l| l.contains("INTERRUPTED")),
        "the shutdown ran to its end: {lines:?}"
    );
}
