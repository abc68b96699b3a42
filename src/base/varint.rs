//! LEB128 variable-length integers, as stored formats use them for small or delta-coded
//! numbers: seven bits a byte, low bits first, the high bit set on every byte but the last.

/// Appends `v` in 1 to 10 bytes.
pub fn put(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Reads one from the front of `b`, moving it past; `None` if `b` ends inside it or it does
/// not fit 64 bits (untrusted bytes never overflow or read past the end).
pub fn take(b: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for (i, &byte) in b.iter().enumerate().take(10) {
        let bits = u64::from(byte & 0x7f);
        // The tenth byte holds the 64th bit only.
        if i == 9 && bits > 1 {
            return None;
        }
        v |= bits << (7 * i);
        if byte & 0x80 == 0 {
            *b = &b[i + 1..];
            return Some(v);
        }
    }
    None
}

/// A signed difference as an unsigned varint value: small magnitudes of either sign stay small.
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The inverse of [`zigzag`].
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_every_truncation_is_refused() {
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX - 1, u64::MAX] {
            let mut out = Vec::new();
            put(&mut out, v);
            let mut b = &out[..];
            assert_eq!(take(&mut b), Some(v));
            assert!(b.is_empty());
            for cut in 0..out.len() {
                assert_eq!(take(&mut &out[..cut]), None, "{v} cut at {cut}");
            }
        }
        // Past 64 bits: an eleventh byte, or a tenth holding more than the last bit.
        assert_eq!(take(&mut &[0xff; 11][..]), None);
        assert_eq!(take(&mut &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02][..]), None);
        for v in [0, 1, -1, 63, -64, i64::MAX, i64::MIN] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!((zigzag(0), zigzag(-1), zigzag(1)), (0, 1, 2));
    }
}
