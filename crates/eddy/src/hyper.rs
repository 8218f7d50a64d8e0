//! hyper on eddy, with no tokio traits in between (feature `hyper`).
//!
//! hyper 1 leaves the runtime to its user through four traits, all implemented here:
//!
//! * [`hyper::rt::Read`] and [`hyper::rt::Write`] for [`TcpStream`](crate::net::TcpStream)
//!   and [`UnixStream`](crate::net::UnixStream) (and their references), in `net::conn`: a
//!   read goes straight into hyper's uninitialised buffer, with no copy and no zeroing;
//! * [`hyper::rt::Executor`] as [`EddyExecutor`]: what HTTP/2 spawns (one task per stream,
//!   the connection's background work) becomes an eddy task;
//! * [`hyper::rt::Timer`] as [`EddyTimer`]: hyper's timeouts (`header_read_timeout`, HTTP/2
//!   keep-alive) are eddy timers, on eddy's clock, so a runtime started paused pauses them
//!   too.
//!
//! ```
//! use http_body_util::Full;
//! use hyper::body::{Bytes, Incoming};
//! use hyper::{Request, Response};
//!
//! async fn hello(_: Request<Incoming>) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
//!     Ok(Response::new(Full::new(Bytes::from_static(b"hello"))))
//! }
//!
//! let rt = eddy::Runtime::new()?;
//! rt.block_on(async {
//!     let listener = eddy::net::TcpListener::bind("127.0.0.1:0").await?;
//!     let addr = listener.local_addr()?;
//!     // The server: one task per connection.
//!     let _server = eddy::spawn(async move {
//!         while let Ok((stream, _)) = listener.accept().await {
//!             let conn = hyper::server::conn::http1::Builder::new()
//!                 .timer(eddy::hyper::EddyTimer)
//!                 .serve_connection(stream, hyper::service::service_fn(hello));
//!             drop(eddy::spawn(conn));
//!         }
//!     });
//!     // A client on the same runtime.
//!     let stream = eddy::net::TcpStream::connect(addr).await?;
//!     let (mut sender, conn) = hyper::client::conn::http1::handshake(stream).await.unwrap();
//!     drop(eddy::spawn(conn));
//!     sender.ready().await.unwrap();
//!     let request = Request::get("/").body(http_body_util::Empty::<Bytes>::new()).unwrap();
//!     let response = sender.send_request(request).await.unwrap();
//!     assert_eq!(response.status(), 200);
//!     Ok::<(), std::io::Error>(())
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```

use std::error::Error as StdError;
use std::future::{poll_fn, Future};
use std::io;
use std::os::fd::AsRawFd;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use hyper::body::{Body, Incoming};
use hyper::server::conn::{http1, http2};
use hyper::service::HttpService;

use crate::net::conn::{Conn, StreamSocket};
use crate::net::TcpListener;
use crate::notify::Notify;
use crate::reactor::Direction;

/// Runs the futures hyper hands it (HTTP/2 streams, connection tasks) as eddy tasks,
/// detached: hyper keeps track of them itself.
///
/// ```
/// let rt = eddy::Runtime::new()?;
/// rt.block_on(async {
///     let builder = hyper::server::conn::http2::Builder::new(eddy::hyper::EddyExecutor);
///     # drop(builder);
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # Panics
///
/// `execute` panics outside an eddy runtime's threads, as [`crate::spawn`] does.
#[derive(Debug, Clone, Copy, Default)]
pub struct EddyExecutor;

impl<F> hyper::rt::Executor<F> for EddyExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        drop(crate::spawn(future));
    }
}

/// hyper's timer on eddy's timers and clock ([`crate::time()`]).
///
/// ```
/// let mut builder = hyper::server::conn::http1::Builder::new();
/// builder
///     .timer(eddy::hyper::EddyTimer)
///     .header_read_timeout(std::time::Duration::from_secs(5));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct EddyTimer;

