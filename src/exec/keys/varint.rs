//! LEB128 varints, as the key engine's arenas write their lengths and
//! rows: a byte for anything below 128.

/// Appends `v` to `out`.
pub(super) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The varint at the start of `buf`, and the bytes after it. The arenas
/// are written here, so they are well formed.
#[inline]
pub(super) fn take_varint(buf: &[u8]) -> (u64, &[u8]) {
    let mut v = 0u64;
    for (i, &b) in buf.iter().enumerate() {
        v |= u64::from(b & 0x7f).checked_shl(7 * i as u32).unwrap_or(0);
        if b < 0x80 {
            return (v, &buf[i + 1..]);
        }
    }
    (v, &[])
}
