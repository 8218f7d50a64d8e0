//! Phase 4's order: which queue each job comes from, and which jobs are preceded by the
//! worker's maintenance. Plain values: the worker asks them, they touch no queue.
//!
//! Phase 4 runs exactly what was ready when it began, counted per queue: a pinned task that
//! wakes itself goes back to the pinned queue and must not run again (and again) ahead of the
//! stealable jobs that were already waiting, nor the other way round. While both queues have
//! jobs left the two take turns, so neither kind waits for the whole of the other.

/// Jobs between two maintenances: a look at the global injector (one job from it), the
/// pinned inbox and, rate-limited, the siblings. A prime, as in Go and tokio, so that the
/// rhythm does not lock onto a workload's own period.
pub(super) const GLOBAL_QUEUE_INTERVAL: u32 = 61;

/// Jobs between two checks whether a busy worker's look after its siblings is due (one
/// clock read, against `SIBLING_LOOK_INTERVAL`): with jobs of a few microseconds that is
/// about every interval, and far shorter jobs share the clock read sixteen at a time.
pub(super) const SIBLING_LOOK_CHECK_JOBS: u32 = 16;

/// What comes before the next job of phase 4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Maintenance {
    /// Nothing: run the job.
    None,
    /// A look after the siblings, if `SIBLING_LOOK_INTERVAL` has passed since the last.
    SiblingLook,
    /// The whole maintenance: the injector, the pinned inbox and the sibling look.
    Full,
}

/// Where phase 4's next job comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    /// The worker's pinned (`spawn_local`) queue.
    Pinned,
    /// Its stealable ready queue.
    Ready,
}

/// What phase 4 still has to run of what was ready when it began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RunOrder {
    pinned_left: usize,
    ready_left: usize,
    /// Whether the pinned queue has the next turn when both have jobs left.
    pinned_turn: bool,
}

impl RunOrder {
    /// Phase 4 begins with `pinned` pinned and `ready` stealable jobs queued.
    pub(super) fn new(pinned: usize, ready: usize) -> Self {
        RunOrder {
            pinned_left: pinned,
            ready_left: ready,
            pinned_turn: false,
        }
    }

    /// The queue to take the next job from, or `None` when phase 4 is done.
    pub(super) fn next(&mut self) -> Option<Source> {
        let source = match (self.pinned_left > 0, self.ready_left > 0) {
            (false, false) => return None,
            (true, false) => Source::Pinned,
            (false, true) => Source::Ready,
            (true, true) if self.pinned_turn => Source::Pinned,
            (true, true) => Source::Ready,
        };
        match source {
            Source::Pinned => self.pinned_left -= 1,
            Source::Ready => self.ready_left -= 1,
        }
        self.pinned_turn = source == Source::Ready;
        Some(source)
    }

    /// The ready queue was empty when we counted on a job: siblings stole the rest.
    pub(super) fn ready_ran_out(&mut self) {
        self.ready_left = 0;
    }
}

/// Counts the jobs a worker runs, to precede every [`GLOBAL_QUEUE_INTERVAL`]th one with a
/// maintenance and every [`SIBLING_LOOK_CHECK_JOBS`]th one with a sibling look. It runs
/// across cycles: short phases still get their maintenance.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct MaintenanceRhythm {
    jobs: u32,
}

impl MaintenanceRhythm {
    /// Counts one more job; says what comes before it.
    pub(super) fn before_next_job(&mut self) -> Maintenance {
        self.jobs = self.jobs.wrapping_add(1);
        if self.jobs % GLOBAL_QUEUE_INTERVAL == 0 {
            Maintenance::Full
        } else if self.jobs % SIBLING_LOOK_CHECK_JOBS == 0 {
            Maintenance::SiblingLook
        } else {
            Maintenance::None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Source::{Pinned, Ready};

    fn order(mut o: RunOrder) -> Vec<Source> {
        std::iter::from_fn(|| o.next()).collect()
    }

    #[test]
    fn the_two_queues_take_turns_then_the_longer_one_finishes() {
        assert_eq!(
            order(RunOrder::new(2, 4)),
            [Ready, Pinned, Ready, Pinned, Ready, Ready]
        );
        assert_eq!(order(RunOrder::new(3, 1)), [Ready, Pinned, Pinned, Pinned]);
    }

    #[test]
    fn phase_4_runs_exactly_what_was_counted() {
        assert_eq!(order(RunOrder::new(0, 0)), []);
        assert_eq!(order(RunOrder::new(0, 3)), [Ready, Ready, Ready]);
        assert_eq!(order(RunOrder::new(2, 0)), [Pinned, Pinned]);
    }

    #[test]
    fn stolen_ready_jobs_leave_only_the_pinned_ones() {
        let mut o = RunOrder::new(2, 5);
        assert_eq!(o.next(), Some(Ready));
        o.ready_ran_out();
        assert_eq!(order(o), [Pinned, Pinned]);
    }

    #[test]
    fn maintenances_and_sibling_looks_come_on_their_own_job_rhythms() {
        let mut rhythm = MaintenanceRhythm::default();
        let before: Vec<(u32, Maintenance)> = (1..=200)
            .map(|job| (job, rhythm.before_next_job()))
            .filter(|&(_, m)| m != Maintenance::None)
            .collect();
        let full: Vec<u32> = before
            .iter()
            .filter(|&&(_, m)| m == Maintenance::Full)
            .map(|&(job, _)| job)
            .collect();
        let g = GLOBAL_QUEUE_INTERVAL;
        assert_eq!(full, [g, 2 * g, 3 * g]);
        let looks: Vec<u32> = before
            .iter()
            .filter(|&&(_, m)| m == Maintenance::SiblingLook)
            .map(|&(job, _)| job)
            .collect();
        // Every 16th job, but a full maintenance (which looks too) never also counts as one.
        let expected: Vec<u32> = (1..=200)
            .filter(|j| j % SIBLING_LOOK_CHECK_JOBS == 0 && j % g != 0)
            .collect();
        assert_eq!(looks, expected);
    }
}
