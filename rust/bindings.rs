// SPDX-License-Identifier: GPL-2.0

//! Raw bindings to ib_core, uverbs and the netdev pieces rxe_rs uses: one file for the
//! generic layer and the software-RoCE part (`rust/sw/`), whose C shim's declarations
//! (`sw/helpers.h`) it includes too; only code of those two parts uses it.
//!
//! C headers: [`rust/bindings_helper.h`] (in this repository), which pulls in
//! [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h) and friends.
//!
//! Generated at build time by the kernel's bindgen with the flags of the kernel's own
//! `rust/Makefile`, allow-listed by `rust/bindgen_parameters`. The driver never uses it.

#![allow(
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    clippy::as_underscore,
    clippy::cast_lossless,
    clippy::ptr_as_ptr,
    clippy::ref_as_ptr,
    missing_docs,
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    improper_ctypes,
    unreachable_pub,
    unsafe_op_in_unsafe_fn,
    dead_code,
    unnecessary_transmutes
)]

use kernel::ffi;
use pin_init::{MaybeZeroable, Zeroable};

// The kernel maps these to `isize`/`usize` by hand (they are block-listed).
type __kernel_size_t = usize;
type __kernel_ssize_t = isize;
type __kernel_ptrdiff_t = isize;

// SAFETY: `__BindgenBitfieldUnit<Storage>` is a newtype around `Storage`, so all zeroes
// is a valid value whenever it is one for `Storage`.
unsafe impl<Storage> Zeroable for __BindgenBitfieldUnit<Storage> where Storage: Zeroable {}

include!(concat!(env!("RXE_RS_GEN_DIR"), "/bindings_generated.rs"));
