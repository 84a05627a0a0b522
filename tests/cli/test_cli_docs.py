"""The manual's examples, run so that they cannot rot (README.md and docs/*.md).

- README.md stays a front page: at most 300 lines, and it links every page of docs/.
- Every relative link and image resolves to a file, and every #anchor to a heading of that page
  (GitHub's slugs). Pages that other branches are adding (LANDING) may be linked before they exist.
- Every shipped model, cluster, profile, experiment and plot script is named in the manual.
- Every fenced `yaml` block is checked as the file it shows: an experiment (model + cluster) with
  `ddlsim validate`, a model (a generator key, or layers) with `ddlsim model`, a cluster (nodes +
  gpus_per_node) and a profile (parameters) inside a small experiment that uses them; a block of
  experiment keys alone (a sweep, a where) is validated on top of a small base experiment.
- Every line of a fenced `sh` block that starts with `ddlsim` runs, in order, one scratch folder per
  page holding copies of experiments/, bench/ and tests/fixtures/, and must exit 0. A line whose
  comment starts with `slow:` or `GPU:` is not run (a `slow:` comment on its own line is refused); the shipped
  files it names must exist. A block
  (untyped or `text`) that follows an `sh` block after prose beginning "prints" is what its last
  `ddlsim` line printed: every line of it ("..." aside) must be a line of that output now, so that
  the figures a page quotes cannot drift from the command (issue 31, item 8). A `make TARGET` line must name a target of the Makefile. Blocks in other
  languages (`text` synopses, `bash` scripts) are not run.
"""
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

from common import ROOT, check, finish

binary = os.path.abspath(sys.argv[1])
checks = 0

# docs/ pages that other branches add; a link to one of them may precede it. Once a page exists,
# its links and anchors are checked like any other.
LANDING = {"scale.md"}

readme = os.path.join(ROOT, "README.md")
pages = [readme] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
text = {p: open(p, encoding="utf-8").read() for p in pages}


def rel(path):
    return os.path.relpath(path, ROOT)


