//! Ledger commits signed as git signs a commit with `gpg.format=ssh`, so that plain git
//! verifies them (`git verify-commit`, `git log --show-signature`).
//!
//! - When: as git decides for any commit, `commit.gpgSign`; `lease.sign` overrides it for
//!   ledger commits alone (true signs even where `commit.gpgSign` is off, false never signs).
//!   Signing asked in a format other than SSH (`gpg.format` `openpgp`, git's default, or
//!   `x509`) is refused ([`Error::SignFormat`]).
//! - With what: `user.signingKey`, read as git reads it for SSH: a path (`~/` expanded) to a
//!   private key file, or to a public key file whose private half ssh-agent holds; or a
//!   literal public key (`key::ssh-ed25519 AAAA…`, or the older form without `key::`) whose
//!   private half ssh-agent (`SSH_AUTH_SOCK`) holds. A private key file protected by a
//!   passphrase is used through the agent when it holds it, and refused otherwise.
//! - How: SSHSIG (namespace `git`, SHA-512), as `ssh-keygen -Y sign -n git` makes it for git,
//!   over the commit object without its signature; the armored signature goes in a `gpgsig`
//!   header (`gpgsig-sha256` in a SHA-256 repository) at the end of the commit's headers,
//!   each line after the first prefixed by a space, exactly where and how git puts it.
//!
//! The key is loaded once per process, by [`Signer::from_config`], before the first commit is
//! signed; every failure to load it is an error of usage ([`Error::SigningKey`], exit 2),
//! raised before anything is written.

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use ssh_key::{HashAlg, LineEnding, PrivateKey, PublicKey, SshSig};

use crate::error::{Error, Result};

/// The SSHSIG namespace git signs commits in.
const NAMESPACE: &str = "git";

/// The settings that decide signing, as [`Signer::from_config`] reads them.
pub const SETTINGS: [&str; 4] = [
    "lease.sign",
    "commit.gpgSign",
    "gpg.format",
    "user.signingKey",
];

/// Signs ledger commits with one SSH key.
pub struct Signer {
    /// `user.signingKey` as configured, for messages.
    configured: String,
    public: PublicKey,
    private_half: PrivateHalf,
}

/// Where the private half of the key is.
enum PrivateHalf {
    /// In this process, read from an unprotected key file.
    Here(Box<PrivateKey>),
    /// In ssh-agent, at this socket: the connection the key was looked for on, kept for the
    /// signatures (one connection per process, not one per commit); dropped when a signature
    /// fails, and made again by the next one.
    Agent(PathBuf, Mutex<Option<UnixStream>>),
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("key", &self.configured)
            .field(
                "through",
                &match self.private_half {
                    PrivateHalf::Here(_) => "key file",
                    PrivateHalf::Agent(..) => "ssh-agent",
                },
            )
            .finish()
    }
}

/// What the configuration asks of ledger commits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Written unsigned.
    Unsigned,
    /// Signed in git's SSH format with `user.signingKey`, this value.
    Ssh(String),
}

impl Policy {
    /// Decides from the configuration, `flag` giving a boolean key's value as
    /// [`crate::Store::config_flag`] does and `setting` a string key's.
    ///
    /// Returns [`Error::Config`] for a value that cannot be read (a bad boolean, an unknown
    /// `gpg.format`), [`Error::SignFormat`] when signing is asked in another format than SSH,
    /// and [`Error::ConfigMissing`] when it is asked with no `user.signingKey`.
    pub fn from_config(
        flag: impl Fn(&str) -> Option<String>,
        setting: impl Fn(&str) -> Option<String>,
    ) -> Result<Policy> {
        let asked = match crate::config::boolean("lease.sign", flag("lease.sign").as_deref())? {
            Some(sign) => sign,
            None => crate::config::boolean("commit.gpgSign", flag("commit.gpgSign").as_deref())?
                .unwrap_or(false),
        };
        if !asked {
            return Ok(Policy::Unsigned);
        }
        let format = setting("gpg.format");
        match format.as_deref() {
            Some("ssh") => {}
            None | Some("openpgp") | Some("x509") => {
                return Err(Error::SignFormat {
                    format: format.unwrap_or_else(|| "openpgp".into()),
                })
            }
            Some(other) => {
                return Err(Error::Config {
                    key: "gpg.format".into(),
                    value: other.to_owned(),
                    expected: "openpgp, x509 or ssh",
                })
            }
        }
        match setting("user.signingKey") {
            Some(key) if !key.trim().is_empty() => Ok(Policy::Ssh(key)),
            _ => Err(Error::ConfigMissing {
                key: "user.signingKey".into(),
                needed: "ledger commits are to be signed with gpg.format=ssh (lease.sign or commit.gpgSign): set it to an SSH key file, or to a public key whose private half ssh-agent holds",
            }),
        }
    }
}

