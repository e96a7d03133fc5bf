//! The operator's stable hash: the values it yields are part of the product (the minute `H` picks
//! for an Eru, the jitter of its restarts), so it must give the same number for the same input in
//! every process, on every platform and in every release. std's `DefaultHasher` promises none of
//! that; FNV-1a (64 bit) over the bytes, finished with SplitMix64's mixer (so nearby inputs and
//! salts land far apart), does and is a dozen lines.

/// FNV-1a 64 of `bytes` after the 8 bytes of `salt`, mixed by SplitMix64.
pub fn stable_hash(bytes: &str, salt: u64) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    for b in salt.to_le_bytes().iter().chain(bytes.as_bytes()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(PRIME);
    }
    mix(h)
}

/// SplitMix64's finalizer.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_pinned() {
        // changing these moves every user's jittered restarts and hashed schedules
        assert_eq!(stable_hash("", 0), 0x5ba3_14b8_cfda_3b6b);
        assert_eq!(stable_hash("default/web", 0), 0xc47e_441d_d5dd_0635);
        assert_eq!(stable_hash("4f1c2a9e-uid", 1_795_921_200_000), 0xa88f_5bac_ee7b_4da4);
        assert_ne!(stable_hash("default/web", 0), stable_hash("default/web", 1));
        assert_ne!(stable_hash("default/web", 0), stable_hash("default/wec", 0));
    }
}
