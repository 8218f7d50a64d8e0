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
//! Reading the state costs three system calls (open, read, close of the thread's `stat`
//! file), so the monitor reads it only while it watches closely after a long job or a
//! blocked one (`HelpMemory::checks_blocked`), and only for a worker that has not harvested
//! its IO for a while (`BLOCKED_CHECK_AFTER`): a worker that harvests every cycle is not
//! blocked.

use std::fs::File;
use std::io::Read;

/// The calling thread's id, as `/proc/self/task` names it (`gettid`, read from the
/// `/proc/thread-self` link, which needs no unsafe code); 0 if `/proc` is not mounted.
pub(crate) fn current_tid() -> i32 {
    std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|link| link.file_name()?.to_str()?.parse().ok())
        .unwrap_or(0)
}

/// What `/proc` says of a thread at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ThreadStat {
    /// It sleeps in the kernel.
    pub(crate) asleep: bool,
    /// The CPU it runs on, or last ran on.
    pub(crate) cpu: Option<usize>,
}

/// Reads thread `tid` of this process; `None` if its `stat` file could not be read (the
/// thread is gone). The file is opened for each read and closed at once: a descriptor kept
/// open would appear whenever the monitor first needed it, in the middle of a server's life.
pub(crate) fn read(tid: i32) -> Option<ThreadStat> {
    let mut file = File::open(format!("/proc/self/task/{tid}/stat")).ok()?;
    // A `stat` line is about 300 bytes, a thread's name in it at most 15.
    let mut buf = [0u8; 1024];
    let n = file.read(&mut buf).ok()?;
    let stat = &buf[..n];
    Some(ThreadStat {
        asleep: sleeps(state_of(stat)?),
        cpu: cpu_of(stat),
    })
}

/// The state letter of a `stat` line: the field after the command name, which is in
/// parentheses and may itself contain spaces and parentheses (so: after the last `)`).
fn state_of(stat: &[u8]) -> Option<u8> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    stat.get(close + 2).copied()
}

/// The `processor` field of a `stat` line (the 39th; the state is the 3rd).
fn cpu_of(stat: &[u8]) -> Option<usize> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let after = std::str::from_utf8(stat.get(close + 2..)?).ok()?;
    after.split_ascii_whitespace().nth(39 - 3)?.parse().ok()
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
    fn a_thread_knows_its_id() {
        let main = current_tid();
        let other = std::thread::spawn(current_tid).join().unwrap();
        assert!(main > 0 && other > 0);
        assert_ne!(main, other);
        assert!(std::path::Path::new(&format!("/proc/self/task/{main}/stat")).exists());
    }

    #[test]
    fn the_state_is_the_field_after_the_command_name() {
        assert_eq!(state_of(b"42 (eddy-worker-0) S 1 2 3"), Some(b'S'));
        assert_eq!(
            state_of(b"42 (a (b) c) R 1 2 3"),
            Some(b'R'),
            "a name with parentheses"
        );
        assert_eq!(state_of(b"42 (cut"), None);
        let fields: Vec<String> = (4..=52).map(|f| f.to_string()).collect();
        let line = format!("42 (a (b) c) R {}", fields.join(" "));
        assert_eq!(cpu_of(line.as_bytes()), Some(39), "the 39th field");
        assert_eq!(cpu_of(b"42 (x) R 1 2 3"), None, "cut short");
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
        let tid = tid_rx.recv().unwrap();
        // It blocks in `recv` as soon as it has sent its id; until then it may be running.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while read(tid).map(|t| t.asleep) != Some(true) {
            assert!(std::time::Instant::now() < deadline, "never seen asleep");
            std::thread::yield_now();
        }
        release_tx.send(()).unwrap();
        blocked.join().unwrap();
        assert!(
            !read(current_tid()).unwrap().asleep,
            "a thread reading its own state runs"
        );
        assert_eq!(read(-1), None, "no such thread");
    }

    /// A thread pinned to one CPU reads that CPU as its own.
    #[test]
    fn a_thread_reads_the_cpu_it_runs_on() {
        use super::super::steering::{Affinity, CpuSet, Kernel};
        std::thread::spawn(|| {
            let allowed = Kernel.get(0).unwrap().cpus();
            // The last CPU it may use: not always the one it happens to be on.
            let cpu = *allowed.last().unwrap();
            Kernel.set(0, &CpuSet::only(cpu)).unwrap();
            assert_eq!(read(current_tid()).unwrap().cpu, Some(cpu));
        })
        .join()
        .unwrap();
    }
}
