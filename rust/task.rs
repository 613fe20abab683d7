// SPDX-License-Identifier: GPL-2.0

//! Deferred work: tasks that run on a device's own workqueue.
//!
//! C header: [`include/linux/workqueue.h`](srctree/include/linux/workqueue.h)
//!
//! A verbs driver must not call a consumer back from the call chain of one of its own
//! verbs (`Documentation/infiniband/core_locking.rst`): a completion produced while a
//! verb runs is announced later, from a workqueue. [`Task<T>`] is a reference-counted
//! object with one work item; queueing it while it is already queued does nothing, so
//! a burst of reasons to run coalesces into one run. [`Workqueue`] is a workqueue the
//! device owns: dropping it waits until every task queued on it has run, which is what
//! lets the module go away with no task left.
//!
//! A task also has a timer: [`Workqueue::run_after`] runs [`TaskRun::timer`] once a delay
//! has passed (a `delayed_work`), and [`Task::cancel`] stops both.
//!
//! [`Task::run_bh`] runs a task in a bottom half instead (`system_bh_highpri_wq`), on the
//! CPU that queued it: like the network's receive softirq, it cannot be preempted by
//! threads, and a caller in process context runs it before `run_bh` returns.

use super::bindings;
use core::ptr::NonNull;
use kernel::{
    c_str,
    prelude::*,
    static_lock_class,
    str::CStr,
    sync::Arc,
    workqueue::{
        impl_has_delayed_work, impl_has_work, new_delayed_work, system_bh_highpri, DelayedWork,
        Queue, RawWorkItem, Work, WorkItem,
    },
};

/// What a [`Task`] does when it runs.
pub(crate) trait TaskRun: Send + Sync + Sized + 'static {
    /// Runs on the workqueue the task was queued on: in process context, or in a bottom
    /// half when queued by [`Task::run_bh`].
    fn run(task: &Arc<Task<Self>>);

    /// Runs in process context once the delay given to [`Workqueue::run_after`] passed.
    fn timer(_task: &Arc<Task<Self>>) {}

    /// The task runs in a bottom half ([`Task::run_bh`]) and never on a [`Workqueue`].
    /// Such tasks get a lock class of their own: lockdep must not take a bottom-half
    /// run nested in a process-context run (which `run_bh` does) for recursion.
    const BH: bool = false;
}

/// Data with a work item that runs [`TaskRun::run`] on it.
#[pin_data]
pub(crate) struct Task<T> {
    #[pin]
    work: Work<Task<T>>,
    #[pin]
    timer: DelayedWork<Task<T>, 1>,
    #[pin]
    data: T,
}

impl_has_work! {
    impl{T} HasWork<Task<T>> for Task<T> { self.work }
}

impl_has_delayed_work! {
    impl{T} HasDelayedWork<Task<T>, 1> for Task<T> { self.timer }
}

impl<T: TaskRun> WorkItem for Task<T> {
    type Pointer = Arc<Task<T>>;

    fn run(this: Arc<Task<T>>) {
        T::run(&this);
    }
}

impl<T: TaskRun> WorkItem<1> for Task<T> {
    type Pointer = Arc<Task<T>>;

    fn run(this: Arc<Task<T>>) {
        T::timer(&this);
    }
}

impl<T: TaskRun> Task<T> {
    /// Makes a task around `data`.
    pub(crate) fn new(data: impl PinInit<T, Error>) -> Result<Arc<Self>> {
        let (name, key) = if T::BH {
            (c_str!("rxe_rs::Task::work_bh"), static_lock_class!())
        } else {
            (c_str!("rxe_rs::Task::work"), static_lock_class!())
        };
        Arc::pin_init(
            try_pin_init!(Self {
                work <- Work::new(name, key),
                timer <- new_delayed_work!("rxe_rs::Task::timer"),
                data <- data,
            }),
            GFP_KERNEL,
        )
    }
}

