//! Unix domain sockets: [`UnixListener`], [`UnixStream`] and [`UnixDatagram`].

use std::fmt;
use std::io;
use std::os::unix::net::{self as std_unix, SocketAddr};
use std::path::Path;

use crate::io::Async;
use crate::net::conn::{impl_async_read, impl_async_write, Conn};

/// Owned halves of a [`UnixStream`].
pub mod split {
    crate::net::conn::owned_halves!(
        std::os::unix::net::UnixStream,
        "[`UnixStream`](super::UnixStream)"
    );
}

/// A Unix stream socket listening for connections.
///
/// # Examples
///
/// ```
/// use eddy::net::{UnixListener, UnixStream};
///
/// let dir = std::env::temp_dir().join(format!("eddy-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("listener.sock");
/// let _ = std::fs::remove_file(&path);
/// let rt = eddy::Runtime::new()?;
/// rt.block_on(async {
///     let listener = UnixListener::bind(&path)?;
///     let client = UnixStream::connect(&path).await?;
///     let (server, _) = listener.accept().await?;
///     client.write_all(b"yo").await?;
///     let mut buf = [0u8; 2];
///     server.read_exact(&mut buf).await?;
///     assert_eq!(&buf, b"yo");
///     Ok::<(), std::io::Error>(())
/// })?;
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct UnixListener {
    io: Async<std_unix::UnixListener>,
}

impl_fd_traits!(UnixListener, |s| &s.io);

impl fmt::Debug for UnixListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnixListener")
            .field("local_addr", &self.local_addr().ok())
            .finish()
    }
}

impl UnixListener {
    /// Binds to the socket file `path` (which must not exist).
    ///
    /// # Errors
    ///
    /// The `bind`/`listen` error, for example `AddrInUse` if the file exists.
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixListener> {
        Self::from_std(std_unix::UnixListener::bind(path)?)
    }

    /// Wraps a std listener (it is put in non-blocking mode).
    ///
    /// # Errors
    ///
    /// An error outside a runtime or if registration fails.
    pub fn from_std(listener: std_unix::UnixListener) -> io::Result<UnixListener> {
        Ok(UnixListener {
            io: Async::new(listener)?,
        })
    }

    /// Waits for a connection.
    ///
    /// # Errors
    ///
    /// The `accept` error.
    pub async fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        let (s, addr) = self.io.read_with(|l| l.accept()).await?;
        Ok((UnixStream::from_std(s)?, addr))
    }

    /// The address this listener is bound to.
    ///
    /// # Errors
    ///
    /// The `getsockname` error.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }
}

/// A Unix stream connection. Same surface as [`TcpStream`](crate::net::TcpStream).
///
/// # Examples
///
/// ```
/// use eddy::net::UnixStream;
///
/// let rt = eddy::Runtime::new()?;
/// rt.block_on(async {
///     let (a, b) = UnixStream::pair()?;
///     a.write_all(b"ping").await?;
///     let mut buf = [0u8; 4];
///     b.read_exact(&mut buf).await?;
///     assert_eq!(&buf, b"ping");
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct UnixStream {
    conn: Conn<std_unix::UnixStream>,
}

impl_fd_traits!(UnixStream, |s| &*s.conn.0);

impl fmt::Debug for UnixStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnixStream")
            .field("local_addr", &self.local_addr().ok())
            .finish()
    }
}

impl UnixStream {
    /// Connects to the socket file `path`.
    ///
    /// # Errors
    ///
    /// The `connect` error, for example `NotFound` or `ConnectionRefused`.
    pub async fn connect(path: impl AsRef<Path>) -> io::Result<UnixStream> {
        // A Unix connect does not wait for the peer to accept; it completes or fails at once.
        Self::from_std(std_unix::UnixStream::connect(path)?)
    }

