//! `watch` among many ledgers: a change notification costs what changed, so these hold it to
//! reporting exactly what changed: one ledger moved among many, a ledger that appears, a ledger
//! moved twice between two reads, the refs packed under it, a lease ref that is no ledger
//! (symbolic), and the expiries kept soonest
//! first, each at its instant on the watch's clock (`GIT_LEASE_NOW=T0`, then the machine's
//! monotonic clock), its start read from the list cache where it holds the exact tip.
//!
//! Every watch is started with `--since <T0 - 1h>` after a claim of `marker` a minute before
//! T0, and every other ledger written before that hour: the marker's replayed line says the
//! watch has read the refs once, and nothing else is replayed. Each test ends with a claim of
//! `end`, whose event is the last one printed: every event before it is every event there was.

use serde_json::{json, Value};

use crate::env::{at, Cmd, TestRepo, Watch, T0};

const ALICE: &str = "alice@example.com";
const BOB: &str = "bob@example.com";

/// How many ledgers a test's repository holds besides the ones it moves.
const MANY: usize = 200;

/// `watch --json --since <T0 - 1h>` on the clock `GIT_LEASE_NOW=T0`.
fn watch_cmd(repo: &TestRepo) -> Cmd {
    repo.lease()
        .now(T0)
        .arg_json()
        .args(["watch", "--since", &at(-3600)])
}

/// A repository of [`MANY`] ledgers `l-0` .. (claimed by Alice two hours before T0 for three
/// hours: live until an hour after T0), packed (`git pack-refs --all`: `packed-refs`, or one
/// compacted table), and the claim of `marker` a minute before T0.
fn many_ledgers() -> TestRepo {
    let repo = TestRepo::new();
    let issues: Vec<String> = (0..MANY).map(|k| format!("l-{k}")).collect();
    repo.lease()
        .now(&at(-7200))
        .args(["acquire", "--holder", ALICE, "--ttl", "3h"])
        .args(&issues)
        .run()
        .ok();
    repo.git(&["pack-refs", "--all"]);
    marker(&repo);
    repo
}

fn marker(repo: &TestRepo) {
    repo.lease()
        .now(&at(-60))
        .args(["acquire", "marker", "--holder", ALICE, "--ttl", "never"])
        .run()
        .ok();
}

/// Claims `end` and waits for its event; then ends the watch (SIGTERM, exit 0) and returns
/// every event it printed, as `(issue, event)`.
fn finish(repo: &TestRepo, watch: &mut Watch) -> Vec<(String, String)> {
    repo.lease()
        .now(T0)
        .args(["acquire", "end", "--holder", ALICE, "--ttl", "never"])
        .run()
        .ok();
    watch.wait_event("end", "acquire");
    watch.signal("TERM");
    let status = watch.wait_exit();
    assert_eq!(status.code(), Some(0), "{status:?}\n{}", watch.stderr());
    watch.drain();
    watch
        .seen
        .iter()
        .map(|v| {
            let text = |k: &str| v[k].as_str().unwrap_or("?").to_owned();
            (text("issue"), text("event"))
        })
        .collect()
}

fn pairs(events: &[(&str, &str)]) -> Vec<(String, String)> {
    events
        .iter()
        .map(|(i, e)| ((*i).to_owned(), (*e).to_owned()))
        .collect()
}

#[test]
fn a_change_to_one_ledger_among_many_is_its_one_event_and_the_others_say_nothing() {
    let repo = many_ledgers();
    let mut watch = Watch::spawn(&repo, watch_cmd(&repo));
    watch.wait_event("marker", "acquire");

    // A packed ledger moves: its ref is now loose over the packed one.
    repo.lease()
        .now(T0)
        .args(["release", "l-117", "--holder", ALICE])
        .run()
        .ok();
    let released = watch.wait_event("l-117", "release");
    assert_eq!(released["previous_holder"], ALICE, "{released}");
    assert_eq!(released["token"], 1, "{released}");
    assert_eq!(released["at"], T0, "{released}");
    assert_eq!(released["commit"], json!(repo.tip("l-117")), "{released}");
    // And once more, loose to loose.
    repo.lease()
        .now(T0)
        .args(["acquire", "l-117", "--holder", BOB, "--ttl", "1h"])
        .run()
        .ok();
    let acquired = watch.wait_event("l-117", "acquire");
    assert_eq!(acquired["holder"], BOB, "{acquired}");
    assert_eq!(acquired["token"], 2, "{acquired}");

    assert_eq!(
        finish(&repo, &mut watch),
        pairs(&[
            ("marker", "acquire"),
            ("l-117", "release"),
            ("l-117", "acquire"),
            ("end", "acquire"),
        ]),
        "{:#?}",
        watch.seen
    );
}

