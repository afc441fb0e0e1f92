#!/usr/bin/env bash
# Runs every fuzz target for N seconds each (default 60): `fuzz/run.sh [SECONDS] [TARGET...]`.
# Called by `make fuzz`, not by CI. Needs a nightly toolchain and cargo-fuzz
# (`cargo install cargo-fuzz`). New corpus entries go to fuzz/corpus/<target>/ (git-ignored),
# seeded from fuzz/seeds/<target>/; crashes are written to fuzz/artifacts/<target>/.
set -uo pipefail

cd "$(dirname "$0")"
seconds="${1:-60}"
shift || true
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
    targets=(fuzz_cluster_description fuzz_jgf fuzz_jobspec)
fi
toolchain="${FUZZ_TOOLCHAIN:-nightly}"

if ! cargo "+$toolchain" fuzz --help >/dev/null 2>&1; then
    echo "run.sh: needs cargo-fuzz and a $toolchain toolchain: cargo install cargo-fuzz" >&2
    exit 2
fi

failed=()
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t"
    echo "== $t: ${seconds}s"
    if ! cargo "+$toolchain" fuzz run "$t" "corpus/$t" "seeds/$t" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1; then
        failed+=("$t")
    fi
done

if [ "${#failed[@]}" -ne 0 ]; then
    echo "run.sh: crashes in: ${failed[*]} (inputs under fuzz/artifacts/)" >&2
    exit 1
fi
echo "run.sh: no crashes"
