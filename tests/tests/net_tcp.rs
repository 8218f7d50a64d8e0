//! TCP on real sockets over 127.0.0.1: echo, many connections, a large transfer, half-close,
//! resets, socket options, asyncio's `sock_*` functions.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use eddy::net::{TcpListener, TcpStream};
use eddy_tests::{block_on_within, reset, rt, with_deadline, PATIENCE};

async fn echo_server() -> io::Result<std::net::SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    drop(eddy::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            drop(eddy::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            }));
        }
    }));
    Ok(addr)
}

/// 1,000 request/response round trips over one connection, with `TCP_NODELAY` set.
#[test]
fn echo_round_trips() {
    let rt = rt(2);
    block_on_within(rt, PATIENCE, async {
        let addr = echo_server().await.unwrap();
        let c = TcpStream::connect(addr).await.unwrap();
        c.set_nodelay(true).unwrap();
        assert!(c.nodelay().unwrap());
        assert_eq!(c.peer_addr().unwrap(), addr);
        for i in 0..1000u32 {
            let msg = i.to_le_bytes();
            c.write_all(&msg).await.unwrap();
            let mut back = [0u8; 4];
            c.read_exact(&mut back).await.unwrap();
            assert_eq!(back, msg);
        }
    });
}

/// 1,000 clients connect at once and each completes three echo round trips.
#[test]
fn a_thousand_concurrent_connections() {
    let rt = rt(2);
    let done = block_on_within(rt, PATIENCE * 2, async {
        let addr = echo_server().await.unwrap();
        let done = Arc::new(AtomicUsize::new(0));
        let clients: Vec<_> = (0..1000u32)
            .map(|i| {
                let done = done.clone();
                eddy::spawn(async move {
                    let c = TcpStream::connect(addr).await?;
                    for round in 0..3u32 {
                        let msg = [i.to_le_bytes(), round.to_le_bytes()].concat();
                        c.write_all(&msg).await?;
                        let mut back = [0u8; 8];
                        c.read_exact(&mut back).await?;
                        assert_eq!(&back[..], &msg[..]);
                    }
                    done.fetch_add(1, Ordering::SeqCst);
                    io::Result::Ok(())
                })
            })
            .collect();
        for c in clients {
            c.await.unwrap().unwrap();
        }
        done.load(Ordering::SeqCst)
    });
    assert_eq!(done, 1000);
}

/// FNV-1a, enough to catch lost, repeated or reordered bytes.
fn checksum(mut h: u64, data: &[u8]) -> u64 {
    for b in data {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// 100 MiB arrive complete, in order and unchanged (same length and checksum).
#[test]
fn hundred_megabytes_through_one_connection() {
    const TOTAL: usize = 100 * 1024 * 1024;
    let rt = rt(2);
    let (sent, received) = block_on_within(rt, PATIENCE * 4, async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let receiver = eddy::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 256 * 1024];
            let (mut n, mut h) = (0usize, 0xcbf2_9ce4_8422_2325u64);
            loop {
                let k = s.read(&mut buf).await.unwrap();
                if k == 0 {
                    break;
                }
                h = checksum(h, &buf[..k]);
                n += k;
            }
            (n, h)
        });
        let c = TcpStream::connect(addr).await.unwrap();
        let mut chunk = vec![0u8; 1024 * 1024];
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        let mut x = 1u32;
        for i in 0..TOTAL / chunk.len() {
            for b in chunk.iter_mut() {
                x = x
                    .wrapping_mul(1_664_525)
                    .wrapping_add(1_013_904_223 + i as u32);
                *b = (x >> 24) as u8;
            }
            h = checksum(h, &chunk);
            c.write_all(&chunk).await.unwrap();
        }
        c.shutdown(std::net::Shutdown::Write).unwrap();
        ((TOTAL, h), receiver.await.unwrap())
    });
    assert_eq!(sent, received);
}

