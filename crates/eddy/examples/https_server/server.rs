//! The server: its certificate, the TLS configuration, the accept loop, one task per
//! connection (TLS handshake, then HTTP/1.1 or HTTP/2 as ALPN chose), and graceful shutdown.

use std::future::{poll_fn, Future};
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use futures_rustls::rustls;
use futures_rustls::TlsAcceptor;
use http_body_util::{Either, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::{http1, http2};
use hyper::{Method, Request, Response, StatusCode};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use eddy::hyper::{EddyExecutor, EddyTimer};
use eddy::net::{TcpListener, TcpStream};

use super::hyper_io::FuturesIo;

/// The names a self-signed certificate is made for: what a client on this machine dials.
pub(crate) const LOCAL_NAMES: &[&str] = &["localhost", "127.0.0.1", "::1"];

/// ALPN protocols, in the server's order of preference; a client that offers neither (or
/// no ALPN at all) gets HTTP/1.1.
const ALPN: &[&[u8]] = &[b"h2", b"http/1.1"];

/// A pause after an accept error other than a peer giving up (out of descriptors): trying
/// again at once would only fail again at full speed.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(10);

/// How the server runs.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// How long a client may take to complete its TLS handshake once connected: a client
    /// that connects and sends nothing must not hold a connection for ever.
    pub(crate) handshake_timeout: Duration,
    /// HTTP/1 only: how long a client may take to send a request's head.
    pub(crate) header_read_timeout: Duration,
    /// How long shutdown waits for requests in flight.
    pub(crate) grace: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            grace: Duration::from_secs(10),
        }
    }
}

/// What a [`serve`] call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Served {
    /// Connections accepted.
    pub(crate) connections: u64,
    /// Connections whose TLS handshake failed or timed out (each one logged).
    pub(crate) failed_handshakes: u64,
    /// Connections still open when the grace ran out, closed with what they had in flight.
    pub(crate) cut_off: usize,
}

/// A certificate chain (leaf first) and its private key.
#[derive(Debug)]
pub(crate) struct Identity {
    pub(crate) chain: Vec<CertificateDer<'static>>,
    pub(crate) key: PrivateKeyDer<'static>,
}

impl Identity {
    /// A new self-signed certificate for `names` (DNS names or IP addresses) and a fresh
    /// ECDSA P-256 key, with the certificate's PEM for clients to trust (`curl --cacert`).
    pub(crate) fn self_signed(names: &[&str]) -> io::Result<(Identity, String)> {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let made = rcgen::generate_simple_self_signed(names).map_err(io::Error::other)?;
        let key = PrivatePkcs8KeyDer::from(made.signing_key.serialize_der());
        let identity = Identity {
            chain: vec![made.cert.der().clone()],
            key: key.into(),
        };
        Ok((identity, made.cert.pem()))
    }

    /// A chain and key from PEM files, as a certificate authority issues them.
    pub(crate) fn from_pem_files(chain: &Path, key: &Path) -> io::Result<Identity> {
        let bad = |path: &Path, e: rustls::pki_types::pem::Error| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        };
        let certs = CertificateDer::pem_file_iter(chain)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| bad(chain, e))?;
        if certs.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: no certificate in it", chain.display()),
            ));
        }
        let key = PrivateKeyDer::from_pem_file(key).map_err(|e| bad(key, e))?;
        Ok(Identity { chain: certs, key })
    }
}

/// The TLS side of the server: TLS 1.3 and 1.2 on rustls's `ring` provider, ALPN `h2` and
/// `http/1.1`, no client certificates.
///
/// The provider is named here rather than taken from the process default: the default is
/// found from rustls's features, which any other crate in the build can add to (two
/// providers and none is the default).
pub(crate) fn tls_acceptor(identity: Identity) -> io::Result<TlsAcceptor> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| {
            b.with_no_client_auth()
                .with_single_cert(identity.chain, identity.key)
        })
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    Ok(TlsAcceptor::from(Arc::new(config)))
}

type Body = Either<Full<Bytes>, Either<Incoming, Empty<Bytes>>>;