/// An eddy sleep as hyper's `Sleep`.
struct HyperSleep(crate::time::Sleep);

impl Future for HyperSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl hyper::rt::Sleep for HyperSleep {}

impl hyper::rt::Timer for EddyTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(HyperSleep(crate::time::sleep(duration)))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(HyperSleep(crate::time::sleep_until(deadline)))
    }

    fn now(&self) -> Instant {
        crate::time()
    }
}

/// Reads from `conn` into the unfilled part of hyper's buffer, which may be uninitialised:
/// the bytes go straight from the kernel into it (`read(2)` on the raw pointer), since a
/// `&mut [u8]` over memory not yet written would be undefined behaviour, and zeroing hyper's
/// buffer before each read would cost a pass over it.
pub(crate) fn poll_read_cursor<S>(
    conn: &Conn<S>,
    cx: &mut Context<'_>,
    mut buf: hyper::rt::ReadBufCursor<'_>,
) -> Poll<io::Result<()>>
where
    S: StreamSocket,
    for<'a> &'a S: std::io::Read + std::io::Write,
{
    // SAFETY: `as_mut` hands out the cursor's unfilled part, which may be uninitialised; we
    // only take its pointer and length, never read it nor form a `&mut [u8]` over it, and
    // the kernel writes at most `len` bytes through the pointer below.
    let unfilled = unsafe { buf.as_mut() };
    let (ptr, len) = (unfilled.as_mut_ptr().cast::<libc::c_void>(), unfilled.len());
    let n = ready!(conn.0.poll_stream(Direction::Read, cx, len, &mut |s: &S| {
        // SAFETY: `ptr` is valid for writes of `len` bytes (the cursor's unfilled part,
        // borrowed for the whole call), and `read(2)` writes at most `len` bytes to it.
        let n = unsafe { libc::read(s.as_fd().as_raw_fd(), ptr, len) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }))?;
    // SAFETY: `read(2)` returned `n <= len`, and wrote (initialised) those first `n` bytes.
    unsafe { buf.advance(n) };
    Poll::Ready(Ok(()))
}

/// Which HTTP a [`Server`] speaks on its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1 (and 1.0), with keep-alive.
    Http1,
    /// HTTP/2 with prior knowledge (h2c): each stream an eddy task.
    Http2,
}

/// How long [`Server::serve`] waits, by default, for the requests in flight when shutdown
/// begins: as long as [`crate::SHUTDOWN_TIMEOUT`], the runtime's own default.
pub const DEFAULT_GRACE: Duration = crate::SHUTDOWN_TIMEOUT;

/// How long, by default, an HTTP/1 client may take to send a request's head: hyper's own
/// default once it has a timer, so that a slow-loris client cannot hold a connection open for
/// ever.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// A pause after an accept error other than a peer giving up (out of descriptors, out of
/// memory): accepting again at once would only fail again at full speed.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(10);

/// hyper's server connections on an eddy listener: one task per connection, eddy's timers
/// for hyper's timeouts, and graceful shutdown.
///
/// When the `shutdown` future given to [`serve`](Server::serve) completes, the server stops
/// accepting (the listener is closed, so new connections are refused), asks every open
/// connection to finish what it has begun (hyper's `graceful_shutdown`: requests in flight
/// are answered, idle keep-alive connections close, HTTP/2 sends GOAWAY), and waits up to
/// the [`grace`](Server::grace) for them; connections still open then are dropped.
///
/// ```
/// use std::convert::Infallible;
/// use http_body_util::Full;
/// use hyper::body::Bytes;
///
/// let rt = eddy::Runtime::new()?;
/// rt.block_on(async {
///     let listener = eddy::net::TcpListener::bind("127.0.0.1:0").await?;
///     let service = hyper::service::service_fn(|_req| async {
///         Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from_static(b"hello"))))
///     });
///     // Here shutdown begins at once; a real server waits for a signal (`eddy::signal`).
///     let served = eddy::hyper::Server::new(eddy::hyper::Protocol::Http1)
///         .header_read_timeout(std::time::Duration::from_secs(10))
///         .serve(listener, service, async {})
///         .await?;
///     assert_eq!(served.cut_off, 0);
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Server {
    protocol: Protocol,
    header_read_timeout: Option<Duration>,
    grace: Duration,
    nodelay: bool,
}

