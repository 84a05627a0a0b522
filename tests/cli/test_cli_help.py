"""The command line itself (CLI11): generated help for every command with every option the manual
names, unknown commands and options refused with exit 2 and the closest valid name, the option
spellings that worked before (-j2, --jobs=2, --set=K=V, repeated --set), and SimGrid's --cfg=/--log=
reaching SimGrid."""
import os
import re
import sys

from common import ROOT, check, finish, read_csv, run, workdir

binary = sys.argv[1]
checks = 0
tmp = workdir()
demo = os.path.join(ROOT, "experiments", "demo.yaml")

# Every command and the options it takes (the contract of docs/running.md and ARCHITECTURE.md).
COMMANDS = {
    "run": ["-o", "--output", "-j", "--jobs", "--set", "--columns", "--trace-dir", "--quiet", "--plot", "--resume",
            "--shard", "--point-timeout", "--mpi", "--cfg", "--log"],
    "validate": ["--allow-oom", "--set"],
    "merge": ["-o", "--output", "--columns"],
    "search microbatch": ["-o", "--output", "-j", "--jobs", "--max-batch", "--set", "--columns"],
    "search grid": ["-o", "--output", "-j", "--jobs", "--no-pipeline", "--set", "--columns"],
    "search parallel": ["-o", "--output", "-j", "--jobs", "--top", "--zero", "--set", "--columns"],
    "model": ["--layers", "--dtype", "--list"],
    "bench": ["--list", "--repeat", "-o", "--output", "--no-compare", "-j", "--jobs", "--trace-size"],
    "execute": ["--backend", "-o", "--output", "--iterations", "--warmup", "--scale", "-j", "--jobs", "--set",
                "--columns", "--map-devices", "--launcher", "--quiet"],
    "calibrate collect": ["--quick", "--only", "--gpus", "--timing", "--plan", "-o"],
    "calibrate import": ["-o", "--output"],
    "calibrate fit": ["--base", "-o", "--output", "--name"],
    "calibrate report": [],
}

rc, out, err = run(binary, "--help")
checks += 1
check(rc == 0 and "Usage: ddlsim" in out and "exit codes: 0 ok, 1 bad input" in out, f"--help: {rc} {err}")
for command in {c.split()[0] for c in COMMANDS} | {"help"}:
    checks += 1
    check(re.search(rf"(?m)^  {command} ", out), f"--help lists {command}")
# `ddlsim help` alone is `ddlsim --help` (as before the port), not the help command's own help.
rc2, out2, err2 = run(binary, "help")
checks += 1
check(rc2 == 0 and out2 == out, f"`ddlsim help` prints `ddlsim --help`: {rc2} {out2[:200]} {err2}")

for command, options in COMMANDS.items():
    words = command.split()
    rc, out, err = run(binary, *words, "--help")
    checks += 1
    check(rc == 0 and f"Usage: ddlsim {command} " in out, f"{command} --help: {rc} {out[:200]} {err}")
    for option in options:
        checks += 1
        check(re.search(rf"(^|[\s,]){re.escape(option)}([\s,=]|$)", out), f"{command} --help names {option}")
    rc2, out2, _ = run(binary, "help", *words)
    checks += 1
    check(rc2 == 0 and out2 == out, f"`ddlsim help {command}` prints `{command} --help`")

# Unknown options: exit 2, the command named, the closest option suggested, nothing written.
out_csv = os.path.join(tmp, "never.csv")
for command, words in (("run", ["run", demo]), ("validate", ["validate", demo]), ("merge", ["merge", out_csv]),
                       ("search grid", ["search", "grid", demo]), ("model", ["model", "gpt2-small"]),
                       ("bench", ["bench", "sweep-gpipe"]), ("execute", ["execute", demo, "--backend", "host"]),
                       ("calibrate import", ["calibrate", "import", demo]),
                       ("calibrate fit", ["calibrate", "fit", "x.jsonl", "--base", "h100-sxm"]),
                       ("calibrate report", ["calibrate", "report", "h100-sxm"])):
    with_output = ["-o", out_csv] if "-o" in COMMANDS.get(command, []) else []
    rc, out, err = run(binary, *words, "--no-such-option", *with_output)
    checks += 1
    check(rc == 2 and f"unknown option for {command}: --no-such-option" in err and f"see 'ddlsim {command} --help'" in err
          and not os.path.exists(out_csv), f"{command} --no-such-option: {rc} {err}")
