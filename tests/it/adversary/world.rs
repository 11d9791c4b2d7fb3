//! One case: a server, its clients, a step pushed, and after every accepted push the checks
//! that every rule exists to keep (verify, a following client, tokens, one live tenure).

use super::*;

/// The counts printed at the end.
#[derive(Default, Debug)]
pub(super) struct Tally {
    /// Cases run (shrinking included).
    pub(super) runs: usize,
    pub(super) steps: usize,
    /// Steps pushed as forged with plain git, unmutated and mutated.
    pub(super) forged_honest: usize,
    pub(super) forged_mutated: usize,
    /// Steps run by the real client.
    pub(super) by_client: usize,
    /// Pushes after which some ref of the server had moved.
    pub(super) accepted: usize,
    /// Pushes the hook refused.
    pub(super) refused_by_hook: usize,
    /// Steps that changed nothing without the hook refusing: the web server's refusal of a
    /// wrong password, git's own refusal, or a client that wrote nothing.
    pub(super) refused_otherwise: usize,
    /// Acceptances checked by `verify` in the served repository.
    pub(super) verified: usize,
    /// Acceptances checked by the following client (`sync`, `list --remote`, `show --remote`).
    pub(super) followed: usize,
    /// Fresh clones that synced and verified at the end of a case.
    pub(super) fresh_clones: usize,
}

/// A case's server, clients and what it has seen.
pub(super) struct World {
    pub(super) server: Server,
    /// The server's clock, seconds after T0.
    pub(super) now: i64,
    /// Where forged commits are written; it borrows the server's objects (alternates).
    pub(super) forger: TestRepo,
    /// The clone that follows the server through the whole case.
    pub(super) follower: TestRepo,
    /// The real client of each pusher, made when first needed.
    pub(super) clients: HashMap<String, TestRepo>,
    pub(super) boot: String,
    /// Every ref of the server, as of the last step.
    pub(super) refs: String,
    /// The server's ledgers (first parents, oldest first, replace refs ignored).
    pub(super) chains: BTreeMap<String, Vec<String>>,
    /// `lease.json` of each commit seen.
    pub(super) records: HashMap<String, Value>,
    /// The server's clock when each commit arrived.
    pub(super) arrived: HashMap<String, i64>,
    /// Who pushed each commit.
    pub(super) pushed_by: HashMap<String, Option<String>>,
    /// (issue, token) of every acquire seen, with its commit.
    pub(super) issued: HashMap<(String, u64), String>,
    /// One line per step so far.
    pub(super) log: Vec<String>,
}

impl World {
    pub(super) fn new() -> World {
        let mut server = Server::http(&USERS);
        server.config("lease.pusherEnv", "REMOTE_USER");
        server.config("lease.admins", ADMIN);
        server.start_at(&at(0));
        let forger = TestRepo::new();
        let alternates = forger.git_dir().join("objects/info/alternates");
        std::fs::write(
            &alternates,
            format!("{}\n", server.bare().join("objects").display()),
        )
        .expect("write the forger's alternates");
        let follower = server.mirror();
        let refs = server.refs();
        World {
            server,
            now: 0,
            forger,
            follower,
            clients: HashMap::new(),
            boot: boot_id(),
            refs,
            chains: BTreeMap::new(),
            records: HashMap::new(),
            arrived: HashMap::new(),
            pushed_by: HashMap::new(),
            issued: HashMap::new(),
            log: Vec::new(),
        }
    }

    /// The server's ledger of `issue`: its records, oldest first.
    pub(super) fn ledger(&self, issue: &str) -> Vec<Value> {
        self.chains
            .get(issue)
            .map(|c| c.iter().map(|id| self.records[id].clone()).collect())
            .unwrap_or_default()
    }

    pub(super) fn tip(&self, issue: &str) -> Option<String> {
        self.chains.get(issue).and_then(|c| c.last().cloned())
    }

    /// The URL `who` pushes to.
    pub(super) fn url(&self, who: Who) -> String {
        match who {
            Who::Holder | Who::User(_) => self.server.url_as(who.name()),
            Who::Anonymous(_) => format!("file://{}", self.server.bare().display()),
            Who::WrongPassword(i) => self
                .server
                .url_as(USERS[i])
                .replace(&format!("{}pw@", USERS[i]), "wrong@"),
        }
    }

    /// The real client of `who`: `lease.holder` its name, `origin` its URL.
    pub(super) fn client(&mut self, who: Who) -> &TestRepo {
        let url = self.url(who);
        self.clients
            .entry(who.label())
            .or_insert_with(|| TestRepo::client_of(&url, who.name()))
    }

