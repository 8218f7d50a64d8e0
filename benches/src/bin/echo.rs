//! The echo benchmark: the same echo server on eddy, tokio, smol and a bare epoll loop, each
//! in its own process, driven by one load client.
//!
//! ```sh
//! cargo run --release -p eddy-benches --bin echo              # all servers, default load
//! cargo run --release -p eddy-benches --bin echo -- --secs 10 # longer runs
//! ```
//!
//! For each server this binary starts itself as a child (`--serve NAME`), then runs, in this
//! process, a closed-loop client: each connection sends a 64-byte message and waits for its
//! echo before sending the next, latency recorded per request in an HDR histogram. Two
//! loads: 64 connections (throughput, p50/p99, and the server's CPU time per request, read
//! from `/proc/PID/stat` around the measured interval: on a 2-core machine the client
//! competes with the server for the cores, so requests per second bunch together and CPU per
//! request is the figure that separates servers) and 1 connection (latency). The client is a
//! single thread with its own epoll loop, so that it takes as little CPU as possible.
//!
//! Servers (all with 2 threads):
//! * `eddy`: `eddy::net::TcpListener`, one task per connection (`read` / `write_all`);
//! * `tokio`: multi-thread runtime, 2 workers, one task per connection;
//! * `smol`: `async-executor` on 2 threads with `async-io`, one task per connection;
//! * `epoll`: the practical limit: two threads, each a bare epoll loop over non-blocking
//!   sockets, connections dealt to them round-robin by the accepting thread.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use eddy_benches::server::{announce, clock_ticks_per_sec, cpu_ticks, exit_with_parent, Server};
use hdrhistogram::Histogram;

const MSG: usize = 64;

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--serve") {
        return serve(&args[i + 1]);
    }
    // `--client ADDR PID [CONNS]`: only the load (64 connections unless told), against a
    // server started by hand (for profiling it under strace or perf).
    if let Some(i) = args.iter().position(|a| a == "--client") {
        let addr: SocketAddr = args[i + 1].parse().map_err(io::Error::other)?;
        let pid: u32 = args[i + 2].parse().map_err(io::Error::other)?;
        let conns: usize = match args.get(i + 3) {
            Some(n) => n.parse().map_err(io::Error::other)?,
            None => 64,
        };
        let r = load(addr, conns, Duration::from_secs(3), pid)?;
        println!(
            "{:.0} req/s, server CPU {:.2} µs/req",
            r.rps, r.cpu_us_per_req
        );
        return Ok(());
    }
    let secs: u64 = args
        .iter()
        .position(|a| a == "--secs")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let only: Option<&str> = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str);
    println!(
        "| server | conns | req/s | p50 µs | p99 µs | server CPU µs/req |\n|---|---|---|---|---|---|"
    );
    // `--slice-ab`: eddy once more, its threads left at the kernel's time slice
    // (`Builder::worker_time_slice(None)`), to see what the default slice costs here.
    let slice_ab = args.iter().any(|a| a == "--slice-ab");
    for name in ["epoll", "eddy", "eddy-kernel-slice", "tokio", "smol"] {
        if only.is_some_and(|o| o != name) || (name == "eddy-kernel-slice" && !slice_ab) {
            continue;
        }
        let server = Server::start(&["--serve", name])?;
        for conns in [64, 1] {
            let r = load(server.addr, conns, Duration::from_secs(secs), server.pid())?;
            println!(
                "| {name} | {conns} | {:.0} | {} | {} | {:.2} |",
                r.rps, r.p50_us, r.p99_us, r.cpu_us_per_req
            );
        }
        server.stop();
    }
    Ok(())
}

// ----- the load client ------------------------------------------------------------------------

struct LoadResult {
    rps: f64,
    p50_us: u64,
    p99_us: u64,
    cpu_us_per_req: f64,
}

