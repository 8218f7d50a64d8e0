//! Fault runs: peers that misbehave (reset mid-read and mid-write, never read, trickle a line
//! byte by byte) and a storm of blocking jobs past the pool's cap. Each fault ends in a clear
//! error for the connection or job concerned, nothing else is lost, the workers go back to
//! sleep afterwards (no busy loop), and the runtime keeps serving a fresh connection.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use eddy::net::{open_connection, StreamWriter, TcpListener, TcpStream, WriteBufferFull};
use eddy_tests::{
    assert_echo_server_serves, reset, wait_until, wait_until_all_workers_sleep, with_deadline,
    PATIENCE,
};

/// Builds a two-worker runtime, runs `body` with it on a thread of its own, and fails the
/// test instead of hanging if that takes longer than twice [`PATIENCE`].
fn run(body: impl FnOnce(&eddy::Runtime) + Send + 'static) {
    with_deadline(PATIENCE * 2, move || {
        let rt = eddy_tests::rt(2);
        body(&rt);
    });
}

/// An echo server on `rt` (one task per connection); its address.
fn echo_server(rt: &eddy::Runtime) -> std::net::SocketAddr {
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(eddy::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                drop(eddy::spawn(async move {
                    let mut buf = [0u8; 4096];
                    while let Ok(n @ 1..) = s.read(&mut buf).await {
                        if s.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                }));
            }
        }));
        addr
    })
}

/// Both workers parked: whatever the fault left behind does not keep a worker spinning.
fn assert_workers_sleep(rt: &eddy::Runtime) {
    assert!(
        wait_until_all_workers_sleep(rt, PATIENCE),
        "a worker kept running after the fault: {:?}",
        rt.metrics()
    );
}

/// A connected pair of eddy streams: (accepted, connecting).
async fn tcp_pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (server, _) = listener.accept().await.unwrap();
    (server, client)
}

fn is_reset(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe | io::ErrorKind::UnexpectedEof
    )
}

/// A peer that sends part of a message and resets: the reader waiting for the whole message
/// gets an error (not a hang, not a short success), and the runtime goes on.
#[test]
fn a_peer_resetting_mid_read_fails_that_read_only() {
    run(|rt| {
        let addr = echo_server(rt);
        let err = rt.block_on(async {
            let (server, client) = tcp_pair().await;
            let reading = eddy::spawn(async move {
                let mut whole = vec![0u8; 1024 * 1024];
                server.read_exact(&mut whole).await
            });
            client.write_all(&[1u8; 1000]).await.unwrap();
            reset(client);
            reading.await.unwrap().unwrap_err()
        });
        assert!(is_reset(&err), "{err:?}");
        assert_workers_sleep(rt);
        assert_echo_server_serves(addr);
    });
}

/// A peer that reads a little of a large write and resets: `write_all` fails with a reset
/// or broken pipe (the process is not killed by `SIGPIPE`), and the runtime goes on.
#[test]
fn a_peer_resetting_mid_write_fails_that_write_only() {
    run(|rt| {
        let addr = echo_server(rt);
        let err = rt.block_on(async {
            let (server, client) = tcp_pair().await;
            let writing = eddy::spawn(async move {
                let big = vec![2u8; 64 * 1024 * 1024];
                server.write_all(&big).await
            });
            let mut some = vec![0u8; 64 * 1024];
            client.read_exact(&mut some).await.unwrap();
            reset(client);
            writing.await.unwrap().unwrap_err()
        });
        assert!(is_reset(&err), "{err:?}");
        assert_workers_sleep(rt);
        assert_echo_server_serves(addr);
    });
}

/// Sixteen peers that never read: each `StreamWriter` refuses writes past its cap with
/// `WriteBufferFull`, so what they hold stays bounded, and the runtime goes on serving
/// others (its flushers wait for writability instead of spinning).
#[test]
fn peers_that_never_read_hit_the_writers_cap() {
    const PEERS: usize = 16;
    const CAP: usize = 256 * 1024;
    run(|rt| {
        let addr = echo_server(rt);
        let listener_addr = rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let local = listener.local_addr().unwrap();
            drop(eddy::spawn(async move {
                // Accepted, and never read from.
                let mut silent = Vec::new();
                while let Ok((s, _)) = listener.accept().await {
                    silent.push(s);
                }
            }));
            local
        });
        let writers: Vec<StreamWriter> = rt.block_on(async move {
            let mut writers = Vec::new();
            for _ in 0..PEERS {
                let (_reader, w) = open_connection(listener_addr).await.unwrap();
                w.set_write_buffer_cap(CAP);
                let chunk = vec![5u8; 16 * 1024];
                let mut accepted = 0usize;
                let err = loop {
                    match w.write(&chunk) {
                        Ok(()) => accepted += chunk.len(),
                        Err(e) => break e,
                    }
                    assert!(accepted < 512 * 1024 * 1024, "the cap never tripped");
                    // Let the flusher move what the kernel takes.
                    eddy::yield_now().await;
                };
                let full = err
                    .get_ref()
                    .and_then(|e| e.downcast_ref::<WriteBufferFull>())
                    .unwrap_or_else(|| panic!("not WriteBufferFull: {err:?}"));
                assert_eq!(full.cap, CAP);
                writers.push(w);
            }
            writers
        });
        let held: usize = writers.iter().map(|w| w.write_buffer_size()).sum();
        assert!(held <= PEERS * CAP, "writers hold {held} bytes");
        assert_workers_sleep(rt);
        assert_echo_server_serves(addr);
        drop(writers);
    });
}

