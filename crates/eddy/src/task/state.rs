//! The task cell's state word and its transitions.
//!
//! One atomic word holds a task's flags and its reference count:
//!
//! ```text
//!  bits 0..=6: SCHEDULED RUNNING COMPLETE HANDLE JOIN_WAKER CANCELLED REGISTERED
//!  bits 7.. : reference count
//! ```
//!
//! * `SCHEDULED`: a [`Runnable`](super::raw::Runnable) exists (it holds one reference), or the task
//!   was woken while `RUNNING` and its runner will reschedule it (no extra reference then).
//! * `RUNNING`: one thread is polling the future; only it touches the stage.
//! * `COMPLETE`: the future is gone and the output was written. Set once, never cleared.
//! * `HANDLE`: the [`Task`](crate::Task) handle still wants the output. Whoever observes the
//!   other party's bit in the single transition that sets `COMPLETE` or clears `HANDLE` owns
//!   the output: the runner drops it if `HANDLE` was already clear, the handle takes or
//!   drops it otherwise.
//! * `JOIN_WAKER`: the awaiter slot holds the handle's waker and belongs to the runner side,
//!   which only ever reads it until it clears the bit after `COMPLETE`. The handle writes
//!   the slot only while the bit is clear, and clears it itself only by a transition that
//!   fails once `COMPLETE` is set.
//! * `CANCELLED`: the next poll drops the future instead of polling it.
//! * `REGISTERED`: the task is linked in the registry (changed only under the registry's
//!   shard lock; the registry holds one reference meanwhile).
//!
//! Who owns the awaiter slot, then: the handle while `JOIN_WAKER` is clear; the runner side
//! (read only) while it is set; after `COMPLETE`, once the runner has woken the waker and
//! cleared the bit ([`State::unset_join_waker_after_complete`]), the handle if it is still
//! there, else the runner. Whoever owns it after `COMPLETE` drops the waker at once: a
//! completed task must not keep its awaiter (and what the awaiter holds) alive for as long
//! as some stray waker keeps the cell.
//!
//! Each transition is a method named for the event, returns what the caller must do next,
//! and checks its preconditions with `debug_assert!`. The word is the only state shared
//! between threads; the loom models in this file check the transitions against concurrent
//! wakes, polls, cancels, joins and drops.

use std::fmt;

use crate::sync::atomic::{fence, AtomicUsize, Ordering};

const SCHEDULED: usize = 1 << 0;
const RUNNING: usize = 1 << 1;
const COMPLETE: usize = 1 << 2;
const HANDLE: usize = 1 << 3;
const JOIN_WAKER: usize = 1 << 4;
const CANCELLED: usize = 1 << 5;
const REGISTERED: usize = 1 << 6;
const REF_ONE: usize = 1 << 7;
const REF_MASK: usize = !(REF_ONE - 1);

/// A reference count this high means wakers leak by the billion; continuing would overflow
/// into the flag bits.
const MAX_REFS: usize = isize::MAX as usize;

/// What a new task starts with: queued once, a live handle, registered, and the three
/// references those stand for.
const INITIAL: usize = SCHEDULED | HANDLE | REGISTERED | (3 * REF_ONE);

/// One reading of the state word.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Snapshot(usize);

impl Snapshot {
    pub(crate) fn is_scheduled(self) -> bool {
        self.0 & SCHEDULED != 0
    }
    pub(crate) fn is_running(self) -> bool {
        self.0 & RUNNING != 0
    }
    pub(crate) fn is_complete(self) -> bool {
        self.0 & COMPLETE != 0
    }
    pub(crate) fn has_handle(self) -> bool {
        self.0 & HANDLE != 0
    }
    pub(crate) fn has_join_waker(self) -> bool {
        self.0 & JOIN_WAKER != 0
    }
    pub(crate) fn is_cancelled(self) -> bool {
        self.0 & CANCELLED != 0
    }
    pub(crate) fn is_registered(self) -> bool {
        self.0 & REGISTERED != 0
    }
    pub(crate) fn refs(self) -> usize {
        (self.0 & REF_MASK) / REF_ONE
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (SCHEDULED, "SCHEDULED"),
            (RUNNING, "RUNNING"),
            (COMPLETE, "COMPLETE"),
            (HANDLE, "HANDLE"),
            (JOIN_WAKER, "JOIN_WAKER"),
            (CANCELLED, "CANCELLED"),
            (REGISTERED, "REGISTERED"),
        ];
        let mut list = f.debug_list();
        for (bit, name) in names {
            if self.0 & bit != 0 {
                list.entry(&name);
            }
        }
        list.entry(&format_args!("refs={}", self.refs()));
        list.finish()
    }
}