/// The routes of the http_server example: `GET /` a short text, `POST /echo` the request's
/// body streamed back as it arrives, anything else 404.
async fn handle(request: Request<Incoming>) -> Result<Response<Body>, std::convert::Infallible> {
    let response = match (request.method(), request.uri().path()) {
        (&Method::GET, "/") => Response::new(Either::Left(Full::new(Bytes::from_static(
            b"hello, world\n",
        )))),
        (&Method::POST, "/echo") => Response::new(Either::Right(Either::Left(request.into_body()))),
        _ => {
            let mut response = Response::new(Either::Right(Either::Right(Empty::new())));
            *response.status_mut() = StatusCode::NOT_FOUND;
            response
        }
    };
    Ok(response)
}

/// What a connection task shares with the accept loop. Closing a channel wakes every
/// receiver, which makes it a broadcast of one event: `finish` asks connections to finish
/// what they have begun, `abort` drops them.
#[derive(Clone)]
struct Shared {
    acceptor: TlsAcceptor,
    options: Options,
    finish: async_channel::Receiver<()>,
    abort: async_channel::Receiver<()>,
    /// Each connection holds a clone; the accept loop's receiver yields once the last is
    /// dropped.
    open: async_channel::Sender<()>,
    failed_handshakes: Arc<AtomicU64>,
}

/// Serves HTTPS on every connection `listener` accepts until `shutdown` completes, then
/// shuts down gracefully: no new connections; handshakes under way are dropped; requests in
/// flight are answered (HTTP/2 sends GOAWAY), idle connections close; after
/// `options.grace` the connections still open are cut off.
///
/// A failed or timed-out handshake (a client that does not trust the certificate, one that
/// speaks plain HTTP, one that sends nothing), like any error of one connection, is logged
/// and ends that connection only; an accept error does not end the loop.
///
/// # Errors
///
/// None today; the `io::Result` leaves room for setup errors.
pub(crate) async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    options: Options,
    shutdown: impl Future<Output = ()>,
) -> io::Result<Served> {
    let (finish, finishing) = async_channel::bounded::<()>(1);
    let (abort, aborting) = async_channel::bounded::<()>(1);
    let (open, all_closed) = async_channel::bounded::<()>(1);
    let grace = options.grace;
    let shared = Shared {
        acceptor,
        options,
        finish: finishing,
        abort: aborting,
        open,
        failed_handshakes: Arc::new(AtomicU64::new(0)),
    };
    let mut connections = 0;
    let mut shutdown = pin!(shutdown);
    loop {
        let (stream, peer) = match until(listener.accept(), shutdown.as_mut()).await {
            None => break,
            Some(Ok(accepted)) => accepted,
            Some(Err(e)) if is_peer_gone(&e) => continue,
            Some(Err(e)) => {
                eprintln!("https_server: accept failed: {e}");
                eddy::time::sleep(ACCEPT_ERROR_PAUSE).await;
                continue;
            }
        };
        connections += 1;
        // The handshake runs in the connection's task, not here: a slow or silent client
        // must not hold up the clients behind it.
        drop(eddy::spawn(connection(stream, peer, shared.clone())));
    }
    // New connections are refused from here on.
    drop(listener);
    let failed_handshakes = shared.failed_handshakes.clone();
    drop(shared);
    drop(finish);
    let cut_off = match eddy::time::timeout(grace, all_closed.recv()).await {
        Ok(_) => 0,
        Err(_) => {
            let left = all_closed.sender_count();
            drop(abort);
            let _ = all_closed.recv().await;
            left
        }
    };
    Ok(Served {
        connections,
        failed_handshakes: failed_handshakes.load(Ordering::SeqCst),
        cut_off,
    })
}

