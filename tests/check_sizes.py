#!/usr/bin/env python3
"""Function and file sizes in sim/, experiments/ and cli/ (issue 30, "Done when" and item 5).

Fails when a function there is over 200 lines (over 150 in cli/, whose commands have one file a
family) or a source file over 900 lines, unless the EXCEPTIONS table below names it with its
reason; also fails on an exception that no longer applies, so that the table stays the list of
what is left to split. CTest runs it as
"unit: source sizes"; by hand: python3 tests/check_sizes.py [REPOSITORY_ROOT].

How a function is found (a brace-matching scan, not a C++ parser):
  - comments, string and character literals (raw strings included) and preprocessor lines are
    blanked first, keeping line breaks;
  - the scan walks braces at namespace scope and inside class, struct and union bodies; there the
    text since the last `;`, `{` or `}` is the candidate's head;
  - a `{` whose head has a parenthesised parameter list after a name, and no `=` outside
    parentheses, opens a function body: the function runs from the head's first line (a template
    line included) to the line of the matching `}`, both counted; a constructor's brace
    initialisers (`: member_{value}`) are skipped on the way to its body;
  - namespace, extern, class, struct and union bodies are scanned inside; any other brace (an enum,
    a brace-initialised variable, a lambda assigned at namespace scope) is skipped whole;
  - lambdas and local classes inside a function count towards that function.
A file's size is its number of lines, as `wc -l` counts them.
"""
import pathlib
import re
import sys

SELF = "tests/check_sizes.py"
FOLDERS = ("sim", "experiments", "cli")
MAX_FUNCTION_LINES = {"sim": 200, "experiments": 200, "cli": 150}
MAX_FILE_LINES = 900

# "FOLDER/FILE" for a file, "FOLDER/FILE:FUNCTION" for a function (the name as it is written in
# the definition, qualified where it is defined out of its class): the reason it may be larger.
EXCEPTIONS = {}


