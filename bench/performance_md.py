#!/usr/bin/env python3
"""Writes docs/performance.md from the CSV `make bench` collects (results/bench.csv): the machine,
build, date and commit, then one table per benchmark kind with the prose that explains it.

    python3 bench/performance_md.py results/bench.csv --build build [--previous OLD.csv]
        [--loadavg LOADAVG] [--glibc results/bench-glibc.csv] [--glibc-peer results/bench-tcmalloc.csv]
        -o docs/performance.md

Standard library only. The machine is this one (/proc/cpuinfo, /proc/meminfo, /etc/os-release);
the compiler and build type come from the build folder's CMakeCache.txt, SimGrid's version and
ddlsim's commit from `ddlsim --version`.
"""
import argparse
import csv
import datetime
import os
import platform
import re
import subprocess
import sys
import textwrap


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def command_output(args, cwd=None):
    try:
        return subprocess.run(args, capture_output=True, text=True, check=False, cwd=cwd).stdout.strip()
    except OSError:
        return ""


def machine(build):
    cpuinfo = read("/proc/cpuinfo")
    models = re.findall(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    mem = re.search(r"^MemTotal:\s*(\d+) kB", read("/proc/meminfo"), re.M)
    os_name = re.search(r'^PRETTY_NAME="?([^"\n]+)"?', read("/etc/os-release"), re.M)
    cache = read(os.path.join(build, "CMakeCache.txt"))
    cxx = re.search(r"^CMAKE_CXX_COMPILER:\w+=(.+)$", cache, re.M)
    build_type = re.search(r"^CMAKE_BUILD_TYPE:\w+=(.*)$", cache, re.M)
    compiler = command_output([cxx.group(1), "--version"]).splitlines()[:1] if cxx else []
    version = command_output([os.path.join(build, "bin", "ddlsim"), "--version"])
    simgrid = re.search(r"SimGrid ([^,)]+)", version)
    ddlsim = re.match(r"(ddlsim \S+) \(git (\w+)", version)
    allocator = re.search(r"at build time, ([^)]+)\)", version)
    return {
        "cpu": models[0] if models else platform.processor() or "unknown",
        "cores": os.cpu_count(),
        "memory": f"{int(mem.group(1)) / 2**20:.0f} GiB" if mem else "unknown",
        "os": (os_name.group(1) if os_name else platform.system()) + f", Linux {platform.release()}",
        "compiler": compiler[0] if compiler else "unknown",
        "build_type": (build_type.group(1) or "(none)") if build_type else "unknown",
        "simgrid": simgrid.group(1) if simgrid else "unknown",
        "allocator": allocator.group(1) if allocator else "glibc malloc",
        "ddlsim": f"{ddlsim.group(1)} (git {ddlsim.group(2)})" if ddlsim else "ddlsim (version unknown)",
    }


def commit(root):
    head = command_output(["git", "rev-parse", "--short=12", "HEAD"], cwd=root) or "unknown"
    dirty = command_output(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root)
    return head + (" with uncommitted changes" if dirty else "")


def load_line(path):
    """What else the machine was doing when the run began, from a copy of /proc/loadavg."""
    fields = read(path).split() if path else []
    if len(fields) < 3:
        return []
    one, five, fifteen = (float(x) for x in fields[:3])
    busy = ("the machine was otherwise idle" if five < 0.5 else
            "other work shared the machine, which shows in the spreads and in the -j 2 speed-up")
    return [f"**Load.** {one:.2f}, {five:.2f}, {fifteen:.2f} (1, 5 and 15 minutes) as the run began: {busy}.  "]


def descriptions(build):
    """scenario -> description, from `ddlsim bench --list`."""
    out = {}
    for line in command_output([os.path.join(build, "bin", "ddlsim"), "bench", "--list"]).splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3:
            out[parts[0]] = parts[2]
    return out


def num(text):
    return float(text) if text not in ("", None) else None


def count(x):
    return f"{x:,.0f}"


def seconds(x):
    return f"{x:.3g} s" if x < 1 else f"{x:.2f} s"


def megabytes(x):
    return f"{x / 1e6:,.1f} MB" if x >= 1e6 else f"{x / 1e3:,.0f} kB"


def activity_estimates(rows):
    """A sentence comparing the guard's activity estimates with the counts the replays made."""
    off = [(r["scenario"], num(r.get("estimated_activities")), num(r["activities"])) for r in rows]
    off = [(n, e, a) for n, e, a in off if e is not None and a and e != a]
    if not off:
        return "Its activity count equals the replay's on every scenario here."
    return "Its activity count differs from the replay's on " + ", ".join(
        f"`{n}` ({100 * (e / a - 1):+.1f}%)" for n, e, a in off) + "."


def estimate(row):
    """The resource guard's memory estimate, and how it compares with the measured peak."""
    e, m = num(row.get("estimated_memory_bytes")), num(row.get("max_rss_bytes"))
    if e is None or not m:
        return "-"
    return f"{megabytes(e)}, {e / m:.2f}x"


def spread(row):
    s = num(row.get("wall_time_spread_pct"))
    return "" if s is None or row.get("repeat") == "1" else f" ±{s / 2:.0f}%"


def bullets(*items):
    """Markdown bullets wrapped at 100 columns."""
    return [textwrap.fill(item, width=100, initial_indent="- ", subsequent_indent="  ", break_on_hyphens=False)
            for item in items]


# The figure that sums up a row, per kind: what the reproducibility check compares.
HEADLINE = {"simulation": "activities_per_s", "sweep": "points_per_s", "import": "json_MB_per_s"}


def key(row):
    return (row["scenario"], row.get("kind") or "simulation", row.get("jobs", ""))


def reproducibility(rows, previous_path):
    """A paragraph comparing each row's headline figure with the previous run's, when there is one."""
    if not previous_path or not os.path.exists(previous_path):
        return []
    with open(previous_path) as f:
        before = {key(r): r for r in csv.DictReader(f)}
    changes = []
    for r in rows:
        field = HEADLINE[r.get("kind") or "simulation"]
        old = before.get(key(r))
        if old and num(old.get(field)) and num(r.get(field)):
            changes.append((abs(num(r[field]) / num(old[field]) - 1) * 100, r["scenario"] +
                            (f" -j {r['jobs']}" if r.get("jobs") else "")))
    if not changes:
        return []
    changes.sort()
    median = changes[len(changes) // 2][0]
    worst, where = changes[-1]
    return ["## Reproducibility", ""] + bullets(
        f"Against the run of `make bench` before this one (`{previous_path}`), the figure that sums up each row "
        f"(activities/s, points/s, MB/s of JSON) moved by {median:.1f}% at the median of {len(changes)} rows and "
        f"by {worst:.1f}% at most (`{where}`). Within a run, ± after a wall time is half the spread of its repeats.") + [""]


def simulation_section(rows):
    lines = [
        "## Simulation rate",
        "",
        "One training iteration of each `simulation` scenario (`bench/*.yaml` with one point), and a bare",
        "SimGrid DAG of the same size.",
        "",
        "| scenario | GPUs (simulated devices) | simulated iteration | wall time | peak memory (guard's estimate) "
        "| activities | activities/s | bare SimGrid DAG, same size | ddlsim / SimGrid |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    ratios = []
    for r in rows:
        ratio = num(r["overhead_ratio"])
        if ratio is not None:
            ratios.append((ratio, r["scenario"]))
        bare = num(r["bare_wall_time_s"])
        lines.append(
            f"| `{r['scenario']}` | {count(num(r['gpus']))} ({count(num(r['devices']))}) "
            f"| {num(r['simulated_iteration_s']):.4g} s | {seconds(num(r['wall_time_s']))}{spread(r)} "
            f"| {megabytes(num(r['max_rss_bytes']))} ({estimate(r)}) | {count(num(r['activities']))} "
            f"| {count(num(r['activities_per_s']))} "
            f"| {seconds(bare) if bare is not None else '-'} | {f'{ratio:.2f}x' if ratio is not None else '-'} |")
    over = [name for ratio, name in ratios if ratio > 1.5]
    if ratios:
        goal = ("every scenario is within the 1.5x goal" if not over else
                "above the 1.5x goal: " + ", ".join(f"`{n}`" for n in over))
        summary = (f"The ratio runs from {min(ratios)[0]:.2f}x to {max(ratios)[0]:.2f}x here; {goal}.")
    else:
        summary = "No scenario was compared with the bare DAG (`--no-compare`)."
    lines += [""] + bullets(
        "**The guard's estimate** is the memory the resource guard (`experiments/Resources.hpp`) predicts for "
        "the point before building anything, the figure it compares with `limits.max_memory`; it is meant to "
        "stay above the measured peak. " + activity_estimates(rows),
        "**Wall time and peak memory** are those of the child process that builds the model, plans the point, "
        "builds the platform and replays the iteration (`ddlsim bench` forks it and reads its `getrusage`). "
        "± is half the spread (largest minus smallest) of the repeats around the median.",
        "**The bare SimGrid DAG** (`sim/BareDag.cpp`) runs as many Execs and Comms, created just in time, on as "
        "many hosts, with no task graph, cost model or metrics: SimGrid's own cost for a workload of that size. "
        "The ratio is ddlsim's wall time per activity over SimGrid's. " + summary + " Where ddlsim is the slower, "
        "the difference is the platform (a fat tree or a cluster of nodes, where the bare DAG has one star "
        "zone) and the task graph's bookkeeping; it shows most where the replay itself is short.",
        "**Symmetry folding** (`parallelism.fold_replicas`, on by default; [scale.md](scale.md)): the replicas "
        "of a stage and the tensor ranks of a group run the same work on alike places of the cluster, so one "
        "representative of each is simulated, on the quotient of the cluster's links, with every number "
        "equal to the unfolded simulation's (tests/cli/test_cli_fold.py). The simulated devices column counts "
        "the representatives; activities are theirs, and so is the bare DAG (as many activities on as many "
        "hosts). Compute tasks are timers (one task at a time per GPU), and a GPU's consecutive stream tasks "
        "one timer (stream chains: a pipeline pass's compute and closed-form tensor-parallel collectives), "
        "which is why ddlsim's time per activity is its bookkeeping's rather than SimGrid's, and can be "
        "below the bare DAG's.",
        "**The GPT-3 scenarios** run Megatron-LM's layout (tp 8 inside a node, pp 16, 1F1B, micro-batch 1, full "
        "recomputation, 192 micro-batches per replica). Pipeline and data-parallel traffic is flow-level; "
        "tensor-parallel collectives are analytic. Folded, 1,024 and 8,192 GPUs are both 16 simulated devices, "
        "one per stage: the data-parallel ring's 2(n - 1) steps are a representative's messages. " +
        gpt3_targets(rows),
        "**The Llama 3.1 405B scenarios** (the Llama 3 paper's 16,384-GPU layout: tp 8, pp 16, dp 128, and "
        "dp 1,024 on 131,072 GPUs) keep data-parallel traffic at flow level: ZeRO-1 reduce-scatters of 100 MiB "
        "buckets over 128 or 1,024 replicas. " + targets(rows),
        "**`gpt3-13b-64-flow`** keeps every collective at flow level, tensor parallelism included. Its "
        "gradient all-reduces over 4 nodes run as double binary trees that meet pipeline sends, so only the "
        "tensor ranks fold (16 simulated devices), after a folded replay that found the trees meeting that "
        "traffic ([scale.md](scale.md): trees run apart), which that replay costs.",
        "**`llama3-405b-16k-zero0`**: plain data parallelism (ZeRO 0), whose small last gradient bucket of a "
        "stage (32 KiB) NCCL's tuner runs as a double binary tree over the 128 replicas, which no replica shift "
        "maps onto itself. The tree runs apart ([scale.md](scale.md): all its messages on links of their own, "
        "checked during the replay to meet no other traffic), so the replicas still fold; unfolded, the same "
        "point was 14,061,764 activities in 16 s.",
        "**`llama3-405b-16k-zero0-unfolded`** is the kind of point that sets the 1,000-layout sweep's time: "
        "the same ZeRO 0 layout with micro-batches of 8 and sequence parallelism, whose trees start while the "
        "stage's last pipeline send still crosses their NICs, so they cannot run apart, the replicas are "
        "simulated and every 100 MiB bucket's ring all-reduce is simulated message by message (2 x 127 steps "
        "for each of the 128 replicas). Its bare DAG is slower per activity than the point itself: it keeps "
        "an Exec or a send in flight on each of its 2,048 hosts, and SimGrid 3.32 pays for every completion "
        "in proportion to the activities in flight ([scale.md](scale.md#where-simgrid-itself-limits)); the "
        "point runs near the rate of the 16-host bare DAGs above, so what it costs can only come down with "
        "fewer activities, not with less bookkeeping.")
    return lines


def targets(rows):
    """The issue-18 targets of the frontier-scale scenarios, against their measured figures."""
    by_name = {r["scenario"]: r for r in rows}
    out = []
    for name, seconds_max, gib_max in (("llama3-405b-16k", 1, 1), ("llama3-405b-131k", 10, 2)):
        r = by_name.get(name)
        if not r:
            continue
        wall, rss = num(r["wall_time_s"]), num(r["max_rss_bytes"])
        met = wall <= seconds_max and rss <= gib_max * 2**30
        out.append(f"`{name}`: {seconds(wall)} and {megabytes(rss)} (target at most {seconds_max} s and "
                   f"{gib_max} GiB: {'met' if met else 'not met'})")
    return ("Against the targets of issue 18: " + "; ".join(out) + ".") if out else ""


def gpt3_targets(rows):
    """Issue 18's GPT-3 175B targets: 3x faster than 0.25 s (1,024 GPUs) and 6.6 s (8,192 GPUs)."""
    by_name = {r["scenario"]: r for r in rows}
    out = []
    for name, before in (("gpt3-175b-1024", 0.25), ("gpt3-175b-8192", 6.6)):
        r = by_name.get(name)
        if not r:
            continue
        wall = num(r["wall_time_s"])
        out.append(f"`{name}`: {seconds(wall)}, {before / wall:.1f}x faster than {before} s (target 3x: "
                   f"{'met' if before / wall >= 3 else 'not met'})")
    return ("Against issue 18's GPT-3 targets: " + "; ".join(out) + ".") if out else ""


def sweep_section(rows):
    lines = [
        "## Sweep throughput",
        "",
        "A whole `sweep` scenario through the runner `ddlsim run` uses (`experiments/SweepRunner.hpp`): one",
        "forked process per point, `-j` of them at once.",
        "",
        "| scenario | points (ok) | -j | wall time | points/s | vs -j 1 | peak memory (largest process) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    single = {r["scenario"]: num(r["points_per_s"]) for r in rows if r["jobs"] == "1"}
    for r in rows:
        rate = num(r["points_per_s"])
        base = single.get(r["scenario"])
        lines.append(
            f"| `{r['scenario']}` | {r['points']} ({r['points_ok']}) | {r['jobs']} | {seconds(num(r['wall_time_s']))}{spread(r)} "
            f"| {rate:,.1f} | {f'{rate / base:.2f}x' if base else '-'} | {megabytes(num(r['max_rss_bytes']))} |")
    lines += [""] + bullets(
        "**Wall time** is what `ddlsim run` takes: loading the file and checking every point, then every "
        "point's process start, model, plan, platform and replay, the row's trip home to the spool, and "
        "the CSV written.",
        "**-j 2 on 2 cores** can at best halve the wall time, and comes near that only on an otherwise idle "
        "machine: at -j 1 other work can take the second core, at -j 2 it takes a share of both point "
        "processes' cores (see **Load** above). The parent's forking and reading of rows takes a little too. "
        "A point of a few milliseconds costs about as much to start as to simulate, which is why the sweep's "
        "points are not smaller.",
        "**`llama3-405b-16k-sweep`**: 1,000 layouts of Llama 3.1 405B on 16,384 GPUs (tp, pp, context and "
        "context parallelism, ZeRO, sequence parallelism), flow-level data-parallel traffic, each point "
        "folded as far as its symmetry goes (the ZeRO 0 layouts' double binary trees run apart where they "
        "meet no other traffic, and keep the replicas apart where they do: [scale.md](scale.md#measured) says "
        "why and what it costs); shapes that cannot split the batch are `invalid` rows and those that do not fit `oom` rows, as in any "
        "planning sweep. " + sweep_target(rows))
    return lines + streaming_section(rows)


def streaming_section(rows):
    """Issue 30 item 7: the constant-work sweeps at 250 and 10,000 points, `run` and `validate`."""
    small = {r["jobs"]: r for r in rows if r["scenario"] == "sweep-constant-250"}
    large = {r["jobs"]: r for r in rows if r["scenario"] == "sweep-constant-10000"}
    if not small or not large:
        return []
    lines = [
        "",
        "### Long sweeps",
        "",
    ] + textwrap.wrap(
        "`sweep-constant-250` and `sweep-constant-10000` are the same sweep at 250 and 10,000 points whose "
        "points all cost the same (GPT-2 small on 8 H100s; the axes change only the memory reserve and the "
        "guard's activity limit). `ddlsim run` builds each point in the process that simulates it and spools "
        "the rows to a temporary file (`experiments/RowSpool.hpp`), so a point should cost the same at any "
        "length and the memory should not grow; `validate` checks one point at a time.",
        width=100, break_on_hyphens=False) + [
        "",
        "| scenario | points | -j | run | per point | peak memory | validate | per point | peak memory |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in [*small.values(), *large.values()]:
        n = int(r["points"])
        wall, check = num(r["wall_time_s"]), num(r["validate_wall_time_s"])
        lines.append(
            f"| `{r['scenario']}` | {n:,} | {r['jobs']} | {seconds(wall)}{spread(r)} | {wall / n * 1e3:.2f} ms "
            f"| {megabytes(num(r['max_rss_bytes']))} | {seconds(check)} | {check / n * 1e3:.2f} ms "
            f"| {megabytes(num(r['validate_max_rss_bytes']))} |")
    verdicts = []
    for jobs in sorted(set(small) & set(large)):
        s, l = small[jobs], large[jobs]
        scale = int(l["points"]) / int(s["points"])
        for what, wall, rss in (("run", "wall_time_s", "max_rss_bytes"),
                                ("validate", "validate_wall_time_s", "validate_max_rss_bytes")):
            ratio = num(l[wall]) / (scale * num(s[wall]))
            grown = num(l[rss]) - num(s[rss])
            met = ratio <= 1.2 and grown <= 50e6
            where = f"`run -j {jobs}`" if what == "run" else f"`validate` (beside -j {jobs})"
            verdicts.append(f"{where}: {ratio:.2f}x {scale:g} times the 250-point time, memory "
                            f"{'+' if grown >= 0 else '-'}{megabytes(abs(grown))} ({'met' if met else 'not met'})")
    lines += [""] + textwrap.wrap(
        "Against issue 30's targets (10,000 points within 1.2x of 40 times the 250-point time, memory at "
        "most 50 MB above it): " + "; ".join(verdicts) + ". Before the runner streamed (commit a5b423d, "
        "which held every point and every row in memory and forked from a parent that grew with them), "
        "`/usr/bin/time ddlsim run bench/sweep-constant-10000.yaml -j 2` took 559 s and 2.24 GB; 100,000 "
        "points now run and validate in the memory of 250 ([running.md](running.md), `run`).",
        width=100, break_on_hyphens=False)
    return lines


def sweep_target(rows):
    r = next((r for r in rows if r["scenario"] == "llama3-405b-16k-sweep" and r["jobs"] == "2"), None)
    if not r:
        return ("It is not in this run's CSV (when `make bench` cannot finish it, the figures come from a "
                "run without it); [scale.md](scale.md#measured) has its last measurement.")
    wall = num(r["wall_time_s"])
    return (f"At -j 2 it took {wall / 60:.1f} minutes (target: under 5 minutes: {'met' if wall < 300 else 'not met'}).")


def allocator_section(rows, glibc_rows, allocator, peers=()):
    """The same simulation scenarios with glibc's malloc (`make bench-allocator`) beside this build's:
    `peers`, this build's runs of them made right after each glibc run, where there are any (the
    machine's speed drifts between hours), else the scenario's row above."""
    ours = {r["scenario"]: r for r in rows}
    ours.update({r["scenario"]: r for r in peers})
    pairs = [(g, ours[g["scenario"]]) for g in glibc_rows if g["scenario"] in ours]
    if not pairs or allocator == "glibc malloc":
        return []
    lines = [
        "## The allocator",
        "",
    ] + textwrap.wrap(
        f"The `ddlsim` above allocates through {allocator} (`-DDDLSIM_TCMALLOC=ON`, the default when "
        "libgoogle-perftools-dev is installed). The same scenarios with glibc's malloc, built with "
        "`-DDDLSIM_TCMALLOC=OFF` and measured by `make bench-allocator` (medians of 3, into "
        "`results/bench-glibc.csv`), each beside this build's run of the same scenario made right after it "
        "(`results/bench-tcmalloc.csv`; the figures above are from another hour):", width=100, break_on_hyphens=False) + [
        "",
        f"| scenario | activities | glibc malloc | {allocator} | speed-up | peak memory, glibc / {allocator} | same simulated iteration |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for g, r in pairs:
        before, after = num(g["wall_time_s"]), num(r["wall_time_s"])
        same = g["simulated_iteration_s"] == r["simulated_iteration_s"]
        lines.append(
            f"| `{r['scenario']}` | {count(num(r['activities']))} | {seconds(before)}{spread(g)} | {seconds(after)}{spread(r)} "
            f"| {before / after:.2f}x | {megabytes(num(g['max_rss_bytes']))} / {megabytes(num(r['max_rss_bytes']))} "
            f"| {'yes' if same else 'no: ' + g['simulated_iteration_s'] + ' / ' + r['simulated_iteration_s']} |")
    lines += [""] + bullets(
        "**Why it matters:** SimGrid creates and frees a few objects for every message and timer (the "
        "activity, its action, the route, the callback), so a flow-level replay is an allocation-heavy "
        "workload; glibc's `malloc` and `free` took a quarter of the samples of `llama3-405b-16k-zero0` (`perf "
        "record` of the glibc build, when that point ran unfolded: 25.5%). The simulated numbers do not depend on the allocator (last "
        "column).",
        "**Sanitized and fuzz builds** keep the sanitizers' own allocator: `DDLSIM_TCMALLOC` is ignored "
        "under `-fsanitize`.")
    return lines


def import_section(rows, names):
    lines = [
        "## Trace import",
        "",
        "`traces::import_trace`, as `ddlsim calibrate import` runs it: read (and gunzip), parse the JSON,",
        "keep the kernels and collectives. The built-in scenarios import a synthetic trace; the others",
        "are trace files given to `ddlsim bench import`.",
        "",
        "| trace | gzip | on disk | JSON | kernels | collectives | wall time | MB/s (on disk) | MB/s (JSON) | peak memory |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        name = f"`{r['scenario']}`" if r["scenario"] in names else r["scenario"]
        lines.append(
            f"| {name} | {r['gzip']} | {megabytes(num(r['input_bytes']))} | {megabytes(num(r['json_bytes']))} "
            f"| {count(num(r['kernels']))} | {count(num(r['collectives']))} | {seconds(num(r['wall_time_s']))}{spread(r)} "
            f"| {num(r['import_MB_per_s']):,.1f} | {num(r['json_MB_per_s']):,.1f} | {megabytes(num(r['max_rss_bytes']))} |")
    lines += [""] + bullets(
        "**The synthetic trace** (`traces/SyntheticKineto.hpp`) has a real one's shape: rank 0 of an 8-GPU job "
        "on H100s, each kernel launch a `cpu_op` with its input shapes and the small ops nested in it, the "
        "`cudaLaunchKernel` runtime event, the `ac2g` flow pair and the `kernel` event with Kineto's arguments; "
        "one launch in 25 is an NCCL kernel with its collective's size, group and dtype, and its `nccl:` "
        "annotation. It is written from a fixed seed into a fresh temporary folder (`TMPDIR`), imported, and "
        "deleted: the project ships no third-party trace. Gzipped, it shrinks about as much as real traces do.",
        "**MB/s** is bytes over the import's wall time (MB = 10^6 bytes), of the file as it is on disk and of "
        "its JSON; for a gzipped file the second is the one to compare. The file is read from the page cache "
        "(it was just written, or read by the previous repeat): the figure is the importer's, not the disk's. "
        "The wall time is the import alone, timed inside the child that runs it; peak memory is that child's, "
        "mostly the trace file's pages (a plain file is mapped and read in place, a gzipped one decompressed "
        "whole) and simdjson's 4 MB window: events are read into flat "
        "records, no JSON tree per event (`traces/KinetoEvent.hpp`).",
        "**Real traces**, when `../shared/data/traces/kineto` (or `KINETO_DIR=...`) holds some: PyTorch profiler "
        "traces from HolisticTraceAnalysis' test data, imported the same way. `make bench` leaves them out "
        "when the folder is absent.")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", help="the bench CSV (results/bench.csv)")
    parser.add_argument("--build", default="build", help="the build folder the figures came from")
    parser.add_argument("--command", default="make bench", help="the command that regenerates the page")
    parser.add_argument("--previous", help="an earlier run's CSV, to say how far the figures moved")
    parser.add_argument("--loadavg", help="/proc/loadavg as it was when the run began")
    parser.add_argument("--glibc", help="`make bench-allocator`'s CSV: scenarios built with glibc's malloc")
    parser.add_argument("--glibc-peer", help="`make bench-allocator`'s CSV of this build, run beside the glibc one")
    parser.add_argument("-o", "--output", default="docs/performance.md")
    args = parser.parse_args()

    with open(args.csv) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"{args.csv}: no rows")
    by_kind = {}
    for r in rows:
        by_kind.setdefault(r.get("kind") or "simulation", []).append(r)
    m = machine(args.build)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    repeats = sorted({r["repeat"] for r in rows}, key=int)
    names = descriptions(args.build)

    lines = [
        "# Performance",
        "",
    ] + textwrap.wrap(
        "How fast ddlsim simulates one training iteration (against SimGrid itself), runs a whole sweep, and "
        "imports profiler traces. Regenerate the figures and this page with `make bench-allocator` then "
        f"`{args.command}`: every scenario of `ddlsim bench --list` (sweeps at -j 1 and -j 2), medians of 3 runs, "
        "except the 1,000- and 10,000-point sweeps (once, at -j 2) and `llama3-405b-16k-zero0-unfolded` (once), into "
        "`results/bench.csv`, from which `bench/performance_md.py` writes this page; about half an hour, most "
        "of it those two. One scenario: `ddlsim bench NAME --repeat 3`.", width=100, break_on_hyphens=False) + [
        "",
        f"**Machine.** {m['cpu']}, {m['cores']} cores, {m['memory']}, {m['os']}.  ",
        f"**Build.** {m['compiler']}, SimGrid {m['simgrid']}, `{m['build_type']}` build, {m['allocator']}; {m['ddlsim']}.  ",
    ] + load_line(args.loadavg) + [
        f"**Date.** {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}, commit {commit(root)}. "
        f"Medians of {' or '.join(repeats)} run{'s' if repeats != ['1'] else ''} each.",
        "",
    ]
    sections = [("simulation", simulation_section), ("sweep", sweep_section)]
    for kind, section in sections:
        if kind in by_kind:
            lines += section(by_kind[kind]) + [""]
    glibc = []
    if args.glibc and os.path.exists(args.glibc):
        with open(args.glibc) as f:
            glibc = [r for r in csv.DictReader(f) if (r.get("kind") or "simulation") == "simulation"]
    peers = []
    if args.glibc_peer and os.path.exists(args.glibc_peer):
        with open(args.glibc_peer) as f:
            peers = [r for r in csv.DictReader(f) if (r.get("kind") or "simulation") == "simulation"]
    section = allocator_section(by_kind.get("simulation", []), glibc, m["allocator"], peers)
    if section:
        lines += section + [""]
    if "import" in by_kind:
        lines += import_section(by_kind["import"], names) + [""]
    lines += reproducibility(rows, args.previous)
    text = "\n".join(lines).rstrip() + "\n"
    os.makedirs(os.path.dirname(args.output) or ".", exist_ok=True)
    tmp = args.output + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, args.output)
    print(f"wrote {args.output} from {args.csv} ({len(rows)} rows)")


if __name__ == "__main__":
    main()