/// After the client shuts its write side down, the server reads EOF and can still reply.
#[test]
fn half_close_keeps_the_other_direction() {
    let rt = rt(2);
    block_on_within(rt, PATIENCE, async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = eddy::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 100];
            loop {
                match s.read(&mut buf).await.unwrap() {
                    0 => break, // the client's FIN
                    n => got.extend_from_slice(&buf[..n]),
                }
            }
            // Our write side still works after the peer's half-close.
            s.write_all(b"reply after eof").await.unwrap();
            got
        });
        let c = TcpStream::connect(addr).await.unwrap();
        c.write_all(b"request").await.unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let mut reply = Vec::new();
        let mut buf = [0u8; 100];
        loop {
            match c.read(&mut buf).await.unwrap() {
                0 => break,
                n => reply.extend_from_slice(&buf[..n]),
            }
        }
        assert_eq!(server.await.unwrap(), b"request");
        assert_eq!(reply, b"reply after eof");
    });
}

/// A short read retires read readiness (it saves the read that would return `WouldBlock`),
/// but a FIN that arrived together with the last data raises no edge of its own: the reader
/// must still see the end of the stream. Each round first settles the connection into
/// request/response rhythm (so a short read may retire readiness), then sends data and FIN
/// back to back from a plain blocking client.
#[test]
fn eof_that_arrives_with_the_last_data_is_seen_after_a_short_read() {
    let rt = rt(2);
    block_on_within(rt, PATIENCE * 2, async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let rounds = 200;
        let client = std::thread::spawn(move || {
            use std::io::{Read, Write};
            for _ in 0..rounds {
                let mut c = std::net::TcpStream::connect(addr).unwrap();
                c.set_nodelay(true).unwrap();
                for _ in 0..3 {
                    c.write_all(b"ping").unwrap();
                    let mut reply = [0u8; 4];
                    c.read_exact(&mut reply).unwrap();
                }
                c.write_all(b"last").unwrap();
                c.shutdown(std::net::Shutdown::Write).unwrap();
                let mut rest = Vec::new();
                c.read_to_end(&mut rest).unwrap();
                assert_eq!(rest, b"bye");
            }
        });
        for round in 0..rounds {
            let (s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let mut got = Vec::new();
            loop {
                let n = eddy::time::timeout(PATIENCE, s.read(&mut buf))
                    .await
                    .unwrap_or_else(|_| panic!("round {round}: the FIN was never seen"))
                    .unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
                if got.ends_with(b"ping") {
                    s.write_all(b"pong").await.unwrap();
                }
            }
            assert!(got.ends_with(b"last"), "round {round}: {got:?}");
            s.write_all(b"bye").await.unwrap();
        }
        eddy::spawn_blocking(move || client.join().unwrap())
            .await
            .unwrap();
    });
}

/// A peer that resets the connection makes the next read fail with `ConnectionReset` and
/// the next write with `BrokenPipe` or `ConnectionReset`.
#[test]
fn peer_reset_is_an_error_on_the_next_read_and_write() {
    let rt = rt(2);
    block_on_within(rt, PATIENCE, async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let c = TcpStream::connect(addr).await.unwrap();
        let (s, _) = listener.accept().await.unwrap();
        c.write_all(b"unread").await.unwrap();
        reset(s);
        // The read waits for the RST if it has not arrived yet.
        let mut buf = [0u8; 16];
        let err = c.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionReset, "{err}");
        let err = c.write_all(b"more").await.unwrap_err();
        assert!(
            matches!(
                err.kind(),
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
            ),
            "{err}"
        );
    });
}

/// Connecting to a port nobody listens on fails with `ConnectionRefused`.
#[test]
fn connect_to_a_closed_port_is_refused() {
    let rt = rt(1);
    block_on_within(rt, PATIENCE, async {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let err = TcpStream::connect(addr).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused);
    });
}

/// A host name is resolved on the blocking pool, not on the worker that connects: the pool
/// starts its first thread for it (idle threads are kept for an hour here, so the count
/// only grows), while connecting to a literal address needs no pool thread.
#[test]
fn connect_resolves_host_names_on_the_blocking_pool() {
    let rt = Arc::new(
        eddy::Builder::new()
            .workers(1)
            .thread_keep_alive(Duration::from_secs(3600))
            .build()
            .unwrap(),
    );
    let metrics = rt.clone();
    with_deadline(PATIENCE, move || {
        rt.block_on(async move {
            let addr = echo_server().await.unwrap();
            // On the worker, as a task: resolution inline would run there.
            let by_addr = eddy::spawn(TcpStream::connect(addr)).await.unwrap();
            drop(by_addr.unwrap());
            assert_eq!(
                metrics.metrics().blocking_threads,
                0,
                "a literal address went through the pool"
            );
            // localhost may resolve to ::1 first; one of the addresses must work.
            let c = eddy::spawn(TcpStream::connect(("localhost", addr.port())))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(
                metrics.metrics().blocking_threads,
                1,
                "the host name was not resolved on the blocking pool"
            );
            c.write_all(b"x").await.unwrap();
            let mut b = [0u8; 1];
            c.read_exact(&mut b).await.unwrap();
            assert_eq!(&b, b"x");
        });
    });
}

