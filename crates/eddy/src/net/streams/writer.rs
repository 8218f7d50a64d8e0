//! [`StreamWriter`]: synchronous buffered writes, `drain()` with water marks, a hard cap, and
//! transport errors that reach the writer at once.
//!
//! `write` first tries to send directly (most writes of a healthy connection never touch the
//! buffer); what the socket does not take is buffered, and a flusher task is started that
//! sends the buffer as the socket becomes writable. `drain` waits while the buffer is above
//! the high-water mark, until the flusher brings it down to the low-water mark. An error the
//! flusher meets is stored and returned by the next `write`/`drain`.

use std::error::Error;
use std::fmt;
use std::future::poll_fn;
use std::io;
use std::net::Shutdown;
use std::sync::Arc;
use std::task::{Poll, Waker};

use parking_lot::Mutex;

use crate::net::conn::Conn;
use crate::net::OwnedWriteHalf;

/// Default high-water mark: `drain` waits while more than this is buffered.
pub const DEFAULT_HIGH_WATER: usize = 64 * 1024;
/// Default low-water mark: a waiting `drain` resumes once the buffer is this small.
pub const DEFAULT_LOW_WATER: usize = 16 * 1024;
/// Default hard cap: a `write` that would buffer more fails with [`WriteBufferFull`].
pub const DEFAULT_HARD_CAP: usize = 1024 * 1024;

/// The error inside the `io::Error` (kind `Other`) of a [`StreamWriter::write`] that would
/// pass the buffer's hard cap.
#[derive(Debug, Clone, Copy)]
pub struct WriteBufferFull {
    /// Bytes buffered when the write was refused.
    pub buffered: usize,
    /// The cap.
    pub cap: usize,
}

impl fmt::Display for WriteBufferFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "write buffer full ({} of {} bytes): await drain() before writing more",
            self.buffered, self.cap
        )
    }
}

impl Error for WriteBufferFull {}

struct WriterState {
    buf: Vec<u8>,
    /// Start of the unsent bytes in `buf`.
    pos: usize,
    high: usize,
    low: usize,
    cap: usize,
    /// The first transport error; every later write/drain returns a copy.
    error: Option<(io::ErrorKind, String)>,
    flusher_running: bool,
    /// The writer was dropped or closed: the flusher stops.
    closed: bool,
    drain_waiters: Vec<Waker>,
}

impl WriterState {
    fn pending(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn error(&self) -> Option<io::Error> {
        self.error
            .as_ref()
            .map(|(k, m)| io::Error::new(*k, m.clone()))
    }

    fn fail(&mut self, e: &io::Error) {
        if self.error.is_none() {
            self.error = Some((e.kind(), e.to_string()));
        }
        self.buf.clear();
        self.pos = 0;
    }
}

/// The writing end of a connection from [`open_connection`](crate::net::open_connection) or
/// a [`start_server`](crate::net::start_server) handler.
pub struct StreamWriter {
    half: OwnedWriteHalf,
    state: Arc<Mutex<WriterState>>,
}

impl fmt::Debug for StreamWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamWriter")
            .field("buffered", &self.write_buffer_size())
            .finish()
    }
}

impl StreamWriter {
    pub(crate) fn new(half: OwnedWriteHalf) -> Self {
        StreamWriter {
            half,
            state: Arc::new(Mutex::new(WriterState {
                buf: Vec::new(),
                pos: 0,
                high: DEFAULT_HIGH_WATER,
                low: DEFAULT_LOW_WATER,
                cap: DEFAULT_HARD_CAP,
                error: None,
                flusher_running: false,
                closed: false,
                drain_waiters: Vec::new(),
            })),
        }
    }

    fn conn(&self) -> &Conn<std::net::TcpStream> {
        &self.half.conn
    }

