//! Issue leases kept in git itself.
//!
//! Each issue's claim history, its *tenure ledger*, is a chain of commits under
//! `refs/leases/<issue>`. Each commit's tree holds one blob, `lease.json`, with the whole
//! state after that event: holder, fencing token, acquired and expiry times, and the event.
//! A claim is a compare-and-swap of the ref against the value that was read, so two racers
//! never both win. The token counts tenures; refs are never deleted and history is never
//! rewritten, so the count survives release, expiry and replication.
//!
//! - [`rules`] holds every rule as a pure function of (state, request, `now`), including the
//!   one definition of liveness, [`is_live`].
//! - [`Ledger`] applies them to a repository with gix; [`Remote`] to a remote through
//!   `git push` with an expected old value; [`verify`] re-checks recorded chains.
//! - Time is always passed in: nothing in this crate reads the clock.
//!
//! The storage format is documented in `docs/FORMAT.md`.

pub mod error;
pub mod hook;
pub mod issue;
pub mod lease;
pub mod ledger;
pub mod liveness;
pub mod mirror;
pub mod remote;
pub mod rules;
pub mod session;
pub mod store;
pub mod time;
pub mod verify;
pub mod view;

pub use error::{Error, ErrorKind, Result};
pub use issue::IssueId;
pub use lease::{Event, Lease, FORMAT_VERSION};
pub use ledger::{Ledger, Report};
pub use remote::Remote;
pub use rules::{is_live, Claim, Credentials, Ending, FenceFailure, Outcome};
pub use store::{Entry, Store};
pub use time::Ttl;
