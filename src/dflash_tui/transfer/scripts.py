"""The fixed shell scripts a transfer runs on the source and destination machines.

Every script is constant text run as `sh -c SCRIPT sh ARG...`: paths, offsets
and names travel only as positional arguments, so a file called
`a b;$(rm -rf x)'"` is just a name. They need a POSIX sh and GNU coreutils/
findutils (`dd iflag=skip_bytes`, `find -printf`), as on any Linux GPU host.
sha256 uses `openssl dgst` when present (SHA-NI, several times faster than
coreutils' `sha256sum`) and falls back to `sha256sum`.
"""

from __future__ import annotations

from dflash_tui.remote.command import shell_script

_PRELUDE = """export LC_ALL=C
h() { if command -v openssl >/dev/null 2>&1; then openssl dgst -sha256 -r; else sha256sum; fi | cut -c1-64; }
"""

# Source walk: one NUL-terminated record per entry, `TYPE SIZE MODE MTIME RELPATH`.
# f regular file, u unreadable file, d directory, o anything else (socket,
# fifo, broken link). Symbolic links are followed (Hugging Face snapshots are links).
WALK = (
    _PRELUDE
    + r"""find -L "$1" \( -type d -printf 'd %s %m %T@ %P\0' \) \
  -o \( -type f -readable -printf 'f %s %m %T@ %P\0' \) \
  -o \( -type f -printf 'u %s %m %T@ %P\0' \) \
  -o -printf 'o 0 0 0 %P\0'
"""
)

# Destination probe: one line `TYPE SIZE` per argument, in order: d directory,
# f file, o other, p cannot be looked at (permission denied), n absent. No
# interpreter, and no process per path: the kinds come from the shell's own
# tests, the sizes of all existing paths from one `stat` (it prints a line for
# each path it can stat, in order, and nothing for the others). An absent path
# is `p` when the nearest existing directory above it cannot be searched.
INSPECT = (
    _PRELUDE
    + r"""stat -L -c %s -- "$@" 2>/dev/null | {
for p do
  if [ -e "$p" ]; then IFS= read -r size || size=0; fi
  if [ -d "$p" ]; then echo "d 0"
  elif [ -f "$p" ]; then echo "f $size"
  elif [ -e "$p" ] || [ -L "$p" ]; then echo "o 0"
  else
    d=$p
    while :; do
      case $d in */*) d=${d%/*}; [ -n "$d" ] || d=/ ;; *) d=. ;; esac
      [ -e "$d" ] || [ "$d" = / ] || [ "$d" = . ] || continue
      break
    done
    if [ -d "$d" ] && [ ! -x "$d" ]; then echo "p 0"; else echo "n 0"; fi
  fi
done
}
"""
)

# Free space (KiB) on the filesystem that will hold $1, and the deepest
# existing directory at or above $1 where it was measured: `KIB DIR`.
FREE_KIB = (
    _PRELUDE
    + r"""p=$1
while [ ! -d "$p" ]; do
  case $p in */*) p=${p%/*}; [ -n "$p" ] || p=/ ;; *) p=. ;; esac
done
printf '%s %s\n' "$(df -Pk -- "$p" | awk 'NR==2 {print $4}')" "$p"
"""
)

# Create directories, then the .part files (without truncating existing ones).
# $1 is the number of directories that follow; the rest are .part paths.
PREPARE = (
    _PRELUDE
    + r"""n=$1; shift
# One mkdir for every directory and one touch for every part (not one process each).
if [ "$n" -gt 0 ]; then printf '%s\0' "$@" | head -z -n "$n" | xargs -0 mkdir -p -- || exit 1; fi
if [ "$#" -gt "$n" ]; then printf '%s\0' "$@" | tail -z -n +$((n + 1)) | xargs -0 touch -- || exit 1; fi
"""
)

# Read bytes [$2, $2+$3) of $1 to stdout. dd's closing report on stderr
# ("N bytes ... copied") says how many bytes it read.
SRC_RANGE = (
    _PRELUDE
    + r"""exec dd if="$1" bs=256K skip="$2" count="$3" iflag=skip_bytes,count_bytes
"""
)

# Write stdin into $1 at offset $2 (never truncating); dd's report on stderr
# says how many bytes landed.
DST_RANGE = (
    _PRELUDE
    + r"""exec dd of="$1" bs=256K seek="$2" oflag=seek_bytes conv=notrunc iflag=fullblock
"""
)

# Direct mode: the destination pulls the range itself by running the ssh
# argv in "$@" (which runs SRC_RANGE on the source; its report arrives on
# stderr through ssh) and writes it as DST_RANGE does.
DIRECT_RANGE = (
    _PRELUDE
    + r"""part=$1 off=$2; shift 2
"$@" | dd of="$part" bs=256K seek="$off" oflag=seek_bytes conv=notrunc iflag=fullblock status=none
"""
)

