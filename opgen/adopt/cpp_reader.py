"""Read `TORCH_LIBRARY` registration blocks and kernel definitions out of C++ files.

Note [Reading registrations]
`opgen import` reads C++ with a tokenizer (cpp_tokens.py), never a compiler:
it looks for the registration macros (TORCH_LIBRARY, TORCH_LIBRARY_FRAGMENT,
their STABLE_ and _IMPL forms and vLLM's _EXPAND ones), takes the macro's last
argument as the library variable, whatever its name (`m`, `ops`), and reads
that variable's `.def(...)` and `.impl(...)` calls inside the block. A schema
must be string literals (adjacent ones are joined, raw strings and escapes are
decoded): anything else is reported with its file:line and the op is skipped.
A kernel is the function an impl names (through `&`, TORCH_FN, TORCH_BOX or
torch::dispatch); its device comes from the block's dispatch key or from the
impl's own `torch::kCPU`-style argument. Functions defined at namespace scope
are recorded with their declaration text, so that generated code can declare
the user's kernels with the exact signature they were written with. What the
reader does not understand it skips, so unusual code cannot make it fail.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..errors import Diagnostic
from .cpp_tokens import Token, TokenizeError, tokenize
from .found import CppFunction, Found, FoundOp, Kernel

__all__ = ["read_cpp", "KEY_DEVICES"]

_DEF_MACROS = {
    "TORCH_LIBRARY",
    "TORCH_LIBRARY_FRAGMENT",
    "STABLE_TORCH_LIBRARY",
    "STABLE_TORCH_LIBRARY_FRAGMENT",
    "TORCH_LIBRARY_EXPAND",
}
_IMPL_MACROS = {"TORCH_LIBRARY_IMPL", "STABLE_TORCH_LIBRARY_IMPL", "TORCH_LIBRARY_IMPL_EXPAND"}
# dispatch key or device spelling -> the devices opgen gives the op ("" : no device of its own)
KEY_DEVICES: dict[str, tuple[str, ...]] = {
    "CPU": ("cpu",),
    "kCPU": ("cpu",),
    "CUDA": ("cuda",),
    "kCUDA": ("cuda",),
    "CompositeExplicitAutograd": ("cpu", "cuda"),
    "CompositeImplicitAutograd": ("cpu", "cuda"),
}
_WRAPPERS = {
    "TORCH_FN",
    "TORCH_BOX",
    "TORCH_FN_TYPE",
    "dispatch",
    "torch",
    "c10",
    "at",
    "DispatchKey",
}
_DECL_STOPS = {";", "{", "}"}


def _matching(tokens: list[Token], i: int) -> int:
    """The index of the bracket closing the one at `i`."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack = [pairs[tokens[i].text]]
    for j in range(i + 1, len(tokens)):
        text = tokens[j].text if tokens[j].kind == "punct" else ""
        if text in pairs:
            stack.append(pairs[text])
        elif stack and text == stack[-1]:
            stack.pop()
            if not stack:
                return j
    return len(tokens) - 1


def _split_args(tokens: list[Token]) -> list[list[Token]]:
    """Top-level comma-separated arguments of a call's tokens (without its parentheses)."""
    args: list[list[Token]] = [[]]
    depth = 0
    for tok in tokens:
        if tok.kind == "punct" and tok.text in "([{":
            depth += 1
        elif tok.kind == "punct" and tok.text in ")]}":
            depth -= 1
        if depth == 0 and tok.kind == "punct" and tok.text == ",":
            args.append([])
        else:
            args[-1].append(tok)
    return [a for a in args if a] if any(args) else []


def _strings(arg: list[Token]) -> str | None:
    """The value of an argument made only of string literals (adjacent ones joined)."""
    if arg and all(t.kind == "string" for t in arg):
        return "".join(t.text for t in arg)
    if arg and arg[0].text in ("torch", "schema", "c10"):  # torch::schema("...", ...)
        opening = next((k for k, t in enumerate(arg) if t.text == "("), None)
        if opening is not None and any(t.text == "schema" for t in arg[:opening]):
            inner = _split_args(arg[opening + 1 : _matching(arg, opening)])
            return _strings(inner[0]) if inner else None
    return None


def _names(arg: list[Token]) -> Iterator[str]:
    """The qualified names (`a::b::c`) in an argument, in order."""
    current: list[str] = []
    for tok in arg:
        if tok.kind == "ident" or (tok.text == "::" and current):
            current.append(tok.text)
            continue
        if current:
            yield "".join(current)
        current = [] if tok.text != "::" else ["::"]
    if current:
        yield "".join(current)


