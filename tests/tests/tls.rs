//! The HTTPS server of `crates/eddy/examples/https_server/` (futures-rustls over eddy's
//! streams, hyper over that), run in-process on an eddy runtime and driven by rustls
//! clients that trust its self-signed certificate: futures-rustls on eddy (HTTP/1.1 by hand,
//! HTTP/2 by hyper), and a blocking `rustls::StreamOwned` on a plain thread. Also what a
//! server on the internet meets: clients that do not trust it, speak plain HTTP to it, or
//! never finish a handshake, and a shutdown with a request in flight.

// The example's modules, compiled here as they are there.
#[path = "../../crates/eddy/examples/https_server/hyper_io.rs"]
mod hyper_io;
#[path = "../../crates/eddy/examples/https_server/server.rs"]
mod server;

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use futures_rustls::rustls;
use futures_rustls::TlsConnector;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode};
use rustls::pki_types::{CertificateDer, ServerName};

use eddy::hyper::{EddyExecutor, EddyTimer};
use eddy::net::TcpStream;
use eddy_tests::{wait_until, with_deadline, ServerThread, PATIENCE};

use hyper_io::FuturesIo;

/// Long enough for a broken server to fail a test instead of hanging it.
const LIMIT: Duration = Duration::from_secs(120);

/// A body larger than a TLS record, rustls's buffers and the sockets' buffers, so that it
/// crosses many records, reads and writes in both directions.
const BIG: usize = 1 << 20;

/// The example's server on an [`eddy_tests::ServerThread`], with a certificate made for this
/// run.
struct TestServer {
    server: ServerThread<server::Served>,
    addr: SocketAddr,
    cert: CertificateDer<'static>,
}

impl TestServer {
    fn start(options: server::Options) -> TestServer {
        let (identity, _pem) = server::Identity::self_signed(server::LOCAL_NAMES).unwrap();
        TestServer::start_with(identity, options)
    }

    /// A server presenting `identity`.
    fn start_with(identity: server::Identity, options: server::Options) -> TestServer {
        let cert = identity.chain[0].clone();
        let acceptor = server::tls_acceptor(identity).unwrap();
        let server = ServerThread::start(move |listener, shutdown| async move {
            server::serve(listener, acceptor, options, shutdown)
                .await
                .unwrap()
        });
        TestServer {
            addr: server.addr(),
            server,
            cert,
        }
    }

    fn with_defaults() -> TestServer {
        TestServer::start(server::Options::default())
    }

    /// Begins shutdown and returns at once.
    fn begin_stop(&mut self) {
        self.server.begin_stop();
    }

    /// Shuts the server down and returns what `serve` reports.
    fn stop(self) -> server::Served {
        self.server.stop()
    }
}

/// A client configuration on the `ring` provider that trusts `cert` only, offers `alpn`,
/// and speaks only TLS 1.2 when `tls12_only`.
fn client_config(
    cert: &CertificateDer<'static>,
    alpn: &[&[u8]],
    tls12_only: bool,
) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.clone()).unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(
        rustls::crypto::ring::default_provider().into(),
    );
    let builder = if tls12_only {
        builder.with_protocol_versions(&[&rustls::version::TLS12])
    } else {
        builder.with_safe_default_protocol_versions()
    };
    let mut config = builder
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

fn name(name: &str) -> ServerName<'static> {
    ServerName::try_from(name.to_string()).unwrap()
}

/// A TLS connection from this eddy runtime to `addr`, checked as `server_name`.
async fn connect(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    server_name: &str,
) -> io::Result<futures_rustls::client::TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    TlsConnector::from(config)
        .connect(name(server_name), tcp)
        .await
}

/// The head of an HTTP/1 response (status line and headers, lower-cased) and how far into
/// `bytes` its body begins, once `bytes` holds all of the head.
fn parse_head(bytes: &[u8]) -> Option<(String, usize)> {
    let end = bytes.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8(bytes[..end].to_vec()).expect("a head in ASCII");
    Some((head.to_ascii_lowercase(), end))
}

/// The `content-length` of a parsed head; the server's routes all have one (their bodies'
/// sizes are known), and a test that reads one body of several on a connection needs it.
fn content_length(head: &str) -> usize {
    head.lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .expect("a content-length header")
        .trim()
        .parse()
        .unwrap()
}