impl<T: TaskRun> Task<T> {
    /// Runs the task in a bottom half of this CPU unless it is queued already. From
    /// process context with bottom halves enabled, it runs before this returns (as
    /// `netif_rx()` runs the receive softirq); from a bottom half, after the current one.
    /// Must not be called with interrupts disabled.
    pub(crate) fn run_bh(this: &Arc<Self>) {
        const { assert!(T::BH, "a process-context task queued in a bottom half") };
        let _bh = super::sync::bh_disable();
        // An `Err` gives back the reference of a task that is already queued.
        let _ = system_bh_highpri().enqueue::<_, 0>(this.clone());
    }
}

impl<T> Task<T> {
    /// Takes the task and its timer off their workqueue if they are queued there, and
    /// waits for runs in progress to end: once this returns neither runs again unless
    /// queued again. Sleeps. Called from the task itself (which would wait for ever for
    /// its own run to end), it warns and does nothing.
    pub(crate) fn cancel(this: &Arc<Self>) {
        kernel::task::might_sleep();
        let ptr = Arc::as_ptr(this);
        // SAFETY: `ptr` points to a live task, whose `work` and `timer` `new` initialised;
        // the timer's work item is the first field of its `delayed_work`.
        let (work, dwork) = unsafe {
            (
                Work::raw_get(core::ptr::addr_of!((*ptr).work)),
                DelayedWork::raw_as_work(core::ptr::addr_of!((*ptr).timer)),
            )
        };
        // SAFETY: Only reads which item the calling worker runs, if any.
        let current = unsafe { kernel::bindings::current_work() }.cast::<core::ffi::c_void>();
        if kernel::warn_on!(current == work.cast() || current == dwork.cast()) {
            return;
        }
        // SAFETY: `dwork` is a valid, initialised delayed work item; process context.
        if unsafe { bindings::cancel_delayed_work_sync(dwork.cast()) } {
            // SAFETY: The timer was pending, so the queue held the reference that
            // enqueueing leaked; cancelling gave it back.
            drop(unsafe { Arc::from_raw(ptr) });
        }
        // SAFETY: `work` is a valid, initialised work item; we are in process context.
        if unsafe { bindings::cancel_work_sync(work.cast()) } {
            // SAFETY: The work was pending, so the queue held the reference that
            // enqueueing leaked with `Arc::into_raw(ptr)`; cancelling gave it back.
            drop(unsafe { Arc::from_raw(ptr) });
        }
    }
}

impl<T> core::ops::Deref for Task<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.data
    }
}

/// A workqueue owned by a device.
///
/// # Invariants
///
/// `raw` is a workqueue from `alloc_workqueue()`, destroyed when this value is dropped.
pub(crate) struct Workqueue {
    raw: NonNull<bindings::workqueue_struct>,
}

// SAFETY: A workqueue is used from any thread by design.
unsafe impl Send for Workqueue {}
// SAFETY: As above.
unsafe impl Sync for Workqueue {}

impl Workqueue {
    /// A per-CPU workqueue named `name` (the name is copied) that makes progress under
    /// memory pressure, of high priority if `highpri`: work queued from a CPU runs on
    /// that CPU unless [`Workqueue::run_on`] names another.
    pub(crate) fn new(name: &CStr, highpri: bool) -> Result<Self> {
        // SAFETY: `name` is NUL-terminated; the function copies it.
        let raw = unsafe { bindings::rxe_rs_alloc_workqueue(name.as_char_ptr(), highpri) };
        // INVARIANT: A non-null result is a fresh workqueue.
        Ok(Self {
            raw: NonNull::new(raw).ok_or(ENOMEM)?,
        })
    }

    /// An unbound workqueue named `name` (the name is copied) for work that may sleep
    /// without bound, running up to `WQ_UNBOUND_MAX_ACTIVE` items at once. It has no
    /// rescuer: nothing that reclaiming memory waits for may be queued on it.
    pub(crate) fn new_unbound(name: &CStr) -> Result<Self> {
        // SAFETY: `name` is NUL-terminated; the function copies it.
        let raw = unsafe { bindings::rxe_rs_alloc_unbound_workqueue(name.as_char_ptr()) };
        // INVARIANT: A non-null result is a fresh workqueue.
        Ok(Self {
            raw: NonNull::new(raw).ok_or(ENOMEM)?,
        })
    }

