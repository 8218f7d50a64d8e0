//! Unix signals as async events: [`ctrl_c`], [`signal`], and asyncio's
//! [`add_signal_handler`] / [`remove_signal_handler`].
//!
//! Built on `signal-hook`'s self-pipe: the process-wide handler writes one byte into a
//! socket pair per delivery, and the read end is an ordinary fd on a worker's reactor. No
//! thread per signal, nothing but an async-signal-safe `write` in the handler.
//!
//! While at least one eddy listener exists for a signal, its default action (terminate for
//! `SIGINT`/`SIGTERM`, ...) is suppressed; once the last listener is gone the default action
//! is emulated again, so Ctrl-C still stops a program that stopped listening for it.
//! Deliveries that arrive while a listener is not awaiting are remembered (coalesced into
//! one), as with tokio.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};

use signal_hook::SigId;

use crate::io::Async;

/// A signal number with names for the common ones.
///
/// # Examples
///
/// ```
/// use eddy::signal::SignalKind;
///
/// assert_eq!(SignalKind::interrupt().as_raw(), libc::SIGINT);
/// assert_eq!(SignalKind::from_raw(libc::SIGUSR1), SignalKind::user_defined1());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SignalKind(i32);

impl SignalKind {
    /// Any signal by number.
    pub const fn from_raw(signum: i32) -> Self {
        SignalKind(signum)
    }
    /// The number.
    pub const fn as_raw(self) -> i32 {
        self.0
    }
    /// `SIGINT` (Ctrl-C).
    pub const fn interrupt() -> Self {
        SignalKind(libc::SIGINT)
    }
    /// `SIGTERM`.
    pub const fn terminate() -> Self {
        SignalKind(libc::SIGTERM)
    }
    /// `SIGHUP`.
    pub const fn hangup() -> Self {
        SignalKind(libc::SIGHUP)
    }
    /// `SIGQUIT`.
    pub const fn quit() -> Self {
        SignalKind(libc::SIGQUIT)
    }
    /// `SIGUSR1`.
    pub const fn user_defined1() -> Self {
        SignalKind(libc::SIGUSR1)
    }
    /// `SIGUSR2`.
    pub const fn user_defined2() -> Self {
        SignalKind(libc::SIGUSR2)
    }
    /// `SIGCHLD`.
    pub const fn child() -> Self {
        SignalKind(libc::SIGCHLD)
    }
    /// `SIGWINCH`.
    pub const fn window_change() -> Self {
        SignalKind(libc::SIGWINCH)
    }
}

/// Per signal: how many eddy listeners exist, and the switch of its emulated default action.
struct Listeners {
    count: usize,
    default_on: Arc<AtomicBool>,
}

fn table() -> &'static Mutex<HashMap<i32, Listeners>> {
    static TABLE: OnceLock<Mutex<HashMap<i32, Listeners>>> = OnceLock::new();
    TABLE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// One registered self-pipe for a signal; unregistered on drop.
struct Registration {
    signum: i32,
    id: SigId,
}

impl Registration {
    /// Registers a self-pipe for `kind` and returns it with the pipe's read end.
    fn new(kind: SignalKind) -> io::Result<(Registration, UnixStream)> {
        let signum = kind.as_raw();
        if signal_hook::consts::FORBIDDEN.contains(&signum) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("signal {signum} cannot be handled (SIGKILL, SIGSTOP and fault signals)"),
            ));
        }
        let (read, write) = UnixStream::pair()?;
        read.set_nonblocking(true)?;
        write.set_nonblocking(true)?;
        let mut table = table().lock().unwrap_or_else(|e| e.into_inner());
        let id = signal_hook::low_level::pipe::register(signum, write)?;
        let entry = match table.entry(signum) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let default_on = Arc::new(AtomicBool::new(false));
                if let Err(e) =
                    signal_hook::flag::register_conditional_default(signum, default_on.clone())
                {
                    signal_hook::low_level::unregister(id);
                    return Err(e);
                }
                v.insert(Listeners {
                    count: 0,
                    default_on,
                })
            }
        };
        entry.count += 1;
        entry.default_on.store(false, Ordering::SeqCst);
        Ok((Registration { signum, id }, read))
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut table = table().lock().unwrap_or_else(|e| e.into_inner());
        signal_hook::low_level::unregister(self.id);
        if let Some(entry) = table.get_mut(&self.signum) {
            entry.count -= 1;
            if entry.count == 0 {
                entry.default_on.store(true, Ordering::SeqCst);
            }
        }
    }
}

/// Reads everything the self-pipe holds; true if there was anything.
fn drain_pipe(mut pipe: &UnixStream) -> io::Result<bool> {
    let mut buf = [0u8; 64];
    let mut any = false;
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => return Ok(any),
            Ok(_) => any = true,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(any),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// A stream of deliveries of one signal, from [`signal`].
pub struct Signal {
    pipe: Async<UnixStream>,
    _registration: Registration,
    kind: SignalKind,
}

impl fmt::Debug for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signal").field("kind", &self.kind).finish()
    }
}