# Whole-file hash of $1.
HASH_FILE = _PRELUDE + r"""h < "$1" """

# sha256 of $1 read back in order while it is being written: each stdin line
# is a byte count up to which the file is complete; the bytes up to there are
# hashed in order and the result printed when stdin closes. python3 (when the
# host has it) reads the file straight into hashlib; the fallback pipes dd
# into the hasher, which costs one more copy of every byte.
HASH_FOLLOW = (
    _PRELUDE
    + r"""if [ "$#" -gt 16 ] && command -v python3 >/dev/null 2>&1; then exec python3 -c '
import hashlib, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
digest, done, buf = hashlib.sha256(), 0, bytearray(1 << 18)
view = memoryview(buf)
for line in sys.stdin:
    upto = int(line)
    while done < upto:
        n = os.preadv(fd, [view[: min(len(buf), upto - done)]], done)
        if n <= 0:
            sys.exit("dflash: reading %s failed at byte %d" % (sys.argv[1], done))
        digest.update(view[:n])
        done += n
print(digest.hexdigest())
' "$1"; fi
done=0
while read -r n; do
  [ "$n" -gt "$done" ] || continue
  dd if="$1" bs=256K skip="$done" count=$((n - done)) iflag=skip_bytes,count_bytes status=none || { echo "dflash: reading $1 failed" >&2; exit 1; }
  done=$n
done | h
"""
)

# Hash ranges of $1: the rest of the arguments are OFFSET LENGTH pairs; one hash per line.
HASH_RANGES = (
    _PRELUDE
    + r"""f=$1; shift
[ -f "$f" ] || { echo "missing" >&2; exit 1; }
while [ $# -ge 2 ]; do
  dd if="$f" bs=256K skip="$1" count="$2" iflag=skip_bytes,count_bytes status=none | h
  shift 2
done
"""
)

# Give .part $1 mode $3 and move it to $2. Without force ($4=0) a file that
# appeared at $2 meanwhile is never replaced: `ln` fails if $2 exists (and is
# atomic); filesystems without hard links fall back to `mv -n`.
FINISH = (
    _PRELUDE
    + r"""part=$1 final=$2 mode=$3 force=$4
chmod "$mode" "$part" || exit 1
if [ -d "$final" ] && [ ! -L "$final" ]; then echo "dflash: collision: $final is a directory" >&2; exit 7; fi
if [ "$force" = 1 ]; then mv -fT -- "$part" "$final" || exit 1; exit 0; fi
if ln -- "$part" "$final" 2>/dev/null; then rm -f -- "$part"; exit 0; fi
if [ -e "$final" ] || [ -L "$final" ]; then echo "dflash: collision: $final appeared during the transfer" >&2; exit 7; fi
mv -nT -- "$part" "$final" || exit 1
if [ -e "$part" ]; then echo "dflash: collision: $final appeared during the transfer" >&2; exit 7; fi
"""
)

# Streams (the relay's data path). One source process and one destination
# process carry any number of file pieces each, so a tree of small files costs
# two channels, not several per file, and each byte is read once at the
# source, written once at the destination and hashed at both ends as it
# passes (no second pass over the file). They need python3 on the host (exit
# 127 without it: the engine then falls back to the range scripts above).
_NEED_PYTHON = """command -v python3 >/dev/null 2>&1 || { echo "dflash: python3 not found" >&2; exit 127; }
"""

# What both stream scripts define first: the 1 MiB buffer, `fail` (a message on
# stderr and an exit code) and `hash_prefix`, the sha256 of a file's first `pos`
# bytes as a resumed piece needs it (`short(done)` fails when the file ends at
# byte `done` first). No single quote: the scripts run as python3 -c '...'.
_STREAM_HELPERS = r"""buf = bytearray(1 << 20)
view = memoryview(buf)
def fail(path, what, code=1):
    sys.stderr.write("dflash: %s: %s\n" % (path, what))
    sys.exit(code)
def send(data):
    while data:
        data = data[os.write(1, data):]
def open_sized(path, size):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        fail(path, exc.strerror)
    if os.fstat(fd).st_size != size:
        fail(path, "changed: %d bytes now, %d when listed" % (os.fstat(fd).st_size, size), 3)
    return fd
def send_range(fd, path, pos, end, digest=None):
    while pos < end:
        try:
            n = os.preadv(fd, [view[: min(len(buf), end - pos)]], pos)
        except OSError as exc:
            fail(path, exc.strerror)
        if n <= 0:
            fail(path, "changed: ends at byte %d" % pos, 3)
        if digest is not None:
            digest.update(view[:n])
        send(view[:n])
        pos += n
def hash_prefix(fd, pos, short):
    digest = hashlib.sha256()
    done = 0
    while done < pos:
        n = os.preadv(fd, [view[: min(len(buf), pos - done)]], done)
        if n <= 0:
            short(done)
        digest.update(view[:n])
        done += n
    return digest
"""

