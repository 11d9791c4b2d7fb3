//! The pieces of the format that no test through git reaches exactly.
use super::*;

const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICRkqi2WWnA5hpf9qrUbfKDM31hJPjgVFK99n5ZdQrnx";

#[test]
fn patterns_match_as_ssh_matches_them() {
    let list = |s: &str| s.split(',').map(str::to_owned).collect::<Vec<_>>();
    assert!(matches_list("alice@x.org", &list("*@x.org")));
    assert!(matches_list("bob", &list("b?b")));
    assert!(!matches_list("bob", &list("b?")));
    assert!(!matches_list("mallory@x.org", &list("*@x.org,!mallory@*")));
    assert!(!matches_list("alice", &list("!bob")));
    assert!(matches_list("a", &list("*")));
}

#[test]
fn options_admins_and_errors_name_their_line() {
    let text = format!(
        "# lease-admins: ops, root\n\nalice {KEY}\n\"bob,carol\" namespaces=\"git,file\",valid-after=20260101Z {KEY} c\n"
    );
    let list = AllowedSigners::parse("f", "v", text.as_bytes()).unwrap();
    assert_eq!(list.admins(), ["ops", "root"]);
    assert_eq!(list.signers.len(), 2);
    assert_eq!(list.signers[1].principals, ["bob", "carol"]);
    assert_eq!(list.signers[1].line, 4);
    let bad = AllowedSigners::parse("f", "v", format!("a\nalice bogus=1 {KEY}\n").as_bytes())
        .unwrap_err();
    assert_eq!(bad.line, 1);
    let bad =
        AllowedSigners::parse("f", "v", format!("alice frob {KEY}\n").as_bytes()).unwrap_err();
    assert_eq!(bad.line, 1);
    assert!(bad.reason.contains("frob"), "{bad:?}");
    let bad = AllowedSigners::parse(
        "f",
        "v",
        format!("alice valid-after=20260101 {KEY}\n").as_bytes(),
    )
    .unwrap_err();
    assert!(bad.reason.contains("Z"), "{bad:?}");
}

#[test]
fn the_payload_is_the_commit_without_its_signature_header() {
    let commit = b"tree t\nparent p\nauthor a <a> 1 +0000\ncommitter c <c> 1700000000 +0000\ngpgsig -----BEGIN SSH SIGNATURE-----\n abc\n -----END SSH SIGNATURE-----\n\nmessage\n";
    let signed = split_commit(commit, b"gpgsig");
    assert_eq!(
        signed.payload,
        b"tree t\nparent p\nauthor a <a> 1 +0000\ncommitter c <c> 1700000000 +0000\n\nmessage\n"
    );
    assert_eq!(
        signed.signature.as_deref(),
        Some(&b"-----BEGIN SSH SIGNATURE-----\nabc\n-----END SSH SIGNATURE-----"[..])
    );
    assert_eq!(signed.committed_at, Some(1_700_000_000));
}