impl Signal {
    /// Waits for the next delivery (deliveries since the last `recv` count as one).
    ///
    /// # Errors
    ///
    /// An error reading the self-pipe (not expected in practice).
    pub async fn recv(&mut self) -> io::Result<()> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Poll form of [`recv`](Signal::recv).
    ///
    /// # Errors
    ///
    /// As [`recv`](Signal::recv).
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.pipe.poll_read_with(cx, |p| {
            if drain_pipe(p)? {
                Ok(())
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            }
        })
    }
}

/// A stream of deliveries; it never ends (an item is `Err` only if reading the self-pipe
/// failed, which is not expected in practice).
///
/// # Examples
///
/// ```
/// use eddy::signal::{signal, SignalKind};
/// use futures_lite::StreamExt;
///
/// let rt = eddy::Runtime::new()?;
/// rt.block_on(async {
///     let mut usr2 = signal(SignalKind::user_defined2())?;
///     // SAFETY: raise(2) has no memory-safety preconditions.
///     unsafe { libc::raise(libc::SIGUSR2) };
///     usr2.next().await.expect("a signal stream never ends")
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
impl futures_core::Stream for Signal {
    type Item = io::Result<()>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<io::Result<()>>> {
        self.get_mut().poll_recv(cx).map(Some)
    }
}

/// Listens for `kind`. The listener counts deliveries from the moment it is created.
///
/// # Errors
///
/// `InvalidInput` for signals that cannot be handled (`SIGKILL`, `SIGSTOP`, `SIGSEGV`, ...);
/// an error outside an eddy runtime.
///
/// # Examples
///
/// ```
/// use eddy::signal::{signal, SignalKind};
///
/// let rt = eddy::Runtime::new()?;
/// rt.block_on(async {
///     let mut usr1 = signal(SignalKind::user_defined1())?;
///     // SAFETY: raise(2) has no memory-safety preconditions.
///     unsafe { libc::raise(libc::SIGUSR1) };
///     usr1.recv().await
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn signal(kind: SignalKind) -> io::Result<Signal> {
    let (registration, read) = Registration::new(kind)?;
    Ok(Signal {
        pipe: Async::new(read)?,
        _registration: registration,
        kind,
    })
}

/// Waits for Ctrl-C (`SIGINT`). While this future exists, Ctrl-C does not terminate the
/// process.
///
/// # Errors
///
/// As [`signal`].
pub async fn ctrl_c() -> io::Result<()> {
    signal(SignalKind::interrupt())?.recv().await
}

/// A handler installed with [`add_signal_handler`].
struct HandlerEntry {
    read: UnixStream,
    _registration: Registration,
}

fn handlers() -> &'static Mutex<HashMap<i32, HandlerEntry>> {
    static HANDLERS: OnceLock<Mutex<HashMap<i32, HandlerEntry>>> = OnceLock::new();
    HANDLERS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Runs `callback` on a worker each time `kind` is delivered (asyncio's
/// `loop.add_signal_handler`). A handler already installed for `kind` is replaced.
///
/// # Errors
///
/// As [`signal`], and the errors of [`add_reader`](crate::add_reader).
///
/// # Examples
///
/// ```
/// use eddy::signal::{add_signal_handler, remove_signal_handler, SignalKind};
///
/// let rt = eddy::Runtime::new()?;
/// let (tx, rx) = std::sync::mpsc::channel();
/// rt.block_on(async move {
///     add_signal_handler(SignalKind::user_defined2(), move || { let _ = tx.send(()); })
/// })?;
/// // SAFETY: raise(2) has no memory-safety preconditions.
/// unsafe { libc::raise(libc::SIGUSR2) };
/// rx.recv().unwrap();
/// assert!(rt.block_on(async { remove_signal_handler(SignalKind::user_defined2()) })?);
/// # Ok::<(), std::io::Error>(())
/// ```
#[track_caller]
pub fn add_signal_handler<F>(kind: SignalKind, callback: F) -> io::Result<()>
where
    F: Fn() + Send + Sync + 'static,
{
    remove_signal_handler(kind)?;
    let (registration, read) = Registration::new(kind)?;
    let reader = read.try_clone()?;
    crate::add_reader(read.as_raw_fd(), move || {
        if drain_pipe(&reader).unwrap_or(false) {
            callback();
        }
    })?;
    let entry = HandlerEntry {
        read,
        _registration: registration,
    };
    handlers()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(kind.as_raw(), entry);
    Ok(())
}

/// Removes the handler installed with [`add_signal_handler`] for `kind`. Returns whether
/// there was one.
///
/// # Errors
///
/// The errors of [`remove_reader`](crate::remove_reader).
pub fn remove_signal_handler(kind: SignalKind) -> io::Result<bool> {
    let entry = handlers()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&kind.as_raw());
    match entry {
        None => Ok(false),
        Some(entry) => {
            crate::remove_reader(entry.read.as_raw_fd())?;
            drop(entry);
            Ok(true)
        }
    }
}
