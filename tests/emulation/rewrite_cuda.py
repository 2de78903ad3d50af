#!/usr/bin/env python3
"""rewrite_cuda.py — CUDA C source to plain C++ for the CPU emulation (tests/emulation/README.md).

    rewrite_cuda.py IN.cu OUT.cpp

Two constructs of CUDA C are not C++; everything else is left to the shim headers
(tests/emulation/cuda_runtime.h):
- a launch `name<<<grid, block[, shared[, stream]]>>>(args);` becomes
  `cuda_emulation_launch(grid, block, shared, stream, [&]() { name(args); });`
- `extern __shared__ T name[];` (dynamic shared memory) becomes
  `T *const name = (T *)cuda_emulation_dynamic_shared();`
Line breaks are kept, so compiler messages name the lines of IN.cu (a #line directive says so).
"""
import re
import sys


def split_top_level(text):
    """Splits text at the commas outside parentheses, brackets and braces."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def matching_paren(text, open_index):
    """The index of the parenthesis closing the one at open_index."""
    depth = 0
    for i in range(open_index, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError("unbalanced parentheses after a launch")


def rewrite_launches(source):
    out, position = [], 0
    pattern = re.compile(r"([A-Za-z_][A-Za-z_0-9]*)\s*<<<")
    while True:
        match = pattern.search(source, position)
        if match is None:
            out.append(source[position:])
            return "".join(out)
        config_start = match.end()
        config_end = source.index(">>>", config_start)
        config = split_top_level(source[config_start:config_end])
        if not 2 <= len(config) <= 4:
            raise ValueError("a launch configuration of %d values" % len(config))
        while len(config) < 4:
            config.append(" 0")
        open_index = source.index("(", config_end)
        if source[config_end + 3:open_index].strip():
            raise ValueError("text between >>> and the arguments")
        close_index = matching_paren(source, open_index)
        name = match.group(1)
        arguments = source[open_index + 1:close_index]
        out.append(source[position:match.start()])
        out.append("cuda_emulation_launch((%s), (%s), (size_t)(%s), (cudaStream_t)(%s), "
                   "[&]() { %s(%s); })" % (config[0], config[1], config[2], config[3], name, arguments))
        out.append("\n" * source[config_end:open_index].count("\n"))  # the lines kept
        position = close_index + 1


def rewrite_dynamic_shared(source):
    return re.sub(r"extern\s+__shared__\s+([A-Za-z_][A-Za-z_0-9 ]*?)\s+([A-Za-z_][A-Za-z_0-9]*)\s*\[\s*\]\s*;",
                  r"\1 *const \2 = (\1 *)cuda_emulation_dynamic_shared();", source)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: rewrite_cuda.py IN.cu OUT.cpp")
    with open(sys.argv[1], encoding="utf-8") as f:
        source = f.read()
    text = rewrite_launches(rewrite_dynamic_shared(source))
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        f.write('#line 1 "%s"\n' % sys.argv[1])
        f.write(text)


if __name__ == "__main__":
    main()