/// Closed loop over `conns` connections for `dur` (after a 1 s warm-up).
fn load(addr: SocketAddr, conns: usize, dur: Duration, server_pid: u32) -> io::Result<LoadResult> {
    let poller = polling::Poller::new()?;
    let mut streams = Vec::with_capacity(conns);
    for key in 0..conns {
        let s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        s.set_nonblocking(true)?;
        // SAFETY: each stream is deleted from the poller before it is dropped (end of fn).
        unsafe {
            poller.add_with_mode(&s, polling::Event::readable(key), polling::PollMode::Level)?
        };
        streams.push(s);
    }
    let msg = [7u8; MSG];
    let mut got = vec![0usize; conns];
    let mut sent_at = vec![Instant::now(); conns];
    for (i, s) in streams.iter_mut().enumerate() {
        s.write_all(&msg)?;
        sent_at[i] = Instant::now();
    }
    let mut hist = Histogram::<u64>::new_with_bounds(1, 10_000_000, 3).expect("histogram");
    let mut events = polling::Events::new();
    let warmup_end = Instant::now() + Duration::from_secs(1);
    let mut measuring = false;
    let mut start = Instant::now();
    let mut cpu_start = 0u64;
    let mut done = 0u64;
    let mut buf = [0u8; MSG];
    loop {
        let now = Instant::now();
        if !measuring && now >= warmup_end {
            measuring = true;
            start = now;
            cpu_start = cpu_ticks(server_pid)?;
            hist.reset();
            done = 0;
        }
        if measuring && now - start >= dur {
            break;
        }
        events.clear();
        poller.wait(&mut events, Some(Duration::from_millis(100)))?;
        for ev in events.iter() {
            let i = ev.key;
            loop {
                match streams[i].read(&mut buf[..MSG - got[i]]) {
                    Ok(0) => return Err(io::Error::other("server closed a connection")),
                    Ok(n) => got[i] += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e),
                }
                if got[i] == MSG {
                    let lat = sent_at[i].elapsed();
                    let _ = hist.record(lat.as_micros().max(1) as u64);
                    done += 1;
                    got[i] = 0;
                    streams[i].write_all(&msg)?;
                    sent_at[i] = Instant::now();
                    break;
                }
            }
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = cpu_ticks(server_pid)? - cpu_start;
    let ticks_per_sec = clock_ticks_per_sec() as f64;
    for s in &streams {
        poller.delete(s)?;
    }
    Ok(LoadResult {
        rps: done as f64 / elapsed,
        p50_us: hist.value_at_quantile(0.5),
        p99_us: hist.value_at_quantile(0.99),
        cpu_us_per_req: cpu as f64 / ticks_per_sec * 1e6 / done.max(1) as f64,
    })
}

// ----- the server processes -------------------------------------------------------------------

fn serve(name: &str) -> io::Result<()> {
    exit_with_parent();
    match name {
        "eddy" => serve_eddy(true),
        "eddy-kernel-slice" => serve_eddy(false),
        "tokio" => serve_tokio(),
        "smol" => serve_smol(),
        "epoll" => serve_epoll(),
        other => Err(io::Error::other(format!("unknown server {other}"))),
    }
}

fn serve_eddy(short_slice: bool) -> io::Result<()> {
    // EDDY_BENCH_WORKERS and EDDY_BENCH_METRICS are for experiments; the table uses 2 workers
    // like every other server.
    let workers = std::env::var("EDDY_BENCH_WORKERS")
        .ok()
        .and_then(|w| w.parse().ok())
        .unwrap_or(2);
    let mut builder = eddy::Builder::new().workers(workers);
    if !short_slice {
        builder = builder.worker_time_slice(None);
    }
    let rt = std::sync::Arc::new(builder.build()?);
    if let Ok(path) = std::env::var("EDDY_BENCH_METRICS") {
        let rt = rt.clone();
        std::thread::spawn(move || log_metrics(&rt, &path));
    }
    rt.block_on(async {
        let listener = eddy::net::TcpListener::bind("127.0.0.1:0").await?;
        announce(listener.local_addr()?);
        loop {
            let (s, _) = listener.accept().await?;
            drop(eddy::spawn(async move {
                let _ = s.set_nodelay(true);
                let mut buf = vec![0u8; 4096];
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
    })
}

/// `EDDY_BENCH_METRICS=FILE`: every 500 ms, one line per interval with each worker's tasks
/// polled, parks, IO events, steals and busy time in that interval (for experiments on the
/// server's behaviour under load; the tables do not use it).
fn log_metrics(rt: &eddy::Runtime, path: &str) {
    let Ok(mut file) = std::fs::File::create(path) else {
        return;
    };
    let mut last = rt.metrics();
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = rt.metrics();
        let line: Vec<String> = now
            .workers
            .iter()
            .zip(&last.workers)
            .map(|(a, b)| {
                format!(
                    "polled {} parks {} (as guest {}) io {} steals {} busy {:?}",
                    a.tasks_polled - b.tasks_polled,
                    a.parks - b.parks,
                    a.guest_parks - b.guest_parks,
                    a.io_events - b.io_events,
                    a.steal_operations - b.steal_operations,
                    a.busy_time - b.busy_time
                )
            })
            .collect();
        if writeln!(file, "{}", line.join(" | ")).is_err() {
            return;
        }
        last = now;
    }
}

fn serve_tokio() -> io::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        announce(listener.local_addr()?);
        loop {
            let (mut s, _) = listener.accept().await?;
            tokio::spawn(async move {
                let _ = s.set_nodelay(true);
                let mut buf = vec![0u8; 4096];
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
            });
        }
    })
}

fn serve_smol() -> io::Result<()> {
    use futures_lite::{AsyncReadExt, AsyncWriteExt};
    let ex = eddy_benches::server::smol_executor(2);
    async_io::block_on(async {
        let listener = async_io::Async::<TcpListener>::bind(([127, 0, 0, 1], 0))?;
        announce(listener.get_ref().local_addr()?);
        loop {
            let (mut s, _) = listener.accept().await?;
            ex.spawn(async move {
                let _ = s.get_ref().set_nodelay(true);
                let mut buf = vec![0u8; 4096];
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
            })
            .detach();
        }
    })
}

/// Two threads, each a bare epoll loop (level-triggered, one `epoll_wait` per round).
fn serve_epoll() -> io::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    announce(listener.local_addr()?);
    let epfds: Vec<i32> = (0..2)
        .map(|_| {
            // SAFETY: epoll_create1 has no memory-safety preconditions.
            let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
            if fd < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(fd)
            }
        })
        .collect::<io::Result<_>>()?;
    for &ep in &epfds {
        std::thread::spawn(move || epoll_loop(ep));
    }
    let mut next = 0;
    // Accepted streams are kept alive here; their fds are served by the loops.
    let mut keep = Vec::new();
    loop {
        let (s, _) = listener.accept()?;
        s.set_nodelay(true)?;
        s.set_nonblocking(true)?;
        let fd = s.as_raw_fd();
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd as u64,
        };
        // SAFETY: `ev` is a valid epoll_event and `fd` an open socket kept alive in `keep`.
        if unsafe { libc::epoll_ctl(epfds[next], libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        next = (next + 1) % epfds.len();
        keep.push(s);
    }
}

fn epoll_loop(ep: i32) {
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: `events` is a valid buffer of 256 epoll_event structures.
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, -1) };
        for ev in events.iter().take(n.max(0) as usize) {
            let fd = ev.u64 as i32;
            // SAFETY: `buf` is valid for writes of its length; `fd` is an open socket.
            let r = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if r == 0 || (r < 0 && io::Error::last_os_error().kind() != io::ErrorKind::WouldBlock) {
                // The client closed (or broke) the connection: stop watching it, or the
                // level-triggered EPOLLIN of a socket at EOF would make this loop spin for
                // the rest of the run (as it did before, burning a core during the
                // 1-connection load). The fd itself stays owned by the accepting thread.
                // SAFETY: `ep` is this loop's epoll fd; a null event is allowed for DEL.
                unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) };
                continue;
            }
            if r < 0 {
                continue;
            }
            let mut off = 0usize;
            while off < r as usize {
                // SAFETY: the range `off..r` of `buf` is initialised and valid for reads.
                let w = unsafe { libc::write(fd, buf[off..].as_ptr().cast(), r as usize - off) };
                if w <= 0 {
                    break;
                }
                off += w as usize;
            }
        }
    }
}
