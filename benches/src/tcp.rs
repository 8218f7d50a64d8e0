//! Loopback TCP on the three runtimes behind one small trait, so that a workload that both
//! serves and opens connections (the `soak` binary) is written once for all of them.
//!
//! | operation    | eddy                          | tokio                               | smol                                  |
//! |--------------|-------------------------------|-------------------------------------|---------------------------------------|
//! | listen       | `eddy::net::TcpListener`      | `tokio::net::TcpListener`           | `async_io::Async<std::net::TcpListener>` |
//! | connect      | `eddy::net::TcpStream`        | `tokio::net::TcpStream`             | `async_io::Async<std::net::TcpStream>`   |
//! | read, write  | the stream's own `async fn`s  | `AsyncReadExt` / `AsyncWriteExt`    | `futures_lite`'s `AsyncReadExt` / `AsyncWriteExt` |

use std::future::Future;
use std::io;
use std::net::{SocketAddr, TcpListener as StdListener, TcpStream as StdStream};

use async_io::Async;

use crate::runtimes::{Eddy, Runtime, Smol, Tokio};

/// What a loopback server and its clients need from a runtime. Every method is called from
/// inside a task of that runtime.
pub trait Tcp: Runtime {
    /// A listening socket.
    type Listener: Send + Sync + 'static;
    /// A connected socket.
    type Stream: Send + 'static;

    /// Listens on an ephemeral port of 127.0.0.1.
    fn bind() -> impl Future<Output = io::Result<Self::Listener>> + Send;
    /// Where `l` listens.
    fn local_addr(l: &Self::Listener) -> io::Result<SocketAddr>;
    /// The next connection made to `l`.
    fn accept(l: &Self::Listener) -> impl Future<Output = io::Result<Self::Stream>> + Send;
    /// Connects to `addr`.
    fn connect(addr: SocketAddr) -> impl Future<Output = io::Result<Self::Stream>> + Send;
    /// Reads what has arrived, at most `buf.len()` bytes (0: the peer closed).
    fn read(s: &mut Self::Stream, buf: &mut [u8])
        -> impl Future<Output = io::Result<usize>> + Send;
    /// Fills `buf`.
    fn read_exact(
        s: &mut Self::Stream,
        buf: &mut [u8],
    ) -> impl Future<Output = io::Result<()>> + Send;
    /// Writes all of `buf`.
    fn write_all(s: &mut Self::Stream, buf: &[u8]) -> impl Future<Output = io::Result<()>> + Send;
}

impl Tcp for Eddy {
    type Listener = eddy::net::TcpListener;
    type Stream = eddy::net::TcpStream;

    async fn bind() -> io::Result<Self::Listener> {
        eddy::net::TcpListener::bind("127.0.0.1:0").await
    }
    fn local_addr(l: &Self::Listener) -> io::Result<SocketAddr> {
        l.local_addr()
    }
    async fn accept(l: &Self::Listener) -> io::Result<Self::Stream> {
        Ok(l.accept().await?.0)
    }
    async fn connect(addr: SocketAddr) -> io::Result<Self::Stream> {
        eddy::net::TcpStream::connect(addr).await
    }
    async fn read(s: &mut Self::Stream, buf: &mut [u8]) -> io::Result<usize> {
        s.read(buf).await
    }
    async fn read_exact(s: &mut Self::Stream, buf: &mut [u8]) -> io::Result<()> {
        s.read_exact(buf).await
    }
    async fn write_all(s: &mut Self::Stream, buf: &[u8]) -> io::Result<()> {
        s.write_all(buf).await
    }
}

impl Tcp for Tokio {
    type Listener = tokio::net::TcpListener;
    type Stream = tokio::net::TcpStream;

    async fn bind() -> io::Result<Self::Listener> {
        tokio::net::TcpListener::bind("127.0.0.1:0").await
    }
    fn local_addr(l: &Self::Listener) -> io::Result<SocketAddr> {
        l.local_addr()
    }
    async fn accept(l: &Self::Listener) -> io::Result<Self::Stream> {
        Ok(l.accept().await?.0)
    }
    async fn connect(addr: SocketAddr) -> io::Result<Self::Stream> {
        tokio::net::TcpStream::connect(addr).await
    }
    async fn read(s: &mut Self::Stream, buf: &mut [u8]) -> io::Result<usize> {
        tokio::io::AsyncReadExt::read(s, buf).await
    }
    async fn read_exact(s: &mut Self::Stream, buf: &mut [u8]) -> io::Result<()> {
        tokio::io::AsyncReadExt::read_exact(s, buf).await.map(drop)
    }
    async fn write_all(s: &mut Self::Stream, buf: &[u8]) -> io::Result<()> {
        tokio::io::AsyncWriteExt::write_all(s, buf).await
    }
}

impl Tcp for Smol {
    type Listener = Async<StdListener>;
    type Stream = Async<StdStream>;

    async fn bind() -> io::Result<Self::Listener> {
        Async::<StdListener>::bind(([127, 0, 0, 1], 0))
    }
    fn local_addr(l: &Self::Listener) -> io::Result<SocketAddr> {
        l.get_ref().local_addr()
    }
    async fn accept(l: &Self::Listener) -> io::Result<Self::Stream> {
        Ok(l.accept().await?.0)
    }
    async fn connect(addr: SocketAddr) -> io::Result<Self::Stream> {
        Async::<StdStream>::connect(addr).await
    }
    async fn read(s: &mut Self::Stream, buf: &mut [u8]) -> io::Result<usize> {
        futures_lite::AsyncReadExt::read(s, buf).await
    }
    async fn read_exact(s: &mut Self::Stream, buf: &mut [u8]) -> io::Result<()> {
        futures_lite::AsyncReadExt::read_exact(s, buf).await
    }
    async fn write_all(s: &mut Self::Stream, buf: &[u8]) -> io::Result<()> {
        futures_lite::AsyncWriteExt::write_all(s, buf).await
    }
}
