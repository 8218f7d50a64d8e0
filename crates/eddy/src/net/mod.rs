//! Networking on the workers' reactors: TCP, UDP and Unix sockets, asyncio's `sock_*`
//! functions, and asyncio-style streams.
//!
//! For servers: [`TcpSocket`] sets options before `connect` or `listen` (bind-before-connect,
//! `SO_REUSEADDR`/`SO_REUSEPORT`, buffer sizes, backlog), [`TcpStream`] has the per-connection
//! options (keepalive, linger, TTL, buffer sizes, `TCP_NODELAY`) and the non-waiting
//! `try_read`/`try_write`/`peek` family, and [`lookup_host`] resolves names on the blocking
//! pool.
//!
//! Every socket is registered with the reactor of the worker that first uses it (see
//! `io::Async`); its readiness events wake its tasks on that worker, or, if that worker is
//! stuck in a long job, on a sibling.
//!
//! Every socket type implements `AsFd` and `AsRawFd`, for the options eddy does not wrap. The
//! descriptor stays the socket's: close it or make it blocking and the worker serving it
//! breaks.
//!
//! ```
//! use eddy::net::{TcpListener, TcpStream};
//! use socket2::SockRef;
//!
//! let rt = eddy::Runtime::new()?;
//! rt.block_on(async {
//!     let listener = TcpListener::bind("127.0.0.1:0").await?;
//!     let stream = TcpStream::connect(listener.local_addr()?).await?;
//!     // `SockRef` borrows the descriptor through `AsFd`.
//!     SockRef::from(&stream).set_tcp_nodelay(true)?;
//!     assert!(stream.nodelay()?);
//!     Ok::<(), std::io::Error>(())
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```

/// `AsFd` and `AsRawFd` for a socket type, through the `Async` that `$async_of` returns.
///
/// The descriptor stays registered with its worker's poller and owned by the socket: a
/// caller may read it, set options or pass it to a system call, but must not close it or
/// make it blocking (a blocking descriptor would hang the worker that serves it).
macro_rules! impl_fd_traits {
    ($ty:ty, |$s:ident| $async_of:expr) => {
        impl std::os::fd::AsFd for $ty {
            fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
                let $s = self;
                std::os::fd::AsFd::as_fd($async_of)
            }
        }

        impl std::os::fd::AsRawFd for $ty {
            fn as_raw_fd(&self) -> std::os::fd::RawFd {
                let $s = self;
                std::os::fd::AsRawFd::as_raw_fd($async_of)
            }
        }
    };
}

mod addr;
pub(crate) mod conn;
mod sock;
mod socket;
mod streams;
mod tcp;
mod udp;
mod unix;

pub use addr::{lookup_host, ToSocketAddrs};
pub use sock::{sock_accept, sock_connect, sock_recv, sock_sendall};
pub use socket::{TcpKeepalive, TcpSocket};
pub use streams::{
    open_connection, start_server, start_server_with, IncompleteReadError, LimitOverrunError,
    Server, StreamReader, StreamWriter, WriteBufferFull, DEFAULT_HARD_CAP, DEFAULT_HIGH_WATER,
    DEFAULT_LIMIT, DEFAULT_LOW_WATER,
};
pub use tcp::{Incoming, ListenOptions, OwnedReadHalf, OwnedWriteHalf, TcpListener, TcpStream};
pub use udp::UdpSocket;
pub use unix::{split as unix_split, UnixDatagram, UnixListener, UnixStream};
