//! TCP: [`TcpListener`] and [`TcpStream`].

use std::fmt;
use std::io;
use std::net::SocketAddr;

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::io::Async;
use crate::net::addr::{each_addr, ToSocketAddrs};
use crate::net::conn::{impl_async_read, impl_async_write, owned_halves, Conn};

/// Options for [`TcpListener::bind_with`].
///
/// # Examples
///
/// ```
/// use eddy::net::{ListenOptions, TcpListener};
///
/// let rt = eddy::Runtime::new()?;
/// rt.block_on(async {
///     let opts = ListenOptions::new().backlog(128).reuse_port(true);
///     let a = TcpListener::bind_with("127.0.0.1:0", &opts).await?;
///     // With SO_REUSEPORT a second socket (or process) can listen on the same port.
///     let b = TcpListener::bind_with(a.local_addr()?, &opts).await?;
///     assert_eq!(a.local_addr()?, b.local_addr()?);
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ListenOptions {
    pub(crate) backlog: i32,
    pub(crate) reuse_port: bool,
}

impl Default for ListenOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl ListenOptions {
    /// Backlog 1024, `SO_REUSEADDR` on, `SO_REUSEPORT` off.
    pub fn new() -> Self {
        ListenOptions {
            backlog: 1024,
            reuse_port: false,
        }
    }

    /// The listen backlog (the kernel caps it at `net.core.somaxconn`).
    pub fn backlog(mut self, n: u32) -> Self {
        self.backlog = n.min(i32::MAX as u32) as i32;
        self
    }

    /// Sets `SO_REUSEPORT`, so that several sockets (in this or other processes) can listen
    /// on the same port and the kernel spreads connections over them.
    pub fn reuse_port(mut self, on: bool) -> Self {
        self.reuse_port = on;
        self
    }
}

/// A TCP socket listening for connections.
///
/// # Examples
///
/// ```
/// use eddy::net::{TcpListener, TcpStream};
///
/// let rt = eddy::Runtime::new()?;
/// rt.block_on(async {
///     let listener = TcpListener::bind("127.0.0.1:0").await?;
///     let addr = listener.local_addr()?;
///     let client = eddy::spawn(async move {
///         let s = TcpStream::connect(addr).await?;
///         s.write_all(b"hi").await
///     });
///     let (stream, _peer) = listener.accept().await?;
///     let mut buf = [0u8; 2];
///     stream.read_exact(&mut buf).await?;
///     assert_eq!(&buf, b"hi");
///     client.await.unwrap()
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct TcpListener {
    io: Async<std::net::TcpListener>,
}

impl fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpListener")
            .field("local_addr", &self.local_addr().ok())
            .finish()
    }
}

impl TcpListener {
    /// Binds to `addr` with the default [`ListenOptions`].
    ///
    /// # Errors
    ///
    /// Resolution, `socket`, `bind` or `listen` errors (from the last address tried).
    pub async fn bind(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        Self::bind_with(addr, &ListenOptions::new()).await
    }

    /// Binds to `addr` with `options` (backlog, `SO_REUSEPORT`).
    ///
    /// # Errors
    ///
    /// As [`bind`](TcpListener::bind).
    pub async fn bind_with(
        addr: impl ToSocketAddrs,
        options: &ListenOptions,
    ) -> io::Result<TcpListener> {
        each_addr(addr, |a| async move { Self::bind_one(a, options) }).await
    }

    fn bind_one(addr: SocketAddr, options: &ListenOptions) -> io::Result<TcpListener> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_reuse_address(true)?;
        if options.reuse_port {
            socket.set_reuse_port(true)?;
        }
        socket.bind(&SockAddr::from(addr))?;
        socket.listen(options.backlog)?;
        Self::from_std(socket.into())
    }

    /// Wraps a listener made elsewhere (it is put in non-blocking mode).
    ///
    /// # Errors
    ///
    /// An error outside a runtime or if registration fails.
    pub fn from_std(listener: std::net::TcpListener) -> io::Result<TcpListener> {
        Ok(TcpListener {
            io: Async::new(listener)?,
        })
    }

    /// Waits for a connection.
    ///
    /// # Errors
    ///
    /// The `accept4` error, for example `EMFILE` when the process is out of descriptors.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (stream, addr) = self.io.read_with(|l| l.accept()).await?;
        Ok((TcpStream::from_std(stream)?, addr))
    }

    /// The address this listener is bound to.
    ///
    /// # Errors
    ///
    /// The `getsockname` error.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// The underlying std listener.
    pub fn get_ref(&self) -> &std::net::TcpListener {
        self.io.get_ref()
    }
}

