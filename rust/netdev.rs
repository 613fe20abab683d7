// SPDX-License-Identifier: GPL-2.0

//! Network devices, as far as an RDMA provider sees them.
//!
//! C headers: [`include/linux/netdevice.h`](srctree/include/linux/netdevice.h),
//! [`include/linux/notifier.h`](srctree/include/linux/notifier.h)
//!
//! | Rust | C | lifetime |
//! |---|---|---|
//! | [`NetDevice`] | `struct net_device` | borrowed for the length of a callback |
//! | [`NetDeviceRef`] (`ARef<NetDevice>`) | `struct net_device` + one `dev_hold()` | owned reference, `dev_put()` on drop |
//! | [`Notifier`] | `struct notifier_block` on the netdev chain | registered while pinned, unregistered on drop |
//!
//! Netdev notifier callbacks run in process context with the RTNL held.

use super::bindings;
use core::ptr::NonNull;
use kernel::{
    error::to_result,
    prelude::*,
    sync::aref::{ARef, AlwaysRefCounted},
    types::Opaque,
};

/// A network device borrowed from the caller of a callback.
///
/// # Invariants
///
/// The wrapped `net_device` is valid (registered or being unregistered, but not freed) for
/// the lifetime of the borrow.
#[repr(transparent)]
pub(crate) struct NetDevice(Opaque<bindings::net_device>);

impl NetDevice {
    /// Borrows a `net_device` for `'a`.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a `net_device` that stays valid for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::net_device) -> &'a Self {
        // SAFETY: `NetDevice` is `repr(transparent)` over the C struct; the caller
        // guarantees validity for `'a`.
        unsafe { &*ptr.cast() }
    }

    /// The raw pointer, for calls into C.
    pub(crate) fn as_raw(&self) -> *mut bindings::net_device {
        self.0.get()
    }

    /// The current MTU of the device.
    pub(crate) fn mtu(&self) -> u32 {
        // SAFETY: By the type invariant the device is valid.
        unsafe { bindings::rxe_rs_netdev_mtu(self.as_raw()) }
    }

    /// The device's index in its namespace.
    pub(crate) fn ifindex(&self) -> i32 {
        // SAFETY: By the type invariant the device is valid.
        unsafe { bindings::rxe_rs_netdev_ifindex(self.as_raw()) }
    }

    /// The device a VLAN device sits on (the one at the bottom of stacked VLAN devices);
    /// `None` if this is not a VLAN device.
    pub(crate) fn vlan_real_dev(&self) -> Option<&NetDevice> {
        // SAFETY: By the type invariant the device is valid.
        let real = unsafe { bindings::rxe_rs_vlan_real_dev(self.as_raw()) };
        // SAFETY: A VLAN device holds a reference on the device it sits on until it is
        // freed itself (`vlan_dev_free`), so that one lives at least as long as the
        // borrow of this one.
        (!real.is_null()).then(|| unsafe { NetDevice::from_raw(real) })
    }

    /// The VLAN ID of an 802.1Q VLAN device; `None` if this is not a VLAN device.
    pub(crate) fn vlan_id(&self) -> Option<u16> {
        // SAFETY: By the type invariant the device is valid.
        let id = unsafe { bindings::rxe_rs_vlan_id(self.as_raw()) };
        u16::try_from(id).ok()
    }

    /// Whether the device is administratively up (`IFF_UP`).
    pub(crate) fn is_up(&self) -> bool {
        // SAFETY: By the type invariant the device is valid.
        let flags = unsafe { bindings::rxe_rs_netdev_flags(self.as_raw()) };
        flags & bindings::RXE_RS_IFF_UP != 0
    }

    /// The RDMA port state the device's carrier and operational state imply.
    pub(crate) fn port_state(&self) -> super::device::PortState {
        // SAFETY: By the type invariant the device is valid.
        let state = unsafe { bindings::rxe_rs_curr_port_state(self.as_raw()) };
        super::device::PortState::from_raw(state as u32)
    }

    /// Makes the device receive frames for the multicast link-layer address `addr`
    /// (counted: as many [`Self::mc_del`] undo it). Process context.
    pub(crate) fn mc_add(&self, addr: &[u8; 6]) -> Result {
        // SAFETY: By the type invariant the device is valid; `addr` holds the device's
        // address length (6 for Ethernet, the only link layer of our devices).
        kernel::error::to_result(unsafe { bindings::dev_mc_add(self.as_raw(), addr.as_ptr()) })
    }

    /// Undoes one [`Self::mc_add`] of `addr`. Process context.
    pub(crate) fn mc_del(&self, addr: &[u8; 6]) {
        // SAFETY: As in `mc_add`. An address not added is refused, which changes nothing.
        let _ = unsafe { bindings::dev_mc_del(self.as_raw(), addr.as_ptr()) };
    }

    /// The modified EUI-64 built from the device's MAC address.
    ///
    /// A device without a MAC address gets a random one, since connection management
    /// needs a unique node GUID. The bytes are in network order.
    pub(crate) fn eui64(&self) -> [u8; 8] {
        let mut eui = [0u8; 8];
        // SAFETY: By the type invariant the device is valid; `eui` has the 8 bytes the
        // helper writes.
        unsafe { bindings::rxe_rs_netdev_eui48(self.as_raw(), eui.as_mut_ptr()) };
        eui
    }
}

