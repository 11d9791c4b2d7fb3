//! Integration tests of `git-lease` that need only git and Rust (`cargo test --test it`). The
//! tests through software others wrote are the `zoo` binary (`tests/zoo/`); both share the
//! harness of `tests/common/` ([`env`], [`server`], [`cgi`], [`forge`], [`pushes`], …).
//!
//! - [`env`]: the hermetic harness (temporary repositories, the binary, plain git).
//! - [`rules`]: every lease rule at exact instants, through the command line.
//! - [`format`]: what plain git sees of a ledger (the stored format, the chain, fsck).
//! - [`listing`]: `list` and `log`.
//! - [`json`]: `--json`, against docs/JSON.md and wherever the flag is given.
//! - [`prefixes`]: prefix resolution of issue ids.
//! - [`bad_input`]: bad ids, TTLs, clocks, holders and configuration are bad usage.
//! - [`conventions`]: git's conventions: settings as git reads them (`git -c` included),
//!   `--json` whose stderr holds JSON only, hints only when they apply, one name for a
//!   timeout, a newcomer's first mistakes answered plainly, and src files and functions
//!   kept short (600 and 80 lines).
//! - [`multi_acquire`]: several issues in one `acquire`, all or none, locally (one ref
//!   transaction) and through a remote (one atomic push), alone and under a race.
//! - [`descriptors`]: closed standard descriptors and closed pipes.
//! - [`human`]: what a person reads: `show`'s layout, relative times, colour.
//! - [`snapshots`]: every `--help` and the human output of one story, as reviewed snapshots.
//! - [`readme`]: the README's `sh` blocks, read from it and run as written, each line held to
//!   what its comment says; the fleet recipe with workers racing through a server.
//! - [`manual`]: the manual's examples run as written; the README's exit codes open its own.
//! - [`doc_promises`]: every test the documents name exists, and every guarantee row names one.
//! - [`completion`]: shell completion through the binary, issue ids from the lease refs, and
//!   a real bash with git's completion.
//! - [`faults`]: corrupt ledgers, stale locks, ref clashes, repository formats and layouts.
//! - [`race`]: real concurrent processes on one issue.
//! - [`queue`]: an ordered queue (`--any --ordered`), alone and under a race.
//! - [`gc_race`]: readers and writers while git packs objects and refs under them.
//! - [`model`]: property test of the library against a simple model.
//! - [`perf`]: the list cache, packing, fsync mode and batches never change an answer.
//! - [`session`]: session secrets, stored only as hashes and needed by every step of their
//!   tenure.
//! - [`liveness`]: a lease whose holder process is gone is not live on its machine; one whose
//!   process its reader cannot see (another PID namespace, `hidepid`) stays live until its
//!   expiry.
//! - [`end_states`]: `complete` and `abandon`, and the note and task of a claim.
//! - [`run`]: `run` and `wait`, on real time; [`never_expires`]: `run --ttl never` through a
//!   remote, revoked on the server.
//! - [`server`]: a served bare repository per test (`git daemon`, or `git http-backend` behind
//!   lighttpd or the harness's own front, [`cgi`]), with the system clock or a fixed one, with
//!   the hook or not; its own tests are in [`daemon`].
//! - [`forge`], [`pushes`]: ledger history built by hand with plain git plumbing, and
//!   `lease.json` values; forged ledger commits pushed, and the hook's refusals.
//! - [`remote`], [`mirror`], [`verify`]: claims through a remote, sync, and ledger audits.
//! - [`sharing`]: a clone's claims are local until told otherwise; a diverged ledger adopted.
//! - [`two_ledgers`]: a clone's own ledger and the remote's, each with its tokens: a tenure
//!   made here is kept when the remote issues its token again, and work is fenced by the
//!   remote's ledger.
//! - [`signers`]: where the allowed signers list comes from (what the team controls, never
//!   the branch checked out), a change of it verifying again, validity at the event's time.
//! - [`signing`]: ledger commits signed as git signs commits with `gpg.format=ssh`
//!   (`commit.gpgSign`, `lease.sign`), verified by plain git and `ssh-keygen`; keys in files
//!   and in an `ssh-agent`; a key that cannot sign writes nothing.
//! - [`reflog`]: reflogs of every ref update without a configured identity.
//! - [`doctor`]: `git lease doctor` against healthy, hookless, identity-less and broken
//!   servers, and its verdict remembered.
//! - [`hook`], [`fence`]: the server hook against forged pushes, and fenced work branches.
//! - [`archive`], [`archive_default`], [`archive_forged`], [`archive_deletion`]: the archive
//!   of quiet ledgers (folds, revivals, mirrors), trust in it by default, generated forged
//!   folds against the server hook, and the deletion of a lease ref only at the tip the
//!   archive records; [`archive_ids`]: an id under an archived one.
//! - [`guard`]: the guard on the client (`install-hook --client`): pre-push and pre-commit.
//! - [`http`]: the hook behind a web server, judging the authenticated pusher.
//! - [`install_root`]: `install-hook` as root in a hostile repository another account owns,
//!   with links planted: it follows none, and gives the owner only what it made.
//! - [`fleet`]: `acquire --any` and `run --any` racing through a daemon, and `watch`.
//! - [`watch`]: `watch` among many ledgers: exactly what moved (one ledger, a new one, two
//!   commits in one move, refs packed under it), expiries soonest first, a start from the list
//!   cache.
//! - [`watch_exec`]: `watch --exec` and `lease.onEvent`: a real command per event, in order,
//!   failing, slow and interrupted; the GitHub assignee recipe of docs/EVENTS.md.
//! - [`attack`]: the forged-push matrix (every event x pusher x forged data) against the
//!   specification of who may push what, and when.
//! - [`adversary`]: generated sequences of honest and forged pushes through a real server,
//!   and the properties every accepted push must keep (verify, a following client, tokens,
//!   one live tenure at a time).
//! - [`timeline`]: `timeline`'s tenures, as JSON and as a self-contained page, hostile notes
//!   kept as text.
//! - [`proxy`]: a fault-injecting TCP proxy before `git daemon` (delays, cuts, replies dropped
//!   after the server acted, pushes held while their client is paused).
//! - [`linearizable`]: a linearizability checker over one lease register per issue, the
//!   library's rules as its model, lost replies as operations that may or may not have happened.
//! - [`histories`]: seeded histories of 4-16 real clients through faulty proxies, with killed
//!   and paused clients and a moving hook clock, checked for linearizability and fencing.
//! - [`unknown_outcome`]: a push whose answer was lost says so, and running it again converges.
//! - [`output`]: human output escapes control characters and invisible Unicode from ledgers.
//! - [`oversize`]: a note, task or reason over its bound refused before anything is written
//!   (command line), the hook against an over-size record, and readers that name one
//!   unreadable ledger and list every other.
//! - [`credentials`]: a remote URL with a password through every output (human, JSON, the
//!   timeline page, errors) never shows it.
//! - [`odd_ids`]: ids git carries but no ref path may hold, through the command line, the hook
//!   and a mirror.
//! - [`signatures`]: signed ledger events: with `lease.requireSignatures` every reader (and a
//!   hook requiring them) refuses a step not signed by a key allowed for the one it needs;
//!   `git verify-commit` agrees on every signature.
//! - [`rewound`]: a hookless remote that rewinds, rewrites or deletes a ledger.
//! - [`hookless_remedy`]: what git's own `receive.*` settings guard of `refs/leases/*` on a
//!   server without the hook, and the `pre-receive` docs/SECURITY.md gives instead.
//! - [`trust`]: nothing outside a ledger's objects changes what it means, and what the hook
//!   accepts every reader accepts: replacement refs, backdated and non-canonical times, steps
//!   dated ahead of the reader, configured refspecs, silent remotes.
//! - [`version_gates`]: a git too old for a command (a stand-in saying so) is refused before
//!   it runs; work done in-process asks no version.
//! - [`reftable`]: reftable repositories made explicitly: a migrated repository, a held
//!   reftable lock, a reftable server with the hook. The whole suite also runs with every
//!   repository reftable (`GIT_DEFAULT_REF_FORMAT=reftable`, `.ci/run`).
//! - [`reftable_reader`]: the in-process reftable reader against git's own listing of the
//!   tables git wrote (deep indexes, uncompacted and compacted stacks, deletions, symbolic
//!   refs, SHA-256, random histories), and readers racing git's compactions.
//! - [`reftable_writes`]: writes in a reftable repository are git's transactions: git reads
//!   them, a git killed under a claim leaves the ledger as it was or one step on, git's
//!   writers and git-lease's race with nothing lost.
//! - [`user_refs`]: claims, archives and `git lease gc` leave the user's branches, tags and
//!   reflogs byte-identical, in both ref formats.

