//! The reaper: one process-wide thread that collects the exits of children whose
//! [`Child`](super::Child) was dropped while they ran, so none is left a zombie.
//!
//! It is not tied to a runtime (a child may outlive the runtime that started it), starts
//! with the first such child, and sleeps in `poll(2)` on the children's pidfds and on a
//! socket that [`adopt`] writes to when it hands over another. A child without a pidfd is
//! polled with `try_wait` every [`ORPHAN_POLL`] while it runs. The thread never exits: it
//! holds no child once all are reaped, and then sleeps until the next one.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::process::Child;
use std::sync::OnceLock;
use std::time::Duration;

use parking_lot::Mutex;

use super::exit::pidfd_open;

/// How often the reaper calls `try_wait` for an orphan that has no pidfd.
const ORPHAN_POLL: Duration = Duration::from_millis(100);

struct Reaper {
    /// Children handed over and not yet picked up by the thread.
    handed: Mutex<Vec<Child>>,
    /// Written to (one byte) after each hand-over; the thread reads the other end.
    wake: UnixStream,
}

static REAPER: OnceLock<io::Result<Reaper>> = OnceLock::new();

/// Takes over `child`, which has not exited yet, and reaps it once it does.
pub(super) fn adopt(child: Child) {
    let reaper = REAPER.get_or_init(start);
    match reaper {
        Ok(reaper) => {
            reaper.handed.lock().push(child);
            // A full socket means a wake-up is already pending: nothing is lost.
            let _ = (&reaper.wake).write(&[1]);
        }
        Err(e) => tracing::error!(
            "no reaper thread ({e}): child {} is not reaped and stays a zombie when it exits",
            child.id()
        ),
    }
}

fn start() -> io::Result<Reaper> {
    let (wake, woken) = UnixStream::pair()?;
    wake.set_nonblocking(true)?;
    woken.set_nonblocking(true)?;
    std::thread::Builder::new()
        .name("eddy-reaper".into())
        .spawn(move || run(woken))?;
    Ok(Reaper {
        handed: Mutex::new(Vec::new()),
        wake,
    })
}

/// An orphan and, where the kernel gave one, its pidfd.
struct Orphan {
    child: Child,
    pidfd: Option<OwnedFd>,
}

fn run(mut woken: UnixStream) {
    let mut orphans: Vec<Orphan> = Vec::new();
    loop {
        let mut drained = [0u8; 64];
        while matches!(woken.read(&mut drained), Ok(n) if n > 0) {}
        if let Some(Ok(reaper)) = REAPER.get() {
            for child in reaper.handed.lock().drain(..) {
                let pidfd = pidfd_open(child.id()).ok();
                orphans.push(Orphan { child, pidfd });
            }
        }
        // Reaped, or lost to an error (`ECHILD`: someone else reaped it): either way gone.
        orphans.retain_mut(|o| matches!(o.child.try_wait(), Ok(None)));
        wait_for_news(&woken, &orphans);
    }
}

/// Sleeps until an orphan's pidfd is readable or a hand-over is announced; no longer than
/// [`ORPHAN_POLL`] while an orphan has no pidfd.
fn wait_for_news(woken: &UnixStream, orphans: &[Orphan]) {
    let mut fds: Vec<libc::pollfd> = std::iter::once(woken.as_raw_fd())
        .chain(
            orphans
                .iter()
                .filter_map(|o| Some(o.pidfd.as_ref()?.as_raw_fd())),
        )
        .map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let timeout = if orphans.iter().any(|o| o.pidfd.is_none()) {
        ORPHAN_POLL.as_millis() as libc::c_int
    } else {
        -1
    };
    // SAFETY: `fds` is a live, writable array of `fds.len()` pollfd structs for the whole
    // call, and every fd in it stays open until the call returns (they are owned by
    // `woken` and `orphans`, which outlive it). An error (EINTR) only makes the loop look
    // again.
    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
}
