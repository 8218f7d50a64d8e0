//! Direct `epoll` calls on a `polling::Poller`'s epoll fd, for the two things `polling` 3
//! cannot do cheaply.
//!
//! 1. **Harvesting and parking in one system call.** `Poller::wait` makes five system calls
//!    whatever its timeout (arm its timerfd, `epoll_ctl` it, `epoll_wait`, read its eventfd,
//!    `epoll_ctl` that again). Here a harvest is one `epoll_wait` on the poller's own fd,
//!    with a millisecond timeout rounded up (as asyncio's selectors and tokio do), so a
//!    timer never fires early.
//! 2. **`EPOLLRDHUP`.** `polling` never asks for it, so a FIN that arrives together with the
//!    last data raises no edge of its own and a short read cannot prove that the next read
//!    would block. Stream sockets are registered here with `EPOLLRDHUP`, and the events we
//!    decode say whether the peer closed its side ([`Readiness::read_closed`]).
//!
//! What stays with `polling`: creating the epoll instance, level-triggered registrations
//! (`add_reader`/`add_writer`), `delete`, and the wake-up path (`Poller::notify`, an eventfd
//! write). Its eventfd is registered *oneshot* under the key [`NOTIFY_KEY`]: when one of our
//! waits reports that key, the notifier is disarmed until `polling`'s own `wait` runs again.
//! `Reactor::rearm_notifier` does that at once, under a lock, so that the notifier is armed
//! whenever a worker goes to sleep (the invariant that makes `notify` reliable).

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use polling::Poller;

/// The key `polling` registers its notifier (and its timerfd) under.
pub(crate) const NOTIFY_KEY: usize = usize::MAX;

/// Keys from here up (below `NOTIFY_KEY`) are siblings' epoll fds nested in ours, the key
/// being this plus the sibling's index (see `worker::handoff`). Source keys
/// (`reactor::SourceKey`) stay far below.
pub(crate) const NESTED_KEY_BASE: usize = usize::MAX / 2;

/// The sibling index an event key stands for, if it is a nested epoll's key.
pub(crate) fn nested_index(key: usize) -> Option<usize> {
    (NESTED_KEY_BASE..NOTIFY_KEY)
        .contains(&key)
        .then(|| key - NESTED_KEY_BASE)
}

/// Events harvested per `epoll_wait` at most; more stay queued in the kernel for the next one.
const CAPACITY: usize = 256;

/// What one event says about one registered fd.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Readiness {
    pub(crate) key: usize,
    pub(crate) readable: bool,
    pub(crate) writable: bool,
    /// `Some(true)`: the peer closed its write side, or the fd hung up or failed, so reads
    /// will not block again. `Some(false)`: it did not. `None`: unknown (the event came
    /// through `polling`, which does not report `EPOLLRDHUP`).
    pub(crate) read_closed: Option<bool>,
}

/// A buffer for [`wait`].
pub(crate) struct RawEvents {
    list: Vec<libc::epoll_event>,
}

impl RawEvents {
    pub(crate) fn new() -> Self {
        RawEvents {
            list: Vec::with_capacity(CAPACITY),
        }
    }

    /// True if `polling`'s notifier (or timerfd) fired: it must be re-armed.
    pub(crate) fn notified(&self) -> bool {
        self.list.iter().any(|e| e.u64 as usize == NOTIFY_KEY)
    }

    /// The events for our own sources.
    pub(crate) fn iter(&self) -> impl Iterator<Item = Readiness> + '_ {
        self.list
            .iter()
            .filter(|e| (e.u64 as usize) < NESTED_KEY_BASE)
            .map(|e| decode(e.u64 as usize, e.events as i32))
    }

    /// The indices of siblings whose nested epoll has events.
    pub(crate) fn nested(&self) -> impl Iterator<Item = usize> + '_ {
        self.list
            .iter()
            .filter_map(|e| nested_index(e.u64 as usize))
    }
}