# Source: stdin has one JSON request per line, {"p": path, "o": from, "e": to,
# "s": size seen by the walk, "h": hash the whole file}. For each, bytes
# [o, e) of p go to stdout followed by 64 bytes: the file's sha256 (hex; with
# "h" the bytes [0, o) are hashed from the file first) or 64 dashes. A file
# that is not `s` bytes long any more stops the stream with exit 3.
SRC_STREAM = (
    _NEED_PYTHON
    + r"""exec python3 -c '
import hashlib, json, os, sys
"""
    + _STREAM_HELPERS
    + r"""for line in iter(sys.stdin.buffer.readline, b""):
    req = json.loads(line)
    path, pos, end, size = req["p"], req["o"], req["e"], req["s"]
    fd = open_sized(path, size)
    digest = None
    if req["h"]:
        digest = hash_prefix(fd, pos, lambda done: fail(path, "changed: ends at byte %d" % done, 3))
    send_range(fd, path, pos, end, digest)
    os.close(fd)
    send((digest.hexdigest() if digest is not None else "-" * 64).encode())
'
"""
)

# Source of a spliced stream (hosts/ssh_splice.py), whose stdout the OS pipes into
# the destination's DST_STREAM: stdin has one JSON request per line, {"p": path,
# "o": from, "e": to, "s": size seen by the walk, "d": the destination's part}. For
# each, DST_STREAM's header line for [o, e) of d goes to stdout, then those bytes of
# p (no hash: a spliced file is hashed whole beside the stripes). Exit 3 when the
# file is not `s` bytes long any more.
SRC_SPLICE = (
    _NEED_PYTHON
    + r"""exec python3 -c '
import json, os, sys
"""
    + _STREAM_HELPERS
    + r"""for line in iter(sys.stdin.buffer.readline, b""):
    req = json.loads(line)
    path, pos, end, size = req["p"], req["o"], req["e"], req["s"]
    fd = open_sized(path, size)
    send((json.dumps({"p": req["d"], "o": pos, "e": end, "s": size, "h": False}) + "\n").encode())
    send_range(fd, path, pos, end)
    os.close(fd)
'
"""
)

# Destination: stdin has, per piece, a JSON header line {"p": part, "o": from,
# "e": to, "s": size, "h": hash the whole file} and then exactly e - o bytes,
# written at offset o of p (created with its directories, never truncated
# below s); or a line {"f": final, "p": part, "m": octal mode, "force": bool}:
# give p the mode and rename it to f (`ln`: atomic, never over a file that
# appeared meanwhile, unless force). Replies on stdout, one line each:
# `a N BYTES` piece N has landed up to BYTES (at least every 1 MiB), `d N
# BYTES SHA` piece N is complete (sha256 of the whole file with "h", else
# -), `f N ok` or `f N collision MESSAGE` for the N-th rename. Exit 4: the
# part is shorter than the prefix it should hash; 5: the stream ended early.
DST_STREAM = (
    _NEED_PYTHON
    + r"""exec python3 -c '
import errno, hashlib, json, os, sys
"""
    + _STREAM_HELPERS
    + r"""inp = sys.stdin.buffer
def say(text):
    os.write(1, (text + "\n").encode())
def finish(n, req):
    part, final = req["p"], req["f"]
    try:
        os.chmod(part, int(req["m"], 8))
        if os.path.isdir(final) and not os.path.islink(final):
            return say("f %d collision %s" % (n, json.dumps("collision: %s is a directory" % final)))
        if req["force"]:
            os.replace(part, final)
            return say("f %d ok" % n)
        try:
            os.link(part, final)
            os.unlink(part)
            return say("f %d ok" % n)
        except FileExistsError:
            return say("f %d collision %s" % (n, json.dumps("collision: %s appeared during the transfer" % final)))
        except OSError:
            pass
        if os.path.lexists(final):
            return say("f %d collision %s" % (n, json.dumps("collision: %s appeared during the transfer" % final)))
        os.rename(part, final)
        say("f %d ok" % n)
    except OSError as exc:
        fail(final, exc.strerror)
pieces = finishes = 0
for line in iter(inp.readline, b""):
    req = json.loads(line)
    if "f" in req:
        finish(finishes, req)
        finishes += 1
        continue
    part, pos, end, size = req["p"], req["o"], req["e"], req["s"]
    try:
        parent = os.path.dirname(part)
        if parent:
            os.makedirs(parent, exist_ok=True)
        fd = os.open(part, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        fail(part, exc.strerror)
    digest = None
    if req["h"]:
        digest = hash_prefix(fd, pos, lambda _: fail(part, "shorter than the %d bytes already sent" % pos, 4))
    acked = pos
    while pos < end:
        n = inp.readinto(view[: min(len(buf), end - pos)])
        if not n:
            fail(part, "stream ended at byte %d of %d" % (pos, end), 5)
        chunk = view[:n]
        try:
            while chunk:
                w = os.pwrite(fd, chunk, pos)
                if digest is not None:
                    digest.update(chunk[:w])
                chunk = chunk[w:]
                pos += w
        except OSError as exc:
            fail(part, exc.strerror)
        if pos - acked >= len(buf) or pos == end:
            say("a %d %d" % (pieces, pos))
            acked = pos
    if end == size and os.fstat(fd).st_size > size:
        os.ftruncate(fd, size)
    os.close(fd)
    say("d %d %d %s" % (pieces, pos, digest.hexdigest() if digest is not None else "-"))
    pieces += 1
'
"""
)

