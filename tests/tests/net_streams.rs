//! asyncio-style streams: readers, writers with water marks and a hard cap, transport errors
//! reaching the writer, and writers dropped without `close()`.

use std::io;
use std::pin::pin;

use eddy::net::{
    open_connection, start_server, IncompleteReadError, LimitOverrunError, StreamReader,
    StreamWriter, TcpListener, TcpStream, WriteBufferFull,
};
use eddy_tests::{reset, run};
use futures_lite::future::poll_once;

/// A connected (reader, writer) pair and the raw peer socket, which the test controls.
async fn pair() -> ((StreamReader, StreamWriter), TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let streams = open_connection(addr).await.unwrap();
    let (peer, _) = listener.accept().await.unwrap();
    (streams, peer)
}

/// `start_server` and `open_connection` exchange lines; `readline`, `readexactly` and
/// `readuntil` split them; after the client's FIN the server closes and `wait_closed` ends
/// with no active connection.
#[test]
fn server_and_client_exchange_lines() {
    run(async {
        let server = start_server("127.0.0.1:0", |mut r, w| async move {
            loop {
                let line = r.readline().await.unwrap();
                if line.is_empty() {
                    break;
                }
                w.write(&line.to_ascii_uppercase()).unwrap();
                w.drain().await.unwrap();
            }
            w.close().await.unwrap();
        })
        .await
        .unwrap();
        let (mut r, w) = open_connection(server.local_addr()).await.unwrap();
        for word in ["alpha\n", "beta\n", "gamma\n"] {
            w.write(word.as_bytes()).unwrap();
        }
        w.drain().await.unwrap();
        assert_eq!(r.readline().await.unwrap(), b"ALPHA\n");
        assert_eq!(r.readexactly(5).await.unwrap(), b"BETA\n");
        assert_eq!(r.readuntil(b"MA\n").await.unwrap(), b"GAMMA\n");
        w.close().await.unwrap();
        assert_eq!(
            r.readline().await.unwrap(),
            b"",
            "server closed after our FIN"
        );
        assert!(r.at_eof());
        server.close();
        server.wait_closed().await;
        assert_eq!(server.active_connections(), 0);
    });
}

/// `readexactly` and `readuntil` at EOF fail with `UnexpectedEof` carrying the partial data
/// (and, for `readexactly`, how much was expected).
#[test]
fn readexactly_and_readuntil_report_partial_data_at_eof() {
    run(async {
        let ((mut r, _w), peer) = pair().await;
        peer.write_all(b"no newline").await.unwrap();
        peer.shutdown(std::net::Shutdown::Write).unwrap();
        let err = r.readuntil(b"\n").await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        let inner = err
            .get_ref()
            .unwrap()
            .downcast_ref::<IncompleteReadError>()
            .unwrap();
        assert_eq!(
            (inner.partial.as_slice(), inner.expected),
            (&b"no newline"[..], None)
        );

        let ((mut r, _w), peer) = pair().await;
        peer.write_all(b"abc").await.unwrap();
        peer.shutdown(std::net::Shutdown::Write).unwrap();
        let err = r.readexactly(10).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        let inner = err
            .get_ref()
            .unwrap()
            .downcast_ref::<IncompleteReadError>()
            .unwrap();
        assert_eq!(
            (inner.partial.as_slice(), inner.expected),
            (&b"abc"[..], Some(10))
        );
        assert!(r.at_eof());
    });
}

/// A line longer than the limit is an `InvalidData` error; its bytes stay buffered and can
/// still be read.
#[test]
fn line_over_the_limit_is_an_error_that_keeps_the_data() {
    run(async {
        let ((mut r, _w), peer) = pair().await;
        r.set_limit(100);
        let long = vec![b'x'; 300];
        peer.write_all(&long).await.unwrap();
        peer.write_all(b"\nshort\n").await.unwrap();
        let err = r.readline().await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        let overrun = err
            .get_ref()
            .unwrap()
            .downcast_ref::<LimitOverrunError>()
            .unwrap();
        assert!(overrun.consumed > 100, "{overrun}");
        // The data was kept: it can still be read.
        let mut kept = Vec::new();
        while kept.len() < 301 {
            kept.extend(r.read(301 - kept.len()).await.unwrap());
        }
        assert_eq!(&kept[..300], &long[..]);
        assert_eq!(kept[300], b'\n');
        assert_eq!(r.readline().await.unwrap(), b"short\n");
    });
}

/// Writes 16 KiB chunks until `write` refuses; returns the error and how much was accepted.
fn fill(w: &StreamWriter, limit: usize) -> (Option<io::Error>, usize) {
    let chunk = vec![7u8; 16 * 1024];
    let mut accepted = 0;
    while accepted < limit {
        match w.write(&chunk) {
            Ok(()) => accepted += chunk.len(),
            Err(e) => return (Some(e), accepted),
        }
    }
    (None, accepted)
}

/// Writes until at least `min` bytes sit in the writer's own buffer (the kernel's socket
/// buffers fill first); returns how much `write` accepted.
fn fill_until_buffered(w: &StreamWriter, min: usize) -> usize {
    let chunk = vec![3u8; 16 * 1024];
    let mut accepted = 0;
    while w.write_buffer_size() < min {
        assert!(accepted < 256 * 1024 * 1024, "the kernel never pushed back");
        w.write(&chunk).unwrap();
        accepted += chunk.len();
    }
    accepted
}

