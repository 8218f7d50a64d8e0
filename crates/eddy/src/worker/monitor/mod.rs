//! The monitor: Go's `sysmon`, reduced to one job: notice a worker stuck in a long job and
//! send someone to serve what the stuck worker cannot (its queued tasks, its due timers, its
//! IO): a parked sibling, or, when every worker is stuck, a spare (`spare`).
//!
//! Why a thread and not timeouts on the parked workers: a parked worker that woke up every
//! few milliseconds to look at busy siblings, and busy workers that notified parked ones to
//! keep such a watch, cost a park/wake round trip (then seven system calls: `polling`'s five
//! per wait, the eventfd write, the timerfd; still two context switches now that a park is
//! one `epoll_wait`) several thousand times a second on a busy server, which doubled eddy's
//! server CPU per request. The monitor is one thread, and looks only as often as a look can
//! help ([`MonitorPace`]): each of its wake-ups costs tens of microseconds of CPU, so
//! looking at every `WATCH_INTERVAL` all the time would cost a sizeable part of a core.
//!
//! * Once every worker is parked and none ran a cycle for a whole look, it sleeps until one
//!   wakes up: an idle runtime costs nothing. A worker leaving its park checks one flag,
//!   and if the monitor sleeps, sets its alarm for a first look a little later (`alarm`):
//!   waking the monitor at once would put a futex wake-up before the worker's first job.
//! * For [`HELP_MEMORY`] after it last sent help, it watches ([`Watching`]): a server whose
//!   handlers now and then run long keeps its rescues quick. How closely depends on what it
//!   last helped with. After a long job (a worker seen stuck for [`LONG_JOB`],
//!   [`is_long_job`]) it looks every [`WATCH_INTERVAL`], and after a worker blocked in a
//!   system call inside a job (below) every [`BLOCKED_WATCH_INTERVAL`]: such a worker leaves
//!   its CPU free, and is found at the first look. Otherwise the stuck worker was
//!   most likely a thread waiting for a CPU (on a busy machine, a scheduler slice of
//!   another process); rescuing its sockets still shortens the tail, but such stalls come
//!   all the time on a loaded server, and looking every [`WATCH_INTERVAL`] because of them
//!   kept the monitor waking 4,000 times a second, a tenth of a core, so it looks every
//!   [`STALL_WATCH_INTERVAL`], and only while some worker is parked: with every worker
//!   awake there is no sibling to send, a worker about to park first serves any sibling
//!   stranded past the IO grace (`Worker::rescue_stuck_siblings`), and each look would
//!   only take a CPU from a busy thread.
//! * Otherwise it looks every [`CALM_INTERVAL`] while some workers are parked (someone to
//!   send), and every [`BUSY_INTERVAL`] while every worker is awake (only spares to send,
//!   and busy workers look after each other between jobs, `siblings`).
//!
//! At each look, a worker is stuck if it is awake and its cycle counter has not moved since
//! the last look (one cycle, one job or many, ran for a whole interval), once it has begun
//! its first cycle ([`Seen`]). While it watches after a long job (or a blocked one), a worker
//! whose thread sleeps in the kernel outside its park is stuck at the first look
//! (`thread_state`, [`HelpMemory::checks_blocked`]): it is blocked in a job, and a second
//! look would only leave its sockets stranded longer. It is marked so for as long as it
//! stays in that cycle (`WorkerSlot::mark_blocked`), and the sibling sent to it serves its
//! IO at once instead of waiting out the IO grace. For a
//! stuck worker with something waiting (queued jobs, timers, IO sources, or jobs in the
//! injector) it notifies one parked sibling, whose loop does the rest
//! (`Worker::rescue_stuck_siblings`: it nests the stuck worker's epoll in its own, fires its
//! timers, steals its queue). If every worker is stuck, it wakes a spare instead, starting
//! one if none is up yet. While long jobs are about, the same `/proc` read tells it which
//! CPU a spinning worker is on, and it keeps the other workers and spares off that CPU
//! until the job is over (`steering`): a helper that shares the job's CPU serves the
//! stranded work only in its fair share of turns.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) mod alarm;
pub(crate) mod state;
pub(crate) mod steering;
pub(crate) mod thread_state;

use super::shared::{Shared, WorkerSlot};
use steering::Steering;

