//! The operator's stable hash. The numbers it yields are part of the product (the minute `H`
//! picks for an Eru, the jitter of its restarts): the same input gives the same number in every
//! process, on every platform and in every release. std's `DefaultHasher` promises none of that
//! (and `RandomState` differs per process); FNV-1a 64 of the bytes, as the seed of a SplitMix64
//! generator (whose mixer spreads FNV's weak low bits), does in a dozen lines.

/// FNV-1a, 64 bits (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// SplitMix64's increment ("golden gamma").
const SPLITMIX64_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// Output number `n` (from 1) of a SplitMix64 generator seeded with `seed` (Steele, Lea and
/// Flood; Vigna's `splitmix64.c`).
pub fn splitmix64(seed: u64, n: u64) -> u64 {
    let mut z = seed.wrapping_add(SPLITMIX64_GAMMA.wrapping_mul(n));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_values() {
        // FNV-1a 64 test vectors
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
        // the first three outputs of SplitMix64 seeded with 1234567 (Vigna's splitmix64.c)
        assert_eq!(
            [1, 2, 3].map(|n| splitmix64(1_234_567, n)),
            [6457827717110365317, 3203168211198807973, 9817491932198370423]
        );
    }
}
