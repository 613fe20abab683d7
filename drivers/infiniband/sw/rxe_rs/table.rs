// SPDX-License-Identifier: GPL-2.0

//! Tables of numbered objects: QP numbers, memory keys, address handle numbers.
//!
//! Numbers are taken cyclically from a fixed range, so that a number freed is reused as
//! late as possible (a late packet or a stale key must not find a new object). A bitmap
//! ([`IdPool`]) says which numbers are taken: finding the next free one is a search a
//! word at a time, however full the table. The bitmap starts small and doubles while
//! the numbers handed out go past its end, up to the range's size (128 KiB for the 2^20
//! QP numbers), allocated out of the lock; only then does the search wrap around. The
//! table holds a reference to each object for lookups by number; the object gives its
//! number back when it goes.
//!
//! Inserting sleeps only if the caller's allocation flags allow it (kernel address
//! handles may be created in atomic context): the object is made beforehand, one
//! spinlock serialises inserters, the xarray allocates atomically, and the object learns
//! its number ([`Numbered`]) before it is published.
//!
//! Lookups ([`IdTable::get`]) run in any context, packets' softirqs included, so the
//! table's lock keeps interrupts off and every use of the xarray happens under it (the
//! xarray's own lock, taken inside, is then never taken with interrupts on).

use crate::ib::sync::{new_spinlock_irq, LastUse, SpinLockIrq};
use kernel::{
    alloc::Flags,
    id_pool::{IdPool, ReallocRequest},
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc,
    },
    xarray::{AllocKind, XArray},
};

/// An object's number in its table, set once when it is inserted, and when a lookup
/// last found it.
pub(crate) struct Number {
    n: Atomic<u32>,
    used: LastUse,
}

impl Number {
    /// Not numbered yet.
    pub(crate) fn new() -> Self {
        Self {
            n: Atomic::new(0),
            used: LastUse::new(),
        }
    }

    /// The number (0 before the object is inserted).
    pub(crate) fn get(&self) -> u32 {
        self.n.load(Relaxed)
    }

    /// When a lookup last found the object; once [`IdTable::remove`] has returned, no
    /// lookup marks it again (see [`synchronize_rcu_since`]).
    ///
    /// [`synchronize_rcu_since`]: crate::ib::sync::synchronize_rcu_since
    pub(crate) fn last_use(&self) -> &LastUse {
        &self.used
    }
}

/// An object a table numbers.
pub(crate) trait Numbered {
    /// Whether its destroy waits for the readers that found it ([`LastUse`]): lookups
    /// of objects whose data is copied out (address handles) need not mark them.
    const WAITED_FOR: bool = true;

    /// Where the object keeps its number.
    fn number(&self) -> &Number;
}

/// Which numbers of a table are taken, as offsets from its first.
struct Taken {
    pool: IdPool,
    /// The offset the next search starts from.
    next: usize,
}

/// Where a table's next number comes from.
enum Search {
    /// This offset was free and is taken now.
    Claimed(usize),
    /// Every offset the bitmap covers from the cursor on is taken: it grows first.
    Grow(ReallocRequest),
}

impl Taken {
    /// Takes the first free offset from `from` on, if it is below `span`.
    fn claim(&mut self, from: usize, span: usize) -> Option<usize> {
        let unused = self.pool.find_unused_id(from)?;
        if unused.as_usize() >= span {
            return None;
        }
        let id = unused.acquire();
        self.next = if id + 1 == span { 0 } else { id + 1 };
        Some(id)
    }

    /// Takes the first free offset below `span` from the cursor on, wrapping around
    /// only once the bitmap covers the whole range.
    fn search(&mut self, span: usize) -> Result<Search> {
        let covered = self.pool.capacity().min(span);
        if self.next < covered {
            if let Some(id) = self.claim(self.next, span) {
                return Ok(Search::Claimed(id));
            }
        }
        if covered < span {
            return self.pool.grow_request().map(Search::Grow).ok_or(ENOSPC);
        }
        self.claim(0, span).map(Search::Claimed).ok_or(ENOSPC)
    }
}

/// Objects of type `T` numbered from `first` to `limit - 1`.
#[pin_data]
pub(crate) struct IdTable<T: Numbered + Send + Sync + 'static> {
    first: u32,
    limit: u32,
    /// Held across every use of `xa`.
    #[pin]
    taken: SpinLockIrq<Taken>,
    #[pin]
    xa: XArray<Arc<T>>,
}