/// How often the monitor looks while it recently sent help: a stuck worker's IO then waits
/// up to about twice this for its rescuer. The IO grace itself, so that the sibling it sends
/// finds the stuck worker past it.
pub(crate) const WATCH_INTERVAL: Duration = crate::reactor::STUCK_IO_GRACE;

/// How often the monitor looks while it recently helped a worker blocked in a system call
/// inside a job: half [`WATCH_INTERVAL`]. Such a worker is found at the first look (its
/// thread state, not a second look at its cycles, tells), so each look sooner is that much
/// less stranding for the sockets of the next job that blocks, and the CPU the looks take
/// is one the blocked job leaves free; the IO grace a spinning worker gets does not apply
/// to it (`WorkerSlot::mark_blocked`).
const BLOCKED_WATCH_INTERVAL: Duration = Duration::from_micros(125);

/// How often the monitor looks while it recently helped a worker that was not in a long
/// job, and some worker is parked: twice [`WATCH_INTERVAL`], half the wake-ups, for stalls
/// that mostly end by themselves within a scheduler slice.
const STALL_WATCH_INTERVAL: Duration = Duration::from_micros(500);

/// How long after sending help the monitor keeps watching ([`Watching`]).
const HELP_MEMORY: Duration = Duration::from_secs(1);

/// How long a worker must be seen stuck before the monitor takes it for a long job and
/// watches closely: longer than a thread waits for a CPU on a busy machine (a scheduler
/// slice of a few milliseconds, ended at a timer tick), far shorter than a handler that
/// parses, compresses or hashes inline.
const LONG_JOB: Duration = Duration::from_millis(5);

/// How long a worker must have gone without harvesting its IO before the monitor reads
/// whether its thread is blocked: far longer than a busy worker's cycle, far shorter than
/// the stranding a blocked worker's sockets would see until the next look.
const BLOCKED_CHECK_AFTER: Duration = Duration::from_micros(100);

/// How often it looks otherwise while some workers are parked.
const CALM_INTERVAL: Duration = Duration::from_millis(1);

/// How often it looks otherwise while every worker is awake.
const BUSY_INTERVAL: Duration = Duration::from_millis(5);

/// What one look saw, for [`MonitorPace::next`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Look {
    /// Workers (and spares) awake now.
    pub(crate) awake: usize,
    /// Workers (and spares) parked now.
    pub(crate) parked: usize,
    /// Whether any completed a cycle since the previous look.
    pub(crate) moved: bool,
    /// What help it sent within [`HELP_MEMORY`].
    pub(crate) watching: Watching,
}

/// How closely the monitor watches, after the help it sent within [`HELP_MEMORY`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Watching {
    /// It sent none.
    #[default]
    No,
    /// It helped only workers that were stuck for less than [`LONG_JOB`].
    Stalls,
    /// It helped a worker in a long job.
    LongJobs,
    /// It helped a worker it found blocked in a system call inside a job (found only while
    /// it watches after a long job or an earlier blocked one).
    BlockedJobs,
}

/// When the monitor last sent each kind of help, remembered for [`HELP_MEMORY`]: what it
/// watches for, and how closely.
#[derive(Debug, Clone, Copy, Default)]
struct HelpMemory {
    /// Any help.
    any: Option<Instant>,
    /// Help for a worker stuck for [`LONG_JOB`] or longer.
    long_job: Option<Instant>,
    /// Help for a worker found blocked in a system call inside a job.
    blocked_job: Option<Instant>,
}

/// What one look's help was for, for [`HelpMemory::note`].
#[derive(Debug, Clone, Copy, Default)]
struct Helped {
    /// A stuck worker had been stuck for [`LONG_JOB`] or longer.
    long_job: bool,
    /// A stuck worker was found blocked in a system call.
    blocked_job: bool,
}

impl HelpMemory {
    /// Help was sent at `now`.
    fn note(&mut self, helped: Helped, now: Instant) {
        self.any = Some(now);
        if helped.long_job {
            self.long_job = Some(now);
        }
        if helped.blocked_job {
            self.blocked_job = Some(now);
        }
    }

