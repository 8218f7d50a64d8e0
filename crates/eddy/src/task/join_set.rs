//! [`JoinSet`]: a dynamic set of tasks, awaited in the order they finish.

use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;
use slab::Slab;

use crate::task::error::TaskError;
use crate::task::handle::Task;
use crate::task::id::TaskId;

/// Keys of finished tasks, and the waker of whoever waits in `join_next`.
#[derive(Default)]
struct Finished {
    keys: std::collections::VecDeque<usize>,
    waker: Option<Waker>,
}

/// Pushes its task's key when the task's future is dropped: completion, panic or cancel.
struct Announce {
    finished: Arc<Mutex<Finished>>,
    key: usize,
}

impl Drop for Announce {
    fn drop(&mut self) {
        let waker = {
            let mut f = self.finished.lock();
            f.keys.push_back(self.key);
            f.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// A set of spawned tasks whose results are taken as they finish (tokio's `JoinSet`).
///
/// Dropping the set cancels every task still in it.
///
/// # Examples
///
/// ```
/// let rt = eddy::Runtime::new()?;
/// let total = rt.block_on(async {
///     let mut set = eddy::JoinSet::new();
///     for i in 1..=4u64 {
///         set.spawn(async move { i * 10 });
///     }
///     let mut total = 0;
///     while let Some(res) = set.join_next().await {
///         total += res.unwrap();
///     }
///     total
/// });
/// assert_eq!(total, 100);
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct JoinSet<T> {
    tasks: Slab<Task<T>>,
    finished: Arc<Mutex<Finished>>,
}

impl<T> fmt::Debug for JoinSet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinSet").field("len", &self.len()).finish()
    }
}

impl<T> Default for JoinSet<T> {
    fn default() -> Self {
        JoinSet {
            tasks: Slab::new(),
            finished: Arc::default(),
        }
    }
}

impl<T: Send + 'static> JoinSet<T> {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Spawns `future` on the current runtime into the set.
    ///
    /// # Panics
    ///
    /// Outside a runtime, as [`spawn`](crate::spawn).
    #[track_caller]
    pub fn spawn<F>(&mut self, future: F) -> TaskId
    where
        F: Future<Output = T> + Send + 'static,
    {
        let entry = self.tasks.vacant_entry();
        let announce = Announce {
            finished: self.finished.clone(),
            key: entry.key(),
        };
        let task = crate::spawn(async move {
            let _announce = announce;
            future.await
        });
        let id = task.id();
        entry.insert(task);
        id
    }
}

impl<T> JoinSet<T> {
    /// Number of tasks in the set (finished ones not yet taken included).
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// True when the set holds no task.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Waits for the next task to finish and returns its result; `None` when the set is
    /// empty.
    pub async fn join_next(&mut self) -> Option<Result<T, TaskError>> {
        self.join_next_with_id().await.map(|(_, r)| r)
    }

    /// Like [`join_next`](JoinSet::join_next), with the finished task's id.
    pub async fn join_next_with_id(&mut self) -> Option<(TaskId, Result<T, TaskError>)> {
        poll_fn(|cx| self.poll_join_next_with_id(cx)).await
    }

    /// Poll form of [`join_next`](JoinSet::join_next).
    pub fn poll_join_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<T, TaskError>>> {
        self.poll_join_next_with_id(cx)
            .map(|next| next.map(|(_, result)| result))
    }

    /// Poll form of [`join_next_with_id`](JoinSet::join_next_with_id).
    pub fn poll_join_next_with_id(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<(TaskId, Result<T, TaskError>)>> {
        if self.tasks.is_empty() {
            return Poll::Ready(None);
        }
        loop {
            let key = {
                let mut f = self.finished.lock();
                match f.keys.pop_front() {
                    Some(k) => k,
                    None => {
                        f.waker = Some(cx.waker().clone());
                        return Poll::Pending;
                    }
                }
            };
            let Some(task) = self.tasks.get_mut(key) else {
                continue;
            };
            match Pin::new(task).poll(cx) {
                Poll::Ready(res) => {
                    let task = self.tasks.remove(key);
                    return Poll::Ready(Some((task.id(), res)));
                }
                // The future is gone but the output is a moment away; the task wakes us.
                Poll::Pending => {
                    self.finished.lock().keys.push_front(key);
                    return Poll::Pending;
                }
            }
        }
    }

    /// Cancels every task in the set; they stay in it until joined (as cancelled, unless
    /// they had finished).
    pub fn abort_all(&self) {
        for (_, t) in self.tasks.iter() {
            t.cancel();
        }
    }

    /// Cancels every task and waits until all have stopped; the set is then empty.
    pub async fn shutdown(&mut self) {
        self.abort_all();
        while self.join_next().await.is_some() {}
    }
}

impl<T> Drop for JoinSet<T> {
    fn drop(&mut self) {
        self.abort_all();
    }
}

/// The results as the tasks finish (asyncio's `as_completed`); the stream ends when the set
/// is empty.
///
/// # Examples
///
/// ```
/// use futures_lite::StreamExt;
///
/// let rt = eddy::Runtime::new()?;
/// let total: u32 = rt.block_on(async {
///     let mut set = eddy::JoinSet::new();
///     for i in 1..=4u32 {
///         set.spawn(async move { i * 10 });
///     }
///     set.map(|r| r.unwrap()).fold(0, |a, b| a + b).await
/// });
/// assert_eq!(total, 100);
/// # Ok::<(), std::io::Error>(())
/// ```
impl<T> futures_core::Stream for JoinSet<T> {
    type Item = Result<T, TaskError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().poll_join_next(cx)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.len(), Some(self.len()))
    }
}