for words, needle in ((["run", demo, "--trace-dri", "x"], "unknown option for run: --trace-dri (did you mean '--trace-dir'?)"),
                      (["run", demo, "--colums", "all"], "(did you mean '--columns'?)"),
                      (["validate", demo, "--alow-oom"], "(did you mean '--allow-oom'?)"),
                      (["rnu", demo], "unknown command 'rnu' (did you mean 'run'?)"),
                      (["search", "gird", demo], "unknown command 'search gird' (did you mean 'grid'?)"),
                      (["calibrate", "fti"], "unknown command 'calibrate fti' (did you mean 'fit'?)"),
                      (["search"], "search needs a subcommand: microbatch, grid, parallel"),
                      ([], "missing command"),
                      (["validate", demo, demo], "unexpected argument"),
                      (["run"], "EXPERIMENT.yaml is required"),
                      (["execute", demo], "--backend is required"),
                      (["execute", demo, "--backend", "tpu"], "--backend"),
                      (["run", demo, "-j", "0"], "--jobs expects an integer in [1, 1024], not '0'"),
                      (["help", "nope"], "no command 'nope'")):
    rc, out, err = run(binary, *words)
    checks += 1
    check(rc == 2 and needle in err, f"{words}: exit 2 and {needle!r}: {rc} {err}")

# The spellings that worked before the port still do.
a, b = os.path.join(tmp, "a.csv"), os.path.join(tmp, "b.csv")
rc, _, err = run(binary, "run", demo, "-j2", f"-o{a}", "--quiet", "--set=training.global_batch=128",
                 "--set", "sweep.parallelism.pp=[2,4]", "--set", "sweep.training.micro_batch=[2]")
checks += 1
check(rc == 0 and len(read_csv(a)) == 2, f"-j2, -oFILE, --set=K=V and repeated --set: {rc} {err}")
rc, _, err = run(binary, "run", demo, "--jobs=2", "--output", b, "--quiet", "--set", "training.global_batch=128",
                 "--set=sweep.parallelism.pp=[2,4]", "--set=sweep.training.micro_batch=[2]")
checks += 1
check(rc == 0 and open(a).read().split("\n")[1:] != [] and
      [r["throughput_samples_per_s"] for r in read_csv(a)] == [r["throughput_samples_per_s"] for r in read_csv(b)],
      f"--jobs=2, --output FILE: the same rows: {rc} {err}")

# SimGrid's --cfg= reaches SimGrid: the LV08 network model (latency x 13.01, bandwidth x 0.97)
# slows a communicating point; --log= is accepted; a setting SimGrid does not know fails the point.
one = ["--set", "sweep.parallelism.pp=[2]", "--set", "sweep.training.micro_batch=[1]", "--quiet"]
cm02, lv08 = os.path.join(tmp, "cm02.csv"), os.path.join(tmp, "lv08.csv")
rc1, _, err1 = run(binary, "run", demo, "-o", cm02, *one, "--log=root.thres:critical")
rc2, _, err2 = run(binary, "run", demo, "-o", lv08, *one, "--cfg=network/model:LV08", "--cfg", "network/crosstraffic:0")
checks += 1
t1 = float(read_csv(cm02)[0]["iteration_time_s"]) if rc1 == 0 else 0
t2 = float(read_csv(lv08)[0]["iteration_time_s"]) if rc2 == 0 else 0
check(rc1 == 0 and rc2 == 0 and t2 > t1 > 0, f"--cfg=network/model:LV08 changes the simulation: {t1} -> {t2} {err1} {err2}")
bad = os.path.join(tmp, "badcfg.csv")
rc, _, err = run(binary, "run", demo, "-o", bad, *one, "--cfg=no/such:setting")
rows = read_csv(bad) if os.path.exists(bad) else []
checks += 1
check(rows and rows[0]["status"] == "error", f"an unknown SimGrid setting fails the point: {rc} {rows and rows[0]} {err}")

# --version and exit codes.
rc, out, _ = run(binary, "--version")
checks += 1
check(rc == 0 and re.match(r"ddlsim \S+ \(git \w+, SimGrid 3\.\d+", out), f"--version: {out}")

finish("cli_help", checks)
