//! The HTTP benchmark: the same hyper HTTP/1.1 server on eddy (`eddy::hyper::Server`, no
//! tokio traits) and on tokio (`hyper-util`'s `TokioIo`), each in its own process, loaded by
//! `wrk` (Debian package `wrk`).
//!
//! ```sh
//! cargo build --release -p eddy-benches --bin http
//! ./target/release/http --runs 3 --secs 10          # GET / with wrk -t1 -c64, 2 workers
//! ```
//!
//! Each server: 2 worker threads, one task per connection, `TCP_NODELAY`, `GET /` answering
//! 13 bytes (the handler of `crates/eddy/examples/http_server.rs`). `wrk -t1 -c64` runs on
//! the same machine (2 cores here, shared with the server). It reports requests/s from wrk
//! and the server process's CPU time per request (utime + stime over the run, from
//! `/proc/PID/stat`); the runtimes take turns within each run.

use std::convert::Infallible;
use std::io;
use std::process::Command;
use std::time::Instant;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};

use eddy_benches::server::{announce, clock_ticks_per_sec, cpu_ticks, exit_with_parent, Server};

const WORKERS: usize = 2;
const CONNECTIONS: usize = 64;

async fn hello(_: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(
        b"hello, world\n",
    ))))
}

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    if let Some(name) = value("--serve") {
        return serve(&name);
    }
    let secs: u64 = value("--secs").and_then(|s| s.parse().ok()).unwrap_or(10);
    let runs: usize = value("--runs").and_then(|s| s.parse().ok()).unwrap_or(3);
    if Command::new("wrk").arg("--version").output().is_err() {
        return Err(io::Error::other("wrk not found: apt-get install wrk"));
    }
    println!(
        "hyper hello world, {WORKERS} workers, wrk -t1 -c{CONNECTIONS} -d{secs}s, {runs} runs\n"
    );
    println!("| run | server | req/s | server CPU µs/req |\n|---|---|---:|---:|");
    let mut results: Vec<(&str, Vec<(f64, f64)>)> = vec![("eddy", vec![]), ("tokio", vec![])];
    for run in 1..=runs {
        for (name, rows) in &mut results {
            let (rps, cpu) = measure(name, secs)?;
            println!("| {run} | {name} | {rps:.0} | {cpu:.2} |");
            rows.push((rps, cpu));
        }
    }
    println!("\n| server | median req/s | median CPU µs/req |\n|---|---:|---:|");
    for (name, rows) in &results {
        let median = |f: fn(&(f64, f64)) -> f64| {
            let mut v: Vec<f64> = rows.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        println!(
            "| {name} | {:.0} | {:.2} |",
            median(|r| r.0),
            median(|r| r.1)
        );
    }
    let ratios: Vec<String> = (0..runs)
        .map(|i| {
            let (e, t) = (results[0].1[i], results[1].1[i]);
            format!("{:.2}x req/s, {:.2}x CPU", e.0 / t.0, e.1 / t.1)
        })
        .collect();
    println!("\neddy/tokio per run: {}", ratios.join("; "));
    Ok(())
}

/// One wrk run against a fresh server: requests/s and server CPU µs per request.
fn measure(name: &str, secs: u64) -> io::Result<(f64, f64)> {
    let server = Server::start(&["--serve", name])?;
    let url = format!("http://{}/", server.addr);
    let before = cpu_ticks(server.pid())?;
    let started = Instant::now();
    let out = Command::new("wrk")
        .args([
            "-t1",
            &format!("-c{CONNECTIONS}"),
            &format!("-d{secs}s"),
            &url,
        ])
        .output()?;
    let elapsed = started.elapsed();
    let cpu_ticks_used = cpu_ticks(server.pid())? - before;
    server.stop();
    let text = String::from_utf8_lossy(&out.stdout);
    let requests: f64 = text
        .lines()
        .find(|l| l.contains("requests in"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| io::Error::other(format!("no request count in wrk's output:\n{text}")))?;
    if text.contains("Non-2xx") || text.contains("Socket errors") {
        return Err(io::Error::other(format!("{name}: wrk saw errors:\n{text}")));
    }
    let cpu_us = cpu_ticks_used as f64 * 1e6 / clock_ticks_per_sec() as f64;
    Ok((requests / elapsed.as_secs_f64(), cpu_us / requests))
}

fn serve(name: &str) -> io::Result<()> {
    exit_with_parent();
    match name {
        "eddy" => {
            let rt = eddy::Builder::new().workers(WORKERS).build()?;
            rt.block_on(async {
                let listener = eddy::net::TcpListener::bind("127.0.0.1:0").await?;
                announce(listener.local_addr()?);
                eddy::hyper::Server::new(eddy::hyper::Protocol::Http1)
                    .serve(
                        listener,
                        hyper::service::service_fn(hello),
                        std::future::pending(),
                    )
                    .await?;
                Ok(())
            })
        }
        "tokio" => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(WORKERS)
                .enable_all()
                .build()?;
            rt.block_on(async {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
                announce(listener.local_addr()?);
                loop {
                    let (stream, _) = listener.accept().await?;
                    stream.set_nodelay(true)?;
                    tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(
                        hyper_util::rt::TokioIo::new(stream),
                        hyper::service::service_fn(hello),
                    ));
                }
            })
        }
        _ => Err(io::Error::other(format!("unknown server {name}"))),
    }
}
