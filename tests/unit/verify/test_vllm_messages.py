"""What eaglezoo reads from vLLM when it refuses or fails: the worker passes on vLLM's own argument refusals and
nothing else, the engine's log gives the root cause (never a wrapper's line, never an earlier run's), a long
reason stays one printable line; and how the CPU cores are split between ranks, as vLLM parses the list."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    "cores, ranks, value",
    [
        ([0, 1], 2, "0|1"),
        ([0, 1, 2, 3, 4, 5, 6, 7], 3, "0-2|3-5|6-7"),
        ([2, 3, 5, 8, 9], 2, "2-3,5|8-9"),
        ([4, 5, 6, 7], 4, "4|5|6|7"),
    ],
)
def test_the_cores_are_split_into_one_list_per_rank_as_vllm_parses_them(cores, ranks, value):
    """Contiguous, near-equal shares, the first ones one core larger; written as vLLM's parse_id_list reads them."""
    from eaglezoo.verify.vllm_worker import cpu_bind_value

    assert cpu_bind_value(cores, ranks) == value


VLLM_PREFIX = "(EngineCore pid=7) ERROR 11-27 08:37:37 [core.py:1510] "


def test_the_root_cause_is_the_last_exception_line_that_is_not_a_wrapper(tmp_path):
    log = tmp_path / "engine.log"
    log.write_text(
        "\n".join(
            [
                "(EngineCore pid=7) WARNING 11-27 08:37:25 [cpu.py:224] Triton is not installed.",
                VLLM_PREFIX + "Traceback (most recent call last):",
                VLLM_PREFIX + '  File "x.py", line 1, in f',
                VLLM_PREFIX + "ModuleNotFoundError: No module named 'x'",
                VLLM_PREFIX + "",
                VLLM_PREFIX + "The above exception was the direct cause of the following exception:",
                VLLM_PREFIX + "Traceback (most recent call last):",
                VLLM_PREFIX + "RuntimeError: Failed to load 0th LogitsProcessor plugin x:y",
                "Traceback (most recent call last):",
                "RuntimeError: Worker failed with error 'x', please check the stack trace above for the root cause",
                (
                    "Exception: WorkerProc initialization failed due to an exception in a background process. "
                    "See stack trace for root cause."
                ),
                "RuntimeError: Engine process failed to start. See stack trace for the root cause.",
                "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
                "",
            ]
        )
    )
    from eaglezoo.verify.vllm_process import log_reason

    assert log_reason(log) == "Failed to load 0th LogitsProcessor plugin x:y"
    assert log_reason(log, log.stat().st_size) is None  # an earlier run's lines are not this failure's reason


def test_a_validation_error_in_the_log_is_named_by_its_fields(tmp_path):
    """pydantic's first line ("1 validation error for X") names no reason: its fields and messages follow."""
    import traceback

    from pydantic import BaseModel

    from eaglezoo.verify.vllm_process import log_reason

    class CompilationConfig(BaseModel):
        mode: int

    try:
        CompilationConfig(mode="seven")
    except ValueError:
        text = traceback.format_exc()
    log = tmp_path / "engine.log"
    log.write_text("".join(VLLM_PREFIX + line + "\n" for line in text.splitlines()) + "\x1b[0m")
    assert (
        log_reason(log)
        == "CompilationConfig: mode: Input should be a valid integer, unable to parse string as an integer"
    )


def test_a_long_reason_is_cut_and_stays_one_printable_line(tmp_path):
    from eaglezoo.verify.vllm_process import MAX_REASON, engine_failure, log_reason

    log = tmp_path / "engine.log"
    log.write_text("Traceback (most recent call last):\nValueError: " + "\x07a b " * 1000 + "\n")
    reason = log_reason(log)
    assert len(reason) <= MAX_REASON and reason.endswith("...") and "\x07" not in reason
    assert len(engine_failure(reason).message) < MAX_REASON + 20


def test_the_engine_passes_on_only_what_vllm_says_to_users():
    """vLLM's argument refusals (ValueError) reach the user, first line only; any other exception's
    text stays in the engine's log. Importing the worker leaves this process's stdout alone."""
    import sys

    from eaglezoo.verify import vllm_worker

    class OutOfMemoryError(RuntimeError):
        pass

    assert vllm_worker.PROTOCOL is sys.stdout
    assert (
        vllm_worker.engine_message(ValueError("max_model_len 9999 exceeds the model's 1024\nmore"))
        == "max_model_len 9999 exceeds the model's 1024"
    )
    assert vllm_worker.engine_message(KeyError("internal_table_key")) is None
    assert vllm_worker.engine_message(RuntimeError("at 0x7f: internal state")) is None
    assert vllm_worker.engine_message(OutOfMemoryError("CUDA out of memory")).startswith("out of GPU memory")


def test_a_reason_vllm_raised_in_its_own_process_is_read_from_the_log(tmp_path):
    """The engine core's (or a rank's) traceback is only in the log: its ValueError or out-of-memory
    line is vLLM's reason, without the class name; the parent's generic RuntimeError is not."""
    from pydantic import BaseModel, Field, ValidationError

    from eaglezoo.verify import vllm_worker
    from eaglezoo.verify.vllm_process import log_reason, worker_error

    log = tmp_path / "engine.log"
    log.write_text(
        "(EngineCore pid=7) INFO 11-25 02:26:30 [core.py:133] Initializing a V1 LLM engine\n"
        "\x1b[1;31m(VllmWorker-0 pid=9) ERROR 11-25 02:26:38 [multiproc_executor.py:953] ValueError: "
        "Available memory on node 0 (5.54/8.21 GiB) is less than desired\x1b[0m\n"
        "Exception: WorkerProc initialization failed due to an exception in a background process.\n"
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n"
    )
    assert log_reason(log) == "Available memory on node 0 (5.54/8.21 GiB) is less than desired"
    failure = worker_error({"event": "error", "kind": "engine", "message": None}, "python", log)
    assert failure.message == "vLLM stopped: Available memory on node 0 (5.54/8.21 GiB) is less than desired"
    assert "--gpu-memory-utilization" in failure.hint
    log.write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    assert log_reason(log) == "CUDA out of memory. Tried to allocate 2.00 GiB"
    log.write_text("RuntimeError: Engine core initialization failed. See root cause above.\n")
    assert log_reason(log) is None and log_reason(tmp_path / "absent.log") is None
    failure = worker_error({"event": "error", "kind": "engine", "message": None}, "python", log)
    assert failure.message == "vLLM failed while starting or measuring"
    assert failure.hint == "its own reason is in the engine's log"  # the caller adds the log's path
    earlier = "ValueError: an earlier engine's refusal, from a run that is over\n"  # one process serves several runs
    log.write_text(earlier + "RuntimeError: Engine core initialization failed.\n")
    assert log_reason(log) == "an earlier engine's refusal, from a run that is over"
    assert log_reason(log, start=len(earlier)) is None

    class CacheConfig(BaseModel):
        block_size: int = Field(ge=1)

    with pytest.raises(ValidationError) as refused:
        CacheConfig(block_size=0)
    assert vllm_worker.engine_message(refused.value) == "block_size: Input should be greater than or equal to 1"