/// A writer whose peer reads nothing refuses writes past its cap with `WriteBufferFull`.
#[test]
fn the_buffer_has_a_hard_cap() {
    run(async {
        let ((_r, w), _peer) = pair().await; // the peer never reads
        w.set_write_buffer_cap(256 * 1024);
        let (err, accepted) = fill(&w, 512 * 1024 * 1024);
        let err = err.expect("an undrained writer must hit its cap");
        assert_eq!(err.kind(), io::ErrorKind::Other);
        let full = err
            .get_ref()
            .unwrap()
            .downcast_ref::<WriteBufferFull>()
            .unwrap();
        assert_eq!(full.cap, 256 * 1024);
        assert!(err.to_string().contains("drain()"), "{err}");
        assert!(w.write_buffer_size() <= 256 * 1024);
        assert!(accepted < 512 * 1024 * 1024);
    });
}

/// `drain` waits while more than the high-water mark is buffered, and resumes once the
/// flusher has brought the buffer down to the low-water mark.
#[test]
fn drain_waits_above_high_water_until_low_water() {
    run(async {
        let ((_r, w), peer) = pair().await;
        w.set_write_buffer_limits(64 * 1024, 16 * 1024);
        w.set_write_buffer_cap(8 * 1024 * 1024);
        // Buffer far more than the high-water mark: with the peer reading nothing, the
        // flusher cannot bring it down to the mark, so `drain` must wait.
        let written = fill_until_buffered(&w, 1024 * 1024);
        let mut drain = pin!(w.drain());
        assert!(
            poll_once(drain.as_mut()).await.is_none(),
            "drain must wait while the peer reads nothing ({} buffered)",
            w.write_buffer_size()
        );
        let reader = eddy::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            let mut total = 0;
            while total < written {
                total += peer.read(&mut buf).await.unwrap();
            }
            total
        });
        drain.await.unwrap();
        assert!(
            w.write_buffer_size() <= 16 * 1024,
            "{}",
            w.write_buffer_size()
        );
        assert_eq!(reader.await.unwrap(), written);
    });
}

/// A reset while data is buffered fails the pending `drain` and the next `write`.
#[test]
fn a_reset_reaches_the_next_write_and_drain() {
    run(async {
        let ((_r, w), peer) = pair().await;
        w.set_write_buffer_cap(8 * 1024 * 1024);
        // Something buffered, so a flusher is running when the peer resets.
        fill_until_buffered(&w, 64 * 1024);
        reset(peer);
        // The flusher meets the error as soon as the socket reports it.
        let err = w.drain().await.unwrap_err();
        assert!(
            matches!(
                err.kind(),
                io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
            ),
            "{err}"
        );
        let err = w.write(b"more").unwrap_err();
        assert!(
            matches!(
                err.kind(),
                io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
            ),
            "{err}"
        );
    });
}

/// Once a reset has arrived, with nothing buffered, a write fails (the first one, or, if
/// the kernel still accepted it, the next), and so does `drain`.
#[test]
fn a_reset_with_an_empty_buffer_fails_the_next_write() {
    run(async {
        let ((mut r, w), peer) = pair().await;
        reset(peer);
        // The reader ends (with the reset, or at EOF) only once the RST has arrived.
        match r.read(16).await {
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "{e}"),
            Ok(data) => assert!(data.is_empty(), "{data:?}"),
        }
        // The first write after a reset may still be accepted by the kernel; the error is
        // then stored and returned by the very next call.
        let first = w.write(b"x");
        let second = w.write(b"y");
        let drain = w.drain().await;
        assert!(first.is_err() || second.is_err(), "{first:?} {second:?}");
        assert!(drain.is_err());
    });
}

/// Dropping a writer discards what it buffered and closes the connection: the peer gets at
/// most what the kernel already had, then EOF or a reset.
#[test]
fn a_dropped_writer_discards_its_buffer_and_closes() {
    run(async {
        let ((_r, w), peer) = pair().await;
        w.set_write_buffer_cap(8 * 1024 * 1024);
        let accepted = fill_until_buffered(&w, 256 * 1024);
        let buffered = w.write_buffer_size();
        drop(w);
        // The peer gets what the kernel already had, then EOF or a reset: never the
        // discarded backlog, and never a hang.
        let mut buf = vec![0u8; 64 * 1024];
        let mut total = 0;
        loop {
            match peer.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
        assert!(
            total <= accepted - buffered,
            "{total} > {accepted} - {buffered}"
        );
    });
}

/// `close` sends everything buffered, then FIN; writing afterwards fails with `NotConnected`.
#[test]
fn close_flushes_everything_then_sends_fin() {
    run(async {
        let ((_r, w), peer) = pair().await;
        w.set_write_buffer_cap(8 * 1024 * 1024);
        let accepted = fill_until_buffered(&w, 256 * 1024);
        let reader = eddy::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            let mut total = 0;
            loop {
                match peer.read(&mut buf).await.unwrap() {
                    0 => return total,
                    n => total += n,
                }
            }
        });
        w.close().await.unwrap();
        assert_eq!(reader.await.unwrap(), accepted);
        assert_eq!(
            w.write(b"late").unwrap_err().kind(),
            io::ErrorKind::NotConnected
        );
    });
}
