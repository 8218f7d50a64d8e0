//! Task ids: a leaf, so that what reports on tasks (exception contexts, dumps) can name one
//! without depending on the task machinery.

use std::fmt;

/// A task's identity, unique within its runtime.
///
/// # Examples
///
/// ```
/// let rt = eddy::Runtime::new()?;
/// let a = rt.handle().spawn(async {});
/// let b = rt.handle().spawn(async {});
/// assert_ne!(a.id(), b.id());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct TaskId(u64);

impl TaskId {
    /// The id numbered `n` (the runtime hands out each number once).
    pub(crate) fn new(n: u64) -> Self {
        TaskId(n)
    }

    /// The id as a number.
    pub fn as_u64(self) -> u64 {
        self.0
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "task {}", self.0)
    }
}