    /// The C workqueue, live as long as `self`.
    pub(crate) fn as_raw(&self) -> *mut bindings::workqueue_struct {
        self.raw.as_ptr()
    }

    fn queue(&self) -> &Queue {
        // SAFETY: By the type invariant the workqueue lives as long as `self`.
        unsafe { Queue::from_raw(self.raw.as_ptr().cast()) }
    }

    /// Queues `task` as [`Workqueue::run`] does, to run on `cpu` (on this CPU if `cpu`
    /// is not online).
    pub(crate) fn run_on<T: TaskRun>(&self, task: &Arc<Task<T>>, cpu: kernel::cpu::CpuId) {
        const { assert!(!T::BH, "a bottom-half task queued on a workqueue") };
        let wq = self.raw.as_ptr();
        // SAFETY: The closure returns `false` only when the work was queued already. The
        // pointer it gets is the task's work, valid while the call lasts and, once
        // queued, until the work has run (the `Arc` given to `__enqueue` keeps the task
        // alive); `wq` is our live workqueue; `Task<T>` is `Send` and `'static`.
        let _ = unsafe {
            <Arc<Task<T>> as RawWorkItem<0>>::__enqueue(task.clone(), |work| {
                bindings::rxe_rs_queue_work_on(wq, cpu.as_u32(), work.cast())
            })
        };
    }

    /// Queues `task` unless it is queued already (then it runs once for both reasons).
    pub(crate) fn run<T: TaskRun>(&self, task: &Arc<Task<T>>) {
        const { assert!(!T::BH, "a bottom-half task queued on a workqueue") };
        // An `Err` gives back the reference of a task that is already queued.
        let _ = self.queue().enqueue::<_, 0>(task.clone());
    }

    /// Runs the timer of `task` in `ms` milliseconds, unless it is set already.
    pub(crate) fn run_after<T: TaskRun>(&self, task: &Arc<Task<T>>, ms: u32) {
        let delay = kernel::time::msecs_to_jiffies(ms);
        // An `Err` gives back the reference of a timer that is already set.
        let _ = self.queue().enqueue_delayed::<_, 1>(task.clone(), delay);
    }

    /// Runs the timer of `task` in `ms` milliseconds, also if it is set to another time
    /// already (`mod_delayed_work()`).
    pub(crate) fn set_timer<T: TaskRun>(&self, task: &Arc<Task<T>>, ms: u32) {
        let delay = kernel::time::msecs_to_jiffies(ms);
        // A queued timer holds a leaked reference to its task, as `enqueue_delayed` takes
        // it; this one is for the timer if it was not queued.
        let ptr = Arc::into_raw(task.clone());
        // SAFETY: `ptr` points to a live task whose `timer` `Task::new` initialised; the
        // work item is the first field of its `delayed_work`.
        let dwork = unsafe { DelayedWork::raw_as_work(core::ptr::addr_of!((*ptr).timer)) };
        // SAFETY: The workqueue is live (type invariant) and `dwork` a valid, initialised
        // delayed work item of a task that runs `TaskRun::timer` on it.
        let was_queued = unsafe {
            bindings::mod_delayed_work_on(
                kernel::bindings::wq_misc_consts_WORK_CPU_UNBOUND as c_int,
                self.raw.as_ptr(),
                dwork.cast(),
                delay,
            )
        };
        if was_queued {
            // SAFETY: The queued timer holds a reference already: give ours back.
            drop(unsafe { Arc::from_raw(ptr) });
        }
    }
}

impl Drop for Workqueue {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the workqueue is ours; this waits for every
        // queued task, including those queued by the tasks themselves.
        unsafe { bindings::destroy_workqueue(self.raw.as_ptr()) };
    }
}