    /// A connected pair of sockets.
    ///
    /// # Errors
    ///
    /// The `socketpair` error.
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = std_unix::UnixStream::pair()?;
        Ok((Self::from_std(a)?, Self::from_std(b)?))
    }

    /// Wraps a std stream (it is put in non-blocking mode).
    ///
    /// # Errors
    ///
    /// An error outside a runtime or if registration fails.
    pub fn from_std(stream: std_unix::UnixStream) -> io::Result<UnixStream> {
        Ok(UnixStream {
            conn: Conn::new(stream)?,
        })
    }

    fn conn(&self) -> &Conn<std_unix::UnixStream> {
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
    /// The `getpeername` error.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.conn.get_ref().peer_addr()
    }

    /// Splits the stream into halves that can move to different tasks.
    pub fn into_split(self) -> (split::OwnedReadHalf, split::OwnedWriteHalf) {
        (
            split::OwnedReadHalf {
                conn: self.conn.clone(),
            },
            split::OwnedWriteHalf { conn: self.conn },
        )
    }
}

impl_async_read!(UnixStream);
impl_async_write!(UnixStream);

/// A Unix datagram socket.
///
/// # Examples
///
/// ```
/// use eddy::net::UnixDatagram;
///
/// let rt = eddy::Runtime::new()?;
/// rt.block_on(async {
///     let (a, b) = UnixDatagram::pair()?;
///     a.send(b"one").await?;
///     let mut buf = [0u8; 8];
///     let n = b.recv(&mut buf).await?;
///     assert_eq!(&buf[..n], b"one");
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct UnixDatagram {
    io: Async<std_unix::UnixDatagram>,
}

impl_fd_traits!(UnixDatagram, |s| &s.io);

impl fmt::Debug for UnixDatagram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnixDatagram")
            .field("local_addr", &self.local_addr().ok())
            .finish()
    }
}

impl UnixDatagram {
    /// Binds to the socket file `path`.
    ///
    /// # Errors
    ///
    /// The `bind` error.
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixDatagram> {
        Self::from_std(std_unix::UnixDatagram::bind(path)?)
    }

    /// A socket bound to no address (it can send, and receive replies if connected).
    ///
    /// # Errors
    ///
    /// The `socket` error.
    pub fn unbound() -> io::Result<UnixDatagram> {
        Self::from_std(std_unix::UnixDatagram::unbound()?)
    }

    /// A connected pair of sockets.
    ///
    /// # Errors
    ///
    /// The `socketpair` error.
    pub fn pair() -> io::Result<(UnixDatagram, UnixDatagram)> {
        let (a, b) = std_unix::UnixDatagram::pair()?;
        Ok((Self::from_std(a)?, Self::from_std(b)?))
    }

    /// Wraps a std socket (it is put in non-blocking mode).
    ///
    /// # Errors
    ///
    /// An error outside a runtime or if registration fails.
    pub fn from_std(socket: std_unix::UnixDatagram) -> io::Result<UnixDatagram> {
        Ok(UnixDatagram {
            io: Async::new(socket)?,
        })
    }

    /// Connects to the socket file `path` (the default peer).
    ///
    /// # Errors
    ///
    /// The `connect` error.
    pub fn connect(&self, path: impl AsRef<Path>) -> io::Result<()> {
        self.io.get_ref().connect(path)
    }

    /// Sends a datagram to `path`.
    ///
    /// # Errors
    ///
    /// The `sendto` error.
    pub async fn send_to(&self, buf: &[u8], path: impl AsRef<Path>) -> io::Result<usize> {
        let path = path.as_ref();
        self.io.write_with(|s| s.send_to(buf, path)).await
    }

    /// Receives a datagram and its sender's address.
    ///
    /// # Errors
    ///
    /// The `recvfrom` error.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.io.read_with(|s| s.recv_from(buf)).await
    }

    /// Sends a datagram to the connected peer.
    ///
    /// # Errors
    ///
    /// The `send` error.
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.io.write_with(|s| s.send(buf)).await
    }

    /// Receives a datagram from the connected peer.
    ///
    /// # Errors
    ///
    /// The `recv` error.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io.read_with(|s| s.recv(buf)).await
    }

    /// The local address.
    ///
    /// # Errors
    ///
    /// The `getsockname` error.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }
}