    /// `who` with [`Who::Holder`] made the user it stands for on `issue`.
    pub(super) fn resolve(&self, who: Who, issue: &str) -> Who {
        let Who::Holder = who else { return who };
        let last = self.ledger(issue).last().and_then(|r| {
            r["holder"]
                .as_str()
                .or(r["previous_holder"].as_str())
                .map(str::to_owned)
        });
        Who::User(
            last.and_then(|h| USERS.iter().position(|u| *u == h))
                .unwrap_or(0),
        )
    }

    pub(super) fn set_clock(&mut self, clock: Clock) {
        let to = match clock {
            Clock::Stay => self.now,
            Clock::Forward(s) => self.now + s,
            Clock::ToExpiry { issue, delta } => self
                .ledger(ISSUES[issue])
                .last()
                .and_then(|r| time(&r["expires_at"]))
                .map_or(self.now, |e| (e - t0()).num_seconds() + delta),
        };
        if to > self.now {
            self.now = to;
            self.server.config("lease.hookNow", &at(self.now));
        }
    }

    /// Runs one step; returns what was pushed and the push (or client) run.
    pub(super) fn push(&mut self, step: &Step, tally: &mut Tally) -> (String, Run) {
        let issue = ISSUES[step.issue];
        let client_now = instant(self.now + step.offset);
        match &step.via {
            Via::Client => {
                tally.by_client += 1;
                let mut args = vec!["--json", "--remote", "origin", step.action.command(), issue];
                let ttl = step.ttl.map_or("never".to_owned(), |s| format!("{s}s"));
                match step.action {
                    Action::Acquire | Action::Renew => args.extend(["--ttl", ttl.as_str()]),
                    Action::Revoke => args.extend(["--reason", "stuck"]),
                    _ => {}
                }
                let what = format!(
                    "git lease {} (GIT_LEASE_NOW {})",
                    args.join(" "),
                    rfc3339(client_now)
                );
                let run = self
                    .client(step.who)
                    .lease()
                    .now(&rfc3339(client_now))
                    .env("GIT_TERMINAL_PROMPT", "0")
                    .args(&args)
                    .run();
                (what, run)
            }
            Via::Forge(mutations) => {
                if mutations.is_empty() {
                    tally.forged_honest += 1;
                } else {
                    tally.forged_mutated += 1;
                }
                self.forge_push(step, mutations, client_now)
            }
        }
    }

    /// Forges the step with plain git and pushes it as its pusher.
    pub(super) fn forge_push(
        &self,
        step: &Step,
        mutations: &[Mutation],
        client_now: DateTime<Utc>,
    ) -> (String, Run) {
        let issue = ISSUES[step.issue];
        let ledger = self.ledger(issue);
        let tip = self.tip(issue);
        let below_tip = self
            .chains
            .get(issue)
            .and_then(|c| c.len().checked_sub(2).map(|i| c[i].clone()));
        let cx = Context {
            now: instant(self.now),
            ledger: &ledger,
            boot: &self.boot,
        };
        let me = step.who.name();
        let mut records = vec![honest(
            issue,
            ledger.last(),
            me,
            step.action,
            step.ttl,
            client_now,
            &self.boot,
        )];
        let mut target = format!("refs/leases/{issue}");
        let mut parents: Vec<String> = tip.iter().cloned().collect();
        #[derive(PartialEq)]
        enum Shape {
            Normal,
            Replace,
            Rewind,
            Delete,
        }
        let mut shape = Shape::Normal;
        for m in mutations {
            match m {
                Mutation::WrongRef(i) => target = format!("refs/leases/{}", ISSUES[*i]),
                Mutation::ExtraParent(i) => {
                    let other = self
                        .tip(ISSUES[*i])
                        .filter(|t| Some(t) != tip.as_ref())
                        .or_else(|| below_tip.clone());
                    parents.extend(other);
                }
                Mutation::ReplaceRef => shape = Shape::Replace,
                Mutation::Rewind => shape = Shape::Rewind,
                Mutation::Delete => shape = Shape::Delete,
                Mutation::Chain(action) => {
                    let next = honest(
                        issue,
                        records.last(),
                        me,
                        *action,
                        step.ttl,
                        client_now,
                        &self.boot,
                    );
                    records.push(next);
                }
                m => mutate(m, records.last_mut().expect("a record"), &cx),
            }
        }
        let commit_all = |base: Vec<String>| {
            let mut parents = base;
            let mut last = None;
            for record in &records {
                let p: Vec<&str> = parents.iter().map(String::as_str).collect();
                let c = forge::lease_commit(&self.forger, record, &p);
                parents = vec![c.clone()];
                last = Some(c);
            }
            last.expect("a record")
        };
        let shown = records
            .iter()
            .map(|r| serde_json::to_string(r).expect("JSON"))
            .collect::<Vec<_>>()
            .join(" then ");
        let (refspec, what) = match (&shape, &tip) {
            (Shape::Replace, Some(tip)) => {
                let commit = commit_all(below_tip.iter().cloned().collect());
                (
                    format!("{commit}:refs/replace/{tip}"),
                    format!("replace {tip} of {issue} by {shown}"),
                )
            }
            (Shape::Rewind, Some(_)) if below_tip.is_some() => {
                let to = below_tip.clone().expect("checked");
                (
                    format!("+{to}:{target}"),
                    format!("rewind {target} to {to}"),
                )
            }
            (Shape::Rewind | Shape::Delete, _) => {
                (format!(":{target}"), format!("delete {target}"))
            }
            _ => {
                let commit = commit_all(parents.clone());
                (
                    format!("{commit}:{target}"),
                    format!("{shown} (parents {parents:?}) to {target}"),
                )
            }
        };
        let run = self
            .forger
            .git_cmd()
            .env("GIT_TERMINAL_PROMPT", "0")
            .env_remove("REMOTE_USER")
            .args(["push", &self.url(step.who), &refspec])
            .run();
        (format!("git push {refspec}: {what}"), run)
    }