/// A TCP connection.
///
/// Read and write with the inherent async methods, or through the `futures-io` traits
/// (`AsyncRead`/`AsyncWrite`, implemented for `TcpStream` and `&TcpStream`), or with the
/// `tokio-io` cargo feature through tokio's traits. [`into_split`](TcpStream::into_split)
/// gives owned halves for two tasks.
///
/// # Examples
///
/// ```
/// use eddy::net::{TcpListener, TcpStream};
///
/// let rt = eddy::Runtime::new()?;
/// rt.block_on(async {
///     let listener = TcpListener::bind("127.0.0.1:0").await?;
///     let addr = listener.local_addr()?;
///     eddy::spawn(async move {
///         let (s, _) = listener.accept().await.unwrap();
///         let mut buf = [0u8; 5];
///         let n = s.read(&mut buf).await.unwrap();
///         s.write_all(&buf[..n]).await.unwrap();
///     });
///     let client = TcpStream::connect(addr).await?;
///     client.set_nodelay(true)?;
///     client.write_all(b"hello").await?;
///     let mut buf = [0u8; 5];
///     client.read_exact(&mut buf).await?;
///     assert_eq!(&buf, b"hello");
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct TcpStream {
    conn: Conn<std::net::TcpStream>,
}

impl fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpStream")
            .field("local_addr", &self.local_addr().ok())
            .field("peer_addr", &self.peer_addr().ok())
            .finish()
    }
}

impl TcpStream {
    /// Connects to `addr`; host names are resolved on the blocking pool, and each resolved
    /// address is tried in turn.
    ///
    /// # Errors
    ///
    /// Resolution errors, or the connect error of the last address tried (for example
    /// `ConnectionRefused`).
    pub async fn connect(addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        each_addr(addr, Self::connect_one).await
    }

    async fn connect_one(addr: SocketAddr) -> io::Result<TcpStream> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_nonblocking(true)?;
        match socket.connect(&SockAddr::from(addr)) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(e),
        }
        let stream = TcpStream::from_std(socket.into())?;
        // Writable means the handshake finished, one way or the other.
        stream.conn.0.connected().await?;
        Ok(stream)
    }

    /// Wraps a connected std stream (it is put in non-blocking mode).
    ///
    /// # Errors
    ///
    /// An error outside a runtime or if registration fails.
    pub fn from_std(stream: std::net::TcpStream) -> io::Result<TcpStream> {
        Ok(TcpStream {
            conn: Conn::new(stream)?,
        })
    }

    fn conn(&self) -> &Conn<std::net::TcpStream> {
        &self.conn
    }

    crate::net::conn::stream_io_methods!();

    /// The local address.
    ///
    /// # Errors
    ///
    /// The `getsockname` error.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.conn.get_ref().local_addr()
    }

    /// The peer's address.
    ///
    /// # Errors
    ///
    /// The `getpeername` error (`NotConnected` once the peer is gone).
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.conn.get_ref().peer_addr()
    }

    /// Sets `TCP_NODELAY` (disables Nagle's algorithm).
    ///
    /// # Errors
    ///
    /// The `setsockopt` error.
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.conn.get_ref().set_nodelay(on)
    }

    /// Whether `TCP_NODELAY` is set.
    ///
    /// # Errors
    ///
    /// The `getsockopt` error.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.conn.get_ref().nodelay()
    }

    /// Splits the stream into halves that can move to different tasks.
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        (
            OwnedReadHalf {
                conn: self.conn.clone(),
            },
            OwnedWriteHalf { conn: self.conn },
        )
    }

    /// The underlying std stream.
    pub fn get_ref(&self) -> &std::net::TcpStream {
        self.conn.get_ref()
    }
}

impl_async_read!(TcpStream);
impl_async_write!(TcpStream);
owned_halves!(std::net::TcpStream, "[`TcpStream`]");
