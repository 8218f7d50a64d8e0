//! What servers need from sockets: `TcpStream`'s options (keepalive, linger, TTL, buffer
//! sizes) set, read back and, where it shows, effective; `peek`, `try_read`/`try_write` and
//! `readable`/`writable` under edge-triggered readiness; `TcpSocket` for bind-before-connect
//! and listen options; `lookup_host` on the blocking pool.

use std::io::{self, ErrorKind, IoSlice, IoSliceMut};
use std::net::{Shutdown, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::task::{Context, Waker};
use std::time::Duration;

use eddy::net::{lookup_host, TcpKeepalive, TcpListener, TcpSocket, TcpStream};
use eddy_tests::{block_on_within, rt, PATIENCE};

/// A connected (client, server) pair over 127.0.0.1.
async fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (server, _) = listener.accept().await.unwrap();
    (client, server)
}

/// One poll with a waker that does nothing: whether the direction is ready right now.
fn read_ready_now(s: &TcpStream) -> bool {
    s.poll_read_ready(&mut Context::from_waker(Waker::noop()))
        .is_ready()
}

fn write_ready_now(s: &TcpStream) -> bool {
    s.poll_write_ready(&mut Context::from_waker(Waker::noop()))
        .is_ready()
}

/// Keepalive is off by default; settings read back exactly (fractions of a second rounded
/// up); `Some(TcpKeepalive::new())` switches it on with every field reported; `None`
/// switches it off; out-of-range values are refused with `InvalidInput` and change nothing.
#[test]
fn keepalive_settings_read_back() {
    block_on_within(rt(1), PATIENCE, async {
        let (c, _s) = pair().await;
        assert_eq!(c.keepalive().unwrap(), None);

        let k = TcpKeepalive::new()
            .with_idle(Duration::from_secs(30))
            .with_interval(Duration::from_secs(5))
            .with_retries(4);
        c.set_keepalive(Some(k)).unwrap();
        assert_eq!(c.keepalive().unwrap(), Some(k));

        c.set_keepalive(Some(
            TcpKeepalive::new().with_idle(Duration::from_millis(1500)),
        ))
        .unwrap();
        let got = c.keepalive().unwrap().unwrap();
        assert_eq!(got.idle(), Some(Duration::from_secs(2)), "rounded up");
        // Fields not given keep what the socket had.
        assert_eq!(got.interval(), Some(Duration::from_secs(5)));
        assert_eq!(got.retries(), Some(4));

        c.set_keepalive(None).unwrap();
        assert_eq!(c.keepalive().unwrap(), None);

        let (defaults, _s2) = pair().await;
        defaults.set_keepalive(Some(TcpKeepalive::new())).unwrap();
        let d = defaults.keepalive().unwrap().expect("keepalive on");
        assert!(d.idle().is_some() && d.interval().is_some() && d.retries().is_some());

        let bad = [
            TcpKeepalive::new().with_idle(Duration::ZERO),
            TcpKeepalive::new().with_interval(Duration::from_secs(40_000)),
            TcpKeepalive::new().with_retries(0),
            TcpKeepalive::new()
                .with_idle(Duration::from_secs(10))
                .with_retries(1000),
        ];
        for k in bad {
            let err = c.set_keepalive(Some(k)).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{k:?}: {err}");
            assert!(err.to_string().contains("keepalive"), "{err}");
            assert_eq!(c.keepalive().unwrap(), None, "{k:?} changed the socket");
        }
    });
}

/// `SO_LINGER` reads back (fractions of a second rounded up, never down to the zero that
/// means "reset"), and `Some(ZERO)` is effective: dropping the stream resets the connection,
/// so the peer's read fails with `ConnectionReset` instead of seeing EOF.
#[test]
fn zero_linger_resets_the_peer() {
    block_on_within(rt(2), PATIENCE, async {
        let (c, s) = pair().await;
        assert_eq!(c.linger().unwrap(), None);
        c.set_linger(Some(Duration::from_secs(5))).unwrap();
        assert_eq!(c.linger().unwrap(), Some(Duration::from_secs(5)));
        c.set_linger(Some(Duration::from_millis(300))).unwrap();
        assert_eq!(c.linger().unwrap(), Some(Duration::from_secs(1)));
        c.set_linger(None).unwrap();
        assert_eq!(c.linger().unwrap(), None);

        c.set_linger(Some(Duration::ZERO)).unwrap();
        assert_eq!(c.linger().unwrap(), Some(Duration::ZERO));
        drop(c);
        let mut buf = [0u8; 16];
        let res = eddy::time::timeout(PATIENCE, s.read(&mut buf))
            .await
            .expect("the server's read never finished");
        match res {
            Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}"),
            Ok(n) => panic!("the peer saw {n} bytes (0: a FIN) instead of a reset"),
        }
    });
}

