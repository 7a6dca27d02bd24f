//! A tiny deterministic random number generator (xorshift64*), so that a
//! soak or benchmark run can be replayed from its printed seed without a
//! dependency.
#![allow(dead_code)]

use std::time::Duration;

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// Uniform in [0, max).
    pub fn duration(&mut self, max: Duration) -> Duration {
        max.mul_f64((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }
}
