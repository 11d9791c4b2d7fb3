//! The SQLite peer: the same lease rules as git-lease, on one SQLite table.
//!
//! This is the design git-lease replaces (a server's lease table), kept as small and as fast as
//! it honestly can be so that the comparison is fair:
//!
//! - table `leases(issue TEXT PRIMARY KEY, holder TEXT NULL, token INTEGER NOT NULL,
//!   acquired_at INTEGER NULL, expires_at INTEGER NULL)`, times in unix seconds;
//! - WAL journal, `busy_timeout` 5000 ms, `synchronous` NORMAL or FULL ([`Sync`]);
//! - every operation is one `BEGIN IMMEDIATE` transaction: read the row, decide, write, commit.
//!
//! The rules are git-lease's ([`git_lease::rules`]): a lease is live iff it has a holder and
//! (no expiry, or `now < expires_at`); an acquire of a free, expired or absent lease starts a
//! new tenure with token + 1; by the live holder it keeps the token and `acquired_at` with a
//! fresh expiry; by anyone else it answers `held`. A release by the live holder (or by anyone
//! once expired) clears the holder and keeps the token; a release of nothing answers
//! `not_held`; of someone else's live lease, `not_holder`.

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

pub use rusqlite::Error;

/// The `synchronous` setting of the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sync {
    /// `synchronous=NORMAL`: in WAL mode, commits are not fsynced, checkpoints are.
    Normal,
    /// `synchronous=FULL`: every commit fsyncs the WAL.
    Full,
}

impl Sync {
    /// Parses `normal` or `full` (any case).
    pub fn parse(text: &str) -> Option<Sync> {
        match text.to_ascii_lowercase().as_str() {
            "normal" => Some(Sync::Normal),
            "full" => Some(Sync::Full),
            _ => None,
        }
    }

    /// The pragma value.
    pub fn as_str(self) -> &'static str {
        match self {
            Sync::Normal => "NORMAL",
            Sync::Full => "FULL",
        }
    }
}

/// What an operation answered; the names match git-lease's outcomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The caller holds the lease now (a new tenure, or a re-acquire by the live holder).
    Acquired,
    /// Someone else holds the lease; nothing changed.
    Held,
    /// The lease was freed; its token is kept.
    Released,
    /// Nothing was held; nothing changed.
    NotHeld,
    /// Someone else holds the lease live; nothing changed.
    NotHolder,
}

impl Outcome {
    /// The name git-lease's `--json` output uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Acquired => "acquired",
            Outcome::Held => "held",
            Outcome::Released => "released",
            Outcome::NotHeld => "not_held",
            Outcome::NotHolder => "not_holder",
        }
    }
}

/// One row of the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The issue id.
    pub issue: String,
    /// The holder, `None` when free.
    pub holder: Option<String>,
    /// The fencing token (tenures so far).
    pub token: i64,
    /// When the tenure began (unix seconds).
    pub acquired_at: Option<i64>,
    /// When the tenure ends (unix seconds), `None` when open-ended or free.
    pub expires_at: Option<i64>,
}

impl Row {
    /// The one definition of liveness, as in `git_lease::is_live`.
    pub fn is_live(&self, now: i64) -> bool {
        self.holder.is_some() && self.expires_at.is_none_or(|e| now < e)
    }
}

/// The answer to one operation: the outcome, the row afterwards, and whether it was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// What the rules answered.
    pub outcome: Outcome,
    /// The row after the operation (`None` for an issue never leased).
    pub row: Option<Row>,
    /// Whether the row was written.
    pub wrote: bool,
}

/// A lease table in one SQLite database.
pub struct SqliteLedger {
    conn: Connection,
}

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS leases (
    issue TEXT PRIMARY KEY,
    holder TEXT NULL,
    token INTEGER NOT NULL,
    acquired_at INTEGER NULL,
    expires_at INTEGER NULL
)";