impl Signer {
    /// Reads the signing policy ([`Policy::from_config`]) and, when ledger commits are to be
    /// signed, returns the signer of its key: `None` when they are written unsigned.
    ///
    /// A key is loaded once per process: later calls naming the same key (with the same
    /// agent) get the same signer, so that a command that opens its repository again for each
    /// step (`run`'s renewals) neither reads the key file nor asks the agent again. A key
    /// that failed to load is tried again.
    pub fn from_config(
        flag: impl Fn(&str) -> Option<String>,
        setting: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Arc<Signer>>> {
        type Loaded = Mutex<Vec<((String, Option<PathBuf>), Arc<Signer>)>>;
        static LOADED: OnceLock<Loaded> = OnceLock::new();
        let key = match Policy::from_config(flag, setting)? {
            Policy::Unsigned => return Ok(None),
            Policy::Ssh(key) => (key, agent_socket()),
        };
        let loaded = LOADED.get_or_init(Default::default);
        let found = loaded
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, signer)| Arc::clone(signer));
        if let Some(signer) = found {
            return Ok(Some(signer));
        }
        let signer = Arc::new(Signer::load(&key.0, key.1.as_deref())?);
        loaded
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push((key, Arc::clone(&signer)));
        Ok(Some(signer))
    }

    /// Loads the key `configured` names (a `user.signingKey` value), with ssh-agent at `agent`
    /// (`SSH_AUTH_SOCK`) for a key whose private half is not readable here.
    pub fn load(configured: &str, agent: Option<&Path>) -> Result<Signer> {
        let refuse = |reason: String| Error::SigningKey {
            key: configured.to_owned(),
            reason,
        };
        if let Some(literal) = literal_key(configured) {
            let public = PublicKey::from_openssh(literal.trim())
                .map_err(|e| refuse(format!("it is not an SSH public key ({e})")))?;
            return Signer::through_agent(configured, public, agent, "");
        }
        let path = expand_user_path(configured).map_err(refuse)?;
        let text = std::fs::read(&path).map_err(|e| {
            refuse(match e.kind() {
                std::io::ErrorKind::NotFound => format!("no such key file: {}", path.display()),
                _ => format!("cannot read {}: {e}", path.display()),
            })
        })?;
        let text = String::from_utf8_lossy(&text);
        if text.trim_start().starts_with("-----BEGIN") {
            let private = PrivateKey::from_openssh(text.as_bytes()).map_err(|e| {
                refuse(format!(
                    "{} is not an OpenSSH private key ({e}); git-lease reads the format ssh-keygen writes",
                    path.display()
                ))
            })?;
            if private.is_encrypted() {
                let hint = format!(
                    " (it is protected by a passphrase: add it to ssh-agent with `ssh-add {}`)",
                    path.display()
                );
                return Signer::through_agent(
                    configured,
                    private.public_key().clone(),
                    agent,
                    &hint,
                );
            }
            return Ok(Signer {
                configured: configured.to_owned(),
                public: private.public_key().clone(),
                private_half: PrivateHalf::Here(Box::new(private)),
            });
        }
        let public = PublicKey::from_openssh(text.trim()).map_err(|e| {
            refuse(format!(
                "{} is neither an OpenSSH private key nor a public key ({e})",
                path.display()
            ))
        })?;
        Signer::through_agent(configured, public, agent, "")
    }

    /// A signer whose private half ssh-agent holds: checked now, once, by asking the agent
    /// for its keys. `hint` is added to each refusal.
    fn through_agent(
        configured: &str,
        public: PublicKey,
        agent: Option<&Path>,
        hint: &str,
    ) -> Result<Signer> {
        let refuse = |reason: String| Error::SigningKey {
            key: configured.to_owned(),
            reason: format!("{reason}{hint}"),
        };
        let Some(socket) = agent else {
            return Err(refuse(
                "its private half must be in ssh-agent, and none is running (SSH_AUTH_SOCK is unset)"
                    .into(),
            ));
        };
        let stream = UnixStream::connect(socket).map_err(|e| {
            refuse(format!(
                "cannot reach ssh-agent at {} ({e})",
                socket.display()
            ))
        })?;
        let mut client = agent_client(&stream).map_err(|e| {
            refuse(format!(
                "cannot reach ssh-agent at {} ({e})",
                socket.display()
            ))
        })?;
        let held = client.list_all_identities().map_err(|e| {
            refuse(format!(
                "ssh-agent at {} did not list its keys ({})",
                socket.display(),
                agent_error(&e)
            ))
        })?;
        let holds = held.iter().any(|identity| match identity {
            ssh_agent_client_rs::Identity::PublicKey(key) => key.key_data() == public.key_data(),
            ssh_agent_client_rs::Identity::Certificate(_) => false,
        });
        if !holds {
            return Err(refuse(format!(
                "ssh-agent at {} does not hold its private half ({} {})",
                socket.display(),
                public.algorithm(),
                public.fingerprint(HashAlg::Sha256)
            )));
        }
        Ok(Signer {
            configured: configured.to_owned(),
            public,
            private_half: PrivateHalf::Agent(socket.to_owned(), Mutex::new(Some(stream))),
        })
    }

    /// Returns the public key commits are signed with.
    pub fn public_key(&self) -> &PublicKey {
        &self.public
    }

    /// Returns the armored SSHSIG signature of `payload` (`-----BEGIN SSH SIGNATURE-----` …
    /// `-----END SSH SIGNATURE-----\n`), as `ssh-keygen -Y sign -n git` makes it.
    pub fn sign(&self, payload: &[u8]) -> Result<String> {
        let refuse = |reason: String| Error::SigningKey {
            key: self.configured.clone(),
            reason,
        };
        let signature = match &self.private_half {
            PrivateHalf::Here(private) => match private.key_data().rsa() {
                Some(pair) => {
                    let raw =
                        sign_rsa(pair, &signed_data(payload).map_err(refuse)?).map_err(refuse)?;
                    self.wrap(raw).map_err(refuse)?
                }
                None => private
                    .sign(NAMESPACE, HashAlg::Sha512, payload)
                    .map_err(|e| refuse(format!("cannot sign with it: {e}")))?,
            },
            PrivateHalf::Agent(socket, connection) => {
                let data = signed_data(payload).map_err(refuse)?;
                let mut kept = connection
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                let stream = match kept.take() {
                    Some(stream) => stream,
                    None => UnixStream::connect(socket).map_err(|e| {
                        refuse(format!(
                            "cannot reach ssh-agent at {} ({e})",
                            socket.display()
                        ))
                    })?,
                };
                let raw = agent_client(&stream)
                    .map_err(ssh_agent_client_rs::Error::from)
                    .and_then(|mut client| client.sign(&self.public, &data))
                    .map_err(|e| {
                        refuse(format!(
                            "ssh-agent at {} did not sign ({})",
                            socket.display(),
                            agent_error(&e)
                        ))
                    })?;
                *kept = Some(stream);
                self.wrap(raw).map_err(refuse)?
            }
        };
        signature
            .to_pem(LineEnding::LF)
            .map_err(|e| refuse(format!("cannot encode its signature: {e}")))
    }

    /// Returns the commit object `unsigned` (git's encoding of a commit with no signature)
    /// signed: its signature in the header `gpgsig` (`gpgsig-sha256` for `hash`), inserted at
    /// the end of the headers as git inserts it. The signed payload is `unsigned` itself,
    /// which is the result without that header, as `git verify-commit` reads it.
    pub fn sign_commit(&self, hash: gix::hash::Kind, unsigned: &[u8]) -> Result<Vec<u8>> {
        let armored = self.sign(unsigned)?;
        Ok(with_signature(unsigned, header_name(hash), &armored))
    }

    /// Wraps `raw`, a signature of [`signed_data`] by this key, into an SSHSIG.
    fn wrap(&self, raw: ssh_key::Signature) -> std::result::Result<SshSig, String> {
        SshSig::new(
            self.public.key_data().clone(),
            NAMESPACE,
            HashAlg::Sha512,
            raw,
        )
        .map_err(|e| format!("cannot sign with it: {e}"))
    }
}