    /// Queues `data` for sending and returns at once (asyncio's `write`). Call
    /// [`drain`](StreamWriter::drain) regularly to let the buffer empty.
    ///
    /// # Errors
    ///
    /// The stored transport error, if an earlier send failed (for example `BrokenPipe`,
    /// `ConnectionReset`); `Other` carrying [`WriteBufferFull`] if the buffer would pass its
    /// hard cap; `NotConnected` after [`close`](StreamWriter::close).
    pub fn write(&self, data: &[u8]) -> io::Result<()> {
        let mut st = self.state.lock();
        if let Some(e) = st.error() {
            return Err(e);
        }
        if st.closed {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the writer is closed",
            ));
        }
        let mut data = data;
        if st.pending() == 0 {
            // Fast path: straight to the socket.
            match send_nosignal(self.conn().get_ref(), data) {
                Ok(n) => data = &data[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => {
                    st.fail(&e);
                    return Err(e);
                }
            }
            if data.is_empty() {
                return Ok(());
            }
        }
        if st.pending() + data.len() > st.cap {
            let full = WriteBufferFull {
                buffered: st.pending(),
                cap: st.cap,
            };
            return Err(io::Error::other(full));
        }
        st.buf.extend_from_slice(data);
        if !st.flusher_running {
            st.flusher_running = true;
            drop(st);
            self.start_flusher();
        }
        Ok(())
    }

    fn start_flusher(&self) {
        let conn = self.conn().clone();
        let state = self.state.clone();
        drop(crate::spawn(async move { flush_loop(conn, state).await }));
    }

    /// Waits until the buffer is at or below the low-water mark, if it is above the
    /// high-water mark (asyncio's `drain`).
    ///
    /// # Errors
    ///
    /// The stored transport error, at once or as soon as the flusher meets it.
    pub async fn drain(&self) -> io::Result<()> {
        // Above the high-water mark we wait; once waiting, until the low-water mark.
        let mut waiting = false;
        poll_fn(|cx| {
            let mut st = self.state.lock();
            if let Some(e) = st.error() {
                return Poll::Ready(Err(e));
            }
            let threshold = if waiting { st.low } else { st.high };
            if st.pending() <= threshold {
                return Poll::Ready(Ok(()));
            }
            waiting = true;
            if !st.drain_waiters.iter().any(|w| w.will_wake(cx.waker())) {
                st.drain_waiters.push(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }

    /// Sets the high- and low-water marks of [`drain`](StreamWriter::drain) (asyncio's
    /// `transport.set_write_buffer_limits`). `low` is clamped to `high`.
    pub fn set_write_buffer_limits(&self, high: usize, low: usize) {
        let mut st = self.state.lock();
        st.high = high;
        st.low = low.min(high);
    }

    /// Sets the hard cap on buffered bytes (default [`DEFAULT_HARD_CAP`]). It is raised to the
    /// high-water mark if lower.
    pub fn set_write_buffer_cap(&self, cap: usize) {
        let mut st = self.state.lock();
        st.cap = cap.max(st.high);
    }

    /// Bytes buffered and not yet sent.
    pub fn write_buffer_size(&self) -> usize {
        self.state.lock().pending()
    }

    /// Sends what is buffered, then shuts the write side down (sends FIN).
    ///
    /// # Errors
    ///
    /// The stored transport error, or the `shutdown` error.
    pub async fn close(&self) -> io::Result<()> {
        poll_fn(|cx| {
            let mut st = self.state.lock();
            if let Some(e) = st.error() {
                return Poll::Ready(Err(e));
            }
            if st.pending() == 0 {
                return Poll::Ready(Ok(()));
            }
            if !st.drain_waiters.iter().any(|w| w.will_wake(cx.waker())) {
                st.drain_waiters.push(cx.waker().clone());
            }
            Poll::Pending
        })
        .await?;
        self.state.lock().closed = true;
        self.conn().shutdown(Shutdown::Write)
    }
}

impl Drop for StreamWriter {
    /// Discards the buffer and closes the connection: nothing is sent after the writer is
    /// gone.
    fn drop(&mut self) {
        let mut st = self.state.lock();
        let was_closed = std::mem::replace(&mut st.closed, true);
        st.buf.clear();
        st.pos = 0;
        drop(st);
        if !was_closed {
            let _ = self.conn().shutdown(Shutdown::Both);
        }
    }
}

/// Sends the buffer as the socket becomes writable; stops when it is empty, on error, or
/// when the writer is gone.
async fn flush_loop(conn: Conn<std::net::TcpStream>, state: Arc<Mutex<WriterState>>) {
    loop {
        let res = poll_fn(|cx| {
            conn.0.poll_write_with(cx, |s| {
                let mut st = state.lock();
                if st.pending() == 0 {
                    return Ok(None);
                }
                let n = send_nosignal(s, &st.buf[st.pos..])?;
                st.pos += n;
                if st.pos == st.buf.len() {
                    st.buf.clear();
                    st.pos = 0;
                }
                Ok(Some(n))
            })
        })
        .await;
        let mut st = state.lock();
        if let Err(e) = res {
            st.fail(&e);
        }
        if st.pending() <= st.low {
            wake_all(&mut st.drain_waiters);
        }
        // Decide under the lock, so that a `write` racing with our exit either sees the
        // flusher running (and we see its bytes here) or starts a new one.
        if st.error.is_none() && !st.closed && st.pending() > 0 {
            continue;
        }
        st.flusher_running = false;
        wake_all(&mut st.drain_waiters);
        return;
    }
}

fn wake_all(wakers: &mut Vec<Waker>) {
    for w in wakers.drain(..) {
        w.wake();
    }
}

/// A `send` that never blocks (the socket is non-blocking) and never raises SIGPIPE.
fn send_nosignal(socket: &std::net::TcpStream, buf: &[u8]) -> io::Result<usize> {
    socket2::SockRef::from(socket).send_with_flags(buf, libc::MSG_NOSIGNAL)
}
