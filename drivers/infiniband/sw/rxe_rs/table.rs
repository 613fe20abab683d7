// SPDX-License-Identifier: GPL-2.0

//! Tables of numbered objects: QP numbers, memory keys, address handle numbers.
//!
//! Numbers are taken cyclically from a fixed range, so that a number freed is reused as
//! late as possible (a late packet or a stale key must not find a new object). The
//! table holds a reference to each object for lookups by number; the object gives its
//! number back when it goes.
//!
//! Inserting never sleeps (kernel address handles may be created in atomic context):
//! the object is made beforehand, one spinlock serialises inserters, the xarray
//! allocates atomically, and the object learns its number ([`Numbered`]) before it is
//! published.
//!
//! Lookups ([`IdTable::get`]) run in any context, packets' softirqs included, so the
//! table's lock keeps interrupts off and every use of the xarray happens under it (the
//! xarray's own lock, taken inside, is then never taken with interrupts on).

use crate::ib::sync::{new_spinlock_irq, SpinLockIrq};
use kernel::{
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc,
    },
    xarray::{AllocKind, XArray},
};

/// An object's number in its table, set once when it is inserted.
pub(crate) struct Number(Atomic<u32>);

impl Number {
    /// Not numbered yet.
    pub(crate) fn new() -> Self {
        Self(Atomic::new(0))
    }

    /// The number (0 before the object is inserted).
    pub(crate) fn get(&self) -> u32 {
        self.0.load(Relaxed)
    }
}

/// An object a table numbers.
pub(crate) trait Numbered {
    /// Where the object keeps its number.
    fn number(&self) -> &Number;
}

/// Objects of type `T` numbered from `first` to `limit - 1`.
#[pin_data]
pub(crate) struct IdTable<T: Numbered + Send + Sync + 'static> {
    first: u32,
    limit: u32,
    /// Where the next search starts; held across every use of `xa`.
    #[pin]
    next: SpinLockIrq<u32>,
    #[pin]
    xa: XArray<Arc<T>>,
}

impl<T: Numbered + Send + Sync + 'static> IdTable<T> {
    /// A table handing out `first..limit`.
    pub(crate) fn new(first: u32, limit: u32) -> impl PinInit<Self, Error> {
        let start = first;
        try_pin_init!(Self {
            first,
            limit,
            next <- new_spinlock_irq!(start),
            xa <- XArray::new(AllocKind::Alloc),
        })
    }

    /// Gives `obj` a free number and publishes it; returns the number.
    pub(crate) fn insert(&self, obj: &Arc<T>) -> Result<u32> {
        let mut next = self.next.lock();
        let span = self.limit - self.first;
        let free = (0..span)
            .map(|i| self.first + (*next - self.first + i) % span)
            .find(|&n| self.xa.lock().get(n as usize).is_none())
            .ok_or(ENOSPC)?;
        // ORDERING: The xarray's lock orders this before the object can be looked up.
        obj.number().0.store(free, Relaxed);
        self.xa
            .lock()
            .store(free as usize, obj.clone(), GFP_ATOMIC)
            .map_err(|e| e.error)?;
        *next = if free + 1 == self.limit {
            self.first
        } else {
            free + 1
        };
        Ok(free)
    }

    /// Publishes `obj` under the fixed number `n`, outside the cyclic range (a special
    /// QP's); fails with `EBUSY` when `n` is taken.
    pub(crate) fn insert_at(&self, n: u32, obj: &Arc<T>) -> Result {
        let _next = self.next.lock();
        if self.xa.lock().get(n as usize).is_some() {
            return Err(EBUSY);
        }
        obj.number().0.store(n, Relaxed);
        self.xa
            .lock()
            .store(n as usize, obj.clone(), GFP_ATOMIC)
            .map_err(|e| e.error)?;
        Ok(())
    }

    /// Forgets the object numbered `n`.
    pub(crate) fn remove(&self, n: u32) {
        let next = self.next.lock();
        let gone = self.xa.lock().remove(n as usize);
        drop(next);
        // The object may go with the table's reference: not under the lock.
        drop(gone);
    }

    /// The object numbered `n`, if there is one.
    pub(crate) fn get(&self, n: u32) -> Option<Arc<T>> {
        let next = self.next.lock();
        // The xarray's guard is a temporary of this statement, so it goes before `next`
        // restores the interrupts (a guard in the tail expression would outlive it).
        let found = self.xa.lock().get(n as usize).map(Arc::from);
        drop(next);
        found
    }
}
