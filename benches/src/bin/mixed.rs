//! The mixed-load benchmark: light requests next to handlers that do long CPU work inline,
//! on eddy, tokio and smol, each server in its own process, driven by one load client.
//!
//! ```sh
//! cargo run --release -p eddy-benches --bin mixed                    # every variant, 3 runs
//! cargo run --release -p eddy-benches --bin mixed -- --variant spin   # one variant
//! cargo run --release -p eddy-benches --bin mixed -- --runs 5 --secs 10
//! ```
//!
//! Each server: 2 worker threads, one task per connection, the accept loop a task. A request
//! is 64 bytes and is echoed; a request whose first byte is `H` first runs a long job of
//! [`LONG_JOB`] (a handler that parses, compresses or hashes inline, as real handlers do).
//!
//! The client (one thread, its own epoll loop) opens [`LIGHT`] light connections, each
//! sending one request every [`LIGHT_PERIOD`] (paced, not closed-loop: a request is sent on
//! schedule even if the previous one is still out, and its latency counts from the moment it
//! was due, so a stall is not hidden by the client waiting it out), plus one or two heavy
//! connections sending an `H` request every [`HEAVY_PERIOD`]. It measures for `--secs`
//! seconds after a 1 s warm-up and reports the light requests' p50, p99, p99.9, maximum and
//! how many took longer than 5 ms. Each run starts a fresh server; the runtimes take turns
//! within a run, so that a slow phase of the machine spreads over all of them. The last
//! column, the client's longest gap between two turns of its loop, tells such a phase from
//! the server: a max near it is the client (or the machine) not running, not the server.
//!
//! Variants:
//! * `none`: no long job (every request is light): the baseline;
//! * `spin`: the handler spins for the long job on its worker thread;
//! * `callback`: the long job is a separate job of the loop (eddy: `call_soon`; tokio and
//!   smol: a spawned task) whose end the handler awaits;
//! * `sleep`: the handler blocks its thread in `std::thread::sleep` (a blocking system call);
//! * `two-heavy`: `spin` with two heavy connections, so that both workers can be busy.
//!
//! `--slice` says which servers ask Linux for a short scheduler time slice: `default` (eddy
//! does, by default: `Builder::worker_time_slice`; tokio and smol run with the kernel's),
//! `off` (none does), `all` (tokio's and smol's threads ask for eddy's default too), so that
//! what the slice buys eddy can be told from what it would buy the others.
//!
//! `--timeline` also prints, for each run, where in the heavy connection's period the slow
//! light requests were: light requests grouped by when they were due after the last heavy
//! request was sent (0.5 ms groups), each group with its p99 and how many took over 2 ms,
//! for the groups with any over 2 ms. A stall shows as a run of groups whose due time plus
//! p99 is the same moment: when what was stranded got served. `--timeline-over US` counts
//! and shows the groups with requests over `US` µs instead (e.g. 300, to see where a p99
//! of a few hundred µs comes from).

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use eddy_benches::server::{announce, clock_ticks_per_sec, cpu_ticks, exit_with_parent, Server};
use hdrhistogram::Histogram;

/// Bytes per request and per echo.
const MSG: usize = 64;
/// How long an `H` request's job runs.
const LONG_JOB: Duration = Duration::from_millis(20);
/// Light connections.
const LIGHT: usize = 32;
/// Each light connection sends one request this often.
const LIGHT_PERIOD: Duration = Duration::from_millis(1);
/// Each heavy connection sends one `H` request this often.
const HEAVY_PERIOD: Duration = Duration::from_millis(100);
/// Light requests slower than this are counted.
const SLOW: Duration = Duration::from_millis(5);
const WARM_UP: Duration = Duration::from_secs(1);
/// How long the client waits for the answers still out when the measured interval ends.
const DRAIN: Duration = Duration::from_secs(2);
/// `--timeline`: the width of a group, and how many groups cover the heavy period.
const TIMELINE_STEP: Duration = Duration::from_micros(500);
const TIMELINE_GROUPS: usize = 200;
/// `--timeline`: a group is shown if it has requests slower than this (µs), unless
/// `--timeline-over` says otherwise.
const TIMELINE_OVER_US: u64 = 2_000;
/// The slice `--slice all` gives tokio and smol: eddy's default.
const SHORT_SLICE: Duration = Duration::from_micros(100);

