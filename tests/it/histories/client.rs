//! One client of a history: its repository behind a faulty proxy, its seeded operations, the
//! faults it meets (killed, paused, replies dropped) and how each outcome is classified.

use super::*;

/// What `git lease` says of a push refused for a lock file in the way on the server.
const LOCK_REFUSAL: &str = "a lock file on the server is in the way";

/// One finished operation of a client.
pub(super) struct Done {
    pub(super) op: Option<Op>,
    pub(super) push: Option<PushRecord>,
    pub(super) unknown: bool,
    pub(super) left_out: bool,
    pub(super) acquired: Option<(String, u64, String)>,
}

/// A fenced push that landed: who, its token, and the server clocks of its span.
pub(super) struct PushRecord {
    pub(super) client: usize,
    pub(super) issue: String,
    pub(super) token: u64,
    pub(super) clocks: Vec<i64>,
}

/// A client: its repository, its proxy, its seeded choices.
pub(super) struct Client {
    pub(super) k: usize,
    pub(super) repo: TestRepo,
    pub(super) proxy: Proxy,
    /// The next connection's fault, when the test chose it (a hold for a pause or a kill).
    pub(super) next: Arc<std::sync::Mutex<Option<Fault>>>,
    pub(super) commits: usize,
}

pub(super) fn holder(k: usize) -> String {
    format!("c{k}")
}

pub(super) fn now_at(secs: i64) -> String {
    rfc3339(t0() + Duration::seconds(secs))
}

impl Client {
    pub(super) fn new(
        k: usize,
        seed: u64,
        setup: &Setup,
        fences: &[String],
        counts: &FaultCounts,
    ) -> Client {
        let next: Arc<std::sync::Mutex<Option<Fault>>> = Arc::default();
        let chosen = Arc::clone(&next);
        let mut rng = fastrand::Rng::with_seed(seed.wrapping_mul(1000).wrapping_add(k as u64));
        // The kills of receive-pack are drawn from a generator of their own, so that the other
        // faults of a seed stay what they were before kills were drawn.
        let mut kill_rng =
            fastrand::Rng::with_seed(seed.wrapping_mul(1000).wrapping_add(k as u64) ^ 0x6b69_6c6c);
        let kills = setup.kills;
        let counts = counts.clone();
        let plan: proxy::Plan = Box::new(move |service| {
            if let Some(fault) = chosen.lock().ok().and_then(|mut c| {
                if service == Service::ReceivePack {
                    c.take()
                } else {
                    None
                }
            }) {
                return fault;
            }
            if kills && service == Service::ReceivePack {
                let draw = kill_rng.u8(..100);
                if draw < 8 && counts.take_kill() {
                    // A push refused by the hook or a lost race never reaches its ref
                    // transaction: the kills there are drawn more often.
                    let phase = match kill_rng.u8(..8) {
                        0 => Phase::Reading(0),
                        1 => Phase::Reading(kill_rng.usize(1..600)),
                        2..=4 => Phase::Prepared,
                        _ => Phase::Committed,
                    };
                    // Counted once done ([`proxy::kills_done`]): a push may end before.
                    return Fault::Kill(phase);
                }
            }
            if rng.u8(..100) >= 12 || !counts.take() {
                return Fault::Pass;
            }
            let fault = match (rng.u8(..4), service) {
                (0, _) => Fault::Delay(std::time::Duration::from_millis(rng.u64(1..15))),
                (1, Service::ReceivePack) | (2, Service::ReceivePack) => Fault::DropReply,
                _ => Fault::Cut {
                    way: if rng.bool() {
                        Way::ToServer
                    } else {
                        Way::ToClient
                    },
                    after: rng.usize(0..3000),
                },
            };
            counts.record(fault);
            fault
        });
        let proxy = Proxy::start_killing(setup.upstream, setup.http, &setup.kill_dir, plan);
        let repo = TestRepo::client_of(&proxy.url_as(&holder(k)), &holder(k));
        repo.git(&["config", "lease.networkTimeout", "60s"]);
        for glob in fences {
            repo.git(&["config", "--add", "lease.fence", glob]);
        }
        Client {
            k,
            repo,
            proxy,
            next,
            commits: 0,
        }
    }

    /// A new commit on this client's branch of `issue`, for a fenced push.
    pub(super) fn commit(&mut self, issue: &str) -> String {
        self.commits += 1;
        let branch = format!("c{}/{issue}", self.k);
        let blob = self.repo.git_stdin(
            &["hash-object", "-w", "--stdin"],
            format!("work {} of c{}\n", self.commits, self.k).as_bytes(),
        );
        let tree = self.repo.git_stdin(
            &["mktree"],
            format!("100644 blob {blob}\twork\n").as_bytes(),
        );
        let parent = self.repo.git_run(&[
            "rev-parse",
            "-q",
            "--verify",
            &format!("refs/heads/{branch}"),
        ]);
        let mut args = vec!["commit-tree".to_owned(), tree, "-m".into(), "work".into()];
        if parent.code == 0 {
            args.push("-p".into());
            args.push(parent.stdout.trim().to_owned());
        }
        let commit = self.repo.git(&args);
        self.repo
            .git(&["update-ref", &format!("refs/heads/{branch}"), &commit]);
        branch
    }
}