    /// Reads the server's ledgers with plain git, replace refs ignored; records the new
    /// commits as arrived now from `pusher`.
    pub(super) fn read_ledgers(&mut self, pusher: Option<&str>) -> Result<Vec<String>, String> {
        let plain = |args: &[&str]| {
            let mut all = vec!["--no-replace-objects"];
            all.extend_from_slice(args);
            self.server.git(&all)
        };
        let refs = plain(&[
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            "refs/leases/",
        ]);
        let mut chains = BTreeMap::new();
        let mut failures = Vec::new();
        for line in refs.lines() {
            let (name, tip) = line.split_once(' ').expect("ref and object");
            let issue = name.trim_start_matches("refs/leases/").to_owned();
            let list = plain(&["rev-list", "--first-parent", "--reverse", tip]);
            let commits: Vec<String> = list.lines().map(str::to_owned).collect();
            for c in &commits {
                if self.records.contains_key(c) {
                    continue;
                }
                let text = plain(&["cat-file", "-p", &format!("{c}:lease.json")]);
                let record = serde_json::from_str(&text).unwrap_or_else(|e| {
                    failures.push(format!(
                        "(3) {issue}: lease.json of {c} does not read back ({e}):\n{text}"
                    ));
                    Value::Null
                });
                self.records.insert(c.clone(), record);
                self.arrived.insert(c.clone(), self.now);
                self.pushed_by.insert(c.clone(), pusher.map(str::to_owned));
            }
            chains.insert(issue, commits);
        }
        // Ledgers only move forward, and none disappears.
        for (issue, old) in &self.chains {
            match chains.get(issue) {
                None => failures.push(format!("(3) the ledger of {issue} disappeared")),
                Some(new) if !new.starts_with(old) => failures.push(format!(
                    "(3) the ledger of {issue} went back or was rewritten: it was {old:?}, it is {new:?}"
                )),
                _ => {}
            }
        }
        let changed = chains
            .iter()
            .filter(|(i, c)| self.chains.get(*i) != Some(*c))
            .map(|(i, _)| i.clone())
            .collect();
        self.chains = chains;
        if failures.is_empty() {
            Ok(changed)
        } else {
            Err(failures.join("\n"))
        }
    }

