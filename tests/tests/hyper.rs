//! hyper on eddy (feature `hyper`): HTTP/1 and HTTP/2, server and client both on eddy's
//! sockets, tasks and timers, with no tokio traits in between.

use std::convert::Infallible;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};

use eddy::hyper::{EddyExecutor, EddyTimer};
use eddy::net::{TcpListener, TcpStream};
use eddy_tests::{with_deadline, PATIENCE};

/// Long enough for a broken integration to fail instead of hang.
const LIMIT: Duration = Duration::from_secs(120);

/// A body larger than any socket or hyper buffer, so that it crosses many reads and writes.
const BIG: usize = 4 << 20;

/// `GET /` answers "hello"; `POST /echo` answers with the request's body; anything else 404.
async fn service(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, hyper::Error> {
    match (request.method(), request.uri().path()) {
        (&Method::GET, "/") => Ok(Response::new(Full::new(Bytes::from_static(b"hello")))),
        (&Method::POST, "/echo") => {
            let body = request.into_body().collect().await?.to_bytes();
            Ok(Response::new(Full::new(body)))
        }
        _ => {
            let mut response = Response::new(Full::new(Bytes::new()));
            *response.status_mut() = StatusCode::NOT_FOUND;
            Ok(response)
        }
    }
}

#[derive(Clone, Copy)]
enum Version {
    One,
    Two,
}

/// Starts a server of `version` on `listener`, one task per connection.
fn serve(listener: TcpListener, version: Version) {
    drop(eddy::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let service = hyper::service::service_fn(service);
            match version {
                Version::One => drop(eddy::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .timer(EddyTimer)
                        .serve_connection(stream, service),
                )),
                Version::Two => drop(eddy::spawn(
                    hyper::server::conn::http2::Builder::new(EddyExecutor)
                        .timer(EddyTimer)
                        .serve_connection(stream, service),
                )),
            }
        }
    }));
}

fn big_body() -> Vec<u8> {
    (0..BIG).map(|i| (i * 7 % 251) as u8).collect()
}

async fn body_of(response: Response<Incoming>) -> Bytes {
    response.into_body().collect().await.unwrap().to_bytes()
}

fn request(method: Method, path: &str, body: impl Into<Bytes>) -> Request<Full<Bytes>> {
    Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, "localhost")
        .body(Full::new(body.into()))
        .unwrap()
}

/// An HTTP/1 client connection on eddy (its dispatcher an eddy task).
async fn http1_client(addr: SocketAddr) -> hyper::client::conn::http1::SendRequest<Full<Bytes>> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(stream).await.unwrap();
    drop(eddy::spawn(conn));
    sender
}

/// An HTTP/1 client on eddy talks to an HTTP/1 server on eddy: a short answer and a 404 over
/// one keep-alive connection, and a 4 MiB body echoed both ways on another.
#[test]
fn http1_server_and_client_on_eddy() {
    with_deadline(LIMIT, || {
        let rt = eddy_tests::rt(2);
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            serve(listener, Version::One);

            let mut sender = http1_client(addr).await;
            // A connection takes one request at a time: wait until it can take the next.
            sender.ready().await.unwrap();
            let hello = sender
                .send_request(request(Method::GET, "/", ""))
                .await
                .unwrap();
            assert_eq!(hello.status(), StatusCode::OK);
            assert_eq!(body_of(hello).await, "hello");
            sender.ready().await.unwrap();
            let missing = sender
                .send_request(request(Method::GET, "/nothing", ""))
                .await
                .unwrap();
            assert_eq!(missing.status(), StatusCode::NOT_FOUND);

            let mut sender = http1_client(addr).await;
            let big = big_body();
            let echo = sender
                .send_request(request(Method::POST, "/echo", big.clone()))
                .await
                .unwrap();
            assert_eq!(echo.status(), StatusCode::OK);
            assert!(body_of(echo).await == big, "the echoed body differs");
        });
    });
}

/// Two 4 MiB bodies echoed one after the other on one keep-alive connection: after the
/// first, the connection takes the next request. Each response body crosses many reads,
/// each handed from the client's dispatcher task to this `block_on` thread and back, so a
/// wake-up lost in eddy's park protocol (such as a waker's notification consumed by a
/// sibling that nests the woken worker's epoll) shows here as a hang.
#[test]
fn a_keep_alive_connection_is_ready_again_after_a_large_body() {
    with_deadline(LIMIT, || {
        let rt = eddy_tests::rt(2);
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            serve(listener, Version::One);
            let mut sender = http1_client(addr).await;
            let big = big_body();
            for _ in 0..2 {
                sender.ready().await.unwrap();
                let echo = sender
                    .send_request(request(Method::POST, "/echo", big.clone()))
                    .await
                    .unwrap();
                assert!(body_of(echo).await == big, "the echoed body differs");
            }
        });
    });
}

