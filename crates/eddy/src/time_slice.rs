//! Asking Linux for a short scheduler time slice on the runtime's own threads.
//!
//! eddy's answer to a worker stuck in a long job is that someone else serves what it owns:
//! the monitor notices, a sibling (or a spare) nests the stuck worker's epoll and steals its
//! queue. All of that needs CPU time *now*, and the CPU the monitor or the rescuer was
//! last on may be the very one the stuck job is spinning on. Linux's fair scheduler (EEVDF,
//! 6.6 and later) lets a thread that wakes there run at once only if its deadline comes
//! before the running thread's; otherwise it waits for the running thread's slice to end,
//! which is only checked at the next timer tick (4 ms at `HZ=250`). Since 6.12 a thread may
//! ask for a shorter slice of its own (`sched_attr.sched_runtime` for `SCHED_OTHER`, no
//! privilege needed): its deadlines come sooner, so it preempts a thread that has run a
//! long slice, and the rescue of a stuck worker waits microseconds instead of a tick, as
//! long as the rescuer has not had more than its fair share of that CPU: beyond that it
//! waits behind the job all the same, which is why the monitor also keeps the runtime's
//! other threads off a long job's CPU (`worker::monitor::steering`).
//!
//! A slice changes how a thread's CPU time is cut up, not its share of it: a CPU-bound job
//! on a worker gets as much CPU as before, in shorter turns when something else wants the
//! CPU. Kernels before 6.12 accept the call and ignore the value. Where the call fails (a
//! seccomp filter, a kernel without `sched_setattr`), the thread keeps the kernel's slice:
//! it is a latency hint, not something a runtime may fail to start over.

use std::io;
use std::time::Duration;

/// The shortest slice the kernel accepts for `SCHED_OTHER`; it clamps shorter requests.
pub(crate) const MIN_TIME_SLICE: Duration = Duration::from_micros(100);

/// The longest slice the kernel accepts for `SCHED_OTHER`; it clamps longer requests.
pub(crate) const MAX_TIME_SLICE: Duration = Duration::from_millis(100);

/// The slice eddy asks for on its workers, spares and monitor unless told otherwise: the
/// shortest there is, because every microsecond a rescuer waits for a CPU is a microsecond
/// the stuck worker's sockets wait too (docs/benchmarks.md, "Mixed load").
pub(crate) const DEFAULT_TIME_SLICE: Duration = MIN_TIME_SLICE;

/// Checks a requested slice against the range the kernel honours, so that a request it
/// would silently clamp is refused with a clear error instead.
pub(crate) fn validate(slice: Duration) -> io::Result<Duration> {
    if (MIN_TIME_SLICE..=MAX_TIME_SLICE).contains(&slice) {
        Ok(slice)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a worker time slice must be between {MIN_TIME_SLICE:?} and {MAX_TIME_SLICE:?} \
                 (the range Linux honours), got {slice:?}"
            ),
        ))
    }
}

/// `struct sched_attr` as the kernel's first version of it (`SCHED_ATTR_SIZE_VER0`, 48
/// bytes) lays it out; newer kernels accept the short form.
#[repr(C)]
#[derive(Debug, Default)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
}

/// Asks the kernel to give the calling thread time slices of `slice` (`None`: the kernel's
/// own), keeping its policy and nice value. A thread under a policy other than `SCHED_OTHER`
/// or `SCHED_BATCH` (real-time, deadline, idle: something its owner chose on purpose) is
/// left as it is.
fn apply_to_this_thread(slice: Option<Duration>) -> io::Result<()> {
    let mut attr = current_attr()?;
    let policy = attr.policy as i32;
    if policy != libc::SCHED_OTHER && policy != libc::SCHED_BATCH {
        return Ok(());
    }
    attr.size = std::mem::size_of::<SchedAttr>() as u32;
    attr.flags = 0;
    // Zero asks for the kernel's default slice.
    attr.runtime = slice.map_or(0, |s| s.as_nanos() as u64);
    // SAFETY: `sched_setattr(pid, attr, flags)` reads `attr.size` bytes from a valid,
    // initialised `SchedAttr` that outlives the call; pid 0 is the calling thread, and the
    // call touches no memory of ours besides `attr`.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0u32) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The calling thread's scheduling attributes (policy, nice value, slice request).
fn current_attr() -> io::Result<SchedAttr> {
    let mut attr = SchedAttr::default();
    // SAFETY: `sched_getattr(pid, attr, size, flags)` writes at most `size` bytes into
    // `attr`, which is a valid, exclusively borrowed `SchedAttr` of exactly that size; pid 0
    // is the calling thread.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            0,
            &mut attr as *mut SchedAttr,
            std::mem::size_of::<SchedAttr>() as u32,
            0u32,
        )
    };
    if rc == 0 {
        Ok(attr)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A worker, spare or monitor thread starting: applies the runtime's slice (if any) to it.
/// A failure is logged and otherwise ignored (see the module notes).
pub(crate) fn request(slice: Option<Duration>) {
    if slice.is_some() {
        set_or_log(slice);
    }
}

/// A blocking-pool thread starting (it inherited its starter's slice, usually a worker's):
/// if the runtime asked for a slice, gives this thread the kernel's own back. It runs user
/// code that blocks or computes at length; nothing waits on its wake-up, and with a short
/// slice it would preempt the workers it shares CPUs with.
pub(crate) fn restore_default(runtime_slice: Option<Duration>) {
    if runtime_slice.is_some() {
        set_or_log(None);
    }
}

fn set_or_log(slice: Option<Duration>) {
    if let Err(e) = apply_to_this_thread(slice) {
        tracing::debug!("eddy: could not set the scheduler time slice to {slice:?}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_slices_the_kernel_honours_are_accepted() {
        assert!(validate(MIN_TIME_SLICE).is_ok());
        assert!(validate(Duration::from_millis(3)).is_ok());
        assert!(validate(MAX_TIME_SLICE).is_ok());
        let short = validate(Duration::from_micros(99)).unwrap_err();
        assert_eq!(short.kind(), io::ErrorKind::InvalidInput);
        assert!(
            short.to_string().contains("between 100µs and 100ms"),
            "{short}"
        );
        assert!(validate(Duration::from_millis(101)).is_err());
        assert!(validate(Duration::ZERO).is_err());
    }

    #[test]
    fn the_default_is_a_slice_the_kernel_honours() {
        assert!(validate(DEFAULT_TIME_SLICE).is_ok());
    }
}
