"""Shared helpers of the plot scripts: read a ddlsim CSV (refusing files that are not one) and set up
matplotlib without a display. Any python3 with matplotlib runs them (Debian's: python3-matplotlib);
one without it gets a message saying so."""
import csv
import sys


def load_rows(path, required):
    """The CSV's rows; exits with a message naming the file when columns in `required` are missing."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        sys.exit(f"{path}: {e.strerror}")
    missing = set(required) - set(rows[0].keys() if rows else required)
    if not rows or missing:
        sys.exit(f"{path}: not a ddlsim results CSV (missing columns: {', '.join(sorted(missing)) or 'all rows'})")
    return rows


def pyplot():
    try:
        import matplotlib
    except ImportError:
        sys.exit(f"matplotlib is not installed for this python3 ({sys.executable}): apt-get install python3-matplotlib "
                 "(Debian's /usr/bin/python3 sees it) or pip install matplotlib")

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    return plt


def save(fig, output, source):
    """Writes the figure to `output`, or next to `source` with .png; prints the path."""
    import os

    out = output or os.path.splitext(source)[0] + ".png"
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(out)


def write_text(text, output):
    """Writes a generated page to `output`, or to standard output when it is None or empty."""
    if output:
        with open(output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
