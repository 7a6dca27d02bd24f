#!/bin/sh
# build.sh: build cowbell and install the binary as bin/cowbell.
#
# Run from the repository root (herdr's `plugin install` runs it through the
# [[build]] entry of herdr-plugin.toml). POSIX sh; never calls git, so it also
# works in a release tarball.
#
#   sh build.sh          static release binary (musl; static glibc fallback)
#   sh build.sh --tiny   nightly build-std + immediate-abort panics, when a
#                        nightly toolchain with rust-src is installed;
#                        otherwise the normal build
#
# Linux x86_64/aarch64: <arch>-unknown-linux-musl, the musl target is added
# with rustup when missing; if musl cannot be had, a static glibc binary
# (-C target-feature=+crt-static, <arch>-unknown-linux-gnu). A musl host
# (Alpine's Rust): the host's own target with +crt-static.
# macOS: a normal release binary. Other Linux architectures: a normal
# (dynamic) release binary for the host. Every build is --locked. A static
# PIE packs its relocations (-z pack-relative-relocs, given to the final
# binary with cargo rustc) where a probe program built that way runs.
#
# The artefact is taken from <target dir>/<triple>/release/, where the target
# dir is cargo's own (CARGO_TARGET_DIR, else cargo's config, else ./target;
# the --tiny build uses <target dir>/tiny/<triple>/release/ so it does not
# evict the normal build), copied into bin/ under a temporary name
# and renamed over bin/cowbell, so a running daemon's binary is replaced
# atomically rather than overwritten in place.
#
# --tiny flags: nightlies since late 2025 spell immediate-abort panics as
# `-Zunstable-options -Cpanic=immediate-abort` (the old
# `-Z build-std-features=panic_immediate_abort` is a compile error there);
# older nightlies only know the build-std feature. The script probes rustc
# for the new spelling and uses the old one when the probe fails.

set -eu

NORMAL_GOAL_KIB=480
TINY_GOAL_KIB=128

say() { printf 'build.sh: %s\n' "$*"; }
die() { printf 'build.sh: error: %s\n' "$*" >&2; exit 1; }

usage() {
    cat <<'EOF'
usage: sh build.sh [--tiny] [--help]

Builds the cowbell release binary and installs it as bin/cowbell.

  (no option)  static release binary: <arch>-unknown-linux-musl on Linux
               (adds the musl target with rustup when missing; falls back
               to a static glibc binary), a normal release build on macOS
  --tiny       size-optimised build with nightly -Z build-std and
               immediate-abort panics; needs the nightly toolchain with the
               rust-src component, else does the normal build
  -h, --help   show this help

Builds into cargo's target directory (CARGO_TARGET_DIR, CARGO_BUILD_TARGET_DIR
or build.target-dir, else ./target) with --locked. Size goal: at most 480 KiB (128 KiB with --tiny).
EOF
}

tiny=0
for arg in "$@"; do
    case $arg in
        --tiny) tiny=1 ;;
        -h|--help) usage; exit 0 ;;
        *) printf 'build.sh: unknown argument: %s\n' "$arg" >&2; usage >&2; exit 2 ;;
    esac
done

# A relative CARGO_TARGET_DIR (or CARGO_BUILD_TARGET_DIR) is the caller's,
# as it is for cargo itself: make it absolute before leaving the caller's
# directory.
case ${CARGO_TARGET_DIR:-} in
    ''|/*) ;;
    *) CARGO_TARGET_DIR=$(pwd)/$CARGO_TARGET_DIR; export CARGO_TARGET_DIR ;;
esac
case ${CARGO_BUILD_TARGET_DIR:-} in
    ''|/*) ;;
    *) CARGO_BUILD_TARGET_DIR=$(pwd)/$CARGO_BUILD_TARGET_DIR; export CARGO_BUILD_TARGET_DIR ;;
esac

# Work from the directory holding this script (the repository root).
# (CDPATH= : an exported CDPATH could send a relative cd elsewhere.)
case $0 in
    */*) CDPATH= cd -- "${0%/*}" ;;
esac
[ -f Cargo.toml ] || die "no Cargo.toml in $(pwd); run build.sh from the cowbell repository root"

# herdr may run the build with a minimal PATH; look in rustup's default place.
if ! command -v cargo >/dev/null 2>&1; then
    cargo_bin=${CARGO_HOME:-${HOME:-/nonexistent}/.cargo}/bin
    if [ -x "$cargo_bin/cargo" ]; then
        PATH=$cargo_bin:$PATH
        export PATH
        say "using cargo from $cargo_bin (not on PATH)"
    else
        echo "build.sh: cargo not found; install Rust from https://rustup.rs and run sh build.sh again" >&2
        exit 1
    fi