#[test]
fn a_ledger_that_appears_after_the_start_is_followed_from_its_first_event() {
    let repo = many_ledgers();
    let mut watch = Watch::spawn(&repo, watch_cmd(&repo));
    watch.wait_event("marker", "acquire");

    repo.lease()
        .now(T0)
        .args(["acquire", "new/one", "--holder", BOB, "--ttl", "1h"])
        .run()
        .ok();
    let first = watch.wait_event("new/one", "acquire");
    assert_eq!(first["token"], 1, "{first}");
    assert_eq!(first["commit"], json!(repo.tip("new/one")), "{first}");
    repo.lease()
        .now(&at(1))
        .args(["renew", "new/one", "--holder", BOB, "--ttl", "2h"])
        .run()
        .ok();
    let renewed = watch.wait_event("new/one", "renew");
    assert_eq!(renewed["expires_at"], at(1 + 7200), "{renewed}");

    assert_eq!(
        finish(&repo, &mut watch),
        pairs(&[
            ("marker", "acquire"),
            ("new/one", "acquire"),
            ("new/one", "renew"),
            ("end", "acquire"),
        ]),
        "{:#?}",
        watch.seen
    );
}

#[test]
fn a_ledger_moved_twice_between_two_reads_gives_both_events_in_order() {
    let repo = many_ledgers();
    // Two commits made elsewhere (a clone claims and renews), then brought here by one ref
    // update: the watch reads the ref once, two commits past what it knew.
    let other = repo.scratch("other");
    let (here, there) = (
        repo.path().display().to_string(),
        other.display().to_string(),
    );
    repo.git(&["init", "-q", &there]);
    repo.git_in(
        &other,
        &["fetch", "-q", &here, "refs/leases/*:refs/leases/*"],
    );
    let mut watch = Watch::spawn(&repo, watch_cmd(&repo));
    watch.wait_event("marker", "acquire");

    let elsewhere = |now: &str, args: &[&str]| {
        repo.lease().cwd(&other).now(now).args(args).run().ok();
    };
    elsewhere(T0, &["release", "l-5", "--holder", ALICE]);
    elsewhere(&at(1), &["acquire", "l-5", "--holder", BOB, "--ttl", "1h"]);
    repo.git(&["fetch", "-q", &there, "+refs/leases/l-5:refs/leases/l-5"]);
    let acquired = watch.wait_event("l-5", "acquire");
    assert_eq!(acquired["holder"], BOB, "{acquired}");
    assert_eq!(acquired["previous_holder"], Value::Null, "{acquired}");

    assert_eq!(
        finish(&repo, &mut watch),
        pairs(&[
            ("marker", "acquire"),
            ("l-5", "release"),
            ("l-5", "acquire"),
            ("end", "acquire"),
        ]),
        "{:#?}",
        watch.seen
    );
}

#[test]
fn packing_the_refs_under_a_watch_is_no_event_and_later_changes_are_still_seen() {
    let repo = many_ledgers();
    let mut watch = Watch::spawn(&repo, watch_cmd(&repo));
    watch.wait_event("marker", "acquire");
    repo.lease()
        .now(T0)
        .args(["release", "l-3", "--holder", ALICE])
        .run()
        .ok();
    watch.wait_event("l-3", "release");

    // Every ref packed again (the loose ones folded into packed-refs, or the tables compacted):
    // nothing moved.
    repo.git(&["pack-refs", "--all"]);
    repo.lease()
        .now(T0)
        .args(["release", "l-4", "--holder", ALICE])
        .run()
        .ok();
    watch.wait_event("l-4", "release");
    repo.git(&["pack-refs", "--all"]);
    repo.lease()
        .now(&at(1))
        .args(["acquire", "l-3", "--holder", BOB])
        .run()
        .ok();
    watch.wait_event("l-3", "acquire");

    assert_eq!(
        finish(&repo, &mut watch),
        pairs(&[
            ("marker", "acquire"),
            ("l-3", "release"),
            ("l-4", "release"),
            ("l-3", "acquire"),
            ("end", "acquire"),
        ]),
        "{:#?}",
        watch.seen
    );
}