// SAFETY: A `net_device` is usable from any thread: its methods here call functions
// safe in any thread, under whatever context rule each one states.
unsafe impl Send for NetDevice {}
// SAFETY: As for `Send`; the methods take `&self` and may run concurrently.
unsafe impl Sync for NetDevice {}

// SAFETY: `dev_hold()` and `dev_put()` count the references to a `net_device`, which is
// not freed while one is held; `dev_hold()` always succeeds on a device that is not
// freed, which a `&NetDevice` guarantees (type invariant).
unsafe impl AlwaysRefCounted for NetDevice {
    fn inc_ref(&self) {
        // SAFETY: The device is valid by the type invariant.
        unsafe { bindings::rxe_rs_netdev_hold(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller hands over one reference it holds; `NetDevice` is
        // `repr(transparent)` over the C struct.
        unsafe { bindings::rxe_rs_netdev_put(obj.cast().as_ptr()) };
    }
}

/// An owned reference to a network device (a `dev_hold()` that is dropped with it).
pub(crate) type NetDeviceRef = ARef<NetDevice>;

impl NetDevice {
    /// A counted reference to the netdev (`dev_hold()`).
    pub(crate) fn hold(&self) -> NetDeviceRef {
        ARef::from(self)
    }

    /// Takes ownership of one reference already held on `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must be a valid `net_device` on which the caller holds a reference that it
    /// hands over.
    pub(crate) unsafe fn from_raw_owned(ptr: NonNull<bindings::net_device>) -> NetDeviceRef {
        // SAFETY: `NetDevice` is `repr(transparent)` over the C struct; the caller hands
        // over the reference `ARef` owns from now on.
        unsafe { ARef::from_raw(ptr.cast()) }
    }
}

/// A netdev event an RDMA provider reacts to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum NetdevEvent {
    /// The device is being unregistered; every user must let go of it.
    Unregister,
    /// The device's MTU changed.
    ChangeMtu,
    /// The device was brought up (`NETDEV_UP`).
    Up,
    /// The device was brought down (`NETDEV_DOWN`).
    Down,
    /// The device's state changed: carrier, operational state (`NETDEV_CHANGE`).
    Change,
    /// Anything else. (ib_core dispatches the RDMA port's state changes itself.)
    Other,
}

/// Handler of netdev notifier events.
pub(crate) trait NetdevEvents: 'static {
    /// Called for every event on every network device of the system, with the RTNL held.
    fn event(event: NetdevEvent, dev: &NetDevice);
}

/// A registered netdev notifier that calls `T::event`.
///
/// # Invariants
///
/// `nb` is registered on the netdevice notifier chain for as long as the object lives.
#[pin_data(PinnedDrop)]
pub(crate) struct Notifier<T: NetdevEvents> {
    #[pin]
    nb: Opaque<bindings::notifier_block>,
    _p: core::marker::PhantomData<T>,
}

// SAFETY: The notifier block is only touched by the notifier chain, under its own lock.
unsafe impl<T: NetdevEvents> Send for Notifier<T> {}
// SAFETY: There are no methods taking `&self`.
unsafe impl<T: NetdevEvents> Sync for Notifier<T> {}

impl<T: NetdevEvents> Notifier<T> {
    /// Registers a netdev notifier.
    pub(crate) fn register() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            nb <- Opaque::try_ffi_init(|slot: *mut bindings::notifier_block| {
                // SAFETY: `slot` is valid for writes and pinned for the life of `Self`;
                // the chain keeps the pointer until `PinnedDrop` unregisters it.
                unsafe {
                    slot.write(bindings::notifier_block {
                        notifier_call: Some(Self::notifier_call),
                        ..pin_init::zeroed()
                    });
                    to_result(bindings::register_netdevice_notifier(slot))
                }
            }),
            _p: core::marker::PhantomData,
        })
    }

    /// # Safety
    ///
    /// Only for the netdev notifier chain, which passes a live notifier block and event data.
    unsafe extern "C" fn notifier_call(
        _nb: *mut bindings::notifier_block,
        event: kernel::ffi::c_ulong,
        ptr: *mut kernel::ffi::c_void,
    ) -> kernel::ffi::c_int {
        // SAFETY: Netdev notifier data always carries the device.
        let raw = unsafe { bindings::rxe_rs_notifier_info_to_dev(ptr) };
        // SAFETY: The device is valid for the duration of the notifier call.
        let dev = unsafe { NetDevice::from_raw(raw) };
        let event = match event {
            bindings::RXE_RS_NETDEV_UNREGISTER => NetdevEvent::Unregister,
            bindings::RXE_RS_NETDEV_CHANGEMTU => NetdevEvent::ChangeMtu,
            bindings::RXE_RS_NETDEV_UP => NetdevEvent::Up,
            bindings::RXE_RS_NETDEV_DOWN => NetdevEvent::Down,
            bindings::RXE_RS_NETDEV_CHANGE => NetdevEvent::Change,
            _ => NetdevEvent::Other,
        };
        T::event(event, dev);
        bindings::RXE_RS_NOTIFY_DONE
    }
}

#[pinned_drop]
impl<T: NetdevEvents> PinnedDrop for Notifier<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: By the type invariant the block is registered. Unregistering waits for
        // running callbacks (the chain is protected by the RTNL).
        unsafe { bindings::unregister_netdevice_notifier(self.nb.get()) };
    }
}