fi

have_rustup=0
command -v rustup >/dev/null 2>&1 && have_rustup=1

# Where cargo puts what it builds: CARGO_TARGET_DIR, else what the
# packager's cargo config or CARGO_BUILD_TARGET_DIR says (cargo metadata
# knows), else ./target. Every build gets it as --target-dir, so the
# artefact is where this script looks.
target_root=${CARGO_TARGET_DIR:-}
if [ -z "$target_root" ]; then
    # JSON: a backslash or a quote in the path comes escaped.
    target_root=$(cargo metadata --format-version 1 --no-deps --offline 2>/dev/null |
        sed -n -E 's/.*"target_directory":"(([^"\\]|\\.)*)".*/\1/p' |
        sed 's/\\\(.\)/\1/g')
    [ -n "$target_root" ] || target_root=target
fi
os=$(uname -s)
machine=$(uname -m)

case $machine in
    x86_64|amd64) arch=x86_64 ;;
    aarch64|arm64) arch=aarch64 ;;
    *) arch=$machine ;;
esac

# Which target the build uses, and how to describe it.
mode=           # musl | glibc-static | native
triple=         # the --target triple
artefact=
tiny_built=0

# Runs "$@" with the flags in $1 added to the ones cargo will use: a
# packager's CARGO_ENCODED_RUSTFLAGS wins over RUSTFLAGS in cargo, so the
# flags go where cargo looks. (Either replaces build.rustflags from a cargo
# config, as cargo does.)
with_rustflags() {
    flags=$1
    shift
    [ -n "$flags" ] || { "$@"; return; }
    if [ -n "${CARGO_ENCODED_RUSTFLAGS+set}" ]; then
        sep=$(printf '\037')
        encoded=$(printf '%s' "$flags" | tr ' ' '\037')
        CARGO_ENCODED_RUSTFLAGS="${CARGO_ENCODED_RUSTFLAGS:+$CARGO_ENCODED_RUSTFLAGS$sep}$encoded" "$@"
    else
        RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }$flags" "$@"
    fi
}

# Is the standard library for target $1 installed in the current toolchain?
have_target() {
    sysroot=$(rustc --print sysroot 2>/dev/null) || return 1
    [ -d "$sysroot/lib/rustlib/$1/lib" ]
}

build_musl() {
    musl=$arch-unknown-linux-musl
    if ! have_target "$musl"; then
        if [ "$have_rustup" = 1 ]; then
            say "adding the $musl target (rustup target add $musl)"
            if ! rustup target add "$musl"; then
                say "rustup target add $musl failed"
                return 1
            fi
        else
            say "the $musl target is not installed and rustup is not available"
            return 1
        fi
    fi
    relr=$(relr_args "$musl" "")
    say "building static musl binary (cargo rustc --release --locked --target $musl --bin cowbell${relr:+ -- $relr})"
    # With the target at hand, a failure is the build's own (a compile
    # error, no network for the crates): a glibc build would only fail the
    # same way, under a message that blames musl.
    # shellcheck disable=SC2086 # $relr is a list of arguments
    cargo rustc --release --locked --target "$musl" --target-dir "$target_root" \
        --bin cowbell -- $relr ||
        die "cargo rustc --release --target $musl failed"
    mode=musl
    triple=$musl
    artefact=$target_root/$musl/release/cowbell
}