const RUNTIMES: [&str; 3] = ["eddy", "tokio", "smol"];
const VARIANTS: [&str; 5] = ["none", "spin", "callback", "sleep", "two-heavy"];

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    if let Some(name) = value("--serve") {
        let job = value("--job").unwrap_or_else(|| "spin".into());
        let slice = value("--slice").unwrap_or_else(|| "default".into());
        return serve(&name, LongJob::parse(&job)?, &slice);
    }
    let slice = value("--slice").unwrap_or_else(|| "default".into());
    if !["default", "off", "all"].contains(&slice.as_str()) {
        return Err(io::Error::other(format!("unknown --slice {slice}")));
    }
    let timeline = args.iter().any(|a| a == "--timeline");
    let timeline_over: u64 = match value("--timeline-over") {
        Some(us) => us
            .parse()
            .map_err(|_| io::Error::other(format!("--timeline-over takes µs, got {us}")))?,
        None => TIMELINE_OVER_US,
    };
    let secs: u64 = value("--secs").and_then(|s| s.parse().ok()).unwrap_or(5);
    let runs: usize = value("--runs").and_then(|s| s.parse().ok()).unwrap_or(3);
    let only = value("--only");
    let variants: Vec<&str> = match value("--variant") {
        Some(v) => vec![VARIANTS
            .iter()
            .copied()
            .find(|&k| k == v)
            .ok_or_else(|| io::Error::other(format!("unknown variant {v}")))?],
        None => VARIANTS.to_vec(),
    };
    let runtimes: Vec<&str> = RUNTIMES
        .iter()
        .copied()
        .filter(|r| only.as_deref().is_none_or(|o| o == *r))
        .collect();
    println!(
        "light: {LIGHT} connections, one request every {LIGHT_PERIOD:?} each; \
         long job {LONG_JOB:?}; {secs} s measured after {WARM_UP:?}, {runs} runs, \
         --slice {slice}\n"
    );
    for variant in variants {
        let (job, heavy) = match variant {
            "none" => ("spin", 0),
            "two-heavy" => ("spin", 2),
            other => (other, 1),
        };
        println!("### variant `{variant}` ({heavy} heavy connection(s))\n");
        println!(
            "| runtime | run | light p50 µs | p99 µs | p99.9 µs | max µs | over 5 ms | requests | server CPU % | client gap µs |"
        );
        println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        let mut results: Vec<Vec<LightStats>> = vec![Vec::new(); runtimes.len()];
        for run in 1..=runs {
            for (r, name) in runtimes.iter().enumerate() {
                let server = Server::start(&["--serve", name, "--job", job, "--slice", &slice])?;
                let (stats, groups) =
                    load(server.addr, server.pid(), heavy, Duration::from_secs(secs))?;
                server.stop();
                println!("| {name} | {run} | {} |", stats.row());
                if timeline {
                    print_timeline(&groups, timeline_over);
                }
                results[r].push(stats);
            }
        }
        for (r, name) in runtimes.iter().enumerate() {
            println!("| **{name}** | median | {} |", median(&results[r]).row());
        }
        println!();
    }
    Ok(())
}

// ----- the load client ------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
struct LightStats {
    p50: u64,
    p99: u64,
    p999: u64,
    max: u64,
    slow: u64,
    requests: u64,
    /// The server's CPU time over the measured interval, in % of one core.
    cpu_pct: u64,
    /// The longest the client's own loop went between two turns in the measured interval.
    /// Its turns are at most a light period apart, so a longer gap is the client thread
    /// (or the whole machine) not running: every light request due meanwhile is sent, or
    /// its echo read, that much late, whatever the server does. A run's max and
    /// over-5-ms count near this figure say more about the machine than the server.
    client_gap: u64,
}