/// `set_ttl` reads back; 0 is refused.
#[test]
fn ttl_reads_back() {
    block_on_within(rt(1), PATIENCE, async {
        let (c, _s) = pair().await;
        c.set_ttl(7).unwrap();
        assert_eq!(c.ttl().unwrap(), 7);
        c.set_ttl(200).unwrap();
        assert_eq!(c.ttl().unwrap(), 200);
        assert!(c.set_ttl(0).is_err());
        assert_eq!(c.ttl().unwrap(), 200);
    });
}

/// Sets a buffer size twice, small then larger, through `set`, reading back with `get`:
/// each reads back at least what was asked (Linux reports double), and the second more than
/// the first, so the setter took effect both times. Both sizes stay below Linux's default
/// caps (`net.core.[rw]mem_max`, 208 KiB), which would otherwise clamp them.
fn check_buffer_size(
    what: &str,
    set: impl Fn(u32) -> io::Result<()>,
    get: impl Fn() -> io::Result<u32>,
) {
    set(8 * 1024).unwrap();
    let small = get().unwrap();
    assert!(small >= 8 * 1024, "{what}: asked 8 KiB, got {small}");
    set(64 * 1024).unwrap();
    let large = get().unwrap();
    assert!(large >= 64 * 1024, "{what}: asked 64 KiB, got {large}");
    assert!(large > small, "{what}: {small} then {large}");
}

/// Send and receive buffer sizes read back at least what was asked, on a stream and on a
/// `TcpSocket`; sizes set on a `TcpSocket` before connecting are the stream's.
#[test]
fn buffer_sizes_read_back_at_least_what_was_asked() {
    block_on_within(rt(1), PATIENCE, async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let c = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        check_buffer_size(
            "stream send",
            |n| c.set_send_buffer_size(n),
            || c.send_buffer_size(),
        );
        check_buffer_size(
            "stream recv",
            |n| c.set_recv_buffer_size(n),
            || c.recv_buffer_size(),
        );

        let socket = TcpSocket::new_v4().unwrap();
        check_buffer_size(
            "socket send",
            |n| socket.set_send_buffer_size(n),
            || socket.send_buffer_size(),
        );
        check_buffer_size(
            "socket recv",
            |n| socket.set_recv_buffer_size(n),
            || socket.recv_buffer_size(),
        );
        let stream = socket
            .connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        assert!(stream.send_buffer_size().unwrap() >= 64 * 1024);
        assert!(stream.recv_buffer_size().unwrap() >= 64 * 1024);
    });
}

/// `peek` leaves the bytes for the next `read`. The connection is first brought to a state
/// where a short stream read would retire read readiness (a read said `WouldBlock`, and
/// every event since said whether the peer closed); then a peek that fills less than its
/// buffer must not retire it, or the read that follows would wait forever for bytes that
/// are already there. At EOF, peek and read both return 0.
#[test]
fn peek_leaves_the_bytes_for_the_next_read() {
    block_on_within(rt(2), PATIENCE * 2, async {
        let (c, s) = pair().await;
        let mut buf = [0u8; 64];
        // Nothing has been sent: this read says WouldBlock and clears readiness.
        assert_eq!(
            c.try_read(&mut buf).unwrap_err().kind(),
            ErrorKind::WouldBlock
        );

        s.write_all(b"hello world").await.unwrap();
        let n = c.peek(&mut buf).await.unwrap();
        assert!(n > 0 && n < buf.len(), "a short peek: {n}");
        assert_eq!(&buf[..n], &b"hello world"[..n]);

        let mut got = [0u8; 11];
        eddy::time::timeout(PATIENCE, c.read_exact(&mut got))
            .await
            .expect("the read after a short peek hung: the peek retired read readiness")
            .unwrap();
        assert_eq!(&got, b"hello world");

        // A peek that fills its buffer, then the same bytes by read.
        s.write_all(b"again").await.unwrap();
        let mut five = [0u8; 5];
        let mut n = 0;
        while n < 5 {
            n = c.peek(&mut five).await.unwrap();
        }
        assert_eq!(&five, b"again");
        let mut got = [0u8; 5];
        eddy::time::timeout(PATIENCE, c.read_exact(&mut got))
            .await
            .expect("the read after a full peek hung")
            .unwrap();
        assert_eq!(&got, b"again");

        s.shutdown(Shutdown::Write).unwrap();
        assert_eq!(c.peek(&mut buf).await.unwrap(), 0);
        assert_eq!(c.read(&mut buf).await.unwrap(), 0);
    });
}

