//! A remote's newest fold taken on sight (`lease.trustArchive`, docs/SECURITY.md): the
//! archive index.
//!
//! A claim must know whether the remote's archive records its issue, and a clone that never
//! verified that archive would otherwise fetch and judge every fold and every archived ledger
//! first (seconds at 100,000 archived ledgers, git's fetch of the whole history). With
//! `lease.trustArchive`, until a read of this clone verifies the archive
//! ([`Remote::fetched_archive`]), claims read the remote's newest fold alone: `git fetch
//! --depth=1` of `refs/lease-archive` into a shallow side repository of the clone's own,
//! `$GIT_COMMON_DIR/lease-archive-index/<remote>`, never into the clone (git would make the
//! whole clone shallow). Its folds before are not judged: a remote whose hook judges every
//! fold and every claim (docs/SERVER.md) keeps them true, and a hookless one is trusted to.
//!
//! From a server that filters (`uploadpack.allowFilter`), the index is partial (git's promisor
//! packs): the fold comes with its root tree alone, and a first-level tree of the fan-out on
//! a claimed issue's path comes when a claim needs it, with the trees directly under it
//! (1/256 of the fold's trees: 150 KiB at 1M archived ledgers, not 38 MiB). A server that does
//! not filter sends the whole tree with the fold.
//!
//! The clone receives the fold's commit alone, unreachable from its refs, since a push guarded
//! by the archive's value hands git that object; a claim of an issue the fold records goes on
//! from the archived ledger, which only the verified archive brings.

use std::collections::BTreeSet;
use std::path::PathBuf;

use gix::ObjectId;

use super::{run, verdict, Remote};
use crate::error::{Error, Result};
use crate::store::{ArchivePath, Fold, Store, ARCHIVE_REF};

/// The folder of the archive indexes, in the repository's common directory: one shallow bare
/// repository per remote, partial where the remote filters.
pub const INDEX_DIR: &str = "lease-archive-index";

/// How many packs an index may hold before a fetch packs them into one.
const INDEX_PACKS: usize = 16;

/// The size of its packs past which an index is made anew before its next fetch of a fold:
/// git keeps every object a filtered fetch brought (its promisor packs) through `git gc`,
/// the trees of folds long replaced included. The whole newest fold at 1M archived ledgers
/// is 38 MiB.
const INDEX_MAX_BYTES: u64 = 64 << 20;

/// The number of packs in the index at `dir`, and their size in bytes.
fn index_packs(dir: &std::path::Path) -> (usize, u64) {
    let Ok(entries) = std::fs::read_dir(dir.join("objects").join("pack")) else {
        return (0, 0);
    };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".pack"))
        .fold((0, 0), |(count, bytes), e| {
            (count + 1, bytes + e.metadata().map_or(0, |m| m.len()))
        })
}

/// Removes the index at `dir`, best effort (a cache): renamed away first, so that no command
/// of this clone finds it half removed.
fn remove_index(dir: &std::path::Path) {
    let mut away = dir.as_os_str().to_owned();
    away.push(format!(".old-{}", std::process::id()));
    if std::fs::rename(dir, &away).is_ok() {
        let _ = std::fs::remove_dir_all(&away);
    }
}

/// A remote's newest fold as its index holds it.
pub(crate) struct IndexedFold {
    store: Store,
    fold: Fold,
}

impl IndexedFold {
    /// The fold's commit.
    pub(crate) fn id(&self) -> ObjectId {
        self.fold.commit
    }
}

