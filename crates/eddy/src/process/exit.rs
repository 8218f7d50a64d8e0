//! Seeing a child exit: its pidfd on a worker's reactor, or a `try_wait` timer without one.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Child, ExitStatus};
use std::time::Duration;

use crate::io::Async;

/// The first wait between two `try_wait` calls when a child has no pidfd: most short
/// commands are done by then.
pub const FIRST_POLL: Duration = Duration::from_millis(1);

/// The longest wait between two `try_wait` calls when a child has no pidfd: the delay at
/// most added to a long-running child's exit, for 20 polls a second while it runs.
pub const LONGEST_POLL: Duration = Duration::from_millis(50);

/// How a [`Child`](super::Child)'s exit is awaited.
pub(super) enum ExitWatch {
    /// Readable once the child has exited.
    Pidfd(Async<OwnedFd>),
    /// No pidfd: `try_wait` on a timer, the next wait this long.
    Poll(Duration),
}

impl ExitWatch {
    /// A pidfd for `pid` on the current runtime, or the timer where the kernel gives none.
    pub(super) fn new(pid: u32) -> ExitWatch {
        match pidfd_open(pid).and_then(Async::new) {
            Ok(fd) => ExitWatch::Pidfd(fd),
            Err(e) => {
                tracing::debug!("no pidfd for child {pid} ({e}): its exit is polled");
                ExitWatch::Poll(FIRST_POLL)
            }
        }
    }

    /// Waits until `child` has exited and reaps it.
    pub(super) async fn wait(&mut self, child: &mut Child) -> io::Result<ExitStatus> {
        match self {
            ExitWatch::Pidfd(fd) => {
                // Readiness may be stale (a fresh registration starts out ready): `try_wait`
                // decides, and a `WouldBlock` waits for the next edge.
                fd.read_with(|_| child.try_wait()?.ok_or(io::ErrorKind::WouldBlock.into()))
                    .await
            }
            ExitWatch::Poll(next) => loop {
                if let Some(status) = child.try_wait()? {
                    return Ok(status);
                }
                crate::time::sleep(*next).await;
                *next = next_poll(*next);
            },
        }
    }
}

/// The wait after one of `last`: doubled, up to [`LONGEST_POLL`].
fn next_poll(last: Duration) -> Duration {
    (last * 2).min(LONGEST_POLL)
}

/// `pidfd_open(2)`: an fd (close-on-exec) that becomes readable when `pid` exits.
pub(super) fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: pidfd_open takes a pid and a flags word and returns a new fd or -1; no memory
    // is passed to or from the kernel.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(fd).map_err(|_| io::Error::other("pidfd_open returned no fd"))?;
    // SAFETY: `fd` is a descriptor the kernel created for this call just now; nothing else
    // owns or closes it, so the `OwnedFd` may take it over.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polls_back_off_to_the_longest_wait() {
        assert_eq!(next_poll(FIRST_POLL), FIRST_POLL * 2);
        let mut wait = FIRST_POLL;
        for _ in 0..20 {
            wait = next_poll(wait);
        }
        assert_eq!(wait, LONGEST_POLL);
    }

    #[test]
    fn the_timer_fallback_sees_the_exit() {
        let rt = crate::Builder::new().workers(1).build().unwrap();
        let status = rt.block_on(async {
            let mut child = std::process::Command::new("sh")
                .args(["-c", "exit 7"])
                .spawn()
                .unwrap();
            ExitWatch::Poll(FIRST_POLL).wait(&mut child).await.unwrap()
        });
        assert_eq!(status.code(), Some(7));
    }
}
