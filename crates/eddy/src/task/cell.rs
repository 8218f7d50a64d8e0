//! The typed half of a task cell, and the spawn paths.
//!
//! A [`Cell`] is one allocation: the [`Header`] (awaiter, [`TaskMeta`], state word, vtable)
//! followed by a stage that holds first the running future (with the task's context
//! variables) and then its output. `raw` decides *when* the stage may be touched; the
//! functions here decide *what* a poll does:
//!
//! 1. **Cancellation.** If the task was cancelled or the runtime closed, the poll does not
//!    touch the user's future: it drops it and completes with `Err(TaskError::Cancelled)`.
//! 2. **Panic containment.** A panic in `poll` is caught and becomes
//!    `Err(TaskError::Panicked)`; panics of the future's or the output's destructor go to the
//!    exception handler. The worker never sees them.
//! 3. **Registry membership.** A task is registered when spawned and leaves the registry the
//!    moment its future is gone (see `registry`).

use std::cell::UnsafeCell;
use std::future::Future;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic::{self, AssertUnwindSafe, Location};
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll};

use crate::contextvar::{self, Context as VarContext};
use crate::exception::drop_payload;
use crate::task::error::TaskError;
use crate::task::error::TaskPanic;
use crate::task::handle::Task;
use crate::task::host::TaskHost;
use crate::task::meta::TaskMeta;
use crate::task::raw::{Header, JoinHandle, Runnable, VTable};

/// Where a task's runnables go when it is woken: the scheduler's policies (`worker::schedule`)
/// and the blocking pool implement it.
pub(crate) trait Queue: Sized + 'static {
    /// The runtime its tasks belong to; each cell keeps one.
    type Host: TaskHost + Clone;

    /// Sends a woken task on its way.
    fn schedule(task: Woken<Self>);
}

/// A woken task on its way to its queue: its runnable, and the host its cell keeps.
pub(crate) struct Woken<Q: Queue> {
    runnable: Runnable,
    /// Inside the runnable's cell, which the runnable keeps alive.
    host: NonNull<Q::Host>,
}

impl<Q: Queue> Woken<Q> {
    /// The task's host. The borrow ends before the runnable can be given away (to a queue,
    /// after which another thread may run the task to completion and free the cell): clone
    /// the host first to use it after that.
    pub(crate) fn host(&self) -> &Q::Host {
        // SAFETY: `host` points into the cell that `runnable` keeps alive, and this borrow
        // of `self` outlives neither.
        unsafe { self.host.as_ref() }
    }

    /// The runnable, to look at before deciding where it goes.
    pub(crate) fn runnable(&self) -> &Runnable {
        &self.runnable
    }

    /// Gives up the host, keeping the runnable.
    pub(crate) fn into_runnable(self) -> Runnable {
        self.runnable
    }
}

/// One task allocation (`#[repr(C)]`: the header comes first, see `raw::Header`).
#[repr(C)]
struct Cell<F: Future, Q: Queue> {
    header: Header,
    /// The runtime the task belongs to: read at every wake that leaves this thread, and at
    /// every poll (has it stopped?).
    host: Q::Host,
    /// `running` until the poll that finishes the task, `output` after it (until the output
    /// is taken or dropped). Which one is live follows from the state word (`raw`).
    stage: UnsafeCell<Stage<F>>,
    _queue: PhantomData<Q>,
}

union Stage<F: Future> {
    running: ManuallyDrop<Running<F>>,
    output: ManuallyDrop<Result<F::Output, TaskError>>,
}

struct Running<F> {
    future: F,
    /// The task's own context variables: a copy of its spawner's, current while it polls.
    context: VarContext,
}

