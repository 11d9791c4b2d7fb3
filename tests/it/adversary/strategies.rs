//! The strategies that draw a step: who pushes, what, when, through which way, and how a
//! forged record is mutated.

use super::*;

pub(super) fn who() -> impl Strategy<Value = Who> {
    prop_oneof![
        4 => Just(Who::Holder),
        6 => (0..USERS.len()).prop_map(Who::User),
        1 => (0..USERS.len()).prop_map(Who::Anonymous),
        1 => (0..USERS.len()).prop_map(Who::WrongPassword),
    ]
}

pub(crate) fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        4 => Just(Action::Acquire),
        2 => Just(Action::Renew),
        2 => Just(Action::Release),
        1 => Just(Action::Complete),
        1 => Just(Action::Abandon),
        1 => Just(Action::Revoke),
    ]
}

pub(super) fn clock() -> impl Strategy<Value = Clock> {
    prop_oneof![
        3 => Just(Clock::Stay),
        3 => (1i64..=120).prop_map(Clock::Forward),
        2 => (121i64..=900).prop_map(Clock::Forward),
        2 => (0..ISSUES.len(), -2i64..=2).prop_map(|(issue, delta)| Clock::ToExpiry { issue, delta }),
    ]
}

pub(crate) fn ttl() -> impl Strategy<Value = Option<i64>> {
    prop_oneof![
        6 => prop::sample::select(vec![60i64, 300, 600]).prop_map(Some),
        1 => Just(None),
    ]
}

pub(super) fn offset() -> impl Strategy<Value = i64> {
    prop_oneof![4 => Just(0i64), 2 => -60i64..=60, 1 => -420i64..=420]
}

pub(super) fn field() -> impl Strategy<Value = Field> {
    prop_oneof![
        Just(Field::At),
        Just(Field::AcquiredAt),
        Just(Field::ExpiresAt),
        Just(Field::All),
    ]
}

pub(super) fn spelling() -> impl Strategy<Value = Spelling> {
    prop_oneof![
        Just(Spelling::HalfSecond),
        Just(Spelling::ZeroFraction),
        Just(Spelling::PlusZero),
        Just(Spelling::LowerZ),
        Just(Spelling::LowerT),
        Just(Spelling::Space),
        Just(Spelling::Offset),
    ]
}

pub(super) fn process() -> impl Strategy<Value = Proc> {
    prop_oneof![
        Just(Proc::Elsewhere),
        Just(Proc::GoneHere),
        Just(Proc::LiveHere),
    ]
}

pub(super) fn mutation() -> BoxedStrategy<Mutation> {
    let user = || prop::option::of(0..USERS.len());
    prop_oneof![
        1 => user().prop_map(Mutation::Holder),
        1 => prop::sample::select(vec![-1i64, 1, 2]).prop_map(Mutation::Token),
        1 => user().prop_map(Mutation::By),
        1 => user().prop_map(Mutation::PreviousHolder),
        1 => (0..EVENTS.len()).prop_map(Mutation::Event),
        1 => prop::option::of(any::<bool>()).prop_map(Mutation::Takeover),
        2 => (field(), -1500i64..=1500).prop_map(|(field, secs)| Mutation::Shift { field, secs }),
        2 => (0u16..1000).prop_map(|permille| Mutation::IntoPreviousTenure { permille }),
        1 => (any::<bool>(), 1i64..=600)
            .prop_map(|(ahead, extra)| Mutation::BeyondSkew { ahead, extra }),
        2 => (field(), spelling()).prop_map(|(field, spelling)| Mutation::Spell { field, spelling }),
        2 => (process(), any::<bool>())
            .prop_map(|(process, claim_gone)| Mutation::Process { process, claim_gone }),
        1 => Just(Mutation::Session),
        1 => (0u64..=3).prop_map(Mutation::Version),
        1 => (0..DROPPABLE.len()).prop_map(Mutation::Drop),
        1 => Just(Mutation::Unknown),
        1 => (0..ISSUES.len()).prop_map(Mutation::IssueField),
        1 => (0..ISSUES.len()).prop_map(Mutation::WrongRef),
        1 => (0..ISSUES.len()).prop_map(Mutation::ExtraParent),
        2 => Just(Mutation::ReplaceRef),
        1 => Just(Mutation::Rewind),
        1 => Just(Mutation::Delete),
        1 => action().prop_map(Mutation::Chain),
    ]
    .boxed()
}

pub(super) fn via() -> impl Strategy<Value = Via> {
    prop_oneof![
        3 => Just(Via::Forge(Vec::new())),
        5 => prop::collection::vec(mutation(), 1..=2).prop_map(Via::Forge),
        2 => Just(Via::Client),
    ]
}

pub(super) fn step() -> impl Strategy<Value = Step> {
    (
        clock(),
        0..ISSUES.len(),
        who(),
        action(),
        ttl(),
        offset(),
        via(),
    )
        .prop_map(|(clock, issue, who, action, ttl, offset, via)| Step {
            clock,
            issue,
            who,
            action,
            ttl,
            offset,
            via,
        })
}