impl<T: Numbered + Send + Sync + 'static> IdTable<T> {
    /// A table handing out `first..limit`.
    pub(crate) fn new(first: u32, limit: u32) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            first,
            limit,
            taken <- new_spinlock_irq!(Taken {
                pool: IdPool::new(),
                next: 0,
            }),
            xa <- XArray::new(AllocKind::Alloc),
        })
    }

    /// The table's offset of number `n`, if `n` is in its cyclic range.
    fn offset(&self, n: u32) -> Option<usize> {
        (self.first..self.limit)
            .contains(&n)
            .then(|| (n - self.first) as usize)
    }

    /// Gives `obj` a free number and publishes it; returns the number. Allocates with
    /// `flags` when the bitmap grows (at most once per doubling of the numbers in use).
    pub(crate) fn insert(&self, obj: &Arc<T>, flags: Flags) -> Result<u32> {
        let span = (self.limit - self.first) as usize;
        loop {
            let request = {
                let mut taken = self.taken.lock();
                match taken.search(span)? {
                    Search::Claimed(id) => return self.publish(&mut taken, id, obj),
                    Search::Grow(request) => request,
                }
            };
            match request.realloc(flags) {
                // Another inserter may have grown it meanwhile: then this one is dropped.
                Ok(resizer) => self.taken.lock().pool.grow(resizer),
                // No memory for a larger bitmap: a number the bitmap covers, if one is
                // free, reused sooner than the cyclic order would.
                Err(_) => {
                    let mut taken = self.taken.lock();
                    let id = taken.claim(0, span).ok_or(ENOMEM)?;
                    return self.publish(&mut taken, id, obj);
                }
            }
        }
    }

    /// Publishes `obj` under the offset `id` it has just claimed; gives the offset back
    /// if that fails.
    fn publish(&self, taken: &mut Taken, id: usize, obj: &Arc<T>) -> Result<u32> {
        // `id < span`, so the number is below `limit`: a `u32`.
        let n = self.first + id as u32;
        // ORDERING: The xarray's lock orders this before the object can be looked up.
        obj.number().n.store(n, Relaxed);
        let stored = self.xa.lock().store(n as usize, obj.clone(), GFP_ATOMIC);
        if let Err(e) = stored {
            taken.pool.release_id(id);
            return Err(e.error);
        }
        Ok(n)
    }

    /// Publishes `obj` under the fixed number `n`, outside the cyclic range (a special
    /// QP's); fails with `EBUSY` when `n` is taken.
    pub(crate) fn insert_at(&self, n: u32, obj: &Arc<T>) -> Result {
        if self.offset(n).is_some() {
            return Err(EINVAL);
        }
        let _taken = self.taken.lock();
        if self.xa.lock().get(n as usize).is_some() {
            return Err(EBUSY);
        }
        obj.number().n.store(n, Relaxed);
        self.xa
            .lock()
            .store(n as usize, obj.clone(), GFP_ATOMIC)
            .map_err(|e| e.error)?;
        Ok(())
    }

    /// Forgets the object numbered `n`.
    pub(crate) fn remove(&self, n: u32) {
        let mut taken = self.taken.lock();
        let gone = self.xa.lock().remove(n as usize);
        if let Some(id) = self.offset(n).filter(|_| gone.is_some()) {
            taken.pool.release_id(id);
        }
        drop(taken);
        // The object may go with the table's reference: not under the lock.
        drop(gone);
    }

    /// Marks `obj` used now, as a lookup does, for a reader that reached it through
    /// another object (an MR through the window bound to it): under the table's lock,
    /// which serialises the marks and which `remove` takes.
    pub(crate) fn mark(&self, obj: &T) {
        let _taken = self.taken.lock();
        obj.number().used.mark();
    }

    /// The object numbered `n`, if there is one, marked as used now ([`LastUse`]): a
    /// caller in an RCU read-side section is waited for by whoever removes the object
    /// and then waits past its last use.
    pub(crate) fn get(&self, n: u32) -> Option<Arc<T>> {
        self.find(n, T::WAITED_FOR)
    }

    /// The object numbered `n`, if there is one, not marked as used: for a caller in
    /// process context that keeps it alive by the reference it gets, which nobody waits
    /// for (its last reference may then be that caller's).
    pub(crate) fn hold(&self, n: u32) -> Option<Arc<T>> {
        self.find(n, false)
    }

    fn find(&self, n: u32, mark: bool) -> Option<Arc<T>> {
        let taken = self.taken.lock();
        // The xarray's guard is a temporary of this statement, so it goes before `taken`
        // restores the interrupts (a guard in the tail expression would outlive it).
        let found = self.xa.lock().get(n as usize).map(Arc::from);
        // Under the lock `remove` takes: a remover that has returned sees this mark.
        if let Some(obj) = found.as_ref().filter(|_| mark) {
            obj.number().used.mark();
        }
        drop(taken);
        found
    }
}