#[path = "../common/mod.rs"]
#[allow(dead_code)]
mod common;
pub use common::{
    accounts, cgi, doctor_checks, env, forge, gits, password_urls, pushes, server, timeline_story,
};

mod adversary;
mod adversary_signed;
mod archive;
mod archive_default;
mod archive_deletion;
mod archive_forged;
mod archive_ids;
mod archive_trust;
mod attack;
mod bad_input;
mod completion;
mod conventions;
mod credentials;
mod daemon;
mod descriptors;
mod doc_promises;
mod doctor;
mod end_states;
mod faults;
mod fence;
mod fleet;
mod format;
mod gc_race;
mod guard;
mod histories;
mod hook;
mod hookless_remedy;
mod http;
mod human;
mod install_root;
mod json;
mod linearizable;
mod listing;
mod liveness;
mod manual;
mod mirror;
mod model;
mod multi_acquire;
mod never_expires;
mod odd_ids;
mod output;
mod oversize;
mod perf;
mod prefixes;
mod proxy;
mod queue;
mod race;
mod readme;
mod reflog;
mod reftable;
mod reftable_hostile;
mod reftable_reader;
mod reftable_writes;
mod remote;
mod rewound;
mod rules;
mod run;
mod session;
mod shared_repo;
mod sharing;
mod signatures;
mod signers;
mod signing;
mod snapshots;
mod timeline;
mod trust;
mod two_ledgers;
mod unknown_outcome;
mod user_refs;
mod verify;
mod version_gates;
mod watch;
mod watch_exec;