# probe <target> <rustflags> <rustc args> <main.rs> [<output>]: can cargo
# build a small crate for <target>, with <rustflags> for every crate and
# <rustc args> for the crate itself, the way cowbell's build gets them (with
# the packager's flags, linker and cargo config); and given <output>, does
# the program run and print it? A crate of its own, so that a failure of
# cowbell's own build is never taken for the probe's. Returns 0 for yes, 1
# for no, 2 when the probe cannot be written.
probe() {
    probe_dir=$target_root/probe.$$
    # Cargo tags only a target dir it makes itself as a cache (CACHEDIR.TAG,
    # which backups skip): made here first, it must get the tag from here.
    if [ ! -d "$target_root" ]; then
        mkdir -p "$target_root" 2>/dev/null &&
            printf 'Signature: 8a477f597d28d172789f06886806bc55\n# A cache directory tag: cargo'"'"'s target directory, made by build.sh.\n# See https://bford.info/cachedir/\n' \
                > "$target_root/CACHEDIR.TAG" 2>/dev/null
    fi
    # An interrupted build must not leave the probe in the target dir.
    trap 'rm -rf "$probe_dir"' EXIT
    trap 'rm -rf "$probe_dir"; exit 1' HUP INT TERM
    rc=0
    { mkdir -p "$probe_dir/src" &&
        printf '[package]\nname = "probe"\nversion = "0.0.0"\nedition = "2021"\n[workspace]\n' \
            > "$probe_dir/Cargo.toml" &&
        printf '%s\n' "$4" > "$probe_dir/src/main.rs"; } 2>/dev/null || rc=2
    if [ "$rc" = 0 ]; then
        # shellcheck disable=SC2086 # $3 is a list of arguments
        with_rustflags "$2" \
            cargo rustc --quiet --offline --release --target "$1" \
                --manifest-path "$probe_dir/Cargo.toml" --target-dir "$probe_dir/target" \
                -- $3 >/dev/null 2>&1 || rc=1
    fi
    if [ "$rc" = 0 ] && [ $# -ge 5 ]; then
        # A C runtime that cannot start the program kills it with SIGSEGV:
        # no core file, and not the shell's "Segmentation fault" either.
        { out=$(ulimit -c 0; "$probe_dir/target/$1/release/probe" 2>/dev/null); } 2>/dev/null || rc=1
        [ "$rc" = 1 ] || [ "$out" = "$5" ] || rc=1
    fi
    rm -rf "$probe_dir"
    trap - EXIT HUP INT TERM
    return $rc
}

# Can cargo link a static glibc binary for target $1? A distro Rust
# without glibc's static libraries cannot.
static_glibc_links() {
    probe "$1" "-C target-feature=+crt-static" "" 'fn main() {}' && return 0
    [ $? != 2 ] || die "cannot write a probe crate in $target_root"
    return 1
}

# The rustc arguments that pack the relative relocations of a static PIE
# for target $1 built with the rustflags $2, or none. A static PIE relocates
# its own pointers at start; packed (DT_RELR), their table is about 20 KiB
# smaller, with the same address randomisation. It takes a linker that knows
# `-z pack-relative-relocs` and a C runtime whose start-up applies them
# (musl 1.2.4, glibc 2.36; with an older one the program crashes at once),
# so a program that prints through relocated pointers is built and run
# first. Given to the final binary only (cargo rustc), so that no rustflags
# of the packager's cargo config are displaced.
relr_args() {
    args="-C link-arg=-Wl,-z,pack-relative-relocs"
    main='static WORDS: [&str; 2] = ["relr", "ok"];
fn main() {
    // black_box: read through the table, not folded into constants.
    println!("{}", std::hint::black_box(&WORDS).join(" "));
}'
    if probe "$1" "$2" "$args" "$main" "relr ok"; then
        echo "$args"
    fi
}

build_glibc_static() {
    gnu=$arch-unknown-linux-gnu
    if ! static_glibc_links "$gnu"; then
        # A dynamic binary still runs on this host.
        say "musl is not available, nor a static glibc (glibc's static libraries): building a normal (dynamic) release binary"
        build_native
        return
    fi
    relr=$(relr_args "$gnu" "-C target-feature=+crt-static")
    say "musl is not available: building a static glibc binary instead (-C target-feature=+crt-static, --target $gnu${relr:+, $relr})"
    # shellcheck disable=SC2086 # $relr is a list of arguments
    with_rustflags "-C target-feature=+crt-static" \
        cargo rustc --release --locked --target "$gnu" --target-dir "$target_root" \
            --bin cowbell -- $relr ||
        die "cargo rustc --release --target $gnu failed"
    mode=glibc-static
    triple=$gnu
    artefact=$target_root/$gnu/release/cowbell
}

build_native() {
    # --target even for the host: a build.target in cargo's own config would
    # otherwise put the binary where this script does not look.
    host=$(rustc -vV 2>/dev/null | sed -n 's/^host: //p')
    [ -n "$host" ] || die "cannot tell the host target (rustc -vV printed no host line)"
    say "building release binary (cargo build --release --locked --target $host)"
    cargo build --release --locked --target "$host" --target-dir "$target_root" ||
        die "cargo build --release failed"
    mode=native
    triple=$host
    artefact=$target_root/$host/release/cowbell
}

# A musl host (Alpine's own Rust has no *-unknown-linux-musl standard
# library, and no rustup): the host target is the musl one, static with
# +crt-static.
build_host_musl() {
    relr=$(relr_args "$1" "-C target-feature=+crt-static")
    say "building static musl binary for this musl host (-C target-feature=+crt-static, --target $1${relr:+, $relr})"
    # shellcheck disable=SC2086 # $relr is a list of arguments
    with_rustflags "-C target-feature=+crt-static" \
        cargo rustc --release --locked --target "$1" --target-dir "$target_root" \
            --bin cowbell -- $relr ||
        die "cargo rustc --release --target $1 failed"
    mode=musl
    triple=$1
    artefact=$target_root/$1/release/cowbell
}

build_normal() {
    host_triple=$(rustc -vV 2>/dev/null | sed -n 's/^host: //p')
    if [ "$os" = Linux ] && case $host_triple in *-linux-musl*) true ;; *) false ;; esac; then
        build_host_musl "$host_triple"
    elif [ "$os" = Linux ] && { [ "$arch" = x86_64 ] || [ "$arch" = aarch64 ]; }; then
        build_musl || build_glibc_static
    elif [ "$os" = Linux ]; then
        say "no static target configured for $machine: building a normal (dynamic) release binary"
        build_native
    else
        [ "$os" = Darwin ] || say "unrecognised OS $os: building a normal release binary"
        build_native
    fi
}

