"""Golden results: every shipped experiment (experiments/*.yaml) and every bench point (the scenarios of
`ddlsim bench --list`) rerun and compared byte for byte with the CSV committed under tests/golden/, after
dropping the columns that differ from run to run or machine to machine (the wall time; tests/golden/README.md
lists them). A change that is meant to move numbers regenerates them in the same commit:

    python3 tests/cli/test_golden.py build/bin/ddlsim --update            # every golden
    python3 tests/cli/test_golden.py build/bin/ddlsim --update demo moe   # some (file stems or scenario names)

`--update` runs each case twice and refuses to write a golden whose two runs differ. Without --update,
names given after the binary check only those cases. Skipped (77) under the sanitizer build
(DDLSIM_SANITIZED=1): instrumented runs are several times slower and compute the same numbers.
DDLSIM_GOLDEN_JOBS sets how many cases run at once (default 2, each `ddlsim run -j 1`)."""
import concurrent.futures
import os
import subprocess
import sys
import time

from common import ROOT, SKIP, check, failures, finish, workdir

GOLDEN = os.path.join(ROOT, "tests", "golden")

# Columns dropped before comparing and before writing a golden: they change from run to run or from machine to
# machine. `ddlsim run`: the host's wall time. `ddlsim bench` (import scenarios): every timing, memory and rate
# column, and input_bytes (for a gzipped trace, the size zlib's version and level give).
DROP_RUN = {"sim_wall_time_s"}
DROP_BENCH = {"wall_time_s", "max_rss_bytes", "activities_per_s", "bare_wall_time_s", "bare_activities_per_s",
              "overhead_ratio", "wall_time_spread_pct", "bare_wall_time_spread_pct", "points_per_s",
              "import_MB_per_s", "json_MB_per_s", "input_bytes", "validate_wall_time_s", "validate_max_rss_bytes"}

# Cases too slow for CI's budget run a deterministic subset of their points (`--shard I/N` keeps the points whose
# index mod N is I, with their config_id). tests/golden/README.md says which and why; keep the two in step.
SUBSET = {
    "bench/llama3-405b-16k-sweep.yaml": ["--shard", "19/23"],
    "experiments/validation.yaml": ["--shard", "0/8"],
    "bench/sweep-constant-250.yaml": ["--shard", "0/25"],
    "bench/sweep-constant-10000.yaml": ["--shard", "0/1000"],
}

# The slowest cases start first, so that the two workers end together (CPU seconds on a busy 2-core machine):
# moe 170, the sweep's shard 70, the unfolded point 55, grid_shapes 20; every other case 5 or less.
SLOW_FIRST = ["experiments/moe.yaml", "bench/llama3-405b-16k-sweep.yaml", "bench/llama3-405b-16k-zero0-unfolded.yaml",
              "experiments/grid_shapes.yaml", "experiments/llama3_recipes.yaml", "bench/llama3-405b-131k.yaml",
              "bench/sweep-gpipe.yaml"]

# Seconds each case may take before it counts as failed (moe takes about 170 s of CPU).
TIMEOUT = 900