/// What a wake asks of the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// The task was idle: it is `SCHEDULED` now and the caller must make a runnable of the
    /// reference it gave (`consume`) or that the transition added.
    Schedule,
    /// Already queued, or flagged for its runner to reschedule; a consumed reference was
    /// given up in the same step (never the last one: the runnable or runner holds another).
    Nothing,
    /// Complete: nothing to run. A consumed reference is still the caller's to drop.
    Complete,
}

/// What a runner does once a poll returned `Pending`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterPending {
    /// Woken while it ran: back to its queue with the runner's reference.
    Reschedule,
    /// Idle; the runner's reference is given up.
    Idle,
    /// Idle, and the runner's reference was the last: the caller frees the cell.
    Free,
}

/// The state word of one task cell.
pub(crate) struct State {
    word: AtomicUsize,
}

impl State {
    /// A new task's state (see `INITIAL`).
    pub(crate) fn new() -> State {
        State {
            word: AtomicUsize::new(INITIAL),
        }
    }

    /// Reads the word.
    pub(crate) fn load(&self) -> Snapshot {
        Snapshot(self.word.load(Ordering::Acquire))
    }

    /// A racy reading for dumps and statistics, which order nothing.
    pub(crate) fn peek(&self) -> Snapshot {
        Snapshot(self.word.load(Ordering::Relaxed))
    }

    /// Applies `f` atomically; returns the word before.
    fn update(&self, f: impl Fn(usize) -> usize) -> Snapshot {
        let mut current = self.word.load(Ordering::Acquire);
        loop {
            match self.word.compare_exchange_weak(
                current,
                f(current),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(old) => return Snapshot(old),
                Err(actual) => current = actual,
            }
        }
    }

    /// Like [`update`](Self::update), but `f` may decline (`None`): returns `Err` with the
    /// word it declined.
    fn try_update(&self, f: impl Fn(usize) -> Option<usize>) -> Result<Snapshot, Snapshot> {
        let mut current = self.word.load(Ordering::Acquire);
        loop {
            let Some(next) = f(current) else {
                return Err(Snapshot(current));
            };
            match self.word.compare_exchange_weak(
                current,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(old) => return Ok(Snapshot(old)),
                Err(actual) => current = actual,
            }
        }
    }

    // ----- references --------------------------------------------------------------------

    /// One more reference (a cloned waker, the registry's own). The caller holds one.
    pub(crate) fn ref_inc(&self) {
        let old = self.word.fetch_add(REF_ONE, Ordering::Relaxed);
        debug_assert!(Snapshot(old).refs() > 0, "ref_inc without a reference");
        if old > MAX_REFS {
            std::process::abort();
        }
    }

    /// Gives up one reference; true if it was the last (the caller then frees the cell, and
    /// everything done under the other references happens before that).
    pub(crate) fn ref_dec(&self) -> bool {
        let old = self.word.fetch_sub(REF_ONE, Ordering::Release);
        debug_assert!(Snapshot(old).refs() > 0, "ref_dec below zero: {old:?}");
        if Snapshot(old).refs() != 1 {
            return false;
        }
        // Pairs with every other reference's release above: their uses happen before the free.
        fence(Ordering::Acquire);
        true
    }

    // ----- the registry ------------------------------------------------------------------

    /// The registry unlinked the task (under its shard lock); its reference passes on.
    pub(crate) fn clear_registered(&self) {
        let old = self.word.fetch_and(!REGISTERED, Ordering::AcqRel);
        debug_assert!(Snapshot(old).is_registered(), "unregistered twice");
    }

