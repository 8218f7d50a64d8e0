//! [`TcpSocket`], a TCP socket not yet connected or listening, and [`TcpKeepalive`]; the
//! option setters that [`TcpSocket`] and [`TcpStream`] share live here too.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::time::Duration;

use socket2::{Domain, Protocol, SockAddr, SockRef, Socket, Type};

use crate::net::{TcpListener, TcpStream};

/// Linux's limits for `TCP_KEEPIDLE` and `TCP_KEEPINTVL` (seconds) and `TCP_KEEPCNT`
/// (`MAX_TCP_KEEPIDLE`, `MAX_TCP_KEEPINTVL`, `MAX_TCP_KEEPCNT`). Checked up front so that a
/// bad value is refused with a message naming it, before `SO_KEEPALIVE` is switched on.
const MAX_KEEPALIVE_SECS: u64 = 32_767;
const MAX_KEEPALIVE_RETRIES: u32 = 127;

/// TCP keepalive settings: how long a connection may be idle before the kernel probes it,
/// how often it probes, and how many unanswered probes end the connection.
///
/// eddy's `set_keepalive` takes `Option<TcpKeepalive>` (`None` switches keepalive off)
/// instead of tokio's `TcpSocket::set_keepalive(bool)` or a bare idle time: a service that
/// wants dead peers noticed in bounded time needs all three, since with Linux's defaults
/// (2 hours idle, probes every 75 s, 9 of them) a vanished peer is noticed after 2 h 11 min.
/// tokio's `set_keepalive(true)` is `set_keepalive(Some(TcpKeepalive::new()))`: keepalive
/// on, every setting left unset keeps the system default.
///
/// The kernel counts in whole seconds: fractions round up, so probing never starts sooner
/// than asked. Times must lie in 1 s ..= 32767 s and retries in 1 ..= 127 (Linux's limits);
/// others are refused with `InvalidInput`.
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
///     let keepalive = TcpKeepalive::new()
///         .with_idle(Duration::from_secs(60))
///         .with_interval(Duration::from_secs(10))
///         .with_retries(3);
///     stream.set_keepalive(Some(keepalive))?;
///     // A dead peer is now noticed within 60 + 3 * 10 seconds of silence.
///     assert_eq!(stream.keepalive()?, Some(keepalive));
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct TcpKeepalive {
    idle: Option<Duration>,
    interval: Option<Duration>,
    retries: Option<u32>,
}

impl TcpKeepalive {
    /// Keepalive with every setting left at the system default.
    ///
    /// ```
    /// let k = eddy::net::TcpKeepalive::new();
    /// assert_eq!((k.idle(), k.interval(), k.retries()), (None, None, None));
    /// ```
    pub const fn new() -> Self {
        TcpKeepalive {
            idle: None,
            interval: None,
            retries: None,
        }
    }

    /// How long the connection must be idle before the first probe (`TCP_KEEPIDLE`).
    ///
    /// ```
    /// use std::time::Duration;
    /// let k = eddy::net::TcpKeepalive::new().with_idle(Duration::from_secs(30));
    /// assert_eq!(k.idle(), Some(Duration::from_secs(30)));
    /// ```
    pub const fn with_idle(mut self, idle: Duration) -> Self {
        self.idle = Some(idle);
        self
    }

    /// The time between probes (`TCP_KEEPINTVL`).
    ///
    /// ```
    /// use std::time::Duration;
    /// let k = eddy::net::TcpKeepalive::new().with_interval(Duration::from_secs(5));
    /// assert_eq!(k.interval(), Some(Duration::from_secs(5)));
    /// ```
    pub const fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = Some(interval);
        self
    }

    /// How many unanswered probes end the connection (`TCP_KEEPCNT`).
    ///
    /// ```
    /// let k = eddy::net::TcpKeepalive::new().with_retries(4);
    /// assert_eq!(k.retries(), Some(4));
    /// ```
    pub const fn with_retries(mut self, retries: u32) -> Self {
        self.retries = Some(retries);
        self
    }

    /// The idle time, if set (always set in what a `keepalive()` getter returns).
    ///
    /// ```
    /// assert_eq!(eddy::net::TcpKeepalive::new().idle(), None);
    /// ```
    pub const fn idle(&self) -> Option<Duration> {
        self.idle
    }

    /// The probe interval, if set (always set in what a `keepalive()` getter returns).
    ///
    /// ```
    /// assert_eq!(eddy::net::TcpKeepalive::new().interval(), None);
    /// ```
    pub const fn interval(&self) -> Option<Duration> {
        self.interval
    }

    /// The probe count, if set (always set in what a `keepalive()` getter returns).
    ///
    /// ```
    /// assert_eq!(eddy::net::TcpKeepalive::new().retries(), None);
    /// ```
    pub const fn retries(&self) -> Option<u32> {
        self.retries
    }
}