def blank(text):
    """The text with comments, literals and preprocessor lines turned into spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":  # a directive, with its continuation lines
            j = i
            while j < n and text[j] != "\n":
                if text[j] == "\\" and j + 1 < n and text[j + 1] == "\n":
                    j += 2
                    continue
                if text.startswith("/*", j):  # a block comment that starts on the directive line
                    end = text.find("*/", j + 2)
                    j = n if end < 0 else end + 2
                    continue
                j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        raw = re.match(r'(?:u8|[uUL])?R"([^ ()\\\t\n]{0,16})\(', text[i:i + 24])
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = text.find(")" + raw.group(1) + '"', i + raw.end())
            j = n if end < 0 else end + len(raw.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        if c in "\"'":
            # A digit separator (1'000) is not a character literal.
            if c == "'" and re.search(r"(?<![\w.])(?:0[xXbB])?[\da-fA-F']*[\da-fA-F]$", text[max(0, i - 40):i]) and \
                    re.search(r"(?<![\w.])\d", text[max(0, i - 40):i]):
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(" " * (j - i))
            i = j
            continue
        if c == "\n":
            line_start = True
        out.append(c)
        i += 1
    return "".join(out)


def matching(text, at, pair="{}"):
    """The index of the bracket that closes the one at `at` (len(text) when there is none)."""
    depth = 0
    for j in range(at, len(text)):
        if text[j] == pair[0]:
            depth += 1
        elif text[j] == pair[1]:
            depth -= 1
            if depth == 0:
                return j
    return len(text)


LABEL = re.compile(r"^\s*(?:(?:public|private|protected)\s*:(?!:)\s*)+")
ATTRIBUTE = re.compile(r"\[\[.*?\]\]", re.S)
NAME = re.compile(r"((?:[A-Za-z_]\w*\s*(?:<[^<>()]*>)?\s*::\s*)*~?(?:operator\s*(?:\(\s*\)|[^\s\w(]+|\s\w[\w\s:<>*&]*)|[A-Za-z_]\w*))\s*$")


def function_name(head):
    """(name, index of its parameter list's `(`) when head is a function's, else None."""
    angle = 0
    for j, c in enumerate(head):
        if c == "<":
            angle += 1
        elif c == ">" and angle > 0:
            angle -= 1
        elif c == "(" and angle == 0:
            if re.search(r"operator\s*$", head[:j]) and head[j:j + 2] == "()":
                continue  # operator(), whose parameter list follows
            m = NAME.search(head[:j])
            if not m or re.fullmatch(r"(?:decltype|alignas|noexcept|requires|sizeof)", m.group(1)):
                return None
            return re.sub(r"\s+", "", m.group(1)), j
    return None


def outside_parens(text):
    """text with everything inside parentheses removed."""
    out, depth = [], 0
    for c in text:
        if c == "(":
            depth += 1
        elif c == ")":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(c)
    return "".join(out)


def functions(code):
    """[(name, first line, last line)] of every function body the scan finds (lines from 1)."""
    found = []
    line_of = [0] * (len(code) + 1)
    line = 1
    for j, c in enumerate(code):
        line_of[j] = line
        if c == "\n":
            line += 1
    line_of[len(code)] = line

    head_start, i = 0, 0
    while i < len(code):
        c = code[i]
        if c in ";}":
            head_start = i + 1  # `}` closes a container scope: the scan goes on in the enclosing one
            i += 1
            continue
        if c != "{":
            i += 1
            continue
        head = code[head_start:i]
        label = LABEL.match(head)
        offset = head_start + (label.end() if label else 0)
        text = ATTRIBUTE.sub(lambda m: " " * len(m.group(0)), code[offset:i])
        words = re.sub(r"^\s*template\s*<.*?>\s*", "", " ".join(text.split()))
        if re.match(r"(?:inline\s+)?(?:namespace|extern)\b", words) or re.match(r"(?:class|struct|union)\b", words):
            head_start = i + 1  # scanned inside
            i += 1
            continue
        named = function_name(text) if "=" not in re.sub(r"operator\s*[^\s\w(]+", "", outside_parens(text)) else None
        if named and not re.match(r"enum\b", words):
            name, paren = named
            after = text[matching(text, paren, "()") + 1:]
            if re.match(r"\s*:(?!:)", after) and re.search(r"[\w>]\s*$", text):
                i = matching(code, i) + 1  # a member's brace initialiser in a constructor's list
                continue
            end = matching(code, i)
            first = offset + len(text) - len(text.lstrip())
            found.append((name, line_of[first], line_of[min(end, len(code))]))
            head_start = i = end + 1
            continue
        i = head_start = matching(code, i) + 1  # an enum, a brace-initialised variable, ...
    return found


def measure(root):
    """(files over the limit, functions over the limit): [(key, lines)], keys as in EXCEPTIONS."""
    big_files, big_functions = [], []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in (".cpp", ".hpp") or not path.is_file():
                continue
            relative = path.relative_to(root).as_posix()
            text = path.read_text(encoding="utf-8", errors="replace")
            lines = text.count("\n")
            if lines > MAX_FILE_LINES:
                big_files.append((relative, lines))
            for name, first, last in functions(blank(text)):
                if last - first + 1 > MAX_FUNCTION_LINES[folder]:
                    big_functions.append((f"{relative}:{name}", last - first + 1))
    return big_files, big_functions


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    big_files, big_functions = measure(root)
    failures = []
    limits = ", ".join(f"{n} in {folder}/" for folder, n in MAX_FUNCTION_LINES.items())
    print(f"files over {MAX_FILE_LINES} lines, and functions over {limits}:")
    for key, lines in big_files + big_functions:
        reason = EXCEPTIONS.get(key)
        print(f"  {key}: {lines} lines" + (f" (excepted: {reason})" if reason else " NOT EXCEPTED"))
        if not reason:
            failures.append(f"{key} has {lines} lines: split it, or add it to EXCEPTIONS in {SELF} with a reason")
    over = {key for key, _ in big_files + big_functions}
    for key in sorted(set(EXCEPTIONS) - over):
        failures.append(f"{key} is within its limit now (or gone): remove it from EXCEPTIONS in {SELF}")
    sys.stdout.flush()
    for f in failures:
        print(f"error: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
