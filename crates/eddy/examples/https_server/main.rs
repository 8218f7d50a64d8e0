//! An HTTPS server on eddy: TLS by futures-rustls over eddy's `futures-io` streams, HTTP by
//! hyper (feature `hyper`), HTTP/2 or HTTP/1.1 as the client chooses by ALPN.
//!
//! ```sh
//! cargo run --release --features hyper --example https_server -- --port 8443 --workers 2
//! # It prints where it wrote its self-signed certificate; trust it, or skip the check (-k):
//! curl --cacert /tmp/eddy-https_server-PID.pem https://localhost:8443/   # hello, world
//! curl -k https://127.0.0.1:8443/                                         # the same
//! curl -k --http1.1 --data-binary @some-file https://127.0.0.1:8443/echo  # the body back
//! ```
//!
//! The routes are http_server's: `GET /` answers a short text; `POST /echo` streams the
//! request's body back as it arrives; anything else is 404.
//!
//! With no `--cert`/`--key`, the server makes a self-signed certificate for `localhost`,
//! `127.0.0.1` and `::1` at start (rcgen, a fresh key each run) and writes the certificate
//! (not the key) to a PEM file in the temporary directory; with `--cert chain.pem --key
//! key.pem` it serves those instead (PEM, leaf first; the key PKCS#8, PKCS#1 or SEC1).
//!
//! TLS 1.3 and 1.2, on rustls's `ring` provider. A client has 10 s to finish its handshake
//! and then 10 s to send each request's head; a failed handshake (a client that does not
//! trust the certificate, plain HTTP sent to this port) is logged and closes that
//! connection only. Ctrl-C shuts down gracefully: no new connections, requests in flight
//! finish (for up to 10 s), HTTP/2 clients get GOAWAY.
//!
//! Modules: `server` (certificate, TLS configuration, accept loop, connections, shutdown)
//! and `hyper_io` (hyper's IO traits over a `futures-io` stream, as hyper needs them over
//! the TLS stream); the tests (`tests/tests/tls.rs`) run both in-process.

mod hyper_io;
mod server;

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let mut port = 8443u16;
    let mut workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut cert = None;
    let mut key = None;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next();
        let bad = |what: &str| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "{flag} needs {what} (usage: --port P --workers N [--cert FILE --key FILE])"
                ),
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
            "--cert" => cert = Some(PathBuf::from(value.ok_or_else(|| bad("a PEM file"))?)),
            "--key" => key = Some(PathBuf::from(value.ok_or_else(|| bad("a PEM file"))?)),
            _ => return Err(bad("to be --port, --workers, --cert or --key")),
        }
    }

    // The certificate's PEM file, for `curl --cacert`, when it is made here.
    let mut written = None;
    let identity = match (cert, key) {
        (Some(cert), Some(key)) => server::Identity::from_pem_files(&cert, &key)?,
        (None, None) => {
            let (identity, pem) = server::Identity::self_signed(server::LOCAL_NAMES)?;
            let path =
                std::env::temp_dir().join(format!("eddy-https_server-{}.pem", std::process::id()));
            std::fs::write(&path, pem)?;
            println!(
                "self-signed certificate for {}: {}",
                server::LOCAL_NAMES.join(", "),
                path.display()
            );
            written = Some(path);
            identity
        }
        _ => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "--cert and --key go together",
            ))
        }
    };
    let acceptor = server::tls_acceptor(identity)?;

    let cacert = written.as_ref().map(|path| path.display().to_string());
    let rt = eddy::Builder::new().workers(workers).build()?;
    let result = rt.block_on(async move {
        let listener = eddy::net::TcpListener::bind(("127.0.0.1", port)).await?;
        let addr = listener.local_addr()?;
        println!("https server listening on {addr}");
        if let Some(cacert) = cacert {
            println!(
                "try: curl --cacert {cacert} https://localhost:{}/",
                addr.port()
            );
        }
        let shutdown = async {
            if let Err(e) = eddy::signal::ctrl_c().await {
                eprintln!("no Ctrl-C handler ({e}): stop the server with a signal instead");
                std::future::pending::<()>().await;
            }
        };
        let served =
            server::serve(listener, acceptor, server::Options::default(), shutdown).await?;
        println!(
            "served {} connections ({} failed their TLS handshake); {} cut off at shutdown",
            served.connections, served.failed_handshakes, served.cut_off
        );
        Ok(())
    });
    if let Some(path) = written {
        let _ = std::fs::remove_file(path);
    }
    result
}
