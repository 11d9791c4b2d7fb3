//! The model: what a lease is made of, each piece validated once where it is made: issue ids,
//! holder names, the `lease.json` record and its codec, instants and TTLs that always read
//! back, session secrets kept as hashes, and what a machine can see of holder processes.

pub mod holder;
pub mod issue;
pub mod lease;
pub mod liveness;
pub mod remark;
pub mod session;
pub mod time;
