//! A lock-free token bucket for events the sandboxed program can trigger. It is the generic cell
//! rate algorithm: one atomic "theoretical arrival time" replaces the token count and the refill
//! clock, so [`RateLimit::admit`] is a compare-and-swap loop that never sleeps or takes a lock.
//! Promises: after an idle period, `burst` events pass at once; sustained, `per_sec` events pass
//! per second; the rest are refused (the caller counts them).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

const NANOS_PER_SEC: u64 = 1_000_000_000;

#[derive(Debug)]
pub(crate) struct RateLimit {
    base: Instant,
    /// Nanoseconds since `base` at which the bucket will be full again.
    full_at: AtomicU64,
    /// Nanoseconds one event costs.
    interval: u64,
    /// How far `full_at` may run ahead of now: the burst, in nanoseconds.
    tolerance: u64,
}

impl RateLimit {
    /// `per_sec` and `burst` are raised to at least 1.
    pub(crate) fn new(per_sec: u32, burst: u32) -> RateLimit {
        let interval = NANOS_PER_SEC / u64::from(per_sec.max(1));
        RateLimit {
            base: Instant::now(),
            full_at: AtomicU64::new(0),
            interval,
            tolerance: interval.saturating_mul(u64::from(burst.max(1)) - 1),
        }
    }

    /// Takes one token if there is one.
    pub(crate) fn admit(&self) -> bool {
        self.admit_by(Instant::now())
    }

    /// [`admit`](Self::admit) at `now`, a reading of the clock the caller made already.
    pub(crate) fn admit_by(&self, now: Instant) -> bool {
        let since = now.saturating_duration_since(self.base);
        self.admit_at(u64::try_from(since.as_nanos()).unwrap_or(u64::MAX))
    }

    fn admit_at(&self, now: u64) -> bool {
        let mut full_at = self.full_at.load(Ordering::Relaxed);
        loop {
            let start = full_at.max(now);
            if start - now > self.tolerance {
                return false;
            }
            let next = start.saturating_add(self.interval);
            match self.full_at.compare_exchange_weak(
                full_at,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(current) => full_at = current,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_rate() {
        let limit = RateLimit::new(10, 5);
        let passed = (0..100).filter(|_| limit.admit_at(0)).count();
        assert_eq!(passed, 5);
        // One interval later, one more token.
        assert!(limit.admit_at(NANOS_PER_SEC / 10));
        assert!(!limit.admit_at(NANOS_PER_SEC / 10));
        // After a long idle period the full burst is back, not more.
        let later = 100 * NANOS_PER_SEC;
        assert_eq!((0..100).filter(|_| limit.admit_at(later)).count(), 5);
    }

    #[test]
    fn sustained_rate_is_bounded() {
        let limit = RateLimit::new(1000, 1);
        // 10,000 attempts spread over one second: about 1000 pass.
        let passed = (0..10_000u64)
            .filter(|i| limit.admit_at(i * NANOS_PER_SEC / 10_000))
            .count();
        assert_eq!(passed, 1000);
    }

    #[test]
    fn zero_limits_are_raised_to_one() {
        let limit = RateLimit::new(0, 0);
        assert!(limit.admit_at(0));
        assert!(!limit.admit_at(0));
        assert!(limit.admit_at(NANOS_PER_SEC));
    }
}
