//! Per-worker timer heaps: asyncio's `_scheduled` list, one per worker.
//!
//! Each worker owns one [`TimerQueue`]: a binary heap of entries ordered by deadline, ties
//! broken by scheduling order (a sequence number), behind a `parking_lot::Mutex`. The owner
//! locks it twice per `_run_once` cycle (tidy, then move due timers); that lock is uncontended
//! in the common case and costs a CAS. The mutex exists for two other callers:
//!
//! * threads that are not this worker scheduling a timer onto it (`RuntimeHandle::call_later`,
//!   a `sleep` polled inside `block_on`);
//! * sibling workers *rescuing* the due timers of a worker stuck in a long callback (Go runs
//!   another P's expired timers the same way). A sibling only takes entries whose deadline
//!   has passed, in deadline order, so "timers fire in deadline order" still holds per heap.
//!
//! The earliest deadline is published in [`TimerQueue::next_deadline`] (nanoseconds since the
//! runtime's epoch; [`TimerQueue::next_deadline_nanos`] reads it) so that siblings can see a late heap without taking
//! its lock.
//!
//! Cancelled entries stay in the heap (removing from the middle of a binary heap is O(n)). The
//! queue counts them, and [`TimerQueue::tidy`] applies asyncio's rule in phase 1: when more
//! than [`MIN_SCHEDULED_FOR_REBUILD`] entries are scheduled and more than half are cancelled,
//! rebuild the heap without them; otherwise pop cancelled entries off the top.

mod entry;

use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicIsize, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use entry::TimerEntry;
pub(crate) use entry::{SleepCell, TimerAction};

/// asyncio's `_MIN_SCHEDULED_TIMER_HANDLES`.
const MIN_SCHEDULED_FOR_REBUILD: usize = 100;

/// Below this many entries of capacity a heap is never shrunk: small heaps cost little, and
/// shrinking them would only make the next burst grow them again.
const SHRINK_ABOVE: usize = 1024;

/// The capacity a heap of `len` entries in `capacity` slots gives back to, if any: once a
/// burst has passed and the heap is less than a quarter full, it shrinks to twice its length
/// (a `Vec` never shrinks by itself, so a server would otherwise hold its busiest moment's
/// heap for ever; the factor of two leaves room so that ordinary churn does not regrow it).
fn shrunk_capacity(len: usize, capacity: usize) -> Option<usize> {
    (capacity > SHRINK_ABOVE && len < capacity / 4).then(|| (len * 2).max(SHRINK_ABOVE))
}

/// Applies [`shrunk_capacity`] to a scratch buffer of due timers, which a worker keeps from
/// cycle to cycle: a burst of due timers (a worker back from a long stall) must not pin its
/// size for ever.
pub(crate) fn shrink_after_burst<T>(buffer: &mut Vec<T>) {
    if let Some(capacity) = shrunk_capacity(buffer.len(), buffer.capacity()) {
        buffer.shrink_to(capacity);
    }
}

/// How far in the future a "never" deadline lies: `Duration::MAX` delays are clamped to this,
/// which keeps every deadline representable as an `Instant` and as `u64` nanoseconds.
const FAR_FUTURE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Deadline for a delay from `now`, clamped so that huge delays never overflow.
pub(crate) fn deadline_from(now: Instant, delay: Duration) -> Instant {
    now.checked_add(delay.min(FAR_FUTURE))
        .unwrap_or(now + Duration::from_secs(365 * 24 * 3600))
}

/// `TimerQueue::next_deadline` of an empty heap: `nanos` never returns it.
const NO_DEADLINE: u64 = u64::MAX;

/// One worker's timer heap plus the counters siblings may read without the lock.
#[derive(Debug)]
pub(crate) struct TimerQueue {
    heap: Mutex<TimerHeap>,
    /// Earliest deadline in the heap as nanoseconds since `epoch`; [`NO_DEADLINE`] when
    /// empty (read through `next_deadline_nanos`).
    next_deadline: AtomicU64,
    /// Entries cancelled but still in the heap (approximately: a handle may count a cancel
    /// of an entry that already left the heap; `tidy` resets it when it rebuilds).
    cancelled: AtomicIsize,
    /// Cancels counted over the heap's life (metrics).
    cancelled_total: AtomicU64,
    /// How many times `tidy` rebuilt the heap (asyncio's rule); observed by tests and metrics.
    rebuilds: AtomicUsize,
    epoch: Instant,
}

#[derive(Debug, Default)]
struct TimerHeap {
    entries: BinaryHeap<TimerEntry>,
    next_seq: u64,
}