impl<F: Future + 'static, Q: Queue> Cell<F, Q> {
    const VTABLE: VTable = VTable {
        poll: Self::poll,
        take_output: Self::take_output,
        drop_output: Self::drop_output,
        schedule: Self::schedule,
        host: Self::host_of,
        dealloc: Self::dealloc,
    };

    /// Allocates a cell around `future`; the caller receives the references of
    /// `raw::Header::new` (a runnable, the handle and the registry's).
    fn allocate(host: Q::Host, meta: TaskMeta, future: F) -> NonNull<Header> {
        let cell = Box::new(Cell::<F, Q> {
            header: Header::new(&Self::VTABLE, meta),
            host,
            stage: UnsafeCell::new(Stage {
                running: ManuallyDrop::new(Running {
                    future,
                    context: contextvar::capture(),
                }),
            }),
            _queue: PhantomData,
        });
        NonNull::from(Box::leak(cell)).cast()
    }

    /// # Safety
    ///
    /// `ptr` is a live cell of this type (true of every `VTable` call, as the vtable is
    /// chosen with the type).
    unsafe fn from_header<'a>(ptr: NonNull<Header>) -> &'a Self {
        // SAFETY: the header is the first field of a `#[repr(C)]` cell of this type.
        unsafe { ptr.cast::<Self>().as_ref() }
    }

    /// `VTable::schedule`: hands the runnable, with the host, to `Q`.
    fn schedule(runnable: Runnable) {
        // SAFETY: every runnable of this vtable is a cell of this type (`from_header`).
        let cell = unsafe { Self::from_header(runnable.header()) };
        let host = NonNull::from(&cell.host);
        Q::schedule(Woken { runnable, host })
    }

    /// `VTable::host`: the host, for the type-erased paths.
    unsafe fn host_of(ptr: NonNull<Header>) -> NonNull<dyn TaskHost> {
        // SAFETY: see `from_header`.
        let cell = unsafe { Self::from_header(ptr) };
        NonNull::from(&cell.host as &dyn TaskHost)
    }

    unsafe fn poll(ptr: NonNull<Header>, cx: &mut Context<'_>, stop: bool) -> Poll<()> {
        // SAFETY: see `from_header`.
        let cell = unsafe { Self::from_header(ptr) };
        let meta = &cell.header.meta;
        let host = &cell.host;
        let stop = stop || host.is_stopping();
        // SAFETY: the caller holds `RUNNING`, so the stage is ours, and it holds the future.
        let stage = unsafe { &mut *cell.stage.get() };
        let output = if stop {
            Err(TaskError::Cancelled)
        } else {
            // SAFETY: before the finishing poll the stage holds the running future.
            let running = unsafe { &mut *stage.running };
            meta.count_poll();
            let outer = contextvar::swap(running.context.take());
            // SAFETY: the future lives inside the heap cell and is dropped in place below, so
            // it is never moved once pinned here.
            let future = unsafe { Pin::new_unchecked(&mut running.future) };
            let polled = panic::catch_unwind(AssertUnwindSafe(|| future.poll(cx)));
            running.context = contextvar::swap(outer);
            match polled {
                Ok(Poll::Pending) => return Poll::Pending,
                Ok(Poll::Ready(value)) => Ok(value),
                Err(payload) => {
                    let panic =
                        TaskPanic::new(&*payload, meta.id, meta.location, host.handler().clone());
                    drop_payload(payload);
                    Err(TaskError::Panicked(panic))
                }
            }
        };
        host.unregister(ptr);
        // The future first, then its context, as the fields' order would drop them.
        // SAFETY: the stage still holds the running future and its context.
        let context = unsafe { stage.running.context.take() };
        let dropped = panic::catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: the stage holds the running future; it is dropped in place, once.
            unsafe { ManuallyDrop::drop(&mut stage.running) }
        }));
        if let Err(payload) = dropped {
            meta.report_drop_panic(host, payload, "a task's future");
        }
        // On a worker the release waits for the end of its cycle; elsewhere (or when it pays
        // for an older context, maybe another task's) it may drop values here, whose
        // destructors may panic.
        if let Err(payload) =
            panic::catch_unwind(AssertUnwindSafe(|| contextvar::release_later(context)))
        {
            host.report_context_drop_panic(payload);
        }
        stage.output = ManuallyDrop::new(output);
        Poll::Ready(())
    }

    unsafe fn take_output(ptr: NonNull<Header>, out: *mut ()) {
        // SAFETY: `ptr` is a live cell of this type (see `from_header`), the caller owns the
        // output (`raw`'s `HANDLE` rule), and `out` points to an `Option` of its type.
        unsafe {
            let stage = &mut *Self::from_header(ptr).stage.get();
            *out.cast::<Option<Result<F::Output, TaskError>>>() =
                Some(ManuallyDrop::take(&mut stage.output));
        }
    }

    unsafe fn drop_output(ptr: NonNull<Header>) {
        // SAFETY: see `from_header`.
        let cell = unsafe { Self::from_header(ptr) };
        let dropped = panic::catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: the caller owns the output, which is dropped once, in place.
            unsafe { ManuallyDrop::drop(&mut (*cell.stage.get()).output) }
        }));
        if let Err(payload) = dropped {
            cell.header
                .meta
                .report_drop_panic(&cell.host, payload, "a task's output");
        }
    }

    unsafe fn dealloc(ptr: NonNull<Header>) {
        // SAFETY: the last reference is gone; the cell was made by `Box::new` in `allocate`.
        let cell = unsafe { Box::from_raw(ptr.cast::<Self>().as_ptr()) };
        // The awaiter is someone else's waker, whose drop may panic: contain it here, where
        // the task can still be named, rather than unwind into whoever dropped the last
        // reference (often a worker).
        // SAFETY: the last reference is gone (we are freeing the cell).
        if let Some(awaiter) = unsafe { cell.header.take_awaiter() } {
            if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(move || drop(awaiter))) {
                cell.header.meta.report_drop_panic(
                    &cell.host,
                    payload,
                    "the waker awaiting a task",
                );
            }
        }
        if !cell.header.is_complete() {
            // Unreachable while the registry holds a reference until the future is gone;
            // kept so that a leak of logic is not also a leak of the future, whose
            // destructor is user code and may panic.
            let dropped = panic::catch_unwind(AssertUnwindSafe(|| {
                // SAFETY: the stage still holds the future, and nobody else can reach it.
                unsafe { ManuallyDrop::drop(&mut (*cell.stage.get()).running) }
            }));
            if let Err(payload) = dropped {
                cell.header
                    .meta
                    .report_drop_panic(&cell.host, payload, "a task's future");
            }
        }
    }
}

