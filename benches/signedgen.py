#!/usr/bin/env python3
"""Writes a repository of N SSH-signed tenure ledgers, for the "Signed events: reading" figures.

    signedgen.py REPO N LIVE NOW

The ledgers are those of benches/scalegen.py (the same `lease.json`, authors, committer and
messages: N - LIVE closed by a release a minute after their acquire, LIVE live at NOW), each
commit signed as `git commit-tree -S` with `gpg.format=ssh` signs it: an SSHSIG (namespace
`git`, SHA-512) over the commit without its `gpgsig` header, by one fixed ed25519 key made
from a constant seed. Signing 100k commits through ssh-keygen takes an hour; here it takes
seconds. REPO (a repository, created if missing) gets the objects as one pack (written here,
indexed by `git index-pack`), the refs in `packed-refs`, `REPO/allowed_signers` naming that key
for every holder (`h*@example.com`), and `lease.allowedSigners` pointing at it. Reading with
`-c lease.requireSignatures=true` then verifies every step; `git verify-commit` accepts each
commit.
"""
import base64
import hashlib
import os
import struct
import subprocess
import sys
import zlib

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives import serialization

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scalegen import ledgers, rfc3339  # noqa: E402

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
PUBLIC = KEY.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def string(b):
    return struct.pack(">I", len(b)) + b


PUBLIC_BLOB = string(b"ssh-ed25519") + string(PUBLIC)


def sshsig(message):
    """An armored SSH signature of `message` in the namespace git, as ssh-keygen -Y sign makes."""
    digest = hashlib.sha512(message).digest()
    signed = b"SSHSIG" + string(b"git") + string(b"") + string(b"sha512") + string(digest)
    sig = string(b"ssh-ed25519") + string(KEY.sign(signed))
    blob = (
        b"SSHSIG"
        + struct.pack(">I", 1)
        + string(PUBLIC_BLOB)
        + string(b"git")
        + string(b"")
        + string(b"sha512")
        + string(sig)
    )
    text = base64.b64encode(blob).decode()
    lines = [text[i : i + 70] for i in range(0, len(text), 70)]
    return "\n".join(["-----BEGIN SSH SIGNATURE-----", *lines, "-----END SSH SIGNATURE-----"])


class Pack:
    """A version 2 pack of whole (undeltified) objects."""

    TYPES = {"commit": 1, "tree": 2, "blob": 3}

    def __init__(self):
        self.chunks = []
        self.count = 0

    def add(self, kind, data):
        oid = hashlib.sha1(b"%s %d\0" % (kind.encode(), len(data)) + data).digest()
        size = len(data)
        byte = (self.TYPES[kind] << 4) | (size & 15)
        size >>= 4
        header = bytearray()
        while size:
            header.append(byte | 0x80)
            byte = size & 0x7F
            size >>= 7
        header.append(byte)
        self.chunks.append(bytes(header) + zlib.compress(data, 1))
        self.count += 1
        return oid

    def bytes(self):
        body = b"PACK" + struct.pack(">II", 2, self.count) + b"".join(self.chunks)
        return body + hashlib.sha1(body).digest()


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    repo, n, live, now = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    if not 0 <= live <= n:
        sys.exit("LIVE must be between 0 and N")
    if not os.path.isdir(repo):
        subprocess.run(["git", "init", "-q", repo], check=True)
    git_dir = subprocess.run(
        ["git", "-C", repo, "rev-parse", "--absolute-git-dir"], check=True, capture_output=True, text=True
    ).stdout.strip()
    pack = Pack()

    def commit(data, actor, at, message, parent):
        blob = pack.add("blob", data)
        tree = pack.add("tree", b"100644 lease.json\0" + blob)
        head = f"tree {tree.hex()}\n"
        if parent is not None:
            head += f"parent {parent.hex()}\n"
        head += f"author {actor} <{actor}> {at} +0000\n"
        head += f"committer git-lease <git-lease@localhost> {at} +0000\n"
        body = f"\n{message}\n"
        signature = sshsig((head + body).encode()).replace("\n", "\n ")
        return pack.add("commit", (head + f"gpgsig {signature}\n" + body).encode())

    tips = {}
    for issue, steps in ledgers(n, live, now):
        tip = None
        for step in steps:
            tip = commit(*step, tip)
        tips[issue] = tip
    data = pack.bytes()
    name = os.path.join(git_dir, "objects", "pack", f"pack-{data[-20:].hex()}")
    with open(name + ".pack", "wb") as f:
        f.write(data)
    subprocess.run(["git", "-C", repo, "index-pack", "-o", name + ".idx", name + ".pack"], check=True,
                   capture_output=True)
    refs = sorted((f"refs/leases/{i}".encode(), oid.hex().encode()) for i, oid in tips.items())
    packed = os.path.join(git_dir, "packed-refs")
    with open(packed + ".new", "wb") as f:
        f.write(b"# pack-refs with: peeled fully-peeled sorted \n")
        for name_, oid in refs:
            f.write(oid + b" " + name_ + b"\n")
    os.rename(packed + ".new", packed)
    signers = os.path.join(os.path.abspath(repo), "allowed_signers")
    with open(signers, "w") as f:
        f.write(f'h*@example.com namespaces="git" ssh-ed25519 {base64.b64encode(PUBLIC_BLOB).decode()}\n')
    subprocess.run(["git", "-C", repo, "config", "lease.allowedSigners", signers], check=True)
    print(f"{repo}: {n} signed ledgers ({live} live at {rfc3339(now)}), {pack.count} objects")


if __name__ == "__main__":
    main()
