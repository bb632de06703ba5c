#!/usr/bin/env python3
"""Generate the CFFI cdef of EntMTP from the public header.

    python3 bindings/python/gen_cdef.py            # rewrite src/entmtp/_cdef.h
    python3 bindings/python/gen_cdef.py --check    # exit 1 if it is stale

include/entmtp.h is the single source of truth. The header is run through the
C preprocessor (`cc -E -P -D__attribute__(x)=`, so ENTMTP_API expands to
nothing) with its standard #includes removed, parsed with pycparser (which
CFFI depends on) and printed back as plain declarations that CFFI's cdef
understands:

  * object-like ENTMTP_* macros whose value is an integer constant expression
    become `#define NAME <integer>` (evaluated here; in API mode CFFI checks
    each value against the real header when the extension is compiled);
  * enums, structs (with every field, so CFFI verifies the layout), opaque
    handle typedefs, callback typedefs and function prototypes, in header
    order, with array sizes folded to integers;
  * the EXPERIMENTAL section is included (ENTMTP_EXPERIMENTAL_API is defined:
    the bindings expose it, marked experimental); the header-inline defaults
    (static inline function definitions) are left out: they are no symbols,
    the bindings call the exported entmtp_*_init functions.

The printer is our own (not pycparser's CGenerator), so the output does not
depend on the pycparser version installed.
"""
import argparse
import ast
import difflib
import os
import re
import shlex
import subprocess
import sys

from pycparser import c_ast, c_parser

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DEFAULT_HEADER = os.path.join(ROOT, "include", "entmtp.h")
DEFAULT_OUTPUT = os.path.join(HERE, "src", "entmtp", "_cdef.h")

# Types CFFI knows natively; pycparser only needs to know they are type names.
STD_TYPES = [
    "size_t", "ssize_t", "ptrdiff_t", "intptr_t", "uintptr_t",
    "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t",
]
STD_INCLUDE = re.compile(r"^\s*#\s*include\s*<[^>]*>.*$", re.M)


def _cc():
    return shlex.split(os.environ.get("CC", "cc"))


def preprocess(text, extra=""):
    """Run the preprocessor over the header text (system includes removed)."""
    src = STD_INCLUDE.sub("", text) + "\n" + extra
    cmd = _cc() + ["-E", "-P", "-D__attribute__(x)=", "-DENTMTP_EXPERIMENTAL_API", "-x", "c", "-"]
    res = subprocess.run(cmd, input=src, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit("gen_cdef: %s failed:\n%s" % (" ".join(cmd), res.stderr))
    return res.stdout


# ------------------------------------------------------------- constants

_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Add, ast.Sub, ast.Mult,
            ast.FloorDiv, ast.Mod, ast.LShift, ast.RShift, ast.BitOr, ast.BitAnd, ast.BitXor,
            ast.USub, ast.UAdd, ast.Invert)


def eval_int(expr):
    """Value of a C integer constant expression made of literals and + - * / % << >> | & ^ ~,
    or None when it is anything else."""
    expr = expr.strip()
    if not expr:
        return None
    # C integer literals: drop u/l suffixes, octal 017 -> 0o17; C '/' on ints -> '//'
    expr = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]+\b", r"\1", expr)
    expr = re.sub(r"\b0([0-7]+)\b", r"0o\1", expr)
    expr = expr.replace("/", "//")
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            return None
        if isinstance(node, ast.Constant) and not isinstance(node.value, int):
            return None
    return eval(compile(tree, "<macro>", "eval"), {"__builtins__": {}})  # checked above


def integer_macros(text):
    """[(name, value)] for the header's object-like ENTMTP_* integer macros, in header order."""
    names = []
    for m in re.finditer(r"^\s*#\s*define\s+(ENTMTP_\w+)(?!\()", text, re.M):
        if m.group(1) not in names:
            names.append(m.group(1))
    if not names:
        return []
    probe = "".join("@@%d@@ %s\n" % (i, n) for i, n in enumerate(names))
    out = preprocess(text, probe)
    values = {}
    for line in out.splitlines():
        m = re.match(r"\s*@@(\d+)@@(.*)$", line)
        if m:
            values[names[int(m.group(1))]] = m.group(2)
    result = []
    for n in names:
        expansion = values.get(n, n)
        if expansion.strip() == n:  # not defined in this configuration
            continue
        v = eval_int(expansion)
        if v is not None:
            result.append((n, v))
    return result


# ----------------------------------------------------------- declarations