/// One connection: the TLS handshake (bounded by `handshake_timeout`), then hyper, HTTP/2
/// if the client chose `h2` by ALPN and HTTP/1.1 otherwise, until either side closes or
/// shutdown.
async fn connection(stream: TcpStream, peer: SocketAddr, shared: Shared) {
    // Responses are written whole; Nagle's algorithm would only hold back their last part.
    let _ = stream.set_nodelay(true);
    let Shared {
        acceptor,
        options,
        finish,
        abort,
        open: _open,
        failed_handshakes,
    } = shared;
    // Pinned once for the connection's life: each registers with its channel once.
    let mut finishing = pin!(finish.recv());
    let aborting = pin!(abort.recv());
    let handshake = eddy::time::timeout(options.handshake_timeout, acceptor.accept(stream));
    let tls = match unless(handshake, finishing.as_mut()).await {
        // Shutdown began mid-handshake: no request was begun, so there is nothing to finish.
        None => return,
        Some(Ok(Ok(tls))) => tls,
        Some(Ok(Err(e))) => {
            failed_handshakes.fetch_add(1, Ordering::SeqCst);
            eprintln!("https_server: {peer}: TLS handshake failed: {e}");
            return;
        }
        Some(Err(_)) => {
            failed_handshakes.fetch_add(1, Ordering::SeqCst);
            eprintln!(
                "https_server: {peer}: no TLS handshake within {:?}",
                options.handshake_timeout
            );
            return;
        }
    };
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    let io = FuturesIo::new(tls);
    let service = hyper::service::service_fn(handle);
    let ended = if h2 {
        let conn = http2::Builder::new(EddyExecutor)
            .timer(EddyTimer)
            .serve_connection(io, service);
        drive(
            conn,
            http2::Connection::graceful_shutdown,
            finishing,
            aborting,
        )
        .await
    } else {
        let mut builder = http1::Builder::new();
        builder
            .timer(EddyTimer)
            .header_read_timeout(options.header_read_timeout);
        let conn = builder.serve_connection(io, service);
        drive(
            conn,
            http1::Connection::graceful_shutdown,
            finishing,
            aborting,
        )
        .await
    };
    match ended {
        Some(Err(e)) if !peer_left(&e) => eprintln!("https_server: {peer}: connection ended: {e}"),
        Some(_) => {}
        None => eprintln!("https_server: {peer}: cut off at the end of the grace"),
    }
}

/// Runs a hyper connection to its end; asks it to finish (`graceful`) once `finishing`
/// completes, and gives up on it (`None`) once `aborting` does.
async fn drive<C, F: Future, A: Future>(
    conn: C,
    graceful: fn(Pin<&mut C>),
    mut finishing: Pin<&mut F>,
    mut aborting: Pin<&mut A>,
) -> Option<Result<(), hyper::Error>>
where
    C: Future<Output = Result<(), hyper::Error>>,
{
    let mut conn = pin!(conn);
    let mut asked = false;
    poll_fn(|cx| {
        if aborting.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        // A completed `recv` is not polled again.
        if !asked && finishing.as_mut().poll(cx).is_ready() {
            asked = true;
            graceful(conn.as_mut());
        }
        conn.as_mut().poll(cx).map(Some)
    })
    .await
}

/// Runs `work` unless `stop` completes first: `None` then (and `work` is dropped). `stop` is
/// looked at first, so that a steady stream of work cannot hold off a shutdown.
async fn until<W: Future, S: Future>(work: W, mut stop: Pin<&mut S>) -> Option<W::Output> {
    let mut work = pin!(work);
    poll_fn(|cx| {
        if stop.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        work.as_mut().poll(cx).map(Some)
    })
    .await
}

/// Runs `work` until it completes or `stop` does (`None` then, and `work` is dropped).
/// Unlike [`until`], `work` is looked at first: a handshake that has ended by the time
/// shutdown begins is still logged and counted as what it was.
async fn unless<W: Future, S: Future>(work: W, mut stop: Pin<&mut S>) -> Option<W::Output> {
    let mut work = pin!(work);
    poll_fn(|cx| {
        if let Poll::Ready(done) = work.as_mut().poll(cx) {
            return Poll::Ready(Some(done));
        }
        stop.as_mut().poll(cx).map(|_| None)
    })
    .await
}

/// Connection errors that say only that the client went away at a moment of its choosing
/// (closed its socket while the server still had something to write, say an HTTP/2 frame
/// after the client's GOAWAY): routine, and not worth a line in the log.
fn peer_left(e: &hyper::Error) -> bool {
    let io = std::error::Error::source(e).and_then(|s| s.downcast_ref::<io::Error>());
    io.is_some_and(|io| {
        matches!(
            io.kind(),
            io::ErrorKind::BrokenPipe
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
        )
    })
}

/// Accept errors that concern one peer only (it gave up before it was taken).
fn is_peer_gone(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}