def strip_code(md):
    """The page without its fenced blocks (links and headings inside code are not links)."""
    return re.sub(r"(?ms)^\s*```.*?^\s*```", "", md)


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(md):
    seen = {}
    out = set()
    for m in re.finditer(r"(?m)^#{1,6}\s+(.*?)\s*#*\s*$", strip_code(md)):
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def blocks(md):
    """(language, first line number, lines) of each fenced block; fences may be indented."""
    out = []
    lines = md.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)```(\S*)\s*$", lines[i])
        if m:
            indent, lang, start = len(m.group(1)), m.group(2), i + 1
            body = []
            i += 1
            while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
                body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
                i += 1
            out.append((lang, start, body))
        i += 1
    return out


# --- the front page --------------------------------------------------------------------------
n_lines = text[readme].count("\n")
checks += 1
check(n_lines <= 300, f"README.md has {n_lines} lines, at most 300")

# --- links and anchors -----------------------------------------------------------------------
linked_from_readme = set()
for page in pages:
    body = strip_code(text[page])
    for m in re.finditer(r"!?\[[^\]]*\]\(([^)\s]+)\)", body):
        target = m.group(1)
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        if page == readme and path.startswith("docs/"):
            linked_from_readme.add(os.path.basename(dest))
        checks += 1
        if not os.path.exists(dest):
            check(os.path.dirname(dest) == os.path.join(ROOT, "docs") and os.path.basename(dest) in LANDING,
                  f"{rel(page)}: link to {target}: no such file")
            continue
        if anchor:
            check(dest.endswith(".md") and anchor in anchors(open(dest, encoding="utf-8").read()),
                  f"{rel(page)}: link to {target}: no heading with that anchor in {rel(dest)}")
for page in pages[1:]:
    checks += 1
    check(os.path.basename(page) in linked_from_readme, f"README.md does not link {rel(page)}")

# --- the README's package list is the Makefile's -----------------------------------------------
debs = re.search(r"(?ms)^DEBS := (.*?)(?<!\\)\n", open(os.path.join(ROOT, "Makefile")).read()).group(1).replace("\\", " ").split()
readme_words = set(re.findall(r"[\w.+-]+", text[readme]))
for deb in debs:
    checks += 1
    check(deb in readme_words, f"README.md does not list the Debian package {deb} that make installs")
checks += 1
check(len(debs) >= 10, f"the Makefile's DEBS: {debs}")

# --- every shipped file is named -------------------------------------------------------------
manual = "\n".join(text.values())


def stems(pattern):
    return sorted(os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(ROOT, pattern)))


for kind, names, fmt in (("model", stems("models/zoo/*.yaml"), "`{}`"),
                         ("cluster", stems("sim/clusters/*.yaml"), "`{}`"),
                         ("profile", stems("calibration/profiles/*.yaml"), "`{}`"),
                         ("experiment", stems("experiments/*.yaml"), "{}.yaml"),
                         ("plot script", stems("plots/plot_*.py"), "{}.py")):
    for name in names:
        checks += 1
        check(fmt.format(name) in manual, f"the manual never names the shipped {kind} {fmt.format(name)}")

# --- YAML blocks -----------------------------------------------------------------------------
GENERATORS = {"gpt", "llama", "bert", "resnet", "vgg", "alexnet", "amoebanet", "mlp"}
EXPERIMENT_KEYS = {"name", "model", "cluster", "calibration", "training", "parallelism", "sweep", "where", "output",
                   "limits"}
BASE = {"name": "name: docs", "model": "model: gpt2-medium", "cluster": "cluster: dgx-h100x2",
        "calibration": "calibration: h100-sxm", "training": "training: {global_batch: 64, micro_batch: 1}",
        "parallelism": "parallelism: {schedule: gpipe, pp: 1, dp: auto}"}


def top_keys(lines):
    return {m.group(1) for line in lines for m in [re.match(r"^([A-Za-z_][\w.]*):", line)] if m}


yaml_dir = tempfile.mkdtemp(prefix="ddlsim_docs_yaml_")
for page in pages:
    for n, (lang, line, body) in enumerate(blocks(text[page])):
        if lang != "yaml":
            continue
        where = f"{rel(page)}:{line}"
        keys = top_keys(body)
        src = "\n".join(body) + "\n"
        f = os.path.join(yaml_dir, f"{os.path.basename(page)}-{n}.yaml")
        if "model" in keys and "cluster" in keys:
            kind, argv = "experiment", ["validate", f]
        elif keys & GENERATORS or "layers" in keys:
            kind, argv = "model", ["model", f]
        elif {"nodes", "gpus_per_node"} <= keys:
            kind = "cluster"
            gpus = int(re.search(r"(?m)^nodes:\s*(\d+)", src).group(1)) * \
                int(re.search(r"(?m)^gpus_per_node:\s*(\d+)", src).group(1))
            exp = os.path.join(yaml_dir, f"uses-{n}.yaml")
            with open(exp, "w") as e:
                e.write(f"name: docs\nmodel: mlp-toy\ncluster: {f}\ncalibration: h100-sxm\n"
                        f"training: {{global_batch: {gpus}, micro_batch: 1}}\nparallelism: {{dp: auto}}\n")
            argv = ["validate", exp]
        elif "parameters" in keys:
            kind = "profile"
            exp = os.path.join(yaml_dir, f"uses-{n}.yaml")
            with open(exp, "w") as e:
                e.write(f"name: docs\nmodel: mlp-toy\ncluster: dgx-h100\ncalibration: {f}\n"
                        "training: {global_batch: 8, micro_batch: 1}\nparallelism: {dp: auto}\n")
            argv = ["validate", exp]
        elif keys and keys <= EXPERIMENT_KEYS:
            kind, argv = "experiment keys", ["validate", f]
            src = "\n".join(v for k, v in BASE.items() if k not in keys) + "\n" + src
        else:
            checks += 1
            check(False, f"{where}: a yaml block that is no experiment, model, cluster or profile file (keys {sorted(keys)})")
            continue
        with open(f, "w") as out:
            out.write(src)
        p = subprocess.run([binary, *argv], capture_output=True, text=True, timeout=120)
        checks += 1
        check(p.returncode == 0, f"{where}: the {kind} block: ddlsim {argv[0]} exits {p.returncode}: {p.stderr.strip()}")
shutil.rmtree(yaml_dir)

# --- sh blocks: run every ddlsim line --------------------------------------------------------
def shown_output(md, page_blocks, index):
    """The lines a page shows as sh block `index`'s output: the next block, untyped or `text`, when
    the prose between them begins with "prints" ("..." lines stand for left-out rows); else None."""
    if index + 1 >= len(page_blocks):
        return None
    lang, start, body = page_blocks[index + 1]
    sh_start, sh_body = page_blocks[index][1], page_blocks[index][2]
    between = "\n".join(md.split("\n")[sh_start + len(sh_body) + 1:start - 1]).strip()
    if lang not in ("", "text") or not between.startswith("prints"):
        return None
    return [b for b in body if b.strip() and b.strip() != "..."]


makefile = open(os.path.join(ROOT, "Makefile")).read()
# Under `make sanitize` the instrumented binary is 10-20 times slower: the blocks whose output the page
# shows (searches of a minute or more there) are checked by the plain build's run, which computes the
# same numbers; their files must still exist.
sanitized = os.environ.get("DDLSIM_SANITIZED") == "1"
ran = 0
figures = 0  # output blocks compared with what their command prints now
for page in pages:
    work = None
    page_blocks = blocks(text[page])
    for index, (lang, line, body) in enumerate(page_blocks):
        if lang != "sh":
            continue
        printed = None  # stdout of the block's last ddlsim line that ran
        shown_here = shown_output(text[page], page_blocks, index)
        for k, raw in enumerate(body):
            where = f"{rel(page)}:{line + k + 1}"
            command, _, comment = raw.partition(" #")
            command, comment = command.strip(), comment.strip()
            if re.match(r"\s*#\s*slow:", raw):
                checks += 1
                check(False, f"{where}: a `slow:` comment marks the command on its own line, not the next one")
            if command.startswith("make "):
                target = command.split()[1]
                checks += 1
                check(re.search(rf"(?m)^{re.escape(target)}:", makefile), f"{where}: no make target '{target}'")
                continue
            if not command.startswith("ddlsim "):
                continue
            if work is None:
                work = tempfile.mkdtemp(prefix="ddlsim_docs_")
                for d in ("experiments", "bench", os.path.join("tests", "fixtures"), os.path.join("calibration", "measurements")):
                    shutil.copytree(os.path.join(ROOT, d), os.path.join(work, d))
            args = shlex.split(command)[1:]
            if comment.startswith(("slow:", "GPU:")) or (sanitized and shown_here is not None):
                # Not run here; the shipped files it names must be there.
                for a in args:
                    if a.startswith(("experiments/", "bench/", "tests/")):
                        checks += 1
                        check(os.path.exists(os.path.join(work, a)), f"{where}: {a} does not exist")
                continue
            p = subprocess.run(f"{shlex.quote(binary)} {command[len('ddlsim '):]}", shell=True, cwd=work,
                               capture_output=True, text=True, timeout=300)
            ran += 1
            checks += 1
            check(p.returncode == 0, f"{where}: `{command}` exits {p.returncode}: {p.stderr.strip()[-400:]}")
            printed = (command, p.stdout)
        shown = shown_output(text[page], page_blocks, index)
        if shown is not None and printed is not None:
            missing = [s for s in shown if " ".join(s.split()) not in {" ".join(o.split()) for o in printed[1].splitlines()}]
            checks += 1
            check(not missing, f"{rel(page)}:{line}: the page shows what `{printed[0]}` printed, but it prints "
                               f"otherwise now: {missing[:3]}")
            figures += 1
    if work:
        shutil.rmtree(work)
checks += 1
check(ran >= 20, f"only {ran} ddlsim lines ran")
checks += 1
check(figures >= 1 or sanitized, f"only {figures} output blocks compared")
print(f"ran {ran} ddlsim lines of the manual; {figures} output blocks match what their commands print")

finish("cli_docs", checks)
