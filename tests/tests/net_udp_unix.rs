//! UDP and Unix domain sockets.

use std::pin::pin;

use eddy::net::{UdpSocket, UnixDatagram, UnixListener, UnixStream};
use eddy_tests::run;
use futures_lite::future::poll_once;

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("eddy-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// UDP datagrams arrive whole with their sender's address, unconnected and connected.
#[test]
fn udp_send_to_recv_from_and_connected() {
    run(async {
        let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        for i in 0..100u32 {
            a.send_to(&i.to_le_bytes(), ba).await.unwrap();
            let mut buf = [0u8; 8];
            let (n, from) = b.recv_from(&mut buf).await.unwrap();
            assert_eq!((n, from, &buf[..4]), (4, aa, &i.to_le_bytes()[..]));
        }
        a.connect(ba).await.unwrap();
        b.connect(aa).await.unwrap();
        assert_eq!(a.peer_addr().unwrap(), ba);
        a.send(b"connected").await.unwrap();
        let mut buf = [0u8; 16];
        let n = b.recv(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"connected");
    });
}

/// A `recv_from` that found nothing waits, and completes when a datagram arrives later.
#[test]
fn udp_recv_waits_for_a_datagram() {
    run(async {
        let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = a.local_addr().unwrap();
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut buf = [0u8; 8];
        let (n, from) = {
            let mut recv = pin!(a.recv_from(&mut buf));
            assert!(
                poll_once(recv.as_mut()).await.is_none(),
                "recv_from completed with nothing sent"
            );
            // Sent only now that the receiver is waiting.
            sender.send_to(b"late", addr).unwrap();
            recv.await.unwrap()
        };
        assert_eq!(&buf[..n], b"late");
        assert_eq!(from, sender.local_addr().unwrap());
    });
}

/// Unix streams: a listener accepts and echoes; a pair's write half, dropped, gives EOF to
/// the peer while the other direction still works.
#[test]
fn unix_stream_listener_and_pair() {
    let dir = temp_dir("stream");
    let path = dir.join("s.sock");
    run(async move {
        let listener = UnixListener::bind(&path).unwrap();
        let server = eddy::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf).await.unwrap();
            s.write_all(&buf).await.unwrap();
        });
        let c = UnixStream::connect(&path).await.unwrap();
        c.write_all(b"unix!").await.unwrap();
        let mut buf = [0u8; 5];
        c.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"unix!");
        server.await.unwrap();

        let (a, b) = UnixStream::pair().unwrap();
        let (ra, wa) = a.into_split();
        wa.write_all(b"half").await.unwrap();
        drop(wa); // shuts down the write side: b sees EOF after the data
        let mut got = Vec::new();
        let mut buf = [0u8; 8];
        loop {
            match b.read(&mut buf).await.unwrap() {
                0 => break,
                n => got.extend_from_slice(&buf[..n]),
            }
        }
        assert_eq!(got, b"half");
        b.write_all(b"back").await.unwrap();
        let mut buf = [0u8; 4];
        let mut n = 0;
        while n < 4 {
            n += ra.read(&mut buf[n..]).await.unwrap();
        }
        assert_eq!(&buf, b"back");
    });
    std::fs::remove_dir_all(dir).unwrap();
}

/// Unix datagrams arrive whole: bound (with the sender's path), from a pair, and from an
/// unbound socket connected to a bound one.
#[test]
fn unix_datagrams() {
    let dir = temp_dir("dgram");
    let (pa, pb) = (dir.join("a.sock"), dir.join("b.sock"));
    run(async move {
        let a = UnixDatagram::bind(&pa).unwrap();
        let b = UnixDatagram::bind(&pb).unwrap();
        a.send_to(b"to b", &pb).await.unwrap();
        let mut buf = [0u8; 8];
        let (n, from) = b.recv_from(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"to b");
        assert_eq!(from.as_pathname(), Some(pa.as_path()));

        let (x, y) = UnixDatagram::pair().unwrap();
        x.send(b"pair").await.unwrap();
        let n = y.recv(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"pair");

        let u = UnixDatagram::unbound().unwrap();
        u.connect(&pa).unwrap();
        u.send(b"unbound").await.unwrap();
        let n = a.recv(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"unbound");
    });
    std::fs::remove_dir_all(dir).unwrap();
}

/// `AsFd`/`AsRawFd` on UDP and Unix sockets give each socket's own descriptor: its type
/// and address read through it are the socket's, and the raw and borrowed forms agree.
#[test]
fn udp_and_unix_sockets_lend_their_descriptor() {
    use socket2::{SockRef, Type};
    use std::os::fd::{AsFd, AsRawFd};
    run(async {
        let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let by_fd = SockRef::from(&udp);
        assert_eq!(by_fd.r#type().unwrap(), Type::DGRAM);
        let addr = by_fd.local_addr().unwrap();
        assert_eq!(addr.as_socket(), Some(udp.local_addr().unwrap()));
        assert_eq!(udp.as_raw_fd(), udp.as_fd().as_raw_fd());

        let dir = temp_dir("lend");
        let path = dir.join("sock");
        let listener = UnixListener::bind(&path).unwrap();
        let by_fd = SockRef::from(&listener).local_addr().unwrap();
        assert_eq!(by_fd.as_pathname(), Some(path.as_path()));
        assert_eq!(listener.as_raw_fd(), listener.as_fd().as_raw_fd());

        let (a, b) = UnixStream::pair().unwrap();
        assert_eq!(SockRef::from(&a).r#type().unwrap(), Type::STREAM);
        assert_ne!(a.as_raw_fd(), b.as_raw_fd());
        assert_eq!(b.as_raw_fd(), b.as_fd().as_raw_fd());

        let (c, d) = UnixDatagram::pair().unwrap();
        assert_eq!(SockRef::from(&c).r#type().unwrap(), Type::DGRAM);
        assert_ne!(c.as_raw_fd(), d.as_raw_fd());
        assert_eq!(d.as_raw_fd(), d.as_fd().as_raw_fd());
        drop(listener);
        let _ = std::fs::remove_dir_all(&dir);
    });
}