    /// Whether looks at `now` read the thread state of awake workers (`thread_state`): right
    /// after a long job, or a blocked one, a worker blocked in the next is told at once.
    fn checks_blocked(&self, now: Instant) -> bool {
        recent(self.long_job, now) || recent(self.blocked_job, now)
    }

    /// How closely to watch at `now`: the closest watch that any remembered help calls for.
    fn watching(&self, now: Instant) -> Watching {
        if recent(self.blocked_job, now) {
            Watching::BlockedJobs
        } else if recent(self.long_job, now) {
            Watching::LongJobs
        } else if recent(self.any, now) {
            Watching::Stalls
        } else {
            Watching::No
        }
    }
}

/// Whether help sent at `sent` is still remembered at `now`.
fn recent(sent: Option<Instant>, now: Instant) -> bool {
    sent.is_some_and(|t| now.saturating_duration_since(t) < HELP_MEMORY)
}

/// When the monitor looks next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MonitorPace {
    /// Sleep until a worker wakes: every worker is parked and none moved since last time.
    UntilWoken,
    /// Look again after this long.
    After(Duration),
}

impl MonitorPace {
    pub(crate) fn next(look: Look) -> MonitorPace {
        if look.awake == 0 && !look.moved {
            MonitorPace::UntilWoken
        } else if look.watching == Watching::BlockedJobs {
            MonitorPace::After(BLOCKED_WATCH_INTERVAL)
        } else if look.watching == Watching::LongJobs {
            MonitorPace::After(WATCH_INTERVAL)
        } else if look.watching == Watching::Stalls && look.parked > 0 {
            MonitorPace::After(STALL_WATCH_INTERVAL)
        } else if look.parked > 0 {
            MonitorPace::After(CALM_INTERVAL)
        } else {
            MonitorPace::After(BUSY_INTERVAL)
        }
    }
}

/// What one look makes of one worker, from its park state, its cycle counter now and at
/// the previous look, and whether its thread sleeps in the kernel (read only right after a
/// long job, `thread_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seen {
    /// Asleep in its park.
    Parked,
    /// Awake, but its thread has not begun its first cycle: it is stuck in no job, only not
    /// given a CPU yet (as on a loaded machine right after `build`), and a spare's new
    /// thread would wait for one just as long.
    Starting,
    /// Awake, and it began at least one cycle since the previous look.
    Moving,
    /// Awake in the same cycle as at the previous look (one job, or one batch, ran for the
    /// whole interval), or asleep in the kernel inside a job (blocked in it).
    Still,
}

impl Seen {
    pub(crate) fn of(parked: bool, last_cycles: u64, cycles: u64, blocked: bool) -> Seen {
        if parked {
            Seen::Parked
        } else if cycles == 0 {
            Seen::Starting
        } else if cycles != last_cycles && !blocked {
            Seen::Moving
        } else {
            Seen::Still
        }
    }
}

