"""Build step: turns a Python source file into a C header holding it as a string constant
(NAME). The template compiles it at its start (Py_CompileString): bytecode is the running
interpreter's business, and the guest module serves every CPython version."""
import sys

src, out, name = sys.argv[1], sys.argv[2], sys.argv[3]
with open(src, "rb") as f:
    data = f.read()
with open(out, "w") as f:
    f.write(f"static const char {name}[] = {{{','.join(str(b) for b in data)},0}};\n")