/// An HTTP/2 client on eddy sends 32 requests at once over one connection to an HTTP/2
/// server on eddy; each stream runs as its own eddy task (`EddyExecutor`) and every answer
/// comes back on its own stream.
#[test]
fn http2_server_and_client_on_eddy() {
    with_deadline(LIMIT, || {
        let rt = eddy_tests::rt(2);
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            serve(listener, Version::Two);

            let stream = TcpStream::connect(addr).await.unwrap();
            let (sender, conn) = hyper::client::conn::http2::Builder::new(EddyExecutor)
                .timer(EddyTimer)
                .handshake(stream)
                .await
                .unwrap();
            drop(eddy::spawn(conn));

            let requests: Vec<_> = (0..32)
                .map(|i| {
                    let mut sender = sender.clone();
                    eddy::spawn(async move {
                        let body = format!("request {i}").repeat(1000);
                        sender.ready().await.unwrap();
                        let response = sender
                            .send_request(request(Method::POST, "/echo", body.clone()))
                            .await
                            .unwrap();
                        assert_eq!(response.version(), hyper::Version::HTTP_2);
                        assert_eq!(body_of(response).await, body);
                    })
                })
                .collect();
            for r in requests {
                r.await.unwrap();
            }

            let mut sender = sender;
            let big = big_body();
            sender.ready().await.unwrap();
            let echo = sender
                .send_request(request(Method::POST, "/echo", big.clone()))
                .await
                .unwrap();
            assert!(body_of(echo).await == big, "the echoed body differs");
        });
    });
}

/// A client that sends half a request head and then nothing: hyper's `header_read_timeout`,
/// running on eddy's timers (`EddyTimer`), ends the connection with a timeout error, and the
/// client sees it closed. Without a working timer the connection would stay open and the
/// client's read would wait out `PATIENCE`.
#[test]
fn a_header_read_timeout_fires_on_eddys_timers() {
    with_deadline(LIMIT, || {
        let rt = eddy_tests::rt(2);
        let (addr_tx, addr_rx) = mpsc::channel::<SocketAddr>();
        let (result_tx, result_rx) = mpsc::channel();
        let _server = rt.handle().spawn(async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            let (stream, _) = listener.accept().await.unwrap();
            let result = hyper::server::conn::http1::Builder::new()
                .timer(EddyTimer)
                .header_read_timeout(Duration::from_millis(200))
                .serve_connection(
                    stream,
                    hyper::service::service_fn(|_| async {
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
                    }),
                )
                .await;
            result_tx.send(result.map_err(|e| e.is_timeout())).unwrap();
        });

        let mut client = std::net::TcpStream::connect(addr_rx.recv().unwrap()).unwrap();
        client.write_all(b"GET / HTTP/1.1\r\nHost: loc").unwrap();
        client.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut rest = Vec::new();
        client
            .read_to_end(&mut rest)
            .expect("the server never closed the connection");
        let result = result_rx
            .recv_timeout(PATIENCE)
            .expect("the connection never ended");
        assert_eq!(
            result,
            Err(true),
            "the connection did not end with a timeout"
        );
    });
}

/// A handler the test holds on `/slow`: it reports that such a request reached it, then
/// answers only once the test lets it. Other paths are answered at once.
#[derive(Clone)]
struct HeldService {
    reached: async_channel::Sender<()>,
    release: async_channel::Receiver<()>,
}

type BoxedResponse = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Response<Full<Bytes>>, Infallible>> + Send>,
>;

impl hyper::service::Service<Request<Incoming>> for HeldService {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = BoxedResponse;

    fn call(&self, request: Request<Incoming>) -> BoxedResponse {
        let (reached, release) = (self.reached.clone(), self.release.clone());
        if request.uri().path() != "/slow" {
            return Box::pin(async { Ok(Response::new(Full::new(Bytes::from_static(b"quick")))) });
        }
        Box::pin(async move {
            reached.send(()).await.unwrap();
            let _ = release.recv().await;
            Ok(Response::new(Full::new(Bytes::from_static(b"finished"))))
        })
    }
}

fn held_service(
    reached: async_channel::Sender<()>,
    release: async_channel::Receiver<()>,
) -> HeldService {
    HeldService { reached, release }
}

/// A std client that sends one GET of `/slow` on a new connection and returns the whole
/// response (the server closes the connection after it: `Connection: close`).
fn raw_get(addr: SocketAddr) -> std::thread::JoinHandle<std::io::Result<String>> {
    let mut client = std::net::TcpStream::connect(addr).unwrap();
    std::thread::spawn(move || {
        client.set_read_timeout(Some(PATIENCE))?;
        client.write_all(b"GET /slow HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")?;
        let mut response = String::new();
        client.read_to_string(&mut response)?;
        Ok(response)
    })
}

