//! The key-value benchmark: the Redis-protocol server of `crates/eddy/examples/kv_server/`
//! on eddy and the same server on tokio, each in its own process, and `redis-server` itself,
//! loaded by `redis-benchmark` (Debian packages `redis-server` and `redis-tools`).
//!
//! ```sh
//! apt-get install -y redis-server redis-tools
//! cargo build --release -p eddy-benches --bin kv
//! ./target/release/kv --runs 3 --requests 5000000
//! ```
//!
//! The eddy and tokio servers share the example's protocol, store and per-connection code
//! (`resp.rs`, `store.rs`, `session.rs`, compiled here with `#[path]`): eddy runs the
//! example's own `server.rs`; tokio runs the same loop written on tokio (read, run every
//! complete request, one write of the replies), without the example's graceful-shutdown
//! plumbing. Both with 2 workers and `TCP_NODELAY`. `redis-server` runs with
//! `--save '' --appendonly no` (single-threaded, its default).
//!
//! In each run every server is started afresh and loaded by `redis-benchmark -P 16 -c 50
//! -n N -q --csv`, first with `-t set`, then with `-t get` (which reads the key the first
//! left), on the same machine as the server (2 cores here, shared by both). It reports redis-benchmark's requests/s and the server
//! process's CPU time per request (utime + stime over that invocation, from
//! `/proc/PID/stat`); the servers take turns within each run. A measurement during which
//! other processes used more than 0.15 core (the machine's busy time from `/proc/stat`, less
//! the server's and redis-benchmark's own) is taken again, up to 3 tries; each try first
//! waits (up to a minute) for the machine to be quiet (under 0.1 core busy over a second).

// The example's modules; the benchmark uses only part of them.
#[allow(dead_code)]
#[path = "../../../crates/eddy/examples/kv_server/resp.rs"]
mod resp;
#[allow(dead_code)]
#[path = "../../../crates/eddy/examples/kv_server/server.rs"]
mod server;
#[allow(dead_code)]
#[path = "../../../crates/eddy/examples/kv_server/session.rs"]
mod session;
#[allow(dead_code)]
#[path = "../../../crates/eddy/examples/kv_server/store.rs"]
mod store;

use std::io::{self, Read};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use eddy_benches::server::{announce, clock_ticks_per_sec, cpu_ticks, exit_with_parent, Server};

use session::{Flow, Session};
use store::Store;

const WORKERS: usize = 2;
const CONNECTIONS: usize = 50;
const PIPELINE: usize = 16;
const SERVERS: [&str; 3] = ["eddy", "tokio", "redis-server"];
const TESTS: [&str; 2] = ["set", "get"];
/// Cores that other processes may use during a measurement before it is taken again.
const OTHERS_AT_MOST: f64 = 0.15;

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
    let runs: usize = value("--runs").and_then(|s| s.parse().ok()).unwrap_or(3);
    let requests: u64 = value("--requests")
        .and_then(|s| s.parse().ok())
        .unwrap_or(5_000_000);
    for tool in ["redis-benchmark", "redis-server"] {
        if Command::new(tool).arg("--version").output().is_err() {
            return Err(io::Error::other(format!(
                "{tool} not found: apt-get install redis-server redis-tools"
            )));
        }
    }
    println!(
        "redis-benchmark -t set / -t get -P {PIPELINE} -c {CONNECTIONS} -n {requests}, \
         {WORKERS} workers for eddy and tokio, {runs} runs\n"
    );
    println!(
        "| run | server | test | req/s | server CPU µs/req | others' cores | tries |\n\
         |---|---|---|---:|---:|---:|---:|"
    );
    // results[server][test] = one (req/s, µs/req) per run.
    let mut results = vec![vec![Vec::new(); TESTS.len()]; SERVERS.len()];
    for run in 1..=runs {
        for (s, name) in SERVERS.iter().enumerate() {
            let server = Running::start(name)?;
            for (t, test) in TESTS.iter().enumerate() {
                // A measurement during which other processes took more than a little CPU
                // is taken again (up to 3 tries), and the row says how much they took.
                let mut tries = 0;
                let (rps, cpu, others) = loop {
                    tries += 1;
                    wait_until_quiet()?;
                    let m = measure(&server, test, requests)?;
                    if m.2 <= OTHERS_AT_MOST || tries == 3 {
                        break m;
                    }
                };
                println!(
                    "| {run} | {name} | {} | {rps:.0} | {cpu:.3} | {others:.2} | {tries} |",
                    test.to_uppercase()
                );
                results[s][t].push((rps, cpu));
            }
            server.stop();
        }
    }
    println!("\n| server | test | median req/s | median CPU µs/req |\n|---|---|---:|---:|");
    for (s, name) in SERVERS.iter().enumerate() {
        for (t, test) in TESTS.iter().enumerate() {
            let median = |f: fn(&(f64, f64)) -> f64| {
                let mut v: Vec<f64> = results[s][t].iter().map(f).collect();
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            };
            println!(
                "| {name} | {} | {:.0} | {:.3} |",
                test.to_uppercase(),
                median(|r| r.0),
                median(|r| r.1)
            );
        }
    }
    for (other, label) in [(1, "eddy/tokio"), (2, "eddy/redis-server")] {
        for (t, test) in TESTS.iter().enumerate() {
            let ratios: Vec<String> = (0..runs)
                .map(|i| {
                    let (e, o) = (results[0][t][i], results[other][t][i]);
                    format!("{:.2}x req/s, {:.2}x CPU", e.0 / o.0, e.1 / o.1)
                })
                .collect();
            println!(
                "\n{label} {} per run: {}",
                test.to_uppercase(),
                ratios.join("; ")
            );
        }
    }
    Ok(())
}