/// `try_read` says `WouldBlock` when nothing has arrived and clears read readiness, so
/// `poll_read_ready` is pending until data comes; after `readable()` it returns the data,
/// then `WouldBlock` again. The vectored form fills its buffers in order.
#[test]
fn try_read_returns_would_block_until_data_arrives() {
    block_on_within(rt(2), PATIENCE, async {
        let (c, s) = pair().await;
        let mut buf = [0u8; 64];
        for round in 0..3u8 {
            let err = c.try_read(&mut buf).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::WouldBlock, "round {round}: {err}");
            assert!(
                !read_ready_now(&c),
                "round {round}: WouldBlock left the stream marked readable"
            );

            let msg = [b'a' + round; 4];
            s.write_all(&msg).await.unwrap();
            let mut got = Vec::new();
            while got.len() < 4 {
                c.readable().await.unwrap();
                match c.try_read(&mut buf) {
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{e}"),
                }
            }
            assert_eq!(got, msg);
        }

        // The vectored form.
        assert_eq!(
            c.try_read(&mut buf).unwrap_err().kind(),
            ErrorKind::WouldBlock
        );
        s.write_all(b"headbody").await.unwrap();
        let (mut head, mut body) = ([0u8; 4], [0u8; 4]);
        let mut got = 0;
        while got < 8 {
            c.readable().await.unwrap();
            let mut bufs = [IoSliceMut::new(&mut head), IoSliceMut::new(&mut body)];
            let mut rest = &mut bufs[..];
            IoSliceMut::advance_slices(&mut rest, got);
            match c.try_read_vectored(rest) {
                Ok(n) => got += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!((&head, &body), (b"head", b"body"));

        // EOF is not WouldBlock.
        s.shutdown(Shutdown::Write).unwrap();
        let n = loop {
            c.readable().await.unwrap();
            match c.try_read(&mut buf) {
                Ok(n) => break n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!(n, 0);
    });
}

/// `try_write` writes at once on a fresh connection; against a peer that does not read it
/// ends in `WouldBlock`, after which `poll_write_ready` is pending (once the last
/// acknowledgements are in); when the peer drains, `writable()` returns and `try_write`
/// writes again. Every byte arrives.
#[test]
fn try_write_returns_would_block_when_the_send_buffer_is_full() {
    const LIMIT: usize = 256 * 1024 * 1024;
    block_on_within(rt(2), PATIENCE * 2, async {
        let socket = TcpSocket::new_v4().unwrap();
        socket.set_send_buffer_size(16 * 1024).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let c = socket
            .connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (s, _) = listener.accept().await.unwrap();
        s.set_recv_buffer_size(16 * 1024).unwrap();

        let n = c.try_write(b"x").unwrap();
        assert_eq!(n, 1);
        let mut sent = 1usize;
        let chunk = vec![7u8; 64 * 1024];
        // Fill until WouldBlock leaves the stream not writable. A WouldBlock may still be
        // followed by an edge (acknowledgements of data in flight free send buffer space),
        // so keep going until one is not.
        for attempt in 0.. {
            assert!(
                sent < LIMIT && attempt < 1_000_000,
                "still writable after {attempt} attempts and {sent} bytes"
            );
            match c.try_write(&chunk) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if !write_ready_now(&c) {
                        break;
                    }
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(
            c.try_write(&chunk).unwrap_err().kind(),
            ErrorKind::WouldBlock
        );

        // The server drains everything, so the client's send buffer empties.
        let drain = eddy::spawn(async move {
            let mut buf = vec![0u8; 256 * 1024];
            let mut got = 0usize;
            loop {
                match s.read(&mut buf).await.unwrap() {
                    0 => return got,
                    n => got += n,
                }
            }
        });
        let bufs = [IoSlice::new(b"last "), IoSlice::new(b"words")];
        let n = loop {
            c.writable().await.unwrap();
            match c.try_write_vectored(&bufs) {
                Ok(n) => break n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        };
        assert!(n > 0);
        sent += n;
        c.shutdown(Shutdown::Write).unwrap();
        assert_eq!(drain.await.unwrap(), sent);
    });
}

/// Bind-before-connect: the connected stream's local address is the one bound, and the
/// server sees the connection come from it. Options set before connecting carry over.
#[test]
fn tcp_socket_binds_before_connecting() {
    block_on_within(rt(2), PATIENCE, async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let socket = TcpSocket::new_v4().unwrap();
        socket.set_nodelay(true).unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let local = socket.local_addr().unwrap();
        assert_ne!(local.port(), 0);
        let stream = socket
            .connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (_server, peer) = listener.accept().await.unwrap();
        assert_eq!(stream.local_addr().unwrap(), local);
        assert_eq!(peer, local);
        assert!(stream.nodelay().unwrap());

        // Errors, not panics: a bind to an address of the other family, a connect refused.
        let v4 = TcpSocket::new_v4().unwrap();
        assert!(v4.bind("[::1]:0".parse().unwrap()).is_err());
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let err = TcpSocket::new_v4()
            .unwrap()
            .connect(closed)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ConnectionRefused);
    });
}

/// The listen backlog of a listening socket, as the kernel holds it (`TCP_INFO` reports
/// a listener's maximum accept queue in `tcpi_sacked`).
fn listen_backlog(l: &TcpListener) -> u32 {
    // SAFETY: `tcp_info` is plain integers, for which all zeroes is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` and `len` are valid and writable, `len` is `info`'s size, and the fd
    // is open for as long as `l` is borrowed.
    let rc = unsafe {
        libc::getsockopt(
            l.get_ref().as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    assert_eq!(rc, 0, "{}", io::Error::last_os_error());
    // `TCP_LISTEN` in the kernel's `tcp_states.h` (libc does not export the states).
    assert_eq!(info.tcpi_state, 10, "not a listening socket");
    info.tcpi_sacked
}

/// `TcpSocket::listen` with `SO_REUSEPORT`: two sockets listen on one port, each with the
/// backlog asked; a third without the option cannot bind it. Both accept connections.
#[test]
fn tcp_socket_listens_with_reuseport_and_a_backlog() {
    block_on_within(rt(2), PATIENCE, async {
        let open = |addr: SocketAddr, backlog: u32| {
            let socket = TcpSocket::new_v4().unwrap();
            socket.set_reuseport(true).unwrap();
            assert!(socket.reuseport().unwrap());
            socket.bind(addr).unwrap();
            socket.listen(backlog).unwrap()
        };
        let a = open("127.0.0.1:0".parse().unwrap(), 7);
        let addr = a.local_addr().unwrap();
        let b = open(addr, 11);
        assert_eq!(b.local_addr().unwrap(), addr);
        assert_eq!(listen_backlog(&a), 7);
        assert_eq!(listen_backlog(&b), 11);

        let third = TcpSocket::new_v4().unwrap();
        assert!(!third.reuseport().unwrap());
        assert_eq!(third.bind(addr).unwrap_err().kind(), ErrorKind::AddrInUse);

        // The kernel spreads connections over both listeners by a hash of the client's
        // address and port; connect until each has accepted one.
        let mut accepted = [false, false];
        for n in 0.. {
            if accepted == [true, true] {
                break;
            }
            assert!(n < 1000, "{n} connections all went to one listener");
            let client = TcpStream::connect(addr).await.unwrap();
            let which = futures_lite::future::or(async { (0, a.accept().await.unwrap()) }, async {
                (1, b.accept().await.unwrap())
            })
            .await;
            let (i, (_server, peer)) = which;
            assert_eq!(peer, client.local_addr().unwrap());
            accepted[i] = true;
        }

        // `ListenOptions` is the shorthand for the same socket.
        let opts = eddy::net::ListenOptions::new().backlog(5).reuse_port(true);
        let c = TcpListener::bind_with("127.0.0.1:0", &opts).await.unwrap();
        assert_eq!(listen_backlog(&c), 5);
    });
}

/// `SO_REUSEADDR` lets a new listener take a port that connections of an old one still
/// use (a restarting server); without it the bind fails with `AddrInUse`.
#[test]
fn tcp_socket_reuseaddr_rebinds_a_port_still_in_use() {
    block_on_within(rt(2), PATIENCE, async {
        let old = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = old.local_addr().unwrap();
        let client = TcpStream::connect(addr).await.unwrap();
        let (server_side, _) = old.accept().await.unwrap();
        drop(old); // the connection keeps using the port

        let plain = TcpSocket::new_v4().unwrap();
        assert!(!plain.reuseaddr().unwrap());
        assert_eq!(plain.bind(addr).unwrap_err().kind(), ErrorKind::AddrInUse);

        let socket = TcpSocket::new_v4().unwrap();
        socket.set_reuseaddr(true).unwrap();
        assert!(socket.reuseaddr().unwrap());
        socket.bind(addr).unwrap();
        let new = socket.listen(16).unwrap();
        let c2 = TcpStream::connect(addr).await.unwrap();
        let (s2, _) = new.accept().await.unwrap();
        c2.write_all(b"new").await.unwrap();
        let mut buf = [0u8; 3];
        s2.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"new");
        drop((client, server_side));
    });
}

/// Options set on a listening `TcpSocket` are inherited by the connections it accepts.
#[test]
fn accepted_connections_inherit_the_listeners_options() {
    block_on_within(rt(2), PATIENCE, async {
        let k = TcpKeepalive::new()
            .with_idle(Duration::from_secs(45))
            .with_interval(Duration::from_secs(6))
            .with_retries(3);
        let socket = TcpSocket::new_v4().unwrap();
        socket.set_keepalive(Some(k)).unwrap();
        assert_eq!(socket.keepalive().unwrap(), Some(k));
        socket.set_recv_buffer_size(48 * 1024).unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener = socket.listen(16).unwrap();
        let _client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (s, _) = listener.accept().await.unwrap();
        assert_eq!(s.keepalive().unwrap(), Some(k));
        assert!(s.recv_buffer_size().unwrap() >= 48 * 1024);
    });
}

/// Host names resolve (`localhost` to loopback addresses with the port given), literals
/// come back as they are.
#[test]
fn lookup_host_resolves_names_and_literals() {
    block_on_within(rt(1), PATIENCE, async {
        let addrs: Vec<SocketAddr> = lookup_host("localhost:0").await.unwrap().collect();
        assert!(!addrs.is_empty());
        assert!(
            addrs.iter().all(|a| a.ip().is_loopback() && a.port() == 0),
            "{addrs:?}"
        );
        let addrs: Vec<_> = lookup_host(("localhost", 8080)).await.unwrap().collect();
        assert!(addrs.iter().all(|a| a.port() == 8080), "{addrs:?}");

        let v4: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let got: Vec<_> = lookup_host("127.0.0.1:8080").await.unwrap().collect();
        assert_eq!(got, [v4]);
        let got: Vec<_> = lookup_host("[::1]:443").await.unwrap().collect();
        assert_eq!(got, ["[::1]:443".parse::<SocketAddr>().unwrap()]);
        let got: Vec<_> = lookup_host(v4).await.unwrap().collect();
        assert_eq!(got, [v4]);
    });
}

/// Bad input is a clear error, never a panic: a name that does not exist (`.invalid` is
/// reserved never to resolve), a missing port, a port that is not a number.
#[test]
fn lookup_host_reports_bad_names_as_errors() {
    block_on_within(rt(1), PATIENCE, async {
        let err = lookup_host("nonexistent.invalid:80").await.err().unwrap();
        assert!(
            err.to_string().contains("nonexistent.invalid:80"),
            "the error does not name what was looked up: {err}"
        );
        let err = lookup_host("localhost").await.err().unwrap();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(err.to_string().contains("host:port"), "{err}");
        let err = lookup_host("localhost:http").await.err().unwrap();
        assert!(err.to_string().contains("localhost:http"), "{err}");
    });
}

/// A one-worker runtime whose blocking pool has a single thread, and no spare workers: a
/// task that is not running on the pool can only run on that one worker.
fn one_worker_one_pool_thread() -> eddy::Runtime {
    eddy::Builder::new()
        .workers(1)
        .spare_workers(0)
        .max_blocking_threads(1)
        .build()
        .unwrap()
}

/// `lookup_host` resolves on the blocking pool, not on the worker: while the pool's only
/// thread is held, a lookup waits, and the single worker runs another task meanwhile; that
/// task releases the pool, and only then does the lookup finish. A lookup run inline on the
/// worker would have finished before the other task ever ran.
#[test]
fn lookup_host_runs_off_the_worker() {
    block_on_within(one_worker_one_pool_thread(), PATIENCE, async {
        let (release, released) = mpsc::channel::<()>();
        // Takes the pool's only thread; jobs queued after it wait (the queue is FIFO).
        let holder = eddy::spawn_blocking(move || {
            let _ = released.recv();
        });
        let task = eddy::spawn(async move {
            let resolved = Arc::new(AtomicBool::new(false));
            let seen = resolved.clone();
            // Runs on the same worker, once this task has given the worker up.
            let other = eddy::spawn(async move {
                let resolved_already = seen.load(Ordering::SeqCst);
                drop(release);
                resolved_already
            });
            let addrs: Vec<_> = lookup_host("localhost:0").await.unwrap().collect();
            resolved.store(true, Ordering::SeqCst);
            (addrs, other.await.unwrap())
        });
        let (addrs, resolved_before_the_other_task_ran) = task.await.unwrap();
        assert!(
            !resolved_before_the_other_task_ran,
            "the lookup finished on the worker, without the blocking pool"
        );
        assert!(addrs.iter().all(|a| a.ip().is_loopback()), "{addrs:?}");
        holder.await.unwrap();
    });
}

/// A literal address needs no pool thread: it resolves while the pool's only thread is
/// held.
#[test]
fn lookup_host_of_a_literal_skips_the_pool() {
    block_on_within(one_worker_one_pool_thread(), PATIENCE * 2, async {
        let (release, released) = mpsc::channel::<()>();
        let holder = eddy::spawn_blocking(move || {
            let _ = released.recv();
        });
        let got =
            eddy::spawn(async { eddy::time::timeout(PATIENCE, lookup_host("10.1.2.3:99")).await })
                .await
                .unwrap();
        drop(release);
        holder.await.unwrap();
        let got: Vec<_> = got
            .expect("a literal address waited for the blocking pool")
            .unwrap()
            .collect();
        assert_eq!(got, ["10.1.2.3:99".parse::<SocketAddr>().unwrap()]);
    });
}

/// `AsFd`/`AsRawFd` give the socket's own descriptor, for options eddy does not wrap: what
/// is set through it is what eddy's getters read, the listener's address is the one it
/// reports, and the raw and borrowed forms agree.
#[test]
fn tcp_sockets_lend_their_descriptor() {
    use socket2::SockRef;
    use std::os::fd::AsFd;
    block_on_within(rt(2), PATIENCE, async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let by_fd = SockRef::from(&listener).local_addr().unwrap();
        assert_eq!(by_fd.as_socket(), Some(listener.local_addr().unwrap()));
        assert_eq!(listener.as_raw_fd(), listener.as_fd().as_raw_fd());

        let (client, server) = pair().await;
        for (stream, on) in [(&client, true), (&server, false)] {
            SockRef::from(stream).set_tcp_nodelay(on).unwrap();
            assert_eq!(stream.nodelay().unwrap(), on);
            assert_eq!(stream.as_raw_fd(), stream.as_fd().as_raw_fd());
        }
        assert_ne!(client.as_raw_fd(), server.as_raw_fd());
    });
}
