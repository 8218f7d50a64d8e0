//! The soak run: a mixed server workload on one runtime (eddy, or tokio or smol for comparison)
//! for a given time, sampling the process's resident memory and open file descriptors every
//! second, to show that nothing accumulates (memory, sockets, timers, tasks) over a long run.
//!
//! ```sh
//! cargo run --release -p eddy-benches --bin soak -- --secs 600           # the recorded run
//! cargo run --release -p eddy-benches --bin soak -- --secs 60 --warmup 10
//! cargo run --release -p eddy-benches --bin soak -- --secs 300 --track-from 2048  # who grows
//! cargo run --release -p eddy-benches --bin soak -- --secs 600 --runtime tokio    # or smol
//! cargo run --release -p eddy-benches --features mimalloc --bin soak -- --secs 600
//! ```
//!
//! The workload, all at once, on a runtime of 2 workers:
//! * an echo server (one task per connection) and [`CLIENTS`] client tasks, each opening a
//!   connection, exchanging [`REQUESTS_PER_CONNECTION`] 64-byte requests with it, checking
//!   every echo, closing it, and starting over;
//! * timer churn: rounds of [`TIMERS_PER_ROUND`] `call_later` callbacks with delays of 1 to
//!   50 ms, every other one cancelled at once;
//! * task churn: rounds of [`TASKS_PER_ROUND`] spawned tasks that sleep 1 to 50 ms, every other
//!   one cancelled at once;
//! * [`FOREIGN_THREADS`] threads outside the runtime submitting `call_soon_threadsafe`
//!   callbacks, [`CALLBACKS_PER_BATCH`] at a time;
//! * long jobs: every [`STALL_PERIOD`], one callback per worker that spins for [`STALL`], so
//!   that the workers are stuck now and then and their siblings and the spare workers rescue
//!   their sockets, timers and queues (the stuck-worker paths soak too, and the spares' threads
//!   start early in the run instead of at whatever moment the machine happens to stall one).
//!
//! Each second it prints the resident set (`VmRSS`, and its anonymous part `RssAnon`), the
//! allocator's bytes in use (glibc's count, its per-thread caches included), the bytes the
//! program holds (`live`: counted by this binary's global allocator), the number of open
//! descriptors, the process's thread count and what the workload did so far. Once a minute
//! after the warm-up it prints the size classes whose live bytes grew since then; with
//! `--track-from BYTES` it records the call site of every allocation at least that large and,
//! at the end, prints the sites whose live bytes grew (a diagnosis: the tracking itself
//! allocates). Memory is judged after the warm-up (`--warmup`, default three tenths of the run,
//! at most 180 s) and after the last change of the thread count (plus [`THREAD_SETTLE_SECS`]):
//! a spare worker or a blocking-pool thread starts when the runtime first needs it, which on a
//! loaded machine can be at any moment, and brings a stack and a malloc arena with it; that is
//! a bounded step, not the accumulation the soak is for. The drift is the mean anonymous RSS of
//! the last 10 samples against the mean of the first 10 of the judged span; the same is printed
//! for each measure. Descriptors are judged against the count before the load started (runtime
//! and listener up), once the load has stopped and every connection has closed. The run fails
//! (exit status 1) if the drift is 5 % or more, if descriptors are not back to that count, if
//! an echo came back wrong, or if a thread started so late that less than [`MIN_JUDGED_SECS`]
//! (or half the time after the warm-up, in a short run) is left.
//!
//! `--runtime tokio` or `--runtime smol` runs the same load on that runtime instead (through
//! the adapters of `eddy_benches::runtimes` and `eddy_benches::tcp`: a `call_later` is a task
//! that sleeps, a foreign callback a spawned task), judged the same way: what the same work
//! does to the process's memory with the same allocator, eddy's threads or theirs.
//!
//! Built with the `mimalloc` feature, the program allocates through mimalloc instead of
//! glibc's malloc. glibc keeps freed memory in per-thread caches and per-thread arenas and
//! gives pages back to the kernel only from the top of a heap, so its resident set rises
//! for many minutes while the program holds no more (docs/benchmark-log.md); mimalloc gives
//! freed pages back, so the resident set follows what the program holds. The `heap` column
//! is glibc's count either way: with mimalloc, only what bypasses the global allocator.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use eddy_benches::call_sites::{self, LiveSites};
use eddy_benches::counting::{live_bytes, Counting, LiveByClass, EXACT_CLASSES};
use eddy_benches::runtimes::HANG_TIMEOUT;
use eddy_benches::{block_on_timeout, Eddy, JoinTask, Lcg, Runtime, Smol, Tcp, Tokio};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Workers of the soaked runtime.
const WORKERS: usize = 2;
/// Client tasks, each with one connection open at a time.
const CLIENTS: usize = 16;
/// Requests each connection makes before it is closed and replaced.
const REQUESTS_PER_CONNECTION: usize = 50;
/// `call_later` callbacks set per round of timer churn (half of them cancelled).
const TIMERS_PER_ROUND: usize = 200;
/// Tasks spawned per round of task churn (half of them cancelled).
const TASKS_PER_ROUND: usize = 200;
/// Threads outside the runtime submitting callbacks.
const FOREIGN_THREADS: usize = 2;
/// Callbacks a foreign thread submits at a time, once a millisecond.
const CALLBACKS_PER_BATCH: usize = 50;
/// How often the workers are each given a long job.
const STALL_PERIOD: Duration = Duration::from_secs(2);
/// How long each long job spins: longer than the runtime's stuck graces.
const STALL: Duration = Duration::from_millis(20);
/// Pause between rounds of timer and task churn.
const ROUND_PAUSE: Duration = Duration::from_millis(10);
/// The default warm-up is three tenths of the run, at most this: run one part of the load at a
/// time (`--only`) and the timer and task parts are still filling their steady-state sizes
/// (free lists, buffer capacities) until about 150 s, while echo and callbacks are flat after
/// 30 s (docs/benchmark-log.md, "Soak run").
const MAX_DEFAULT_WARMUP_SECS: u64 = 180;