/// The faults left to inject in a history, and how many of each were.
#[derive(Clone)]
pub(super) struct FaultCounts {
    pub(super) inner: Arc<std::sync::Mutex<(usize, BTreeMap<&'static str, usize>)>>,
    /// The kills of receive-pack left.
    pub(super) kills: Arc<std::sync::Mutex<usize>>,
}

impl FaultCounts {
    pub(super) fn new(budget: usize, kills: usize) -> FaultCounts {
        FaultCounts {
            inner: Arc::new(std::sync::Mutex::new((budget, BTreeMap::new()))),
            kills: Arc::new(std::sync::Mutex::new(kills)),
        }
    }

    pub(super) fn take_kill(&self) -> bool {
        let mut kills = self.kills.lock().expect("kill counts");
        if *kills == 0 {
            return false;
        }
        *kills -= 1;
        true
    }

    pub(super) fn take(&self) -> bool {
        let mut inner = self.inner.lock().expect("fault counts");
        if inner.0 == 0 {
            return false;
        }
        inner.0 -= 1;
        true
    }

    pub(super) fn record(&self, fault: Fault) {
        self.count(match fault {
            Fault::Delay(_) => "delay",
            Fault::Cut { .. } => "cut",
            Fault::DropReply => "dropped reply",
            Fault::Hold | Fault::Pass | Fault::Kill(_) => "hold",
        });
    }

    pub(super) fn count(&self, kind: &'static str) {
        *self
            .inner
            .lock()
            .expect("fault counts")
            .1
            .entry(kind)
            .or_default() += 1;
    }

    pub(super) fn counted(&self) -> BTreeMap<&'static str, usize> {
        self.inner.lock().expect("fault counts").1.clone()
    }
}

/// Signals the process group `group` (a client and the git it runs).
pub(super) fn signal(group: u32, sig: &str) {
    let _ = Command::new("kill")
        .args([sig, "--", &format!("-{group}")])
        .status();
}

/// Runs one operation of `client` at server epoch `epoch` (clock `clock`), recording it.
#[allow(clippy::too_many_arguments)]
pub(super) fn operate(
    client: &mut Client,
    kind: &Kind,
    issue: &str,
    clock: i64,
    offset: i64,
    disturb: Disturb,
    start: Instant,
    clocks: &mpsc::Receiver<i64>,
    paused: Option<&mpsc::Sender<()>>,
    counts: &FaultCounts,
) -> Done {
    let now_secs = clock + offset;
    let now = t0() + Duration::seconds(now_secs);
    let h = holder(client.k);
    let ttl = format!("{TTL}s");
    let mut args: Vec<String> = vec!["--json".into()];
    let input = match kind {
        Kind::Acquire => {
            args.extend(["acquire", issue, "--remote", "origin", "--ttl", &ttl].map(String::from));
            Some(Input::Acquire {
                holder: h.clone(),
                ttl_secs: TTL,
                now,
            })
        }
        Kind::Renew => {
            args.extend(["renew", issue, "--remote", "origin", "--ttl", &ttl].map(String::from));
            Some(Input::Renew {
                holder: h.clone(),
                ttl_secs: TTL,
                now,
            })
        }
        Kind::Release => {
            args.extend(["release", issue, "--remote", "origin"].map(String::from));
            Some(Input::Release {
                holder: h.clone(),
                now,
            })
        }
        Kind::Check(token) => {
            let token = token.to_string();
            args.extend(
                ["check", issue, "--remote", "origin", "--token", &token].map(String::from),
            );
            None
        }
        Kind::Push => {
            let branch = client.commit(issue);
            args.extend(["push", "origin", &branch].map(String::from));
            None
        }
    };
    if disturb != Disturb::None {
        if let Ok(mut next) = client.next.lock() {
            *next = Some(Fault::Hold);
        }
    }
    let mut cmd = client.repo.lease().now(&rfc3339(now)).args(&args).command();
    cmd.env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let call = start.elapsed().as_nanos() as u64;
    let child = cmd.spawn().expect("start git lease");
    let group = child.id();
    // The child is waited for by a thread of its own, which then wakes a wait for a hold.
    let (out_tx, out_rx) = mpsc::channel();
    let notify = client.proxy.notifier();
    let waiter = std::thread::spawn(move || {
        let _ = out_tx.send(child.wait_with_output());
        let _ = notify.send(mpsc::channel().0);
    });
    let mut span = vec![clock];
    let mut killed = false;
    let mut early = None;
    if disturb != Disturb::None {
        // The next receive-pack connection of this client is held at the proxy: its push has
        // been decided and not sent. A command that ends without pushing is never held.
        let held = client.proxy.held();
        let ended = out_rx.try_recv().ok();
        if let (Some(held), None) = (held, &ended) {
            match disturb {
                Disturb::Kill => {
                    proxy::release(&held);
                    signal(group, "-KILL");
                    killed = true;
                    counts.count("kill -9");
                }
                _ => {
                    signal(group, "-STOP");
                    counts.count("pause");
                    if let Some(paused) = paused {
                        let _ = paused.send(());
                    }
                    // The epochs go on without this client; it wakes at a later clock.
                    while let Ok(clock) = clocks.recv() {
                        if clock < 0 {
                            break;
                        }
                        span.push(clock);
                    }
                    signal(group, "-CONT");
                    proxy::release(&held);
                }
            }
        }
        if let Ok(mut next) = client.next.lock() {
            *next = None;
        }
        early = ended;
    }
    let out = match early {
        Some(out) => out,
        None => out_rx.recv().expect("the waiter"),
    }
    .expect("wait for git lease");
    let _ = waiter.join();
    client.proxy.drain();
    let ret = start.elapsed().as_nanos() as u64;
    let run = Run::from_output(format!("{} {}", client.k, args.join(" ")), out);
    if killed {
        // The client is gone mid-push; its clone may hold a lock left behind: start afresh.
        client.repo.git(&[
            "remote",
            "set-url",
            "origin",
            &client.proxy.url_as(&holder(client.k)),
        ]);
        return Done {
            op: input.map(|input| Op {
                client: client.k,
                issue: issue.into(),
                call,
                ret: None,
                input,
                output: None,
            }),
            push: None,
            unknown: true,
            left_out: false,
            acquired: None,
        };
    }
    if run.code == 1 && run.stderr.contains(LOCK_REFUSAL) {
        counts.count("refused for a leftover lock");
    }
    classify(
        client.k, issue, kind, input, call, ret, &run, span, now_secs,
    )
}

