#!/usr/bin/env python3
"""Reads llama.cpp's tests/test-grammar-llguidance.cpp (from llama-cpp-python 0.3.36's sdist,
the llama.cpp of the goldens) and writes its cases as JSON: for each test_grammar and
test_schema call, the description, the Lark grammar (a schema becomes `%llguidance {}` and
`start: %json SCHEMA`, as the C++ test does), and the strings it must accept and reject.

    python3 scripts/llguidance_cases.py test-grammar-llguidance.cpp out.json

tests/grammar_oracle.rs runs them through our grammar engine."""

import json
import re
import sys

ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'"}


def tokens(text, at):
    """C++ tokens from `at`: strings (raw and escaped, as ('str', value)), punctuation."""
    i = at
    while i < len(text):
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            i = text.index("\n", i)
        elif text.startswith("/*", i):
            i = text.index("*/", i) + 2
        elif text.startswith('R"', i):
            open_paren = text.index("(", i)
            delimiter = text[i + 2 : open_paren]
            end = text.index(")" + delimiter + '"', open_paren)
            yield ("str", text[open_paren + 1 : end])
            i = end + len(delimiter) + 2
        elif c == '"':
            value, i = [], i + 1
            while text[i] != '"':
                if text[i] == "\\":
                    nxt = text[i + 1]
                    if nxt == "x":
                        digits = re.match(r"[0-9a-fA-F]+", text[i + 2 :]).group(0)
                        value.append(chr(int(digits, 16)))
                        i += 2 + len(digits)
                        continue
                    value.append(ESCAPES[nxt])
                    i += 2
                else:
                    value.append(text[i])
                    i += 1
            yield ("str", "".join(value))
            i += 1
        else:
            yield ("punct", c)
            i += 1


def list_arguments(text, at):
    """The arguments of the call whose '(' is at `at`: strings (adjacent literals joined) or
    lists of them."""
    args, parts, items, in_list = [], [], None, False
    for kind, value in tokens(text, at + 1):
        if kind == "str":
            parts.append(value)
        elif value == "{":
            in_list, items, parts = True, [], []
        elif value == "}":
            if parts:
                items.append("".join(parts))
            args.append(items)
            in_list, parts = False, []
        elif value == ",":
            if in_list:
                if parts:
                    items.append("".join(parts))
                parts = []
            else:
                if parts:
                    args.append("".join(parts))
                parts = []
        elif value == ")":
            if parts:
                args.append("".join(parts))
            return args
    raise ValueError("unterminated call")


def main(source, target):
    text = open(source, encoding="utf-8").read()
    cases = []
    for match in re.finditer(r"(?<![\w:])(test_schema|test_grammar)\s*\(", text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        if text[line_start : match.start()].strip().startswith(("static", "//")):
            continue
        args = list_arguments(text, match.end() - 1)
        description, body, passing, failing = args
        grammar = body if match.group(1) == "test_grammar" else "%llguidance {}\nstart: %json " + body
        line = text.count("\n", 0, match.start()) + 1
        cases.append(
            {"line": line, "description": description, "grammar": grammar, "accept": passing, "reject": failing}
        )
    with open(target, "w", encoding="utf-8") as out:
        json.dump(cases, out, indent=1, ensure_ascii=False)
    print(f"llguidance_cases: {len(cases)} cases from {source}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
