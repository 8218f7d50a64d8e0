//! Shared helpers for eddy's integration, stress and fault tests (`tests/tests/*.rs`).
//!
//! * [`rt`]: a runtime with `n` workers.
//! * [`PATIENCE`], [`HeldJob`]: synchronise with the runtime instead of sleeping: wait
//!   generously for what must happen, and hold a worker in a job the test releases.
//! * [`DropCounter`] / [`DropToken`]: count how many values were dropped; [`PanicOnDrop`]: a
//!   destructor that fails.
//! * [`with_deadline`]: run a test body on its own thread and fail (instead of hanging) if it
//!   does not finish in time; [`block_on_within`] and [`run`]: the same for a future on a
//!   runtime.
//! * [`wait_until`], [`spin_for`], [`Rng`]: small timing and randomness utilities.
//! * [`one_at_a_time`], [`wait_until_all_workers_sleep`]: for tests that count what
//!   workers do.
//! * [`ExceptionLog`]: an exception handler that records what it is given.
//! * [`quiet_expected_panics`]: a panic hook that keeps expected panics out of the output.
//! * [`Anchors`]: run code on a chosen worker of a runtime.
//! * [`ServerThread`]: a server on its own runtime and thread, stopped by the test;
//!   [`reset`]: close a connection with a reset; [`assert_echo_server_serves`].

/// The server guide, whose snippets run as this crate's doctests.
#[cfg(doctest)]
#[doc = include_str!("../../docs/servers.md")]
pub struct ServersGuide;

/// The guide for asyncio users, whose snippets run as this crate's doctests.
#[cfg(doctest)]
#[doc = include_str!("../../docs/asyncio.md")]
pub struct AsyncioGuide;

use std::any::Any;
use std::future::Future;
use std::panic::{self, PanicHookInfo};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Once};
use std::time::{Duration, Instant};

/// How long a test waits for something that must happen before it calls it a failure.
/// Generous on purpose: on a loaded 2-core machine a thread may wait several scheduler
/// slices for a CPU, and a test must never fail because of that. Nothing waits this long
/// unless the behaviour under test is broken.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A runtime with `workers` workers and the default settings.
pub fn rt(workers: usize) -> eddy::Runtime {
    eddy::Builder::new()
        .workers(workers)
        .build()
        .expect("build a runtime")
}

/// A job that a test holds on whichever thread runs it: the job reports that it started,
/// then blocks until the test calls [`release`](HeldJob::release) (or drops the `HeldJob`,
/// so a failing test never leaves a worker blocked and `drop(runtime)` waiting for it).
///
/// ```
/// let rt = eddy_tests::rt(2);
/// let (held, job) = eddy_tests::HeldJob::new();
/// rt.handle().call_soon_threadsafe(job).unwrap();
/// held.wait_started(); // one worker is now busy, for as long as the test wants
/// held.release();
/// ```
#[derive(Debug)]
pub struct HeldJob {
    started: std::sync::mpsc::Receiver<std::thread::ThreadId>,
    release: Mutex<Option<std::sync::mpsc::Sender<()>>>,
}

impl HeldJob {
    /// The handle the test keeps, and the job to hand to the runtime.
    pub fn new() -> (HeldJob, impl FnOnce() + Send + 'static) {
        let (started_tx, started) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let job = move || {
            let _ = started_tx.send(std::thread::current().id());
            // Returns on `release` or when the test drops its half.
            let _ = released.recv();
        };
        let held = HeldJob {
            started,
            release: Mutex::new(Some(release)),
        };
        (held, job)
    }

    /// Waits (up to [`PATIENCE`]) until the job runs; returns the thread that runs it.
    pub fn wait_started(&self) -> std::thread::ThreadId {
        self.started
            .recv_timeout(PATIENCE)
            .expect("the held job never started")
    }

    /// Lets the job return.
    pub fn release(&self) {
        self.release.lock().unwrap().take();
    }
}