class Printer:
    """Prints the subset of C declarations a library header uses."""

    def __init__(self):
        self.enum_values = {}

    # constant expressions (array sizes, enum values) are folded to integers
    def fold(self, node):
        if isinstance(node, c_ast.Constant):
            v = eval_int(node.value)
            if v is None:
                raise ValueError("not an integer constant: %s" % node.value)
            return v
        if isinstance(node, c_ast.ID):
            if node.name in self.enum_values:
                return self.enum_values[node.name]
            raise ValueError("unknown identifier in a constant expression: %s" % node.name)
        if isinstance(node, c_ast.UnaryOp):
            v = self.fold(node.expr)
            ops = {"-": lambda x: -x, "+": lambda x: x, "~": lambda x: ~x}
            if node.op in ops:
                return ops[node.op](v)
        if isinstance(node, c_ast.BinaryOp):
            a, b = self.fold(node.left), self.fold(node.right)
            ops = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
                   "/": lambda: int(a / b), "%": lambda: a - b * int(a / b), "<<": lambda: a << b,
                   ">>": lambda: a >> b, "|": lambda: a | b, "&": lambda: a & b, "^": lambda: a ^ b}
            if node.op in ops:
                return ops[node.op]()
        raise ValueError("unsupported constant expression: %r" % node)

    def base_type(self, t, indent, define):
        if isinstance(t, c_ast.IdentifierType):
            return " ".join(t.names)
        if isinstance(t, c_ast.Struct) or isinstance(t, c_ast.Union):
            kw = "struct" if isinstance(t, c_ast.Struct) else "union"
            head = "%s %s" % (kw, t.name) if t.name else kw
            if t.decls is None or not define:
                return head
            inner = indent + "    "
            fields = "".join("%s%s;\n" % (inner, self.decl(d.type, d.name, inner, True)) for d in t.decls)
            return "%s {\n%s%s}" % (head, fields, indent)
        if isinstance(t, c_ast.Enum):
            head = "enum %s" % t.name if t.name else "enum"
            if t.values is None or not define:
                return head
            items = []
            nxt = 0
            for e in t.values.enumerators:
                v = self.fold(e.value) if e.value is not None else nxt
                self.enum_values[e.name] = v
                nxt = v + 1
                items.append("%s    %s = %d" % (indent, e.name, v))
            return "%s {\n%s\n%s}" % (head, ",\n".join(items), indent)
        raise ValueError("unsupported type node %s" % type(t).__name__)

    def params(self, args):
        if args is None or not args.params:
            return "void"
        out = []
        for p in args.params:
            if isinstance(p, c_ast.EllipsisParam):
                out.append("...")
            else:
                out.append(self.decl(p.type, p.name if isinstance(p, c_ast.Decl) else None, "", False))
        return ", ".join(out)

    def decl(self, t, name, indent="", define=False):
        """Declaration of `name` (may be None) with type node `t`."""
        inner = name or ""
        while True:
            if isinstance(t, c_ast.TypeDecl):
                quals = " ".join(t.quals) + " " if t.quals else ""
                base = quals + self.base_type(t.type, indent, define)
                return (base + " " + inner).rstrip() if inner else base
            if isinstance(t, c_ast.Typename):
                t = t.type
                continue
            if isinstance(t, c_ast.PtrDecl):
                quals = " " + " ".join(t.quals) + (" " if inner else "") if t.quals else ""
                inner = "*" + quals + inner
                if isinstance(t.type, (c_ast.FuncDecl, c_ast.ArrayDecl)):
                    inner = "(" + inner + ")"
                t = t.type
                continue
            if isinstance(t, c_ast.ArrayDecl):
                dim = "" if t.dim is None else str(self.fold(t.dim))
                inner = inner + "[" + dim + "]"
                t = t.type
                continue
            if isinstance(t, c_ast.FuncDecl):
                inner = inner + "(" + self.params(t.args) + ")"
                t = t.type
                continue
            raise ValueError("unsupported declarator node %s" % type(t).__name__)

    def external(self, node):
        if isinstance(node, c_ast.Typedef):
            return "typedef " + self.decl(node.type, node.name, "", True) + ";"
        if isinstance(node, c_ast.Decl):
            storage = [s for s in node.storage if s != "extern"]
            prefix = " ".join(storage) + " " if storage else ""
            if node.name is None:  # a bare struct/enum definition
                return prefix + self.base_type(node.type, "", True) + ";"
            return prefix + self.decl(node.type, node.name, "", True) + ";"
        raise ValueError("unsupported top-level node %s" % type(node).__name__)


def generate(header):
    with open(header, encoding="utf-8") as f:
        text = f.read()
    fake = "".join("typedef int %s;\n" % t for t in STD_TYPES)
    code = fake + preprocess(text)
    ast_root = c_parser.CParser().parse(code, filename=os.path.basename(header))
    printer = Printer()
    rel = os.path.relpath(header, ROOT) if header.startswith(ROOT) else os.path.basename(header)
    lines = [
        "/* GENERATED by bindings/python/gen_cdef.py from %s: do not edit." % rel.replace(os.sep, "/"),
        " * Regenerate with `python3 bindings/python/gen_cdef.py`; CI runs it with --check. */",
        "",
    ]
    for name, value in integer_macros(text):
        lines.append("#define %s %d" % (name, value))
    lines.append("")
    for node in ast_root.ext:
        if isinstance(node, c_ast.Typedef) and node.name in STD_TYPES:
            continue
        if isinstance(node, c_ast.FuncDef):  # header-inline helper: no symbol to bind
            continue
        out = printer.external(node)
        if "\n" in out and lines[-1] != "":
            lines.append("")
        lines.append(out)
        if "\n" in out:
            lines.append("")
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--header", default=DEFAULT_HEADER)
    ap.add_argument("--output", default=DEFAULT_OUTPUT)
    ap.add_argument("--check", action="store_true",
                    help="do not write; exit 1 when OUTPUT differs from a fresh generation")
    args = ap.parse_args(argv)
    fresh = generate(args.header)
    if args.check:
        try:
            with open(args.output, encoding="utf-8") as f:
                old = f.read()
        except OSError as e:
            print("gen_cdef --check: cannot read %s: %s" % (args.output, e), file=sys.stderr)
            return 1
        if old != fresh:
            sys.stderr.writelines(difflib.unified_diff(
                old.splitlines(True), fresh.splitlines(True), args.output, "fresh generation"))
            print("gen_cdef --check: %s is stale; run python3 bindings/python/gen_cdef.py"
                  % args.output, file=sys.stderr)
            return 1
        print("gen_cdef --check: %s is up to date" % os.path.relpath(args.output))
        return 0
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(fresh)
    print("gen_cdef: wrote %s" % os.path.relpath(args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