impl SqliteLedger {
    /// Opens (creating if needed) the database at `path` in WAL mode with `busy_timeout` 5000
    /// and the given `synchronous` setting.
    pub fn open(path: &Path, sync: Sync) -> Result<SqliteLedger, Error> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_millis(5000))?;
        // journal_mode is persistent in the file; asking again is a cheap read.
        let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        debug_assert_eq!(mode.to_ascii_lowercase(), "wal");
        conn.pragma_update(None, "synchronous", sync.as_str())?;
        conn.execute_batch(SCHEMA)?;
        Ok(SqliteLedger { conn })
    }

    /// Returns the underlying connection.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    fn read(tx: &Connection, issue: &str) -> Result<Option<Row>, Error> {
        tx.prepare_cached(
            "SELECT holder, token, acquired_at, expires_at FROM leases WHERE issue = ?1",
        )?
        .query_row(params![issue], |r| {
            Ok(Row {
                issue: issue.to_owned(),
                holder: r.get(0)?,
                token: r.get(1)?,
                acquired_at: r.get(2)?,
                expires_at: r.get(3)?,
            })
        })
        .optional()
    }

    fn write(tx: &Connection, row: &Row) -> Result<(), Error> {
        tx.prepare_cached(
            "INSERT OR REPLACE INTO leases (issue, holder, token, acquired_at, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(params![
            row.issue,
            row.holder,
            row.token,
            row.acquired_at,
            row.expires_at
        ])?;
        Ok(())
    }

    /// Claims `issue` for `holder` until `now + ttl_secs` (open-ended when `None`).
    pub fn acquire(
        &mut self,
        issue: &str,
        holder: &str,
        ttl_secs: Option<i64>,
        now: i64,
    ) -> Result<Report, Error> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let report = Self::acquire_in(&tx, issue, holder, ttl_secs, now)?;
        tx.commit()?;
        Ok(report)
    }

    /// Claims every issue of `issues` for `holder` in **one** transaction, each decided as
    /// [`SqliteLedger::acquire`] decides it: the peer of git-lease's batch API.
    pub fn acquire_many(
        &mut self,
        issues: &[String],
        holder: &str,
        ttl_secs: Option<i64>,
        now: i64,
    ) -> Result<Vec<Report>, Error> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let reports = issues
            .iter()
            .map(|issue| Self::acquire_in(&tx, issue, holder, ttl_secs, now))
            .collect::<Result<Vec<_>, _>>()?;
        tx.commit()?;
        Ok(reports)
    }

    fn acquire_in(
        tx: &Connection,
        issue: &str,
        holder: &str,
        ttl_secs: Option<i64>,
        now: i64,
    ) -> Result<Report, Error> {
        let current = Self::read(tx, issue)?;
        let expires_at = ttl_secs.map(|t| now + t);
        let report = match current {
            Some(row) if row.is_live(now) => {
                if row.holder.as_deref() == Some(holder) {
                    // Idempotent re-acquire: same token and acquired_at, fresh expiry.
                    if row.expires_at == expires_at {
                        Report {
                            outcome: Outcome::Acquired,
                            row: Some(row),
                            wrote: false,
                        }
                    } else {
                        let next = Row { expires_at, ..row };
                        Self::write(tx, &next)?;
                        Report {
                            outcome: Outcome::Acquired,
                            row: Some(next),
                            wrote: true,
                        }
                    }
                } else {
                    Report {
                        outcome: Outcome::Held,
                        row: Some(row),
                        wrote: false,
                    }
                }
            }
            other => {
                let next = Row {
                    issue: issue.to_owned(),
                    holder: Some(holder.to_owned()),
                    token: other.map_or(0, |r| r.token) + 1,
                    acquired_at: Some(now),
                    expires_at,
                };
                Self::write(tx, &next)?;
                Report {
                    outcome: Outcome::Acquired,
                    row: Some(next),
                    wrote: true,
                }
            }
        };
        Ok(report)
    }

    /// Frees `issue` for `holder` (or anyone, once expired), keeping the token.
    pub fn release(&mut self, issue: &str, holder: &str, now: i64) -> Result<Report, Error> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let current = Self::read(&tx, issue)?;
        let report = match current {
            None => Report {
                outcome: Outcome::NotHeld,
                row: None,
                wrote: false,
            },
            Some(row) if row.holder.is_none() => Report {
                outcome: Outcome::NotHeld,
                row: Some(row),
                wrote: false,
            },
            Some(row) if row.is_live(now) && row.holder.as_deref() != Some(holder) => Report {
                outcome: Outcome::NotHolder,
                row: Some(row),
                wrote: false,
            },
            Some(row) => {
                let next = Row {
                    holder: None,
                    acquired_at: None,
                    expires_at: None,
                    ..row
                };
                Self::write(&tx, &next)?;
                Report {
                    outcome: Outcome::Released,
                    row: Some(next),
                    wrote: true,
                }
            }
        };
        tx.commit()?;
        Ok(report)
    }

    /// Returns the row of `issue`, if it was ever leased.
    pub fn current(&self, issue: &str) -> Result<Option<Row>, Error> {
        Self::read(&self.conn, issue)
    }

    /// Returns the live leases at `now`, oldest tenure first, then by issue (the order of
    /// `git lease list`).
    pub fn list_live(&self, now: i64) -> Result<Vec<Row>, Error> {
        let mut out = Vec::new();
        self.for_each_live(now, |row| out.push(row))?;
        Ok(out)
    }

    /// Calls `f` with each live lease at `now`, oldest tenure first, then by issue.
    pub fn for_each_live(&self, now: i64, mut f: impl FnMut(Row)) -> Result<(), Error> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT issue, holder, token, acquired_at, expires_at FROM leases
             WHERE holder IS NOT NULL AND (expires_at IS NULL OR ?1 < expires_at)
             ORDER BY acquired_at, issue",
        )?;
        let mut rows = stmt.query(params![now])?;
        while let Some(r) = rows.next()? {
            f(Row {
                issue: r.get(0)?,
                holder: r.get(1)?,
                token: r.get(2)?,
                acquired_at: r.get(3)?,
                expires_at: r.get(4)?,
            });
        }
        Ok(())
    }

    /// Inserts `n` leases named `{prefix}{i}` in one transaction: `live_percent` of them live
    /// at `now` (acquired a minute before, expiring a day after), the rest expired.
    pub fn populate(
        &mut self,
        prefix: &str,
        n: u64,
        live_percent: u64,
        now: i64,
    ) -> Result<(), Error> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        for i in 0..n {
            let live = is_live_index(i, live_percent);
            let row = Row {
                issue: format!("{prefix}{i}"),
                holder: Some(format!("agent-{}", i % 97)),
                token: 1,
                acquired_at: Some(now - 60),
                expires_at: Some(if live { now + 86_400 } else { now - 30 }),
            };
            Self::write(&tx, &row)?;
        }
        tx.commit()
    }

    /// Deletes the row of `issue` (a benchmark helper: git-lease never forgets a lease).
    pub fn forget(&mut self, issue: &str) -> Result<bool, Error> {
        Ok(self
            .conn
            .execute("DELETE FROM leases WHERE issue = ?1", params![issue])?
            > 0)
    }
}

