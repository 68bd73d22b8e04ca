"""Build step: turns a Python source file into a C header holding it as a string constant."""
import sys

src, out, name = sys.argv[1], sys.argv[2], sys.argv[3]
with open(src, "rb") as f:
    data = f.read()
body = ",".join(str(b) for b in data)
with open(out, "w") as f:
    f.write(f"static const char {name}[] = {{{body},0}};\n")
