"""Build step: turns a Python source file into a C header holding it as a string constant
(NAME), and its code object compiled by this interpreter and marshalled (NAME_code), with the
bytecode magic it is valid for (NAME_magic): the helper loads that instead of compiling the
source at each start when its libpython has the same magic."""
import importlib.util
import marshal
import sys

src, out, name, filename = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
with open(src, "rb") as f:
    data = f.read()
code = marshal.dumps(compile(data, filename, "exec", dont_inherit=True, optimize=0))
magic = int.from_bytes(importlib.util.MAGIC_NUMBER, "little")


def array(blob):
    return ",".join(str(b) for b in blob)


with open(out, "w") as f:
    f.write(f"static const char {name}[] = {{{array(data)},0}};\n")
    f.write(f"static const char {name}_code[] = {{{array(code)}}};\n")
    f.write(f"static const long {name}_magic = {magic}L;\n")