/// Registers a new cell and schedules its first poll.
fn start<T>(host: &dyn TaskHost, ptr: NonNull<Header>, name: Option<String>) -> Task<T> {
    host.register(ptr, name);
    // SAFETY: a new header holds one reference and `SCHEDULED` for the first runnable, and
    // one reference and `HANDLE` for the join handle, and the output type is
    // `Result<T, TaskError>`: each side receives exactly what its constructor asks for.
    let (runnable, handle) = unsafe { (Runnable::from_ref(ptr), JoinHandle::from_ref(ptr)) };
    runnable.schedule();
    Task::new(handle)
}

/// Spawns a `Send` task whose wakes go to queue `Q` (the workers, or the blocking pool).
pub(crate) fn spawn_on<F, Q>(
    host: &Q::Host,
    future: F,
    location: &'static Location<'static>,
    name: Option<String>,
) -> Task<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    Q: Queue,
{
    let meta = TaskMeta::new(host.next_task_id(), location, None, name.is_some());
    // `F` and its output are `Send`, so the cell may be polled and dropped on any thread.
    start(
        host,
        Cell::<F, Q>::allocate(host.clone(), meta, future),
        name,
    )
}

/// Spawns a task pinned to worker `owner` (the current thread), whose wakes go to queue `Q`.
///
/// The future may be `!Send`, so `Q` must only ever run or drop its runnables on worker
/// `owner`, the thread calling this function (`worker::schedule::Pinned` does).
/// The output may be `!Send`: `Task<T>` is only `Send` when `T` is.
pub(crate) fn spawn_pinned_on<F, Q>(
    host: &Q::Host,
    owner: usize,
    future: F,
    location: &'static Location<'static>,
    name: Option<String>,
) -> Task<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
    Q: Queue,
{
    let meta = TaskMeta::new(
        host.next_task_id(),
        location,
        Some(owner as u32),
        name.is_some(),
    );
    start(
        host,
        Cell::<F, Q>::allocate(host.clone(), meta, future),
        name,
    )
}

#[cfg(test)]
mod tests {
    //! The cell driven by hand, without workers or pollers, so that Miri can run it
    //! (`cargo +nightly miri test -p eddy --lib task::cell`; `polling` needs `timerfd`, which
    //! Miri lacks, so a whole runtime cannot run under it). Runnables go to a queue of the
    //! test's own; other threads wake tasks and drop handles while the test runs them.

