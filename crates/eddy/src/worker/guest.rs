//! What a worker's slot holds for parking as a sibling's guest (`handoff`): the private
//! eventfd it then sleeps on, and which sibling's epoll nests its own. Plain state, below
//! `shared` (which keeps one of each per worker) and `handoff` (which runs the protocol).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use crate::reactor::epoll;

/// Which sibling's epoll nests a worker's (`WorkerSlot::io_host`), if any: an atomic
/// `Option<usize>`. Changed only under `Shared::handoff`; read by anyone.
#[derive(Debug)]
pub(crate) struct IoHost(AtomicUsize);

impl IoHost {
    /// Stored for `None`: no worker has this index.
    const NOBODY: usize = usize::MAX;

    /// Nobody's guest.
    pub(crate) fn none() -> Self {
        IoHost(AtomicUsize::new(Self::NOBODY))
    }

    /// The host, if the worker's epoll is nested in one.
    pub(crate) fn get(&self) -> Option<usize> {
        let host = self.0.load(SeqCst);
        (host != Self::NOBODY).then_some(host)
    }

    /// Whether worker `index` is the host.
    pub(crate) fn is(&self, index: usize) -> bool {
        self.get() == Some(index)
    }

    /// `handoff`, under `Shared::handoff`: our epoll is now nested in `host`'s.
    pub(super) fn set(&self, host: usize) {
        debug_assert_ne!(host, Self::NOBODY);
        self.0.store(host, SeqCst);
    }

    /// `handoff`, under `Shared::handoff`: our epoll is nobody's guest any more.
    pub(super) fn clear(&self) {
        self.0.store(Self::NOBODY, SeqCst);
    }
}

/// A private wake-up fd: an eventfd that only a guest sleeps on.
#[derive(Debug)]
pub(crate) struct ParkFd(OwnedFd);

impl ParkFd {
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: plain system call; a non-negative result is a new fd that we own.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nobody else.
        Ok(ParkFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Makes the next (or current) `sleep` return.
    pub(crate) fn wake(&self) {
        let one: u64 = 1;
        // An eventfd write only fails when the counter would overflow (then it is already
        // non-zero, which is all a wake needs).
        // SAFETY: `one` is 8 readable bytes for the duration of the call.
        unsafe { libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Sleeps until `wake` or `timeout` (rounded up to whole milliseconds), then clears
    /// pending wakes.
    pub(super) fn sleep(&self, timeout: Option<Duration>) {
        let mut pfd = libc::pollfd {
            fd: self.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // An interrupted or failed poll just returns early: the caller re-checks everything.
        // SAFETY: `pfd` is a valid pollfd array of length 1 for the duration of the call.
        unsafe { libc::poll(&mut pfd, 1, epoll::timeout_ms(timeout)) };
        let mut count: u64 = 0;
        // Non-blocking: fails with EAGAIN when nothing was pending.
        // SAFETY: `count` is 8 writable bytes for the duration of the call.
        unsafe { libc::read(self.0.as_raw_fd(), (&mut count as *mut u64).cast(), 8) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_io_host_is_an_optional_index() {
        let host = IoHost::none();
        assert_eq!(host.get(), None);
        assert!(!host.is(0));
        host.set(0);
        assert_eq!(host.get(), Some(0));
        assert!(host.is(0) && !host.is(1));
        host.clear();
        assert_eq!(host.get(), None);
    }
}