impl Remote<'_> {
    /// Whether claims read this remote's archive from its newest fold alone: no fold of the
    /// remote was verified here (once one is, every later read judges the new folds from
    /// it), and `lease.trustArchive` is true, or unset and doctor's probe found the server's
    /// hook judges every fold ([`verdict::Verdict::archive_judged`]).
    pub(crate) fn trusts_newest_fold(&self) -> Result<bool> {
        let trusted = match self.trust_archive {
            Some(set) => set,
            None => self.verdict.archive_judged(),
        };
        Ok(trusted && self.seen_archive()?.is_none())
    }

    /// Whether claims may yet read this remote's archive from its newest fold alone: as
    /// [`Remote::trusts_newest_fold`], or undecided (`lease.trustArchive` unset, the server
    /// not probed yet), so that the first fetch leaves the archive out.
    pub(crate) fn may_trust_newest_fold(&self) -> Result<bool> {
        let undecided = self.trust_archive.is_none() && self.archive_undecided()?;
        Ok(undecided || self.trusts_newest_fold()?)
    }

    /// Whether `lease.trustArchive` is unset, nothing was verified of the archive and the
    /// server is yet to be probed, which a claim does ([`Remote::trusts_newest_fold_once_judged`]).
    fn archive_undecided(&self) -> Result<bool> {
        Ok(self.trust_archive.is_none()
            && self.seen_archive()?.is_none()
            && matches!(self.verdict.read(), verdict::Judged::Never)
            && !self.unsafe_cas_allowed()?)
    }

    /// Whether a write may push its first claim of an issue never seen here blind: nothing of
    /// the archive was verified here, `lease.trustArchive` is unset (set, it decides how the
    /// archive is read), and the server's hook said it judges every fold, and so every claim
    /// against the archive (probed first, once, if nothing judged the server yet: the probe
    /// would run before the push anyway).
    pub(crate) fn hook_judges_claims(&self) -> Result<bool> {
        if self.trust_archive.is_some() || self.seen_archive()?.is_some() {
            return Ok(false);
        }
        if !self.local_push {
            self.check_writes_allowed()?;
        }
        Ok(self.verdict.archive_judged())
    }

    /// Marks a claim under way: from now on, a read of the archive may probe the server
    /// ([`Remote::trusts_newest_fold_once_judged`]).
    pub(crate) fn begin_claim(&self) {
        self.claiming.set(true);
    }

    /// As [`Remote::trusts_newest_fold`], after doctor's probe has judged the server when
    /// nothing decided yet and a claim is under way: its hook's report says whether it judges
    /// every fold. A claim through a server on the network probes it before its first push
    /// anyway; one through this machine's receive-pack probes it for this alone, once, and
    /// goes on without trust if the probe cannot tell.
    pub(crate) fn trusts_newest_fold_once_judged(&self) -> Result<bool> {
        if self.claiming.get() && self.archive_undecided()? {
            let probed = self.probe_once();
            if !self.local_push {
                probed?;
            }
        }
        self.trusts_newest_fold()
    }

    fn index_dir(&self) -> PathBuf {
        self.ledger
            .store()
            .common_dir()
            .join(INDEX_DIR)
            .join(&self.slug)
    }

    /// Returns the fold the index holds, as last fetched, without a fetch (`None`: no index,
    /// or an empty one), its commit copied into the clone.
    pub(crate) fn indexed_fold(&self) -> Result<Option<IndexedFold>> {
        let dir = self.index_dir();
        if !dir.join("HEAD").is_file() {
            return Ok(None);
        }
        let store = Store::open(&dir)?;
        let Some(id) = store.tip_of(ARCHIVE_REF)? else {
            return Ok(None);
        };
        let fold = store.fold(id)?;
        self.ledger.store().copy_fold_commit(&store, id)?;
        Ok(Some(IndexedFold { store, fold }))
    }

    /// Returns the fold of this remote's index, as last fetched, if `lease.trustArchive` is
    /// set and that fold does not record `issue`: a claim of it decides without fetching the
    /// fold again (only the trees on the issue's path that a partial index lacks), and pushes
    /// guarded by that fold.
    pub(crate) fn fold_without(&self, issue: &crate::issue::IssueId) -> Result<Option<ObjectId>> {
        if !self.trusts_newest_fold()? {
            return Ok(None);
        }
        // An index that cannot answer is passed over: the claim fetches instead.
        Ok(match self.indexed_fold() {
            Ok(Some(fold)) if matches!(self.fold_records(&fold, issue.as_str()), Ok(false)) => {
                Some(fold.id())
            }
            _ => None,
        })
    }

    /// Fetches the remote's newest fold alone into the index and returns it (`None`: the
    /// remote has no archive). The answer is kept for the read under way.
    pub(crate) fn newest_fold(&self) -> Result<Option<std::rc::Rc<IndexedFold>>> {
        if let Some(known) = self.indexed.borrow().as_ref() {
            return Ok(known.clone());
        }
        let fetched = self.fetch_newest_fold()?.map(std::rc::Rc::new);
        *self.indexed.borrow_mut() = Some(fetched.clone());
        Ok(fetched)
    }

    /// Whether `fold` records `issue`. The trees on the issue's path that the index lacks are
    /// fetched first, each with the trees directly under it ([`Remote::fetch_index_trees`]).
    pub(crate) fn fold_records(&self, fold: &IndexedFold, issue: &str) -> Result<bool> {
        let mut fetched = BTreeSet::new();
        loop {
            match fold.store.archive_path(&fold.fold, issue)? {
                ArchivePath::Read(tip) => return Ok(tip.is_some()),
                ArchivePath::Lacks(tree) if !fetched.contains(&tree) => {
                    self.fetch_index_trees(&BTreeSet::from([tree]))?;
                    fetched.insert(tree);
                }
                ArchivePath::Lacks(tree) => {
                    return Err(Error::Transport {
                        command: format!("git fetch {} {tree}", self.shown),
                        message: format!("the remote did not send the tree {tree}"),
                    })
                }
            }
        }
    }

    /// Brings into the index the trees on the paths of `issues` that it lacks, with one fetch
    /// per level of the fan-out for all of them (a claim of any of 16 candidates would
    /// otherwise fetch for each in turn); from git's own servers, which send a tree asked for
    /// by its id with the trees under it, one fetch in all. Best effort: a tree still lacking
    /// afterwards is fetched, or its failure reported, by [`Remote::fold_records`].
    pub(crate) fn fetch_index_paths(&self, issues: &[&str]) {
        if issues.is_empty()
            || self.archive.borrow().is_some()
            || !matches!(self.may_trust_newest_fold(), Ok(true))
        {
            return;
        }
        let Ok(Some(fold)) = self.newest_fold() else {
            return;
        };
        if !matches!(self.trusts_newest_fold_once_judged(), Ok(true)) {
            return;
        }
        let mut asked = BTreeSet::new();
        loop {
            let lacking: BTreeSet<ObjectId> = issues
                .iter()
                .filter_map(|issue| match fold.store.archive_path(&fold.fold, issue) {
                    Ok(ArchivePath::Lacks(tree)) if !asked.contains(&tree) => Some(tree),
                    _ => None,
                })
                .collect();
            if lacking.is_empty() || self.fetch_index_trees(&lacking).is_err() {
                return;
            }
            asked.extend(lacking);
        }
    }

    fn fetch_newest_fold(&self) -> Result<Option<IndexedFold>> {
        let dir = self.index_dir();
        if index_packs(&dir).1 > INDEX_MAX_BYTES {
            remove_index(&dir);
        }
        if !dir.join("HEAD").is_file() {
            self.create_index(&dir)?;
        }
        let refspec = format!("+{ARCHIVE_REF}:{ARCHIVE_REF}");
        let shown = format!("git fetch --depth=1 {} {refspec}", self.shown);
        // A server that filters (`uploadpack.allowFilter`) sends the fold's commit and root
        // tree alone; the trees under it come as a claim needs them. One that does not
        // ignores the filter (with a warning) and sends the whole tree.
        let out = self.fetch_index(
            &[],
            &[
                "--depth=1",
                "--filter=tree:1",
                "--",
                self.target(),
                &refspec,
            ],
            &shown,
        )?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            if stderr.contains("couldn't find remote ref") {
                return Ok(None);
            }
            return Err(Error::Transport {
                command: shown,
                message: stderr.trim().to_owned(),
            });
        }
        self.compact_index(&dir);
        // The remote has an archive: an index that shows none (another command of this clone
        // made it anew meanwhile) cannot answer.
        match self.indexed_fold()? {
            Some(fold) => Ok(Some(fold)),
            None => Err(Error::Transport {
                command: shown,
                message: format!("the archive index {} holds no fold", dir.display()),
            }),
        }
    }

    /// Fetches `trees`, trees of the remote's archive the index lacks, each with the trees
    /// and gitlinks directly under it (a server that filters sends nothing deeper; the
    /// fan-out's second level holds the gitlinks, so one tree of the first level answers for
    /// 1/256 of the issues), in one fetch.
    fn fetch_index_trees(&self, trees: &BTreeSet<ObjectId>) -> Result<()> {
        let wants: Vec<String> = trees.iter().map(ObjectId::to_string).collect();
        let shown = format!("git fetch {} {}", self.shown, wants.join(" "));
        let mut args = vec!["--filter=tree:1", "--", self.target()];
        args.extend(wants.iter().map(String::as_str));
        // No "have" lines: the index holds folds whose trees it lacks, and the server would
        // leave out every tree it thinks a fold sent brings.
        let out = self.fetch_index(&["fetch.negotiationAlgorithm=noop"], &args, &shown)?;
        if !out.status.success() {
            return Err(Error::Transport {
                command: shown,
                message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        self.compact_index(&self.index_dir());
        Ok(())
    }

    /// Runs `git fetch --quiet --no-tags` with `args` in the index, with the clone's own
    /// configuration (the remote's URL and its rewrites, credentials, `http.extraHeader`,
    /// `core.sshCommand`) and `config`.
    fn fetch_index(
        &self,
        config: &[&str],
        args: &[&str],
        shown: &str,
    ) -> Result<std::process::Output> {
        // git reads an include given with `-c` only by an absolute path.
        let clone_config = std::path::absolute(self.ledger.store().common_dir().join("config"))
            .map_err(|e| Error::Io {
                context: "cannot find the repository's configuration file".to_owned(),
                source: e,
            })?;
        let include = format!("include.path={}", clone_config.display());
        // Every fetch keeps its pack (git unpacks fewer than 100 objects to loose ones),
        // so that the index's growth is counted in packs (`compact_index`). Protocol
        // version 2, whose servers take a tree's id as a want.
        let mut all = vec![
            include.as_str(),
            "fetch.unpackLimit=1",
            "protocol.version=2",
        ];
        all.extend_from_slice(config);
        let mut all_args = vec!["--quiet", "--no-tags"];
        all_args.extend_from_slice(args);
        self.fetch_into(
            &self.index_dir(),
            &all,
            &self.promisor_env(),
            &all_args,
            shown,
            self.network_timeout,
        )
    }

    /// The remote as the index's promisor for git (the source of the trees a filtered fetch
    /// left out), given as configuration in the environment (`GIT_CONFIG_COUNT`, after any
    /// the user set): a fetch with a filter would otherwise record it in the index's own
    /// configuration file, a URL's credentials included, under that file's lock, which two
    /// claims of this clone would contend for. `git gc` in the index needs it too: without
    /// it, git would take a tree the filter left out for a broken one.
    fn promisor_env(&self) -> Vec<(String, String)> {
        let base: usize = std::env::var("GIT_CONFIG_COUNT")
            .ok()
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        let target = self.target();
        let set = [
            (format!("remote.{target}.promisor"), "true"),
            (format!("remote.{target}.partialclonefilter"), "tree:1"),
        ];
        let mut env = vec![(
            "GIT_CONFIG_COUNT".to_owned(),
            (base + set.len()).to_string(),
        )];
        for (i, (key, value)) in set.into_iter().enumerate() {
            env.push((format!("GIT_CONFIG_KEY_{}", base + i), key));
            env.push((format!("GIT_CONFIG_VALUE_{}", base + i), value.to_owned()));
        }
        env
    }

    /// Packs the index with `git gc` once its fetches have left [`INDEX_PACKS`] packs or more
    /// (one per new fold fetched, and one per fetch of trees), best effort: a cache, read
    /// again on the next claim.
    fn compact_index(&self, dir: &std::path::Path) {
        if index_packs(dir).0 >= INDEX_PACKS {
            let mut cmd = crate::git::command(dir);
            cmd.envs(self.promisor_env()).args(["gc", "--quiet"]);
            let _ = run(cmd, "git gc (archive index)", self.network_timeout);
        }
    }

    /// Creates the index, a bare repository of the clone's object format.
    fn create_index(&self, dir: &std::path::Path) -> Result<()> {
        let store = self.ledger.store();
        let mut cmd = crate::git::command(dir);
        cmd.args(["init", "--quiet", "--bare"]);
        if store.repo().object_hash() != gix::hash::Kind::Sha1 {
            cmd.arg(format!("--object-format={}", store.repo().object_hash()));
        }
        cmd.arg(dir);
        let shown = format!("git init --bare {}", dir.display());
        let out = run(cmd, &shown, self.network_timeout)?;
        // A concurrent command of this clone may have made it first.
        if !out.status.success() && !dir.join("HEAD").is_file() {
            return Err(Error::Transport {
                command: shown,
                message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(())
    }
}