    // ----- wake and run ------------------------------------------------------------------

    /// A waker fires. With `consume`, one reference of the caller is used up (see [`Wake`]).
    pub(crate) fn wake(&self, consume: bool) -> Wake {
        let result = self.try_update(|s| {
            if s & COMPLETE != 0 {
                return None;
            }
            let next = if s & SCHEDULED != 0 {
                // Already queued: a no-op store that still releases what the waking thread
                // wrote to the runner, whose acquire of the state comes later.
                s
            } else if s & RUNNING != 0 || consume {
                // Running: its runner reschedules it. Idle: our reference becomes the
                // runnable's.
                s | SCHEDULED
            } else {
                (s | SCHEDULED) + REF_ONE
            };
            Some(if consume && s & (SCHEDULED | RUNNING) != 0 {
                next - REF_ONE
            } else {
                next
            })
        });
        match result {
            Err(_) => Wake::Complete,
            Ok(old) => {
                if old.0 & (SCHEDULED | RUNNING) != 0 {
                    Wake::Nothing
                } else {
                    if !consume && old.0 > MAX_REFS {
                        std::process::abort();
                    }
                    Wake::Schedule
                }
            }
        }
    }

    /// A runnable is run: `SCHEDULED` becomes `RUNNING`. Returns the word before (the caller
    /// reads `CANCELLED` from it), or `Err` if the task is already complete (the caller then
    /// only gives up the runnable's reference).
    pub(crate) fn start_run(&self) -> Result<Snapshot, Snapshot> {
        let result = self.try_update(|s| {
            if s & COMPLETE != 0 {
                return None;
            }
            Some((s & !SCHEDULED) | RUNNING)
        });
        if let Ok(old) = result {
            debug_assert!(
                old.is_scheduled() && !old.is_running(),
                "run of a task that was not scheduled: {old:?}"
            );
        }
        result
    }

    /// A poll returned `Pending`.
    pub(crate) fn finish_pending(&self) -> AfterPending {
        let old = self.update(|s| {
            if s & SCHEDULED != 0 {
                s & !RUNNING
            } else {
                (s & !RUNNING) - REF_ONE
            }
        });
        debug_assert!(old.is_running(), "pending without a run: {old:?}");
        if old.is_scheduled() {
            AfterPending::Reschedule
        } else if old.refs() == 1 {
            // Ours was the last reference: the registry holds one while the future lives,
            // except after shutdown's `take` turned it into a waker, which may be dropped
            // while we poll. The update acquired every other reference's release.
            AfterPending::Free
        } else {
            AfterPending::Idle
        }
    }

    /// The future finished and its output is in the stage: `COMPLETE`. Returns the word
    /// before; the runner still holds its reference.
    pub(crate) fn complete(&self) -> Snapshot {
        let old = self.update(|s| (s & !(RUNNING | SCHEDULED)) | COMPLETE);
        debug_assert!(
            old.is_running() && !old.is_complete(),
            "completed twice or without a run: {old:?}"
        );
        old
    }

    /// After `complete` found `JOIN_WAKER` set and the runner woke the awaiter: the runner
    /// gives the slot up. Returns the word after: if `HANDLE` is clear there, the handle is
    /// gone and left the slot to the runner, which drops the waker; else the handle owns it.
    pub(crate) fn unset_join_waker_after_complete(&self) -> Snapshot {
        let old = self.word.fetch_and(!JOIN_WAKER, Ordering::AcqRel);
        debug_assert!(
            Snapshot(old).is_complete() && Snapshot(old).has_join_waker(),
            "join waker unset out of turn: {:?}",
            Snapshot(old)
        );
        Snapshot(old & !JOIN_WAKER)
    }

    /// The handle asks for cancellation. True unless the task had completed (then there is
    /// nothing to wake).
    pub(crate) fn cancel(&self) -> bool {
        let old = self.word.fetch_or(CANCELLED, Ordering::AcqRel);
        !Snapshot(old).is_complete()
    }