#[test]
fn expiries_among_many_live_leases_come_soonest_first_each_at_its_instant_and_a_renewal_cancels_one(
) {
    let repo = many_ledgers();
    // On the watch's clock: `renewed` would expire 8 s after T0 and is renewed at once, `first`
    // expires 9 s after T0 and `second` 10 s after; the others an hour after. The 8 s leave a
    // loaded machine time to start the watch and the renewal before `renewed` expires.
    let claim = |issue: &str, ttl: &str| {
        repo.lease()
            .now(T0)
            .args(["acquire", issue, "--holder", BOB, "--ttl", ttl])
            .run()
            .ok();
    };
    claim("second", "10s");
    claim("first", "9s");
    claim("renewed", "8s");
    let second = repo.tip("second");
    let mut watch = Watch::spawn(
        &repo,
        repo.lease()
            .now(T0)
            .arg_json()
            .args(["watch", "--since", &at(-3600)]),
    );
    watch.wait_event("marker", "acquire");
    repo.lease()
        .now(T0)
        .args(["renew", "renewed", "--holder", BOB, "--ttl", "1h"])
        .run()
        .ok();
    watch.wait_event("renewed", "renew");
    let expired = watch.wait_event("second", "expired");
    assert_eq!(
        expired,
        json!({
            "schema_version": 1,
            "issue": "second", "event": "expired", "synthesized": true, "token": 1,
            "holder": BOB, "previous_holder": null, "by": null, "reason": null,
            "at": at(10), "acquired_at": T0, "expires_at": at(10),
            "commit": second,
        })
    );
    let first = watch.wait_event("first", "expired");
    assert_eq!(first["at"], at(9), "{first}");

    // The replay gives the three claims (at T0, after the hour replayed) before anything else.
    let events = finish(&repo, &mut watch);
    assert_eq!(
        events,
        pairs(&[
            ("marker", "acquire"),
            ("first", "acquire"),
            ("renewed", "acquire"),
            ("second", "acquire"),
            ("renewed", "renew"),
            ("first", "expired"),
            ("second", "expired"),
            ("end", "acquire"),
        ]),
        "{:#?}",
        watch.seen
    );
}

#[test]
fn the_start_reads_the_list_cache_where_it_holds_the_exact_tip_and_objects_where_it_moved() {
    let repo = many_ledgers();
    // A listing of this many misses writes the list cache.
    repo.lease().now(T0).args(["list"]).run().ok();
    let cache = repo.git_dir().join("git-lease/list-cache");
    assert!(
        cache.is_file(),
        "the listing wrote no cache at {}",
        cache.display()
    );
    // Then a ledger moves: its cached record is of a tip it no longer has. Renewed at T0 for
    // six seconds (time for a loaded machine to start the watch), it expires then; its record
    // said an hour.
    repo.lease()
        .now(T0)
        .args(["renew", "l-42", "--holder", ALICE, "--ttl", "6s"])
        .run()
        .ok();
    let renewed = repo.tip("l-42");
    // Started without replay: what it knows is what it read at its start.
    let mut watch = Watch::spawn(&repo, repo.lease().now(T0).arg_json().args(["watch"]));
    let expired = watch.wait_event("l-42", "expired");
    assert_eq!(expired["at"], at(6), "{expired}");
    assert_eq!(expired["commit"], json!(renewed), "{expired}");
    assert_eq!(expired["holder"], ALICE, "{expired}");

    let events = finish(&repo, &mut watch);
    assert_eq!(
        events,
        pairs(&[("l-42", "expired"), ("end", "acquire")]),
        "{:#?}",
        watch.seen
    );
}

