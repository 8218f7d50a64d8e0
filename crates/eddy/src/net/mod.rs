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