/// `d` in whole seconds, rounded up.
fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// Whole seconds, rounded up, checked against the kernel's range for `what`.
fn keepalive_secs(what: &str, d: Duration) -> io::Result<Duration> {
    let secs = ceil_secs(d);
    if !(1..=MAX_KEEPALIVE_SECS).contains(&secs) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "keepalive {what} must be between 1 and {MAX_KEEPALIVE_SECS} seconds, not {d:?}"
            ),
        ));
    }
    Ok(Duration::from_secs(secs))
}

pub(crate) fn set_keepalive(s: SockRef<'_>, keepalive: Option<TcpKeepalive>) -> io::Result<()> {
    let Some(k) = keepalive else {
        return s.set_keepalive(false);
    };
    // Everything is checked before anything is set, so a bad value changes nothing.
    let mut params = socket2::TcpKeepalive::new();
    if let Some(idle) = k.idle {
        params = params.with_time(keepalive_secs("idle time", idle)?);
    }
    if let Some(interval) = k.interval {
        params = params.with_interval(keepalive_secs("interval", interval)?);
    }
    if let Some(retries) = k.retries {
        if !(1..=MAX_KEEPALIVE_RETRIES).contains(&retries) {
            let max = MAX_KEEPALIVE_RETRIES;
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("keepalive retries must be between 1 and {max}, not {retries}"),
            ));
        }
        params = params.with_retries(retries);
    }
    s.set_tcp_keepalive(&params)
}

pub(crate) fn keepalive(s: SockRef<'_>) -> io::Result<Option<TcpKeepalive>> {
    if !s.keepalive()? {
        return Ok(None);
    }
    // The kernel reports the values in effect, system defaults included.
    Ok(Some(TcpKeepalive {
        idle: Some(s.tcp_keepalive_time()?),
        interval: Some(s.tcp_keepalive_interval()?),
        retries: Some(s.tcp_keepalive_retries()?),
    }))
}

pub(crate) fn set_linger(s: SockRef<'_>, linger: Option<Duration>) -> io::Result<()> {
    // `SO_LINGER` counts whole seconds; rounding down would turn a short linger into zero,
    // which means "reset the connection", so round up.
    let linger = linger.map(|d| Duration::from_secs(ceil_secs(d)));
    s.set_linger(linger)
}

pub(crate) fn set_send_buffer_size(s: SockRef<'_>, size: u32) -> io::Result<()> {
    // The option is a C int: clamp rather than let a large value turn negative.
    s.set_send_buffer_size(size.min(i32::MAX as u32) as usize)
}

pub(crate) fn set_recv_buffer_size(s: SockRef<'_>, size: u32) -> io::Result<()> {
    s.set_recv_buffer_size(size.min(i32::MAX as u32) as usize)
}

pub(crate) fn buffer_size(size: io::Result<usize>) -> io::Result<u32> {
    size.map(|n| u32::try_from(n).unwrap_or(u32::MAX))
}