#[test]
fn a_lease_ref_that_is_no_ledger_changes_no_event_of_the_others() {
    let repo = many_ledgers();
    let mut watch = Watch::spawn(&repo, watch_cmd(&repo));
    watch.wait_event("marker", "acquire");
    // A symbolic ref among the lease refs (which no reader takes for a ledger), made after
    // the start: the scan cannot read it as a tip, and reads every ref instead.
    repo.git(&["symbolic-ref", "refs/leases/sym", "refs/leases/l-1"]);
    repo.lease()
        .now(T0)
        .args(["release", "l-9", "--holder", ALICE])
        .run()
        .ok();
    watch.wait_event("l-9", "release");
    repo.lease()
        .now(T0)
        .args(["release", "l-10", "--holder", ALICE])
        .run()
        .ok();
    watch.wait_event("l-10", "release");

    assert_eq!(
        finish(&repo, &mut watch),
        pairs(&[
            ("marker", "acquire"),
            ("l-9", "release"),
            ("l-10", "release"),
            ("end", "acquire"),
        ]),
        "{:#?}",
        watch.seen
    );
}

#[test]
fn a_ledger_revived_from_the_archive_under_a_watch_is_one_claim_not_its_history_again() {
    let repo = many_ledgers();
    let at_ = |secs: i64, args: &[&str]| {
        repo.lease().now(&at(secs)).args(args).run().ok();
    };
    at_(-7000, &["acquire", "old", "--holder", BOB, "--ttl", "1m"]);
    at_(-6990, &["release", "old", "--holder", BOB]);
    at_(-3700, &["archive", "--quiet-for", "30m"]);
    assert_eq!(repo.tip("old"), None, "folded");
    let mut watch = Watch::spawn(&repo, watch_cmd(&repo));
    watch.wait_event("marker", "acquire");

    // The claim revives the ledger from its archived tip: one new commit, one event.
    repo.lease()
        .now(T0)
        .args(["acquire", "old", "--holder", ALICE])
        .run()
        .ok()
        .stdout_has("(token 2)");
    watch.wait_event("old", "acquire");
    assert_eq!(
        finish(&repo, &mut watch),
        pairs(&[
            ("marker", "acquire"),
            ("old", "acquire"),
            ("end", "acquire")
        ]),
        "{:#?}",
        watch.seen
    );
    let revived = watch.seen.iter().find(|v| v["issue"] == "old");
    assert_eq!(
        revived.map(|v| v["token"].clone()),
        Some(json!(2)),
        "{revived:?}"
    );
}

/// A takeover at the very instant a lease expires comes after that lease's `expired` event,
/// in a replayed history and under a running watch alike. Catches the mutant of
/// `watch::advance` that reports an expiry only when the next commit is strictly later
/// (`expiry < entry.lease.at` for `<=`): both `expired` events were dropped.
#[test]
fn a_takeover_at_the_exact_instant_of_expiry_comes_after_the_expired_event() {
    let repo = TestRepo::new();
    let claim = |issue: &str, holder: &str, secs: i64, ttl: &str| {
        repo.lease()
            .now(&at(secs))
            .args(["acquire", issue, "--holder", holder, "--ttl", ttl])
            .run()
            .ok();
    };
    // Replayed: Alice's minute on `replayed`, Bob's claim at its last instant.
    claim("replayed", ALICE, -600, "1m");
    claim("replayed", BOB, -540, "1h");
    marker(&repo);
    // Live: Alice holds `live` for an hour; the watch's clock never gets there.
    claim("live", ALICE, -30, "1h");
    let mut watch = Watch::spawn(&repo, watch_cmd(&repo));
    watch.wait_event("live", "acquire");
    claim("live", BOB, 3570, "1h");
    let expired = watch.wait_event("live", "expired");
    assert_eq!(expired["holder"], ALICE, "{expired}");
    assert_eq!(expired["at"], at(3570), "{expired}");

    let events = finish(&repo, &mut watch);
    assert_eq!(
        events,
        pairs(&[
            ("replayed", "acquire"),
            ("replayed", "expired"),
            ("replayed", "acquire"),
            ("marker", "acquire"),
            ("live", "acquire"),
            ("live", "expired"),
            ("live", "acquire"),
            ("end", "acquire"),
        ]),
        "{:#?}",
        watch.seen
    );
}