def cases(binary):
    """(golden path relative to tests/golden, argv after the binary) for every shipped experiment and bench point."""
    out = []
    for folder in ("experiments", "bench"):
        for name in sorted(os.listdir(os.path.join(ROOT, folder))):
            if name.endswith(".yaml"):
                rel = f"{folder}/{name}"
                out.append((f"{folder}/{name[:-5]}.csv", ["run", rel, "--quiet", "-j", "1", *SUBSET.get(rel, [])]))
    # The bench scenarios that are not files of bench/ (the synthetic trace imports), through `ddlsim bench`.
    p = subprocess.run([binary, "bench", "--list"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, f"ddlsim bench --list: {p.returncode} {p.stderr}")
    for line in p.stdout.splitlines():
        if not line.strip():
            continue
        scenario, kind = line.split()[:2]
        if kind == "import":
            out.append((f"bench/{scenario}.csv", ["bench", scenario, "--repeat", "1"]))
        else:
            check(os.path.exists(os.path.join(ROOT, "bench", scenario + ".yaml")),
                  f"bench scenario {scenario} ({kind}) is bench/{scenario}.yaml, which this test runs")
    return out


def records(text):
    """The CSV's records as lists of raw cells (quotes kept): exactly the bytes ddlsim wrote, split at the commas
    and line ends outside quotes."""
    rows, row, cell, quoted = [], [], [], False
    for ch in text:
        if quoted:
            cell.append(ch)
            if ch == '"':
                quoted = False  # a doubled quote closes and reopens: the bytes stay as they were
        elif ch == '"':
            quoted = True
            cell.append(ch)
        elif ch == ",":
            row.append("".join(cell))
            cell = []
        elif ch == "\n":
            row.append("".join(cell))
            rows.append(row)
            row, cell = [], []
        else:
            cell.append(ch)
    if cell or row:
        row.append("".join(cell))
        rows.append(row)
    return rows


def without(text, drop):
    """The CSV text without the columns named in `drop`, every other byte as it was."""
    rows = records(text)
    if not rows:
        return text
    keep = [i for i, name in enumerate(rows[0]) if name not in drop]
    return "".join(",".join(r[i] if i < len(r) else "" for i in keep) + "\n" for r in rows)


def simulate(binary, argv, folder, tag):
    """Runs one case into `folder`; (golden-ready text or None, seconds, error text)."""
    out = os.path.join(folder, tag + ".csv")
    start = time.monotonic()
    try:
        p = subprocess.run([binary, *argv, "-o", out], cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - start, f"timed out after {TIMEOUT} s"
    seconds = time.monotonic() - start
    print(f"golden: {tag}: ddlsim {' '.join(argv)}: {seconds:.1f} s", flush=True)
    if p.returncode != 0 or not os.path.exists(out):
        return None, seconds, f"exit {p.returncode}: {p.stderr.strip()}"
    with open(out, newline="") as f:
        text = f.read()
    return without(text, DROP_BENCH if argv[0] == "bench" else DROP_RUN), seconds, ""


def describe(golden, got, limit=3):
    """What differs: the columns either side lacks, then the first `limit` rows whose cells differ in the columns
    both have, cell by cell (golden -> this run), each row named by its config_id (or scenario)."""
    a, b = records(golden), records(got)
    ha, hb = (a[0] if a else []), (b[0] if b else [])
    lines = []
    if ha != hb:
        lines.append(f"  columns: only in the golden {[c for c in ha if c not in hb]}, "
                     f"only in this run {[c for c in hb if c not in ha]}"
                     + ("; the same columns in another order" if set(ha) == set(hb) else ""))
    common = [c for c in ha if c in hb]
    ia, ib = {c: j for j, c in enumerate(ha)}, {c: j for j, c in enumerate(hb)}

    def cell(row, index, c):
        return row[index[c]] if index[c] < len(row) else ""

    if len(a) != len(b):
        lines.append(f"  rows: golden {len(a) - 1}, this run {len(b) - 1}")
    key = "config_id" if "config_id" in common else (common[0] if common else None)
    differing = []
    for i in range(1, max(len(a), len(b))):
        if i >= len(a) or i >= len(b):
            differing.append((i, None))
            continue
        cells = [(c, cell(a[i], ia, c), cell(b[i], ib, c)) for c in common if cell(a[i], ia, c) != cell(b[i], ib, c)]
        if cells:
            differing.append((i, cells))
    for i, cells in differing[:limit]:
        if cells is None:
            side = b if i >= len(a) else a
            lines.append(f"  row {i}: only in {'this run' if i >= len(a) else 'the golden'}: {','.join(side[i])[:300]}")
            continue
        lines.append(f"  row {i} ({key} {cell(a[i], ia, key)}), golden -> this run:")
        lines.extend(f"    {c}: {x} -> {y}" for c, x, y in cells[:12])
        if len(cells) > 12:
            lines.append(f"    ... and {len(cells) - 12} more cells")
    if len(differing) > limit:
        lines.append(f"  ... {len(differing) - limit} more differing rows ({len(differing)} in all)")
    if not differing and ha != hb:
        lines.append(f"  every row is the same in the {len(common)} columns both have")
    return "\n".join(lines)


def main():
    args = sys.argv[1:]
    binary = args.pop(0)
    update = "--update" in args
    names = [a for a in args if a != "--update"]
    if os.environ.get("DDLSIM_SANITIZED") == "1" and not update:
        print("golden: skipped under the sanitizer build (DDLSIM_SANITIZED=1): instrumented runs are too slow "
              "for every shipped experiment, and the plain build's `make test` checks the same numbers")
        sys.exit(SKIP)

    def wanted(rel):
        stem = rel.split("/", 1)[1][:-4]
        return not names or stem in names or rel in names or rel[:-4] + ".yaml" in names

    todo = [(rel, argv) for rel, argv in cases(binary) if wanted(rel)]
    check(todo, f"golden: no case named {names}")
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    order = sorted(range(len(todo)), key=lambda i: rank.get(todo[i][0][:-4] + ".yaml", len(rank)))
    folder = workdir()
    jobs = max(1, int(os.environ.get("DDLSIM_GOLDEN_JOBS", "2")))
    runs = 2 if update else 1
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futures = {(todo[i][0], k): pool.submit(simulate, binary, todo[i][1], folder,
                                                todo[i][0].replace("/", "_")[:-4] + f"_{k}")
                   for i in order for k in range(runs)}
        results = {key: f.result() for key, f in futures.items()}

    checks = 0
    for rel, argv in todo:
        text, _, error = results[(rel, 0)]
        shown = " ".join(argv)
        checks += 1
        if error:
            check(False, f"{rel}: ddlsim {shown}: {error}")
            continue
        path = os.path.join(GOLDEN, rel)
        if update:
            again = results[(rel, 1)][0]
            if again != text:
                check(False, f"{rel}: two runs differ, not written (a column that is not deterministic? "
                             f"drop it in DROP_RUN/DROP_BENCH and say so in tests/golden/README.md)\n"
                             f"{describe(text, again or '')}")
                continue
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", newline="") as f:
                f.write(text)
            continue
        if not os.path.exists(path):
            check(False, f"{rel}: no golden for `ddlsim {shown}`: write it with "
                         f"`python3 tests/cli/test_golden.py {binary} --update {rel.split('/', 1)[1][:-4]}`")
            continue
        with open(path, newline="") as f:
            golden = f.read()
        if golden != text:
            check(False, f"{rel}: `ddlsim {shown}` differs from the golden (this run's CSV: "
                         f"{os.path.join(folder, rel.replace('/', '_')[:-4] + '_0.csv')}):\n{describe(golden, text)}")

    # Goldens of cases that no longer exist (an experiment renamed or removed) go with them.
    if not names:
        known = {rel for rel, _ in todo}
        for sub in sorted(os.listdir(GOLDEN)) if os.path.isdir(GOLDEN) else []:
            if os.path.isdir(os.path.join(GOLDEN, sub)):
                for name in sorted(os.listdir(os.path.join(GOLDEN, sub))):
                    checks += 1
                    check(f"{sub}/{name}" in known, f"tests/golden/{sub}/{name} belongs to no shipped experiment or "
                                                    f"bench scenario: remove it")
    if update and not failures:
        print(f"golden: wrote {len(todo)} files under tests/golden/")
    finish("golden", checks)


main()