#[cfg(CONFIG_RDMA_RXE_RS_KUNIT_TEST)]
#[kernel::macros::kunit_tests(rxe_rs_table)]
mod tests {
    use super::*;

    struct Obj(Number);

    impl Numbered for Obj {
        fn number(&self) -> &Number {
            &self.0
        }
    }

    fn obj() -> Result<Arc<Obj>> {
        Ok(Arc::new(Obj(Number::new()), GFP_KERNEL)?)
    }

    fn table(first: u32, limit: u32) -> Result<Pin<KBox<IdTable<Obj>>>> {
        KBox::pin_init(IdTable::new(first, limit), GFP_KERNEL)
    }

    /// Inserts a new object; returns it with its number.
    fn add(t: &IdTable<Obj>) -> Result<(Arc<Obj>, u32)> {
        let o = obj()?;
        let n = t.insert(&o, GFP_KERNEL)?;
        Ok((o, n))
    }

    #[test]
    fn numbers_in_order_from_first() -> Result {
        let t = table(16, 1000)?;
        for want in 16..21 {
            let (o, n) = add(&t)?;
            assert_eq!(n, want);
            assert_eq!(o.number().get(), want);
            assert!(t.get(n).is_some_and(|found| Arc::ptr_eq(&found, &o)));
        }
        assert!(t.get(15).is_none());
        assert!(t.get(21).is_none());
        Ok(())
    }

    /// A freed number comes back only after the whole range has been handed out, the
    /// bitmap having grown past its first word on the way.
    #[test]
    fn freed_number_reused_last() -> Result {
        const SPAN: u32 = 300;
        let t = table(1, 1 + SPAN)?;
        let (_first, one) = add(&t)?;
        assert_eq!(one, 1);
        t.remove(one);
        assert!(t.get(one).is_none());
        let mut held = KVec::new();
        for want in 2..=SPAN {
            let (o, n) = add(&t)?;
            assert_eq!(n, want);
            held.push(o, GFP_KERNEL)?;
        }
        // Only the freed one is left: the search wraps around to it.
        let (_o, n) = add(&t)?;
        assert_eq!(n, one);
        assert!(add(&t).is_err_and(|e| e == ENOSPC));
        Ok(())
    }

    #[test]
    fn remove_forgets_and_frees() -> Result {
        let t = table(100, 104)?;
        let mut held = KVec::new();
        for _ in 0..4 {
            held.push(add(&t)?, GFP_KERNEL)?;
        }
        assert!(add(&t).is_err_and(|e| e == ENOSPC));
        t.remove(102);
        // A number nobody holds, and one out of range: nothing happens.
        t.remove(102);
        t.remove(7);
        assert!(t.get(102).is_none());
        assert!(t.hold(101).is_some());
        let (_o, n) = add(&t)?;
        assert_eq!(n, 102);
        Ok(())
    }

    /// Fixed numbers (the special QPs) live outside the cyclic range, once each.
    #[test]
    fn insert_at_outside_the_range() -> Result {
        let t = table(16, 64)?;
        let a = obj()?;
        assert!(t.insert_at(20, &a).is_err_and(|e| e == EINVAL));
        t.insert_at(1, &a)?;
        assert_eq!(a.number().get(), 1);
        let b = obj()?;
        assert!(t.insert_at(1, &b).is_err_and(|e| e == EBUSY));
        assert!(t.get(1).is_some_and(|found| Arc::ptr_eq(&found, &a)));
        // The cyclic range does not hand out a fixed number, nor is it disturbed by one.
        let (_o, n) = add(&t)?;
        assert_eq!(n, 16);
        t.remove(1);
        assert!(t.get(1).is_none());
        t.insert_at(1, &b)?;
        Ok(())
    }

    /// The table's reference goes with `remove`: the object is then the caller's alone.
    #[test]
    fn remove_drops_the_table_reference() -> Result {
        let t = table(1, 10)?;
        let (o, n) = add(&t)?;
        t.remove(n);
        assert!(Arc::into_unique_or_drop(o).is_some());
        Ok(())
    }
}
