//! Keeping the runtime's other threads off the CPUs where workers run long jobs.
//!
//! When a worker spins in a long job, the threads that serve what it strands (a sibling
//! that hosts its epoll, a spare, the monitor itself) are woken by its sockets, by its
//! timers and by each other, and Linux places a woken thread on the CPU it last ran on
//! unless another CPU is idle at that instant. On a loaded machine that is often the long
//! job's CPU: there the helper shares the CPU fairly with the job, and once it has had its
//! share it waits for the job's turn to end, a timer tick or more (a `perf sched` trace of
//! the `mixed` benchmark shows helpers and the monitor queued 1-4 ms behind the job while
//! the other CPU idled between the client's turns; docs/benchmark-log.md). The kernel's
//! balancer does not move them: it leaves recently run threads where they are, and skips
//! CPUs that idle only for moments.
//!
//! So while a worker is stuck in a long job, the monitor narrows the CPU affinity of the
//! other workers and the spares to their own set without the CPUs those jobs run on, and
//! gives them their own set back once no worker is in a long job (not its own: see
//! `monitor::steer_helpers`). A thread whose set would be left empty (every allowed CPU
//! runs a long job, or the user pinned it to that CPU) keeps its own, and a thread whose
//! set was changed by someone else while it was narrowed keeps that change. The jobs
//! themselves are never moved or slowed: only who shares their CPU changes.

use std::io;

/// A thread's CPU affinity, the kernel's `cpu_set_t`.
#[derive(Clone, Copy)]
pub(crate) struct CpuSet(libc::cpu_set_t);

impl CpuSet {
    /// The set of CPUs `0..n`.
    #[cfg(test)]
    pub(crate) fn first(n: usize) -> CpuSet {
        let mut set = CpuSet::empty();
        for cpu in 0..n {
            // SAFETY: `CPU_SET` writes one bit of the set it is given, within its size
            // (it ignores CPUs beyond `CPU_SETSIZE`).
            unsafe { libc::CPU_SET(cpu, &mut set.0) };
        }
        set
    }

    /// The set of `cpu` alone.
    #[cfg(test)]
    pub(crate) fn only(cpu: usize) -> CpuSet {
        let mut set = CpuSet::empty();
        // SAFETY: as in `first`.
        unsafe { libc::CPU_SET(cpu, &mut set.0) };
        set
    }

    /// The CPUs in the set, in order.
    #[cfg(test)]
    pub(crate) fn cpus(&self) -> Vec<usize> {
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| self.contains(c))
            .collect()
    }

    fn empty() -> CpuSet {
        // SAFETY: `cpu_set_t` is a plain bit array; all zeroes is the empty set.
        CpuSet(unsafe { std::mem::zeroed() })
    }

    /// Whether `cpu` is in the set.
    pub(crate) fn contains(&self, cpu: usize) -> bool {
        cpu < libc::CPU_SETSIZE as usize && {
            // SAFETY: `CPU_ISSET` reads one bit of the set, within its size (checked).
            unsafe { libc::CPU_ISSET(cpu, &self.0) }
        }
    }

    /// The set without `cpus`, or `None` if nothing would be left (or none of `cpus` was in
    /// it: nothing to change).
    pub(crate) fn without(&self, cpus: &[usize]) -> Option<CpuSet> {
        let mut left = *self;
        let mut changed = false;
        for &cpu in cpus {
            if self.contains(cpu) {
                // SAFETY: `CPU_CLR` clears one bit of the set, within its size (checked by
                // `contains`).
                unsafe { libc::CPU_CLR(cpu, &mut left.0) };
                changed = true;
            }
        }
        // SAFETY: `CPU_COUNT` only reads the set.
        let count = unsafe { libc::CPU_COUNT(&left.0) };
        (changed && count > 0).then_some(left)
    }

    /// Whether both sets hold the same CPUs.
    fn same_as(&self, other: &CpuSet) -> bool {
        // SAFETY: `CPU_EQUAL` only reads both sets.
        unsafe { libc::CPU_EQUAL(&self.0, &other.0) }
    }
}

impl std::fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cpus = (0..libc::CPU_SETSIZE as usize).filter(|&c| self.contains(c));
        f.debug_set().entries(cpus).finish()
    }
}

/// Reading and setting threads' affinity: the kernel's calls, or a stand-in in tests.
pub(crate) trait Affinity {
    fn get(&self, tid: i32) -> io::Result<CpuSet>;
    fn set(&self, tid: i32, set: &CpuSet) -> io::Result<()>;
}

