//! Files, on the blocking pool: asyncio runs file IO in an executor, and so does eddy.
//!
//! Regular files are always "ready" to epoll, so a reactor cannot make their reads wait
//! without blocking; each operation here runs `std::fs` on the pool
//! ([`spawn_blocking`](crate::spawn_blocking)) and the task awaits it. The one-shot functions
//! ([`read`], [`write()`], ...) are one pool trip each. A [`File`] buffers (see its notes), so
//! that many small reads or writes share one trip.
//!
//! # Examples
//!
//! ```
//! let rt = eddy::Runtime::new()?;
//! let dir = std::env::temp_dir().join(format!("eddy-fs-doc-{}", std::process::id()));
//! rt.block_on(async {
//!     eddy::fs::create_dir_all(&dir).await?;
//!     let path = dir.join("greeting.txt");
//!     eddy::fs::write(&path, "hello").await?;
//!     assert_eq!(eddy::fs::read_to_string(&path).await?, "hello");
//!     eddy::fs::remove_file(&path).await
//! })?;
//! # std::fs::remove_dir(&dir)?;
//! # Ok::<(), std::io::Error>(())
//! ```

mod file;

use std::fs::Metadata;
use std::io;
use std::path::{Path, PathBuf};

pub use file::{File, BUFFER_SIZE, MAX_READ};

/// Runs `f` on the blocking pool; a panic there (not expected of `std::fs`) is an error.
async fn on_pool<T, F>(f: F) -> io::Result<T>
where
    F: FnOnce() -> io::Result<T> + Send + 'static,
    T: Send + 'static,
{
    match crate::spawn_blocking(f).await {
        Ok(result) => result,
        Err(e) => Err(io::Error::other(format!("a file operation failed: {e}"))),
    }
}

/// The whole contents of a file ([`std::fs::read`]).
///
/// # Errors
///
/// As [`std::fs::read`].
pub async fn read(path: impl AsRef<Path>) -> io::Result<Vec<u8>> {
    let path = path.as_ref().to_owned();
    on_pool(move || std::fs::read(path)).await
}

/// The whole contents of a UTF-8 file ([`std::fs::read_to_string`]).
///
/// # Errors
///
/// As [`std::fs::read_to_string`] (`InvalidData` for a file that is not UTF-8).
pub async fn read_to_string(path: impl AsRef<Path>) -> io::Result<String> {
    let path = path.as_ref().to_owned();
    on_pool(move || std::fs::read_to_string(path)).await
}

/// Writes `contents` as the whole file, creating or truncating it ([`std::fs::write`]).
///
/// # Errors
///
/// As [`std::fs::write`].
pub async fn write(path: impl AsRef<Path>, contents: impl AsRef<[u8]>) -> io::Result<()> {
    let (path, contents) = (path.as_ref().to_owned(), contents.as_ref().to_owned());
    on_pool(move || std::fs::write(path, contents)).await
}

/// A file's metadata, following symlinks ([`std::fs::metadata`]).
///
/// # Errors
///
/// As [`std::fs::metadata`].
pub async fn metadata(path: impl AsRef<Path>) -> io::Result<Metadata> {
    let path = path.as_ref().to_owned();
    on_pool(move || std::fs::metadata(path)).await
}

/// Removes a file ([`std::fs::remove_file`]).
///
/// # Errors
///
/// As [`std::fs::remove_file`].
pub async fn remove_file(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    on_pool(move || std::fs::remove_file(path)).await
}

/// Renames a file or directory, replacing `to` if it exists ([`std::fs::rename`]).
///
/// # Errors
///
/// As [`std::fs::rename`].
pub async fn rename(from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<()> {
    let (from, to): (PathBuf, PathBuf) = (from.as_ref().to_owned(), to.as_ref().to_owned());
    on_pool(move || std::fs::rename(from, to)).await
}

/// Creates a directory and any missing parents ([`std::fs::create_dir_all`]).
///
/// # Errors
///
/// As [`std::fs::create_dir_all`].
pub async fn create_dir_all(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    on_pool(move || std::fs::create_dir_all(path)).await
}