/// Counts drops of the [`DropToken`]s it handed out.
#[derive(Debug, Clone, Default)]
pub struct DropCounter(Arc<AtomicUsize>);

impl DropCounter {
    /// A counter at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// A token that adds one to this counter when it is dropped.
    pub fn token(&self) -> DropToken {
        DropToken(self.0.clone())
    }

    /// Tokens dropped so far.
    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// Adds one to its [`DropCounter`] when dropped.
#[derive(Debug)]
pub struct DropToken(Arc<AtomicUsize>);

impl DropToken {
    /// Does nothing; lets a closure or future "use" (and so capture) the token.
    pub fn touch(&self) {}
}

impl Drop for DropToken {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Runs `fut` on `rt` (`block_on` on a thread of its own) and returns its output; fails the
/// test instead of hanging if it has not finished after `limit`, a guard that does not depend
/// on the runtime's own timers.
///
/// ```
/// let four = eddy_tests::block_on_within(eddy_tests::rt(2), eddy_tests::PATIENCE, async { 2 + 2 });
/// assert_eq!(four, 4);
/// ```
pub fn block_on_within<T, F>(rt: eddy::Runtime, limit: Duration, fut: F) -> T
where
    T: Send + 'static,
    F: Future<Output = T> + Send + 'static,
{
    with_deadline(limit, move || rt.block_on(fut))
}

/// [`block_on_within`] on a fresh runtime of 2 workers, within [`PATIENCE`]: the usual body
/// of a test that needs a runtime and nothing special from it.
///
/// ```
/// let n = eddy_tests::run(async { eddy::spawn(async { 7 }).await.unwrap() });
/// assert_eq!(n, 7);
/// ```
pub fn run<T, F>(fut: F) -> T
where
    T: Send + 'static,
    F: Future<Output = T> + Send + 'static,
{
    block_on_within(rt(2), PATIENCE, fut)
}

/// Panics when dropped, with a message that starts with [`EXPECTED`] and names what failed
/// (`"{EXPECTED} in {what}"`): a destructor of user code that fails. It does not panic while
/// its thread is already unwinding (that would abort the test binary).
///
/// ```
/// let bomb = eddy_tests::PanicOnDrop("a destructor");
/// let err = std::panic::catch_unwind(move || drop(bomb)).unwrap_err();
/// assert_eq!(eddy_tests::panic_text(&*err), "[expected panic] in a destructor");
/// ```
#[derive(Debug)]
pub struct PanicOnDrop(pub &'static str);

impl PanicOnDrop {
    /// The panic message the drop of `PanicOnDrop(what)` raises.
    pub fn message(what: &str) -> String {
        format!("{EXPECTED} in {what}")
    }
}

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("{}", Self::message(self.0));
        }
    }
}

