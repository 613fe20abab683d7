#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# kselftest entry: every test of guest-tests.sh on rxe_rs (TAP; exit 1 if one failed).
cd "$(dirname "$0")" && DRIVER=rxe_rs HOST=$PWD BIN=$PWD exec sh guest-tests.sh
