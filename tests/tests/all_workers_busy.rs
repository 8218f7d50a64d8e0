//! Every worker stuck in a long job at once: spare workers stand in, so the runtime still
//! accepts and serves connections, fires timers and runs tasks. Each worker is held by a job
//! the test releases only at the end.

use std::io::{Read, Write};
use std::sync::mpsc;
use std::time::Duration;

use eddy_tests::{with_deadline, Anchors, HeldJob, PATIENCE};

const LIMIT: Duration = Duration::from_secs(90);
const WORKERS: usize = 2;

/// Holds every worker of `rt` (not a spare: the jobs are pinned, one per worker) until the
/// returned jobs are dropped. Returns once all of them are held.
fn hold_every_worker(anchors: &Anchors) -> Vec<HeldJob> {
    (0..WORKERS)
        .map(|w| {
            let (held, job) = HeldJob::new();
            anchors.run(w, move || async move { job() });
            held.wait_started();
            held
        })
        .collect()
}

fn runtime() -> (eddy::Runtime, Anchors) {
    let rt = eddy::Builder::new()
        .workers(WORKERS)
        .thread_name("awb")
        .build()
        .unwrap();
    let anchors = Anchors::new(&rt, "awb", WORKERS);
    (rt, anchors)
}

/// An echo server whose accept loop runs on the workers; with every worker held, a new
/// connection is accepted and its requests are answered.
#[test]
fn new_connections_are_served_while_every_worker_is_held() {
    with_deadline(LIMIT, || {
        let (rt, anchors) = runtime();
        let (addr_tx, addr_rx) = mpsc::channel();
        drop(rt.handle().spawn(async move {
            let listener = eddy::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            loop {
                let (s, _) = listener.accept().await.unwrap();
                drop(eddy::spawn(async move {
                    let mut buf = [0u8; 64];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                }));
            }
        }));
        let addr = addr_rx.recv_timeout(PATIENCE).unwrap();
        // The accept loop is registered (it sent the address from inside its first poll's
        // task, before awaiting the first accept) on one of the workers.
        let release = hold_every_worker(&anchors);
        let mut conn = std::net::TcpStream::connect(addr).unwrap();
        conn.set_read_timeout(Some(PATIENCE)).unwrap();
        for _ in 0..20 {
            conn.write_all(b"ping").unwrap();
            let mut buf = [0u8; 4];
            conn.read_exact(&mut buf)
                .expect("no echo while every worker was held");
            assert_eq!(&buf, b"ping");
        }
        drop(release);
    });
}

/// With every worker held, timers set from outside fire (on the workers' heaps) and tasks
/// spawned from outside run.
#[test]
fn timers_and_tasks_run_while_every_worker_is_held() {
    with_deadline(LIMIT, || {
        let (rt, anchors) = runtime();
        let release = hold_every_worker(&anchors);
        let (tx, rx) = mpsc::channel();
        for i in 0..10 {
            let timer_tx = tx.clone();
            rt.handle()
                .call_later(Duration::from_millis(1), move || {
                    timer_tx.send(("timer", i)).unwrap()
                })
                .unwrap();
            let tx = tx.clone();
            drop(
                rt.handle()
                    .spawn(async move { tx.send(("task", i)).unwrap() }),
            );
        }
        let mut got: Vec<_> = (0..20)
            .map(|_| {
                rx.recv_timeout(PATIENCE)
                    .expect("nothing ran while every worker was held")
            })
            .collect();
        got.sort();
        let want: Vec<_> = (0..10)
            .map(|i| ("task", i))
            .chain((0..10).map(|i| ("timer", i)))
            .collect();
        assert_eq!(got, want);
        drop(release);
    });
}

/// With every worker held and nothing else queued anywhere (no timer, no socket), a task
/// spawned from outside (it waits in the injector) still runs.
#[test]
fn a_task_spawned_from_outside_runs_while_every_worker_is_held() {
    with_deadline(LIMIT, || {
        let (rt, anchors) = runtime();
        let release = hold_every_worker(&anchors);
        let (tx, rx) = mpsc::channel();
        drop(rt.handle().spawn(async move { tx.send(()).unwrap() }));
        rx.recv_timeout(PATIENCE)
            .expect("the task did not run while every worker was held");
        drop(release);
    });
}