    // ----- the join side -----------------------------------------------------------------

    /// The handle stored its waker in the slot: hands the slot to the runner side. `Err` if
    /// the task completed meanwhile (the slot stays the handle's).
    pub(crate) fn set_join_waker(&self) -> Result<(), Snapshot> {
        self.try_update(|s| {
            if s & COMPLETE != 0 {
                return None;
            }
            debug_assert!(
                s & HANDLE != 0 && s & JOIN_WAKER == 0,
                "join waker set out of turn: {:?}",
                Snapshot(s)
            );
            Some(s | JOIN_WAKER)
        })
        .map(drop)
    }

    /// The handle takes the slot back to replace its waker. `Err` if the task completed
    /// meanwhile (the runner side owns the slot then, until it unsets the bit).
    pub(crate) fn unset_join_waker(&self) -> Result<(), Snapshot> {
        self.try_update(|s| {
            if s & COMPLETE != 0 {
                return None;
            }
            debug_assert!(
                s & HANDLE != 0 && s & JOIN_WAKER != 0,
                "join waker unset out of turn: {:?}",
                Snapshot(s)
            );
            Some(s & !JOIN_WAKER)
        })
        .map(drop)
    }

    /// The handle goes (dropped, or consumed by taking the output). Returns the word before;
    /// the handle still holds its reference.
    ///
    /// * Not complete: `HANDLE` and `JOIN_WAKER` are cleared together, so the slot is the
    ///   handle's to empty and `complete` will find nobody to hand the output to.
    /// * Complete: the output is the handle's to take or drop; the slot is the handle's
    ///   unless `JOIN_WAKER` is still set, in which case the runner will drop the waker when
    ///   it unsets the bit and finds `HANDLE` clear.
    pub(crate) fn drop_handle(&self) -> Snapshot {
        let old = self.update(|s| {
            if s & COMPLETE != 0 {
                s & !HANDLE
            } else {
                s & !(HANDLE | JOIN_WAKER)
            }
        });
        debug_assert!(old.has_handle(), "handle dropped twice: {old:?}");
        old
    }
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.peek().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference count starts above every flag and the initial state holds three.
    #[test]
    fn flags_sit_below_the_reference_count() {
        let flags = SCHEDULED | RUNNING | COMPLETE | HANDLE | JOIN_WAKER | CANCELLED | REGISTERED;
        assert_eq!(flags & REF_MASK, 0);
        assert_eq!(Snapshot(INITIAL).refs(), 3);
    }

    #[test]
    fn a_wake_while_running_reschedules_without_a_new_reference() {
        let s = State::new();
        s.start_run().unwrap();
        assert_eq!(s.wake(false), Wake::Nothing);
        assert_eq!(s.load().refs(), 3);
        assert_eq!(s.finish_pending(), AfterPending::Reschedule);
        assert!(s.load().is_scheduled());
    }

    #[test]
    fn a_wake_of_an_idle_task_schedules_it_once() {
        let s = State::new();
        s.start_run().unwrap();
        assert_eq!(s.finish_pending(), AfterPending::Idle);
        assert_eq!(s.load().refs(), 2);
        assert_eq!(s.wake(false), Wake::Schedule);
        assert_eq!(s.load().refs(), 3);
        assert_eq!(s.wake(false), Wake::Nothing);
        assert_eq!(s.load().refs(), 3);
    }

    #[test]
    fn a_completed_task_ignores_wakes() {
        let s = State::new();
        s.start_run().unwrap();
        let old = s.complete();
        assert!(old.has_handle());
        assert_eq!(s.wake(false), Wake::Complete);
        assert_eq!(s.wake(true), Wake::Complete);
        assert!(!s.cancel(), "nothing to cancel");
        assert!(s.start_run().is_err());
    }

    #[test]
    fn the_join_waker_cannot_be_set_once_complete() {
        let s = State::new();
        s.start_run().unwrap();
        s.complete();
        assert!(s.set_join_waker().is_err());
    }