/// What one [`Server::serve`] call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Served {
    /// Connections accepted.
    pub connections: u64,
    /// Connections still open when the grace ran out, dropped with whatever they had in
    /// flight.
    pub cut_off: usize,
}

impl Server {
    /// A server of `protocol`, with hyper's defaults, a header timeout of
    /// [`DEFAULT_HEADER_READ_TIMEOUT`], `TCP_NODELAY` and a grace of [`DEFAULT_GRACE`].
    pub fn new(protocol: Protocol) -> Server {
        Server {
            protocol,
            header_read_timeout: Some(DEFAULT_HEADER_READ_TIMEOUT),
            grace: DEFAULT_GRACE,
            nodelay: true,
        }
    }

    /// HTTP/1 only: how long a client may take to send a request's head before its
    /// connection is closed (a slow-loris defence); [`DEFAULT_HEADER_READ_TIMEOUT`] unless
    /// set. `None` waits for ever.
    pub fn header_read_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Server {
        self.header_read_timeout = timeout.into();
        self
    }

    /// Whether accepted connections get `TCP_NODELAY` (the default: an answer written in two
    /// pieces must not wait for the client's delayed acknowledgement).
    pub fn nodelay(mut self, on: bool) -> Server {
        self.nodelay = on;
        self
    }

    /// How long shutdown waits for the requests in flight.
    pub fn grace(mut self, grace: Duration) -> Server {
        self.grace = grace;
        self
    }

    /// Serves `service` on every connection `listener` accepts, until `shutdown` completes;
    /// then shuts down gracefully (see [`Server`]) and returns what it did.
    ///
    /// An accept error does not end the loop: a peer that gave up is skipped, and other
    /// errors (out of descriptors) are logged and retried after a short pause. Errors of one
    /// connection (a peer resetting, a malformed request) end only that connection.
    ///
    /// # Errors
    ///
    /// None today; the `io::Result` leaves room for setup errors of listeners to come.
    pub async fn serve<S, B>(
        &self,
        listener: TcpListener,
        service: S,
        shutdown: impl Future<Output = ()>,
    ) -> io::Result<Served>
    where
        S: HttpService<Incoming, ResBody = B> + Clone + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Into<Box<dyn StdError + Send + Sync>>,
        B: Body + Send + 'static,
        B::Data: Send + 'static,
        B::Error: Into<Box<dyn StdError + Send + Sync>>,
    {
        let state = Arc::new(ServeState::default());
        let mut connections = 0;
        let mut shutdown = pin!(shutdown);
        loop {
            let mut accept = pin!(listener.accept());
            let accepted = poll_fn(|cx| {
                if shutdown.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(None);
                }
                accept.as_mut().poll(cx).map(Some)
            })
            .await;
            let stream = match accepted {
                None => break,
                Some(Ok((stream, _))) => stream,
                Some(Err(e)) if is_peer_gone(&e) => continue,
                Some(Err(e)) => {
                    tracing::warn!("eddy::hyper::Server: accept failed: {e}");
                    crate::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    continue;
                }
            };
            connections += 1;
            if self.nodelay {
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!("eddy::hyper::Server: TCP_NODELAY: {e}");
                }
            }
            let open = OpenConnection::new(state.clone());
            match self.protocol {
                Protocol::Http1 => {
                    let mut builder = http1::Builder::new();
                    builder
                        .timer(EddyTimer)
                        .header_read_timeout(self.header_read_timeout);
                    let conn = builder.serve_connection(stream, service.clone());
                    drop(crate::spawn(drive(
                        conn,
                        http1::Connection::graceful_shutdown,
                        open,
                    )));
                }
                Protocol::Http2 => {
                    let conn = http2::Builder::new(EddyExecutor)
                        .timer(EddyTimer)
                        .serve_connection(stream, service.clone());
                    drop(crate::spawn(drive(
                        conn,
                        http2::Connection::graceful_shutdown,
                        open,
                    )));
                }
            }
        }
        // Stop accepting: new connections are refused from here on.
        drop(listener);
        state.closing.store(true, SeqCst);
        state.changed.notify_all();
        let cut_off = match crate::time::timeout(self.grace, state.all_closed()).await {
            Ok(()) => 0,
            Err(_) => {
                let left = state.open.load(SeqCst);
                state.aborting.store(true, SeqCst);
                state.changed.notify_all();
                state.all_closed().await;
                left
            }
        };
        Ok(Served {
            connections,
            cut_off,
        })
    }
}

