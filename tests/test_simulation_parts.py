"""The simulator as parts: one replica's scheduler driven by hand, and the size of the simulator's functions.

The scheduler runs here with a fixed iteration time of 1 s (``steps._FixedStep``), so every time below is
an iteration count worked out from the engine's rules, not read from a run.
"""

import ast
import heapq
from pathlib import Path

import pytest

from calculator.performance.scheduler import SchedulerRules
from calculator.simulation.scheduler import _Engine, _ReplicaScheduler, _Requests
from calculator.simulation.steps import _FixedStep

SIMULATION = Path(__file__).resolve().parent.parent / "calculator" / "simulation"


def _replica(prompts, outputs, *, budget=8, capacity=100.0, chunked=True, mixed=True, max_seqs=4, block=1):
    rules = SchedulerRules(
        "test", budget, max_seqs, 1, mixed, chunked, overlap=False, output_reservation=0.0, kv_block=block
    )
    engine = _Engine(rules, capacity, _FixedStep(1.0), 1.0, 1)
    requests = _Requests(list(prompts), list(outputs), capacity, block)
    released = []
    iterations = []
    rep = _ReplicaScheduler(0, engine, requests, lambda req, now: released.append((req, now)), iterations)
    return rep, requests, released, iterations


def _run(rep, iterations, arrivals):
    """Queue every request at time 0, then end and start iterations until none is left."""
    for req in arrivals:
        rep.arrive(req, 0.0)
    rep.start_iteration(0.0)
    while iterations:
        now, _ = heapq.heappop(iterations)
        rep.end_iteration(now)
        rep.start_iteration(now)


def test_chunked_prefill_splits_a_prompt_over_the_token_budget():
    # A 10-token prompt under an 8-token budget: chunks of 8 and 2 (first token at the end of iteration 2),
    # then two decode iterations for the other two tokens.
    rep, requests, released, iterations = _replica([10], [3])
    _run(rep, iterations, [0])
    assert (requests.first, requests.finish) == ([2.0], [4.0])
    assert released == [(0, 4.0)] and rep.outstanding == 0 and rep.outstanding_tokens == 0
    assert rep.decoded == [False, False, True, True] and rep.kv == [8, 10, 11, 12]


@pytest.mark.parametrize(("mixed", "finish"), [(False, [3.0, 3.0]), (True, [2.0, 3.0])])
def test_prefill_first_holds_the_decodes_that_mixing_runs_beside_a_prompt(mixed, finish):
    # Unchunked prompts of 6 and 5 tokens under an 8-token budget: the second does not fit beside the first.
    # Prefill-first runs the second prompt alone while the first request waits for its last token; mixed
    # batching decodes it beside that prompt (room 8 - 1 decode = 7 >= 5).
    rep, requests, _, iterations = _replica([6, 5], [2, 2], chunked=False, mixed=mixed)
    _run(rep, iterations, [0, 1])
    assert requests.first == [1.0, 2.0]
    assert requests.finish == finish


def test_the_latest_admitted_request_is_preempted_when_the_decodes_outgrow_the_cache():
    # Two requests of 4 + 10 tokens in a 16-token cache, prompts together in iteration 1 (first tokens at 1 s).
    # Four decode iterations later they hold 16 tokens; the next would need 18, so at 5 s the second one
    # admitted is preempted (5 of its 10 tokens emitted) and waits until the first finishes at 1 + 9 = 10 s.
    # It then recomputes its 9 tokens in one iteration (a token at 11 s, 6 s after its last) and decodes
    # its last 4: done at 15 s.
    rep, requests, _, iterations = _replica([4, 4], [10, 10], budget=100, capacity=16.0)
    _run(rep, iterations, [0, 1])
    assert requests.preempted == [0, 1]
    assert requests.first == [1.0, 1.0] and requests.finish == [10.0, 15.0] and requests.stall == [0.0, 6.0]
    assert max(rep.kv) == 16