/// Allowed growth of resident memory after the warm-up.
const MAX_DRIFT: f64 = 0.05;
/// Seconds after a new thread appears before memory is judged: its arena and caches fill in
/// the first few seconds of its work.
const THREAD_SETTLE_SECS: usize = 20;
/// The shortest span worth a verdict on drift (in a run long enough to have it).
const MIN_JUDGED_SECS: usize = 120;
/// Samples averaged at each end of the judged interval.
const WINDOW: usize = 10;
const MSG: usize = 64;

/// What the workload did so far.
#[derive(Default)]
struct Counts {
    connections: AtomicU64,
    requests: AtomicU64,
    bad_echoes: AtomicU64,
    timers_fired: AtomicU64,
    timers_cancelled: AtomicU64,
    tasks_finished: AtomicU64,
    tasks_cancelled: AtomicU64,
    callbacks: AtomicU64,
}

impl Counts {
    fn line(&self) -> String {
        format!(
            "conns {} reqs {} timers {}+{}c tasks {}+{}c callbacks {}",
            self.connections.load(Relaxed),
            self.requests.load(Relaxed),
            self.timers_fired.load(Relaxed),
            self.timers_cancelled.load(Relaxed),
            self.tasks_finished.load(Relaxed),
            self.tasks_cancelled.load(Relaxed),
            self.callbacks.load(Relaxed),
        )
    }
}

/// What the per-second line says of a runtime's threads, besides their number.
trait Threads {
    fn describe(&self) -> String {
        String::new()
    }
}

impl Threads for Eddy {
    /// Which of the threads are spares and blocking-pool threads.
    fn describe(&self) -> String {
        let metrics = self.runtime().metrics();
        // A spare's thread starts the first time every worker is stuck at once; one that has
        // started has since parked, run, stolen, harvested or fired something.
        let spares_up = metrics
            .spares
            .iter()
            .filter(|w| {
                w.parks
                    + w.tasks_polled
                    + w.callbacks_run
                    + w.steal_operations
                    + w.io_events
                    + w.timers_fired
                    > 0
            })
            .count();
        format!(
            " (blocking {}, spares {spares_up})",
            metrics.blocking_threads
        )
    }
}

impl Threads for Tokio {}
impl Threads for Smol {}

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let runtime = args
        .iter()
        .position(|a| a == "--runtime")
        .and_then(|i| args.get(i + 1))
        .map_or("eddy", String::as_str);
    match runtime {
        "eddy" => soak::<Eddy>(&args),
        "tokio" => soak::<Tokio>(&args),
        "smol" => soak::<Smol>(&args),
        other => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("--runtime must be eddy, tokio or smol, not {other:?}"),
        )),
    }
}