impl LightStats {
    fn row(&self) -> String {
        format!(
            "{} | {} | {} | {} | {} | {} | {} | {}",
            self.p50,
            self.p99,
            self.p999,
            self.max,
            self.slow,
            self.requests,
            self.cpu_pct,
            self.client_gap
        )
    }
}

/// The median of each figure over the runs, taken figure by figure.
fn median(runs: &[LightStats]) -> LightStats {
    let m = |f: fn(&LightStats) -> u64| {
        let mut v: Vec<u64> = runs.iter().map(f).collect();
        v.sort_unstable();
        v[v.len() / 2]
    };
    LightStats {
        p50: m(|s| s.p50),
        p99: m(|s| s.p99),
        p999: m(|s| s.p999),
        max: m(|s| s.max),
        slow: m(|s| s.slow),
        requests: m(|s| s.requests),
        cpu_pct: m(|s| s.cpu_pct),
        client_gap: m(|s| s.client_gap),
    }
}

struct Conn {
    stream: TcpStream,
    heavy: bool,
    period: Duration,
    next_send: Instant,
    /// When each request still out was due, oldest first, with its timeline group.
    out: VecDeque<(Instant, Option<usize>)>,
    /// Bytes of the next echo received so far.
    partial: usize,
}

/// Light latencies grouped by when the request was due after the last heavy request was sent
/// (`--timeline`).
type Timeline = Vec<Histogram<u64>>;

fn print_timeline(groups: &Timeline, over_us: u64) {
    for (i, h) in groups.iter().enumerate() {
        let over = h.count_between(over_us + 1, u64::MAX);
        if over > 0 {
            let from_ms = (TIMELINE_STEP * i as u32).as_secs_f64() * 1e3;
            println!(
                "    due {from_ms:>5.1} ms after H: {:>5} requests, p99 {:>5} µs, {over:>4} over {over_us} µs",
                h.len(),
                h.value_at_quantile(0.99)
            );
        }
    }
}

/// The `--timeline` group of a light request due at `due`, if a heavy request was sent
/// before it (within the histogram's reach).
fn timeline_group(due: Instant, last_heavy: Option<Instant>) -> Option<usize> {
    let since = due.checked_duration_since(last_heavy?)?;
    let group = (since.as_nanos() / TIMELINE_STEP.as_nanos()) as usize;
    (group < TIMELINE_GROUPS).then_some(group)
}

fn histogram() -> Histogram<u64> {
    Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram")
}

