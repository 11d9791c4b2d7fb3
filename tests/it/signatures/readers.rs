//! Steps signed by the wrong key, or not at all, refused by every reader: a takeover, a
//! release, a renew, a signature over other bytes, a key not listed, another namespace.

use super::*;

#[test]
fn a_takeover_signed_by_a_listed_key_not_the_new_holders_is_refused_by_every_reader() {
    if crate::signatures::no_ssh_keygen() {
        return;
    }
    // alice's tenure expired at 600; "bob" takes over, signed with ops's key.
    refused_by_every_reader(
        |repo, keys, tip| {
            step(
                repo,
                keys,
                &acquired("42", "bob", 2, 700, Some(600)),
                Some(tip),
                Some("ops"),
            )
        },
        720,
        "not allowed for bob",
    );
}

#[test]
fn an_unsigned_takeover_is_refused_by_every_reader() {
    if crate::signatures::no_ssh_keygen() {
        return;
    }
    refused_by_every_reader(
        |repo, keys, tip| {
            step(
                repo,
                keys,
                &acquired("42", "bob", 2, 700, Some(600)),
                Some(tip),
                None,
            )
        },
        720,
        "unsigned",
    );
}

#[test]
fn a_release_in_the_holders_name_signed_by_another_is_refused_by_every_reader() {
    if crate::signatures::no_ssh_keygen() {
        return;
    }
    refused_by_every_reader(
        |repo, keys, tip| {
            step(
                repo,
                keys,
                &freed("42", "release", "alice", 1, 300),
                Some(tip),
                Some("bob"),
            )
        },
        320,
        "not allowed for alice",
    );
}

#[test]
fn an_unsigned_renew_is_refused_by_every_reader() {
    if crate::signatures::no_ssh_keygen() {
        return;
    }
    refused_by_every_reader(
        |repo, keys, tip| {
            step(
                repo,
                keys,
                &renewed("42", "alice", 1, 0, 300, 600),
                Some(tip),
                None,
            )
        },
        320,
        "unsigned",
    );
}

#[test]
fn a_renew_signed_by_another_listed_key_is_refused_by_every_reader() {
    if crate::signatures::no_ssh_keygen() {
        return;
    }
    refused_by_every_reader(
        |repo, keys, tip| {
            step(
                repo,
                keys,
                &renewed("42", "alice", 1, 0, 300, 600),
                Some(tip),
                Some("bob"),
            )
        },
        320,
        "not allowed for alice",
    );
}

#[test]
fn a_signature_over_other_bytes_is_refused_by_every_reader() {
    if crate::signatures::no_ssh_keygen() {
        return;
    }
    // alice's own signature of a renew until 900, moved onto a renew until 100000.
    refused_by_every_reader(
        |repo, keys, tip| {
            let honest = step(
                repo,
                keys,
                &renewed("42", "alice", 1, 0, 300, 600),
                Some(tip),
                Some("alice"),
            );
            let other = step(
                repo,
                keys,
                &renewed("42", "alice", 1, 0, 300, 100_000),
                Some(tip),
                None,
            );
            graft(repo, &honest, &other)
        },
        320,
        "bad signature",
    );
}

#[test]
fn a_key_not_in_the_list_is_refused_by_every_reader() {
    if crate::signatures::no_ssh_keygen() {
        return;
    }
    refused_by_every_reader(
        |repo, keys, tip| {
            step(
                repo,
                keys,
                &renewed("42", "alice", 1, 0, 300, 600),
                Some(tip),
                Some(UNLISTED),
            )
        },
        320,
        "does not allow",
    );
}

#[test]
fn a_signature_in_another_namespace_is_refused_by_every_reader() {
    if crate::signatures::no_ssh_keygen() {
        return;
    }
    refused_by_every_reader(
        |repo, keys, tip| {
            let unsigned = step(
                repo,
                keys,
                &renewed("42", "alice", 1, 0, 300, 600),
                Some(tip),
                None,
            );
            signed_in_namespace(repo, keys, &unsigned, "alice", "file")
        },
        320,
        "namespace",
    );
}