/// The whole run on runtime `R`; exits with status 1 if the run fails.
fn soak<R: Tcp + Threads>(args: &[String]) -> io::Result<()> {
    let arg = |name: &str| -> Option<u64> {
        let i = args.iter().position(|a| a == name)?;
        args.get(i + 1)?.parse().ok()
    };
    let secs = arg("--secs").unwrap_or(60);
    let warmup = arg("--warmup").unwrap_or((secs * 3 / 10).min(MAX_DEFAULT_WARMUP_SECS));
    if secs < warmup + 2 * WINDOW as u64 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "--secs must be at least --warmup + {} (two windows of samples)",
                2 * WINDOW
            ),
        ));
    }

    // `--track-from BYTES`: record the call site of every allocation at least that large, and
    // at the end print the sites whose live bytes grew after the warm-up (slow: a diagnosis,
    // not the recorded run).
    let track_from = arg("--track-from");
    if let Some(min) = track_from {
        call_sites::track_from(min as usize);
    }
    let rt = R::build(WORKERS);
    let handle = rt.handle();
    let counts = Arc::new(Counts::default());
    let stop = Arc::new(AtomicBool::new(false));
    let addr = rt
        .run(async {
            let listener = R::bind().await?;
            let addr = R::local_addr(&listener)?;
            R::spawn(serve::<R>(listener)).detach();
            io::Result::Ok(addr)
        })
        .map_err(io::Error::other)??;
    let fds_before = open_fds()?;
    println!(
        "soak: {} for {secs} s ({warmup} s warm-up), {} fds before the load",
        R::NAME,
        fds_before
    );

    // `--only PART` runs one part of the load alone, to find which one holds on to memory.
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str);
    let runs = |part: &str| only.is_none_or(|o| o == part);
    let mut load = Vec::new();
    if runs("echo") {
        for c in 0..CLIENTS {
            load.push(R::spawn_remote(
                &handle,
                client::<R>(addr, c as u64, counts.clone(), stop.clone()),
            ));
        }
    }
    if runs("timers") {
        load.push(R::spawn_remote(
            &handle,
            timer_churn::<R>(counts.clone(), stop.clone()),
        ));
    }
    if runs("tasks") {
        load.push(R::spawn_remote(
            &handle,
            task_churn::<R>(counts.clone(), stop.clone()),
        ));
    }
    let foreign_threads = if runs("callbacks") {
        FOREIGN_THREADS
    } else {
        0
    };
    let mut foreign: Vec<_> = (0..foreign_threads)
        .map(|_| {
            let (handle, counts, stop) = (handle.clone(), counts.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Relaxed) {
                    for _ in 0..CALLBACKS_PER_BATCH {
                        let counts = counts.clone();
                        R::call_soon_threadsafe(&handle, move || {
                            counts.callbacks.fetch_add(1, Relaxed);
                        });
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
        })
        .collect();
    if runs("stalls") {
        let (handle, stop) = (handle.clone(), stop.clone());
        foreign.push(std::thread::spawn(move || {
            while !stop.load(Relaxed) {
                for _ in 0..WORKERS {
                    R::call_soon_threadsafe(&handle, || spin(STALL));
                }
                std::thread::sleep(STALL_PERIOD);
            }
        }));
    }

    // One sample a second, on the second.
    let start = Instant::now();
    // Per second: [VmRSS, RssAnon, heap in use, live], in kB.
    // Allocated in full now: a vector that doubled during the run would itself be growth.
    let mut samples: Vec<[u64; 4]> = Vec::with_capacity(secs as usize);
    let mut threads_seen = threads()?;
    // Index of the first sample after the thread count last changed, if it did.
    let mut threads_changed_at = None;
    // Live allocations by size class at the end of the warm-up, to show, once a minute, which
    // sizes the program holds more of since then.
    let mut live_at_warmup = None;
    let mut sites_at_warmup = None;
    for s in 1..=secs {
        let due = start + Duration::from_secs(s);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let (all, anon) = rss_kb()?;
        let heap = heap_in_use_kb();
        let live = live_bytes().max(0) as u64 / 1024;
        let now_threads = threads()?;
        if now_threads != threads_seen {
            threads_seen = now_threads;
            threads_changed_at = Some(samples.len());
        }
        samples.push([all, anon, heap, live]);
        println!(
            "{s:>5} s  rss {all:>6} kB  anon {anon:>6} kB  heap {heap:>6} kB  live {live:>6} kB  fds {:>4}  threads {now_threads:>2}{}  {}",
            open_fds()?,
            rt.describe(),
            counts.line()
        );
        if s == warmup {
            live_at_warmup = Some(LiveByClass::now());
            if track_from.is_some() {
                sites_at_warmup = Some(LiveSites::now());
            }
        }
        if let Some(earlier) = live_at_warmup
            .as_ref()
            .filter(|_| s > warmup && s % 60 == 0)
        {
            println!(
                "{s:>5} s  live growth since warm-up: {}",
                growth_line(earlier)
            );
        }
    }

    // Stop the load, let every connection close, and count descriptors again.
    stop.store(true, Relaxed);
    for t in load {
        match block_on_timeout(t, HANG_TIMEOUT) {
            Some(Ok(())) => {}
            Some(Err(e)) => println!("soak: a load task failed: {e}"),
            None => println!("soak: a load task did not stop within {HANG_TIMEOUT:?}"),
        }
    }
    foreign.into_iter().for_each(|t| t.join().unwrap());
    let settle = Instant::now() + Duration::from_secs(10);
    let mut fds_after = open_fds()?;
    while fds_after != fds_before && Instant::now() < settle {
        std::thread::sleep(Duration::from_millis(10));
        fds_after = open_fds()?;
    }

    // Drift of each measure: the mean of the last WINDOW samples against the mean of the
    // first WINDOW of the judged span, which starts after the warm-up and after the last new
    // thread has settled.
    let settled = threads_changed_at.map_or(0, |i| i + THREAD_SETTLE_SECS);
    let judged_from = (warmup as usize).max(settled);
    let judged_secs = samples.len().saturating_sub(judged_from);
    let changed = match threads_changed_at {
        Some(i) => format!("the last change at {} s", i + 1),
        None => "no change during the load".to_string(),
    };
    println!(
        "soak: {threads_seen} threads at the end, {changed}; judged from {judged_from} s ({judged_secs} s)"
    );
    let needed = MIN_JUDGED_SECS
        .min((secs - warmup) as usize / 2)
        .max(2 * WINDOW);
    if judged_secs < needed {
        drop(rt);
        println!(
            "soak: FAIL (a thread started too late to judge drift: less than {needed} s left; run longer)"
        );
        std::process::exit(1);
    }
    let judged = &samples[judged_from..];
    let mean =
        |w: &[[u64; 4]], k: usize| w.iter().map(|s| s[k]).sum::<u64>() as f64 / w.len() as f64;
    let drift = |k: usize| {
        let (first, last) = (
            mean(&judged[..WINDOW], k),
            mean(&judged[judged.len() - WINDOW..], k),
        );
        (first, last, last / first - 1.0)
    };
    let bad = counts.bad_echoes.load(Relaxed);
    println!("soak: {}", counts.line());
    for (k, what) in ["rss", "anonymous rss", "heap in use", "live"]
        .iter()
        .enumerate()
    {
        let (first, last, d) = drift(k);
        println!(
            "soak: {what} after warm-up {first:.0} kB, at the end {last:.0} kB (drift {:+.2} %)",
            d * 100.0
        );
    }
    println!("soak: fds {fds_before} before, {fds_after} after; {bad} bad echoes");
    if let Some(earlier) = &sites_at_warmup {
        println!("soak: call sites whose live bytes grew after the warm-up:");
        LiveSites::now().report_growth(earlier, 12);
    }
    let (_, _, anon_drift) = drift(1);
    drop(rt);
    let ok = anon_drift < MAX_DRIFT && fds_after == fds_before && bad == 0;
    println!("soak: {}", if ok { "PASS" } else { "FAIL" });
    std::process::exit(if ok { 0 } else { 1 });
}

/// The size classes whose live bytes grew most since `earlier`, as one line.
fn growth_line(earlier: &LiveByClass) -> String {
    let grown = LiveByClass::now().grown_since(earlier, 8);
    if grown.is_empty() {
        return "none".to_string();
    }
    grown
        .iter()
        .map(|&(size, count, bytes)| {
            let range = if size < EXACT_CLASSES { "" } else { "+" };
            format!("{size}{range} B: {count:+} ({bytes:+} B)")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The echo server: one task per connection, until the peer closes.
async fn serve<R: Tcp>(listener: R::Listener) {
    loop {
        let Ok(mut s) = R::accept(&listener).await else {
            continue;
        };
        R::spawn(async move {
            let mut buf = [0u8; 4096];
            loop {
                match R::read(&mut s, &mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        if R::write_all(&mut s, &buf[..n]).await.is_err() {
                            return;
                        }
                    }
                }
            }
        })
        .detach();
    }
}

/// One client: connections opened, used and closed, one after the other, until `stop`.
async fn client<R: Tcp>(
    addr: SocketAddr,
    seed: u64,
    counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
) -> io::Result<()> {
    let mut rng = Lcg::new(seed);
    while !stop.load(Relaxed) {
        let mut s = R::connect(addr).await?;
        counts.connections.fetch_add(1, Relaxed);
        let mut out = [0u8; MSG];
        let mut back = [0u8; MSG];
        for _ in 0..REQUESTS_PER_CONNECTION {
            out.iter_mut().for_each(|b| *b = rng.next() as u8);
            R::write_all(&mut s, &out).await?;
            R::read_exact(&mut s, &mut back).await?;
            if back != out {
                counts.bad_echoes.fetch_add(1, Relaxed);
            }
            counts.requests.fetch_add(1, Relaxed);
        }
    }
    Ok(())
}

/// Rounds of timers set and (every other one) cancelled at once.
async fn timer_churn<R: Runtime>(counts: Arc<Counts>, stop: Arc<AtomicBool>) -> io::Result<()> {
    // Counts timers registered (the adapters' hook for benchmarks that wait on it); unread here.
    static ARMED: AtomicUsize = AtomicUsize::new(0);
    let mut rng = Lcg::new(7);
    while !stop.load(Relaxed) {
        for i in 0..TIMERS_PER_ROUND {
            let delay = Duration::from_millis(1 + rng.next() % 50);
            let c = counts.clone();
            let timer = R::call_later(delay, &ARMED, move || {
                c.timers_fired.fetch_add(1, Relaxed);
            });
            if i % 2 == 1 {
                R::cancel_timer(timer);
                counts.timers_cancelled.fetch_add(1, Relaxed);
            } else {
                R::keep_timer(timer);
            }
        }
        R::sleep(ROUND_PAUSE).await;
    }
    Ok(())
}

/// Rounds of tasks spawned and (every other one) cancelled at once.
async fn task_churn<R: Runtime>(counts: Arc<Counts>, stop: Arc<AtomicBool>) -> io::Result<()> {
    let mut rng = Lcg::new(11);
    while !stop.load(Relaxed) {
        let mut tasks = Vec::with_capacity(TASKS_PER_ROUND);
        for _ in 0..TASKS_PER_ROUND {
            let delay = Duration::from_millis(1 + rng.next() % 50);
            let c = counts.clone();
            tasks.push(R::spawn(async move {
                R::sleep(delay).await;
                c.tasks_finished.fetch_add(1, Relaxed);
            }));
        }
        for (i, t) in tasks.into_iter().enumerate() {
            if i % 2 == 1 {
                t.cancel();
                counts.tasks_cancelled.fetch_add(1, Relaxed);
            } else {
                t.detach(); // it finishes on its own
            }
        }
        R::sleep(ROUND_PAUSE).await;
    }
    Ok(())
}

/// This process's resident set, in kB: all of it (`VmRSS`), and its anonymous part
/// (`RssAnon`: heap, stacks, the allocator's arenas; not the pages of the binary's code).
fn rss_kb() -> io::Result<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .ok_or_else(|| io::Error::other(format!("no {name} in /proc/self/status")))
    };
    Ok((field("VmRSS:")?, field("RssAnon:")?))
}

/// Bytes the allocator has handed out and not had back (glibc's `mallinfo2`), in kB: what
/// the program holds, without the allocator's own free lists and fragmentation.
fn heap_in_use_kb() -> u64 {
    // SAFETY: `mallinfo2` only reads the allocator's statistics.
    let info = unsafe { libc::mallinfo2() };
    (info.uordblks + info.hblkhd) as u64 / 1024
}

/// Threads this process has: the runtime's workers, monitor, spares and blocking pool, the
/// foreign submitters and the main thread.
fn threads() -> io::Result<usize> {
    Ok(std::fs::read_dir("/proc/self/task")?.count())
}

/// Descriptors this process has open.
fn open_fds() -> io::Result<usize> {
    Ok(std::fs::read_dir("/proc/self/fd")?.count())
}

/// Keeps the calling thread busy for `d`: a long job that does not yield.
fn spin(d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}
