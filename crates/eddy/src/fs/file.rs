//! [`File`]: reads, writes and seeks on the blocking pool, through one buffer.
//!
//! A `File` is a small state machine: idle with its buffer, or busy with one pool job that
//! owns the buffer until it returns. The buffer holds either read-ahead (bytes read from the
//! file and not yet given out) or writes not yet made, never both:
//!
//! * a read is served from the read-ahead; only when it is empty does a job read
//!   [`BUFFER_SIZE`] bytes (or the caller's length, up to [`MAX_READ`]);
//! * a write is copied into the buffer and returns at once; a full buffer, a flush, a seek
//!   or a read sends the writes to the file first;
//! * a write after a read first moves the file's position back over the unread read-ahead,
//!   and a relative seek counts it, so the position the caller sees is that of a plain
//!   `std::fs::File`.
//!
//! An error of a job is returned by the operation that waits for it (a write error can thus
//! come from `flush`, or from the write that found the buffer full). Writes still in the
//! buffer when the `File` is dropped are made by the dropping thread, and an error there is
//! lost, as with std's `BufWriter`: call `flush` (or `close`) to see it. Writes that a
//! cancelled operation left in a pool job are made by that job, or, if the pool drops it
//! unrun at shutdown, in its drop (`Unrun`).

use std::fmt;
use std::fs::{Metadata, OpenOptions};
use std::future::{poll_fn, Future};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use crate::task::handle::Task;

use super::on_pool;

/// The buffer's size: one pool trip (a queue push, a thread wake-up, a task wake-up) costs
/// about as much as copying tens of kilobytes, so small reads and writes share one trip.
pub const BUFFER_SIZE: usize = 64 * 1024;

/// The most one read job reads, when the caller asks for more than [`BUFFER_SIZE`] at once:
/// larger reads take fewer trips, and this bounds the buffer a `File` keeps.
pub const MAX_READ: usize = 2 * 1024 * 1024;

/// A file whose operations run on the blocking pool, with `futures-io`'s `AsyncRead`,
/// `AsyncWrite` and `AsyncSeek`.
///
/// Reads and writes go through one buffer of [`BUFFER_SIZE`] bytes: a read is served from
/// the read-ahead and a write is copied in, so small ones cost no pool trip. The position
/// is that of a plain file (a write after a read lands where the reading stopped). An
/// error of a buffered write comes from `flush`, or from a later write, read or seek;
/// writes still buffered at the drop are made then, and an error there is lost, so call
/// `flush` (or `close`) to see it.
///
/// # Examples
///
/// ```
/// use futures_lite::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
/// use std::io::SeekFrom;
///
/// let rt = eddy::Runtime::new()?;
/// let path = std::env::temp_dir().join(format!("eddy-file-doc-{}", std::process::id()));
/// rt.block_on(async {
///     let mut file = eddy::fs::File::create(&path).await?;
///     file.write_all(b"hello, world").await?;
///     file.flush().await?;
///
///     let mut file = eddy::fs::File::open(&path).await?;
///     file.seek(SeekFrom::Start(7)).await?;
///     let mut rest = String::new();
///     file.read_to_string(&mut rest).await?;
///     assert_eq!(rest, "world");
///     eddy::fs::remove_file(&path).await
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct File {
    std: Arc<std::fs::File>,
    state: State,
}

enum State {
    Idle(Buffer),
    /// A pool job holds the buffer.
    Busy(Task<(Done, Buffer)>),
}

/// What a pool job did.
enum Done {
    Read(io::Result<usize>),
    Write(io::Result<()>),
    /// A seek the caller asked for (`asked`): its result goes to the `poll_seek` that asks
    /// for the same.
    Seek {
        asked: SeekFrom,
        result: io::Result<u64>,
    },
    /// The position moved back over unread read-ahead, before a write.
    Rewind(io::Result<u64>),
}

impl Done {
    /// What the job did, or the error it met, which the operation waiting for it returns
    /// (a seek's result stays with the seek, for `poll_seek`).
    fn check(self) -> io::Result<Done> {
        match self {
            Done::Read(Err(e)) | Done::Write(Err(e)) | Done::Rewind(Err(e)) => Err(e),
            done => Ok(done),
        }
    }
}

/// Read-ahead or writes not yet made (see the module notes).
#[derive(Default)]
struct Buffer {
    bytes: Vec<u8>,
    /// Read-ahead: `bytes[pos..]` is unread. Writes: 0.
    pos: usize,
    /// `bytes` are writes to make (else read-ahead).
    writes: bool,
}

