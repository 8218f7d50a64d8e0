//! A tour of eddy: callbacks, timers, tasks, foreign-thread submission, pinned tasks, panics
//! handled by the exception handler, a stuck worker whose timer still fires, and shutdown.
//!
//! Run it with `cargo run --release --example tour`. It prints what it does and exits.

use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn main() -> std::io::Result<()> {
    // The demo panics on purpose; keep std's panic hook from printing a backtrace for each.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("   (a panic happened on purpose: {info})");
    }));
    let handled = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = handled.clone();
    let rt = eddy::Builder::new()
        .workers(2)
        .thread_name("tour-worker")
        .exception_handler(move |ctx: &eddy::ExceptionContext| {
            log.lock().unwrap().push(ctx.to_string());
        })
        .build()?;
    println!("eddy tour: a runtime with 2 workers, each an asyncio-style event loop\n");

    rt.block_on(async {
        callbacks().await;
        timers().await;
        tasks().await;
        pinned_tasks().await;
    });
    foreign_threads(&rt);
    panics(&rt, &handled);
    stuck_worker(&rt);
    tcp_round_trip(&rt)?;

    task_dump(&rt);

    let start = Instant::now();
    let handle = rt.handle();
    rt.handle().spawn(std::future::pending::<()>()).cancel();
    for _ in 0..1000 {
        drop(handle.spawn(eddy::time::sleep(Duration::from_secs(3600))));
    }
    rt.shutdown_timeout(Duration::from_secs(5));
    println!(
        "10. shutdown: 1000 sleeping tasks dropped, workers joined in {:?}; submitting now gives {:?}",
        start.elapsed(),
        handle.call_soon_threadsafe(|| ()).map(|_| ()),
    );
    println!("\ntour finished");
    Ok(())
}

/// asyncio's call_soon: callbacks run in the next cycle, in order, and can be cancelled.
async fn callbacks() {
    let order = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = async_channel::bounded::<()>(1);
    for i in 0..3 {
        let order = order.clone();
        eddy::call_soon(move || order.lock().unwrap().push(i));
    }
    let cancelled = eddy::call_soon(|| unreachable!("cancelled callbacks never run"));
    cancelled.cancel();
    eddy::call_soon(move || drop(tx));
    let _ = rx.recv().await;
    eddy::time::sleep(Duration::from_millis(5)).await;
    let mut seen = order.lock().unwrap().clone();
    seen.sort();
    println!(
        "1. callbacks: call_soon ran {:?}; a cancelled one did not run (cancelled() = {})",
        seen,
        cancelled.cancelled()
    );
}

/// call_later / call_at on the worker's timer heap, fired in deadline order.
async fn timers() {
    let order = Arc::new(Mutex::new(Vec::new()));
    let start = eddy::time();
    for ms in [30u64, 10, 20] {
        let order = order.clone();
        eddy::call_later(Duration::from_millis(ms), move || {
            order.lock().unwrap().push(ms)
        });
    }
    let t = eddy::call_at(start + Duration::from_millis(15), || unreachable!());
    t.cancel();
    eddy::time::sleep(Duration::from_millis(50)).await;
    let r = eddy::time::timeout(Duration::from_millis(5), std::future::pending::<()>()).await;
    println!(
        "2. timers: fired in deadline order {:?} (scheduled as 30, 10, 20 ms), one cancelled; \
         timeout() on a pending future gave {:?}",
        order.lock().unwrap(),
        r.map_err(|e| e.to_string())
    );
}