# --tiny: returns 1 (after saying why) when the prerequisites are missing.
build_tiny() {
    if [ "$have_rustup" != 1 ]; then
        say "--tiny needs rustup with a nightly toolchain; rustup not found"
        return 1
    fi
    if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
        say "--tiny needs a nightly toolchain (rustup toolchain install nightly --component rust-src)"
        return 1
    fi
    if ! rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^rust-src'; then
        say "--tiny needs the rust-src component of nightly (rustup component add rust-src --toolchain nightly)"
        return 1
    fi
    if [ "$os" = Linux ] && { [ "$arch" = x86_64 ] || [ "$arch" = aarch64 ]; }; then
        ttriple=$arch-unknown-linux-musl
        if ! rustup target list --toolchain nightly --installed 2>/dev/null | grep -qx "$ttriple"; then
            say "adding the $ttriple target to nightly (rustup target add --toolchain nightly $ttriple)"
            if ! rustup target add --toolchain nightly "$ttriple"; then
                say "--tiny needs the $ttriple target for nightly (its self-contained C runtime); rustup target add failed"
                return 1
            fi
        fi
        tmode=musl
    else
        ttriple=$(rustc +nightly -vV | sed -n 's/^host: //p')
        [ -n "$ttriple" ] || { say "cannot determine the nightly host triple"; return 1; }
        tmode=native
    fi

    tiny_dir=$target_root/tiny
    # A panic aborts at once in the tiny build, so nothing ever unwinds:
    # unwind tables (about 40 KiB) are dead weight. A plain static
    # executable instead of a static PIE drops 12 KiB of relocations; the
    # price is that the tiny binary's own code gets no address
    # randomisation, which is why only the opt-in build pays it. For the
    # same price, -z noseparate-code lets read-only data share the code's
    # pages instead of padding each to a page of its own: 4 KiB.
    tflags="-C force-unwind-tables=no"
    if [ "$tmode" = musl ]; then
        tflags="$tflags -C relocation-model=static -C link-arg=-Wl,-z,noseparate-code"
    fi
    # std's optimize_for_size feature picks its smaller algorithms (a heap
    # sort, plainer number formatting): 4 to 8 KiB, and the daemon's CPU time
    # per resync of 1000 tabs stays 4.5 ms. Older nightlies lack it, and
    # cargo refuses an unknown feature, so it is asked for only where
    # std's Cargo.toml has it.
    sysroot=$(rustc +nightly --print sysroot 2>/dev/null || true)
    if grep -q '^optimize_for_size' "$sysroot/lib/rustlib/src/rust/library/std/Cargo.toml" 2>/dev/null; then
        small=optimize_for_size
    else
        small=
    fi
    if rustc +nightly -Zunstable-options -Cpanic=immediate-abort --print cfg >/dev/null 2>&1; then
        tflags="$tflags -Zunstable-options -Cpanic=immediate-abort"
        features=$small
    else
        features=panic_immediate_abort${small:+,$small}
    fi
    say "building tiny binary (nightly, -Z build-std=std,panic_abort${features:+, -Z build-std-features=$features}, --target $ttriple)"
    with_rustflags "$tflags" \
        cargo +nightly build --release --locked --target "$ttriple" --target-dir "$tiny_dir" \
            -Z build-std=std,panic_abort ${features:+-Z build-std-features=$features} \
        || die "tiny build failed (plain 'sh build.sh' still works)"
    mode=$tmode
    triple=$ttriple
    artefact=$tiny_dir/$ttriple/release/cowbell
    tiny_built=1
}

