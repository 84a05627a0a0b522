"""Kernel costs end to end (docs/kernels.md): `ddlsim profile gemm` and its acceptance figures, calibration
from a trace recorded with shapes (tests/fixtures/kineto_shapes.json: tables filled, a poor fit refused
unless --accept-poor-fit, unusable records named), the partitioner on GPUs of different speeds, the
compute slowdown under overlapping communication, and GroupNorm's own cost."""
import os
import sys

from common import FIXTURES, ROOT, check, finish, read_csv, run, workdir

binary = sys.argv[1]
checks = 0
d = workdir()


def profile_gemm(*args):
    rc, out, err = run(binary, "profile", "gemm", *args)
    values = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2:
            values[parts[0]] = parts[1]
    return rc, values, out, err


# Acceptance (issue 17): h100-sxm BF16, 8192^3 at 0.6-0.85 of the dense peak, 1024 x 768 x 768 below 0.45.
rc, big, out, err = profile_gemm("h100-sxm", "8192", "8192", "8192")
checks += 1
check(rc == 0 and 0.6 <= float(big.get("efficiency", 0)) <= 0.85 and big.get("bound") == "compute"
      and "tile " in out and "waves" not in out or "wave(s) on 132 SMs" in out, f"8192^3: {out} {err}")
eff = float(big.get("efficiency", 0))
checks += 1
check(abs(float(big.get("flop_per_s", 0)) / 989.4e12 - eff) < 1e-3
      and abs(2 * 8192 ** 3 / (float(big.get("time_us", 1)) * 1e-6) / float(big.get("flop_per_s", 1)) - 1) < 1e-4,
      f"flop_per_s = flop / time and efficiency = flop_per_s / peak: {big}")
rc, small, out, err = profile_gemm("h100-sxm", "1024", "768", "768")
checks += 1
check(rc == 0 and float(small.get("efficiency", 1)) < 0.45, f"1024 x 768 x 768: {out} {err}")
rc, gemv, out, err = profile_gemm("h100-sxm", "1", "4096", "4096", "--dtype", "fp16")
checks += 1
check(rc == 0 and gemv.get("bound") == "memory" and "gemm fp16" in out, f"a matrix-vector product is memory-bound: {out}")
rc, flat, out, err = profile_gemm("host-cpu", "512", "512", "512", "--dtype", "fp32")
checks += 1
check(rc == 0 and "flat roofline" in out and abs(float(flat.get("efficiency", 0)) - 0.5) < 1e-3,
      f"a profile without gemm_tiles keeps its flat efficiency (host-cpu: 0.5): {out}")
rc, out, err = run(binary, "profile", "attention", "h100-sxm", "16", "16384", "128")
checks += 1
check(rc == 0 and "efficiency 0.6" in out, f"FlashAttention-3's 621 TFLOPS at 16k, head dim 128: {out} {err}")
for args, code in ((["gemm", "h100-sxm", "8192", "8192"], 2), (["gemm", "h100-sxm", "0", "1", "1"], 2),
                   (["gemm", "h100-sxm", "1", "1", "1", "--dtype", "fp64"], 2), (["fft", "h100-sxm"], 2),
                   (["gemm", "no-such-gpu", "1", "1", "1"], 1), (["gemm", "a100-sxm", "64", "64", "64", "--dtype", "fp8"], 1)):
    rc, out, err = run(binary, "profile", *args)
    checks += 1
    check(rc == code and err.strip(), f"profile {' '.join(args)}: exit {rc}, expected {code}: {err}")

# A trace recorded with shapes: import, then fit. The fixture's times are made up, so the GEMM model's
# fit is poor: refused, nothing written, the unusable records named; accepted with --accept-poor-fit.
records = os.path.join(d, "shapes.jsonl")
rc, _, err = run(binary, "calibrate", "import", os.path.join(FIXTURES, "kineto_shapes.json"), "-o", records)
checks += 1
check(rc == 0 and "16 kernels" in err, f"import a trace with shapes: {err}")
fitted = os.path.join(d, "shapes.yaml")
rc, _, err = run(binary, "calibrate", "fit", records, "--base", "h100-sxm", "-o", fitted)
checks += 1
check(rc == 1 and "R^2" in err and "--accept-poor-fit" in err and "7 of 16 kernel records carry no work" in err
      and "no Input Dims: record with record_shapes=True" in err and not os.path.exists(fitted),
      f"a poor fit is refused and says which records were unusable: {rc} {err}")