/// A slow-loris peer trickles a line one byte per write, never ending it: `readline` fails
/// with `LimitOverrunError` once the line is longer than the reader's limit (it does not
/// buffer without bound), while other connections are served throughout.
#[test]
fn a_line_trickled_past_the_readers_limit_is_refused() {
    const LIMIT: usize = 1024;
    run(|rt| {
        let addr = echo_server(rt);
        let (line_tx, line) = async_channel::bounded(1);
        let server = rt.block_on(eddy::net::start_server("127.0.0.1:0", move |mut r, w| {
            let line_tx = line_tx.clone();
            async move {
                let _open = w; // a dropped writer closes the connection
                r.set_limit(LIMIT);
                let _ = line_tx.send(r.readline().await).await;
            }
        }));
        let listener_addr = server.unwrap().local_addr();
        let mut loris = std::net::TcpStream::connect(listener_addr).unwrap();
        loris.set_nodelay(true).unwrap();
        for i in 0..=LIMIT * 2 {
            if loris.write_all(b"x").is_err() {
                break; // the server gave up on us and closed
            }
            if i % 256 == 0 {
                assert_echo_server_serves(addr);
            }
            if !line.is_empty() {
                break;
            }
        }
        // Our end of the line: a reader with no limit would now see the end of the stream.
        let _ = loris.shutdown(std::net::Shutdown::Write);
        let err = line.recv_blocking().unwrap().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err:?}");
        assert!(
            err.get_ref()
                .is_some_and(|e| e.is::<eddy::net::LimitOverrunError>()),
            "{err:?}"
        );
        drop(loris);
        assert_workers_sleep(rt);
        assert_echo_server_serves(addr);
    });
}

/// 10,000 `spawn_blocking` jobs against a pool capped at 4 threads, its 4 threads held by
/// the test: the rest queue (the pool never grows past its cap), the workers keep serving
/// meanwhile, and once released every job runs exactly once.
#[test]
fn a_blocking_storm_past_the_cap_queues_and_every_job_runs_once() {
    const CAP: usize = 4;
    const JOBS: usize = 10_000;
    with_deadline(PATIENCE * 2, || {
        let rt = eddy::Builder::new()
            .workers(2)
            .max_blocking_threads(CAP)
            .build()
            .unwrap();
        let addr = echo_server(&rt);
        let ran: Arc<Vec<AtomicU8>> = Arc::new((0..JOBS).map(|_| AtomicU8::new(0)).collect());
        let started = Arc::new(AtomicUsize::new(0));
        let (release, gate) = async_channel::bounded::<()>(1);
        let jobs = rt.block_on({
            let (ran, started) = (ran.clone(), started.clone());
            async move {
                (0..JOBS)
                    .map(|i| {
                        let (ran, started, gate) = (ran.clone(), started.clone(), gate.clone());
                        eddy::spawn_blocking(move || {
                            // The first CAP hold their threads until the test lets them go.
                            if started.fetch_add(1, Ordering::SeqCst) < CAP {
                                let _ = gate.recv_blocking();
                            }
                            ran[i].fetch_add(1, Ordering::SeqCst);
                        })
                    })
                    .collect::<Vec<_>>()
            }
        });
        assert!(
            wait_until(PATIENCE, || started.load(Ordering::SeqCst) == CAP),
            "{} of the first {CAP} jobs started",
            started.load(Ordering::SeqCst)
        );
        assert_eq!(rt.metrics().blocking_threads, CAP);
        // The storm is queued on the pool, not on the workers: they serve.
        assert_echo_server_serves(addr);
        assert_eq!(rt.block_on(rt.handle().spawn(async { 7 })).unwrap(), 7);
        assert_eq!(started.load(Ordering::SeqCst), CAP, "a queued job started");
        drop(release);
        rt.block_on(async {
            for j in jobs {
                j.await.unwrap();
            }
        });
        assert!(rt.metrics().blocking_threads <= CAP);
        let wrong: Vec<usize> = (0..JOBS)
            .filter(|&i| ran[i].load(Ordering::SeqCst) != 1)
            .take(10)
            .collect();
        assert!(wrong.is_empty(), "jobs not run exactly once: {wrong:?}");
        assert_workers_sleep(&rt);
    });
}
