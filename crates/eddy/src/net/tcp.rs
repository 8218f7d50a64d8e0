//! TCP: [`TcpListener`] and [`TcpStream`].

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::task::{Context, Poll};
use std::time::Duration;

use socket2::{SockAddr, SockRef, Socket};

use crate::io::Async;
use crate::net::addr::{each_addr, ToSocketAddrs};
use crate::net::conn::{impl_async_read, impl_async_write, owned_halves, Conn};
use crate::net::socket::{self, TcpKeepalive, TcpSocket};

/// Options for [`TcpListener::bind_with`].
///
/// The shorthand for the usual listener: for each address the name resolves to, a
/// [`TcpSocket`] with `SO_REUSEADDR` (and optionally `SO_REUSEPORT`) is bound and listens
/// with this backlog. For other options (buffer sizes, keepalive or `TCP_NODELAY` for every
/// accepted connection, ...) configure a [`TcpSocket`] and call [`TcpSocket::listen`].
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

impl_fd_traits!(TcpListener, |s| &s.io);

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
        let socket = TcpSocket::new_for(&addr)?;
        socket.set_reuseaddr(true)?;
        if options.reuse_port {
            socket.set_reuseport(true)?;
        }
        socket.bind(addr)?;
        // `backlog` is at most `i32::MAX`, so this keeps it as it is.
        socket.listen(options.backlog as u32)
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
        std::future::poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// Poll form of [`accept`](TcpListener::accept).
    ///
    /// # Errors
    ///
    /// As [`accept`](TcpListener::accept).
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        let (stream, addr) = std::task::ready!(self.io.poll_read_with(cx, |l| l.accept()))?;
        Poll::Ready(TcpStream::from_std(stream).map(|s| (s, addr)))
    }

    /// The incoming connections as a [`Stream`](futures_core::Stream) that never ends; an
    /// item is `Err` when an accept fails (`EMFILE`, ...), and the stream can be polled on
    /// after it.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::net::{TcpListener, TcpStream};
    /// use futures_lite::StreamExt;
    ///
    /// let rt = eddy::Runtime::new()?;
    /// rt.block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await?;
    ///     let _client = TcpStream::connect(listener.local_addr()?).await?;
    ///     let mut incoming = listener.incoming();
    ///     let accepted = incoming.next().await.expect("the stream never ends")?;
    ///     assert_eq!(accepted.local_addr()?, listener.local_addr()?);
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn incoming(&self) -> Incoming<'_> {
        Incoming { listener: self }
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

/// The stream of connections from [`TcpListener::incoming`].
#[derive(Debug)]
pub struct Incoming<'a> {
    listener: &'a TcpListener,
}