rc, _, err = run(binary, "calibrate", "fit", records, "--base", "h100-sxm", "-o", fitted, "--accept-poor-fit")
rc2, report, _ = run(binary, "calibrate", "report", fitted)
checks += 1
check(rc == 0 and rc2 == 0 and "accepted poor fits" in err and any(l.split()[:2] == ["conv2d", "bf16"] for l in report.splitlines())
      and "fit of 4 GEMM records with shapes" in report, f"--accept-poor-fit writes the conv2d table: {err} {report}")

# GPUs of different speeds: h100-a100-mixed puts stage 0 on H100s (one at 0.8) and stage 1 on A100s
# (0.315). The optimal partition gives the faster stage more blocks and beats the uniform split.
exp = os.path.join(d, "mixed.yaml")
with open(exp, "w") as f:
    f.write("name: mixed\nmodel: gpt2-small\ncluster: h100-a100-mixed\ncalibration: h100-sxm\n"
            "training: {global_batch: 64, micro_batch: 4}\nparallelism: {schedule: 1f1b, pp: 2, dp: 8}\n"
            "sweep: {parallelism.partition: [optimal, uniform]}\n")
csv_path = os.path.join(d, "mixed.csv")
rc, _, err = run(binary, "run", exp, "--quiet", "-o", csv_path)
rows = read_csv(csv_path) if rc == 0 else []
checks += 1
if len(rows) == 2:
    first, second = (int(x) for x in rows[0]["stage_blocks"].split("/"))
    check(first >= 2 * second and float(rows[0]["iteration_time_s"]) < float(rows[1]["iteration_time_s"]),
          f"the H100 stage gets more blocks: {rows[0]['stage_blocks']} vs uniform {rows[1]['stage_blocks']}, "
          f"{rows[0]['iteration_time_s']} s vs {rows[1]['iteration_time_s']} s")
else:
    check(False, f"mixed cluster run: {err}")

# The compute slowdown under overlapping communication: the same point with the profile's 18.9% and
# with none. Gradient buckets overlap a backward that takes longer than their all-reduces (micro-batch
# 8), so the slowdown lengthens the iteration.
no_slowdown = os.path.join(d, "no-slowdown.yaml")
with open(os.path.join(ROOT, "calibration", "profiles", "h100-sxm.yaml")) as src, open(no_slowdown, "w") as dst:
    dst.write("".join(line for line in src if "comm_compute_slowdown" not in line))
times = []
for profile in ("h100-sxm", no_slowdown):
    path = os.path.join(d, "overlap.csv")
    rc, _, err = run(binary, "run", os.path.join(FIXTURES, "zoo_smoke.yaml"), "--quiet", "-o", path, "--set",
                     "calibration=" + profile, "--set", "parallelism.dp_bucket=25MiB", "--set", "parallelism.pp=1",
                     "--set", "training.micro_batch=8", "--set", "training.global_batch=128")
    times.append(read_csv(path)[0] if rc == 0 else {})
checks += 1
check(all(times) and float(times[0]["iteration_time_s"]) > float(times[1]["iteration_time_s"])
      and times[0]["comm_bytes_per_gpu"] == times[1]["comm_bytes_per_gpu"],
      f"overlapped communication slows compute: {[t.get('iteration_time_s') for t in times]}")

# GroupNorm launches two kernels per pass where BatchNorm launches one: ResNet-50 costs more with it.
norms = []
for norm in ("batch_norm", "group_norm"):
    path = os.path.join(d, norm + ".csv")
    rc, _, err = run(binary, "run", os.path.join(FIXTURES, "zoo_smoke.yaml"), "--quiet", "-o", path,
                     "--set", "model={name: r50, resnet: {depth: 50, normalization: " + norm + "}}")
    norms.append(float(read_csv(path)[0]["compute_time_s"]) if rc == 0 else 0)
checks += 1
check(0 < norms[0] < norms[1], f"ResNet-50 compute: batch norm {norms[0]} s < group norm {norms[1]} s")

finish("cli_kernels", checks)
