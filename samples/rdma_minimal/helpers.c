// SPDX-License-Identifier: GPL-2.0
/*
 * The generic layer's C shim, compiled into this module: an object file is linked into
 * one module only.
 */
#include "../../rust/helpers.c"
