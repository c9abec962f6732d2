#!/usr/bin/python3
"""embed.py NAME IN OUT: a C header that holds the text of IN as
`static const char NAME[]` (the fork server's source, forksrv.c)."""
import sys

name, src, out = sys.argv[1:4]
data = open(src, "rb").read()
lines = ["/* Generated from %s by embed.py: do not edit. */" % src.rsplit("/", 1)[-1],
         "static const char %s[] = {" % name]
for i in range(0, len(data), 16):
    lines.append("\t" + ", ".join("0x%02x" % b for b in data[i:i + 16]) + ",")
lines += ["\t0x00", "};", ""]
with open(out, "w") as f:
    f.write("\n".join(lines))
