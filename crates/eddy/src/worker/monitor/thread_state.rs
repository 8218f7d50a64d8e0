//! Whether a worker's thread sleeps in the kernel, read from `/proc`: how the monitor tells,
//! at its first look, a worker blocked in a job (a handler that sleeps, waits on a lock or a
//! blocking read) from one that is only busy.
//!
//! A worker that is not parked sleeps in the kernel only inside a job: its own waits (the
//! park, the guest's sleep) happen while it is marked parked. Such a worker serves nothing
//! until the system call returns, however long that is, so waiting for a second look to
//! see its cycle counter stand still only adds a look interval to the stranding of its
//! sockets (Go's `sysmon` likewise takes a P back from a thread in a system call sooner
//! than from a running one). A busy worker is still judged over two looks: a job that
//! runs on the CPU for a while is normal.
//!
//! Reading the state costs a `pread` of the thread's `stat` file, so the monitor reads it
//! only while it watches closely after a long job (`Watching::LongJobs`).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// The calling thread's id, as `/proc/self/task` names it.
pub(crate) fn current_tid() -> i32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// A worker thread's `/proc/self/task/TID/stat`, kept open.
#[derive(Debug)]
pub(crate) struct ThreadStat {
    file: File,
}

impl ThreadStat {
    /// Opens the `stat` file of thread `tid` of this process.
    pub(crate) fn open(tid: i32) -> io::Result<Self> {
        Ok(ThreadStat {
            file: File::open(format!("/proc/self/task/{tid}/stat"))?,
        })
    }

    /// Whether the thread sleeps in the kernel now; `None` if the file could not be read
    /// (the thread is gone).
    pub(crate) fn is_asleep(&self) -> Option<bool> {
        let mut buf = [0u8; 256];
        let n = self.file.read_at(&mut buf, 0).ok()?;
        state_of(&buf[..n]).map(sleeps)
    }
}

/// The state letter of a `stat` line: the field after the command name, which is in
/// parentheses and may itself contain spaces and parentheses (so: after the last `)`).
fn state_of(stat: &[u8]) -> Option<u8> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    stat.get(close + 2).copied()
}

/// `S` (interruptible sleep) and `D` (uninterruptible, as in disk IO) are sleeps; `R`
/// (running or waiting for a CPU) and the rest are not.
fn sleeps(state: u8) -> bool {
    matches!(state, b'S' | b'D')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_is_the_field_after_the_command_name() {
        assert_eq!(state_of(b"42 (eddy-worker-0) S 1 2 3"), Some(b'S'));
        assert_eq!(
            state_of(b"42 (a (b) c) R 1 2 3"),
            Some(b'R'),
            "a name with parentheses"
        );
        assert_eq!(state_of(b"42 (cut"), None);
        assert!(sleeps(b'S') && sleeps(b'D'));
        assert!(!sleeps(b'R') && !sleeps(b'Z'));
    }

    #[test]
    fn a_thread_blocked_in_a_system_call_reads_as_asleep() {
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let blocked = std::thread::spawn(move || {
            tid_tx.send(current_tid()).unwrap();
            release_rx.recv().unwrap();
        });
        let stat = ThreadStat::open(tid_rx.recv().unwrap()).unwrap();
        // It blocks in `recv` as soon as it has sent its id; until then it may be running.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while stat.is_asleep() != Some(true) {
            assert!(std::time::Instant::now() < deadline, "never seen asleep");
            std::thread::yield_now();
        }
        release_tx.send(()).unwrap();
        blocked.join().unwrap();
        let me = ThreadStat::open(current_tid()).unwrap();
        assert_eq!(
            me.is_asleep(),
            Some(false),
            "a thread reading its own state runs"
        );
    }
}