/// Runs `f` on a fresh thread and returns its result. Panics if `f` has not returned after
/// `limit` (the thread is left behind: the test has failed anyway), and re-raises a panic of
/// `f` on the calling thread.
pub fn with_deadline<R, F>(limit: Duration, f: F) -> R
where
    R: Send + 'static,
    F: FnOnce() -> R + Send + 'static,
{
    struct Signal(std::sync::mpsc::Sender<()>);
    impl Drop for Signal {
        fn drop(&mut self) {
            let _ = self.0.send(());
        }
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let body = std::thread::Builder::new()
        .name("test-body".into())
        .spawn(move || {
            let _signal = Signal(tx);
            f()
        })
        .expect("spawn test body");
    if rx.recv_timeout(limit).is_err() {
        panic!("test body did not finish within {limit:?}: hang");
    }
    match body.join() {
        Ok(r) => r,
        Err(payload) => panic::resume_unwind(payload),
    }
}

/// Serialises the tests of one test binary that measure where work lands or what workers
/// do: another test keeping the CPUs busy would decide the outcome instead. Hold the guard
/// for the whole test.
pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Waits up to `limit` until every worker of `rt` is asleep (a park in progress is counted,
/// its wake-up not yet). True if they all are.
pub fn wait_until_all_workers_sleep(rt: &eddy::Runtime, limit: Duration) -> bool {
    wait_until(limit, || {
        rt.metrics()
            .workers
            .iter()
            .all(|w| w.parks == w.wakeups + 1)
    })
}

/// Polls `cond` every millisecond until it holds (true) or `limit` passes (false).
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return cond();
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Busy-waits for `d` (CPU work that does not yield the thread).
pub fn spin_for(d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

/// A tiny deterministic xorshift generator (no `rand` dependency).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a non-zero seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }

    /// The next pseudo-random number.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Fisher-Yates shuffle.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

/// The text of a panic payload (`&str` or `String`), or `"<non-string panic>"`.
pub fn panic_text(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic>".to_string()
    }
}

/// Marker to put in panic messages that a test provokes on purpose.
pub const EXPECTED: &str = "[expected panic]";

/// A non-string panic payload (for `std::panic::panic_any`) that the quiet hook ignores.
#[derive(Debug, Clone, Copy)]
pub struct ExpectedPayload;

/// Messages of panics that eddy raises on misuse and that tests provoke on purpose.
const EXPECTED_EDDY_PANICS: &[&str] = &[
    EXPECTED,
    "this event loop is already running",
    "no eddy runtime on this thread",
    "spawn_local must be called",
];

/// Installs (once per test binary) a panic hook that stays silent for panics whose message
/// starts with [`EXPECTED`] or one of eddy's misuse messages, and delegates every other panic to
/// the default hook. Keeps thousands of provoked panics from flooding (and slowing) the run.
pub fn quiet_expected_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = panic::take_hook();
        panic::set_hook(Box::new(move |info: &PanicHookInfo<'_>| {
            if info.payload().is::<ExpectedPayload>() {
                return;
            }
            let text = panic_text(info.payload());
            // At the start only: an assertion that prints such a message in its own text
            // (a report it did not expect, say) is a real failure and must be seen.
            if EXPECTED_EDDY_PANICS.iter().any(|m| text.starts_with(m)) {
                return;
            }
            default(info);
        }));
    });
}

/// What an exception handler was given, copied out of the `ExceptionContext`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// `ExceptionContext::message`.
    pub message: String,
    /// `ExceptionContext::panic_message`.
    pub panic: Option<String>,
    /// `ExceptionContext::location` as (file, line).
    pub location: Option<(String, u32)>,
    /// `ExceptionContext::task_id`.
    pub task: Option<u64>,
    /// The `Display` text of the context.
    pub display: String,
}

/// An exception handler that records every report.
#[derive(Debug, Clone, Default)]
pub struct ExceptionLog(Arc<Mutex<Vec<Report>>>);

impl ExceptionLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// The handler to pass to `Builder::exception_handler`.
    pub fn handler(&self) -> impl Fn(&eddy::ExceptionContext) + Send + Sync + 'static {
        let log = self.0.clone();
        move |ctx: &eddy::ExceptionContext| {
            let report = Report {
                message: ctx.message().to_string(),
                panic: ctx.panic_message().map(str::to_string),
                location: ctx.location().map(|l| (l.file().to_string(), l.line())),
                task: ctx.task_id().map(eddy::TaskId::as_u64),
                display: ctx.to_string(),
            };
            log.lock().unwrap().push(report);
        }
    }

    /// A copy of the reports so far.
    pub fn reports(&self) -> Vec<Report> {
        self.0.lock().unwrap().clone()
    }

    /// Reports so far.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// True when nothing was reported.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reports whose message is `message`.
    pub fn count(&self, message: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.message == message)
            .count()
    }
}

/// A future to run on a chosen worker (it may be `!Send`).
pub type LocalJob = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()>>> + Send>;

/// One pinned ("anchor") task per worker, fed through a channel: lets a test run code on a
/// chosen worker thread. Needs a runtime built with `thread_name(prefix)`, so that a worker's
/// index can be read from its thread name `"{prefix}-{index}"`.
#[derive(Debug)]
pub struct Anchors {
    senders: Vec<async_channel::Sender<LocalJob>>,
}