/// Whether lease number `i` of a populated set is live: exactly `live_percent` of every 100.
pub fn is_live_index(i: u64, live_percent: u64) -> bool {
    i % 100 < live_percent
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(dir: &tempfile::TempDir, sync: Sync) -> SqliteLedger {
        SqliteLedger::open(&dir.path().join("leases.db"), sync).unwrap()
    }

    #[test]
    fn acquire_many_decides_each_issue_in_one_transaction() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = ledger(&dir, Sync::Normal);
        l.acquire("b", "bob", Some(600), 1000).unwrap();
        let issues: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let r = l.acquire_many(&issues, "alice", Some(600), 1100).unwrap();
        let outcomes: Vec<Outcome> = r.iter().map(|r| r.outcome).collect();
        assert_eq!(
            outcomes,
            [Outcome::Acquired, Outcome::Held, Outcome::Acquired]
        );
        assert_eq!(l.current("c").unwrap().unwrap().token, 1);
    }

    #[test]
    fn the_rules_match_git_lease() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = ledger(&dir, Sync::Normal);
        let a = l.acquire("42", "alice", Some(600), 1000).unwrap();
        assert_eq!(
            (a.outcome, a.row.as_ref().unwrap().token),
            (Outcome::Acquired, 1)
        );
        // Held by another while live.
        assert_eq!(
            l.acquire("42", "bob", Some(600), 1599).unwrap().outcome,
            Outcome::Held
        );
        // Re-acquire by the holder: same token and acquired_at, fresh expiry.
        let r = l.acquire("42", "alice", Some(600), 1500).unwrap();
        let row = r.row.unwrap();
        assert_eq!(
            (row.token, row.acquired_at, row.expires_at),
            (1, Some(1000), Some(2100))
        );
        // Release by another while live: refused.
        assert_eq!(
            l.release("42", "bob", 1600).unwrap().outcome,
            Outcome::NotHolder
        );
        // Expired exactly at expires_at: a new tenure.
        let b = l.acquire("42", "bob", Some(60), 2100).unwrap();
        assert_eq!((b.outcome, b.row.unwrap().token), (Outcome::Acquired, 2));
        // Release keeps the token.
        let rel = l.release("42", "bob", 2110).unwrap();
        assert_eq!(rel.outcome, Outcome::Released);
        assert_eq!(rel.row.as_ref().unwrap().token, 2);
        assert_eq!(rel.row.unwrap().holder, None);
        assert_eq!(
            l.release("42", "bob", 2111).unwrap().outcome,
            Outcome::NotHeld
        );
        assert_eq!(
            l.release("7", "bob", 2111).unwrap().outcome,
            Outcome::NotHeld
        );
        assert_eq!(
            l.acquire("42", "carol", None, 2200)
                .unwrap()
                .row
                .unwrap()
                .token,
            3
        );
    }

    #[test]
    fn populate_and_list() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = ledger(&dir, Sync::Full);
        l.populate("i", 1000, 80, 5000).unwrap();
        assert_eq!(l.list_live(5000).unwrap().len(), 800);
    }
}