/// A TCP socket that is neither connected nor listening yet, for the options that must be
/// set before `connect` or `listen`: bind-before-connect (choosing the local address or port
/// of an outgoing connection), `SO_REUSEADDR`/`SO_REUSEPORT`, buffer sizes, keepalive, and the
/// listen backlog. Names and semantics follow tokio's `TcpSocket`.
///
/// [`TcpListener::bind_with`] with [`ListenOptions`](crate::net::ListenOptions) is the
/// shorthand for the common listener (`SO_REUSEADDR` on, optionally `SO_REUSEPORT`, a
/// backlog, host names resolved); build a `TcpSocket` for anything more. Options set on a
/// listening socket (buffer sizes, keepalive, `TCP_NODELAY`) are inherited by the
/// connections it accepts.
///
/// Creating one needs no runtime; [`connect`](TcpSocket::connect) and
/// [`listen`](TcpSocket::listen) do, as the socket is then registered with a worker.
///
/// # Examples
///
/// ```
/// use eddy::net::{TcpListener, TcpSocket};
///
/// let rt = eddy::Runtime::new()?;
/// rt.block_on(async {
///     let listener = TcpListener::bind("127.0.0.1:0").await?;
///     // Connect from a chosen local address (here: any free port on 127.0.0.1).
///     let socket = TcpSocket::new_v4()?;
///     socket.bind("127.0.0.1:0".parse().unwrap())?;
///     let local = socket.local_addr()?;
///     let stream = socket.connect(listener.local_addr()?).await?;
///     assert_eq!(stream.local_addr()?, local);
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct TcpSocket {
    inner: Socket,
}

impl fmt::Debug for TcpSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpSocket")
            .field("fd", &self.inner.as_raw_fd())
            .field("local_addr", &self.local_addr().ok())
            .finish()
    }
}