    /// Properties 3 to 7 on the ledgers as read.
    pub(super) fn ledger_properties(&mut self) -> Vec<String> {
        let mut failures = Vec::new();
        for (issue, commits) in &self.chains {
            let mut token = 0u64;
            let mut prev: Option<(&String, &Value)> = None;
            for c in commits {
                let r = &self.records[c];
                let event = r["event"].as_str().unwrap_or("?");
                let t = r["token"].as_u64();
                let pusher = self.pushed_by[c].as_deref();
                // (3) tokens: one more per tenure, kept otherwise; never issued twice.
                if event == "acquire" {
                    if t != Some(token + 1) {
                        failures.push(format!(
                            "(3) {issue}: the acquire {c} takes token {} after token {token}",
                            r["token"]
                        ));
                    }
                    if let Some(t) = t {
                        let first = self
                            .issued
                            .entry((issue.clone(), t))
                            .or_insert_with(|| c.clone());
                        if first != c {
                            failures.push(format!(
                                "(3) {issue}: token {t} issued twice, by {first} and {c}"
                            ));
                        }
                    }
                } else if t != Some(token) {
                    failures.push(format!(
                        "(3) {issue}: the {event} {c} records token {} in tenure {token}",
                        r["token"]
                    ));
                }
                token = t.unwrap_or(token);
                // (6) only an authenticated pusher, and a new tenure is its own.
                if pusher.is_none() {
                    failures.push(format!(
                        "(6) {issue}: {c} arrived from nobody authenticated"
                    ));
                }
                if event == "acquire" && r["holder"].as_str() != pusher {
                    failures.push(format!(
                        "(6) {issue}: {c} gives a tenure to {}, but {} pushed it",
                        r["holder"],
                        pusher.unwrap_or("nobody")
                    ));
                }
                // (7) times as the format writes them.
                for f in ["at", "acquired_at", "expires_at"] {
                    if let Some(text) = r[f].as_str() {
                        if time(&r[f]).map(rfc3339).as_deref() != Some(text) {
                            failures.push(format!(
                                "(7) {issue}: {c} records {f} {text:?}, not YYYY-MM-DDTHH:MM:SSZ"
                            ));
                        }
                    }
                }
                // (4) and (5): what ended the previous state, by the server's clock and as
                // recorded.
                if let Some((pc, p)) = prev {
                    let arrived = instant(self.arrived[c]);
                    let held = p["holder"].is_string();
                    let gone = gone_here(&p["process"], &self.boot);
                    let expiry = time(&p["expires_at"]);
                    let live_on_arrival = held && !gone && expiry.is_none_or(|e| arrived < e);
                    let until = expiry.map_or("no expiry".to_owned(), rfc3339);
                    if event == "acquire" && live_on_arrival {
                        failures.push(format!(
                            "(4) {issue}: token {} ({}, until {until}) was still live when {c} (token {}) arrived at {}",
                            p["token"], p["holder"], r["token"], rfc3339(arrived)
                        ));
                    }
                    if event == "acquire" && held && !gone {
                        let begins = time(&r["acquired_at"]);
                        if expiry.is_none() || begins.zip(expiry).is_some_and(|(b, e)| b < e) {
                            failures.push(format!(
                                "(4) {issue}: as recorded, token {} ({}, until {until}) overlaps token {} from {} ({c} on {pc})",
                                p["token"], p["holder"], r["token"], r["acquired_at"]
                            ));
                        }
                    }
                    let frees = matches!(event, "release" | "complete" | "abandon" | "revoke");
                    let by_right = pusher.is_some() && pusher == p["holder"].as_str()
                        || event == "revoke" && pusher == Some(ADMIN);
                    if frees && live_on_arrival && !by_right {
                        failures.push(format!(
                            "(5) {issue}: {}'s lease, live until {until}, was freed by {c} ({event}) pushed by {} at {}",
                            p["holder"], pusher.unwrap_or("nobody"), rfc3339(arrived)
                        ));
                    }
                }
                prev = Some((c, r));
            }
        }
        failures
    }

    /// Property 2: the following clone takes and shows what the server holds.
    pub(super) fn follow(&self, changed: &[String]) -> Vec<String> {
        let mut failures = Vec::new();
        let run = self.follower.run(&["--json", "sync"]);
        let refused = if run.code == 0 {
            run.json()["refused"].clone()
        } else {
            Value::Null
        };
        if run.code != 0 || refused != json!([]) {
            failures.push(format!("(2) the following clone's sync:\n{run}"));
        }
        let (mine, theirs) = (self.follower.lease_refs(), self.server.lease_refs());
        if mine != theirs {
            failures.push(format!(
                "(2) after sync the following clone has\n{mine}\nbut the server has\n{theirs}"
            ));
        }
        let run = self
            .follower
            .run(&["--json", "list", "--remote", "origin", "--all"]);
        if run.code != 0 {
            failures.push(format!("(2) list --remote:\n{run}"));
        } else {
            let listed = run.json();
            for (issue, commits) in &self.chains {
                let entry = listed
                    .as_array()
                    .and_then(|a| a.iter().find(|e| e["issue"] == json!(issue)));
                let shown = entry.map(|e| e["commit"].clone());
                if shown != Some(json!(commits.last())) {
                    failures.push(format!(
                        "(2) list --remote shows {issue} at {shown:?}, the server has {:?}\n{run}",
                        commits.last()
                    ));
                }
            }
        }
        for issue in changed {
            let run = self
                .follower
                .run(&["--json", "show", "--remote", "origin", issue]);
            let tip = self.chains[issue].last();
            if run.code != 0 || run.json()["commit"] != json!(tip) {
                failures.push(format!(
                    "(2) show --remote {issue} should show {tip:?}:\n{run}"
                ));
            }
        }
        failures
    }