/// spawn, await, cancel, detach.
async fn tasks() {
    let counter = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..10_000)
        .map(|_| {
            let c = counter.clone();
            eddy::spawn(async move {
                eddy::yield_now().await;
                c.fetch_add(1, Ordering::Relaxed);
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let stuck = eddy::spawn(std::future::pending::<()>());
    stuck.cancel();
    let res = stuck.await;
    println!(
        "3. tasks: 10000 tasks spawned and awaited (counter = {}); a cancelled task gave {:?}",
        counter.load(Ordering::Relaxed),
        res.map_err(|e| e.to_string())
    );
}

/// spawn_local: a !Send future pinned to one worker, woken from another thread.
async fn pinned_tasks() {
    let (tx, rx) = async_channel::bounded::<u32>(1);
    let out = eddy::spawn(async move {
        let thread = std::thread::current().name().unwrap_or("?").to_string();
        let pinned = eddy::spawn_local(async move {
            let sum = Rc::new(std::cell::Cell::new(0)); // !Send state, fine in a pinned task
            while let Ok(v) = rx.recv().await {
                sum.set(sum.get() + v);
            }
            sum.get()
        });
        std::thread::spawn(move || {
            for v in 1..=4 {
                tx.send_blocking(v).unwrap();
            }
        });
        (pinned.await.unwrap(), thread)
    })
    .await
    .unwrap();
    println!(
        "4. spawn_local: an Rc-holding task on {} summed {} sent from a foreign thread",
        out.1, out.0
    );
}

/// call_soon_threadsafe and spawn from threads the runtime never saw.
fn foreign_threads(rt: &eddy::Runtime) {
    let ran = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let h = rt.handle();
            let ran = ran.clone();
            std::thread::spawn(move || {
                for _ in 0..25_000 {
                    let ran = ran.clone();
                    h.call_soon_threadsafe(move || {
                        ran.fetch_add(1, Ordering::Relaxed);
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let task = rt.handle().spawn(async { "spawned from the main thread" });
    let msg = rt.block_on(task).unwrap();
    rt.block_on(eddy::time::sleep(Duration::from_millis(20)));
    println!(
        "5. foreign threads: 4 threads x 25000 call_soon_threadsafe -> {} ran; {msg}",
        ran.load(Ordering::Relaxed)
    );
}

/// Panics go to the exception handler (callbacks) or the awaiter (tasks); workers survive.
fn panics(rt: &eddy::Runtime, handled: &Arc<Mutex<Vec<String>>>) {
    let awaited = rt.block_on(async {
        eddy::call_soon(|| panic!("a callback failed"));
        drop(eddy::spawn(async { panic!("a detached task failed") }));
        let err = eddy::spawn(async { panic!("an awaited task failed") }).await;
        eddy::time::sleep(Duration::from_millis(20)).await;
        err.unwrap_err().to_string()
    });
    println!("6. panics: the awaiter got \"{awaited}\"; the exception handler got:");
    for h in handled.lock().unwrap().iter() {
        println!("     - {h}");
    }
    let still = rt.block_on(async { eddy::spawn(async { 1 + 1 }).await.unwrap() });
    println!("   the runtime still serves tasks: 1 + 1 = {still}");
}

/// A worker busy for 300 ms in one callback; a 20 ms timer on its heap is fired by its sibling.
fn stuck_worker(rt: &eddy::Runtime) {
    let (tx, rx) = std::sync::mpsc::channel();
    rt.handle()
        .call_soon_threadsafe(move || {
            let scheduled = Instant::now();
            let tx2 = tx.clone();
            eddy::call_later(Duration::from_millis(20), move || {
                let _ = tx2.send(("timer fired", scheduled.elapsed()));
            });
            std::thread::sleep(Duration::from_millis(300)); // a misbehaving callback
            let _ = tx.send(("long callback ended", scheduled.elapsed()));
        })
        .unwrap();
    let first = rx.recv().unwrap();
    let second = rx.recv().unwrap();
    println!(
        "7. stuck worker: a 20 ms timer on a worker blocked for 300 ms: \"{}\" after {:?}, \
         \"{}\" after {:?}",
        first.0, first.1, second.0, second.1
    );
}

/// A TCP echo server and client on 127.0.0.1, with asyncio-style streams.
fn tcp_round_trip(rt: &eddy::Runtime) -> std::io::Result<()> {
    use eddy::net::{open_connection, start_server};

    rt.block_on(async {
        let server = start_server("127.0.0.1:0", |mut reader, writer| async move {
            while let Ok(line) = reader.readline().await {
                if line.is_empty() || writer.write(&line).is_err() || writer.drain().await.is_err()
                {
                    break;
                }
            }
            let _ = writer.close().await;
        })
        .await?;
        let (mut reader, writer) = open_connection(server.local_addr()).await?;
        let start = Instant::now();
        let mut replies = 0;
        for i in 0..1000 {
            writer.write(format!("line {i}\n").as_bytes())?;
            writer.drain().await?;
            let reply = reader.readline().await?;
            assert_eq!(reply, format!("line {i}\n").into_bytes());
            replies += 1;
        }
        let took = start.elapsed();
        writer.close().await?;
        server.close();
        server.wait_closed().await;
        println!(
            "8. tcp: {replies} lines echoed through a local start_server/open_connection pair \
             on {} in {took:?} ({:.1} µs per round trip)",
            server.local_addr(),
            took.as_secs_f64() * 1e6 / replies as f64
        );
        Ok(())
    })
}

/// Named tasks, a task dump and the metrics, without any flag.
fn task_dump(rt: &eddy::Runtime) {
    let handle = rt.handle();
    let ticker = eddy::task::Builder::new()
        .name("ticker")
        .spawn_on(&handle, async {
            let mut every = eddy::time::interval(Duration::from_millis(5));
            loop {
                every.tick().await;
            }
        });
    let waiter = eddy::task::Builder::new()
        .name("waiter")
        .spawn_on(&handle, std::future::pending::<()>());
    std::thread::sleep(Duration::from_millis(30));
    println!("9. task dump and metrics:");
    for task in rt.dump_tasks() {
        println!("     {task}");
    }
    let m = rt.metrics();
    for (i, w) in m.workers.iter().enumerate() {
        println!(
            "     worker {i}: {} polls, {} callbacks, {} steals ({} jobs), {} parks, {} timers fired, busy {:?}",
            w.tasks_polled, w.callbacks_run, w.steal_operations, w.stolen_items, w.parks, w.timers_fired, w.busy_time
        );
    }
    ticker.cancel();
    waiter.cancel();
}