impl TcpSocket {
    /// A new IPv4 TCP socket.
    ///
    /// # Errors
    ///
    /// The `socket` error, for example `EMFILE`.
    ///
    /// # Examples
    ///
    /// ```
    /// let socket = eddy::net::TcpSocket::new_v4()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new_v4() -> io::Result<TcpSocket> {
        Self::new(Domain::IPV4)
    }

    /// A new IPv6 TCP socket.
    ///
    /// # Errors
    ///
    /// The `socket` error, for example `EAFNOSUPPORT` on a host without IPv6.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let socket = eddy::net::TcpSocket::new_v6()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new_v6() -> io::Result<TcpSocket> {
        Self::new(Domain::IPV6)
    }

    /// A new socket of `addr`'s family.
    pub(crate) fn new_for(addr: &SocketAddr) -> io::Result<TcpSocket> {
        Self::new(Domain::for_address(*addr))
    }

    fn new(domain: Domain) -> io::Result<TcpSocket> {
        Ok(TcpSocket {
            inner: Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?,
        })
    }

    /// Wraps a std stream (its options stay as they are): a way to set the options of a
    /// connected std stream before handing it to [`TcpStream::from_std`].
    ///
    /// # Examples
    ///
    /// ```
    /// let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    /// let std_stream = std::net::TcpStream::connect(listener.local_addr()?)?;
    /// let socket = eddy::net::TcpSocket::from_std_stream(std_stream);
    /// socket.set_nodelay(true)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn from_std_stream(stream: std::net::TcpStream) -> TcpSocket {
        TcpSocket {
            inner: stream.into(),
        }
    }

    /// Sets `SO_REUSEADDR`: a listener may bind a port that connections of an earlier
    /// listener still use (a restarted server need not wait out `TIME_WAIT`).
    ///
    /// # Errors
    ///
    /// The `setsockopt` error.
    ///
    /// # Examples
    ///
    /// ```
    /// let socket = eddy::net::TcpSocket::new_v4()?;
    /// socket.set_reuseaddr(true)?;
    /// assert!(socket.reuseaddr()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_reuseaddr(&self, on: bool) -> io::Result<()> {
        self.inner.set_reuse_address(on)
    }

    /// Whether `SO_REUSEADDR` is set.
    ///
    /// # Errors
    ///
    /// The `getsockopt` error.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(!eddy::net::TcpSocket::new_v4()?.reuseaddr()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn reuseaddr(&self) -> io::Result<bool> {
        self.inner.reuse_address()
    }

    /// Sets `SO_REUSEPORT`: several sockets (in this process or others) that all set it may
    /// bind the same address and port; the kernel spreads incoming connections over them.
    ///
    /// # Errors
    ///
    /// The `setsockopt` error.
    ///
    /// # Examples
    ///
    /// ```
    /// let socket = eddy::net::TcpSocket::new_v4()?;
    /// socket.set_reuseport(true)?;
    /// assert!(socket.reuseport()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_reuseport(&self, on: bool) -> io::Result<()> {
        self.inner.set_reuse_port(on)
    }

    /// Whether `SO_REUSEPORT` is set.
    ///
    /// # Errors
    ///
    /// The `getsockopt` error.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(!eddy::net::TcpSocket::new_v4()?.reuseport()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn reuseport(&self) -> io::Result<bool> {
        self.inner.reuse_port()
    }

    /// Sets `TCP_NODELAY` (disables Nagle's algorithm) for the connection to come.
    ///
    /// # Errors
    ///
    /// The `setsockopt` error.
    ///
    /// # Examples
    ///
    /// ```
    /// let socket = eddy::net::TcpSocket::new_v4()?;
    /// socket.set_nodelay(true)?;
    /// assert!(socket.nodelay()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.inner.set_tcp_nodelay(on)
    }

    /// Whether `TCP_NODELAY` is set.
    ///
    /// # Errors
    ///
    /// The `getsockopt` error.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(!eddy::net::TcpSocket::new_v4()?.nodelay()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn nodelay(&self) -> io::Result<bool> {
        self.inner.tcp_nodelay()
    }

    /// Switches TCP keepalive on with `keepalive`'s settings, or off with `None`; see
    /// [`TcpKeepalive`] for why this is not a `bool` as in tokio.
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
    /// use eddy::net::{TcpKeepalive, TcpSocket};
    ///
    /// let socket = TcpSocket::new_v4()?;
    /// socket.set_keepalive(Some(TcpKeepalive::new().with_idle(Duration::from_secs(60))))?;
    /// assert_eq!(socket.keepalive()?.unwrap().idle(), Some(Duration::from_secs(60)));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_keepalive(&self, keepalive: Option<TcpKeepalive>) -> io::Result<()> {
        set_keepalive(SockRef::from(&self.inner), keepalive)
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
    /// assert_eq!(eddy::net::TcpSocket::new_v4()?.keepalive()?, None);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn keepalive(&self) -> io::Result<Option<TcpKeepalive>> {
        keepalive(SockRef::from(&self.inner))
    }

    /// Sets `SO_LINGER`, as [`TcpStream::set_linger`] (read its warning: a non-zero linger
    /// makes dropping the connection block a worker).
    ///
    /// # Errors
    ///
    /// The `setsockopt` error.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let socket = eddy::net::TcpSocket::new_v4()?;
    /// // Close with a reset, never a FIN and TIME_WAIT.
    /// socket.set_linger(Some(Duration::ZERO))?;
    /// assert_eq!(socket.linger()?, Some(Duration::ZERO));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_linger(&self, linger: Option<Duration>) -> io::Result<()> {
        set_linger(SockRef::from(&self.inner), linger)
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
    /// assert_eq!(eddy::net::TcpSocket::new_v4()?.linger()?, None);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn linger(&self) -> io::Result<Option<Duration>> {
        self.inner.linger()
    }

    /// Sets `SO_SNDBUF`, the kernel's send buffer. Linux doubles the value (for its own
    /// bookkeeping) and caps it at `net.core.wmem_max`; setting it switches the buffer's
    /// automatic growth off.
    ///
    /// # Errors
    ///
    /// The `setsockopt` error.
    ///
    /// # Examples
    ///
    /// ```
    /// let socket = eddy::net::TcpSocket::new_v4()?;
    /// socket.set_send_buffer_size(32 * 1024)?;
    /// assert!(socket.send_buffer_size()? >= 32 * 1024); // Linux reports twice as much
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_send_buffer_size(&self, size: u32) -> io::Result<()> {
        set_send_buffer_size(SockRef::from(&self.inner), size)
    }

    /// The `SO_SNDBUF` size, as the kernel reports it.
    ///
    /// # Errors
    ///
    /// The `getsockopt` error.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(eddy::net::TcpSocket::new_v4()?.send_buffer_size()? > 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn send_buffer_size(&self) -> io::Result<u32> {
        buffer_size(self.inner.send_buffer_size())
    }

    /// Sets `SO_RCVBUF`, the kernel's receive buffer (which bounds the TCP window). Linux
    /// doubles the value and caps it at `net.core.rmem_max`; setting it switches automatic
    /// growth off. Set it before `connect` or `listen` for it to shape the window scale.
    ///
    /// # Errors
    ///
    /// The `setsockopt` error.
    ///
    /// # Examples
    ///
    /// ```
    /// let socket = eddy::net::TcpSocket::new_v4()?;
    /// socket.set_recv_buffer_size(32 * 1024)?;
    /// assert!(socket.recv_buffer_size()? >= 32 * 1024); // Linux reports twice as much
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_recv_buffer_size(&self, size: u32) -> io::Result<()> {
        set_recv_buffer_size(SockRef::from(&self.inner), size)
    }

    /// The `SO_RCVBUF` size, as the kernel reports it.
    ///
    /// # Errors
    ///
    /// The `getsockopt` error.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(eddy::net::TcpSocket::new_v4()?.recv_buffer_size()? > 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn recv_buffer_size(&self) -> io::Result<u32> {
        buffer_size(self.inner.recv_buffer_size())
    }

    /// Binds the socket to `addr`: port 0 picks a free port. Before
    /// [`connect`](TcpSocket::connect) it chooses the connection's local address; before
    /// [`listen`](TcpSocket::listen), the address to listen on.
    ///
    /// # Errors
    ///
    /// The `bind` error: `AddrInUse`, `AddrNotAvailable` for an address this host does not
    /// have, or an error for an address of the other family (`EAFNOSUPPORT`).
    ///
    /// # Examples
    ///
    /// ```
    /// let socket = eddy::net::TcpSocket::new_v4()?;
    /// socket.bind("127.0.0.1:0".parse().unwrap())?;
    /// assert_ne!(socket.local_addr()?.port(), 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn bind(&self, addr: SocketAddr) -> io::Result<()> {
        self.inner.bind(&SockAddr::from(addr))
    }

    /// The address the socket is bound to (the unspecified address and port 0 before `bind`
    /// or `connect`).
    ///
    /// # Errors
    ///
    /// The `getsockname` error.
    ///
    /// # Examples
    ///
    /// ```
    /// let socket = eddy::net::TcpSocket::new_v4()?;
    /// assert_eq!(socket.local_addr()?, "0.0.0.0:0".parse().unwrap());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()?.as_socket().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, "the socket has no IP address")
        })
    }

    /// Takes the pending socket error (`SO_ERROR`), if any.
    ///
    /// # Errors
    ///
    /// The `getsockopt` error.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(eddy::net::TcpSocket::new_v4()?.take_error()?.is_none());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.inner.take_error()
    }

    /// Connects to `addr` (no name resolution: the socket's family is fixed already) and
    /// waits for the handshake.
    ///
    /// # Errors
    ///
    /// The connect error (`ConnectionRefused`, `TimedOut`, ...), or an error outside a
    /// runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::net::{TcpListener, TcpSocket};
    ///
    /// let rt = eddy::Runtime::new()?;
    /// rt.block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await?;
    ///     let socket = TcpSocket::new_v4()?;
    ///     socket.set_nodelay(true)?;
    ///     let stream = socket.connect(listener.local_addr()?).await?;
    ///     assert!(stream.nodelay()?);
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn connect(self, addr: SocketAddr) -> io::Result<TcpStream> {
        TcpStream::connect_socket(self.inner, addr).await
    }

    /// Starts listening, with a queue of up to `backlog` connections not yet accepted (the
    /// kernel caps it at `net.core.somaxconn`).
    ///
    /// # Errors
    ///
    /// The `listen` error (`AddrInUse` if another socket listens on the same address and
    /// port and not both set `SO_REUSEPORT`), or an error outside a runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::net::TcpSocket;
    ///
    /// let rt = eddy::Runtime::new()?;
    /// rt.block_on(async {
    ///     let socket = TcpSocket::new_v4()?;
    ///     socket.set_reuseaddr(true)?;
    ///     socket.bind("127.0.0.1:0".parse().unwrap())?;
    ///     let listener = socket.listen(1024)?;
    ///     assert_ne!(listener.local_addr()?.port(), 0);
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn listen(self, backlog: u32) -> io::Result<TcpListener> {
        self.inner.listen(backlog.min(i32::MAX as u32) as i32)?;
        TcpListener::from_std(self.inner.into())
    }
}

impl AsFd for TcpSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

impl AsRawFd for TcpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}