/// Accept errors that concern one peer only (it gave up before we took it).
fn is_peer_gone(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}

/// What a [`Server::serve`] call shares with its connection tasks.
#[derive(Debug, Default)]
struct ServeState {
    /// Connection tasks not yet finished.
    open: AtomicUsize,
    /// Shutdown began: each connection is asked to finish.
    closing: AtomicBool,
    /// The grace ran out: each connection is dropped.
    aborting: AtomicBool,
    /// Notified when `closing` or `aborting` is set, and when `open` reaches 0.
    changed: Notify,
}

impl ServeState {
    async fn all_closed(&self) {
        loop {
            let changed = self.changed.notified();
            if self.open.load(SeqCst) == 0 {
                return;
            }
            changed.await;
        }
    }
}

/// Counts one connection task as open until it is dropped (finished, cut off, or cancelled
/// by the runtime shutting down).
struct OpenConnection(Arc<ServeState>);

impl OpenConnection {
    fn new(state: Arc<ServeState>) -> OpenConnection {
        state.open.fetch_add(1, SeqCst);
        OpenConnection(state)
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        if self.0.open.fetch_sub(1, SeqCst) == 1 {
            self.0.changed.notify_all();
        }
    }
}

/// Runs one hyper connection to its end: asks it to finish (`graceful`) once shutdown
/// begins, and drops it if the grace runs out first.
///
/// The task registers with the shared [`Notify`] once per change of the shutdown state, not
/// at each poll: every connection of a busy server polls here at each request, and a lock
/// shared by all of them (and a scan of their wakers) at each poll would cost more than the
/// request.
async fn drive<C>(conn: C, graceful: fn(Pin<&mut C>), open: OpenConnection)
where
    C: Future<Output = Result<(), hyper::Error>>,
{
    let state = &*open.0;
    let mut conn = pin!(conn);
    let mut asked = false;
    let result = loop {
        let changed = state.changed.notified();
        // After taking the notification's generation: a change from here on either shows in
        // these flags or completes `changed`.
        if !asked && state.closing.load(SeqCst) {
            graceful(conn.as_mut());
            asked = true;
        }
        if state.aborting.load(SeqCst) {
            break None;
        }
        let mut changed = pin!(changed);
        let mut registered = false;
        let polled = poll_fn(|cx| {
            if let Poll::Ready(r) = conn.as_mut().poll(cx) {
                return Poll::Ready(Some(r));
            }
            let state_changed = if registered {
                // Our waker is registered: a change sets these flags, then wakes us.
                (!asked && state.closing.load(SeqCst)) || state.aborting.load(SeqCst)
            } else {
                registered = true;
                changed.as_mut().poll(cx).is_ready()
            };
            if state_changed {
                Poll::Ready(None)
            } else {
                Poll::Pending
            }
        })
        .await;
        if let Some(r) = polled {
            break Some(r);
        }
    };
    if let Some(Err(e)) = result {
        // One client's error (a reset, a malformed request, a timeout) is that client's.
        tracing::debug!("eddy::hyper::Server: connection ended: {e}");
    }
    drop(open);
}
