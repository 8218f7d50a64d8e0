//! The registry of live tasks: how `cancel`, shutdown, `eddy::run` and task dumps reach
//! every task, idle or not.
//!
//! An idle task is referenced only by the wakers that the things it awaits hold. If nobody
//! holds one (a `pending()` future, a channel nobody will send on), nothing could ever poll or
//! drop it again. So every task is registered when it is spawned, holding one counted
//! reference (which keeps its allocation alive); it leaves the registry when its future
//! completes or is dropped. That gives:
//!
//! * [`Task::cancel`](crate::Task::cancel) a way to wake an idle task so that it notices;
//! * shutdown and `eddy::run` a way to wake every remaining task once, so that its cell,
//!   seeing the runtime stopping, drops the future (destructors run; nothing leaks);
//! * [`Runtime::dump_tasks`](crate::Runtime::dump_tasks) every live task with its state.
//!
//! Each task carries its own list links (`TaskMeta::links`), so registering costs no
//! allocation and no memory beyond the 16 bytes in the cell; the registry itself holds one
//! reference to each task (counted in the task's state word, with the `REGISTERED` flag) until
//! the task leaves. The lists are sharded by task id so that spawns and completions on
//! different workers rarely meet on one lock. Names of named tasks live in a side table here,
//! so that unnamed tasks do not pay for the pointer.

use std::collections::HashMap;
use std::ptr::NonNull;
use std::task::Waker;

use parking_lot::{Mutex, MutexGuard};

use crate::task::dump::TaskInfo;
use crate::task::id::TaskId;
use crate::task::meta::{LinkPtrs, TaskMeta};
use crate::task::raw::{self, Header};

const SHARDS: usize = 64;

/// One shard: a doubly linked list through the tasks' `Links`.
#[derive(Debug)]
struct List {
    head: Option<NonNull<Header>>,
    len: usize,
}

// SAFETY: the list only holds pointers to task headers that it keeps alive with a counted
// reference each; the pointers are followed only while the shard's lock is held, and task
// headers may be shared between threads (their mutable parts are atomics, or these links,
// which only the lock holder touches).
unsafe impl Send for List {}

impl List {
    /// The links of a task in this list.
    ///
    /// # Safety
    ///
    /// `task` is alive and in this shard, and the caller holds this shard's lock (which is
    /// what makes the returned `&mut` exclusive).
    #[allow(clippy::mut_from_ref)]
    unsafe fn links<'a>(&self, task: NonNull<Header>) -> &'a mut LinkPtrs {
        // SAFETY: per the contract, the task is alive and only the lock holder touches links.
        unsafe { &mut *(*task.as_ptr()).meta.links.0.get() }
    }

    fn push(&mut self, task: NonNull<Header>) {
        // SAFETY: `task` and the current head are alive (the registry's references) and in
        // this shard, whose lock we hold (`&mut self` comes from the guard), so `links` may
        // hand out their links.
        unsafe {
            *self.links(task) = LinkPtrs {
                prev: None,
                next: self.head,
            };
            if let Some(head) = self.head {
                self.links(head).prev = Some(task);
            }
        }
        self.head = Some(task);
        self.len += 1;
    }

    fn remove(&mut self, task: NonNull<Header>) {
        // SAFETY: as in `push`: every task reached here is linked in this list.
        unsafe {
            let LinkPtrs { prev, next } = *self.links(task);
            match prev {
                Some(prev) => self.links(prev).next = next,
                None => self.head = next,
            }
            if let Some(next) = next {
                self.links(next).prev = prev;
            }
            *self.links(task) = LinkPtrs {
                prev: None,
                next: None,
            };
        }
        self.len -= 1;
    }

    /// The tasks in this list (snapshot of the pointers; they stay alive while listed).
    fn tasks(&self) -> Vec<NonNull<Header>> {
        let mut out = Vec::with_capacity(self.len);
        let mut cursor = self.head;
        while let Some(task) = cursor {
            out.push(task);
            // SAFETY: listed tasks are alive and we hold the lock (`&self` from the guard).
            cursor = unsafe { self.links(task).next };
        }
        out
    }
}

/// A listed task's header.
///
/// # Safety
///
/// `task` was read from a list whose lock the caller still holds (the registry's reference
/// keeps it alive) or the caller holds a reference of its own.
unsafe fn header<'a>(task: NonNull<Header>) -> &'a Header {
    // SAFETY: per the contract, the task is alive for as long as the caller uses it.
    unsafe { task.as_ref() }
}

#[derive(Debug)]
pub(crate) struct TaskRegistry {
    shards: Box<[Mutex<List>]>,
    names: Mutex<HashMap<TaskId, String>>,
}