def test_a_sequence_holds_whole_kv_blocks():
    # Blocks of 4 tokens: the 10-token prompt's chunks of 8 and 2 hold 8 and then 12 tokens (3 blocks, 2 unused).
    # Decoding adds a token an iteration to the 12: 13 and 14 in the two decode iterations, the prompt's unused
    # tokens kept (the fluid rule: a token at a time is on average the blocks it fills).
    rep, requests, _, iterations = _replica([10], [3], block=4)
    _run(rep, iterations, [0])
    assert rep.kv == [8, 12, 13, 14] and requests.finish == [4.0] and rep.slack == 0 and requests.slack == [0]
    # 98 tokens fit a 100-token cache, 7 blocks of 16 (112) do not: the request is dropped as too big.
    assert _Requests([90], [8], 100.0, 16).too_big == [True] and _Requests([90], [8], 100.0, 1).too_big == [False]


def test_a_full_cache_of_blocks_admits_fewer():
    # Two prompts of 9 tokens and one output token each under a cache of 24 tokens: 18 tokens fit, but in blocks
    # of 8 each takes 16 (reserved at admission), so the second waits for the first to leave.
    rep, one_by_one, _, iterations = _replica([9, 9], [1, 1], budget=100, capacity=24.0, block=8)
    _run(rep, iterations, [0, 1])
    assert one_by_one.first == [1.0, 2.0]
    rep, together, _, iterations = _replica([9, 9], [1, 1], budget=100, capacity=24.0)
    _run(rep, iterations, [0, 1])
    assert together.first == [1.0, 1.0]


def test_the_room_beside_the_decodes():
    mixed, _, _, _ = _replica([1], [1], budget=8)
    alone, _, _, _ = _replica([1], [1], budget=8, mixed=False)
    assert mixed.room(3, False) == 5  # the budget less one token per running decode
    assert alone.room(0, True) == 8  # a prefill batch has the whole budget
    assert alone.room(3, False) == 0  # a decode iteration of a prefill-first engine takes no prompt


def test_the_simulator_reads_the_room_from_the_shared_scheduler_rules():
    # The room the running decodes leave is one rule of the library (performance.scheduler.SchedulerRules.room),
    # which the predictor and the sizer read too: the simulator's replica scheduler asks it in one method and reads
    # no budget of its own; seed.py reads the budget only to size the step table.
    readers = set()
    for path in SIMULATION.glob("*.py"):
        tree = ast.parse(path.read_text())
        for function in ast.walk(tree):
            if isinstance(function, ast.FunctionDef):
                for node in ast.walk(function):
                    if isinstance(node, ast.Attribute) and node.attr in {"budget", "token_budget", "max_num_tokens"}:
                        readers.add((path.name, function.name, node.attr))
                    if isinstance(node, ast.Attribute) and node.attr == "room" and isinstance(node.ctx, ast.Load):
                        readers.add((path.name, function.name, "room"))
    assert readers == {
        ("scheduler.py", "room", "room"),  # SchedulerRules.room, in _ReplicaScheduler.room
        ("scheduler.py", "_schedule_prompts", "room"),  # the scheduler's own room() where it builds an iteration
        ("seed.py", "_limits", "max_num_tokens"),  # the setup's flag, handed to scheduler_rules
        ("seed.py", "_engine", "token_budget"),  # the step table's largest prefill
        ("fleet.py", "__init__", "budget"),  # a client's retry budget (RetryPolicy.budget), no token budget
    }, readers


def _code_lines(function, lines):
    """Lines of ``function`` that are neither blank, nor a comment, nor its docstring."""
    docstring = set()
    first = function.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        docstring = set(range(first.lineno, first.end_lineno + 1))
    return sum(
        1
        for number in range(function.lineno, function.end_lineno + 1)
        if number not in docstring and lines[number - 1].strip() and not lines[number - 1].strip().startswith("#")
    )


def test_no_function_of_the_simulator_runs_past_80_lines_of_code():
    long = []
    for path in sorted(SIMULATION.glob("*.py")):
        source = path.read_text()
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _code_lines(node, lines) > 80:
                long.append(f"{path.name}:{node.name} ({_code_lines(node, lines)} lines)")
    assert not long