fn decode(key: usize, flags: i32) -> Readiness {
    let closed = libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR;
    Readiness {
        key,
        readable: flags & (libc::EPOLLIN | libc::EPOLLPRI | closed) != 0,
        writable: flags & (libc::EPOLLOUT | libc::EPOLLHUP | libc::EPOLLERR) != 0,
        read_closed: Some(flags & closed != 0),
    }
}

/// The readiness `polling` reports for an event (used when its own `wait` harvested IO).
pub(crate) fn from_polling(ev: &polling::Event) -> Readiness {
    Readiness {
        key: ev.key,
        readable: ev.readable,
        writable: ev.writable,
        read_closed: None,
    }
}

/// Registers `fd` with `poller`, edge-triggered, for reads, writes and the peer's FIN.
pub(crate) fn add_edge(poller: &Poller, fd: RawFd, key: usize) -> io::Result<()> {
    let mut ev = libc::epoll_event {
        events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
        u64: key as u64,
    };
    // SAFETY: `ev` is a valid, initialised epoll_event for the duration of the call, and the
    // kernel checks both file descriptors, reporting a bad one as an error.
    let rc = unsafe { libc::epoll_ctl(poller.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Adds `guest`'s epoll fd to `host`'s epoll under `key` (level-triggered: `host` reports
/// it as long as `guest` has events).
pub(crate) fn add_nested(host: &Poller, guest: &Poller, key: usize) -> io::Result<()> {
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: key as u64,
    };
    // SAFETY: `ev` is a valid, initialised epoll_event for the duration of the call, and both
    // fds are open epoll instances, owned by the pollers we borrow.
    let rc = unsafe {
        libc::epoll_ctl(
            host.as_raw_fd(),
            libc::EPOLL_CTL_ADD,
            guest.as_raw_fd(),
            &mut ev,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Removes `guest`'s epoll fd from `host`'s epoll.
pub(crate) fn delete_nested(host: &Poller, guest: &Poller) -> io::Result<()> {
    // SAFETY: both fds are open epoll instances owned by the pollers we borrow, and a null
    // event pointer is allowed for `EPOLL_CTL_DEL` (since Linux 2.6.9).
    let rc = unsafe {
        libc::epoll_ctl(
            host.as_raw_fd(),
            libc::EPOLL_CTL_DEL,
            guest.as_raw_fd(),
            std::ptr::null_mut(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `epoll_wait`'s timeout argument: whole milliseconds rounded up (a timer never fires
/// early), `-1` for none, clamped to what the kernel takes.
pub(crate) fn timeout_ms(timeout: Option<Duration>) -> i32 {
    match timeout {
        None => -1,
        Some(t) => t.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32,
    }
}

/// One `epoll_wait` on `poller`'s fd: returns at once with `Some(ZERO)`, sleeps at most
/// `timeout` (rounded up to whole milliseconds), or until an event with `None`. An
/// interrupted wait returns no events.
pub(crate) fn wait(
    poller: &Poller,
    events: &mut RawEvents,
    timeout: Option<Duration>,
) -> io::Result<usize> {
    let timeout_ms = timeout_ms(timeout);
    events.list.clear();
    // SAFETY: the pointer and `maxevents` describe the vector's spare capacity, the kernel
    // writes at most `maxevents` entries, and the length is set below only to the count it
    // reports.
    let n = unsafe {
        libc::epoll_wait(
            poller.as_raw_fd(),
            events.list.as_mut_ptr(),
            events.list.capacity() as i32,
            timeout_ms,
        )
    };
    if n < 0 {
        let err = io::Error::last_os_error();
        return match err.kind() {
            io::ErrorKind::Interrupted => Ok(0),
            _ => Err(err),
        };
    }
    // SAFETY: `epoll_wait` initialised the first `n` (<= capacity) entries.
    unsafe { events.list.set_len(n as usize) };
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    #[test]
    fn timeouts_round_up_to_whole_milliseconds() {
        assert_eq!(timeout_ms(None), -1);
        assert_eq!(timeout_ms(Some(Duration::ZERO)), 0);
        assert_eq!(timeout_ms(Some(Duration::from_nanos(1))), 1);
        assert_eq!(timeout_ms(Some(Duration::from_millis(1))), 1);
        assert_eq!(timeout_ms(Some(Duration::from_micros(1_001))), 2);
        assert_eq!(timeout_ms(Some(Duration::from_secs(u64::MAX))), i32::MAX);
    }

    #[test]
    fn flags_decode_into_directions_and_peer_close() {
        let data = decode(1, libc::EPOLLIN);
        assert!(data.readable && !data.writable);
        assert_eq!(data.read_closed, Some(false));
        let fin = decode(1, libc::EPOLLIN | libc::EPOLLRDHUP);
        assert!(fin.readable);
        assert_eq!(fin.read_closed, Some(true));
        let out = decode(1, libc::EPOLLOUT);
        assert!(out.writable && !out.readable);
        let hup = decode(1, libc::EPOLLHUP);
        assert!(hup.readable && hup.writable);
        assert_eq!(hup.read_closed, Some(true));
    }

    #[test]
    fn an_edge_source_reports_data_and_the_peer_closing() -> io::Result<()> {
        let poller = Poller::new()?;
        let (mut a, b) = UnixStream::pair()?;
        b.set_nonblocking(true)?;
        add_edge(&poller, b.as_raw_fd(), 7)?;
        let mut events = RawEvents::new();
        // Fresh registration: writable at once, nothing to read.
        wait(&poller, &mut events, Some(Duration::from_secs(5)))?;
        let ev: Vec<Readiness> = events.iter().collect();
        assert_eq!(ev.len(), 1);
        assert!(ev[0].key == 7 && ev[0].writable && !ev[0].readable);
        // Data and FIN together: one event that says both.
        a.write_all(b"last")?;
        a.shutdown(std::net::Shutdown::Write)?;
        wait(&poller, &mut events, Some(Duration::from_secs(5)))?;
        let ev: Vec<Readiness> = events.iter().collect();
        assert!(ev.iter().any(|e| e.readable && e.read_closed == Some(true)));
        assert!(!events.notified());
        poller.delete(&b)?;
        Ok(())
    }

    #[test]
    fn a_nested_epoll_reports_its_guest_until_the_guest_is_harvested() -> io::Result<()> {
        let host = Poller::new()?;
        let guest = Poller::new()?;
        let (mut a, b) = UnixStream::pair()?;
        b.set_nonblocking(true)?;
        add_edge(&guest, b.as_raw_fd(), 3)?;
        let mut events = RawEvents::new();
        // Take the fresh registration's "writable" edge, so that the guest is quiet.
        wait(&guest, &mut events, Some(Duration::ZERO))?;
        add_nested(&host, &guest, NESTED_KEY_BASE + 5)?;
        wait(&host, &mut events, Some(Duration::ZERO))?;
        assert_eq!(events.nested().count(), 0, "a quiet guest is not reported");

        a.write_all(b"x")?;
        wait(&host, &mut events, Some(Duration::from_secs(5)))?;
        assert_eq!(events.nested().collect::<Vec<_>>(), [5]);
        assert_eq!(
            events.iter().count(),
            0,
            "a nested key is not a source event"
        );
        assert!(!events.notified());
        // Level-triggered: reported again until someone harvests the guest itself.
        wait(&host, &mut events, Some(Duration::ZERO))?;
        assert_eq!(events.nested().collect::<Vec<_>>(), [5]);
        wait(&guest, &mut events, Some(Duration::ZERO))?;
        let ev: Vec<Readiness> = events.iter().collect();
        assert!(ev.len() == 1 && ev[0].key == 3 && ev[0].readable);
        wait(&host, &mut events, Some(Duration::ZERO))?;
        assert_eq!(events.nested().count(), 0);

        delete_nested(&host, &guest)?;
        a.write_all(b"y")?;
        wait(&host, &mut events, Some(Duration::from_millis(20)))?;
        assert_eq!(events.nested().count(), 0, "taken back: no longer reported");
        guest.delete(&b)
    }
}
