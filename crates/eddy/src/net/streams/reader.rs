//! [`StreamReader`]: buffered reads with asyncio's `read`, `readline`, `readexactly`,
//! `readuntil` and `at_eof`.

use std::error::Error;
use std::fmt;
use std::io;

use crate::net::OwnedReadHalf;

/// asyncio's default stream limit: the longest line `readline`/`readuntil` accept.
pub const DEFAULT_LIMIT: usize = 64 * 1024;

/// How much one socket read asks for.
const READ_CHUNK: usize = 64 * 1024;

/// The error inside the `io::Error` (kind `UnexpectedEof`) of
/// [`StreamReader::readexactly`] or [`StreamReader::readuntil`] when the stream ends first.
/// It carries the bytes that did arrive.
#[derive(Debug)]
pub struct IncompleteReadError {
    /// What was read before the end of the stream.
    pub partial: Vec<u8>,
    /// How many bytes were wanted (`None` for `readuntil`).
    pub expected: Option<usize>,
}

impl fmt::Display for IncompleteReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.expected {
            Some(n) => write!(
                f,
                "{} bytes read on a total of {n} expected bytes",
                self.partial.len()
            ),
            None => write!(
                f,
                "stream ended after {} bytes without the separator",
                self.partial.len()
            ),
        }
    }
}

impl Error for IncompleteReadError {}

/// The error inside the `io::Error` (kind `InvalidData`) of [`StreamReader::readuntil`] and
/// [`StreamReader::readline`] when the separator is not found within the limit. The data
/// stays buffered: read it with [`StreamReader::read`] or skip it.
#[derive(Debug)]
pub struct LimitOverrunError {
    /// How many bytes are buffered (and stay buffered).
    pub consumed: usize,
}

impl fmt::Display for LimitOverrunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "separator is not found, and chunk exceed the limit ({} bytes buffered)",
            self.consumed
        )
    }
}

impl Error for LimitOverrunError {}

/// The reading end of a connection from [`open_connection`](crate::net::open_connection) or
/// a [`start_server`](crate::net::start_server) handler.
#[derive(Debug)]
pub struct StreamReader {
    half: OwnedReadHalf,
    buf: Vec<u8>,
    /// Start of the unread bytes in `buf`.
    pos: usize,
    eof: bool,
    limit: usize,
}

impl StreamReader {
    pub(crate) fn new(half: OwnedReadHalf) -> Self {
        StreamReader {
            half,
            buf: Vec::new(),
            pos: 0,
            eof: false,
            limit: DEFAULT_LIMIT,
        }
    }

    /// Sets the line limit of `readline`/`readuntil` (default [`DEFAULT_LIMIT`]).
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit.max(1);
    }

    fn buffered(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    fn consume(&mut self, n: usize) -> Vec<u8> {
        let out = self.buf[self.pos..self.pos + n].to_vec();
        self.pos += n;
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        out
    }

    /// Reads more from the socket into the buffer; false at end of stream.
    async fn fill(&mut self) -> io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        if self.pos > 0 && self.pos * 2 >= self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        let start = self.buf.len();
        self.buf.resize(start + READ_CHUNK, 0);
        let res = self.half.read(&mut self.buf[start..]).await;
        let n = *res.as_ref().unwrap_or(&0);
        self.buf.truncate(start + n);
        let n = res?;
        if n == 0 {
            self.eof = true;
        }
        Ok(n > 0)
    }

    /// Reads up to `n` bytes: what is buffered, or else one read from the socket. An empty
    /// result means end of stream.
    ///
    /// # Errors
    ///
    /// The socket error (for example `ConnectionReset`).
    pub async fn read(&mut self, n: usize) -> io::Result<Vec<u8>> {
        if self.buffered().is_empty() {
            self.fill().await?;
        }
        let take = n.min(self.buffered().len());
        Ok(self.consume(take))
    }

    /// Reads until end of stream.
    ///
    /// # Errors
    ///
    /// The socket error.
    pub async fn read_to_end(&mut self) -> io::Result<Vec<u8>> {
        while self.fill().await? {}
        let n = self.buffered().len();
        Ok(self.consume(n))
    }

    /// Reads exactly `n` bytes.
    ///
    /// # Errors
    ///
    /// `UnexpectedEof` carrying an [`IncompleteReadError`] if the stream ends first; the
    /// socket error.
    pub async fn readexactly(&mut self, n: usize) -> io::Result<Vec<u8>> {
        while self.buffered().len() < n {
            if !self.fill().await? {
                let len = self.buffered().len();
                let partial = self.consume(len);
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    IncompleteReadError {
                        partial,
                        expected: Some(n),
                    },
                ));
            }
        }
        Ok(self.consume(n))
    }

    /// Reads up to and including `sep`.
    ///
    /// # Errors
    ///
    /// `InvalidData` carrying a [`LimitOverrunError`] if `sep` is not found within the limit
    /// (the data stays buffered); `UnexpectedEof` carrying an [`IncompleteReadError`] if the
    /// stream ends first (the partial data is taken out); the socket error.
    pub async fn readuntil(&mut self, sep: &[u8]) -> io::Result<Vec<u8>> {
        assert!(
            !sep.is_empty(),
            "readuntil: the separator must not be empty"
        );
        let mut searched = 0;
        loop {
            let data = self.buffered();
            if let Some(i) = find(&data[searched..], sep) {
                let end = searched + i + sep.len();
                if end > self.limit {
                    return Err(self.overrun());
                }
                return Ok(self.consume(end));
            }
            if data.len() > self.limit {
                return Err(self.overrun());
            }
            searched = data.len().saturating_sub(sep.len() - 1);
            if !self.fill().await? {
                let len = self.buffered().len();
                let partial = self.consume(len);
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    IncompleteReadError {
                        partial,
                        expected: None,
                    },
                ));
            }
        }
    }

    fn overrun(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            LimitOverrunError {
                consumed: self.buffered().len(),
            },
        )
    }

    /// Reads one line, `\n` included. At end of stream returns what is left (possibly
    /// nothing: an empty line means end of stream).
    ///
    /// # Errors
    ///
    /// `InvalidData` carrying a [`LimitOverrunError`] when the line is longer than the limit
    /// (the data stays buffered); the socket error.
    pub async fn readline(&mut self) -> io::Result<Vec<u8>> {
        match self.readuntil(b"\n").await {
            Err(e) if e.get_ref().is_some_and(|i| i.is::<IncompleteReadError>()) => {
                let partial = e
                    .into_inner()
                    .and_then(|i| i.downcast::<IncompleteReadError>().ok())
                    .map(|p| p.partial)
                    .unwrap_or_default();
                Ok(partial)
            }
            other => other,
        }
    }

    /// True when the stream ended and the buffer is empty.
    pub fn at_eof(&self) -> bool {
        self.eof && self.buffered().is_empty()
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
