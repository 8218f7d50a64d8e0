//! [`start_server`]: asyncio's `asyncio.start_server`, with an accept loop that survives
//! accept errors.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::exception::ExceptionContext;
use crate::net::streams::{into_streams, StreamReader, StreamWriter};
use crate::net::{ListenOptions, TcpListener, ToSocketAddrs};
use crate::notify::Notify;
use crate::Task;

/// First pause after running out of file descriptors; doubled up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_millis(500);

/// A running server from [`start_server`].
pub struct Server {
    local_addr: SocketAddr,
    accept_loop: Task<()>,
    connections: Arc<Connections>,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("local_addr", &self.local_addr)
            .field(
                "connections",
                &self.connections.active.load(Ordering::Relaxed),
            )
            .finish()
    }
}

#[derive(Debug, Default)]
struct Connections {
    active: AtomicUsize,
    accepting: AtomicBool,
    changed: Notify,
}

/// Decrements the active-connection count when a handler ends (even by panic).
struct ConnectionGuard(Arc<Connections>);

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        if self.0.active.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.changed.notify_all();
        }
    }
}

/// Marks the accept loop as ended when its future is dropped (closed or cancelled).
struct AcceptGuard(Arc<Connections>);

impl Drop for AcceptGuard {
    fn drop(&mut self) {
        self.0.accepting.store(false, Ordering::Release);
        self.0.changed.notify_all();
    }
}

impl Server {
    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting connections and closes the listening socket. Connections being
    /// handled go on.
    pub fn close(&self) {
        self.accept_loop.cancel();
    }

    /// Waits until the server is closed and every connection handler has returned.
    pub async fn wait_closed(&self) {
        loop {
            let changed = self.connections.changed.notified();
            if !self.connections.accepting.load(Ordering::Acquire)
                && self.connections.active.load(Ordering::Acquire) == 0
            {
                return;
            }
            changed.await;
        }
    }

    /// Number of connections whose handler is running.
    pub fn active_connections(&self) -> usize {
        self.connections.active.load(Ordering::Acquire)
    }
}

/// Listens on `addr` and runs `handler(reader, writer)` in its own task for every connection
/// (asyncio's `asyncio.start_server`). Uses the default [`ListenOptions`].
///
/// # Errors
///
/// The errors of [`TcpListener::bind`].
pub async fn start_server<H, Fut>(addr: impl ToSocketAddrs, handler: H) -> io::Result<Server>
where
    H: Fn(StreamReader, StreamWriter) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    start_server_with(addr, &ListenOptions::new(), handler).await
}

/// [`start_server`] with [`ListenOptions`]: the listen backlog and `SO_REUSEPORT` (several
/// processes serving one port is how a backend scales past one process).
///
/// The accept loop survives accept errors: `ECONNABORTED` (a client gave up) is retried at
/// once; running out of descriptors (`EMFILE`, `ENFILE`) is reported once to the exception
/// handler and retried after a growing pause (doubling from `FIRST_BACKOFF` up to
/// `MAX_BACKOFF`, no busy loop) until a descriptor is free again; other errors are reported
/// and retried after the same pause.
///
/// # Errors
///
/// The errors of [`TcpListener::bind_with`].
///
/// # Examples
///
/// ```
/// use eddy::net::{open_connection, start_server_with, ListenOptions};
///
/// let rt = eddy::Runtime::new()?;
/// rt.block_on(async {
///     let opts = ListenOptions::new().backlog(4096).reuse_port(true);
///     let server = start_server_with("127.0.0.1:0", &opts, |_r, w| async move {
///         let _ = w.write(b"bye\n");
///         let _ = w.close().await;
///     })
///     .await?;
///     let (mut r, _w) = open_connection(server.local_addr()).await?;
///     assert_eq!(r.readline().await?, b"bye\n");
///     server.close();
///     server.wait_closed().await;
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn start_server_with<H, Fut>(
    addr: impl ToSocketAddrs,
    options: &ListenOptions,
    handler: H,
) -> io::Result<Server>
where
    H: Fn(StreamReader, StreamWriter) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind_with(addr, options).await?;
    let local_addr = listener.local_addr()?;
    let connections = Arc::new(Connections::default());
    connections.accepting.store(true, Ordering::Release);
    let conns = connections.clone();
    let accept_loop = crate::spawn(accept_loop(listener, handler, conns));
    Ok(Server {
        local_addr,
        accept_loop,
        connections,
    })
}

async fn accept_loop<H, Fut>(listener: TcpListener, handler: H, connections: Arc<Connections>)
where
    H: Fn(StreamReader, StreamWriter) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let _accepting = AcceptGuard(connections.clone());
    let mut backoff = FIRST_BACKOFF;
    let mut exhausted_reported = false;
    loop {
        match listener.accept().await {
            Ok((stream, _peer)) => {
                backoff = FIRST_BACKOFF;
                exhausted_reported = false;
                let _ = stream.set_nodelay(true);
                let (reader, writer) = into_streams(stream);
                connections.active.fetch_add(1, Ordering::AcqRel);
                let guard = ConnectionGuard(connections.clone());
                let conn = handler(reader, writer);
                drop(crate::spawn(async move {
                    let _guard = guard;
                    conn.await;
                }));
            }
            Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => continue,
            Err(e) => {
                let exhausted = matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE));
                if !exhausted || !exhausted_reported {
                    exhausted_reported |= exhausted;
                    report(&listener, &e, exhausted);
                }
                crate::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

fn report(listener: &TcpListener, e: &io::Error, exhausted: bool) {
    let message = if exhausted {
        "accept() ran out of file descriptors; retrying with back-off until one is free"
    } else {
        "accept() failed; retrying with back-off"
    };
    if let Some(shared) = crate::context::current_shared() {
        let ctx = ExceptionContext::new(format!(
            "{message} (listener {:?}): {e}",
            listener.local_addr().ok()
        ));
        shared.handler.call(&ctx);
    }
}
