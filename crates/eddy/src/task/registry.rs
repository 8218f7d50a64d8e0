//! The registry of live tasks: how `cancel`, shutdown, `eddy::run` and task dumps reach
//! every task, idle or not.
//!
//! An idle task is referenced only by the wakers that the things it awaits hold. If nobody
//! holds one (a `pending()` future, a channel nobody will send on), nothing could ever poll or
//! drop it again. So every task is registered when it is spawned, with one waker clone
//! (which keeps its allocation alive) and a pointer to its [`TaskMeta`]; it leaves the
//! registry when its future completes or is dropped. That gives:
//!
//! * [`Task::cancel`](crate::Task::cancel) a way to wake an idle task so that it notices;
//! * shutdown and `eddy::run` a way to wake every remaining task once, so that its cell,
//!   seeing the runtime stopping, drops the future (destructors run; nothing leaks);
//! * [`Runtime::dump_tasks`](crate::Runtime::dump_tasks) every live task with its state.
//!
//! The registry is sharded by task id so that spawns and completions on different workers
//! rarely meet on one lock.

use std::ptr::NonNull;
use std::task::Waker;

use parking_lot::Mutex;
use slab::Slab;

use crate::task::dump::TaskInfo;
use crate::task::{TaskId, TaskMeta};

/// `slot` value of a task that is not registered.
pub(crate) const UNREGISTERED: u32 = u32::MAX;

const SHARD_BITS: u32 = 6;
const SHARDS: usize = 1 << SHARD_BITS;

#[derive(Debug)]
struct Entry {
    /// Keeps the task's allocation, and so `meta`, alive while the entry exists.
    waker: Waker,
    meta: MetaPtr,
}

/// A pointer to the `TaskMeta` inside a task allocation that the same entry's waker keeps
/// alive.
#[derive(Debug)]
struct MetaPtr(NonNull<TaskMeta>);

// SAFETY: the pointee is a `TaskMeta`, which is `Sync`; the pointer is only dereferenced to
// `&TaskMeta` (never `&mut`), from whichever thread holds the shard lock, while the entry's
// waker keeps the allocation alive. Sending the pointer between threads is therefore no
// different from sending a `&TaskMeta`.
unsafe impl Send for MetaPtr {}

impl Entry {
    fn meta(&self) -> &TaskMeta {
        // `self.waker` is a reference to the task that owns the `TaskMeta`: while the entry
        // exists the task allocation (header and metadata included) is not freed.
        // SAFETY: so the pointer is valid, and `TaskMeta` is only ever shared immutably.
        unsafe { self.meta.0.as_ref() }
    }
}

#[derive(Debug)]
pub(crate) struct TaskRegistry {
    shards: Box<[Mutex<Slab<Entry>>]>,
}

impl TaskRegistry {
    pub(crate) fn new() -> Self {
        TaskRegistry {
            shards: (0..SHARDS).map(|_| Mutex::new(Slab::new())).collect(),
        }
    }

    fn split(slot: u32) -> (usize, usize) {
        (
            (slot as usize) & (SHARDS - 1),
            (slot >> SHARD_BITS) as usize,
        )
    }

    /// Registers a freshly spawned task; returns its slot.
    pub(crate) fn register(&self, meta: &TaskMeta, waker: Waker) -> u32 {
        let shard = (meta.id.as_u64() as usize) & (SHARDS - 1);
        let key = self.shards[shard].lock().insert(Entry {
            waker,
            meta: MetaPtr(NonNull::from(meta)),
        });
        // 26 bits of key per shard: 64 Mi live tasks per shard before the slot overflows.
        assert!(key < (1 << (32 - SHARD_BITS)) - 1, "too many live tasks");
        ((key as u32) << SHARD_BITS) | shard as u32
    }

    /// Removes a task's entry, if it is still there.
    pub(crate) fn unregister(&self, slot: u32, id: TaskId) {
        let (shard, key) = Self::split(slot);
        let removed = {
            let mut s = self.shards[shard].lock();
            match s.get(key) {
                Some(e) if e.meta().id == id => Some(s.remove(key)),
                _ => None,
            }
        };
        // The waker (possibly the last reference to the task) is dropped outside the lock.
        drop(removed);
    }

    /// Wakes a registered task (used by `cancel`).
    pub(crate) fn wake(&self, slot: u32, id: TaskId) {
        let (shard, key) = Self::split(slot);
        let waker = match self.shards[shard].lock().get(key) {
            Some(e) if e.meta().id == id => Some(e.waker.clone()),
            _ => None,
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Takes out the entries of the given owner (`None`: stealable tasks) and returns their
    /// wakers, for shutdown. The caller wakes them outside every lock.
    pub(crate) fn take(&self, owner: Option<u32>) -> Vec<Waker> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            let mut s = shard.lock();
            let keys: Vec<usize> = s
                .iter()
                .filter(|(_, e)| e.meta().owner() == owner)
                .map(|(k, _)| k)
                .collect();
            out.extend(keys.into_iter().map(|k| s.remove(k).waker));
        }
        out
    }

    /// A clone of the waker of every registered task of `owner` (`None`: stealable tasks).
    pub(crate) fn wakers_of(&self, owner: Option<u32>) -> Vec<Waker> {
        self.wakers_where(|meta| meta.owner() == owner)
    }

    /// Number of registered tasks of `owner`.
    pub(crate) fn count_of(&self, owner: Option<u32>) -> usize {
        self.shards
            .iter()
            .map(|s| {
                s.lock()
                    .iter()
                    .filter(|(_, e)| e.meta().owner() == owner)
                    .count()
            })
            .sum()
    }

    /// A clone of every registered waker (to wake them all outside the locks).
    pub(crate) fn wakers(&self) -> Vec<Waker> {
        self.wakers_where(|_| true)
    }

    fn wakers_where(&self, pick: impl Fn(&TaskMeta) -> bool) -> Vec<Waker> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            let s = shard.lock();
            out.extend(
                s.iter()
                    .filter(|(_, e)| pick(e.meta()))
                    .map(|(_, e)| e.waker.clone()),
            );
        }
        out
    }

    /// A description of every live task. Each shard is locked only while it is read.
    pub(crate) fn dump(&self) -> Vec<TaskInfo> {
        let now = crate::task::coarse_now();
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            out.extend(shard.lock().iter().map(|(_, e)| e.meta().info(now)));
        }
        out.sort_by_key(|t| t.id);
        out
    }

    /// Number of live tasks.
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }
}
