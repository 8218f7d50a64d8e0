//! asyncio's `loop.sock_*` coroutines over plain non-blocking std sockets.
//!
//! Each function first tries the system call. Only if it would block is the fd registered
//! (temporarily, on the current worker's reactor) and the call retried on readiness; the
//! registration is removed when the function returns. As in asyncio, the socket must
//! already be non-blocking: a blocking one is an `InvalidInput` error, because a blocking
//! call would stall the whole worker.

use std::io::{self, Read};
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd};

use socket2::{SockAddr, SockRef};

use crate::io::Async;

fn require_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    if crate::io::is_nonblocking(fd)? {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the socket must be non-blocking",
        ))
    }
}

/// Runs `op` once; if it would block, registers `fd` and retries it on readiness.
async fn retry<R>(
    fd: BorrowedFd<'_>,
    read: bool,
    mut op: impl FnMut(BorrowedFd<'_>) -> io::Result<R>,
) -> io::Result<R> {
    require_nonblocking(fd)?;
    match op(fd) {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
        res => return res,
    }
    let registered = Async::new_nonblocking(fd)?;
    if read {
        registered.read_with(|fd| op(fd.as_fd())).await
    } else {
        registered.write_with(|fd| op(fd.as_fd())).await
    }
}

/// Receives up to `buf.len()` bytes (asyncio's `sock_recv`); `Ok(0)` at end of stream.
///
/// # Errors
///
/// `InvalidInput` "the socket must be non-blocking" for a blocking socket; the `recv` error.
///
/// # Examples
///
/// ```
/// use std::net::{TcpListener, TcpStream};
///
/// let rt = eddy::Runtime::new()?;
/// let listener = TcpListener::bind("127.0.0.1:0")?;
/// let client = TcpStream::connect(listener.local_addr()?)?;
/// let (server, _) = listener.accept()?;
/// client.set_nonblocking(true)?;
/// server.set_nonblocking(true)?;
/// rt.block_on(async {
///     eddy::net::sock_sendall(&client, b"data").await?;
///     let mut buf = [0u8; 4];
///     let n = eddy::net::sock_recv(&server, &mut buf).await?;
///     assert_eq!(&buf[..n], b"data");
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn sock_recv(sock: &impl AsFd, buf: &mut [u8]) -> io::Result<usize> {
    retry(sock.as_fd(), true, |fd| (&*SockRef::from(&fd)).read(buf)).await
}

/// Sends all of `data` (asyncio's `sock_sendall`).
///
/// # Errors
///
/// `InvalidInput` for a blocking socket; the `send` error (for example `BrokenPipe`).
pub async fn sock_sendall(sock: &impl AsFd, mut data: &[u8]) -> io::Result<()> {
    let fd = sock.as_fd();
    while !data.is_empty() {
        let n = retry(fd, false, |fd| SockRef::from(&fd).send(data)).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        data = &data[n..];
    }
    Ok(())
}

/// Accepts a connection (asyncio's `sock_accept`). The new stream is non-blocking.
///
/// # Errors
///
/// `InvalidInput` for a blocking listener; the `accept` error (for example `EMFILE`).
pub async fn sock_accept(
    listener: &std::net::TcpListener,
) -> io::Result<(std::net::TcpStream, SocketAddr)> {
    let (stream, addr) = retry(listener.as_fd(), true, |_| listener.accept()).await?;
    stream.set_nonblocking(true)?;
    Ok((stream, addr))
}

/// Connects a non-blocking socket to `addr` (asyncio's `sock_connect`).
///
/// # Errors
///
/// `InvalidInput` for a blocking socket; the connect error (for example
/// `ConnectionRefused`).
///
/// # Examples
///
/// ```
/// use socket2::{Domain, Socket, Type};
///
/// let rt = eddy::Runtime::new()?;
/// let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
/// let addr = listener.local_addr()?;
/// let sock = Socket::new(Domain::IPV4, Type::STREAM, None)?;
/// sock.set_nonblocking(true)?;
/// rt.block_on(eddy::net::sock_connect(&sock, addr))?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn sock_connect(sock: &impl AsFd, addr: SocketAddr) -> io::Result<()> {
    let fd = sock.as_fd();
    require_nonblocking(fd)?;
    let target = SockAddr::from(addr);
    match SockRef::from(&fd).connect(&target) {
        Ok(()) => return Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    Async::new_nonblocking(fd)?.connected().await
}