impl futures_core::Stream for Incoming<'_> {
    type Item = io::Result<TcpStream>;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<io::Result<TcpStream>>> {
        self.listener
            .poll_accept(cx)
            .map(|accepted| Some(accepted.map(|(stream, _)| stream)))
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

impl_fd_traits!(TcpStream, |s| &*s.conn.0);

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
        TcpSocket::new_for(&addr)?.connect(addr).await
    }

    /// Connects `socket` (made for `addr`'s family) to `addr` and waits for the handshake.
    pub(crate) async fn connect_socket(socket: Socket, addr: SocketAddr) -> io::Result<TcpStream> {
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

    /// Reads into `buf` what has arrived without taking it from the socket (`MSG_PEEK`):
    /// the next read or peek sees the same bytes. Waits until something has arrived;
    /// `Ok(0)` means the peer closed its write side.
    ///
    /// A peek that fills less than `buf` leaves the read readiness as it is, since the bytes
    /// it saw are still there: a read right after never waits for them.
    ///
    /// # Errors
    ///
    /// The socket error, for example `ConnectionReset`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::net::{TcpListener, TcpStream};
    ///
    /// let rt = eddy::Runtime::new()?;
    /// rt.block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await?;
    ///     let client = TcpStream::connect(listener.local_addr()?).await?;
    ///     let (server, _) = listener.accept().await?;
    ///     client.write_all(b"GET /").await?;
    ///     // Look at the first bytes to choose a protocol, then read them for real.
    ///     let mut first = [0u8; 3];
    ///     let n = server.peek(&mut first).await?;
    ///     assert_eq!(&first[..n], &b"GET"[..n]);
    ///     let mut all = [0u8; 5];
    ///     server.read_exact(&mut all).await?;
    ///     assert_eq!(&all, b"GET /");
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        // `read_with` clears readiness on `WouldBlock` only: the stream read path would
        // also clear it after a short result, and then a read of the bytes still sitting
        // in the socket would wait for an edge that never comes.
        self.conn.0.read_with(|s| s.peek(&mut *buf)).await
    }

    /// Reads into `buf` without waiting: `WouldBlock` if the socket is not known to be
    /// readable or has nothing to read. Pair it with [`readable`](TcpStream::readable):
    /// after a `WouldBlock` that wait sleeps until more data (or an error or EOF) arrives.
    /// `Ok(0)` means the peer closed its write side (or `buf` is empty).
    ///
    /// # Errors
    ///
    /// `WouldBlock` as above, or the socket error.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use eddy::net::{TcpListener, TcpStream};
    ///
    /// let rt = eddy::Runtime::new()?;
    /// rt.block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await?;
    ///     let client = TcpStream::connect(listener.local_addr()?).await?;
    ///     let (server, _) = listener.accept().await?;
    ///     let mut buf = [0u8; 16];
    ///     assert_eq!(server.try_read(&mut buf).unwrap_err().kind(), ErrorKind::WouldBlock);
    ///     client.write_all(b"hi").await?;
    ///     let n = loop {
    ///         server.readable().await?;
    ///         match server.try_read(&mut buf) {
    ///             Ok(n) => break n,
    ///             Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
    ///             Err(e) => return Err(e),
    ///         }
    ///     };
    ///     assert_eq!(&buf[..n], b"hi");
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.conn.try_read(buf)
    }

    /// [`try_read`](TcpStream::try_read) into several buffers in one system call
    /// (`readv`), filled in order.
    ///
    /// # Errors
    ///
    /// As [`try_read`](TcpStream::try_read).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::{ErrorKind, IoSliceMut};
    /// use eddy::net::{TcpListener, TcpStream};
    ///
    /// let rt = eddy::Runtime::new()?;
    /// rt.block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await?;
    ///     let client = TcpStream::connect(listener.local_addr()?).await?;
    ///     let (server, _) = listener.accept().await?;
    ///     client.write_all(b"headbody").await?;
    ///     let (mut head, mut body) = ([0u8; 4], [0u8; 4]);
    ///     let mut got = 0;
    ///     while got < 8 {
    ///         server.readable().await?;
    ///         let mut rest = [IoSliceMut::new(&mut head), IoSliceMut::new(&mut body)];
    ///         let mut rest = &mut rest[..];
    ///         IoSliceMut::advance_slices(&mut rest, got);
    ///         match server.try_read_vectored(rest) {
    ///             Ok(n) => got += n,
    ///             Err(e) if e.kind() == ErrorKind::WouldBlock => {}
    ///             Err(e) => return Err(e),
    ///         }
    ///     }
    ///     assert_eq!((&head, &body), (b"head", b"body"));
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_read_vectored(&self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        self.conn.try_read_vectored(bufs)
    }

    /// Writes some of `buf` without waiting: `WouldBlock` if the socket is not known to be
    /// writable or its send buffer is full. Pair it with
    /// [`writable`](TcpStream::writable), which after a `WouldBlock` sleeps until there is
    /// room again.
    ///
    /// # Errors
    ///
    /// `WouldBlock` as above, or the socket error, for example `BrokenPipe`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use eddy::net::{TcpListener, TcpStream};
    ///
    /// let rt = eddy::Runtime::new()?;
    /// rt.block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await?;
    ///     let client = TcpStream::connect(listener.local_addr()?).await?;
    ///     let mut msg = &b"hello"[..];
    ///     while !msg.is_empty() {
    ///         client.writable().await?;
    ///         match client.try_write(msg) {
    ///             Ok(n) => msg = &msg[n..],
    ///             Err(e) if e.kind() == ErrorKind::WouldBlock => {}
    ///             Err(e) => return Err(e),
    ///         }
    ///     }
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.conn.try_write(buf)
    }

    /// [`try_write`](TcpStream::try_write) from several buffers in one system call
    /// (`writev`); returns how much of them, in order, was written.
    ///
    /// # Errors
    ///
    /// As [`try_write`](TcpStream::try_write).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::IoSlice;
    /// use eddy::net::{TcpListener, TcpStream};
    ///
    /// let rt = eddy::Runtime::new()?;
    /// rt.block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await?;
    ///     let client = TcpStream::connect(listener.local_addr()?).await?;
    ///     client.writable().await?;
    ///     // A fresh connection's send buffer has room for a few bytes.
    ///     let n = client.try_write_vectored(&[IoSlice::new(b"head"), IoSlice::new(b"body")])?;
    ///     assert_eq!(n, 8);
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_write_vectored(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.conn.try_write_vectored(bufs)
    }

    /// Waits until the stream is readable: data, EOF or an error has arrived since the last
    /// read that said `WouldBlock`. It may still be a false alarm (another task read the
    /// data first), so the read that follows must handle `WouldBlock`.
    ///
    /// # Errors
    ///
    /// An error if the socket could not be registered with the reactor.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::net::{TcpListener, TcpStream};
    ///
    /// let rt = eddy::Runtime::new()?;
    /// rt.block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await?;
    ///     let client = TcpStream::connect(listener.local_addr()?).await?;
    ///     let (server, _) = listener.accept().await?;
    ///     client.write_all(b"x").await?;
    ///     server.readable().await?;
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn readable(&self) -> io::Result<()> {
        std::future::poll_fn(|cx| self.poll_read_ready(cx)).await
    }

    /// Waits until the stream is writable: its send buffer has had room since the last
    /// write that said `WouldBlock`. As with [`readable`](TcpStream::readable), the write
    /// that follows must still handle `WouldBlock`.
    ///
    /// # Errors
    ///
    /// An error if the socket could not be registered with the reactor.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::net::{TcpListener, TcpStream};
    ///
    /// let rt = eddy::Runtime::new()?;
    /// rt.block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await?;
    ///     let client = TcpStream::connect(listener.local_addr()?).await?;
    ///     client.writable().await?;
    ///     assert_eq!(client.try_write(b"x")?, 1);
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn writable(&self) -> io::Result<()> {
        std::future::poll_fn(|cx| self.poll_write_ready(cx)).await
    }

    /// Poll form of [`readable`](TcpStream::readable), for hand-written futures: `Pending`
    /// registers `cx`'s waker for the next read edge.
    ///
    /// # Errors
    ///
    /// As [`readable`](TcpStream::readable).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::net::{TcpListener, TcpStream};
    ///
    /// let rt = eddy::Runtime::new()?;
    /// rt.block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await?;
    ///     let client = TcpStream::connect(listener.local_addr()?).await?;
    ///     let (server, _) = listener.accept().await?;
    ///     client.write_all(b"x").await?;
    ///     std::future::poll_fn(|cx| server.poll_read_ready(cx)).await?;
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.conn.0.poll_readable(cx)
    }

    /// Poll form of [`writable`](TcpStream::writable): `Pending` registers `cx`'s waker
    /// for the next write edge.
    ///
    /// # Errors
    ///
    /// As [`writable`](TcpStream::writable).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::net::{TcpListener, TcpStream};
    ///
    /// let rt = eddy::Runtime::new()?;
    /// rt.block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await?;
    ///     let client = TcpStream::connect(listener.local_addr()?).await?;
    ///     std::future::poll_fn(|cx| client.poll_write_ready(cx)).await?;
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.conn.0.poll_writable(cx)
    }

    /// Switches TCP keepalive on with `keepalive`'s settings, or off with `None`. See
    /// [`TcpKeepalive`] for why this takes settings rather than tokio's `bool` or a bare
    /// idle time.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a time or count outside the kernel's range (nothing is changed
    /// then), or the `setsockopt` error.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use eddy::net::{TcpKeepalive, TcpListener, TcpStream};
    ///
    /// let rt = eddy::Runtime::new()?;
    /// rt.block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await?;
    ///     let stream = TcpStream::connect(listener.local_addr()?).await?;
    ///     stream.set_keepalive(Some(TcpKeepalive::new().with_idle(Duration::from_secs(120))))?;
    ///     assert_eq!(stream.keepalive()?.unwrap().idle(), Some(Duration::from_secs(120)));
    ///     stream.set_keepalive(None)?;
    ///     assert_eq!(stream.keepalive()?, None);
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_keepalive(&self, keepalive: Option<TcpKeepalive>) -> io::Result<()> {
        socket::set_keepalive(self.sock(), keepalive)
    }

    /// The keepalive settings in effect (every field set, system defaults included), or
    /// `None` if keepalive is off.
    ///
    /// # Errors
    ///
    /// The `getsockopt` error.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::net::{TcpKeepalive, TcpListener, TcpStream};
    ///
    /// let rt = eddy::Runtime::new()?;
    /// rt.block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await?;
    ///     let stream = TcpStream::connect(listener.local_addr()?).await?;
    ///     assert_eq!(stream.keepalive()?, None);
    ///     stream.set_keepalive(Some(TcpKeepalive::new()))?;
    ///     let k = stream.keepalive()?.unwrap();
    ///     println!("probes after {:?} idle, every {:?}, {:?} of them",
    ///              k.idle().unwrap(), k.interval().unwrap(), k.retries().unwrap());
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn keepalive(&self) -> io::Result<Option<TcpKeepalive>> {
        socket::keepalive(self.sock())
    }

    /// Sets `SO_LINGER`: what closing the socket does with data not yet acknowledged.
    ///
    /// * `None` (the default): the close returns at once and the kernel keeps sending in
    ///   the background, then closes with a FIN.
    /// * `Some(Duration::ZERO)`: the close discards unsent data and resets the connection
    ///   (the peer's next read fails with `ConnectionReset`), leaving no `TIME_WAIT`.
    /// * `Some(d)`, `d > 0`: **the close blocks** the thread that drops the stream (a
    ///   worker, stalling every task on it) until the data is acknowledged or `d` has passed.
    ///   Avoid it on a runtime; shut the write side down and wait for the peer's EOF instead.
    ///
    /// The kernel counts whole seconds: fractions round up, so a short linger never turns
    /// into a reset.
    ///
    /// # Errors
    ///
    /// The `setsockopt` error.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use eddy::net::{TcpListener, TcpStream};
    ///
    /// let rt = eddy::Runtime::new()?;
    /// rt.block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await?;
    ///     let stream = TcpStream::connect(listener.local_addr()?).await?;
    ///     stream.set_linger(Some(Duration::ZERO))?;
    ///     assert_eq!(stream.linger()?, Some(Duration::ZERO));
    ///     drop(stream); // the peer sees a reset
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_linger(&self, linger: Option<Duration>) -> io::Result<()> {
        socket::set_linger(self.sock(), linger)
    }

    /// The `SO_LINGER` setting: `None` when off.
    ///
    /// # Errors
    ///
    /// The `getsockopt` error.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::net::{TcpListener, TcpStream};
    ///
    /// let rt = eddy::Runtime::new()?;
    /// rt.block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await?;
    ///     let stream = TcpStream::connect(listener.local_addr()?).await?;
    ///     assert_eq!(stream.linger()?, None);
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn linger(&self) -> io::Result<Option<Duration>> {
        self.sock().linger()
    }

    /// Sets `IP_TTL`, the time-to-live of the IPv4 packets this socket sends (as std's and
    /// tokio's `set_ttl`; an IPv6 socket's hop limit is `IPV6_UNICAST_HOPS`, reachable
    /// through `socket2::SockRef::from(stream.get_ref())`).
    ///
    /// # Errors
    ///
    /// The `setsockopt` error (`InvalidInput` for 0 or more than 255).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::net::{TcpListener, TcpStream};
    ///
    /// let rt = eddy::Runtime::new()?;
    /// rt.block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await?;
    ///     let stream = TcpStream::connect(listener.local_addr()?).await?;
    ///     stream.set_ttl(32)?;
    ///     assert_eq!(stream.ttl()?, 32);
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.conn.get_ref().set_ttl(ttl)
    }

    /// The `IP_TTL` setting.
    ///
    /// # Errors
    ///
    /// The `getsockopt` error.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::net::{TcpListener, TcpStream};
    ///
    /// let rt = eddy::Runtime::new()?;
    /// rt.block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await?;
    ///     let stream = TcpStream::connect(listener.local_addr()?).await?;
    ///     assert!(stream.ttl()? > 0);
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn ttl(&self) -> io::Result<u32> {
        self.conn.get_ref().ttl()
    }

    /// Sets `SO_SNDBUF`, the kernel's send buffer. Linux doubles the value (for its own
    /// bookkeeping), caps it at `net.core.wmem_max`, and stops growing the buffer by itself.
    ///
    /// # Errors
    ///
    /// The `setsockopt` error.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::net::{TcpListener, TcpStream};
    ///
    /// let rt = eddy::Runtime::new()?;
    /// rt.block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await?;
    ///     let stream = TcpStream::connect(listener.local_addr()?).await?;
    ///     stream.set_send_buffer_size(64 * 1024)?;
    ///     assert!(stream.send_buffer_size()? >= 64 * 1024);
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_send_buffer_size(&self, size: u32) -> io::Result<()> {
        socket::set_send_buffer_size(self.sock(), size)
    }

    /// The `SO_SNDBUF` size, as the kernel reports it (twice what was set, on Linux).
    ///
    /// # Errors
    ///
    /// The `getsockopt` error.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::net::{TcpListener, TcpStream};
    ///
    /// let rt = eddy::Runtime::new()?;
    /// rt.block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await?;
    ///     let stream = TcpStream::connect(listener.local_addr()?).await?;
    ///     assert!(stream.send_buffer_size()? > 0);
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn send_buffer_size(&self) -> io::Result<u32> {
        socket::buffer_size(self.sock().send_buffer_size())
    }

    /// Sets `SO_RCVBUF`, the kernel's receive buffer. Linux doubles the value, caps it at
    /// `net.core.rmem_max`, and stops growing the buffer by itself. On a connected stream
    /// the window scale is fixed already; set it on a [`TcpSocket`] before connecting or
    /// listening for windows above 64 KiB.
    ///
    /// # Errors
    ///
    /// The `setsockopt` error.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::net::{TcpListener, TcpStream};
    ///
    /// let rt = eddy::Runtime::new()?;
    /// rt.block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await?;
    ///     let stream = TcpStream::connect(listener.local_addr()?).await?;
    ///     stream.set_recv_buffer_size(64 * 1024)?;
    ///     assert!(stream.recv_buffer_size()? >= 64 * 1024);
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_recv_buffer_size(&self, size: u32) -> io::Result<()> {
        socket::set_recv_buffer_size(self.sock(), size)
    }

    /// The `SO_RCVBUF` size, as the kernel reports it (twice what was set, on Linux).
    ///
    /// # Errors
    ///
    /// The `getsockopt` error.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::net::{TcpListener, TcpStream};
    ///
    /// let rt = eddy::Runtime::new()?;
    /// rt.block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await?;
    ///     let stream = TcpStream::connect(listener.local_addr()?).await?;
    ///     assert!(stream.recv_buffer_size()? > 0);
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn recv_buffer_size(&self) -> io::Result<u32> {
        socket::buffer_size(self.sock().recv_buffer_size())
    }

    fn sock(&self) -> SockRef<'_> {
        SockRef::from(self.conn.get_ref())
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