impl Anchors {
    /// Places one anchor on each of the `workers` workers of `rt` (whose threads are named
    /// `"{prefix}-N"`). Panics if that takes more than a few seconds.
    pub fn new(rt: &eddy::Runtime, prefix: &str, workers: usize) -> Self {
        let slots: Arc<Mutex<Vec<Option<async_channel::Sender<LocalJob>>>>> =
            Arc::new(Mutex::new(vec![None; workers]));
        let handle = rt.handle();
        let end = Instant::now() + Duration::from_secs(10);
        let prefix = format!("{prefix}-");
        while slots.lock().unwrap().iter().any(Option::is_none) {
            assert!(
                Instant::now() < end,
                "could not place an anchor on every worker"
            );
            // A few callbacks that each keep their worker busy for a moment, so that the
            // others get work too.
            for _ in 0..workers * 2 {
                let slots = slots.clone();
                let prefix = prefix.clone();
                handle
                    .call_soon_threadsafe(move || {
                        let name = std::thread::current().name().unwrap_or("").to_string();
                        // A spare standing in for busy workers is not one of them.
                        let Some(index) = name
                            .strip_prefix(&prefix)
                            .and_then(|i| i.parse::<usize>().ok())
                        else {
                            return;
                        };
                        let mut slots = slots.lock().unwrap();
                        if slots[index].is_none() {
                            let (tx, rx) = async_channel::unbounded::<LocalJob>();
                            let anchor = eddy::spawn_local(async move {
                                while let Ok(job) = rx.recv().await {
                                    job().await;
                                }
                            });
                            drop(anchor); // detached
                            slots[index] = Some(tx);
                        }
                        drop(slots);
                        spin_for(Duration::from_millis(2));
                    })
                    .expect("runtime is open");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let senders = Arc::try_unwrap(slots)
            .map(|m| m.into_inner().unwrap())
            .unwrap_or_else(|arc| arc.lock().unwrap().clone())
            .into_iter()
            .map(|s| s.expect("anchor"))
            .collect();
        Anchors { senders }
    }

    /// Runs `job()` (a possibly `!Send` future) inside worker `index`'s anchor task. Jobs
    /// given to one anchor run one after the other.
    pub fn run<F, Fut>(&self, index: usize, job: F)
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let job: LocalJob = Box::new(move || Box::pin(job()));
        self.senders[index]
            .try_send(job)
            .unwrap_or_else(|_| panic!("anchor {index} is gone"));
    }
}

/// Environment variable that marks a test binary started by [`run_child_test`].
pub const CHILD_ENV: &str = "EDDY_TESTS_CHILD";

/// True inside a child process started by [`run_child_test`].
pub fn is_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// Runs the (ignored) test `name` of the current test binary in a child process, for tests
/// whose failure mode is an abort of the whole process, and returns its exit status and its
/// output (stdout and stderr together). The child test should return at once unless
/// [`is_child`] is true, so that `cargo test -- --ignored` does not run it in-process.
pub fn run_child_test(name: &str, limit: Duration) -> (std::process::ExitStatus, String) {
    let exe = std::env::current_exe().expect("current test binary");
    let mut child = std::process::Command::new(exe)
        .args([
            name,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start child test process");
    let end = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for child") {
            break status;
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("child test {name} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let out = child.wait_with_output().expect("child output");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (status, text)
}

/// Runs the (ignored) test `name` of the current test binary in a child process with
/// [`run_child_test`], allowing it three times [`PATIENCE`], and fails unless it passed,
/// showing its output. For tests whose failure mode takes the whole process down (a fatal
/// signal, an abort) or that need the process to themselves.
pub fn assert_child_test_passes(name: &str) {
    let (status, output) = run_child_test(name, PATIENCE * 3);
    assert!(
        status.success(),
        "the child test {name} failed ({status}):\n{output}"
    );
}

/// A round trip through the echo server at `addr` from the calling thread, with plain
/// blocking sockets (so it does not depend on the runtime under test to run the client):
/// fails unless the server accepts and echoes within [`PATIENCE`].
pub fn assert_echo_server_serves(addr: std::net::SocketAddr) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect to the echo server");
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s.write_all(b"still there?").unwrap();
    let mut back = [0u8; 12];
    s.read_exact(&mut back).expect("no echo");
    assert_eq!(&back, b"still there?");
}

/// Closes `s` with a reset (`SO_LINGER` of zero): the peer's next read fails with
/// `ConnectionReset` instead of seeing an orderly end of stream.
pub fn reset(s: eddy::net::TcpStream) {
    s.set_linger(Some(Duration::ZERO))
        .expect("set SO_LINGER to zero");
    drop(s);
}

/// A server on its own runtime ([`rt`]`(2)`) on its own thread, listening on 127.0.0.1, that
/// the test stops: [`begin_stop`](ServerThread::begin_stop) resolves the shutdown future the
/// server was given, [`stop`](ServerThread::stop) also waits for the server and returns what
/// it returned. Dropping it stops the server too, so a failing test leaves no thread serving.
///
/// ```
/// use eddy::net::TcpListener;
///
/// let server = eddy_tests::ServerThread::start(|listener: TcpListener, shutdown| async move {
///     let mut accepted = 0;
///     let mut shutdown = shutdown;
///     loop {
///         let accept = async { Some(listener.accept().await) };
///         let stop = async { (&mut shutdown).await; None };
///         match futures_lite::future::or(accept, stop).await {
///             Some(Ok(_)) => accepted += 1,
///             Some(Err(_)) => {}
///             None => return accepted,
///         }
///     }
/// });
/// std::net::TcpStream::connect(server.addr()).unwrap();
/// assert!(server.stop() <= 1);
/// ```
#[derive(Debug)]
pub struct ServerThread<T> {
    addr: std::net::SocketAddr,
    stop: Option<async_channel::Sender<()>>,
    thread: Option<std::thread::JoinHandle<T>>,
}

impl<T: Send + 'static> ServerThread<T> {
    /// Binds a listener on `127.0.0.1:0` on a new runtime and thread and runs
    /// `serve(listener, shutdown)` there; returns once the listener is bound.
    pub fn start<S, F>(serve: S) -> ServerThread<T>
    where
        S: FnOnce(eddy::net::TcpListener, Shutdown) -> F + Send + 'static,
        F: Future<Output = T>,
    {
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = async_channel::bounded::<()>(1);
        let thread = std::thread::spawn(move || {
            let rt = rt(2);
            rt.block_on(async move {
                let listener = eddy::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind 127.0.0.1:0");
                addr_tx.send(listener.local_addr().unwrap()).unwrap();
                serve(listener, Shutdown::new(stopped)).await
            })
        });
        let addr = addr_rx
            .recv_timeout(PATIENCE)
            .expect("the server never listened");
        ServerThread {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Where the server listens.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// Resolves the server's shutdown future and returns at once.
    pub fn begin_stop(&mut self) {
        self.stop.take();
    }

    /// Resolves the server's shutdown future and waits for the server to return.
    pub fn stop(mut self) -> T {
        self.stop.take();
        self.thread
            .take()
            .unwrap()
            .join()
            .expect("the server thread panicked")
    }
}

impl<T> Drop for ServerThread<T> {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The future a [`ServerThread`]'s server is given: it resolves once the test stops the
/// server (or drops the `ServerThread`).
pub struct Shutdown(Pin<Box<dyn Future<Output = ()> + Send>>);

impl Shutdown {
    fn new(stopped: async_channel::Receiver<()>) -> Shutdown {
        Shutdown(Box::pin(async move {
            let _ = stopped.recv().await;
        }))
    }
}

impl std::fmt::Debug for Shutdown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Shutdown")
    }
}

impl Future for Shutdown {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        self.0.as_mut().poll(cx)
    }
}