impl TaskRegistry {
    pub(crate) fn new() -> Self {
        TaskRegistry {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(List { head: None, len: 0 }))
                .collect(),
            names: Mutex::new(HashMap::new()),
        }
    }

    fn shard(&self, meta: &TaskMeta) -> MutexGuard<'_, List> {
        self.shards[(meta.id.as_u64() as usize) % SHARDS].lock()
    }

    /// Lists a freshly spawned task. Its header was made `REGISTERED`, with a reference for
    /// us, by `raw::Header::new`.
    pub(crate) fn register(&self, task: NonNull<Header>, name: Option<String>) {
        // SAFETY: the caller (the spawn path) holds the new task's references.
        let meta = &unsafe { header(task) }.meta;
        if let Some(name) = name {
            self.names.lock().insert(meta.id, name);
        }
        self.shard(meta).push(task);
    }

    /// Takes a task out of the registry, if it is still there, and drops our reference (the
    /// caller holds another: this never frees the task).
    pub(crate) fn unregister(&self, task: NonNull<Header>) {
        // SAFETY: the caller (the task's runner) holds a reference.
        let h = unsafe { header(task) };
        let meta = &h.meta;
        let removed = {
            let mut list = self.shard(meta);
            let listed = h.is_registered();
            if listed {
                Self::unlink(&mut list, task);
            }
            listed
        };
        if removed {
            self.forget_name(meta);
            // The caller's own reference keeps the task alive past this.
            // SAFETY: we give up the registry's reference, which `unlink` passed to us.
            unsafe { raw::drop_ref(task) };
        }
    }

    /// Unlinks a listed task; the registry's reference passes to the caller.
    fn unlink(list: &mut List, task: NonNull<Header>) {
        list.remove(task);
        // SAFETY: listed tasks are alive, and the caller holds the lock.
        unsafe { header(task) }.clear_registered();
    }

    fn forget_name(&self, meta: &TaskMeta) {
        if meta.named {
            self.names.lock().remove(&meta.id);
        }
    }

    /// Takes out the tasks of the given owner (`None`: stealable tasks) and returns wakers
    /// that carry the registry's references, for shutdown. The caller wakes them outside
    /// every lock.
    pub(crate) fn take(&self, owner: Option<u32>) -> Vec<Waker> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            let mut list = shard.lock();
            for task in list.tasks() {
                // SAFETY: listed, and we hold the lock until the reference is in a waker.
                let h = unsafe { header(task) };
                if h.meta.owner() == owner {
                    Self::unlink(&mut list, task);
                    self.forget_name(&h.meta);
                    // SAFETY: the registry's reference moves into the waker.
                    out.push(unsafe { raw::waker_from_ref(task) });
                }
            }
        }
        out
    }

    /// A waker of every registered task of `owner` (`None`: stealable tasks).
    pub(crate) fn wakers_of(&self, owner: Option<u32>) -> Vec<Waker> {
        self.wakers_where(|meta| meta.owner() == owner)
    }

    /// Number of registered tasks of `owner`.
    pub(crate) fn count_of(&self, owner: Option<u32>) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let list = s.lock();
                list.tasks()
                    .into_iter()
                    // SAFETY: listed, and the lock is held.
                    .filter(|t| unsafe { header(*t) }.meta.owner() == owner)
                    .count()
            })
            .sum()
    }

    /// A waker of every registered task (to wake them all outside the locks).
    pub(crate) fn wakers(&self) -> Vec<Waker> {
        self.wakers_where(|_| true)
    }

    fn wakers_where(&self, pick: impl Fn(&TaskMeta) -> bool) -> Vec<Waker> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            let list = shard.lock();
            for task in list.tasks() {
                // SAFETY: listed, and the lock is held.
                if pick(&unsafe { header(task) }.meta) {
                    // SAFETY: listed and locked, so alive; the new reference is the waker's.
                    out.push(unsafe {
                        raw::add_ref(task);
                        raw::waker_from_ref(task)
                    });
                }
            }
        }
        out
    }

    /// A description of every live task. Each shard is locked only while it is read.
    pub(crate) fn dump(&self) -> Vec<TaskInfo> {
        let now = crate::task::meta::coarse_now();
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            let list = shard.lock();
            for task in list.tasks() {
                // SAFETY: listed, and the lock is held.
                let h = unsafe { header(task) };
                let name = if h.meta.named {
                    self.names.lock().get(&h.meta.id).cloned()
                } else {
                    None
                };
                out.push(h.meta.info(now, h.dump_state(), name));
            }
        }
        out.sort_by_key(|t| t.id);
        out
    }

    /// Number of live tasks.
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len).sum()
    }
}