/// Sends `request` (one whole HTTP/1 request) and reads the response to it.
async fn exchange<S>(tls: &mut S, request: &[u8]) -> (String, Vec<u8>)
where
    S: futures_io::AsyncRead + futures_io::AsyncWrite + Unpin,
{
    tls.write_all(request).await.unwrap();
    tls.flush().await.unwrap();
    read_response(tls).await
}

/// Reads one HTTP/1 response from `tls`: its head and its body.
async fn read_response<R: futures_io::AsyncRead + Unpin>(tls: &mut R) -> (String, Vec<u8>) {
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    let (head, at) = loop {
        if let Some(parsed) = parse_head(&bytes) {
            break parsed;
        }
        let n = tls.read(&mut chunk).await.expect("read a response head");
        assert!(n > 0, "the connection closed inside a response head");
        bytes.extend_from_slice(&chunk[..n]);
    };
    let mut body = bytes.split_off(at);
    let len = content_length(&head);
    let mut rest = vec![0u8; len - body.len()];
    tls.read_exact(&mut rest)
        .await
        .expect("read a response body");
    body.extend_from_slice(&rest);
    (head, body)
}

/// The blocking version of [`read_response`].
fn read_response_blocking(tls: &mut impl Read) -> (String, Vec<u8>) {
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    let (head, at) = loop {
        if let Some(parsed) = parse_head(&bytes) {
            break parsed;
        }
        let n = tls.read(&mut chunk).expect("read a response head");
        assert!(n > 0, "the connection closed inside a response head");
        bytes.extend_from_slice(&chunk[..n]);
    };
    let mut body = bytes.split_off(at);
    let mut rest = vec![0u8; content_length(&head) - body.len()];
    tls.read_exact(&mut rest).expect("read a response body");
    body.extend_from_slice(&rest);
    (head, body)
}

fn big_body() -> Vec<u8> {
    (0..BIG).map(|i| (i * 7 % 251) as u8).collect()
}

/// A trusted client on eddy speaks HTTP/1.1 over futures-rustls: TLS 1.3, ALPN `http/1.1`
/// when it offers only that, `GET /` and a 404 on one keep-alive connection, and, after a
/// `Connection: close` request, a clean end of the stream (`close_notify`, which rustls
/// requires before it reports the end).
#[test]
fn an_eddy_client_talks_http1_over_tls() {
    with_deadline(LIMIT, || {
        let server = TestServer::with_defaults();
        let config = client_config(&server.cert, &[b"http/1.1"], false);
        let rt = eddy_tests::rt(2);
        rt.block_on(async {
            let mut tls = connect(server.addr, config, "localhost").await.unwrap();
            let session = tls.get_ref().1;
            assert_eq!(
                session.protocol_version(),
                Some(rustls::ProtocolVersion::TLSv1_3)
            );
            assert_eq!(session.alpn_protocol(), Some(&b"http/1.1"[..]));

            let (head, body) =
                exchange(&mut tls, b"GET / HTTP/1.1\r\nhost: localhost\r\n\r\n").await;
            assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
            assert_eq!(body, b"hello, world\n");

            let (head, body) = exchange(
                &mut tls,
                b"GET /nothing HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n",
            )
            .await;
            assert!(head.starts_with("http/1.1 404 not found\r\n"), "{head}");
            assert!(body.is_empty());
            let mut after = Vec::new();
            tls.read_to_end(&mut after)
                .await
                .expect("a clean end of the TLS stream (close_notify)");
            assert!(after.is_empty());
        });
        let served = server.stop();
        assert_eq!((served.connections, served.failed_handshakes), (1, 0));
        assert_eq!(served.cut_off, 0);
    });
}

/// A socket for a blocking TLS client whose writes are handed to a thread of their own, so
/// that the client can send a whole large request before it reads: with both on one
/// thread, the echo of the request's start would fill the socket buffers and the server
/// would stop reading, while the client still writes (a deadlock whose onset depends on
/// buffer sizes). Reads give up after [`PATIENCE`].
struct Duplex {
    socket: std::net::TcpStream,
    writes: Option<mpsc::Sender<Vec<u8>>>,
    writer: Option<std::thread::JoinHandle<io::Result<()>>>,
}

impl Duplex {
    fn connect(addr: SocketAddr) -> Duplex {
        let socket = std::net::TcpStream::connect(addr).unwrap();
        socket.set_read_timeout(Some(PATIENCE)).unwrap();
        socket.set_write_timeout(Some(PATIENCE)).unwrap();
        let mut out = socket.try_clone().unwrap();
        let (writes, queued) = mpsc::channel::<Vec<u8>>();
        let writer = std::thread::spawn(move || {
            for bytes in queued {
                out.write_all(&bytes)?;
            }
            Ok(())
        });
        Duplex {
            socket,
            writes: Some(writes),
            writer: Some(writer),
        }
    }
}