/// The monitor thread's loop; returns when the runtime closes.
pub(crate) fn run(shared: &Arc<Shared>) {
    let state = &shared.monitor;
    let alarm = state
        .alarm
        .as_ref()
        .expect("a runtime with a monitor built its alarm");
    let mut last_cycles: Vec<u64> = vec![0; shared.workers.len()];
    let mut memory = HelpMemory::default();
    // Since which look each worker has been stuck without a break.
    let mut stuck_since: Vec<Option<Instant>> = vec![None; shared.workers.len()];
    let mut pace = MonitorPace::After(WATCH_INTERVAL);
    let mut steering = Steering::default();
    while !shared.is_closed() {
        match pace {
            MonitorPace::UntilWoken => {
                state.idle.store(true, Ordering::SeqCst);
                // Re-check after publishing `idle`: a worker that woke in between either saw
                // the flag (and sets the alarm) or is visible as awake here. Only a waking
                // worker, the thread that woke it from outside, or shutdown sets the alarm
                // (one set for a wake this re-check already saw only brings a look early).
                if shared.every_loop_parked() && !shared.is_closed() {
                    alarm.wait();
                }
                state.idle.store(false, Ordering::SeqCst);
            }
            MonitorPace::After(interval) => {
                let mut guard = state.lock.lock();
                // Under the lock shutdown takes to signal: closed now, or the signal comes.
                if !shared.is_closed() {
                    state.cv.wait_for(&mut guard, interval);
                }
            }
        }
        #[cfg(test)]
        state.looks.fetch_add(1, Ordering::SeqCst);
        let mut look = Look::default();
        // Awake without moving, and among those, with something waiting.
        let mut still = Vec::new();
        let mut stuck = Vec::new();
        // Spares whose thread never started are no loops yet.
        let live = shared.regular + shared.spares.started();
        // Work in the injector waits for whichever worker is free: while every worker is
        // still, it waits on all of them (a task spawned from outside, with nothing else
        // queued anywhere, would otherwise wait for a long job to end).
        let injector_waits = !shared.injector.is_empty();
        let now = Instant::now();
        let checks_blocked = memory.checks_blocked(now);
        let mut helped = Helped::default();
        // The CPUs of stuck workers that spin (not blocked), where known.
        let mut spinning_on: Vec<(usize, usize)> = Vec::new();
        for (i, w) in shared.workers[..live].iter().enumerate() {
            if w.dead.load(Ordering::Relaxed) && !needs_adopting(w) {
                // Gone, and what it left is served where it was adopted.
                continue;
            }
            let cycles = w.cycles();
            look.moved |= cycles != last_cycles[i];
            let parked = w.is_parked();
            let thread = (checks_blocked && !parked)
                .then(|| quiet_thread(w, now))
                .flatten();
            // Still not parked once its state is read: see `quiet_thread`.
            let blocked = thread.is_some_and(|t| t.asleep) && !w.is_parked();
            if blocked {
                // The sibling sent to it need not wait out the IO grace.
                w.mark_blocked(cycles);
                #[cfg(test)]
                state.blocked_seen.fetch_add(1, Ordering::SeqCst);
            }
            let seen = Seen::of(parked, last_cycles[i], cycles, blocked);
            last_cycles[i] = cycles;
            match seen {
                Seen::Parked => look.parked += 1,
                Seen::Starting | Seen::Moving => look.awake += 1,
                Seen::Still => {
                    look.awake += 1;
                    still.push(i);
                    // The task its job handed over to would wait for the job's end: it goes
                    // where any worker takes it (the help sent below, or one awake already).
                    if let Some(job) = w.next.take() {
                        shared.push_remote(job);
                    }
                    if injector_waits || w.has_pending_work() {
                        stuck.push(i);
                        helped.blocked_job |= blocked;
                        if let Some(cpu) = thread.filter(|t| !t.asleep).and_then(|t| t.cpu) {
                            spinning_on.push((i, cpu));
                        }
                    }
                }
            }
        }
        for (i, since) in stuck_since.iter_mut().enumerate() {
            *since = if stuck.contains(&i) {
                Some(since.unwrap_or(now))
            } else {
                None
            };
        }
        helped.long_job = stuck_since.iter().flatten().any(|&t| is_long_job(now - t));
        if !helped.long_job && !checks_blocked {
            // No long job about: what spins is a thread waiting for a CPU, or a short job.
            spinning_on.clear();
        }
        steer_helpers(shared, &mut steering, &spinning_on, live);
        if send_help(shared, &stuck, &still) {
            memory.note(helped, now);
        }
        look.watching = memory.watching(now);
        pace = MonitorPace::next(look);
    }
    steering.release(&steering::Kernel);
}

/// Keeps the runtime's other workers (and started spares) off the CPUs where the workers
/// in `spinning_on` run long jobs (`steering`), or gives them their own CPUs back when
/// there are none. Not the monitor: it must stay free to take the steering back, and
/// narrowed to one CPU it could wait behind a long job starting there.
fn steer_helpers(
    shared: &Shared,
    steering: &mut Steering,
    spinning_on: &[(usize, usize)],
    live: usize,
) {
    let cpus = spinning_on.iter().map(|&(_, cpu)| cpu).collect();
    let others = (0..live)
        .filter(|i| !spinning_on.iter().any(|&(s, _)| s == *i))
        .map(|i| shared.workers[i].tid.load(Ordering::SeqCst))
        .filter(|&tid| tid != 0);
    steering.update(&steering::Kernel, cpus, others);
}