if [ "$tiny" = 1 ]; then
    if ! build_tiny; then
        say "falling back to the normal build"
        build_normal
    fi
else
    build_normal
fi

[ -f "$artefact" ] || die "build finished but $artefact does not exist"

# Install atomically: copy to a temporary name in bin/, then rename.
mkdir -p bin 2>/dev/null && [ -w bin ] ||
    die "cannot write bin/ in $(pwd) (the manifest runs bin/cowbell); the binary is at $artefact"
tmp=bin/.cowbell.tmp.$$
trap 'rm -f "$tmp"' EXIT
trap 'rm -f "$tmp"; exit 1' HUP INT TERM
cp "$artefact" "$tmp"
chmod 755 "$tmp"
mv -f "$tmp" bin/cowbell
trap - EXIT HUP INT TERM

# Size.
size=$(wc -c < bin/cowbell | tr -d ' ')
kib10=$(( (size * 10 + 512) / 1024 ))
kib=$((kib10 / 10)).$((kib10 % 10))

# Does the ELF file $1 have a PT_INTERP program header? Reads the headers with
# od; 0 = yes, 1 = no, 2 = cannot tell.
elf_has_interp() {
    command -v od >/dev/null 2>&1 || return 2
    magic=$(od -An -c -N 4 "$1" 2>/dev/null | tr -d ' ') || return 2
    [ "$magic" = '177ELF' ] || return 2
    class=$(od -An -t u1 -j 4 -N 1 "$1" | tr -d ' ')
    if [ "$class" = 2 ]; then
        phoff=$(od -An -t u8 -j 32 -N 8 "$1" | tr -d ' ')
        phentsize=$(od -An -t u2 -j 54 -N 2 "$1" | tr -d ' ')
        phnum=$(od -An -t u2 -j 56 -N 2 "$1" | tr -d ' ')
    else
        phoff=$(od -An -t u4 -j 28 -N 4 "$1" | tr -d ' ')
        phentsize=$(od -An -t u2 -j 42 -N 2 "$1" | tr -d ' ')
        phnum=$(od -An -t u2 -j 44 -N 2 "$1" | tr -d ' ')
    fi
    [ -n "$phoff" ] && [ -n "$phentsize" ] && [ -n "$phnum" ] || return 2
    i=0
    while [ "$i" -lt "$phnum" ]; do
        ptype=$(od -An -t u4 -j $((phoff + i * phentsize)) -N 4 "$1" | tr -d ' ')
        [ "$ptype" = 3 ] && return 0
        i=$((i + 1))
    done
    return 1
}

# The ELF headers first: older file(1) calls a static PIE "dynamically
# linked", and only the program interpreter makes a binary dynamic.
rc=0
if [ "$os" = Darwin ]; then
    rc=3
else
    elf_has_interp bin/cowbell || rc=$?
fi
case $rc in
    0) linkage=dynamic ;;
    1) linkage=static ;;
    3) linkage="dynamic (macOS)" ;;
    *)
        if command -v file >/dev/null 2>&1; then
            info=$(file -b bin/cowbell 2>/dev/null || true)
            case $info in
                *"statically linked"*|*"static-pie linked"*) linkage=static ;;
                *"dynamically linked"*) linkage=dynamic ;;
                *) linkage="unknown ($info)" ;;
            esac
        elif command -v ldd >/dev/null 2>&1; then
            case $(ldd bin/cowbell 2>&1 || true) in
                *"not a dynamic executable"*|*"statically linked"*) linkage=static ;;
                *) linkage=dynamic ;;
            esac
        else
            linkage=unknown
        fi
        ;;
esac

case $mode in
    musl) what="musl build" ;;
    glibc-static) what="glibc build with +crt-static (musl unavailable)" ;;
    *) what="release build" ;;
esac
[ "$tiny_built" = 1 ] && what="tiny $what"
say "built bin/cowbell: $what${triple:+, $triple}, from $artefact"
say "size: $size bytes ($kib KiB); linkage: $linkage"
if [ "$mode" != native ] && [ "$linkage" = dynamic ]; then
    say "warning: the binary came out dynamically linked, not static (do RUSTFLAGS or CARGO_ENCODED_RUSTFLAGS say -crt-static?)"
fi

if [ "$tiny_built" = 1 ]; then
    goal=$TINY_GOAL_KIB
else
    goal=$NORMAL_GOAL_KIB
fi
if [ "$size" -le $((goal * 1024)) ]; then
    say "size goal: within $goal KiB"
else
    say "warning: size goal missed: $kib KiB is over $goal KiB"
fi