    #[test]
    fn after_complete_the_runner_drops_the_waker_only_if_the_handle_is_gone() {
        let s = State::new();
        s.set_join_waker().unwrap();
        s.start_run().unwrap();
        assert!(s.complete().has_join_waker());
        assert!(s.unset_join_waker_after_complete().has_handle());

        let s = State::new();
        s.set_join_waker().unwrap();
        s.start_run().unwrap();
        s.complete();
        let before = s.drop_handle();
        assert!(before.has_join_waker(), "the slot is still the runner's");
        assert!(!s.unset_join_waker_after_complete().has_handle());
    }

    #[test]
    fn dropping_the_handle_before_completion_takes_the_slot_back() {
        let s = State::new();
        s.set_join_waker().unwrap();
        let old = s.drop_handle();
        assert!(!old.is_complete() && old.has_join_waker());
        let now = s.load();
        assert!(!now.has_handle() && !now.has_join_waker());
    }

    #[test]
    fn the_last_reference_is_reported_once() {
        let s = State::new();
        assert!(!s.ref_dec());
        assert!(!s.ref_dec());
        assert!(s.ref_dec());
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "run of a task that was not scheduled")]
    fn running_an_unscheduled_task_is_caught() {
        let s = State::new();
        s.start_run().unwrap();
        let _ = s.finish_pending();
        let _ = s.start_run();
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "handle dropped twice")]
    fn dropping_the_handle_twice_is_caught() {
        let s = State::new();
        s.drop_handle();
        s.drop_handle();
    }
}

/// Loom models of the transitions (`RUSTFLAGS="--cfg eddy_loom"`, run by `.ci/run`).
///
/// A model cell stands in for `raw`'s: the state word is the real [`State`]; the stage
/// (poll count, then output) and the awaiter slot are loom `UnsafeCell`s, so that two
/// threads touching either at once fail the model; what `raw` does with each transition's
/// answer is repeated here in a few lines per path. Every thread that gets
/// [`Wake::Schedule`] runs the task itself, so a second runnable would show up as two runs
/// at once (`start_run`'s assertion). Each model ends by checking that the output and the
/// awaiter's waker were dropped exactly once, the waker before the cell was freed, and that
/// the cell was freed once.
#[cfg(all(test, eddy_loom))]
mod loom_models {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::atomic::AtomicUsize;
    use loom::sync::{Arc, Condvar, Mutex};
    use loom::thread;

    /// Counts its drops; stands for the output, or for the awaiter's waker.
    struct Token(Arc<AtomicUsize>);

    impl Drop for Token {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    enum Stage {
        Running { polls: usize },
        Output(Option<Token>),
    }

    struct Cell {
        state: State,
        stage: UnsafeCell<Stage>,
        awaiter: UnsafeCell<Option<Token>>,
        /// Set when the awaiter's waker is woken (the model's waker is this flag).
        woken: Mutex<bool>,
        wake_cv: Condvar,
        output_drops: Arc<AtomicUsize>,
        waker_drops: Arc<AtomicUsize>,
        freed: AtomicUsize,
        /// When the future finishes (unless cancelled first).
        ready: Ready,
        /// The event the foreign waker announces, written `Relaxed`: only the state word's
        /// release (by the wake) and acquire (by the next run) make the poll see it.
        event: AtomicUsize,
    }

    #[derive(Clone, Copy, PartialEq)]
    enum Ready {
        AtFirstPoll,
        OnEvent,
        Never,
    }

    impl Cell {
        fn new(ready: Ready) -> Arc<Cell> {
            Arc::new(Cell {
                state: State::new(),
                stage: UnsafeCell::new(Stage::Running { polls: 0 }),
                awaiter: UnsafeCell::new(None),
                woken: Mutex::new(false),
                wake_cv: Condvar::new(),
                output_drops: Arc::new(AtomicUsize::new(0)),
                waker_drops: Arc::new(AtomicUsize::new(0)),
                freed: AtomicUsize::new(0),
                ready,
                event: AtomicUsize::new(0),
            })
        }

