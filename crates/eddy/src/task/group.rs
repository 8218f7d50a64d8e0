//! [`TaskGroup`]: asyncio's structured concurrency.

use std::collections::HashMap;
use std::error::Error;
use std::fmt;
use std::future::Future;

use crate::task::error::TaskError;
use crate::task::error::TaskPanic;
use crate::task::id::TaskId;
use crate::task::join_set::JoinSet;

/// One failed member of a [`TaskGroup`].
#[derive(Debug)]
pub enum TaskFailure<E> {
    /// The task returned `Err`.
    Error(E),
    /// The task panicked.
    Panicked(TaskPanic),
}

/// The error of [`TaskGroup::join`]: every failure, in the order they happened (asyncio's
/// `ExceptionGroup`). Tasks cancelled because of the first failure are not failures.
#[derive(Debug)]
pub struct TaskGroupError<E> {
    /// The failures, first one first.
    pub failures: Vec<TaskFailure<E>>,
}

impl<E: fmt::Display> fmt::Display for TaskGroupError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} task(s) of the group failed", self.failures.len())?;
        for (i, fail) in self.failures.iter().enumerate() {
            match fail {
                TaskFailure::Error(e) => write!(f, "; [{i}] {e}")?,
                TaskFailure::Panicked(p) => write!(f, "; [{i}] panicked: {}", p.message())?,
            }
        }
        Ok(())
    }
}

impl<E: fmt::Debug + fmt::Display> Error for TaskGroupError<E> {}

/// Tasks that succeed or fail together (asyncio's `TaskGroup`).
///
/// Spawn tasks returning `Result<T, E>` into the group, then [`join`](TaskGroup::join) it:
/// it waits for all of them and returns their values in spawn order. The first task that
/// fails (returns `Err` or panics) cancels all the others, and `join` returns a
/// [`TaskGroupError`] with every failure. Dropping a group without joining cancels its tasks.
///
/// # Examples
///
/// ```
/// use eddy::{TaskFailure, TaskGroup};
///
/// let rt = eddy::Runtime::new()?;
/// rt.block_on(async {
///     let mut ok = TaskGroup::new();
///     for i in 0..3 {
///         ok.spawn(async move { Ok::<_, String>(i * 2) });
///     }
///     assert_eq!(ok.join().await.unwrap(), vec![0, 2, 4]);
///
///     let mut failing = TaskGroup::new();
///     failing.spawn(async { Err::<u32, _>("bad input".to_string()) });
///     failing.spawn(async { std::future::pending::<Result<u32, String>>().await });
///     let err = failing.join().await.unwrap_err();
///     assert!(matches!(&err.failures[..], [TaskFailure::Error(e)] if e == "bad input"));
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct TaskGroup<T, E> {
    set: JoinSet<Result<T, E>>,
    order: Vec<TaskId>,
}

impl<T, E> fmt::Debug for TaskGroup<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskGroup")
            .field("tasks", &self.order.len())
            .finish()
    }
}

impl<T: Send + 'static, E: Send + 'static> Default for TaskGroup<T, E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Send + 'static, E: Send + 'static> TaskGroup<T, E> {
    /// An empty group.
    pub fn new() -> Self {
        TaskGroup {
            set: JoinSet::new(),
            order: Vec::new(),
        }
    }

    /// Spawns `future` into the group.
    ///
    /// # Panics
    ///
    /// Outside a runtime, as [`spawn`](crate::spawn).
    #[track_caller]
    pub fn spawn<F>(&mut self, future: F) -> TaskId
    where
        F: Future<Output = Result<T, E>> + Send + 'static,
    {
        let id = self.set.spawn(future);
        self.order.push(id);
        id
    }

    /// Waits for every task. Values come back in spawn order; on failure, see the type docs.
    ///
    /// # Errors
    ///
    /// A [`TaskGroupError`] with every failure if any task failed.
    pub async fn join(mut self) -> Result<Vec<T>, TaskGroupError<E>> {
        let index: HashMap<TaskId, usize> = self
            .order
            .iter()
            .enumerate()
            .map(|(i, id)| (*id, i))
            .collect();
        let mut values: Vec<Option<T>> = (0..self.order.len()).map(|_| None).collect();
        let mut failures = Vec::new();
        while let Some((id, res)) = self.set.join_next_with_id().await {
            let failure = match res {
                Ok(Ok(v)) => {
                    values[index[&id]] = Some(v);
                    continue;
                }
                Ok(Err(e)) => TaskFailure::Error(e),
                Err(TaskError::Panicked(p)) => TaskFailure::Panicked(p),
                Err(TaskError::Cancelled) => continue,
            };
            if failures.is_empty() {
                self.set.abort_all();
            }
            failures.push(failure);
        }
        if failures.is_empty() {
            Ok(values
                .into_iter()
                .map(|v| v.expect("every task succeeded"))
                .collect())
        } else {
            Err(TaskGroupError { failures })
        }
    }
}