# Small files (the relay's path for a few files of a few MiB): no interpreter
# on either host, only sh and coreutils, one channel per side for the batch.
#
# Source: the sha256 of every file in "$@" (sha256sum's lines, in order), then
# their bytes back to back. The relay hashes the bytes on the way too: a file
# that changed between its sha256 and its bytes (or since the walk) is caught.
SRC_SMALL = (
    _PRELUDE
    + r"""sha256sum -- "$@" || exit 1
exec cat -- "$@"
"""
)

# Destination: $1 is 1 to replace existing files (force), then one NAME.part
# per file. Per file, stdin has a line `SIZE MODE SHA256` (the source's hash)
# and then exactly SIZE bytes, written to NAME.part (its directories created);
# or a line `-`: that file is up to date, nothing follows (reply `skip`).
# NAME.part is then hashed back from disk; only if that matches the source's
# hash does it get MODE and its final name (`ln`: never over a file that
# appeared meanwhile, unless force). One reply line per file: `ok SHA`, `bad
# SHA` (left as NAME.part), `skip`, `collision dir` (a directory is in the way) or
# `collision appeared` (a file appeared at the final name meanwhile).
DST_SMALL = (
    _PRELUDE
    + r"""force=$1; shift
for part do
  IFS=' ' read -r size mode want || { echo "dflash: $part: the stream ended early" >&2; exit 5; }
  if [ "$size" = - ]; then echo skip; continue; fi
  final=${part%.part}
  case $part in */*) d=${part%/*}; [ -z "$d" ] || [ -d "$d" ] || mkdir -p -- "$d" || exit 1 ;; esac
  dd of="$part" bs=1M count="$size" iflag=count_bytes,fullblock status=none || exit 1
  got=$(sha256sum < "$part") || exit 1
  got=${got%% *}
  if [ "$got" != "$want" ]; then echo "bad $got"; continue; fi
  chmod "$mode" "$part" || exit 1
  if [ -d "$final" ] && [ ! -L "$final" ]; then echo "collision dir"; continue; fi
  if [ "$force" = 1 ]; then mv -fT -- "$part" "$final" || exit 1; echo "ok $got"; continue; fi
  if ln -- "$part" "$final" 2>/dev/null; then rm -f -- "$part"; echo "ok $got"; continue; fi
  if [ -e "$final" ] || [ -L "$final" ]; then echo "collision appeared"; continue; fi
  mv -nT -- "$part" "$final" || exit 1
  if [ -e "$part" ]; then echo "collision appeared"; continue; fi
  echo "ok $got"
done
"""
)

REMOVE = r"""rm -f -- "$@" """

# Direct-mode reachability: run the ssh argv in "$@" with `true`; print its error.
PROBE = r""""$@" 2>&1"""

# Path completion: up to $3 entries of directory $1 whose names start with $2
# (taken literally: a quoted word in a pattern matches itself), `TYPE NAME\0`.
# Exit 3: no such directory; 4: it cannot be read.
COMPLETE = r"""export LC_ALL=C
[ -d "$1" ] || exit 3
cd -- "$1" 2>/dev/null && [ -r . ] || exit 4
n=0
for f in "$2"*; do
  case $f in .|..) continue ;; esac
  [ -e "$f" ] || [ -L "$f" ] || continue
  if [ -d "$f" ]; then printf 'd %s\0' "$f"; else printf 'f %s\0' "$f"; fi
  n=$((n + 1)); [ "$n" -ge "$3" ] && break
done
exit 0
"""


def argv(script: str, *args: object) -> list[str]:
    """argv that runs one of the scripts above with `args` as $1..$n."""
    return shell_script(script, *(str(a) for a in args))