/// Paced load on `LIGHT` light and `heavy` heavy connections; light latencies of requests due
/// within the measured interval, in all and by [`timeline_group`].
fn load(
    addr: SocketAddr,
    pid: u32,
    heavy: usize,
    dur: Duration,
) -> io::Result<(LightStats, Timeline)> {
    let poller = polling::Poller::new()?;
    let start = Instant::now();
    let mut conns = Vec::with_capacity(LIGHT + heavy);
    for i in 0..LIGHT + heavy {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_nonblocking(true)?;
        // SAFETY: each stream is deleted from the poller before it is dropped (end of fn).
        unsafe {
            poller.add_with_mode(
                &stream,
                polling::Event::readable(i),
                polling::PollMode::Level,
            )?
        };
        let is_heavy = i >= LIGHT;
        let period = if is_heavy { HEAVY_PERIOD } else { LIGHT_PERIOD };
        // Spread the connections' sends evenly over their period.
        let phase = period.mul_f64(i as f64 / (LIGHT + heavy) as f64);
        conns.push(Conn {
            stream,
            heavy: is_heavy,
            period,
            next_send: start + phase,
            out: VecDeque::new(),
            partial: 0,
        });
    }
    let measure_from = start + WARM_UP;
    let measure_to = measure_from + dur;
    let mut hist = histogram();
    let mut timeline: Timeline = (0..TIMELINE_GROUPS).map(|_| histogram()).collect();
    let mut last_heavy = None;
    let mut slow = 0u64;
    let mut events = polling::Events::new();
    let mut buf = [0u8; MSG * 16];
    let mut cpu = (None, None);
    let mut last_turn = start;
    let mut client_gap = Duration::ZERO;
    loop {
        let now = Instant::now();
        if now > measure_from && now < measure_to {
            client_gap = client_gap.max(now - last_turn);
        }
        last_turn = now;
        if cpu.0.is_none() && now >= measure_from {
            cpu.0 = Some(cpu_ticks(pid)?);
        }
        if cpu.1.is_none() && now >= measure_to {
            cpu.1 = Some(cpu_ticks(pid)?);
        }
        let sending = now < measure_to;
        if !sending {
            let waiting = conns
                .iter()
                .any(|c| !c.heavy && c.out.front().is_some_and(|&(t, _)| t < measure_to));
            if !waiting || now >= measure_to + DRAIN {
                break;
            }
        }
        let mut next_due = now + Duration::from_millis(10);
        if sending {
            for c in conns.iter_mut() {
                while c.next_send <= now {
                    let mut msg = [b'L'; MSG];
                    if c.heavy {
                        msg[0] = b'H';
                    }
                    match c.stream.write(&msg) {
                        Ok(MSG) => {}
                        Ok(_) | Err(_) => {
                            return Err(io::Error::other("client send buffer full"));
                        }
                    }
                    if c.heavy {
                        last_heavy = Some(c.next_send);
                    }
                    let group = timeline_group(c.next_send, last_heavy);
                    c.out.push_back((c.next_send, group));
                    c.next_send += c.period;
                }
                next_due = next_due.min(c.next_send);
            }
        }
        events.clear();
        poller.wait(&mut events, Some(next_due.saturating_duration_since(now)))?;
        let now = Instant::now();
        for ev in events.iter() {
            let c = &mut conns[ev.key];
            loop {
                match c.stream.read(&mut buf) {
                    Ok(0) => return Err(io::Error::other("server closed a connection")),
                    Ok(n) => {
                        c.partial += n;
                        while c.partial >= MSG {
                            c.partial -= MSG;
                            let (due, group) =
                                c.out.pop_front().expect("an echo of a request sent");
                            if !c.heavy && due >= measure_from && due < measure_to {
                                let lat = now - due;
                                let micros = lat.as_micros().max(1) as u64;
                                let _ = hist.record(micros);
                                if let Some(g) = group {
                                    let _ = timeline[g].record(micros);
                                }
                                slow += (lat > SLOW) as u64;
                            }
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e),
                }
            }
        }
    }
    // Requests still out after the drain count as the slowest of all.
    for c in conns.iter().filter(|c| !c.heavy) {
        for &(due, _) in c
            .out
            .iter()
            .filter(|&&(t, _)| t >= measure_from && t < measure_to)
        {
            let _ = hist.record(Instant::now().duration_since(due).as_micros() as u64);
            slow += 1;
        }
    }
    for c in &conns {
        poller.delete(&c.stream)?;
    }
    let ticks = cpu.1.unwrap_or(0).saturating_sub(cpu.0.unwrap_or(0));
    let cpu_pct = ticks as f64 / clock_ticks_per_sec() as f64 / dur.as_secs_f64() * 100.0;
    let stats = LightStats {
        cpu_pct: cpu_pct.round() as u64,
        client_gap: client_gap.as_micros() as u64,
        p50: hist.value_at_quantile(0.5),
        p99: hist.value_at_quantile(0.99),
        p999: hist.value_at_quantile(0.999),
        max: hist.max(),
        slow,
        requests: hist.len(),
    };
    Ok((stats, timeline))
}

// ----- the servers ----------------------------------------------------------------------------

/// What an `H` request runs before its echo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LongJob {
    /// Spin inline, in the handler.
    Spin,
    /// Spin in a separate job of the loop, awaited by the handler.
    Callback,
    /// Block the thread inline in `std::thread::sleep`.
    Sleep,
}