impl TimerQueue {
    pub(crate) fn new(epoch: Instant) -> Self {
        TimerQueue {
            heap: Mutex::new(TimerHeap::default()),
            next_deadline: AtomicU64::new(NO_DEADLINE),
            cancelled: AtomicIsize::new(0),
            rebuilds: AtomicUsize::new(0),
            cancelled_total: AtomicU64::new(0),
            epoch,
        }
    }

    /// Converts an instant to the nanosecond scale of `next_deadline`.
    pub(crate) fn nanos(&self, t: Instant) -> u64 {
        let n = t.saturating_duration_since(self.epoch).as_nanos();
        u64::try_from(n).unwrap_or(NO_DEADLINE - 1)
    }

    /// Schedules `action` at `when`. Returns true when it became the earliest entry, so that
    /// the caller can wake whoever sleeps on this heap.
    pub(crate) fn push(&self, when: Instant, action: TimerAction) -> bool {
        let mut heap = self.heap.lock();
        let seq = heap.next_seq;
        heap.next_seq += 1;
        heap.entries.push(TimerEntry { when, seq, action });
        let earliest = heap.entries.peek().is_some_and(|e| e.seq == seq);
        if earliest {
            self.next_deadline
                .store(self.nanos(when), Ordering::Release);
        }
        earliest
    }

    /// The instant at `nanos` on this heap's scale.
    pub(crate) fn instant_of(&self, nanos: u64) -> Instant {
        self.epoch + Duration::from_nanos(nanos)
    }

    /// The earliest deadline, without taking the lock; `None` when the heap is empty.
    pub(crate) fn next_deadline_nanos(&self) -> Option<u64> {
        let nanos = self.next_deadline.load(Ordering::Acquire);
        (nanos != NO_DEADLINE).then_some(nanos)
    }

    /// Counts one more cancelled entry (called by the handle that cancelled it).
    pub(crate) fn note_cancelled(&self) {
        self.cancelled.fetch_add(1, Ordering::Relaxed);
        self.cancelled_total.fetch_add(1, Ordering::Relaxed);
    }

    /// Cancels counted over the heap's life.
    pub(crate) fn cancelled_total(&self) -> u64 {
        self.cancelled_total.load(Ordering::Relaxed)
    }

    /// Phase 1 of `_run_once`: asyncio's heap tidy rule. Returns the earliest deadline left.
    pub(crate) fn tidy(&self) -> Option<Instant> {
        let mut heap = self.heap.lock();
        let len = heap.entries.len();
        if len == 0 {
            return None;
        }
        let cancelled = self.cancelled.load(Ordering::Relaxed).max(0) as usize;
        if len > MIN_SCHEDULED_FOR_REBUILD && cancelled * 2 > len {
            let kept: Vec<TimerEntry> = std::mem::take(&mut heap.entries)
                .into_vec()
                .into_iter()
                .filter(|e| !e.action.is_cancelled())
                .collect();
            heap.entries = BinaryHeap::from(kept);
            // No cancelled entry is left: the count is exactly zero again. Resetting (rather
            // than subtracting) also heals the count from cancels of timers that had already
            // left the heap (a due timer cancelled before it ran is counted by its handle
            // but never found here), so such a drift costs at most one rebuild.
            self.cancelled.store(0, Ordering::Relaxed);
            self.rebuilds.fetch_add(1, Ordering::Relaxed);
        } else {
            while heap.entries.peek().is_some_and(|e| e.action.is_cancelled()) {
                heap.entries.pop();
                Self::uncount(&self.cancelled);
            }
        }
        if let Some(capacity) = shrunk_capacity(heap.entries.len(), heap.entries.capacity()) {
            heap.entries.shrink_to(capacity);
        }
        self.publish(&heap)
    }

    /// Phase 3 of `_run_once`: moves every entry due at `now` into `out`, in deadline order.
    /// Cancelled entries met on the way are discarded. Returns the earliest deadline left.
    pub(crate) fn take_due(&self, now: Instant, out: &mut Vec<TimerAction>) -> Option<Instant> {
        let mut heap = self.heap.lock();
        Self::drain_due(&mut heap, now, out, &self.cancelled);
        self.publish(&heap)
    }

    /// Like [`take_due`](Self::take_due), for a sibling: gives up at once if the owner holds
    /// the lock (the owner is then alive and will fire them itself).
    pub(crate) fn try_take_due(&self, now: Instant, out: &mut Vec<TimerAction>) -> bool {
        let Some(mut heap) = self.heap.try_lock() else {
            return false;
        };
        Self::drain_due(&mut heap, now, out, &self.cancelled);
        self.publish(&heap);
        true
    }

