"""framework pytorch-compile from the command line (docs/frameworks.md#pytorch-compile): the shipped
H200 cross-check compiled, with and without CUDA graphs, against its eager simulation; the page's table
being what these runs print (and its torchtitan table, FSDP's mixed precision); the `cuda_graphs` column; the refusals (CUDA graphs without
pytorch-compile, a profile without torch.compile's host costs). Needs no ../shared: the experiment's
profile is shipped."""
import os
import re
import sys

from common import ROOT, check, finish, read_csv, run, workdir

binary = sys.argv[1]
checks = 0
d = workdir()
experiment = os.path.join(ROOT, "experiments", "crosscheck_pytorch_h200.yaml")
page = open(os.path.join(ROOT, "docs", "frameworks.md")).read()


def simulate(name, *sets):
    out = os.path.join(d, name + ".csv")
    args = [a for s in sets for a in ("--set", s)]
    rc, _, err = run(binary, "run", experiment, "-o", out, "--quiet", *args)
    return rc, err, read_csv(out) if os.path.exists(out) else []


rc, err, eager = simulate("eager", "training.framework=pytorch")
rc2, err2, compiled = simulate("compiled", "training.framework=pytorch-compile")
rc3, err3, graphs = simulate("graphs", "training.framework=pytorch-compile", "training.cuda_graphs=true")
checks += 1
check(rc == rc2 == rc3 == 0 and len(eager) == len(compiled) == len(graphs) == 12 and
      all(r["status"] == "ok" for r in eager + compiled + graphs),
      f"eager, compiled and CUDA graphs: 12 points each, all ok: {err} {err2} {err3}")
if len(eager) == len(compiled) == len(graphs) == 12:
    for e, c, g in zip(eager, compiled, graphs):
        point = f"{e['model']} mb {e['micro_batch']}"
        te, tc, tg = (float(r["iteration_time_s"]) for r in (e, c, g))
        checks += 4
        check(e.get("cuda_graphs", "") == "" and c["cuda_graphs"] == "false" and g["cuda_graphs"] == "true",
              f"{point}: cuda_graphs empty for eager, false, true: {e.get('cuda_graphs')} {c['cuda_graphs']} "
              f"{g['cuda_graphs']}")
        check(c["framework"] == "pytorch-compile" and tc < te, f"{point}: the fused chains are faster: {tc} < {te}")
        # The replays cost the host less than the launches: never slower, and busier GPUs.
        check(tg <= tc * (1 + 1e-9) and float(g["gpu_busy_fraction"]) >= float(c["gpu_busy_fraction"]) - 1e-9,
              f"{point}: CUDA graphs never slower, the GPU never idler: {tg} {tc} "
              f"{g['gpu_busy_fraction']} {c['gpu_busy_fraction']}")
        check(0 < float(c["host_busy_fraction"]) <= 1 and 0 < float(c["gpu_busy_fraction"]) <= 1,
              f"{point}: host and GPU busy fractions in (0, 1]: {c['host_busy_fraction']} {c['gpu_busy_fraction']}")
    small = [c for c in compiled if c["model"] == "resnet50" and c["micro_batch"] == "1"][0]
    checks += 1
    check(float(small["gpu_busy_fraction"]) < 0.6,
          f"ResNet-50 at micro-batch 1 compiled is still host-bound (its launches): {small['gpu_busy_fraction']}")

    # docs/frameworks.md's table is what these runs give.
    section = page[page.index("## pytorch-compile"):page.index("## Where predictions stand")]
    rows = re.findall(r"^\| (gpt2-small|resnet50) \| (\d+) \| ([\d.]+) s \| ([\d.]+) s .*?\| ([\d.]+) s", section, re.M)
    checks += 1
    check(len(rows) == 12, f"the page's table has 12 rows: {rows}")
    for (model, mb, te, tc, tg), e, c, g in zip(rows, eager, compiled, graphs):
        checks += 1
        got = tuple(f"{float(r['iteration_time_s']):.3f}" for r in (e, c, g))
        check((model, mb) == (e["model"], e["micro_batch"]) and (te, tc, tg) == got,
              f"docs/frameworks.md, {model} mb {mb}: the page says {te} {tc} {tg}, the runs give {got}")

rc, _, err = run(binary, "run", experiment, "-o", os.path.join(d, "bad.csv"), "--set", "training.framework=pytorch",
                 "--set", "training.cuda_graphs=true")
checks += 1
check(rc == 1 and "training.cuda_graphs" in err and "pytorch-compile" in err and not os.path.exists(os.path.join(d, "bad.csv")),
      f"CUDA graphs without pytorch-compile: exit 1, the key named, nothing written: {rc} {err}")
# Swept against other frameworks, CUDA graphs make those points invalid, the sweep goes on.
rc, err, swept = simulate("swept", "sweep.training.framework=[pytorch, pytorch-compile]", "training.cuda_graphs=true",
                          "sweep.training.micro_batch=[8]")
checks += 1
check(rc == 0 and [(r["framework"], r["status"]) for r in swept] == [("pytorch", "invalid"), ("pytorch-compile", "ok")] * 2
      and all("cuda_graphs" in r["message"] for r in swept if r["status"] == "invalid"),
      f"a sweep over frameworks with CUDA graphs: the pytorch points invalid, saying why: "
      f"{rc} {err} {[(r.get('framework'), r.get('status'), r.get('message')) for r in swept]}")
rc, _, bare = simulate("bare", "training.framework=pytorch-compile", "calibration=h200-measured")
checks += 1
check(bare and all(r["status"] == "error" and "host_compiled_graph_s" in r["message"] for r in bare),
      f"a profile without torch.compile's host costs: each point an error naming the parameter: "
      f"{[r.get('message') for r in bare[:1]]}")
# The page's torchtitan table (FSDP's mixed precision, docs/frameworks.md) is what its experiment prints.
out = os.path.join(d, "torchtitan.csv")
rc, _, err = run(binary, "run", os.path.join(ROOT, "experiments", "torchtitan_published.yaml"), "-o", out, "--quiet")
rows = read_csv(out) if rc == 0 else []
table = re.findall(r"^\| (\d+) \| ([\w-]+) \| [\d,]+ \| ([\d,]+) \| [\d.]+ \| [\d.]+ GiB \| ([\d.]+) GiB \|$",
                   page, re.M)
checks += 1
check(rc == 0 and len(table) == 4 and table ==
      [(r["gpus"], r["framework"], f"{float(r['tokens_per_s_per_gpu']):,.0f}",
        f"{int(r['peak_memory_bytes']) / 2**30:.1f}") for r in rows],
      f"docs/frameworks.md's torchtitan table is what experiments/torchtitan_published.yaml prints: {table} "
      f"{[(r.get('gpus'), r.get('tokens_per_s_per_gpu'), r.get('peak_memory_bytes')) for r in rows]} {err}")
# FSDP's mixed precision on the wire: Llama 3.1 8B's 8,030,261,248 parameters (Hugging Face's count)
# gathered twice in bf16 and reduce-scattered in fp32 per step, each sending (n - 1)/n of them.
P = 8_030_261_248
for r in rows:
    n = int(r["gpus"])
    checks += 1
    check(abs(float(r["comm_bytes_per_gpu"]) - P * (2 + 2 + 4) * (n - 1) / n) < 1e-6 * P,
          f"torchtitan's Llama 3.1 8B on {n} GPUs sends P x (2 + 2 + 4) x (n - 1)/n bytes per GPU: "
          f"{r['comm_bytes_per_gpu']}")
finish("cli_compile", checks)