impl Read for Duplex {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.socket.read(buf)
    }
}

impl Write for Duplex {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let writes = self.writes.as_ref().expect("the writer is open");
        writes
            .send(buf.to_vec())
            .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for Duplex {
    fn drop(&mut self) {
        self.writes.take();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// A blocking `rustls::StreamOwned` client on a plain thread, TLS 1.2 only, offering no
/// ALPN and checking the certificate's IP address: a 1 MiB body is echoed whole, and the
/// stream ends with `close_notify`.
#[test]
fn a_blocking_rustls_client_gets_a_large_body_echoed() {
    with_deadline(LIMIT, || {
        let server = TestServer::with_defaults();
        let config = client_config(&server.cert, &[], true);
        let addr = server.addr;
        let client = std::thread::spawn(move || {
            let session = rustls::ClientConnection::new(config, name("127.0.0.1")).unwrap();
            let mut tls = rustls::StreamOwned::new(session, Duplex::connect(addr));
            let big = big_body();
            let head = format!(
                "POST /echo HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n",
                big.len()
            );
            tls.write_all(head.as_bytes()).unwrap();
            tls.write_all(&big).unwrap();
            tls.flush().unwrap();
            assert_eq!(
                tls.conn.protocol_version(),
                Some(rustls::ProtocolVersion::TLSv1_2)
            );
            assert_eq!(tls.conn.alpn_protocol(), None);
            let (head, body) = read_response_blocking(&mut tls);
            assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
            assert!(body == big, "the echoed body differs");
            let mut after = Vec::new();
            tls.read_to_end(&mut after)
                .expect("a clean end of the TLS stream (close_notify)");
            assert!(after.is_empty());
        });
        client.join().expect("the blocking client failed");
        let served = server.stop();
        assert_eq!((served.connections, served.failed_handshakes), (1, 0));
    });
}

/// A client offering `h2` by ALPN gets HTTP/2: hyper's HTTP/2 client over the TLS stream
/// (through the example's adapter) gets `GET /` and a 1 MiB echo, on two streams at once.
#[test]
fn alpn_h2_gives_http2() {
    with_deadline(LIMIT, || {
        let server = TestServer::with_defaults();
        let config = client_config(&server.cert, &[b"h2", b"http/1.1"], false);
        let rt = eddy_tests::rt(2);
        rt.block_on(async {
            let tls = connect(server.addr, config, "localhost").await.unwrap();
            assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
            let (sender, conn) = hyper::client::conn::http2::Builder::new(EddyExecutor)
                .timer(EddyTimer)
                .handshake::<_, Full<Bytes>>(FuturesIo::new(tls))
                .await
                .unwrap();
            let conn = eddy::spawn(conn);

            let request = |method: Method, path: &str, body: Vec<u8>| {
                Request::builder()
                    .method(method)
                    .uri(format!("https://localhost{path}"))
                    .body(Full::new(Bytes::from(body)))
                    .unwrap()
            };
            let big = big_body();
            let mut hello = sender.clone();
            let hello = eddy::spawn(async move {
                let response = hello
                    .send_request(request(Method::GET, "/", Vec::new()))
                    .await
                    .unwrap();
                assert_eq!(response.version(), hyper::Version::HTTP_2);
                assert_eq!(response.status(), StatusCode::OK);
                response.into_body().collect().await.unwrap().to_bytes()
            });
            let mut echo = sender;
            let echoed = echo
                .send_request(request(Method::POST, "/echo", big.clone()))
                .await
                .unwrap();
            assert_eq!(echoed.version(), hyper::Version::HTTP_2);
            assert_eq!(echoed.status(), StatusCode::OK);
            let echoed = echoed.into_body().collect().await.unwrap().to_bytes();
            assert!(echoed == big, "the echoed body differs");
            assert_eq!(hello.await.unwrap(), "hello, world\n");
            // The last sender gone, the client closes its side of the connection.
            drop(echo);
            conn.await
                .unwrap()
                .expect("the HTTP/2 connection ends cleanly");
        });
        let served = server.stop();
        assert_eq!((served.connections, served.failed_handshakes), (1, 0));
    });
}

/// A client that does not trust the certificate (it trusts another one, say from an earlier
/// run) fails its handshake with rustls's certificate error; the server logs and counts the
/// failure, and serves the next client.
#[test]
fn a_client_that_does_not_trust_the_certificate_fails_and_the_server_goes_on() {
    with_deadline(LIMIT, || {
        let server = TestServer::with_defaults();
        let (other, _) = server::Identity::self_signed(server::LOCAL_NAMES).unwrap();
        let distrustful = client_config(&other.chain[0], &[], false);
        let trusting = client_config(&server.cert, &[], false);
        let rt = eddy_tests::rt(2);
        rt.block_on(async {
            let e = connect(server.addr, distrustful, "localhost")
                .await
                .expect_err("a handshake with an untrusted certificate succeeded");
            let tls_error = e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                .unwrap_or_else(|| panic!("not a rustls error: {e:?}"));
            assert!(
                matches!(tls_error, rustls::Error::InvalidCertificate(_)),
                "not a certificate error: {tls_error:?}"
            );

            let mut tls = connect(server.addr, trusting, "localhost").await.unwrap();
            let (head, body) =
                exchange(&mut tls, b"GET / HTTP/1.1\r\nhost: localhost\r\n\r\n").await;
            assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
            assert_eq!(body, b"hello, world\n");
        });
        let served = server.stop();
        assert_eq!((served.connections, served.failed_handshakes), (2, 1));
        assert_eq!(served.cut_off, 0);
    });
}

/// Plain HTTP sent to the TLS port fails the handshake: the server answers no HTTP (at most
/// a TLS alert), closes that connection, and serves the next client.
#[test]
fn plain_http_to_the_tls_port_is_refused_and_the_server_goes_on() {
    with_deadline(LIMIT, || {
        let server = TestServer::with_defaults();
        let mut plain = std::net::TcpStream::connect(server.addr).unwrap();
        plain.set_read_timeout(Some(PATIENCE)).unwrap();
        plain
            .write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\n\r\n")
            .unwrap();
        let mut reply = Vec::new();
        match plain.read_to_end(&mut reply) {
            Ok(_) => {}
            // Closing with our request unread is a reset, not a FIN: as good an end.
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
            Err(e) => panic!("the server did not close the connection: {e}"),
        }
        assert!(
            !reply.starts_with(b"HTTP/"),
            "an HTTP answer on the TLS port"
        );
        // A TLS alert record, if anything came back.
        assert!(reply.is_empty() || reply[0] == 0x15, "{reply:?}");

        let config = client_config(&server.cert, &[], false);
        let rt = eddy_tests::rt(2);
        rt.block_on(async {
            let mut tls = connect(server.addr, config, "localhost").await.unwrap();
            let (head, _) = exchange(&mut tls, b"GET / HTTP/1.1\r\nhost: localhost\r\n\r\n").await;
            assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
        });
        let served = server.stop();
        assert_eq!((served.connections, served.failed_handshakes), (2, 1));
        assert_eq!(served.cut_off, 0);
    });
}

/// A client that connects and never sends its half of the handshake is disconnected once
/// the handshake timeout passes, and the server counts it as a failed handshake.
#[test]
fn a_client_that_never_completes_its_handshake_is_disconnected() {
    with_deadline(LIMIT, || {
        let server = TestServer::start(server::Options {
            handshake_timeout: Duration::from_millis(100),
            ..server::Options::default()
        });
        let mut silent = std::net::TcpStream::connect(server.addr).unwrap();
        silent.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut reply = Vec::new();
        silent
            .read_to_end(&mut reply)
            .expect("the server did not close a connection that never began its handshake");
        assert!(reply.is_empty());
        let served = server.stop();
        assert_eq!((served.connections, served.failed_handshakes), (1, 1));
        assert_eq!(served.cut_off, 0);
    });
}

/// A client that never completes its handshake holds up no one (the handshake runs in the
/// connection's own task, not in the accept loop), and shutdown does not wait for it.
#[test]
fn a_silent_client_holds_up_no_one_and_shutdown_drops_it() {
    with_deadline(LIMIT, || {
        // A handshake timeout longer than the test: only shutdown can end the silent one.
        let server = TestServer::start(server::Options {
            handshake_timeout: LIMIT * 2,
            ..server::Options::default()
        });
        let mut silent = std::net::TcpStream::connect(server.addr).unwrap();
        silent.set_read_timeout(Some(PATIENCE)).unwrap();

        let config = client_config(&server.cert, &[], false);
        let rt = eddy_tests::rt(2);
        rt.block_on(async {
            let mut tls = connect(server.addr, config, "localhost").await.unwrap();
            let (head, _) = exchange(
                &mut tls,
                b"GET / HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n",
            )
            .await;
            assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
        });

        let served = server.stop();
        assert_eq!(served.connections, 2);
        assert_eq!(served.cut_off, 0, "shutdown waited out a pending handshake");
        let mut reply = Vec::new();
        silent
            .read_to_end(&mut reply)
            .expect("shutdown left the silent connection open");
        assert!(reply.is_empty());
    });
}

/// Shutdown with a request in flight over TLS: once the server refuses new connections,
/// the rest of a request's body still reaches it, the whole echo comes back, and the
/// connection then ends cleanly (`close_notify`) with nothing cut off.
#[test]
fn shutdown_lets_a_request_in_flight_finish() {
    with_deadline(LIMIT, || {
        let mut server = TestServer::start(server::Options {
            // Longer than the test: a request cut off at the grace fails it, not passes it.
            grace: LIMIT * 2,
            ..server::Options::default()
        });
        let config = client_config(&server.cert, &[], false);
        let addr = server.addr;
        let rt = eddy_tests::rt(2);
        let (mut tls, mut body) = rt.block_on(async {
            let mut tls = connect(addr, config, "localhost").await.unwrap();
            tls.write_all(
                b"POST /echo HTTP/1.1\r\nhost: localhost\r\ncontent-length: 10\r\n\r\nfirst",
            )
            .await
            .unwrap();
            tls.flush().await.unwrap();
            // The echo's head comes as soon as the handler has the request: it is in flight.
            let mut bytes = Vec::new();
            let mut chunk = [0u8; 4096];
            while parse_head(&bytes).is_none() {
                let n = tls.read(&mut chunk).await.unwrap();
                assert!(n > 0, "the connection closed inside the response head");
                bytes.extend_from_slice(&chunk[..n]);
            }
            let (head, at) = parse_head(&bytes).unwrap();
            assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
            (tls, bytes.split_off(at))
        });

        server.begin_stop();
        // The listener is closed just before connections are told to finish, in one step
        // of the server's task: once connecting is refused, shutdown has begun.
        assert!(
            wait_until(PATIENCE, || std::net::TcpStream::connect(addr).is_err()),
            "the server went on accepting after shutdown began"
        );

        rt.block_on(async {
            tls.write_all(b"-last").await.unwrap();
            tls.flush().await.unwrap();
            let mut rest = Vec::new();
            eddy::time::timeout(PATIENCE, tls.read_to_end(&mut rest))
                .await
                .expect("the connection stayed open after its last response")
                .expect("a clean end of the TLS stream (close_notify)");
            body.extend_from_slice(&rest);
        });
        assert_eq!(body, b"first-last");
        let served = server.stop();
        assert_eq!(served.cut_off, 0);
    });
}

/// `--cert`/`--key`: a chain and key from PEM files (here made by rcgen, as a certificate
/// authority's would come) are served, and clients that trust that certificate get answers;
/// a certificate file with no certificate in it is refused with an error naming it.
#[test]
fn a_certificate_and_key_from_pem_files_are_served() {
    with_deadline(LIMIT, || {
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        let dir = std::env::temp_dir().join(format!("eddy-tls-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (chain, key) = (dir.join("chain.pem"), dir.join("key.pem"));
        std::fs::write(&chain, made.cert.pem()).unwrap();
        std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
        let loaded = server::Identity::from_pem_files(&chain, &key);
        let refused = server::Identity::from_pem_files(&key, &key);
        std::fs::remove_dir_all(&dir).unwrap();

        let e = refused.expect_err("a key file taken for a certificate chain");
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("key.pem"), "{e}");

        let loaded = loaded.unwrap();
        assert_eq!(loaded.chain, vec![made.cert.der().clone()]);
        let server = TestServer::start_with(loaded, server::Options::default());
        let config = client_config(&server.cert, &[], false);
        let rt = eddy_tests::rt(2);
        rt.block_on(async {
            let mut tls = connect(server.addr, config, "localhost").await.unwrap();
            let (head, body) =
                exchange(&mut tls, b"GET / HTTP/1.1\r\nhost: localhost\r\n\r\n").await;
            assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
            assert_eq!(body, b"hello, world\n");
        });
        let served = server.stop();
        assert_eq!((served.connections, served.failed_handshakes), (1, 0));
    });
}
