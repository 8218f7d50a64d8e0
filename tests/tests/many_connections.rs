//! A fault run of its own binary (so that it can count the process's descriptors): 10,000
//! connections opened at once against an eddy server, then all dropped at once, half with a
//! FIN and half with a reset. The clients live in a child process, so that each process needs
//! only one descriptor per connection.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use eddy::net::TcpListener;
use eddy_tests::{
    assert_echo_server_serves, is_child, wait_until, wait_until_all_workers_sleep, with_deadline,
    PATIENCE,
};

const CONNECTIONS: usize = 10_000;
/// Where the child connects to.
const ADDR_ENV: &str = "EDDY_TESTS_SERVER_ADDR";
/// What the child prints once every connection is open and has had its echo.
const ALL_OPEN: &str = "all connections open";

/// Descriptors this process has open.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("list /proc/self/fd")
        .count()
}

/// Raises this process's soft descriptor limit to `needed` (children inherit it); fails the
/// test, saying so, if the hard limit is lower.
fn raise_fd_limit(needed: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    assert!(
        lim.rlim_max >= needed,
        "this test needs {needed} descriptors per process; the hard limit is {}",
        lim.rlim_max
    );
    if lim.rlim_cur < needed {
        lim.rlim_cur = needed;
        // SAFETY: as above; only the soft limit changes, within the hard one.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
    }
}

/// Counts the connection tasks alive: up while the guard lives.
struct Live(Arc<AtomicUsize>);

impl Live {
    fn new(count: &Arc<AtomicUsize>) -> Live {
        count.fetch_add(1, Ordering::SeqCst);
        Live(count.clone())
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// 10,000 connections opened at once are all accepted and served while open; dropped at
/// once (half reset), every connection task ends, every descriptor is given back, the
/// workers go back to sleep, and the server still accepts and serves.
#[test]
fn ten_thousand_connections_opened_and_dropped_at_once() {
    raise_fd_limit(CONNECTIONS as u64 + 1_000);
    with_deadline(PATIENCE * 4, || {
        let rt = eddy_tests::rt(2);
        let live = Arc::new(AtomicUsize::new(0));
        let accepted = Arc::new(AtomicUsize::new(0));
        let addr = rt.block_on({
            let (live, accepted) = (live.clone(), accepted.clone());
            async move {
                let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = listener.local_addr().unwrap();
                drop(eddy::spawn(async move {
                    while let Ok((s, _)) = listener.accept().await {
                        accepted.fetch_add(1, Ordering::SeqCst);
                        let live = Live::new(&live);
                        drop(eddy::spawn(async move {
                            let _live = live;
                            let mut buf = [0u8; 64];
                            while let Ok(n @ 1..) = s.read(&mut buf).await {
                                if s.write_all(&buf[..n]).await.is_err() {
                                    return;
                                }
                            }
                        }));
                    }
                }));
                addr
            }
        });
        let fds_before = open_fds();

        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "child_opens_and_drops_connections",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(eddy_tests::CHILD_ENV, "1")
            .env(ADDR_ENV, addr.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the client process");
        let mut to_child = child.stdin.take().unwrap();
        let mut from_child = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        // The test harness may print its "test ... " prefix on the same line.
        while !line.trim_end().ends_with(ALL_OPEN) {
            line.clear();
            let n = from_child.read_line(&mut line).unwrap();
            assert!(n > 0, "the client process ended before opening everything");
        }
        // Every connection had its echo: its task is up.
        assert_eq!(accepted.load(Ordering::SeqCst), CONNECTIONS);
        assert_eq!(live.load(Ordering::SeqCst), CONNECTIONS);
        // One per connection, and our two pipes to the child.
        assert_eq!(open_fds(), fds_before + CONNECTIONS + 2);
        assert_echo_server_serves(addr);

        to_child.write_all(b"drop\n").unwrap();
        assert!(child.wait().unwrap().success(), "the client process failed");
        drop((to_child, from_child));
        assert!(
            wait_until(PATIENCE, || live.load(Ordering::SeqCst) == 0),
            "{} connection tasks still alive after their peers closed",
            live.load(Ordering::SeqCst)
        );
        assert!(
            wait_until(PATIENCE, || open_fds() == fds_before),
            "{} descriptors open, {fds_before} before",
            open_fds()
        );
        assert!(
            wait_until_all_workers_sleep(&rt, PATIENCE),
            "a worker kept running: {:?}",
            rt.metrics()
        );
        assert_echo_server_serves(addr);
    });
}

/// The client side, in a child process: opens every connection, checks one echo on each,
/// says so, waits for the word, then drops them all at once (every other one with a reset,
/// which also keeps half of them out of `TIME_WAIT`).
#[test]
#[ignore = "run in a child process by ten_thousand_connections_opened_and_dropped_at_once"]
fn child_opens_and_drops_connections() {
    if !is_child() {
        return;
    }
    let addr: std::net::SocketAddr = std::env::var(ADDR_ENV).unwrap().parse().unwrap();
    let conns: Vec<std::net::TcpStream> = (0..CONNECTIONS)
        .map(|i| {
            let mut s = std::net::TcpStream::connect(addr)
                .unwrap_or_else(|e| panic!("connection {i}: {e}"));
            s.write_all(&[i as u8]).unwrap();
            s
        })
        .collect();
    for (i, mut s) in conns.iter().enumerate() {
        s.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut b = [0u8; 1];
        s.read_exact(&mut b)
            .unwrap_or_else(|e| panic!("echo on connection {i}: {e}"));
        assert_eq!(b[0], i as u8);
    }
    println!("{ALL_OPEN}");
    std::io::stdout().flush().unwrap();
    let mut word = String::new();
    std::io::stdin().read_line(&mut word).unwrap();
    for (i, s) in conns.into_iter().enumerate() {
        if i % 2 == 1 {
            socket2::SockRef::from(&s)
                .set_linger(Some(Duration::ZERO))
                .unwrap();
        }
        drop(s);
    }
}
