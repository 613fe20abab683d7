// SPDX-License-Identifier: GPL-2.0

//! Packet sequence numbers: 24-bit counters that wrap, compared by their distance modulo
//! 2^24 (a PSN is "after" another when it is less than half the space ahead of it).

use core::cmp::Ordering;

/// The bits of a PSN.
pub const PSN_MASK: u32 = 0x00ff_ffff;

/// `psn` advanced by `n`, wrapped to 24 bits.
pub fn add(psn: u32, n: u32) -> u32 {
    psn.wrapping_add(n) & PSN_MASK
}

/// The signed distance from `b` to `a`, in `-2^23..2^23`: positive when `a` comes after
/// `b`.
pub fn diff(a: u32, b: u32) -> i32 {
    // Shift the 24-bit difference to the top of an i32 and back, sign-extending it.
    ((a.wrapping_sub(b) << 8) as i32) >> 8
}

/// How far `a` is ahead of `b`, in `0..2^24`: the count of PSNs from `b` up to `a`,
/// for a distance that may exceed half the space (such as the span of one READ).
pub fn ahead(a: u32, b: u32) -> u32 {
    a.wrapping_sub(b) & PSN_MASK
}

/// How `a` compares with `b` in sequence order.
pub fn cmp(a: u32, b: u32) -> Ordering {
    diff(a, b).cmp(&0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator, so that failures reproduce.
    fn xorshift(s: &mut u64) -> u64 {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s
    }

    #[test]
    fn wraps() {
        assert_eq!(add(PSN_MASK, 1), 0);
        assert_eq!(add(0xff_fff0, 0x20), 0x10);
        assert_eq!(diff(0x10, 0xff_fff0), 0x20);
        assert_eq!(diff(0xff_fff0, 0x10), -0x20);
        assert_eq!(cmp(0, PSN_MASK), Ordering::Greater);
        assert_eq!(cmp(5, 5), Ordering::Equal);
        assert_eq!(ahead(0x10, 0xff_fff0), 0x20);
        assert_eq!(ahead(0xff_fff0, 0x10), 0xff_ffe0);
        assert_eq!(ahead(0x80_0000, 0), 0x80_0000);
    }

    #[test]
    fn half_window() {
        // Exactly half the space apart reads as "before": the range is -2^23..2^23.
        assert_eq!(diff(0x80_0000, 0), -0x80_0000);
        assert_eq!(diff(0x7f_ffff, 0), 0x7f_ffff);
    }

    #[test]
    fn distance_properties() {
        let mut s = 0x1234_5678_9abc_def1;
        for _ in 0..100_000 {
            let a = (xorshift(&mut s) as u32) & PSN_MASK;
            let n = (xorshift(&mut s) as u32) % 0x80_0000;
            let b = add(a, n);
            assert_eq!(diff(b, a), n as i32);
            assert_eq!(diff(a, b), -(n as i32));
            assert_eq!(cmp(a, b), cmp(0, n));
            // Only the low 24 bits of the operands count.
            assert_eq!(diff(b | 0xff00_0000, a), diff(b, a));
        }
    }
}