/// The bytes an SSHSIG of `payload` signs (namespace `git`, SHA-512), for a signer that
/// signs raw data (RSA here, ssh-agent).
fn signed_data(payload: &[u8]) -> std::result::Result<Vec<u8>, String> {
    SshSig::signed_data(NAMESPACE, HashAlg::Sha512, payload)
        .map_err(|e| format!("cannot sign with it: {e}"))
}

/// Signs `data` with an RSA key as `rsa-sha2-512` (PKCS #1 v1.5 over SHA-512), the algorithm
/// ssh-keygen signs SSHSIG with. The private key is built from its components here: ssh-key
/// 0.6.7's own conversion passes its first prime twice, which no key passes.
fn sign_rsa(
    pair: &ssh_key::private::RsaKeypair,
    data: &[u8],
) -> std::result::Result<ssh_key::Signature, String> {
    use rsa::signature::{SignatureEncoding as _, Signer as _};
    let int = |m: &ssh_key::Mpint| {
        m.as_positive_bytes()
            .map(rsa::BigUint::from_bytes_be)
            .ok_or_else(|| "its RSA key has a negative component".to_owned())
    };
    let key = rsa::RsaPrivateKey::from_components(
        int(&pair.public.n)?,
        int(&pair.public.e)?,
        int(&pair.private.d)?,
        vec![int(&pair.private.p)?, int(&pair.private.q)?],
    )
    .map_err(|e| format!("its RSA key is not valid ({e})"))?;
    let signature = rsa::pkcs1v15::SigningKey::<ssh_key::sha2::Sha512>::new(key)
        .try_sign(data)
        .map_err(|e| format!("cannot sign with it ({e})"))?;
    ssh_key::Signature::new(
        ssh_key::Algorithm::Rsa {
            hash: Some(HashAlg::Sha512),
        },
        signature.to_vec(),
    )
    .map_err(|e| format!("cannot sign with it ({e})"))
}