#[allow(clippy::too_many_arguments)]
pub(super) fn classify(
    k: usize,
    issue: &str,
    kind: &Kind,
    input: Option<Input>,
    call: u64,
    ret: u64,
    run: &Run,
    span: Vec<i64>,
    now_secs: i64,
) -> Done {
    let hook_refused = run.stderr.contains("git-lease: refused");
    let mut done = Done {
        op: None,
        push: None,
        unknown: false,
        left_out: false,
        acquired: None,
    };
    let op = |input: Input, ret: Option<u64>, output: Option<Output>| Op {
        client: k,
        issue: issue.into(),
        call,
        ret,
        input,
        output,
    };
    match run.code {
        // Refused for a lock file in the way on the server: nothing changed.
        1 if run.stderr.contains(LOCK_REFUSAL) => {
            done.left_out = true;
            return done;
        }
        1 => {
            done.unknown = true;
            done.op = input.map(|i| op(i, None, None));
            return done;
        }
        5 => {
            done.left_out = true;
            return done;
        }
        0 | 3 => {}
        _ => panic!("an operation failed unexpectedly: {run}"),
    }
    let json: Value = serde_json::from_str(run.stdout.trim()).unwrap_or(Value::Null);
    match kind {
        Kind::Push => {
            let token = json["token"].as_u64();
            if run.code == 0 {
                let token =
                    token.unwrap_or_else(|| panic!("a pushed answer names its token: {run}"));
                done.push = Some(PushRecord {
                    client: k,
                    issue: issue.into(),
                    token,
                    clocks: span.clone(),
                });
            }
            // Judged by the server at one clock (no pause): a fencing check at that instant.
            if let (Some(token), [clock]) = (token, span.as_slice()) {
                let output = if run.code == 0 {
                    Output::CheckOk
                } else {
                    Output::CheckFailed
                };
                let input = Input::Check {
                    token,
                    now: t0() + Duration::seconds(*clock),
                };
                done.op = Some(op(input, Some(ret), Some(output)));
            } else {
                done.left_out = true;
            }
        }
        Kind::Check(token) => {
            let output = if run.code == 0 {
                Output::CheckOk
            } else {
                Output::CheckFailed
            };
            let input = Input::Check {
                token: *token,
                now: t0() + Duration::seconds(now_secs),
            };
            done.op = Some(op(input, Some(ret), Some(output)));
        }
        // Refused by the server's lease rules (an error object, no answer on stdout).
        _ if hook_refused || json["outcome"].is_null() && run.code == 3 => done.left_out = true,
        _ => {
            let token = json["token"].as_u64().unwrap_or(0);
            let output = match json["outcome"].as_str() {
                Some("acquired") => Output::Acquired { token },
                Some("held") => Output::Held,
                Some("renewed") => Output::Renewed { token },
                Some("not_holder") => Output::NotHolder,
                Some("released") => Output::Released,
                Some("not_held") => Output::NotHeld,
                _ => panic!("an answer the history cannot read: {run}"),
            };
            if let Output::Acquired { token } = output {
                done.acquired = Some((issue.to_owned(), token, holder(k)));
            }
            done.op = input.map(|i| op(i, Some(ret), Some(output)));
        }
    }
    done
}