        fn drop_ref(&self) {
            if self.state.ref_dec() {
                self.free();
            }
        }

        fn free(&self) {
            assert_eq!(self.freed.fetch_add(1, Ordering::SeqCst), 0, "freed twice");
            // As `cell`'s dealloc: whatever is left in the awaiter slot goes now.
            // SAFETY: the last reference is gone; nobody else reaches the slot.
            self.awaiter.with_mut(|a| drop(unsafe { (*a).take() }));
        }

        /// `raw::run` for one runnable (the caller hands over its reference).
        fn run(&self) {
            loop {
                let Ok(before) = self.state.start_run() else {
                    self.drop_ref();
                    return;
                };
                let finished = self.stage.with_mut(|stage| {
                    // SAFETY: `RUNNING` is ours: nobody else touches the stage.
                    let stage = unsafe { &mut *stage };
                    let Stage::Running { polls } = stage else {
                        panic!("polled after completion")
                    };
                    *polls += 1;
                    let done = before.is_cancelled()
                        || match self.ready {
                            Ready::AtFirstPoll => true,
                            Ready::OnEvent => self.event.load(Ordering::Relaxed) == 1,
                            Ready::Never => false,
                        };
                    if done {
                        *stage = Stage::Output(Some(Token(self.output_drops.clone())));
                    }
                    done
                });
                if finished {
                    self.complete();
                    return;
                }
                match self.state.finish_pending() {
                    AfterPending::Reschedule => continue,
                    AfterPending::Idle => return,
                    AfterPending::Free => return self.free(),
                }
            }
        }

        /// `raw::complete`.
        fn complete(&self) {
            let old = self.state.complete();
            if !old.has_handle() {
                self.take_output();
            } else if old.has_join_waker() {
                self.awaiter.with(|a| {
                    // SAFETY: read-only while `JOIN_WAKER` is set.
                    assert!(unsafe { (*a).is_some() }, "JOIN_WAKER without a waker");
                });
                *self.woken.lock().unwrap() = true;
                self.wake_cv.notify_all();
                if !self.state.unset_join_waker_after_complete().has_handle() {
                    // SAFETY: the handle left the slot to us.
                    self.awaiter.with_mut(|a| drop(unsafe { (*a).take() }));
                }
            }
            self.drop_ref();
        }

        fn take_output(&self) {
            self.stage.with_mut(|stage| {
                // SAFETY: whoever calls this owns the output (see `HANDLE`).
                match unsafe { &mut *stage } {
                    Stage::Output(out) => drop(out.take().expect("output taken twice")),
                    Stage::Running { .. } => panic!("output taken before completion"),
                }
            });
        }

        /// `JoinHandle::poll_join` with a fresh waker; true once complete.
        fn poll_join(&self) -> bool {
            let state = self.state.load();
            if state.is_complete() {
                return true;
            }
            if state.has_join_waker() {
                // The model's waker never `will_wake` a new one: always replace it.
                if self.state.unset_join_waker().is_err() {
                    return true;
                }
            }
            let token = Token(self.waker_drops.clone());
            // SAFETY: `JOIN_WAKER` is clear: the slot is the handle's.
            let previous = self.awaiter.with_mut(|a| unsafe { (*a).replace(token) });
            let handed = self.state.set_join_waker();
            drop(previous);
            handed.is_err()
        }

        /// Awaits the task as `block_on` would: polls, sleeps until the waker is woken,
        /// polls again. A lost wake-up leaves this thread asleep: loom reports a deadlock.
        fn join(&self) {
            if !self.poll_join() {
                let mut woken = self.woken.lock().unwrap();
                while !*woken {
                    woken = self.wake_cv.wait(woken).unwrap();
                }
                drop(woken);
                assert!(self.poll_join(), "woken before completion");
            }
            self.release_after_output();
        }

        /// What `JoinHandle::into_output` does once `poll_join` saw completion: drop the
        /// handle, take the output, release the awaiter slot and the reference.
        fn release_after_output(&self) {
            let old = self.state.drop_handle();
            self.take_output();
            if !old.has_join_waker() {
                // SAFETY: the runner is done with the slot.
                self.awaiter.with_mut(|a| drop(unsafe { (*a).take() }));
            }
            self.drop_ref();
        }

