//! What the rules' unit tests share: exact instants, issue 42, holders, records as read.

use chrono::{DateTime, Duration, TimeZone, Utc};

use crate::holder::Holder;
use crate::issue::IssueId;
use crate::lease::Lease;
use crate::liveness::Current;
use crate::time::Ttl;

/// `min` minutes after 2026-11-30 12:00 UTC.
pub(crate) fn t(min: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap() + Duration::minutes(min)
}

/// Issue 42.
pub(crate) fn id() -> IssueId {
    IssueId::new("42").unwrap()
}

/// A TTL of `min` minutes.
pub(crate) fn ttl(min: i64) -> Ttl {
    Ttl::For(Duration::minutes(min))
}

/// The holder `name`.
pub(crate) fn h(name: &str) -> Holder {
    Holder::new(name).unwrap()
}

/// `lease` as a reader without local liveness has it.
pub(crate) fn rec(lease: &Lease) -> Option<Current<'_>> {
    Some(Current::recorded(lease))
}
