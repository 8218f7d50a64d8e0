//! The registry of tasks that went pending: how shutdown and `cancel` reach idle tasks.
//!
//! An idle task is referenced only by the wakers that the things it awaits hold. If nobody
//! holds one (a `pending()` future, a channel nobody will send on), nothing could ever poll or
//! drop it again. The registry keeps one waker clone per idle-capable task, so that:
//!
//! * [`Task::cancel`](crate::Task::cancel) can wake an idle task to make it notice;
//! * shutdown can wake every remaining task once, and the task cell, seeing the runtime
//!   closed, drops the future (destructors run; nothing leaks).
//!
//! A task registers the first time its future returns `Pending` and unregisters when the
//! future completes or is dropped, so tasks that finish in their first poll never touch it.
//! The registry is sharded by task id to keep the locks uncontended.

use std::panic::Location;
use std::task::Waker;

use parking_lot::Mutex;
use slab::Slab;

use crate::task::TaskId;

/// `slot` value of a task that is not registered.
pub(crate) const UNREGISTERED: u64 = u64::MAX;

const SHARD_BITS: u32 = 6;
const SHARDS: usize = 1 << SHARD_BITS;

#[derive(Debug)]
struct Entry {
    id: TaskId,
    waker: Waker,
    owner: Option<u32>,
    location: &'static Location<'static>,
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

    fn split(slot: u64) -> (usize, usize) {
        (
            (slot as usize) & (SHARDS - 1),
            (slot >> SHARD_BITS) as usize,
        )
    }

    /// Registers a task's waker; returns its slot.
    pub(crate) fn register(
        &self,
        id: TaskId,
        waker: &Waker,
        owner: Option<u32>,
        location: &'static Location<'static>,
    ) -> u64 {
        let shard = (id.as_u64() as usize) & (SHARDS - 1);
        let key = self.shards[shard].lock().insert(Entry {
            id,
            waker: waker.clone(),
            owner,
            location,
        });
        ((key as u64) << SHARD_BITS) | shard as u64
    }

    /// Removes a task's entry, if it is still there.
    pub(crate) fn unregister(&self, slot: u64, id: TaskId) {
        let (shard, key) = Self::split(slot);
        let removed = {
            let mut s = self.shards[shard].lock();
            match s.get(key) {
                Some(e) if e.id == id => Some(s.remove(key)),
                _ => None,
            }
        };
        // The waker is dropped here, outside the lock.
        drop(removed);
    }

    /// Wakes a registered task (used by `cancel`).
    pub(crate) fn wake(&self, slot: u64, id: TaskId) {
        let (shard, key) = Self::split(slot);
        let waker = match self.shards[shard].lock().get(key) {
            Some(e) if e.id == id => Some(e.waker.clone()),
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
                .filter(|(_, e)| e.owner == owner)
                .map(|(k, _)| k)
                .collect();
            out.extend(keys.into_iter().map(|k| s.remove(k).waker));
        }
        out
    }

    /// A clone of every registered waker (to wake them all outside the locks).
    pub(crate) fn wakers(&self) -> Vec<Waker> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            out.extend(shard.lock().iter().map(|(_, e)| e.waker.clone()));
        }
        out
    }

    /// Id and spawn location of every registered task.
    pub(crate) fn tasks(&self) -> Vec<(TaskId, &'static Location<'static>)> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            out.extend(shard.lock().iter().map(|(_, e)| (e.id, e.location)));
        }
        out
    }

    /// Number of registered tasks.
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }
}