/// The header git keeps a commit's signature in, in a repository of `hash`.
pub fn header_name(hash: gix::hash::Kind) -> &'static str {
    match hash {
        gix::hash::Kind::Sha1 => "gpgsig",
        _ => "gpgsig-sha256",
    }
}

/// Inserts `signature` as the header `name` at the end of `commit`'s headers, as git does
/// (`add_header_signature`): `name`, a space and the first line, then each further line
/// prefixed by a space, every line ending with a newline.
fn with_signature(commit: &[u8], name: &str, signature: &str) -> Vec<u8> {
    let end_of_headers = commit
        .windows(2)
        .position(|w| w == b"\n\n")
        .map_or(commit.len(), |at| at + 1);
    let mut out = Vec::with_capacity(commit.len() + signature.len() + 16);
    out.extend_from_slice(&commit[..end_of_headers]);
    for (i, line) in signature.split_inclusive('\n').enumerate() {
        if i == 0 {
            out.extend_from_slice(name.as_bytes());
        }
        out.push(b' ');
        out.extend_from_slice(line.as_bytes());
    }
    if !signature.ends_with('\n') {
        out.push(b'\n');
    }
    out.extend_from_slice(&commit[end_of_headers..]);
    out
}

/// Returns the public key of a literal `user.signingKey`, as git tells one from a path: the
/// `key::` prefix, or (git's older form) a value that starts with `ssh-`.
fn literal_key(configured: &str) -> Option<&str> {
    configured
        .strip_prefix("key::")
        .or_else(|| configured.starts_with("ssh-").then_some(configured))
}

