// SPDX-License-Identifier: GPL-2.0

//! A spinlock that keeps interrupts off while it is held.
//!
//! C header: [`include/linux/spinlock.h`](srctree/include/linux/spinlock.h)
//!
//! The data path touches a QP, its CQs, its SRQ and the device's tables from softirq
//! context (packets), from process context (verbs, the device's workqueue) and, for
//! kernel consumers, from whatever context they post or poll in, hard interrupts
//! included. A plain spinlock taken in one of those and interrupted by another on the
//! same CPU deadlocks; [`SpinLockIrq`] is `spin_lock_irqsave()`: the guard keeps the
//! saved interrupt state and restores it on release.

use super::bindings;
use kernel::{
    bindings as kb,
    ffi::{c_char, c_ulong},
    sync::{
        atomic::{Atomic, Relaxed},
        lock::{Backend, Guard, Lock},
    },
};

/// A spinlock taken with interrupts disabled.
pub(crate) type SpinLockIrq<T> = Lock<T, IrqSpinLockBackend>;

/// A guard of a [`SpinLockIrq`].
#[allow(dead_code)]
pub(crate) type SpinLockIrqGuard<'a, T> = Guard<'a, T, IrqSpinLockBackend>;

/// Makes a [`SpinLockIrq`] with a lock class of its own, like `new_spinlock!`.
macro_rules! new_spinlock_irq {
    ($inner:expr $(, $name:literal)? $(,)?) => {
        $crate::ib::sync::SpinLockIrq::new(
            $inner,
            ::kernel::optional_name!($($name)?),
            ::kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_spinlock_irq;

/// The backend of [`SpinLockIrq`].
pub(crate) struct IrqSpinLockBackend;

// SAFETY: `spin_lock_irqsave()` gives mutual exclusion; the saved flags are restored by
// the matching `spin_unlock_irqrestore()` of the owner.
unsafe impl Backend for IrqSpinLockBackend {
    type State = kb::spinlock_t;
    type GuardState = c_ulong;

    unsafe fn init(ptr: *mut Self::State, name: *const c_char, key: *mut kb::lock_class_key) {
        // SAFETY: Per the trait's contract, `ptr` is valid for writes and `name`, `key`
        // live forever.
        unsafe { kb::__spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: `ptr` is an initialised spinlock (trait contract); the two bindings
        // name the same C type.
        unsafe { bindings::rxe_rs_spin_lock_irqsave(ptr.cast()) }
    }

    unsafe fn unlock(ptr: *mut Self::State, flags: &Self::GuardState) {
        // SAFETY: The caller owns the lock, taken by `lock`, which returned `flags`.
        unsafe { bindings::rxe_rs_spin_unlock_irqrestore(ptr.cast(), *flags) }
    }

    unsafe fn try_lock(ptr: *mut Self::State) -> Option<Self::GuardState> {
        let mut flags: c_ulong = 0;
        // SAFETY: `ptr` is an initialised spinlock; `flags` is a valid out-parameter.
        let got = unsafe { bindings::rxe_rs_spin_trylock_irqsave(ptr.cast(), &mut flags) };
        (got != 0).then_some(flags)
    }

    unsafe fn assert_is_held(ptr: *mut Self::State) {
        // SAFETY: `ptr` is an initialised spinlock.
        unsafe { kb::spin_assert_is_held(ptr) }
    }
}

/// When something was last used by an RCU reader, as a point in RCU's sequence of
/// grace periods: what [`synchronize_rcu_since`] waits past.
///
/// A reader that finds the object marks it ([`LastUse::mark`]) inside its read-side
/// section, under a lock that serialises all marks of the object (so that a later mark
/// is never overwritten by an earlier one) and that its unpublisher takes after it
/// unpublished it; the unpublisher then waits with [`synchronize_rcu_since`], only if a
/// reader marked it in a section that may still be running. An object no reader found
/// since a grace period ended is freed without waiting for one: a loop that creates and
/// destroys objects no longer forces an expedited grace period (an interrupt to every
/// CPU) per object.
pub(crate) struct LastUse(Atomic<usize>);

impl LastUse {
    /// Never used: waiting past it returns at once.
    pub(crate) fn new() -> Self {
        // SAFETY: The function takes no arguments and only returns a constant.
        let never = unsafe { bindings::get_completed_synchronize_rcu() };
        Self(Atomic::new(never))
    }

    /// Used now, by a reader in an RCU read-side section, under the lock that
    /// serialises the object's marks (see the type's description).
    pub(crate) fn mark(&self) {
        // SAFETY: The function takes no arguments; it orders what came before it (the
        // finding of the object) before its snapshot of the grace-period sequence.
        let now = unsafe { bindings::rxe_rs_rcu_cookie() };
        // The value changes once per grace period: most marks write nothing.
        if self.0.load(Relaxed) != now {
            self.0.store(now, Relaxed);
        }
    }
}

/// Waits until every RCU read-side section that marked `used` has ended: returns at
/// once if a full grace period has passed since the last mark, and otherwise waits for
/// an expedited one. Sleeps. The caller has unpublished the object first, so that no
/// reader marks it again.
pub(crate) fn synchronize_rcu_since(used: &LastUse) {
    kernel::task::might_sleep();
    let since = used.0.load(Relaxed);
    // SAFETY: `since` is a cookie RCU gave out (a `LastUse` holds nothing else, and its
    // field is private); waiting in atomic context would be a bug reported by
    // `might_sleep()` above, not undefined behaviour.
    unsafe { bindings::rxe_rs_rcu_wait_since(since) };
}

/// Bottom halves held off on this CPU; they run (if any became pending) when the
/// guard is dropped. Made by [`bh_disable`].
///
/// # Invariants
///
/// `local_bh_disable()` was called on this CPU when the guard was made and is undone
/// once, by its drop, on the same CPU (the guard is neither `Send` nor `Sync`, and
/// disabling bottom halves keeps the thread on its CPU).
pub(crate) struct BhGuard {
    _not_send: core::marker::PhantomData<*mut ()>,
}

/// Holds bottom halves off until the guard is dropped: what is queued for one (the
/// loopback queue's receiver, say) runs after the caller's work, in one go. The holder
/// must not sleep, and must not hold the guard with interrupts disabled when it drops.
pub(crate) fn bh_disable() -> BhGuard {
    // SAFETY: Balanced by the guard's drop, on this CPU (type invariant).
    unsafe { bindings::rxe_rs_local_bh_disable() };
    BhGuard {
        _not_send: core::marker::PhantomData,
    }
}

impl Drop for BhGuard {
    fn drop(&mut self) {
        // SAFETY: Undoes the disable the guard was made with (type invariant); runs the
        // bottom halves that became pending unless nested in another.
        unsafe { bindings::rxe_rs_local_bh_enable() };
    }
}
