// SPDX-License-Identifier: GPL-2.0

//! The host build of the roce crate (cargo tests and fuzzing): the same files that
//! rxe_rs.ko compiles as its `roce` module.

#![no_std]

#[path = "lib.rs"]
mod roce;

pub use roce::*;