/// Expands a leading `~/` (or a lone `~`) to `$HOME`, as git expands a path setting.
fn expand_user_path(path: &str) -> std::result::Result<PathBuf, String> {
    let Some(rest) = path.strip_prefix('~') else {
        return Ok(PathBuf::from(path));
    };
    if !(rest.is_empty() || rest.starts_with('/')) {
        return Err(format!(
            "cannot expand {path:?}: git-lease expands ~/ to your home directory, not another user's (~user/); give the path in full"
        ));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .ok_or_else(|| format!("cannot expand {path:?}: HOME is not set"))?;
    let mut out = PathBuf::from(home);
    if let Some(rest) = rest.strip_prefix('/').filter(|r| !r.is_empty()) {
        out.push(rest);
    }
    Ok(out)
}

/// Returns an agent client speaking on `stream` (a handle of its own on the same connection,
/// so that the connection outlives the client).
fn agent_client(stream: &UnixStream) -> std::io::Result<ssh_agent_client_rs::Client> {
    Ok(ssh_agent_client_rs::Client::with_read_write(Box::new(
        stream.try_clone()?,
    )))
}

/// Returns ssh-agent's socket (`SSH_AUTH_SOCK`), if one is set.
fn agent_socket() -> Option<PathBuf> {
    std::env::var_os("SSH_AUTH_SOCK")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
}

/// Says what went wrong talking to ssh-agent, with the cause the agent client keeps.
fn agent_error(e: &ssh_agent_client_rs::Error) -> String {
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_goes_at_the_end_of_the_headers_as_git_puts_it() {
        let commit = b"tree t\nauthor a\ncommitter c\n\nmessage\n\nmore\n";
        let signed = with_signature(
            commit,
            "gpgsig",
            "-----BEGIN SSH SIGNATURE-----\nabc\n-----END SSH SIGNATURE-----\n",
        );
        assert_eq!(
            signed,
            b"tree t\nauthor a\ncommitter c\ngpgsig -----BEGIN SSH SIGNATURE-----\n abc\n -----END SSH SIGNATURE-----\n\nmessage\n\nmore\n"
        );
    }

    #[test]
    fn signing_follows_commit_gpgsign_unless_lease_sign_says_otherwise() {
        let decide = |pairs: &[(&str, &str)]| {
            let get = |key: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(key))
                    .map(|(_, v)| (*v).to_owned())
            };
            Policy::from_config(get, get)
        };
        let key = ("user.signingKey", "~/.ssh/id_ed25519");
        let ssh = ("gpg.format", "ssh");
        assert_eq!(decide(&[ssh, key]).unwrap(), Policy::Unsigned);
        assert_eq!(
            decide(&[("commit.gpgSign", "true"), ssh, key]).unwrap(),
            Policy::Ssh(key.1.into())
        );
        assert_eq!(
            decide(&[
                ("commit.gpgSign", "true"),
                ("lease.sign", "false"),
                ssh,
                key
            ])
            .unwrap(),
            Policy::Unsigned
        );
        assert_eq!(
            decide(&[("lease.sign", "yes"), ssh, key]).unwrap(),
            Policy::Ssh(key.1.into())
        );
        let err = decide(&[("lease.sign", "maybe")]).unwrap_err();
        assert!(err.to_string().contains("lease.sign"), "{err}");
        assert!(matches!(
            decide(&[("lease.sign", "true"), key]).unwrap_err(),
            Error::SignFormat { .. }
        ));
        assert!(matches!(
            decide(&[("lease.sign", "true"), ("gpg.format", "x509"), key]).unwrap_err(),
            Error::SignFormat { .. }
        ));
        assert!(matches!(
            decide(&[("lease.sign", "true"), ("gpg.format", "pgp"), key]).unwrap_err(),
            Error::Config { .. }
        ));
        assert!(matches!(
            decide(&[("lease.sign", "true"), ssh]).unwrap_err(),
            Error::ConfigMissing { .. }
        ));
        // Nothing of the format or the key is read when nothing is to be signed.
        assert_eq!(decide(&[("gpg.format", "pgp")]).unwrap(), Policy::Unsigned);
    }

    #[test]
    fn a_literal_key_is_told_from_a_path_as_git_tells_it() {
        assert_eq!(
            literal_key("key::ssh-ed25519 AAAA"),
            Some("ssh-ed25519 AAAA")
        );
        assert_eq!(literal_key("ssh-rsa AAAA x"), Some("ssh-rsa AAAA x"));
        assert_eq!(literal_key("~/.ssh/id_ed25519.pub"), None);
        assert_eq!(literal_key("/keys/ssh-key"), None);
    }
}