        /// `JoinHandle::drop` (detach).
        fn drop_handle(&self) {
            let old = self.state.drop_handle();
            if old.is_complete() {
                self.take_output();
            }
            if !old.is_complete() || !old.has_join_waker() {
                // SAFETY: the slot is ours (see `State::drop_handle`).
                self.awaiter.with_mut(|a| drop(unsafe { (*a).take() }));
            }
            self.drop_ref();
        }

        /// A waker fires (`raw::wake`).
        fn wake(&self, consume: bool) {
            match self.state.wake(consume) {
                Wake::Schedule => self.run(),
                Wake::Nothing => {}
                Wake::Complete if consume => self.drop_ref(),
                Wake::Complete => {}
            }
        }

        /// Once every thread is done and only the registry's reference is left: the output
        /// and the awaiter went exactly once each, and the cell is still there.
        fn check_before_registry_lets_go(&self, waker_tokens_made: bool) {
            assert_eq!(
                self.output_drops.load(Ordering::SeqCst),
                1,
                "output not dropped once"
            );
            self.awaiter.with(|a| {
                // SAFETY: every other thread has finished.
                let empty = unsafe { (*a).is_none() };
                assert!(empty, "a completed task kept its awaiter");
            });
            if !waker_tokens_made {
                assert_eq!(self.waker_drops.load(Ordering::SeqCst), 0);
            }
            assert_eq!(self.freed.load(Ordering::SeqCst), 0);
            assert_eq!(self.state.load().refs(), 1);
        }
    }

    /// The runner polls (the future finishes once it sees an event), a foreign thread
    /// records the event and wakes the task (consuming its waker's reference) at any moment,
    /// and the handle awaits the output from a third thread. The wake is never lost, even
    /// when it finds the task already queued or running.
    #[test]
    fn run_wake_and_join_race() {
        crate::sync::model("task: run wake and join race", || {
            let cell = Cell::new(Ready::OnEvent);
            cell.state.ref_inc(); // the foreign waker's
            let waker = {
                let cell = cell.clone();
                thread::spawn(move || {
                    cell.event.store(1, Ordering::Relaxed);
                    cell.wake(true)
                })
            };
            let joiner = {
                let cell = cell.clone();
                thread::spawn(move || cell.join())
            };
            cell.run();
            waker.join().unwrap();
            joiner.join().unwrap();
            cell.check_before_registry_lets_go(true);
            cell.drop_ref();
            assert_eq!(cell.freed.load(Ordering::SeqCst), 1);
        });
    }

    /// The handle registers a waker and then detaches while the task completes.
    #[test]
    fn complete_races_a_handle_that_detaches() {
        crate::sync::model("task: complete races a handle that detaches", || {
            let cell = Cell::new(Ready::AtFirstPoll);
            let joiner = {
                let cell = cell.clone();
                thread::spawn(move || {
                    cell.poll_join();
                    cell.drop_handle();
                })
            };
            cell.run();
            joiner.join().unwrap();
            cell.check_before_registry_lets_go(true);
            cell.drop_ref();
            assert_eq!(cell.freed.load(Ordering::SeqCst), 1);
        });
    }

    /// The handle cancels (waking the task without consuming a reference) while the task's
    /// first poll may be running; then it awaits the output.
    #[test]
    fn cancel_races_the_first_poll() {
        crate::sync::model("task: cancel races the first poll", || {
            // Never finishes on its own: only the cancellation ends it.
            let cell = Cell::new(Ready::Never);
            let canceller = {
                let cell = cell.clone();
                thread::spawn(move || {
                    if cell.state.cancel() {
                        cell.wake(false);
                    }
                    cell.join();
                })
            };
            cell.run();
            canceller.join().unwrap();
            cell.check_before_registry_lets_go(true);
            cell.drop_ref();
            assert_eq!(cell.freed.load(Ordering::SeqCst), 1);
        });
    }
}
