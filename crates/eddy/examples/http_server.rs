//! An HTTP/1.1 server on hyper and eddy (feature `hyper`).
//!
//! ```sh
//! cargo run --release --features hyper --example http_server -- --port 8080 --workers 2
//! curl localhost:8080/                         # hello, world
//! curl --data-binary @some-file localhost:8080/echo   # the body back, streamed
//! ```
//!
//! `GET /` answers a short text; `POST /echo` streams the request's body back as it arrives
//! (any size: nothing is collected in memory); anything else is 404. Ctrl-C shuts down
//! gracefully: no new connections, requests in flight finish (for up to 10 s).

use std::time::Duration;

use http_body_util::{Either, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};

type Body = Either<Full<Bytes>, Either<Incoming, Empty<Bytes>>>;

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

fn main() -> std::io::Result<()> {
    let mut port = 8080u16;
    let mut workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next();
        let bad = |what: &str| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{flag} needs {what} (usage: --port P --workers N)"),
            )
        };
        match flag.as_str() {
            "--port" => {
                port = value
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| bad("a port"))?
            }
            "--workers" => {
                workers = value
                    .and_then(|v| v.parse().ok())
                    .filter(|&n: &usize| n > 0)
                    .ok_or_else(|| bad("a positive count"))?
            }
            _ => return Err(bad("to be --port or --workers")),
        }
    }

    let rt = eddy::Builder::new().workers(workers).build()?;
    rt.block_on(async move {
        let listener = eddy::net::TcpListener::bind(("127.0.0.1", port)).await?;
        println!("http server listening on {}", listener.local_addr()?);
        let shutdown = async {
            if let Err(e) = eddy::signal::ctrl_c().await {
                eprintln!("no Ctrl-C handler ({e}): stop the server with a signal instead");
                std::future::pending::<()>().await;
            }
        };
        let served = eddy::hyper::Server::new(eddy::hyper::Protocol::Http1)
            .header_read_timeout(Duration::from_secs(10))
            .grace(Duration::from_secs(10))
            .serve(listener, hyper::service::service_fn(handle), shutdown)
            .await?;
        println!(
            "served {} connections; {} cut off at shutdown",
            served.connections, served.cut_off
        );
        Ok(())
    })
}
