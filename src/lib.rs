//! Issue leases kept in git itself.
//!
//! Each issue's claim history, its *tenure ledger*, is a chain of commits under
//! `refs/leases/<issue>`. Each commit's tree holds one blob, `lease.json`, with the whole
//! state after that event: holder, fencing token, acquired and expiry times, and the event.
//! A claim is a compare-and-swap of the ref against the value that was read, so two racers
//! never both win. The token counts tenures; refs are deleted only once the archive records
//! their tip ([`archive`]), and history is never
//! rewritten, so the count survives release, expiry and replication.
//!
//! - [`rules`] holds every rule as a pure function of (state, request, `now`), including the
//!   one definition of liveness, [`is_live`].
//! - [`step::judge`] is the one check of a recorded step's legitimacy, for audits and for
//!   pushes arriving at a server.
//! - [`Ledger`] applies the rules to a repository with gix; [`Remote`] to a remote through
//!   `git push` with an expected old value; [`backend`] is the seam between them;
//!   [`verify`] re-checks recorded chains. See ARCHITECTURE.md for the whole map.
//! - Time is always passed in: every rule takes `now`. The clock is read only where no rule
//!   is decided: the age of temporary files ([`gc`]), the times of reflog entries and object
//!   files, and the command line's reading of `now` ([`os::system_now`]; `run` takes it to
//!   the nanosecond when `GIT_LEASE_NOW` is unset, so that its renew deadlines line up with
//!   the clock others judge its lease by).
//!
//! The storage format is documented in `docs/FORMAT.md`.
//!
//! # Embedding it in place of a lease table
//!
//! ```
//! use chrono::{TimeZone, Utc};
//! use git_lease::{Claim, Ending, Holder, IssueId, Ledger, Outcome, Ttl};
//!
//! # let dir = tempfile::tempdir()?;
//! # std::process::Command::new("git").args(["init", "-q", "--bare"]).arg(dir.path()).status()?;
//! let ledger = Ledger::open(dir.path())?;
//! let issue: IssueId = "42".parse()?;
//! let t0 = Utc.with_ymd_and_hms(2026, 11, 30, 14, 0, 0).unwrap();
//!
//! let (alice, bob) = (Holder::new("alice")?, Holder::new("bob")?);
//!
//! let first = ledger.acquire(&issue, &Claim::new(alice, Ttl::parse("15m")?), t0)?;
//! assert_eq!(first.outcome, Outcome::Acquired);
//! assert_eq!(first.lease().map(|l| l.token), Some(1));
//!
//! // Someone else is refused while alice's lease is live...
//! let bobs = Claim::new(bob.clone(), Ttl::parse("15m")?);
//! assert_eq!(ledger.acquire(&issue, &bobs, t0)?.outcome, Outcome::Held);
//!
//! // ...and takes over once it expired, with the next fencing token.
//! let later = t0 + chrono::Duration::minutes(15);
//! let second = ledger.acquire(&issue, &bobs, later)?;
//! assert_eq!(second.lease().map(|l| l.token), Some(2));
//!
//! // alice's stale token no longer passes the fencing check.
//! assert!(ledger.check(&issue, 1, None, later)?.is_err());
//! assert_eq!(ledger.release(&issue, &bob, Ending::Release, later)?.outcome, Outcome::Released);
//! assert_eq!(ledger.log(&issue)?.len(), 3);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod autogc;
pub mod cache;
pub mod config;
pub mod doctor;
pub mod error;
pub mod gc;
pub mod git;
pub mod guard;
pub mod hook;
pub mod ledger;
pub mod model;
pub mod os;
pub mod probe;
pub mod redact;
pub mod rules;
pub mod sign;
pub mod store;
pub mod text;
pub mod timeline;
pub mod watch;

// The modules of each group stay reachable at the crate's root, as they were before the
// groups existed (`git_lease::remote`, `git_lease::time`, ...).
pub(crate) use ledger::cas;
pub use ledger::{archive, backend, batch, listing, mirror, one_of_many, remote, verify};
pub use model::{holder, issue, lease, liveness, remark, session, time};
pub use rules::step;
pub use store::durability;
pub(crate) use store::loose;

pub use error::{Error, ErrorKind, Result};
pub use holder::Holder;
pub use issue::IssueId;
pub use lease::{Event, Lease, FORMAT_VERSION};
pub use ledger::{Ledger, Report};
pub use remark::{Remark, RemarkKind};
pub use remote::Remote;
pub use rules::{is_live, Claim, Credentials, Ending, FenceFailure, Outcome};
pub use store::{Entry, Store};
pub use time::Ttl;