def _kernel_and_key(arg: list[Token]) -> tuple[str | None, str | None]:
    """The function an impl argument names, and the dispatch key or device it names."""
    key = None
    function = None
    for name in _names(arg):
        last = name.rsplit("::", 1)[-1]
        if last in KEY_DEVICES or name.startswith(("c10::DispatchKey", "DispatchKey")):
            key = last
        elif last not in _WRAPPERS and name.lstrip(":") not in _WRAPPERS:
            function = name
    return function, key


class _Reader:
    def __init__(self, path: Path, source: str, found: Found, problems: list[Diagnostic]) -> None:
        self.path = path
        self.source = source
        self.found = found
        self.problems = problems

    def problem(self, line: int, message: str, hint: str, level: str = "error") -> None:
        self.problems.append(Diagnostic(self.path, line, message, hint, level))

    def read(self) -> None:
        try:
            tokens = tokenize(self.source)
        except TokenizeError as exc:
            self.problem(
                exc.line,
                f"cannot read this file: {exc.message}",
                "fix the C++ or leave the file out",
            )
            return
        self.tokens = tokens
        scopes: list[str | None] = []  # a namespace's name ("" anonymous), or None for other braces
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            if tok.kind == "ident" and tok.text.startswith(("PyInit_", "PYBIND11_MODULE")):
                self._binding(i)
            if tok.text == "namespace" and tok.kind == "ident":
                j = i + 1
                parts = []
                while j < len(tokens) and (tokens[j].kind == "ident" or tokens[j].text == "::"):
                    parts.append(tokens[j].text)
                    j += 1
                if j < len(tokens) and tokens[j].text == "{":
                    scopes.append("".join(parts))
                    i = j + 1
                    continue
            elif (
                tok.kind == "ident"
                and tok.text in _DEF_MACROS | _IMPL_MACROS
                and self._at(i + 1, "(")
            ):
                close = _matching(tokens, i + 1)
                if self._at(close + 1, "{"):
                    end = _matching(tokens, close + 1)
                    self._block(tok, _split_args(tokens[i + 2 : close]), close + 2, end)
                    i = end + 1
                    continue
            elif tok.text == "{" and tok.kind == "punct":
                if all(s is not None for s in scopes):
                    self._definition(i, scopes)
                scopes.append(None)
            elif tok.text == "}" and tok.kind == "punct" and scopes:
                scopes.pop()
            i += 1

    def _binding(self, i: int) -> None:
        """Record a Python binding starting at token `i`: `PYBIND11_MODULE(...)`, or the definition
        of a `PyInit_<name>(...)` function."""
        tok = self.tokens[i]
        if not self._at(i + 1, "("):
            return
        if tok.text == "PYBIND11_MODULE":
            args = _split_args(self.tokens[i + 2 : _matching(self.tokens, i + 1)])
            name = args[0][0].text if args and args[0] else "?"
            what = f"PYBIND11_MODULE({name}, ...)"
        elif tok.text.startswith("PyInit_") and self._at(_matching(self.tokens, i + 1) + 1, "{"):
            what = tok.text
        else:
            return
        self.found.python_bindings.append((self.path, tok.line, what))

    def _at(self, i: int, text: str) -> bool:
        return (
            i < len(self.tokens) and self.tokens[i].text == text and self.tokens[i].kind == "punct"
        )

    def _definition(self, brace: int, scopes: list[str | None]) -> None:
        """Record the function whose body opens at `brace`, if one does."""
        tokens = self.tokens
        j = brace - 1
        while (
            j >= 0
            and tokens[j].kind == "ident"
            and tokens[j].text in ("const", "noexcept", "override")
        ):
            j -= 1
        if j < 1 or not self._at(j, ")"):
            return
        depth, k = 0, j
        while k >= 0:  # back to the matching "("
            if self._at(k, ")"):
                depth += 1
            elif self._at(k, "("):
                depth -= 1
                if depth == 0:
                    break
            k -= 1
        if k < 1 or tokens[k - 1].kind != "ident":
            return
        start = k - 1
        while start > 0 and not (
            tokens[start - 1].kind == "punct" and tokens[start - 1].text in _DECL_STOPS
        ):
            start -= 1
        head = [t.text for t in tokens[start : k - 1]]
        if not head or "template" in head or "=" in head:
            return  # a template, a constructor-like call, or not a function
        names = [s for s in scopes if s]
        self.found.functions.append(
            CppFunction(
                name=tokens[k - 1].text,
                namespace="::".join(names),
                declaration=self.source[tokens[start].start : tokens[j].end],
                linkable="static" not in head and "" not in scopes,
                path=self.path,
                line=tokens[k - 1].line,
            )
        )

    def _block(self, macro: Token, args: list[list[Token]], begin: int, end: int) -> None:
        impl_block = macro.text in _IMPL_MACROS
        if len(args) != (3 if impl_block else 2) or len(args[0]) != 1 or len(args[-1]) != 1:
            self.problem(
                macro.line,
                f"cannot read this {macro.text} block's arguments",
                "write it as "
                + (
                    f"{macro.text}(namespace, CPU, m)"
                    if impl_block
                    else f"{macro.text}(namespace, m)"
                ),
                "warning",
            )
            return
        namespace, var = args[0][0].text, args[-1][0].text
        key = "".join(t.text for t in args[1]).rsplit("::", 1)[-1] if impl_block else None
        i = begin
        while i < end:
            if (
                self.tokens[i].text == var
                and self._at(i + 1, ".")
                and self.tokens[i + 2].text in ("def", "impl")
                and self._at(i + 3, "(")
            ):
                close = _matching(self.tokens, i + 3)
                call = _split_args(self.tokens[i + 4 : close])
                if self.tokens[i + 2].text == "def":
                    self._def(namespace, call, self.tokens[i])
                else:
                    self._impl(namespace, key, call, self.tokens[i])
                i = close
            i += 1

    def _def(self, namespace: str, args: list[list[Token]], at: Token) -> None:
        schema = _strings(args[0]) if args else None
        if schema is None or "(" not in schema:
            self.problem(
                at.line,
                'cannot read this def\'s schema: it is not a string literal of the form "name(...) -> ..."',
                "write the schema as a string literal; this op was skipped",
            )
            return
        name, paren, rest = schema.partition("(")
        op = FoundOp(namespace, name.strip(), paren + rest, self.path, at.line, "cpp")
        self.found.ops.append(op)
        for arg in args[1:]:
            if arg[0].text == "{":
                continue  # tags
            self._kernel(op, arg, None, at, "CompositeImplicitAutograd")

    def _impl(self, namespace: str, key: str | None, args: list[list[Token]], at: Token) -> None:
        name = _strings(args[0]) if args else None
        if name is None or len(args) < 2:
            self.problem(
                at.line,
                "cannot read this impl: its op name is not a string literal",
                "write the name as a string literal; this kernel was skipped",
                "warning",
            )
            return
        op = FoundOp(namespace, name.strip(), "", self.path, at.line, "cpp")
        for arg in args[1:-1]:  # ops.impl("name", torch::kCPU, &fn)
            key = _kernel_and_key(arg)[1] or key
        self._kernel(op, args[-1], key, at, "CompositeImplicitAutograd")
        self.found.ops.append(op)

    def _kernel(
        self, op: FoundOp, arg: list[Token], key: str | None, at: Token, default: str
    ) -> None:
        if any(t.text == "[" for t in arg):
            self.problem(
                at.line,
                f"the kernel of {op.qualname} is a lambda: opgen cannot call it from generated code",
                "move its body into a named function and register that",
                "warning",
            )
            return
        function, named_key = _kernel_and_key(arg)
        key = named_key or key or default
        if function is None:
            return
        if key == "CompositeImplicitAutograd":
            op.notes.append(
                f"{function} ({self.path.name}:{at.line}) was registered as CompositeImplicitAutograd: opgen registers it as the op's CPU and CUDA kernel"
            )
        devices = KEY_DEVICES.get(key)
        if devices is None:
            self.problem(
                at.line,
                f"{op.qualname}: kernels for dispatch key {key} are not imported",
                "opgen imports CPU, CUDA and Composite kernels; register this one yourself",
                "warning",
            )
            return
        op.kernels.extend(Kernel(function, d, self.path, at.line) for d in devices)


def read_cpp(path: Path, source: str, found: Found, problems: list[Diagnostic]) -> None:
    """Add what `source` (the text of `path`) registers and defines to `found`."""
    _Reader(path, source, found, problems).read()
    if found.target is None or found.target == "classic":
        stable = "torch::stable" in source or "STABLE_TORCH_LIBRARY" in source
        aten = any(
            w in source for w in ("at::Tensor", "torch::Tensor", "torch/extension.h", "ATen/")
        )
        if stable and not aten:
            found.target = "stable"
        elif aten or found.target is None and (stable or "TORCH_LIBRARY" in source):
            found.target = found.target or ("stable" if stable else "classic")