impl LongJob {
    fn parse(s: &str) -> io::Result<LongJob> {
        match s {
            "spin" => Ok(LongJob::Spin),
            "callback" => Ok(LongJob::Callback),
            "sleep" => Ok(LongJob::Sleep),
            other => Err(io::Error::other(format!("unknown long job {other}"))),
        }
    }

    /// Runs the job on the calling thread (`Spin` and `Callback` spin, `Sleep` sleeps).
    fn run_here(self) {
        if self == LongJob::Sleep {
            std::thread::sleep(LONG_JOB);
            return;
        }
        let end = Instant::now() + LONG_JOB;
        while Instant::now() < end {
            std::hint::spin_loop();
        }
    }
}

fn serve(name: &str, job: LongJob, slice: &str) -> io::Result<()> {
    exit_with_parent();
    if slice == "all" && name != "eddy" {
        // Before the runtime's threads start: they inherit it.
        eddy_benches::server::request_time_slice(SHORT_SLICE)?;
    }
    match name {
        "eddy" => serve_eddy(job, slice != "off"),
        "tokio" => serve_tokio(job),
        "smol" => serve_smol(job),
        other => Err(io::Error::other(format!("unknown server {other}"))),
    }
}

fn serve_eddy(job: LongJob, short_slice: bool) -> io::Result<()> {
    let mut builder = eddy::Builder::new().workers(2);
    if !short_slice {
        builder = builder.worker_time_slice(None);
    }
    let rt = builder.build()?;
    rt.block_on(async {
        let listener = eddy::net::TcpListener::bind("127.0.0.1:0").await?;
        announce(listener.local_addr()?);
        loop {
            let (s, _) = listener.accept().await?;
            drop(eddy::spawn(async move {
                let _ = s.set_nodelay(true);
                let mut buf = [0u8; MSG];
                while s.read_exact(&mut buf).await.is_ok() {
                    if buf[0] == b'H' {
                        if job == LongJob::Callback {
                            let (done, finished) = async_channel::bounded(1);
                            eddy::call_soon(move || {
                                job.run_here();
                                let _ = done.try_send(());
                            });
                            let _ = finished.recv().await;
                        } else {
                            job.run_here();
                        }
                    }
                    if s.write_all(&buf).await.is_err() {
                        return;
                    }
                }
            }));
        }
    })
}

fn serve_tokio(job: LongJob) -> io::Result<()> {
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
                let mut buf = [0u8; MSG];
                while s.read_exact(&mut buf).await.is_ok() {
                    if buf[0] == b'H' {
                        if job == LongJob::Callback {
                            let _ = tokio::spawn(async move { job.run_here() }).await;
                        } else {
                            job.run_here();
                        }
                    }
                    if s.write_all(&buf).await.is_err() {
                        return;
                    }
                }
            });
        }
    })
}

fn serve_smol(job: LongJob) -> io::Result<()> {
    use futures_lite::{AsyncReadExt, AsyncWriteExt};
    let ex = eddy_benches::server::smol_executor(2);
    async_io::block_on(async {
        let listener = async_io::Async::<std::net::TcpListener>::bind(([127, 0, 0, 1], 0))?;
        announce(listener.get_ref().local_addr()?);
        loop {
            let (mut s, _) = listener.accept().await?;
            let spawner = ex.clone();
            ex.spawn(async move {
                let _ = s.get_ref().set_nodelay(true);
                let mut buf = [0u8; MSG];
                while s.read_exact(&mut buf).await.is_ok() {
                    if buf[0] == b'H' {
                        if job == LongJob::Callback {
                            spawner.spawn(async move { job.run_here() }).await;
                        } else {
                            job.run_here();
                        }
                    }
                    if s.write_all(&buf).await.is_err() {
                        return;
                    }
                }
            })
            .detach();
        }
    })
}
