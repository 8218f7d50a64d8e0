//! UDP: [`UdpSocket`].

use std::fmt;
use std::io;
use std::net::SocketAddr;

use crate::io::Async;
use crate::net::addr::{each_addr, resolve, ToSocketAddrs};

/// A UDP socket.
///
/// # Examples
///
/// ```
/// use eddy::net::UdpSocket;
///
/// let rt = eddy::Runtime::new()?;
/// rt.block_on(async {
///     let a = UdpSocket::bind("127.0.0.1:0").await?;
///     let b = UdpSocket::bind("127.0.0.1:0").await?;
///     a.send_to(b"ping", b.local_addr()?).await?;
///     let mut buf = [0u8; 16];
///     let (n, from) = b.recv_from(&mut buf).await?;
///     assert_eq!((&buf[..n], from), (&b"ping"[..], a.local_addr()?));
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct UdpSocket {
    io: Async<std::net::UdpSocket>,
}

impl_fd_traits!(UdpSocket, |s| &s.io);

impl fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UdpSocket")
            .field("local_addr", &self.local_addr().ok())
            .finish()
    }
}

impl UdpSocket {
    /// Binds a socket to `addr`.
    ///
    /// # Errors
    ///
    /// Resolution or `bind` errors.
    pub async fn bind(addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        each_addr(addr, |a| async move {
            Self::from_std(std::net::UdpSocket::bind(a)?)
        })
        .await
    }

    /// Wraps a std socket (it is put in non-blocking mode).
    ///
    /// # Errors
    ///
    /// An error outside a runtime or if registration fails.
    pub fn from_std(socket: std::net::UdpSocket) -> io::Result<UdpSocket> {
        Ok(UdpSocket {
            io: Async::new(socket)?,
        })
    }

    /// Sets the default peer for [`send`](UdpSocket::send) and the only source
    /// [`recv`](UdpSocket::recv) accepts.
    ///
    /// # Errors
    ///
    /// Resolution or `connect` errors.
    pub async fn connect(&self, addr: impl ToSocketAddrs) -> io::Result<()> {
        let addrs = resolve(addr).await?;
        self.io.get_ref().connect(&addrs[..])
    }

    /// Sends a datagram to `addr`.
    ///
    /// # Errors
    ///
    /// Resolution or `sendto` errors.
    pub async fn send_to(&self, buf: &[u8], addr: impl ToSocketAddrs) -> io::Result<usize> {
        let addr = resolve(addr).await?[0];
        self.io.write_with(|s| s.send_to(buf, addr)).await
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
    /// The `send` error (`NotConnected` without [`connect`](UdpSocket::connect)).
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

    /// The connected peer's address.
    ///
    /// # Errors
    ///
    /// `NotConnected` without [`connect`](UdpSocket::connect).
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().peer_addr()
    }

    /// The underlying std socket.
    pub fn get_ref(&self) -> &std::net::UdpSocket {
        self.io.get_ref()
    }
}