/// The read and write halves of a split stream work from two tasks at once.
#[test]
fn owned_halves_work_from_two_tasks() {
    let rt = rt(2);
    block_on_within(rt, PATIENCE, async {
        let addr = echo_server().await.unwrap();
        let (r, w) = TcpStream::connect(addr).await.unwrap().into_split();
        let writer = eddy::spawn(async move {
            for i in 0..100u8 {
                w.write_all(&[i]).await.unwrap();
            }
            w // keep the write side open until the reader is done
        });
        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        while got.len() < 100 {
            let n = r.read(&mut buf).await.unwrap();
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, (0..100u8).collect::<Vec<_>>());
        drop(writer.await.unwrap());
    });
}

/// `TcpStream` works through the `futures-io` traits (write, read, close).
#[test]
fn futures_io_traits_are_implemented() {
    use futures_lite::{AsyncReadExt, AsyncWriteExt};
    let rt = rt(1);
    block_on_within(rt, PATIENCE, async {
        let addr = echo_server().await.unwrap();
        let mut c = TcpStream::connect(addr).await.unwrap();
        AsyncWriteExt::write_all(&mut c, b"traits").await.unwrap();
        let mut buf = [0u8; 6];
        AsyncReadExt::read_exact(&mut c, &mut buf).await.unwrap();
        assert_eq!(&buf, b"traits");
        c.close().await.unwrap();
    });
}

/// asyncio's `sock_accept`, `sock_connect`, `sock_recv` and `sock_sendall` work on
/// non-blocking std and socket2 sockets.
#[test]
fn sock_functions_over_std_sockets() {
    let rt = rt(2);
    block_on_within(rt, PATIENCE, async {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let accept = eddy::spawn(async move {
            let (s, _) = eddy::net::sock_accept(&listener).await.unwrap();
            let mut buf = [0u8; 5];
            let mut got = 0;
            while got < 5 {
                got += eddy::net::sock_recv(&s, &mut buf[got..]).await.unwrap();
            }
            eddy::net::sock_sendall(&s, &buf).await.unwrap();
        });
        let sock =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        sock.set_nonblocking(true).unwrap();
        eddy::net::sock_connect(&sock, addr).await.unwrap();
        let stream: std::net::TcpStream = sock.into();
        eddy::net::sock_sendall(&stream, b"hello").await.unwrap();
        let mut back = [0u8; 5];
        let mut got = 0;
        while got < 5 {
            got += eddy::net::sock_recv(&stream, &mut back[got..])
                .await
                .unwrap();
        }
        assert_eq!(&back, b"hello");
        accept.await.unwrap();
    });
}

/// The `sock_*` functions refuse blocking sockets with `InvalidInput`.
#[test]
fn sock_functions_reject_blocking_sockets() {
    let rt = rt(1);
    block_on_within(rt, PATIENCE, async {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let err = eddy::net::sock_accept(&listener).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(err.to_string(), "the socket must be non-blocking");
        let s = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 1];
        let err = eddy::net::sock_recv(&s, &mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        let err = eddy::net::sock_sendall(&s, b"x").await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    });
}

/// With `SO_REUSEPORT` two listeners bind the same port; without it the bind fails.
#[test]
fn reuse_port_lets_two_listeners_share_a_port() {
    use eddy::net::ListenOptions;
    let rt = rt(1);
    block_on_within(rt, PATIENCE, async {
        let opts = ListenOptions::new().reuse_port(true).backlog(16);
        let a = TcpListener::bind_with("127.0.0.1:0", &opts).await.unwrap();
        let b = TcpListener::bind_with(a.local_addr().unwrap(), &opts)
            .await
            .unwrap();
        assert_eq!(a.local_addr().unwrap(), b.local_addr().unwrap());
        // Without SO_REUSEPORT the second bind fails.
        let err = TcpListener::bind(a.local_addr().unwrap())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
    });
}