/// Sends help for the `stuck` workers (awake, not moving, something waiting): a parked
/// worker (the first one it finds, who rescues them all), or, if every worker is `still`
/// (awake and not moving), a spare. True if anyone was sent.
fn send_help(shared: &Arc<Shared>, stuck: &[usize], still: &[usize]) -> bool {
    if stuck.is_empty() {
        return false;
    }
    let regular = &shared.workers[..shared.regular];
    if let Some(helper) = regular.iter().find(|w| w.is_parked()) {
        helper.notify();
        return true;
    }
    let every_worker_stuck = (0..shared.regular)
        .all(|i| still.contains(&i) || shared.workers[i].dead.load(Ordering::Relaxed));
    if !every_worker_stuck {
        // A worker that is still moving looks after its stuck siblings between its jobs.
        return false;
    }
    // A spare that is up and parked, else the next one to start.
    let spares = &shared.workers[shared.regular..];
    let started = shared.spares.started();
    if let Some(spare) = spares[..started.min(spares.len())]
        .iter()
        .enumerate()
        .find(|(k, w)| w.is_parked() && !still.contains(&(shared.regular + k)))
    {
        spare.1.notify();
        return true;
    }
    let idle_spare_running = (0..started).any(|k| !still.contains(&(shared.regular + k)));
    if idle_spare_running {
        // Up and running: it will get to them.
        return false;
    }
    started < spares.len()
        && shared.spares.start(started, |name, queue, hooks| {
            super::spawn_thread(name, shared, shared.regular + started, queue, hooks)
        })
}

/// Awake worker `w`'s thread as `/proc` shows it, if it has not harvested its IO for
/// [`BLOCKED_CHECK_AFTER`] (a worker that harvests every cycle is in no long job). It is
/// blocked in a job if its thread sleeps in the kernel and it is still not parked once that
/// is read: a worker marks itself parked before it goes to sleep in its park, so a worker
/// that parked between the caller's look at its park state and this read is parked at the
/// second look, not blocked in a job (taken for blocked, it would stay marked so for as
/// long as it sleeps in that cycle).
fn quiet_thread(w: &WorkerSlot, now: Instant) -> Option<thread_state::ThreadStat> {
    let since_harvest = w.timers.nanos(now).saturating_sub(w.reactor.last_polled());
    let tid = w.tid.load(Ordering::SeqCst);
    if since_harvest < BLOCKED_CHECK_AFTER.as_nanos() as u64 || tid == 0 {
        return None;
    }
    thread_state::read(tid)
}

/// Whether a worker seen stuck at every look for `stuck_for` is in a long job, not a thread
/// that waited a scheduler slice for a CPU.
fn is_long_job(stuck_for: Duration) -> bool {
    stuck_for >= LONG_JOB
}