impl Buffer {
    fn unread(&self) -> &[u8] {
        if self.writes {
            &[]
        } else {
            &self.bytes[self.pos..]
        }
    }

    fn has_writes(&self) -> bool {
        self.writes && !self.bytes.is_empty()
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.pos = 0;
        self.writes = false;
    }

    /// Reads up to `len` bytes of `file` as the new read-ahead.
    fn fill(&mut self, mut file: &std::fs::File, len: usize) -> Done {
        self.clear();
        self.bytes.resize(len, 0);
        let read = loop {
            match file.read(&mut self.bytes) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        self.bytes.truncate(*read.as_ref().unwrap_or(&0));
        Done::Read(read)
    }

    /// Writes the buffered writes to `file`; they are dropped either way.
    fn write_out(&mut self, mut file: &std::fs::File) -> Done {
        let written = file.write_all(&self.bytes);
        self.clear();
        Done::Write(written)
    }

    /// Moves `file`'s position back over the unread read-ahead, which is dropped.
    fn rewind(&mut self, mut file: &std::fs::File) -> Done {
        let back = self.unread().len() as i64;
        self.clear();
        Done::Rewind(file.seek(SeekFrom::Current(-back)))
    }
}

/// A job's file and buffer until the job runs. A job the pool drops unrun (a runtime
/// shutting down cancels what is queued) makes the buffered writes here, in its drop: they
/// were reported written, and a cancelled operation may have left them in the job.
struct Unrun(Option<(Arc<std::fs::File>, Buffer)>);

impl Drop for Unrun {
    fn drop(&mut self) {
        if let Some((file, mut buffer)) = self.0.take() {
            if buffer.has_writes() {
                buffer.write_out(&file);
            }
        }
    }
}

impl fmt::Debug for File {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("File")
            .field("std", &self.std)
            .field("busy", &matches!(self.state, State::Busy(_)))
            .finish()
    }
}

impl File {
    /// Opens a file for reading ([`std::fs::File::open`]).
    ///
    /// # Errors
    ///
    /// As [`std::fs::File::open`].
    pub async fn open(path: impl AsRef<Path>) -> io::Result<File> {
        let path = path.as_ref().to_owned();
        on_pool(move || std::fs::File::open(path))
            .await
            .map(File::from_std)
    }

    /// Creates or truncates a file for writing ([`std::fs::File::create`]).
    ///
    /// # Errors
    ///
    /// As [`std::fs::File::create`].
    pub async fn create(path: impl AsRef<Path>) -> io::Result<File> {
        let path = path.as_ref().to_owned();
        on_pool(move || std::fs::File::create(path))
            .await
            .map(File::from_std)
    }

    /// Opens a file with `options` (append, create-new, read and write, ...).
    ///
    /// # Errors
    ///
    /// As [`OpenOptions::open`].
    pub async fn open_with(path: impl AsRef<Path>, options: &OpenOptions) -> io::Result<File> {
        let (path, options) = (path.as_ref().to_owned(), options.clone());
        on_pool(move || options.open(path))
            .await
            .map(File::from_std)
    }

    /// Wraps an open std file.
    pub fn from_std(file: std::fs::File) -> File {
        File {
            std: Arc::new(file),
            state: State::Idle(Buffer::default()),
        }
    }

    /// The file's metadata. Buffered writes are made first, so the length counts them.
    ///
    /// # Errors
    ///
    /// A write error of the buffered writes, or the `fstat` error.
    pub async fn metadata(&mut self) -> io::Result<Metadata> {
        poll_fn(|cx| self.poll_write_out(cx)).await?;
        let file = self.std.clone();
        on_pool(move || file.metadata()).await
    }

    /// Makes the buffered writes, then `fsync`s data and metadata to the disk.
    ///
    /// # Errors
    ///
    /// A write error, or the `fsync` error.
    pub async fn sync_all(&mut self) -> io::Result<()> {
        poll_fn(|cx| self.poll_write_out(cx)).await?;
        let file = self.std.clone();
        on_pool(move || file.sync_all()).await
    }

    /// Gives the idle buffer to `job` on the pool.
    fn start(&mut self, job: impl FnOnce(&std::fs::File, &mut Buffer) -> Done + Send + 'static) {
        let State::Idle(buffer) =
            std::mem::replace(&mut self.state, State::Idle(Buffer::default()))
        else {
            unreachable!("a job is started only when the file is idle");
        };
        let mut unrun = Unrun(Some((self.std.clone(), buffer)));
        self.state = State::Busy(crate::spawn_blocking(move || {
            let (file, mut buffer) = unrun.0.take().expect("a job runs once");
            let done = job(&file, &mut buffer);
            (done, buffer)
        }));
    }

