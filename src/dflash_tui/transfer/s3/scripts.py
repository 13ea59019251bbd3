"""The fixed script a store upload runs on the source machine: part hashes in one read.

Run as `sh -c SCRIPT sh FILE PART_BYTES` (paths only as arguments). Prints
the sha256 of each PART_BYTES-sized part, one per line, then `whole SHA256`.
With python3 on the host the file is read once; otherwise dd and the
hasher read the parts and then the whole file (two reads).
"""

from __future__ import annotations

from dflash_tui.transfer.scripts import _PRELUDE

HASH_PARTS = (
    _PRELUDE
    + r"""f=$1 n=$2
if command -v python3 >/dev/null 2>&1; then exec python3 -c '
import hashlib, sys
path, n = sys.argv[1], int(sys.argv[2])
whole, out = hashlib.sha256(), []
with open(path, "rb", buffering=0) as fh:
    while True:
        part, left, got = hashlib.sha256(), n, 0
        while left:
            b = fh.read(min(left, 1 << 20))
            if not b:
                break
            part.update(b)
            whole.update(b)
            left -= len(b)
            got += len(b)
        if not got:
            break
        out.append(part.hexdigest())
        if left:
            break
out.append("whole " + whole.hexdigest())
print("\n".join(out))
' "$f" "$n"; fi
size=$(stat -L -c %s -- "$f") || exit 1
off=0
while [ "$off" -lt "$size" ]; do
  dd if="$f" bs=256K skip="$off" count="$n" iflag=skip_bytes,count_bytes status=none | h || exit 1
  off=$((off + n))
done
printf 'whole %s\n' "$(h < "$f")"
"""
)
