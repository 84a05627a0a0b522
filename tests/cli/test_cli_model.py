"""ddlsim model: the layer table and totals of shipped and user models."""
import os
import re
import sys

from common import FIXTURES, check, finish, run

binary = sys.argv[1]
checks = 0

rc, out, err = run(binary, "model", "gpt2-small")
checks += 1
check(rc == 0, f"model gpt2-small exits 0: {err}")
m = re.search(r"total parameters\s+(\d+)", out)
checks += 1
check(m is not None and int(m.group(1)) == 124439808, "GPT-2 small has 124,439,808 parameters (Hugging Face)")
table = [line for line in out.splitlines() if re.match(r"^\d+\s", line)]
checks += 1
check(len(table) == 15, f"embedding + 12 blocks + norm + head: {len(table)} rows")
# Per-sample forward flop of a block: 24 s h^2 (1 + s/6h) with s = 1024, h = 768.
s, h = 1024, 768
block = table[1].split()
checks += 1
check(abs(float(block[5]) / (24 * s * h * h * (1 + s / (6 * h))) - 1) < 1e-3, f"block flop: {block}")
# bf16: 2 bytes per parameter; --dtype fp32 doubles it.
checks += 1
check(int(block[4]) == 2 * int(block[3]), "bf16 parameter bytes")
rc, out32, _ = run(binary, "model", "gpt2-small", "--dtype", "fp32")
checks += 1
check(rc == 0 and int(out32.splitlines()[3].split()[4]) == 4 * int(out32.splitlines()[3].split()[3]), "fp32 bytes")

rc, out, err = run(binary, "model", "nope")
checks += 1
check(rc == 1 and "unknown model 'nope'" in err and "gpt2-xl" in err, f"unknown model: {err}")
rc, out, err = run(binary, "model", os.path.join(FIXTURES, "bad_model.yaml"))
checks += 1
check(rc == 1 and "bad_model.yaml:5: layers[1].widht: unknown key" in err, f"bad model file: {err}")
rc, out, err = run(binary, "model", "gpt2-small", "--dtype", "fp13")
checks += 1
check(rc == 2, "bad --dtype is a usage error")

finish("cli_model", checks)