    /// Waits for the job in flight, if any: `Some` with what it did, `None` if idle, or the
    /// job's error.
    fn poll_job(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Option<Done>>> {
        let State::Busy(task) = &mut self.state else {
            return Poll::Ready(Ok(None));
        };
        let finished = ready!(Pin::new(task).poll(cx));
        Poll::Ready(match finished {
            Ok((done, buffer)) => {
                self.state = State::Idle(buffer);
                done.check().map(Some)
            }
            Err(e) => {
                self.state = State::Idle(Buffer::default());
                Err(io::Error::other(format!("a file operation failed: {e}")))
            }
        })
    }

    /// The idle buffer (only called once `poll_job` said idle).
    fn idle(&mut self) -> &mut Buffer {
        match &mut self.state {
            State::Idle(buffer) => buffer,
            State::Busy(_) => unreachable!("checked idle by poll_job"),
        }
    }

    /// Waits until idle with no writes in the buffer.
    fn poll_write_out(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            if ready!(self.poll_job(cx))?.is_some() {
                continue;
            }
            if !self.idle().has_writes() {
                return Poll::Ready(Ok(()));
            }
            self.start(|file, buffer| buffer.write_out(file));
        }
    }
}

impl futures_io::AsyncRead for File {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            if let Some(done) = ready!(this.poll_job(cx))? {
                if let Done::Read(Ok(0)) = done {
                    return Poll::Ready(Ok(0));
                }
                continue;
            }
            let buffer = this.idle();
            if out.is_empty() {
                return Poll::Ready(Ok(0));
            }
            let unread = buffer.unread();
            if !unread.is_empty() {
                let n = unread.len().min(out.len());
                out[..n].copy_from_slice(&unread[..n]);
                buffer.pos += n;
                return Poll::Ready(Ok(n));
            }
            if buffer.has_writes() {
                this.start(|file, buffer| buffer.write_out(file));
                continue;
            }
            let len = out.len().clamp(BUFFER_SIZE, MAX_READ);
            this.start(move |file, buffer| buffer.fill(file, len));
        }
    }
}

impl futures_io::AsyncWrite for File {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        src: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            if ready!(this.poll_job(cx))?.is_some() {
                continue;
            }
            let buffer = this.idle();
            if src.is_empty() {
                return Poll::Ready(Ok(0));
            }
            if !buffer.unread().is_empty() {
                this.start(|file, buffer| buffer.rewind(file));
                continue;
            }
            if buffer.has_writes() && buffer.bytes.len() >= BUFFER_SIZE {
                this.start(|file, buffer| buffer.write_out(file));
                continue;
            }
            if !buffer.writes {
                buffer.clear();
                buffer.writes = true;
            }
            let n = src.len().min(BUFFER_SIZE - buffer.bytes.len());
            buffer.bytes.extend_from_slice(&src[..n]);
            return Poll::Ready(Ok(n));
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_write_out(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}

impl futures_io::AsyncSeek for File {
    /// Makes the buffered writes, then seeks; a relative seek counts from the position the
    /// caller has read to, not from the end of the read-ahead. A seek whose future was
    /// dropped before it finished still happens; the next seek then moves again, from there.
    fn poll_seek(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        pos: SeekFrom,
    ) -> Poll<io::Result<u64>> {
        let this = self.get_mut();
        loop {
            match ready!(this.poll_job(cx))? {
                // A seek asked for by an abandoned call is done; this call asks anew.
                Some(Done::Seek { asked, result }) if asked == pos => return Poll::Ready(result),
                Some(_) => continue,
                None => {}
            }
            let buffer = this.idle();
            if buffer.has_writes() {
                this.start(|file, buffer| buffer.write_out(file));
                continue;
            }
            let to = match pos {
                SeekFrom::Current(n) => SeekFrom::Current(n - buffer.unread().len() as i64),
                other => other,
            };
            buffer.clear();
            this.start(move |mut file, _| Done::Seek {
                asked: pos,
                result: file.seek(to),
            });
        }
    }
}

impl Drop for File {
    /// Makes the buffered writes, here and now: a pool job could be dropped unrun by a
    /// runtime shutting down, and this is one blocking write of at most [`BUFFER_SIZE`]
    /// bytes, as std's `BufWriter` makes in its drop.
    fn drop(&mut self) {
        if let State::Idle(buffer) = &mut self.state {
            if buffer.has_writes() {
                buffer.write_out(&self.std);
            }
        }
        // A job in flight runs to its end on the pool (dropping its task detaches it).
    }
}