    fn drain_due(heap: &mut TimerHeap, now: Instant, out: &mut Vec<TimerAction>, c: &AtomicIsize) {
        while heap.entries.peek().is_some_and(|e| e.when <= now) {
            let entry = heap.entries.pop().expect("peeked");
            if entry.action.is_cancelled() {
                Self::uncount(c);
            } else {
                out.push(entry.action);
            }
        }
    }

    /// One cancelled entry left the heap. Saturates at zero: the count is a heuristic for the
    /// tidy rule and must not go negative through races with `note_cancelled`.
    fn uncount(c: &AtomicIsize) {
        let _ = c.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
            Some((v - 1).max(0))
        });
    }

    fn publish(&self, heap: &TimerHeap) -> Option<Instant> {
        let next = heap.entries.peek().map(|e| e.when);
        let nanos = next.map_or(NO_DEADLINE, |t| self.nanos(t));
        self.next_deadline.store(nanos, Ordering::Release);
        next
    }

    /// Takes every entry out (shutdown). The caller drops them outside the lock.
    pub(crate) fn drain_all(&self) -> Vec<TimerAction> {
        let mut heap = self.heap.lock();
        let entries = std::mem::take(&mut heap.entries);
        self.next_deadline.store(NO_DEADLINE, Ordering::Release);
        self.cancelled.store(0, Ordering::Relaxed);
        entries.into_vec().into_iter().map(|e| e.action).collect()
    }

    /// Number of entries in the heap, cancelled ones included.
    pub(crate) fn len(&self) -> usize {
        self.heap.lock().entries.len()
    }

    /// Cancelled entries still in the heap.
    pub(crate) fn cancelled_count(&self) -> usize {
        self.cancelled.load(Ordering::Relaxed).max(0) as usize
    }

    /// Times the heap was rebuilt by the tidy rule.
    pub(crate) fn rebuilds(&self) -> usize {
        self.rebuilds.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callback::Callback;
    use std::panic::Location;
    use std::sync::Arc;
    use std::sync::Mutex as StdMutex;

    fn cb(log: &Arc<StdMutex<Vec<u32>>>, v: u32) -> Callback {
        let log = log.clone();
        Callback::new(move || log.lock().unwrap().push(v), Location::caller())
    }

    fn fire(actions: Vec<TimerAction>) {
        for a in actions {
            match a {
                TimerAction::Callback(c) => c.run(),
                TimerAction::Wake(w) => w.fire(),
            }
        }
    }

    #[test]
    fn due_in_deadline_order_ties_in_scheduling_order() {
        let epoch = Instant::now();
        let q = TimerQueue::new(epoch);
        let log = Arc::new(StdMutex::new(Vec::new()));
        let t = epoch + Duration::from_millis(10);
        q.push(
            t + Duration::from_millis(5),
            TimerAction::Callback(cb(&log, 3)),
        );
        q.push(t, TimerAction::Callback(cb(&log, 1)));
        q.push(t, TimerAction::Callback(cb(&log, 2)));
        q.push(
            t + Duration::from_secs(60),
            TimerAction::Callback(cb(&log, 9)),
        );
        let mut out = Vec::new();
        let next = q.take_due(t + Duration::from_millis(5), &mut out);
        fire(out);
        assert_eq!(*log.lock().unwrap(), vec![1, 2, 3]);
        assert_eq!(next, Some(t + Duration::from_secs(60)));
        assert_eq!(
            q.next_deadline_nanos(),
            Some(q.nanos(t + Duration::from_secs(60)))
        );
    }

    #[test]
    fn push_reports_new_earliest() {
        let epoch = Instant::now();
        let q = TimerQueue::new(epoch);
        let log = Arc::new(StdMutex::new(Vec::new()));
        assert!(q.push(
            epoch + Duration::from_secs(5),
            TimerAction::Callback(cb(&log, 1))
        ));
        assert!(!q.push(
            epoch + Duration::from_secs(6),
            TimerAction::Callback(cb(&log, 2))
        ));
        assert!(q.push(
            epoch + Duration::from_secs(1),
            TimerAction::Callback(cb(&log, 3))
        ));
    }

    fn schedule_many(q: &TimerQueue, n: usize) -> Vec<Callback> {
        let log = Arc::new(StdMutex::new(Vec::new()));
        (0..n)
            .map(|i| {
                let c = cb(&log, i as u32);
                let when = q.epoch + Duration::from_secs(10 + i as u64);
                q.push(when, TimerAction::Callback(c.clone()));
                c
            })
            .collect()
    }

    fn cancel(q: &TimerQueue, c: &Callback) {
        if c.cancel() {
            q.note_cancelled();
        }
    }

    #[test]
    fn tidy_rebuilds_when_over_100_and_over_half_cancelled() {
        let q = TimerQueue::new(Instant::now());
        let cells = schedule_many(&q, 200);
        // Cancel 101 entries from the back: none at the top of the heap.
        for c in cells.iter().skip(99) {
            cancel(&q, c);
        }
        assert_eq!(q.cancelled_count(), 101);
        q.tidy();
        assert_eq!(q.rebuilds(), 1);
        assert_eq!(q.len(), 99);
        assert_eq!(q.cancelled_count(), 0);
    }

    #[test]
    fn tidy_only_pops_the_top_when_half_or_less_is_cancelled() {
        let q = TimerQueue::new(Instant::now());
        let cells = schedule_many(&q, 200);
        // Exactly half cancelled: 0..50 (the top) and 150..200 (the bottom).
        for c in cells.iter().take(50).chain(cells.iter().skip(150)) {
            cancel(&q, c);
        }
        q.tidy();
        assert_eq!(q.rebuilds(), 0);
        assert_eq!(
            q.len(),
            150,
            "the 50 cancelled entries at the top are popped"
        );
        assert_eq!(q.cancelled_count(), 50);
    }

    #[test]
    fn a_heap_gives_back_capacity_only_when_large_and_mostly_empty() {
        assert_eq!(shrunk_capacity(0, SHRINK_ABOVE), None, "small: kept");
        assert_eq!(
            shrunk_capacity(1024, 4096),
            None,
            "a quarter full or more: kept"
        );
        assert_eq!(shrunk_capacity(1023, 4096), Some(2046));
        assert_eq!(
            shrunk_capacity(10, 1 << 16),
            Some(SHRINK_ABOVE),
            "never below the floor"
        );
        // After shrinking, the same length does not shrink again.
        let after = shrunk_capacity(1023, 4096).unwrap();
        assert_eq!(shrunk_capacity(1023, after), None);
    }

    #[test]
    fn a_scratch_buffer_gives_back_a_burst() {
        let mut due: Vec<u64> = Vec::with_capacity(50_000);
        shrink_after_burst(&mut due);
        assert!(due.capacity() <= 2 * SHRINK_ABOVE, "{}", due.capacity());
        let mut small: Vec<u64> = Vec::with_capacity(SHRINK_ABOVE);
        shrink_after_burst(&mut small);
        assert_eq!(
            small.capacity(),
            SHRINK_ABOVE,
            "a small buffer is kept as it is"
        );
    }

    #[test]
    fn tidy_shrinks_a_heap_after_a_burst() {
        let q = TimerQueue::new(Instant::now());
        let cells = schedule_many(&q, 10_000);
        let burst_capacity = q.heap.lock().entries.capacity();
        // All but 100 cancelled: the rebuild leaves 100 entries in the burst's allocation.
        for c in cells.iter().skip(100) {
            cancel(&q, c);
        }
        q.tidy();
        assert_eq!(q.len(), 100);
        let capacity = q.heap.lock().entries.capacity();
        assert!(
            capacity < burst_capacity && capacity <= SHRINK_ABOVE * 2,
            "capacity {capacity} after the burst ({burst_capacity} during it)"
        );
    }

    #[test]
    fn tidy_never_rebuilds_small_heaps() {
        let q = TimerQueue::new(Instant::now());
        let cells = schedule_many(&q, 100);
        for c in cells.iter().skip(1) {
            cancel(&q, c);
        }
        q.tidy();
        assert_eq!(q.rebuilds(), 0);
        assert_eq!(q.len(), 100);
    }

    #[test]
    fn huge_delays_do_not_overflow() {
        let d = deadline_from(Instant::now(), Duration::MAX);
        assert!(d > Instant::now() + Duration::from_secs(3600 * 24 * 365));
        let q = TimerQueue::new(Instant::now());
        assert!(q.nanos(d) < NO_DEADLINE);
    }

    #[test]
    fn try_take_due_backs_off_while_owner_holds_the_lock() {
        let q = TimerQueue::new(Instant::now());
        let log = Arc::new(StdMutex::new(Vec::new()));
        q.push(Instant::now(), TimerAction::Callback(cb(&log, 1)));
        let guard = q.heap.lock();
        let mut out = Vec::new();
        assert!(!q.try_take_due(Instant::now(), &mut out));
        drop(guard);
        assert!(q.try_take_due(Instant::now(), &mut out));
        assert_eq!(out.len(), 1);
    }
}
