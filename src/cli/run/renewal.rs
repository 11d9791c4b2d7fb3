//! How often `run` renews, and when it stops its child if no renewal has succeeded (the renew
//! deadline, see the [module above](super)).

use std::time::Duration;

use chrono::{DateTime, Utc};
use git_lease::{Error, Ttl};

/// When `run` stops its child if no renewal has succeeded: the renew deadline, computed here
/// only (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StopWindow {
    /// The lease's recorded expiry.
    pub(super) expires_at: DateTime<Utc>,
    /// The renew deadline: SIGTERM from then on.
    pub(crate) term_at: DateTime<Utc>,
    /// SIGKILL at the latest.
    pub(super) kill_by: DateTime<Utc>,
}

impl StopWindow {
    /// Recorded instants are whole seconds: a renewal at any moment of a second records an
    /// expiry up to this much sooner than its moment plus the TTL.
    const GRAIN: chrono::Duration = chrono::Duration::seconds(1);

    /// The stop reserve of a lease of `ttl`: a third of its guaranteed life.
    pub(super) fn reserve(ttl: chrono::Duration) -> chrono::Duration {
        (ttl - Self::GRAIN).max(chrono::Duration::zero()) / 3
    }

    /// The window of a lease of `ttl` recorded to expire at `expires_at`.
    pub(crate) fn before(expires_at: DateTime<Utc>, ttl: chrono::Duration) -> StopWindow {
        let reserve = Self::reserve(ttl);
        StopWindow {
            expires_at,
            term_at: expires_at - reserve,
            kill_by: expires_at - reserve / 2,
        }
    }

    /// How long after a renewal the deadline comes at the soonest: the renew interval must be
    /// shorter, or no renewal could land in time.
    pub(super) fn renew_deadline(ttl: chrono::Duration) -> chrono::Duration {
        ttl - Self::GRAIN - Self::reserve(ttl)
    }
}

/// How often a lease that never expires is read by default, to find it revoked.
pub(super) const NEVER_EVERY: Duration = Duration::from_secs(10);

/// Returns how often to renew: `every`, or a third of the TTL (half the renew deadline for TTLs
/// under 3s); for a lease that never expires, how often to read it (`every`, or
/// [`NEVER_EVERY`]). An interval that cannot renew before the renew deadline is refused.
pub(crate) fn renew_interval(ttl: Ttl, every: Option<Duration>) -> Result<Option<Duration>, Error> {
    let Ttl::For(ttl) = ttl else {
        return match every.unwrap_or(NEVER_EVERY) {
            every if every.is_zero() => {
                Err(Error::InvalidInput("--every must be longer than 0s".into()))
            }
            every => Ok(Some(every)),
        };
    };
    let deadline = StopWindow::renew_deadline(ttl);
    if deadline <= chrono::Duration::zero() {
        return Err(Error::InvalidInput(format!(
            "a {} lease is too short for run: recorded in whole seconds, it leaves no time to \
             renew; give --ttl 2s or more",
            git_lease::time::short_duration(ttl),
        )));
    }
    let interval = match every {
        Some(every) => every,
        // From 3s on, a third of the TTL comes a third of a second or more before the deadline.
        None if ttl >= chrono::Duration::seconds(3) => (ttl / 3).to_std().unwrap_or_default(),
        None => (deadline / 2).to_std().unwrap_or_default(),
    };
    if interval.is_zero() {
        return Err(Error::InvalidInput("--every must be longer than 0s".into()));
    }
    if !chrono::Duration::from_std(interval).is_ok_and(|i| i < deadline) {
        return Err(Error::InvalidInput(format!(
            "--every {} cannot keep a {} lease: run stops its command when no renewal has \
             succeeded for {} (the TTL less a second, less a third of that for stopping); give \
             a shorter --every or a longer --ttl",
            millis(interval),
            git_lease::time::short_duration(ttl),
            millis(deadline.to_std().unwrap_or_default()),
        )));
    }
    Ok(Some(interval))
}

/// Returns `d` for people, to the millisecond.
pub(super) fn millis(d: Duration) -> humantime::FormattedDuration {
    humantime::format_duration(Duration::from_millis(
        u64::try_from(d.as_millis()).unwrap_or(u64::MAX),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn the_stop_window_ends_before_the_expiry_and_after_the_renew_interval() {
        let expires_at = Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 3).unwrap();
        let ms = chrono::Duration::milliseconds;
        let w = StopWindow::before(expires_at, chrono::Duration::seconds(3));
        assert_eq!(
            expires_at - w.term_at,
            ms(666) + chrono::Duration::microseconds(666) + chrono::Duration::nanoseconds(666)
        );
        assert!(w.term_at < w.kill_by && w.kill_by < expires_at);
        assert_eq!(
            StopWindow::renew_deadline(chrono::Duration::seconds(3)),
            ms(1333) + chrono::Duration::nanoseconds(333_334)
        );
        let hour = chrono::Duration::hours(1);
        assert_eq!(
            renew_interval(Ttl::For(hour), None).ok().flatten(),
            Some(Duration::from_secs(1200))
        );
        assert_eq!(
            renew_interval(Ttl::For(chrono::Duration::seconds(2)), None)
                .ok()
                .flatten(),
            Some(Duration::from_nanos(333_333_333))
        );
        assert!(renew_interval(Ttl::For(chrono::Duration::seconds(1)), None).is_err());
        assert!(renew_interval(Ttl::For(hour), Some(Duration::from_secs(2400))).is_err());
        assert_eq!(
            renew_interval(Ttl::Never, None).ok().flatten(),
            Some(NEVER_EVERY)
        );
        assert!(renew_interval(Ttl::Never, Some(Duration::ZERO)).is_err());
    }
}