    /// Every check of an acceptance; `Err` lists what failed.
    pub(super) fn check(&mut self, pusher: Option<&str>, tally: &mut Tally) -> Result<(), String> {
        let mut failures = Vec::new();
        let verify = self.server.lease(&["--json", "verify"]);
        tally.verified += 1;
        if verify.code != 0 {
            failures.push(format!("(1) verify in the served repository:\n{verify}"));
        }
        let changed = match self.read_ledgers(pusher) {
            Ok(changed) => changed,
            Err(e) => {
                failures.push(e);
                Vec::new()
            }
        };
        failures.extend(self.ledger_properties());
        failures.extend(self.follow(&changed));
        tally.followed += 1;
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("\n\n"))
        }
    }

    /// Property 2 for a clone made now: it syncs everything and verifies clean.
    pub(super) fn fresh_clone(&self) -> Result<(), String> {
        let fresh = self.server.mirror();
        let sync = fresh.run(&["--json", "sync"]);
        let verify = fresh.run(&["verify"]);
        let (mine, theirs) = (fresh.lease_refs(), self.server.lease_refs());
        if sync.code == 0
            && sync.json()["refused"] == json!([])
            && verify.code == 0
            && mine == theirs
        {
            Ok(())
        } else {
            Err(format!(
                "(2) a fresh clone at the end of the case:\n{sync}\n{verify}\nit has\n{mine}\nthe server has\n{theirs}"
            ))
        }
    }
}

/// The hook's refusal line in a push's (or client's) output, if any.
pub(super) fn refusal(run: &Run) -> Option<String> {
    run.stderr.lines().find_map(|l| {
        l.find("git-lease: refused")
            .map(|i| l[i..].trim().to_owned())
    })
}

/// Runs one case; `Err` says what failed, where and why.
pub(super) fn run_case(label: &str, steps: &[Step], tally: &mut Tally) -> Result<(), String> {
    tally.runs += 1;
    let mut world = World::new();
    for (k, step) in steps.iter().enumerate() {
        tally.steps += 1;
        world.set_clock(step.clock);
        // Nothing but an acquire begins a ledger honestly: on an issue never leased, every
        // step is one (forgeries of it still try the rest).
        let never_leased = world.tip(ISSUES[step.issue]).is_none();
        let step = &Step {
            who: world.resolve(step.who, ISSUES[step.issue]),
            action: if never_leased {
                Action::Acquire
            } else {
                step.action
            },
            ..step.clone()
        };
        let (what, run) = world.push(step, tally);
        let refs = world.server.refs();
        let head = format!(
            "{label}, step {} of {}: {step:?}\nserver clock {}\npushed: {what}",
            k + 1,
            steps.len(),
            at(world.now)
        );
        let context = |world: &World| {
            format!(
                "the case so far:\n{}\nthe push:\n{run}",
                world.log.join("\n")
            )
        };
        if refs == world.refs {
            let why = refusal(&run);
            match &why {
                Some(_) => tally.refused_by_hook += 1,
                None => tally.refused_otherwise += 1,
            }
            // The real client refuses (3) or writes nothing (0); anything else is a client
            // at odds with its server, except for a wrong password.
            if matches!(step.via, Via::Client)
                && !matches!(step.who, Who::WrongPassword(_))
                && ![0, 3].contains(&run.code)
            {
                return Err(format!(
                    "{head}\n(2) the real client failed against the server (exit {})\n{}",
                    run.code,
                    context(&world)
                ));
            }
            world.log.push(format!(
                "{}. {} {:?} {} at {}: refused ({})",
                k + 1,
                step.who.label(),
                step.action,
                ISSUES[step.issue],
                at(world.now),
                why.unwrap_or_else(|| format!("exit {}, nothing changed", run.code))
            ));
            continue;
        }
        tally.accepted += 1;
        world.refs = refs;
        world.log.push(format!(
            "{}. {} {:?} {} at {}: ACCEPTED: {what}",
            k + 1,
            step.who.label(),
            step.action,
            ISSUES[step.issue],
            at(world.now)
        ));
        if let Err(failed) = world.check(step.who.pusher(), tally) {
            return Err(format!("{head}\n\n{failed}\n\n{}", context(&world)));
        }
    }
    tally.fresh_clones += 1;
    world.fresh_clone().map_err(|failed| {
        format!(
            "{label}, after its last step:\n{failed}\n\nthe case:\n{}",
            world.log.join("\n")
        )
    })
}