/// A server under test: one of this binary's (`--serve NAME`) or `redis-server`.
enum Running {
    Ours(Server),
    Redis(Child, SocketAddr),
}

impl Running {
    fn start(name: &str) -> io::Result<Running> {
        if name != "redis-server" {
            return Ok(Running::Ours(Server::start(&["--serve", name])?));
        }
        // A free port: bind, note, let go. Should another process take it in between,
        // redis-server exits, which is checked below.
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut child = Command::new("redis-server")
            .args(["--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
            .args(["--port", &port.to_string()])
            .stdout(Stdio::null())
            .spawn()?;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let end = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(addr).is_err() {
            if Instant::now() > end {
                return Err(io::Error::other("redis-server did not start listening"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Some(status) = child.try_wait()? {
            return Err(io::Error::other(format!(
                "redis-server exited ({status}): port {port} taken?"
            )));
        }
        Ok(Running::Redis(child, addr))
    }

    fn addr(&self) -> SocketAddr {
        match self {
            Running::Ours(server) => server.addr,
            Running::Redis(_, addr) => *addr,
        }
    }

    fn pid(&self) -> u32 {
        match self {
            Running::Ours(server) => server.pid(),
            Running::Redis(child, _) => child.id(),
        }
    }

    fn stop(self) {
        match self {
            Running::Ours(server) => server.stop(),
            Running::Redis(mut child, _) => {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// One redis-benchmark invocation of `test`: its requests/s, the server's CPU µs per request
/// over the invocation, and the cores that other processes (neither the server nor
/// redis-benchmark) used meanwhile.
fn measure(server: &Running, test: &str, requests: u64) -> io::Result<(f64, f64, f64)> {
    let started = Instant::now();
    let machine_before = machine_busy_ticks()?;
    let server_before = cpu_ticks(server.pid())?;
    let mut client = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &server.addr().port().to_string()])
        .args(["-t", test, "-P", &PIPELINE.to_string()])
        .args(["-c", &CONNECTIONS.to_string(), "-n", &requests.to_string()])
        .args(["-q", "--csv"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    // Both outputs are a few lines; each read ends when redis-benchmark exits.
    let (mut text, mut errors) = (String::new(), String::new());
    client
        .stdout
        .take()
        .expect("piped")
        .read_to_string(&mut text)?;
    client
        .stderr
        .take()
        .expect("piped")
        .read_to_string(&mut errors)?;
    // Its CPU time, read while it is a zombie (exited, not yet waited for).
    let end = Instant::now() + Duration::from_secs(10);
    while !is_zombie(client.id()) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(1));
    }
    let client_used = cpu_ticks(client.id())?;
    let server_used = cpu_ticks(server.pid())? - server_before;
    let machine_used = machine_busy_ticks()? - machine_before;
    let elapsed = started.elapsed().as_secs_f64();
    let status = client.wait()?;
    if !status.success() || errors.contains("rror") {
        return Err(io::Error::other(format!(
            "redis-benchmark -t {test} failed: {status}\n{text}\n{errors}"
        )));
    }
    let label = format!("\"{}\"", test.to_uppercase());
    let rps: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix(&label))
        .and_then(|rest| rest.split(',').nth(1))
        .and_then(|field| field.trim_matches('"').parse().ok())
        .ok_or_else(|| io::Error::other(format!("no {label} row in:\n{text}")))?;
    let tick = 1.0 / clock_ticks_per_sec() as f64;
    let cpu_us = server_used as f64 * tick * 1e6 / requests as f64;
    let others = machine_used.saturating_sub(server_used + client_used) as f64 * tick / elapsed;
    Ok((rps, cpu_us, others))
}

/// Waits (up to a minute) until the machine uses less than 0.1 core over a second, so that
/// a measurement does not start in the middle of someone else's work.
fn wait_until_quiet() -> io::Result<()> {
    let end = Instant::now() + Duration::from_secs(60);
    while Instant::now() < end {
        let before = machine_busy_ticks()?;
        std::thread::sleep(Duration::from_secs(1));
        let cores = (machine_busy_ticks()? - before) as f64 / clock_ticks_per_sec() as f64;
        if cores < 0.1 {
            break;
        }
    }
    Ok(())
}

/// Busy clock ticks of the whole machine, all cores together (`/proc/stat`).
fn machine_busy_ticks() -> io::Result<u64> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let line = stat.lines().next().unwrap_or("");
    // user nice system idle iowait irq softirq steal: all but idle and iowait.
    Ok(line
        .split_whitespace()
        .skip(1)
        .take(8)
        .enumerate()
        .filter(|&(i, _)| i != 3 && i != 4)
        .map(|(_, t)| t.parse::<u64>().unwrap_or(0))
        .sum())
}

/// Whether process `pid` has exited and waits to be reaped (or is gone).
fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rfind(')')
            .and_then(|i| stat.get(i + 2..i + 3))
            .is_none_or(|state| state == "Z")
    })
}

fn serve(name: &str) -> io::Result<()> {
    exit_with_parent();
    let store = Arc::new(Store::new());
    match name {
        "eddy" => {
            let rt = eddy::Builder::new().workers(WORKERS).build()?;
            rt.block_on(async {
                let listener = eddy::net::TcpListener::bind("127.0.0.1:0").await?;
                announce(listener.local_addr()?);
                server::serve(
                    listener,
                    store,
                    server::Options::default(),
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
                let sweeper = store.clone();
                tokio::spawn(async move {
                    let mut every = tokio::time::interval(store::SWEEP_EVERY);
                    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    loop {
                        every.tick().await;
                        sweeper.sweep(Instant::now());
                    }
                });
                loop {
                    let (stream, _) = listener.accept().await?;
                    let session = Session::new(store.clone(), resp::DEFAULT_MAX_BULK_LEN);
                    tokio::spawn(tokio_connection(stream, session));
                }
            })
        }
        _ => Err(io::Error::other(format!("unknown server {name}"))),
    }
}

/// The tokio twin of the example's connection loop: read, run every complete request, write
/// the replies in one write.
async fn tokio_connection(mut stream: tokio::net::TcpStream, mut session: Session) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = stream.set_nodelay(true);
    let mut out = Vec::new();
    loop {
        let flow = session.process(&mut out);
        if !out.is_empty() {
            if stream.write_all(&out).await.is_err() {
                return;
            }
            out.clear();
        }
        match flow {
            Flow::Read => {}
            Flow::Flush => continue,
            Flow::Close => return,
        }
        match stream.read(session.read_buf()).await {
            Ok(0) | Err(_) => return,
            Ok(n) => session.filled(n),
        }
    }
}