    use std::collections::VecDeque;
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex, MutexGuard};
    use std::task::{Context, Poll, Wake, Waker};

    use super::{spawn_on, Queue, Woken};
    use crate::task::error::TaskError;
    use crate::task::handle::Task;
    use crate::task::raw::Runnable;
    use crate::worker::shared::Shared;

    static QUEUE: Mutex<VecDeque<Runnable>> = Mutex::new(VecDeque::new());
    /// The queue is global: the tests of this module take turns.
    static SERIAL: Mutex<()> = Mutex::new(());

    struct Manual;

    impl Queue for Manual {
        type Host = Arc<Shared>;

        fn schedule(task: Woken<Self>) {
            QUEUE.lock().unwrap().push_back(task.into_runnable());
        }
    }

    fn serial() -> MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn shared() -> Arc<Shared> {
        Shared::for_tests()
    }

    fn spawn<F>(shared: &Arc<Shared>, future: F) -> Task<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        spawn_on::<F, Manual>(shared, future, std::panic::Location::caller(), None)
    }

    /// Runs queued runnables until the queue is empty; returns how many ran.
    fn run_queued() -> usize {
        let mut ran = 0;
        loop {
            let next = QUEUE.lock().unwrap().pop_front();
            match next {
                Some(r) => r.run(),
                None => return ran,
            }
            ran += 1;
        }
    }

    /// A one-shot event another thread can fire.
    #[derive(Default)]
    struct Flag {
        set: AtomicBool,
        waker: Mutex<Option<Waker>>,
    }

    impl Flag {
        fn fire(&self) {
            self.set.store(true, Ordering::SeqCst);
            if let Some(w) = self.waker.lock().unwrap().take() {
                w.wake();
            }
        }

        fn wait(self: Arc<Self>) -> impl Future<Output = ()> + Send {
            std::future::poll_fn(move |cx| {
                *self.waker.lock().unwrap() = Some(cx.waker().clone());
                if self.set.load(Ordering::SeqCst) {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            })
        }
    }

    #[derive(Default)]
    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll_task<T>(task: &mut Task<T>, waker: &Waker) -> Poll<Result<T, TaskError>> {
        Pin::new(task).poll(&mut Context::from_waker(waker))
    }

    /// Join with a registered awaiter, a cross-thread wake, a self-wake while running,
    /// detach, cancel of an idle task, a runnable dropped unrun, and cancel-all through the
    /// registry. Miri's leak check then proves every cell was freed.
    #[test]
    fn every_path_of_the_cell_by_hand() {
        let _turn = serial();
        let shared = shared();
        // Join: the handle waits, another thread fires the flag, the awaiter is woken once.
        let flag = Arc::new(Flag::default());
        let mut task = spawn(&shared, {
            let flag = flag.clone();
            async move {
                flag.wait().await;
                7
            }
        });
        assert_eq!(run_queued(), 1);
        let awaiter = Arc::new(CountingWaker::default());
        let awaiter_waker = Waker::from(awaiter.clone());
        assert!(poll_task(&mut task, &awaiter_waker).is_pending());
        std::thread::spawn(move || flag.fire()).join().unwrap();
        assert_eq!(run_queued(), 1);
        assert_eq!(awaiter.0.load(Ordering::SeqCst), 1);
        assert!(matches!(
            poll_task(&mut task, &awaiter_waker),
            Poll::Ready(Ok(7))
        ));

        // Woken while running: rescheduled after the poll, polled again.
        let mut first = true;
        let mut task = spawn(
            &shared,
            std::future::poll_fn(move |cx| {
                if std::mem::take(&mut first) {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                } else {
                    Poll::Ready(())
                }
            }),
        );
        assert_eq!(run_queued(), 2);
        assert!(matches!(
            poll_task(&mut task, Waker::noop()),
            Poll::Ready(Ok(()))
        ));

        // Detached: the runner drops the output.
        let dropped = Arc::new(AtomicUsize::new(0));
        struct Out(Arc<AtomicUsize>);
        impl Drop for Out {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let d = dropped.clone();
        drop(spawn(&shared, async move { Out(d) }));
        run_queued();
        assert_eq!(dropped.load(Ordering::SeqCst), 1);

        // Cancel of an idle task.
        let mut idle = spawn(&shared, std::future::pending::<()>());
        run_queued();
        idle.cancel();
        assert_eq!(run_queued(), 1);
        match poll_task(&mut idle, Waker::noop()) {
            Poll::Ready(Err(e)) => assert!(e.is_cancelled()),
            other => panic!("{other:?}"),
        }

        // A runnable dropped unrun drops the future: the task ends cancelled.
        let mut never = spawn(&shared, async { 1 });
        let runnable = QUEUE.lock().unwrap().pop_front().unwrap();
        drop(runnable);
        match poll_task(&mut never, Waker::noop()) {
            Poll::Ready(Err(e)) => assert!(e.is_cancelled()),
            other => panic!("{other:?}"),
        }

        // Cancel-all reaches idle tasks nobody can wake, through the registry.
        let forgotten = spawn(&shared, std::future::pending::<()>());
        drop(forgotten);
        run_queued();
        assert_eq!(shared.registry.len(), 1);
        shared.cancel_all_tasks();
        assert_eq!(run_queued(), 1);
        assert_eq!(shared.registry.len(), 0);
    }

    /// A detached task whose registry reference became a waker (shutdown's `take`) returns
    /// `Pending` while another thread drops that waker: whichever of the two gives up the
    /// last reference frees the cell, once, and nothing is used after it (Miri's leak and
    /// use-after-free checks, over whichever orders its scheduler picks).
    #[test]
    fn the_last_reference_dropped_during_a_pending_return() {
        let _turn = serial();
        for _ in 0..20 {
            let shared = shared();
            let polls = Arc::new(AtomicUsize::new(0));
            let seen = polls.clone();
            drop(spawn(
                &shared,
                std::future::poll_fn(move |_| {
                    seen.fetch_add(1, Ordering::SeqCst);
                    Poll::<()>::Pending
                }),
            ));
            assert_eq!(run_queued(), 1);
            let mut wakers = shared.registry.take(None);
            assert_eq!(wakers.len(), 1);
            let waker = wakers.pop().unwrap();
            waker.wake_by_ref();
            // Drop the waker while the second poll is returning `Pending`.
            let dropper = std::thread::spawn(move || {
                while polls.load(Ordering::SeqCst) < 2 {
                    std::thread::yield_now();
                }
                drop(waker);
            });
            assert_eq!(run_queued(), 1);
            dropper.join().unwrap();
            assert_eq!(shared.registry.len(), 0);
        }
    }

    /// Wakes, joins and detaches racing on three threads: every task completes once and every
    /// handle gets its output or detaches, with nothing leaked (Miri's leak check).
    #[test]
    fn wakes_and_handles_racing_across_threads() {
        const TASKS: usize = 8;
        let _turn = serial();
        let shared = shared();
        let flags: Vec<Arc<Flag>> = (0..TASKS).map(|_| Arc::default()).collect();
        let mut tasks: Vec<Task<usize>> = flags
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let f = f.clone();
                spawn(&shared, async move {
                    f.wait().await;
                    i
                })
            })
            .collect();
        run_queued();
        let detached: Vec<_> = tasks.split_off(TASKS / 2);
        let firer = std::thread::spawn(move || flags.iter().for_each(|f| f.fire()));
        let dropper = std::thread::spawn(move || drop(detached));
        let mut joined: Vec<Option<Task<usize>>> = tasks.into_iter().map(Some).collect();
        let mut outputs = Vec::new();
        while outputs.len() < TASKS / 2 {
            run_queued();
            for slot in joined.iter_mut() {
                let Some(t) = slot else { continue };
                if let Poll::Ready(out) = poll_task(t, Waker::noop()) {
                    outputs.push(out.unwrap());
                    *slot = None;
                }
            }
            std::thread::yield_now();
        }
        firer.join().unwrap();
        dropper.join().unwrap();
        run_queued();
        outputs.sort_unstable();
        assert_eq!(outputs, (0..TASKS / 2).collect::<Vec<_>>());
        assert_eq!(shared.registry.len(), 0);
    }
}