/// `sched_getaffinity` and `sched_setaffinity` on threads of this process.
#[derive(Debug)]
pub(crate) struct Kernel;

impl Affinity for Kernel {
    fn get(&self, tid: i32) -> io::Result<CpuSet> {
        let mut set = CpuSet::empty();
        // SAFETY: the kernel writes at most `size_of::<cpu_set_t>()` bytes into `set.0`,
        // a valid, exclusively borrowed `cpu_set_t` of exactly that size.
        let rc = unsafe {
            libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set.0)
        };
        if rc == 0 {
            Ok(set)
        } else {
            Err(io::Error::last_os_error())
        }
    }

    fn set(&self, tid: i32, set: &CpuSet) -> io::Result<()> {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: the kernel reads `size` bytes from `set.0`, a valid, initialised
        // `cpu_set_t` of that size that outlives the call; `tid` is a thread of this process
        // (if it has exited and its id was reused, another thread of the same user, whose
        // affinity is all that changes).
        let rc = unsafe { libc::sched_setaffinity(tid, size, &set.0) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

/// The monitor's steering: which CPUs it keeps the runtime's other threads off, and the
/// sets to give those threads back.
#[derive(Debug, Default)]
pub(crate) struct Steering {
    /// The CPUs of the long jobs, sorted; empty while nothing is steered.
    away_from: Vec<usize>,
    /// Each steered thread, its own set as read before narrowing it, and the narrowed set.
    steered: Vec<Steered>,
}

/// A thread the monitor has narrowed.
#[derive(Debug)]
struct Steered {
    tid: i32,
    own: CpuSet,
    narrowed: CpuSet,
}

impl Steering {
    /// After a look: `long_jobs` are the CPUs where workers now run long jobs (any order,
    /// repeats allowed), `others` the threads to keep off them. Does nothing while the
    /// CPUs are the same as at the last call; otherwise gives every steered thread its own
    /// set back and steers `others` off the new CPUs. Errors are left unsteered: a thread
    /// that has exited, or a set the kernel refuses (a cpuset), only loses the steering.
    pub(crate) fn update(
        &mut self,
        affinity: &impl Affinity,
        mut long_jobs: Vec<usize>,
        others: impl IntoIterator<Item = i32>,
    ) {
        long_jobs.sort_unstable();
        long_jobs.dedup();
        if long_jobs == self.away_from {
            return;
        }
        self.release(affinity);
        if long_jobs.is_empty() {
            return;
        }
        for tid in others {
            let Ok(own) = affinity.get(tid) else { continue };
            if let Some(narrowed) = own.without(&long_jobs) {
                if affinity.set(tid, &narrowed).is_ok() {
                    self.steered.push(Steered { tid, own, narrowed });
                }
            }
        }
        self.away_from = long_jobs;
    }

    /// Gives every steered thread its own set back, unless its set is no longer the one
    /// the monitor gave it: then someone else (a task on that thread, or `taskset`) has
    /// set it since, and that stands. (A change made between this read and
    /// the write below is overwritten: a window of one system call.)
    pub(crate) fn release(&mut self, affinity: &impl Affinity) {
        for s in self.steered.drain(..) {
            if affinity
                .get(s.tid)
                .is_ok_and(|now| now.same_as(&s.narrowed))
            {
                let _ = affinity.set(s.tid, &s.own);
            }
        }
        self.away_from.clear();
    }

    /// Whether `tid` is steered now.
    #[cfg(test)]
    pub(crate) fn steers(&self, tid: i32) -> bool {
        self.steered.iter().any(|s| s.tid == tid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::HashMap;

    /// Threads' sets in a map; `refuse` makes every `set` fail.
    #[derive(Default)]
    struct Fake {
        sets: RefCell<HashMap<i32, CpuSet>>,
        refuse: bool,
    }

    impl Fake {
        fn with(threads: &[(i32, CpuSet)]) -> Fake {
            Fake {
                sets: RefCell::new(threads.iter().copied().collect()),
                refuse: false,
            }
        }
        fn of(&self, tid: i32) -> CpuSet {
            self.sets.borrow()[&tid]
        }
    }

    impl Affinity for Fake {
        fn get(&self, tid: i32) -> io::Result<CpuSet> {
            self.sets
                .borrow()
                .get(&tid)
                .copied()
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))
        }
        fn set(&self, tid: i32, set: &CpuSet) -> io::Result<()> {
            if self.refuse {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
            self.sets.borrow_mut().insert(tid, *set);
            Ok(())
        }
    }

    fn cpus(set: &CpuSet) -> Vec<usize> {
        set.cpus()
    }

    #[test]
    fn a_set_without_cpus_is_none_if_nothing_is_left_or_nothing_changes() {
        let four = CpuSet::first(4);
        assert_eq!(cpus(&four.without(&[1, 3]).unwrap()), [0, 2]);
        assert!(CpuSet::first(1).without(&[0]).is_none(), "nothing left");
        assert!(four.without(&[5]).is_none(), "nothing to change");
        assert!(four.without(&[0, 1, 2, 3]).is_none());
    }

    #[test]
    fn helpers_leave_the_long_jobs_cpus_and_get_their_own_sets_back() {
        let fake = Fake::with(&[(10, CpuSet::first(4)), (11, CpuSet::first(2))]);
        let mut steering = Steering::default();
        steering.update(&fake, vec![1], [10, 11]);
        assert_eq!(cpus(&fake.of(10)), [0, 2, 3]);
        assert_eq!(cpus(&fake.of(11)), [0]);
        // The next look sees the same job on the same CPU: nothing to do.
        steering.update(&fake, vec![1, 1], [10, 11]);
        assert_eq!(cpus(&fake.of(10)), [0, 2, 3]);
        // The job moved to CPU 0: both are steered off it instead.
        steering.update(&fake, vec![0], [10, 11]);
        assert_eq!(cpus(&fake.of(10)), [1, 2, 3]);
        assert_eq!(cpus(&fake.of(11)), [1]);
        // No long job any more: their own sets, exactly.
        steering.update(&fake, vec![], [10, 11]);
        assert!(fake.of(10).same_as(&CpuSet::first(4)));
        assert!(fake.of(11).same_as(&CpuSet::first(2)));
        assert!(!steering.steers(10) && !steering.steers(11));
    }

    #[test]
    fn a_thread_with_nowhere_else_to_go_keeps_its_set() {
        // Pinned by its user to the long job's CPU, or every CPU busy with long jobs.
        let fake = Fake::with(&[(10, CpuSet::first(1)), (11, CpuSet::first(2))]);
        let mut steering = Steering::default();
        steering.update(&fake, vec![0], [10]);
        assert!(fake.of(10).same_as(&CpuSet::first(1)));
        assert!(!steering.steers(10));
        steering.update(&fake, vec![0, 1], [11]);
        assert!(fake.of(11).same_as(&CpuSet::first(2)));
        assert!(!steering.steers(11));
    }

    #[test]
    fn a_set_changed_by_someone_else_while_narrowed_is_left_as_they_set_it() {
        let fake = Fake::with(&[(10, CpuSet::first(4)), (11, CpuSet::first(4))]);
        let mut steering = Steering::default();
        steering.update(&fake, vec![1], [10, 11]);
        // The user pins thread 10 to CPU 3 while the job runs.
        fake.set(10, &CpuSet::only(3)).unwrap();
        steering.update(&fake, vec![], [10, 11]);
        assert_eq!(cpus(&fake.of(10)), [3], "the user's pinning stands");
        assert!(
            fake.of(11).same_as(&CpuSet::first(4)),
            "the other gets its own back"
        );
        // The same when the job moves: 10 keeps the user's set, and is steered from it.
        steering.update(&fake, vec![2], [10, 11]);
        fake.set(11, &CpuSet::first(2)).unwrap();
        steering.update(&fake, vec![0], [10, 11]);
        assert_eq!(cpus(&fake.of(10)), [3]);
        assert_eq!(
            cpus(&fake.of(11)),
            [1],
            "the user's set, narrowed off CPU 0"
        );
    }

    #[test]
    fn a_thread_that_is_gone_or_refused_is_not_steered() {
        let fake = Fake {
            refuse: true,
            ..Fake::with(&[(10, CpuSet::first(2))])
        };
        let mut steering = Steering::default();
        // 12 has exited; 10's new set is refused (a cpuset, say).
        steering.update(&fake, vec![1], [10, 12]);
        assert!(!steering.steers(10) && !steering.steers(12));
        assert!(fake.of(10).same_as(&CpuSet::first(2)));
    }
}
