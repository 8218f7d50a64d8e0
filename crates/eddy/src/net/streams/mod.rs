//! asyncio-style streams: [`open_connection`], [`start_server`], [`StreamReader`] and
//! [`StreamWriter`], without asyncio's two known faults.
//!
//! * **Bounded buffers.** `StreamWriter::write` buffers synchronously, as asyncio's does, but
//!   the buffer has a hard cap (default [`DEFAULT_HARD_CAP`]): a write that would pass it
//!   fails with an error that says to await `drain()`, instead of letting the buffer grow
//!   without bound, as asyncio's does for as long as nobody drains.
//! * **Errors reach the writer at once.** A transport error (reset, broken pipe) met while
//!   flushing in the background is stored and returned by the very next `write` or `drain`.
//! * A writer dropped without `close()` discards its buffer and closes the connection: no
//!   orphan writes after the task that owned it is gone.

mod reader;
mod server;
mod writer;

use std::io;

pub use reader::{IncompleteReadError, LimitOverrunError, StreamReader, DEFAULT_LIMIT};
pub use server::{start_server, start_server_with, Server};
pub use writer::{
    StreamWriter, WriteBufferFull, DEFAULT_HARD_CAP, DEFAULT_HIGH_WATER, DEFAULT_LOW_WATER,
};

use crate::net::{TcpStream, ToSocketAddrs};

/// Connects to `addr` and returns a reader and a writer for the connection (asyncio's
/// `asyncio.open_connection`).
///
/// # Errors
///
/// The errors of [`TcpStream::connect`].
///
/// # Examples
///
/// ```
/// use eddy::net::{open_connection, start_server};
///
/// let rt = eddy::Runtime::new()?;
/// rt.block_on(async {
///     let server = start_server("127.0.0.1:0", |mut r, w| async move {
///         while let Ok(line) = r.readline().await {
///             if line.is_empty() { break; }
///             if w.write(&line).is_err() { break; }
///         }
///         let _ = w.close().await;
///     })
///     .await?;
///     let (mut r, w) = open_connection(server.local_addr()).await?;
///     w.write(b"hello\n")?;
///     w.drain().await?;
///     assert_eq!(r.readline().await?, b"hello\n");
///     server.close();
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn open_connection(addr: impl ToSocketAddrs) -> io::Result<(StreamReader, StreamWriter)> {
    let stream = TcpStream::connect(addr).await?;
    Ok(into_streams(stream))
}

/// Splits a connected stream into a reader and a writer.
pub(crate) fn into_streams(stream: TcpStream) -> (StreamReader, StreamWriter) {
    let (read, write) = stream.into_split();
    (StreamReader::new(read), StreamWriter::new(write))
}
