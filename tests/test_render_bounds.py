"""The bounded sandbox (Note [Bounded rendering] in opgen/render/sandbox.py), template by template.

Renders run on a worker thread, as a library caller's might: there no timer can interrupt
them, so the checks compiled into the template must stop them alone (and a regression fails
the join's timeout instead of hanging the suite). test_render_bounds_cli.py runs the commands.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from pathlib import Path

import jinja2
import jinja2.sandbox
import pytest

from opgen.errors import OpgenError
from opgen.render.budget import RenderBudget, RenderLimitExceeded, RenderLimits
from opgen.render.environment import Renderer, builtin_templates_dir
from opgen.render.sandbox import BoundedSandbox, bounded_render

LIMITS = RenderLimits(seconds=0.3, chars=1 << 20)


def _environment(**templates: str) -> BoundedSandbox:
    return BoundedSandbox(
        builtin_templates_dir(),
        loader=jinja2.DictLoader(templates),
        undefined=jinja2.StrictUndefined,
    )


def _render(source: str, limits: RenderLimits = LIMITS, **context: object) -> str:
    """Render `source` as an override would be, on a worker thread; returns the text or raises."""
    environment = _environment(main=source)
    outcome: list[object] = []

    def work() -> None:
        try:
            with bounded_render(environment, limits):
                outcome.append(environment.get_template("main").render(**context))
        except BaseException as exc:  # handed to the test's thread
            outcome.append(exc)

    worker = threading.Thread(target=work, daemon=True)
    start = time.monotonic()
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "the render was not stopped"
    assert time.monotonic() - start < limits.seconds + 20
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    assert isinstance(outcome[0], str)
    return outcome[0]


RUNS_FOREVER = {
    "nested loops": "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
    "a loop filter": "{% for a in range(100000) %}{% for b in range(100000) if b < 0 %}{% endfor %}{% endfor %}",
    "a macro calling itself twice": "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}",
    "a recursive loop": "{% for x in [1, 1] recursive %}{% if loop.depth < 60 %}{{ loop([1, 1]) }}{% endif %}{% endfor %}",
    "a call block": "{% macro m(n) %}{% if n %}{{ caller(n) }}{{ caller(n) }}{% endif %}{% endmacro %}"
    "{% macro g(n) %}{% call(k) m(n) %}{{ g(k - 1) }}{% endcall %}{% endmacro %}{{ g(25) }}",
    "map over a filter": "{{ range(100000)|map('string')|map('trim')|list|length }}"
    "{% for i in range(100000) %}{{ range(100000)|map('string')|list|length }}{% endfor %}",
    "a namespace counter": "{% set ns = namespace(n=0) %}{% for a in range(100000) %}"
    "{% for b in range(100000) %}{% set ns.n = ns.n + 1 %}{% endfor %}{% endfor %}",
}


@pytest.mark.parametrize("source", RUNS_FOREVER.values(), ids=RUNS_FOREVER.keys())
def test_work_without_end_stops_at_the_deadline(source: str) -> None:
    with pytest.raises(
        RenderLimitExceeded, match=r"took more than 0.3 s \(the bound on one template\)"
    ):
        _render(source)


def test_an_include_of_itself_stops_too() -> None:
    environment = _environment(
        main="{% set n = (n or 0) + 1 %}{% if n < 60 %}{% include 'main' %}{% include 'main' %}{% endif %}"
    )
    with pytest.raises(RenderLimitExceeded, match="took more than"):
        with bounded_render(environment, LIMITS):
            environment.get_template("main").render(n=30)


TOO_LARGE = {
    "'a' * 10000000000": "repeating a text of 1 character 10000000000 times would build",
    "[1] * 10000000": "repeating a list of 1 item 10000000 times",
    "10 ** 10000000": "would build an integer of about",
    "(10 ** 10000) * (10 ** 10000) * (10 ** 10000)": "multiplying would build an integer",
    "'%0100000000000d' % 1": "formatting with %",
    "'%(a)s%(a)s%(a)s%(a)s' % {'a': 'x' * 300000}": "formatting with %",
    "'%010000000000d'.encode() % 1": "formatting with % would build 10000000014 characters",
    "'{:>10000000000}'.format(1)": "formatting with str.format",
    "'{0}{0}{0}{0}'.format('x' * 300000)": "formatting with str.format",
    "'x'|center(10000000000)": "padding to width 10000000000",
    "'a'.ljust(10000000000)": "padding to width 10000000000",
    "'a'.zfill(10000000000)": "padding to width 10000000000",
    "('\\t' * 1000).expandtabs(100000)": "tabs would build",
    "range(100000)|join('x' * 100)": "joining would build",
    "('x' * 100).join(['a'] * 100000)": "joining would build",
    "('a' * 1000)|replace('a', 'b' * 10000)": "replacing would build",
    "('a' * 1000).replace('a', 'b' * 10000)": "replacing would build",
    "('a' * 1000).translate({97: 'b' * 10000})": "translating would build",
    "('x' * 100)|wordwrap(1, wrapstring='y' * 100000)": "wrapping would build",
    "('\\n' * 10000)|indent('x' * 1000)": "indenting would build",
    "('x' * 1000)|tojson(indent=100000)": "writing JSON would build",
    "('a.com ' * 1000)|urlize(rel='x' * 100000)": "making links would build",
    "range(10)|batch(1000000000, 'x')|list": "splitting into groups of 1000000000",
    "range(10)|slice(1000000000)|list": "splitting into groups of 1000000000",
    "([[1] * 1000] * 100)|sum(start=[])": "adding up sequences",
    "lipsum(100000000)": "lipsum would build",
    "(1).to_bytes(10000000000, 'big')": "writing 10000000000 bytes",
    "range(3)|map('center', 10000000000)|list": "padding to width 10000000000",
    "(['x'] * 1000)|select('ne', 'y')|map('replace', 'x', 'y' * 2000)|join": "replacing would build 2000 characters",
    "('a ' * 300000).split()": "splitting would build",
    "('x' * 600000)|list": "making a list would build",
    "('x' * 400000) ~ ('y' * 400000)": "joining with ~ would build",
    "('x' * 900000)[::-1]": "slicing would build",
}


@pytest.mark.parametrize("expression", TOO_LARGE, ids=TOO_LARGE.keys())
def test_a_value_past_the_budget_is_refused_before_it_is_built(expression: str) -> None:
    with pytest.raises(RenderLimitExceeded, match=re.escape(TOO_LARGE[expression])):
        _render("{{ " + expression + " }}")


WRITES_TOO_MUCH = {
    "a loop of values": "{% for i in range(10000) %}{{ 'x' * 1000 }}{% endfor %}",
    "a loop of text": "{% for i in range(100000) %}" + "x" * 100 + "{% endfor %}",
    "a list printing one text many times": "{{ ['x' * 100000] * 100 }}",
    "nested lists sharing one": "{% set a = ['x' * 1000] * 100 %}{% set b = [a] * 100 %}{{ [b] * 100 }}",
    "a dict sharing one value": "{{ dict.fromkeys(range(1000), 'x' * 100000) }}",
    "a macro's text": "{% macro m() %}{{ 'x' * 100000 }}{% endmacro %}{% for i in range(100) %}{{ m() }}{% endfor %}",
}


@pytest.mark.parametrize("source", WRITES_TOO_MUCH.values(), ids=WRITES_TOO_MUCH.keys())
def test_output_past_the_bound_is_refused(source: str) -> None:
    with pytest.raises(
        RenderLimitExceeded, match="the template writes more than 1 MiB|would build"
    ):
        _render(source)


def test_a_loop_that_keeps_large_values_runs_out_of_budget_not_memory() -> None:
    source = (
        "{% set ns = namespace(kept=[]) %}{% for i in range(100000) %}"
        "{% set ns.kept = ns.kept + [('x' * 500000) ~ i] %}{% endfor %}"
    )
    with pytest.raises(RenderLimitExceeded, match="would build"):
        _render(source)


LAYOUT = {
    "{% for a in args %}{{ a.name }}: {{ a.type }}{{ ', ' if not loop.last }}{% endfor %}": "x: Tensor, alpha: float",
    "{{ args|map(attribute='name')|join(', ') }}": "x, alpha",
    "{{ '%s(%d)' % ('f', 3) }} {{ '{}-{:>4}'.format('a', 7) }}": "f(3) a-   7",
    "{{ ('ab' * 3)|upper }}{{ [1, 2] + [3] }}{{ 'x' ~ 1 ~ [2] }}{{ 'abcdef'[1:3] }}": "ABABAB[1, 2, 3]x1[2]bc",
    "{% macro m(n) %}<{{ n }}>{% endmacro %}{% macro w() %}[{{ caller() }}]{% endmacro %}"
    "{{ m(1) }}{% call w() %}c{% endcall %}": "<1>[c]",
    "{% set ns = namespace(s='') %}{% for i in range(3) %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.s }}": "012",
    "{{ 'a b c'.split()|reverse|join }}{{ 'x'|center(5) }}|{{ 'l1\nl2'|indent(2, true) }}": "cba  x  |  l1\n  l2",
    "{{ 2 ** 10 }} {{ 7 % 3 }} {{ [0] * 3 }} {{ range(3)|sum }} {{ {'a': 1}|tojson }}": '1024 1 [0, 0, 0] 3 {"a": 1}',
}


@pytest.mark.parametrize("source", LAYOUT, ids=range(len(LAYOUT)))
def test_templates_that_lay_out_text_render_as_before(source: str) -> None:
    args = [{"name": "x", "type": "Tensor"}, {"name": "alpha", "type": "float"}]
    plain = jinja2.sandbox.ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined)
    expected = plain.from_string(source).render(args=args)
    assert expected == LAYOUT[source]
    assert _render(source, args=args) == expected


def test_the_checks_are_compiled_into_overrides_only() -> None:
    """A built-in template compiles to the very code the plain sandbox makes of it."""
    environment = _environment()
    plain = jinja2.sandbox.ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined)
    name = "tests/test_op.py.j2"
    source = (builtin_templates_dir() / name).read_text()
    builtin = str(builtin_templates_dir() / name)
    assert environment.compile(source, name, builtin, raw=True) == plain.compile(
        source, name, builtin, raw=True
    )
    override = environment.compile(source, name, f"/project/templates/{name}", raw=True)
    assert "opgen_tick" in override and "opgen_text" in override and "opgen:join" in override


def test_the_timer_is_disarmed_and_the_handler_restored_after_a_render() -> None:
    environment = _environment(main="{{ 1 }}")
    with bounded_render(environment, LIMITS):
        assert signal.getsignal(signal.SIGALRM) is not signal.SIG_DFL  # armed on the main thread
        assert 0 < signal.getitimer(signal.ITIMER_REAL)[0] <= LIMITS.seconds
        environment.get_template("main").render()
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_someone_elses_timer_is_left_alone() -> None:
    fired: list[int] = []
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(signum))
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    try:
        environment = _environment(main="{{ 1 }}")
        with bounded_render(environment, LIMITS):
            environment.get_template("main").render()
        assert 0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 0.5
        time.sleep(0.7)
        assert fired == [signal.SIGALRM]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_the_timer_stops_a_long_filter_on_the_main_thread() -> None:
    """Sorting a long list runs inside one filter, between two compiled checks: the timer ends
    the render as soon as the filter returns (Python runs a signal handler between bytecodes)."""
    environment = _environment(main="{{ (['b', 'a'] * 500000)|sort|length }}")
    limits = RenderLimits(seconds=0.05, chars=1 << 30)  # the size bound stays out of the way
    start = time.monotonic()
    with pytest.raises(RenderLimitExceeded, match="took more than 0.05 s"):
        with bounded_render(environment, limits):
            environment.get_template("main").render()
    assert time.monotonic() - start < 30  # one sort of a million strings, on a loaded machine


def test_the_renderer_names_the_override_and_line(tmp_path: Path) -> None:
    folder = tmp_path / "templates"
    (folder / "tests").mkdir(parents=True)
    (folder / "tests/test_op.py.j2").write_text("# a test\n{% include 'tests/big.j2' %}\n")
    (folder / "tests/big.j2").write_text("\n\n{{ 'a' * 10000000000 }}\n")
    with pytest.raises(OpgenError) as caught:
        Renderer(folder).render("tests/test_op.py.j2", {})
    [diagnostic] = caught.value.diagnostics
    assert (diagnostic.path, diagnostic.line) == (folder / "tests/big.j2", 3)
    assert diagnostic.message.startswith("repeating a text of 1 character 10000000000 times")
    assert diagnostic.message.endswith(f"(from {folder / 'tests/test_op.py.j2'}:2)")
    assert "OPGEN_RENDER_MB" in diagnostic.hint


def test_limits_come_from_the_environment() -> None:
    assert RenderLimits.from_environment({}) == RenderLimits(10.0, 64 << 20)
    custom = {"OPGEN_RENDER_SECONDS": "2.5", "OPGEN_RENDER_MB": "0.5"}
    assert RenderLimits.from_environment(custom) == RenderLimits(2.5, 1 << 19)
    with pytest.raises(OpgenError) as caught:
        RenderLimits.from_environment({"OPGEN_RENDER_SECONDS": "-1", "OPGEN_RENDER_MB": "x"})
    assert [d.message for d in caught.value.diagnostics] == [
        "OPGEN_RENDER_SECONDS='-1' is not a positive number",
        "OPGEN_RENDER_MB='x' is not a positive number",
    ]


def test_measure_counts_what_printing_would_write() -> None:
    budget = RenderBudget(RenderLimits(chars=1 << 30))
    shared = "x" * 10000
    for value in ([shared] * 50, {"a": [shared, (shared,)]}, [[shared] * 3] * 4, ["a\nb", "\x00"]):
        assert budget.measure(value) >= len(str(value))
    assert budget.measure([shared] * 50) < 2 * len(str([shared] * 50))
    namespace = jinja2.utils.Namespace(a=1)
    namespace["self"] = namespace
    assert budget.measure(namespace) < 100  # a value holding itself is walked once
    deep: list[object] = []
    for _ in range(300):
        deep = [deep]
    with pytest.raises(RenderLimitExceeded, match="nested more than 200 levels"):
        budget.measure(deep)
