//! The generator of forged folds: what a forgery changes of the honest fold (content, view,
//! place, target, parents, wrapping), drawn at random and from a fixed catalogue.

use super::*;

/// The default `lease.maxClockSkew`, in seconds: a fold's time may be this far from the clock.
const SKEW: i64 = 300;

/// A forged fold: the honest next fold, mutated.
#[derive(Clone, Debug)]
pub(super) struct Forgery {
    /// What its tree records, in order.
    pub(super) content: Vec<Content>,
    /// How a path holding two gitlinks is read when the parents are listed.
    pub(super) view: View,
    /// What is done to the parents listed for that tree.
    pub(super) parents: Option<Parents>,
    /// Its time, in seconds from the server's clock, beyond `lease.maxClockSkew`.
    pub(super) skew: Option<i64>,
    /// Its time within `lease.maxClockSkew`, when there is no `skew`.
    pub(super) jitter: i64,
    /// What is pushed instead of the fold itself.
    pub(super) wrap: Option<Wrap>,
}

impl Forgery {
    pub(super) fn is_honest(&self) -> bool {
        self.content.is_empty()
            && self.parents.is_none()
            && self.skew.is_none()
            && self.wrap.is_none()
    }
}

/// One change to what the fold's tree records.
#[derive(Clone, Copy, Debug)]
pub(super) enum Content {
    /// An entry the previous fold records, left out.
    Drop(&'static str),
    /// The entry moved to the `n`th older commit of its own ledger (neither the tip its ref
    /// is at nor the one archived before).
    Older(&'static str, usize),
    /// The entry moved to the `n`th tip of another ledger (pushed or not).
    Other(&'static str, usize),
    /// The live ledger recorded at its tip.
    Live,
    /// A ledger recorded at a tip no ref is at: `b` moved on past its archived tip in the
    /// attacker's clone (`true`), or `z`, never pushed.
    Unreffed(bool),
    /// The entry at a path not its own.
    Misplaced(&'static str, Misplace),
    /// The entry with a mode other than a gitlink's.
    Mode(&'static str, NotLink),
    /// The entry a gitlink to something other than a commit.
    NotCommit(&'static str, Target),
    /// A second entry of the same name beside the issue's (the `n`th of its own commits and
    /// the other ledgers' tips), before it or after it.
    Duplicate(&'static str, usize, bool),
    /// An empty tree beside the fan-out.
    EmptyTree(Place),
    /// A `lease.json` at the root, as a ledger commit has.
    LeaseFile,
    /// Nothing recorded: the previous fold's tree again.
    Nothing,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum View {
    First,
    Last,
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Misplace {
    /// `<id>`.
    Root,
    /// `<hex0-1>/<id>`.
    OneLevel,
    /// `<hex0-1>/<hex2-3>/zz/<id>`.
    Deeper,
    /// `<hex2-3>/<hex0-1>/<id>`.
    Swapped,
    /// `00/00/<id>`.
    Zeros,
    /// The fan-out in upper case.
    Upper,
}

#[derive(Clone, Copy, Debug)]
pub(super) enum NotLink {
    /// `100644`, the tip's `lease.json`.
    File,
    /// `100755`, the same.
    Executable,
    /// `120000`, the same.
    Symlink,
    /// `040000`, the tip's tree.
    Tree,
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Target {
    /// The tip's tree (which the server has).
    Tree,
    /// The tip's `lease.json` (which the server has).
    Blob,
    /// An annotated tag of the tip (which no push sends: gitlinks are not followed).
    Tag,
    /// An object that exists nowhere.
    Missing,
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Place {
    /// `zz` at the root.
    Root,
    /// `<hex0-1>/zz`, beside the issue's second level.
    FanOut(&'static str),
    /// `<hex0-1>/<hex2-3>/empty`, beside the issue's entry.
    Beside(&'static str),
}

/// One change to the parents listed for the tree (each leaves a different list).
#[derive(Clone, Copy, Debug)]
pub(super) enum Parents {
    /// The `n`th left out (the previous fold, for 0).
    Drop(usize),
    /// The `n`th of every commit the attacker has (the parents included) inserted at `at`.
    Insert(usize, usize),
    /// The previous fold swapped with the `n`th parent that differs from it (or left out when
    /// none does): the tips may come in any order, the previous fold only first.
    Swap(usize),
    /// The previous fold replaced by the `n`th ledger commit.
    NotAFold(usize),
    /// None at all.
    Orphan,
}

/// What is pushed as the archive instead of the fold.
#[derive(Clone, Copy, Debug)]
pub(super) enum Wrap {
    /// An annotated tag of it.
    Tag,
    /// Its tree.
    Tree,
    /// A blob (a `lease.json`).
    Blob,
    /// The `n`th ledger commit.
    Ledger(usize),
}

pub(super) fn issue() -> impl Strategy<Value = &'static str> {
    prop::sample::select(ENTRIES.to_vec())
}

pub(super) fn content() -> impl Strategy<Value = Content> {
    let misplace = prop_oneof![
        Just(Misplace::Root),
        Just(Misplace::OneLevel),
        Just(Misplace::Deeper),
        Just(Misplace::Swapped),
        Just(Misplace::Zeros),
        Just(Misplace::Upper),
    ];
    let not_link = prop_oneof![
        Just(NotLink::File),
        Just(NotLink::Executable),
        Just(NotLink::Symlink),
        Just(NotLink::Tree),
    ];
    let target = prop_oneof![
        Just(Target::Tree),
        Just(Target::Blob),
        Just(Target::Tag),
        Just(Target::Missing),
    ];
    let place = prop_oneof![
        Just(Place::Root),
        issue().prop_map(Place::FanOut),
        issue().prop_map(Place::Beside),
    ];
    prop_oneof![
        prop::sample::select(vec!["a", "b"]).prop_map(Content::Drop),
        (issue(), any::<usize>()).prop_map(|(i, n)| Content::Older(i, n)),
        (issue(), any::<usize>()).prop_map(|(i, n)| Content::Other(i, n)),
        Just(Content::Live),
        any::<bool>().prop_map(Content::Unreffed),
        (issue(), misplace).prop_map(|(i, m)| Content::Misplaced(i, m)),
        (issue(), not_link).prop_map(|(i, m)| Content::Mode(i, m)),
        (issue(), target).prop_map(|(i, t)| Content::NotCommit(i, t)),
        (issue(), any::<usize>(), any::<bool>()).prop_map(|(i, n, f)| Content::Duplicate(i, n, f)),
        place.prop_map(Content::EmptyTree),
        Just(Content::LeaseFile),
        Just(Content::Nothing),
    ]
}

pub(super) fn parents() -> impl Strategy<Value = Parents> {
    prop_oneof![
        any::<usize>().prop_map(Parents::Drop),
        (any::<usize>(), any::<usize>()).prop_map(|(n, at)| Parents::Insert(n, at)),
        any::<usize>().prop_map(Parents::Swap),
        any::<usize>().prop_map(Parents::NotAFold),
        Just(Parents::Orphan),
    ]
}

pub(super) fn wrap() -> impl Strategy<Value = Wrap> {
    prop_oneof![
        Just(Wrap::Tag),
        Just(Wrap::Tree),
        Just(Wrap::Blob),
        any::<usize>().prop_map(Wrap::Ledger),
    ]
}

pub(super) fn forgery() -> impl Strategy<Value = Forgery> {
    let skew = prop_oneof![SKEW + 1..=SKEW + 60, SKEW + 1..=100_000_000i64];
    let signed = (skew, any::<bool>()).prop_map(|(s, late)| if late { s } else { -s });
    let view = prop_oneof![Just(View::First), Just(View::Last)];
    (
        prop::collection::vec(content(), 0..=2),
        view,
        prop::option::weighted(0.4, parents()),
        prop::option::weighted(0.2, signed),
        -SKEW..=SKEW,
        prop::option::weighted(0.1, wrap()),
    )
        .prop_map(|(content, view, parents, skew, jitter, wrap)| Forgery {
            content,
            view,
            parents,
            skew,
            jitter,
            wrap,
        })
        .prop_filter("a forgery changes something", |f| !f.is_honest())
}

/// The catalogue: every mutation alone, tried on every run whatever proptest draws.
pub(super) fn catalogue() -> Vec<Forgery> {
    let alone = |content: Vec<Content>| Forgery {
        content,
        view: View::First,
        parents: None,
        skew: None,
        jitter: 0,
        wrap: None,
    };
    let mut all = Vec::new();
    let mut contents = vec![
        Content::Drop("a"),
        Content::Drop("b"),
        Content::Live,
        Content::Unreffed(true),
        Content::Unreffed(false),
        Content::EmptyTree(Place::Root),
        Content::LeaseFile,
        Content::Nothing,
    ];
    for issue in ENTRIES {
        contents.extend([
            Content::Older(issue, 0),
            Content::Older(issue, 1),
            Content::Other(issue, 0),
            Content::EmptyTree(Place::FanOut(issue)),
            Content::EmptyTree(Place::Beside(issue)),
        ]);
    }
    for how in [
        Misplace::Root,
        Misplace::OneLevel,
        Misplace::Deeper,
        Misplace::Swapped,
        Misplace::Zeros,
        Misplace::Upper,
    ] {
        contents.push(Content::Misplaced("gh/7", how));
    }
    for mode in [
        NotLink::File,
        NotLink::Executable,
        NotLink::Symlink,
        NotLink::Tree,
    ] {
        contents.push(Content::Mode("d", mode));
    }
    for target in [Target::Tree, Target::Blob, Target::Tag, Target::Missing] {
        contents.push(Content::NotCommit("a", target));
    }
    all.extend(contents.into_iter().map(|c| alone(vec![c])));
    // Doubled entries, read first-wins or last-wins when the parents are listed.
    for issue in ENTRIES {
        for first in [true, false] {
            for view in [View::First, View::Last] {
                all.push(Forgery {
                    view,
                    ..alone(vec![Content::Duplicate(issue, 0, first)])
                });
            }
        }
    }
    for parents in [
        Parents::Drop(0),
        Parents::Drop(1),
        Parents::Drop(3),
        Parents::Insert(0, 4),
        Parents::Insert(usize::MAX, 0),
        Parents::Swap(0),
        Parents::Swap(1),
        Parents::NotAFold(1),
        Parents::Orphan,
    ] {
        all.push(Forgery {
            parents: Some(parents),
            ..alone(Vec::new())
        });
    }
    for skew in [SKEW + 1, -SKEW - 1, 100_000_000, -100_000_000] {
        all.push(Forgery {
            skew: Some(skew),
            ..alone(Vec::new())
        });
    }
    for wrap in [Wrap::Tag, Wrap::Tree, Wrap::Blob, Wrap::Ledger(0)] {
        all.push(Forgery {
            wrap: Some(wrap),
            ..alone(Vec::new())
        });
    }
    all
}