/// Shutdown begins while a request is in flight and another connection sits idle between
/// keep-alive requests: the listener stops accepting at once, the idle connection is closed,
/// the request in flight is still answered in full, and `serve` returns once it has been,
/// with nothing cut off.
#[test]
fn graceful_shutdown_answers_the_requests_in_flight() {
    with_deadline(LIMIT, || {
        let rt = eddy_tests::rt(2);
        let (reached_tx, reached) = async_channel::unbounded();
        let (release, release_rx) = async_channel::unbounded::<()>();
        let (stop, stop_rx) = async_channel::bounded::<()>(1);
        let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let server = rt.handle().spawn(async move {
            eddy::hyper::Server::new(eddy::hyper::Protocol::Http1)
                .grace(PATIENCE)
                .serve(listener, held_service(reached_tx, release_rx), async move {
                    let _ = stop_rx.recv().await;
                })
                .await
                .unwrap()
        });

        // A keep-alive connection that has had its answer and now waits for its next request.
        let mut idle = std::net::TcpStream::connect(addr).unwrap();
        idle.set_read_timeout(Some(PATIENCE)).unwrap();
        idle.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .unwrap();
        let quick = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n";
        let mut head = vec![0u8; quick.len()];
        idle.read_exact(&mut head).unwrap();
        assert_eq!(head, quick);

        let in_flight = raw_get(addr);
        reached.recv_blocking().unwrap();
        stop.send_blocking(()).unwrap();
        // The idle connection is closed by the server (after the rest of its answer).
        let mut rest = Vec::new();
        idle.read_to_end(&mut rest)
            .expect("the idle keep-alive connection was not closed");
        assert!(rest.ends_with(b"quick"));
        // New connections are refused once the listener is closed.
        assert!(
            eddy_tests::wait_until(PATIENCE, || std::net::TcpStream::connect(addr).is_err()),
            "the server still accepts connections after shutdown began"
        );
        assert!(
            !server.is_finished(),
            "serve returned with a request in flight"
        );
        release.send_blocking(()).unwrap();

        let response = in_flight
            .join()
            .unwrap()
            .expect("the request in flight failed");
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        assert!(response.ends_with("finished"), "{response}");
        let served = rt.block_on(server).unwrap();
        assert_eq!(
            served,
            eddy::hyper::Served {
                connections: 2,
                cut_off: 0
            }
        );
    });
}

/// A request still in flight when the grace runs out is cut off: its connection is dropped
/// (the client sees it closed without an answer) and `serve` returns, counting it.
#[test]
fn graceful_shutdown_cuts_off_what_outlasts_the_grace() {
    with_deadline(LIMIT, || {
        let rt = eddy_tests::rt(2);
        let (reached_tx, reached) = async_channel::unbounded();
        // Never released while the server runs.
        let (_release, release_rx) = async_channel::unbounded::<()>();
        let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stop_rx) = async_channel::bounded::<()>(1);
        let server = rt.handle().spawn(async move {
            eddy::hyper::Server::new(eddy::hyper::Protocol::Http1)
                .grace(Duration::from_millis(100))
                .serve(listener, held_service(reached_tx, release_rx), async move {
                    let _ = stop_rx.recv().await;
                })
                .await
                .unwrap()
        });

        let in_flight = raw_get(addr);
        reached.recv_blocking().unwrap();
        stop.send_blocking(()).unwrap();
        let served = rt.block_on(server).unwrap();
        assert_eq!(
            served,
            eddy::hyper::Served {
                connections: 1,
                cut_off: 1
            }
        );
        let response = in_flight
            .join()
            .unwrap()
            .expect("the connection was not closed");
        assert_eq!(response, "", "a cut-off request got an answer");
    });
}

/// `Server`'s default header timeout: a client that sends half a request head and then
/// nothing is cut off once `DEFAULT_HEADER_READ_TIMEOUT` has passed. The runtime's clock is
/// paused, so those 30 seconds pass as soon as every worker waits for them; without a default
/// the connection would stay open and the client's read would wait out `PATIENCE`.
#[test]
fn a_server_cuts_off_a_slow_header_by_default() {
    with_deadline(LIMIT, || {
        let rt = eddy::Builder::new()
            .workers(2)
            .start_paused(true)
            .build()
            .unwrap();
        let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stop_rx) = async_channel::bounded::<()>(1);
        let server = rt.handle().spawn(async move {
            let service = hyper::service::service_fn(|_| async {
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"hello"))))
            });
            eddy::hyper::Server::new(eddy::hyper::Protocol::Http1)
                .serve(listener, service, async move {
                    let _ = stop_rx.recv().await;
                })
                .await
                .unwrap()
        });

        let mut client = std::net::TcpStream::connect(addr).unwrap();
        client.write_all(b"GET / HTTP/1.1\r\nHost: loc").unwrap();
        client.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut rest = Vec::new();
        client
            .read_to_end(&mut rest)
            .expect("the server never closed the connection");
        assert!(
            !rest.starts_with(b"HTTP/1.1 200"),
            "a request with half a head was answered"
        );
        stop.send_blocking(()).unwrap();
        let served = rt.block_on(server).unwrap();
        assert_eq!(served.connections, 1);
    });
}