/// Whether a dead worker still has something no sibling serves yet: queued jobs, or a
/// timer heap and sockets that no sibling has adopted (nested its epoll) yet.
fn needs_adopting(w: &WorkerSlot) -> bool {
    !w.stealer.is_empty() || !w.burst_share.is_empty() || w.io_host.get().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn look(awake: usize, parked: usize, moved: bool, watching: Watching) -> Look {
        Look {
            awake,
            parked,
            moved,
            watching,
        }
    }

    #[test]
    fn a_worker_is_still_if_it_began_no_cycle_since_the_last_look_or_is_blocked() {
        assert_eq!(Seen::of(false, 7, 7, false), Seen::Still);
        assert_eq!(Seen::of(false, 7, 8, false), Seen::Moving);
        assert_eq!(
            Seen::of(false, 7, 8, true),
            Seen::Still,
            "moved since the last look, but now blocked in a job: no second look needed"
        );
        assert_eq!(Seen::of(true, 7, 7, false), Seen::Parked);
        assert_eq!(Seen::of(true, 7, 9, false), Seen::Parked);
    }

    #[test]
    fn the_closest_watch_any_remembered_help_calls_for_wins() {
        let t0 = Instant::now();
        let mut memory = HelpMemory::default();
        assert_eq!(memory.watching(t0), Watching::No);
        assert!(!memory.checks_blocked(t0));
        memory.note(Helped::default(), t0);
        assert_eq!(memory.watching(t0), Watching::Stalls);
        assert!(!memory.checks_blocked(t0), "a stall is no long job");
        let long_job = Helped {
            long_job: true,
            blocked_job: false,
        };
        memory.note(long_job, t0);
        assert_eq!(memory.watching(t0), Watching::LongJobs);
        assert!(memory.checks_blocked(t0));
        let t1 = t0 + HELP_MEMORY / 2;
        let blocked = Helped {
            long_job: false,
            blocked_job: true,
        };
        memory.note(blocked, t1);
        assert_eq!(memory.watching(t1), Watching::BlockedJobs);
        let t2 = t0 + HELP_MEMORY;
        assert_eq!(
            memory.watching(t2),
            Watching::BlockedJobs,
            "the long job is forgotten, the blocked one is not"
        );
        assert!(
            memory.checks_blocked(t2),
            "a blocked job keeps the check on by itself"
        );
        let t3 = t1 + HELP_MEMORY;
        assert_eq!(memory.watching(t3), Watching::No, "all forgotten");
        assert!(!memory.checks_blocked(t3));
    }

    #[test]
    fn a_long_job_outlasts_a_wait_for_a_cpu() {
        assert!(!is_long_job(Duration::ZERO), "seen stuck at one look only");
        assert!(!is_long_job(Duration::from_millis(4)), "a slice and a tick");
        assert!(is_long_job(LONG_JOB));
        assert!(LONG_JOB > CALM_INTERVAL, "more than one calm look");
    }

    #[test]
    fn a_worker_that_never_began_a_cycle_is_not_still() {
        // Its thread has not run yet: there is no long job to stand in for.
        assert_eq!(Seen::of(false, 0, 0, false), Seen::Starting);
        // Its first cycle is its first job, and that one can run long.
        assert_eq!(Seen::of(false, 1, 1, false), Seen::Still);
    }

    #[test]
    fn a_runtime_with_nothing_to_do_is_not_watched() {
        assert_eq!(
            MonitorPace::next(look(0, 2, false, Watching::No)),
            MonitorPace::UntilWoken
        );
        assert_eq!(
            MonitorPace::next(look(0, 2, false, Watching::LongJobs)),
            MonitorPace::UntilWoken,
            "not even right after a rescue"
        );
    }

    #[test]
    fn one_more_look_after_the_last_worker_parked() {
        // It ran a cycle since the previous look: it may park and wake again at once.
        assert_eq!(
            MonitorPace::next(look(0, 2, true, Watching::No)),
            MonitorPace::After(CALM_INTERVAL)
        );
    }

    #[test]
    fn after_sending_help_the_monitor_watches_closely_and_closest_after_a_long_job() {
        for (watching, interval) in [
            (Watching::BlockedJobs, BLOCKED_WATCH_INTERVAL),
            (Watching::LongJobs, WATCH_INTERVAL),
            (Watching::Stalls, STALL_WATCH_INTERVAL),
        ] {
            assert_eq!(
                MonitorPace::next(look(1, 1, true, watching)),
                MonitorPace::After(interval)
            );
        }
        for (watching, interval) in [
            (Watching::BlockedJobs, BLOCKED_WATCH_INTERVAL),
            (Watching::LongJobs, WATCH_INTERVAL),
        ] {
            assert_eq!(
                MonitorPace::next(look(2, 0, true, watching)),
                MonitorPace::After(interval),
                "with every worker in a long job, a spare is needed soon"
            );
        }
        assert!(WATCH_INTERVAL < STALL_WATCH_INTERVAL && STALL_WATCH_INTERVAL < CALM_INTERVAL);
        assert!(BLOCKED_WATCH_INTERVAL < WATCH_INTERVAL);
    }

    #[test]
    fn otherwise_it_looks_less_often_the_less_a_look_can_do() {
        assert_eq!(
            MonitorPace::next(look(1, 1, false, Watching::No)),
            MonitorPace::After(CALM_INTERVAL),
            "a worker stuck in one job moves nothing"
        );
        assert_eq!(
            MonitorPace::next(look(2, 0, true, Watching::No)),
            MonitorPace::After(BUSY_INTERVAL)
        );
        assert_eq!(
            MonitorPace::next(look(2, 0, true, Watching::Stalls)),
            MonitorPace::After(BUSY_INTERVAL),
            "after short stalls, with every worker awake there is nobody to send"
        );
        assert!(WATCH_INTERVAL < CALM_INTERVAL && CALM_INTERVAL < BUSY_INTERVAL);
    }
}
