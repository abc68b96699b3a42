"""A reader of a transparency log published in an S3 bucket in the C2SP tlog-tiles layout,
written from the specifications alone (c2sp.org/tlog-tiles, c2sp.org/tlog-checkpoint,
c2sp.org/signed-note, RFC 6962's Merkle tree), sharing no code with trove: the test suite uses
it to check that what trove publishes is what any other reader of the format would read.

    python tlog_tiles_reader.py ENDPOINT BUCKET PREFIX VERIFIER_KEY

PREFIX is the log's prefix in the bucket (e.g. `fleet/nodes/n1/tlog`). On success it prints
one JSON object (origin, size, root in base64, the entries' first bytes checked) and exits 0;
on any failure it names it on standard error and exits 1.
"""

import base64
import hashlib
import json
import struct
import sys

import boto3
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

TILE_WIDTH = 256
TILE_HEIGHT = 8


def fail(what):
    print(what, file=sys.stderr)
    sys.exit(1)


def parse_verifier_key(vkey):
    # signed-note: <name>+<hex key id>+<base64(type byte || public key)>; Ed25519 is type 0x01.
    # The name holds no "+", but the base64 may.
    try:
        name, key_id, encoded = vkey.split("+", 2)
        raw = base64.b64decode(encoded, validate=True)
    except ValueError:
        fail(f"not a verifier key: {vkey}")
    if len(raw) != 33 or raw[0] != 0x01:
        fail("not an Ed25519 verifier key")
    public = raw[1:]
    expected = hashlib.sha256(name.encode() + b"\n" + raw).digest()[:4]
    if expected.hex() != key_id:
        fail("the verifier key's id is not the hash of its name and key")
    return name, expected, Ed25519PublicKey.from_public_bytes(public)


def open_note(note, name, key_id, public):
    # The text is everything up to and including the newline before the first blank line; the
    # signature lines follow: an em dash, a space, the key name, a space, base64(id || sig).
    if "\n\n" not in note:
        fail("the checkpoint is not a signed note: no blank line")
    text, signatures = note.split("\n\n", 1)
    text += "\n"
    for line in signatures.splitlines():
        if not line.startswith("\u2014 "):
            fail(f"not a signature line: {line!r}")
        signer, blob = line[2:].split(" ", 1)
        blob = base64.b64decode(blob, validate=True)
        if signer != name or blob[:4] != key_id:
            continue  # another key's signature (a witness's): not ours to check
        try:
            public.verify(blob[4:], text.encode())
        except InvalidSignature:
            fail("the checkpoint's signature by the given key does not verify")
        return text
    fail("the checkpoint carries no signature by the given key")


def parse_checkpoint(text):
    lines = text.split("\n")
    if len(lines) < 4:
        fail("a checkpoint has an origin, a size and a root")
    origin, size, root = lines[0], lines[1], lines[2]
    if not size.isdigit() or (len(size) > 1 and size[0] == "0"):
        fail(f"the checkpoint's size is not a decimal number: {size!r}")
    root = base64.b64decode(root, validate=True)
    if len(root) != 32:
        fail("the checkpoint's root is not a SHA-256 hash")
    return origin, int(size), root


def index_path(n):
    groups = []
    while True:
        groups.append(n % 1000)
        n //= 1000
        if n == 0:
            break
    groups.reverse()
    return "/".join([f"x{g:03d}" for g in groups[:-1]] + [f"{groups[-1]:03d}"])


def tile_path(level, n, width):
    path = f"tile/{level}/{index_path(n)}"
    return path if width == TILE_WIDTH else f"{path}.p/{width}"


def bundle_path(n, width):
    path = f"tile/entries/{index_path(n)}"
    return path if width == TILE_WIDTH else f"{path}.p/{width}"


def leaf_hash(entry):
    return hashlib.sha256(b"\x00" + entry).digest()


def node_hash(left, right):
    return hashlib.sha256(b"\x01" + left + right).digest()


def tree_hash(leaves):
    # RFC 6962 section 2.1: MTH of n leaves splits at the largest power of two below n.
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return node_hash(tree_hash(leaves[:k]), tree_hash(leaves[k:]))


def main():
    endpoint, bucket, prefix, vkey = sys.argv[1:5]
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        region_name="us-east-1",
    )

    def get(key, fallback=None):
        try:
            return s3.get_object(Bucket=bucket, Key=f"{prefix}/{key}")["Body"].read()
        except s3.exceptions.NoSuchKey:
            # A partial tile may be gone once its full tile exists: read that one instead.
            if fallback is not None:
                return fallback()
            fail(f"{prefix}/{key} is missing")

    name, key_id, public = parse_verifier_key(vkey)
    text = open_note(get("checkpoint").decode(), name, key_id, public)
    origin, size, root = parse_checkpoint(text)
    if origin != name:
        fail(f"the checkpoint is of log {origin!r}, the key of {name!r}")

    leaves = []
    for n in range((size + TILE_WIDTH - 1) // TILE_WIDTH):
        width = min(TILE_WIDTH, size - n * TILE_WIDTH)
        full = []
        bundle = get(bundle_path(n, width), lambda: full.append(True) or get(bundle_path(n, TILE_WIDTH)))
        entries, at = [], 0
        while at < len(bundle):
            if at + 2 > len(bundle):
                fail(f"bundle {n} ends inside a length")
            (length,) = struct.unpack(">H", bundle[at : at + 2])
            entry = bundle[at + 2 : at + 2 + length]
            if len(entry) != length:
                fail(f"bundle {n} ends inside an entry")
            entries.append(entry)
            at += 2 + length
        if full:
            entries = entries[:width]  # the full bundle read for a partial one that is gone
        if len(entries) != width:
            fail(f"bundle {n} holds {len(entries)} entries, not {width}")
        for i, entry in enumerate(entries):
            # trove's entries (its ARCHITECTURE.md): a tag, then the record's seq (u64 LE).
            seq = n * TILE_WIDTH + i + 1
            if entry[:14] != b"trove-audit-v1" or struct.unpack("<Q", entry[14:22])[0] != seq:
                fail(f"entry {seq - 1} is not trove's audit record {seq}")
            leaves.append(leaf_hash(entry))

    if tree_hash(leaves) != root:
        fail("the entries do not hash to the checkpoint's root")

    # Every hash tile: level L holds the nodes at tree level 8L, each the hash of 256^L leaves.
    tiles = 0
    level = 0
    while size >> (TILE_HEIGHT * level):
        span = TILE_WIDTH**level
        count = size >> (TILE_HEIGHT * level)
        for n in range((count + TILE_WIDTH - 1) // TILE_WIDTH):
            width = min(TILE_WIDTH, count - n * TILE_WIDTH)
            data = get(tile_path(level, n, width), lambda: get(tile_path(level, n, TILE_WIDTH))[: 32 * width])
            if len(data) != 32 * width:
                fail(f"tile {level}/{n} has {len(data)} bytes, not {32 * width}")
            for i in range(width):
                first = (n * TILE_WIDTH + i) * span
                if data[32 * i : 32 * i + 32] != tree_hash(leaves[first : first + span]):
                    fail(f"tile {level}/{n} holds a wrong hash at {i}")
            tiles += 1
        level += 1

    print(json.dumps({"origin": origin, "size": size, "root": base64.b64encode(root).decode(), "tiles": tiles}))


if __name__ == "__main__":
    main()
