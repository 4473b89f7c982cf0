"""`Schedule`, the one type of a kernel's knobs: declared on `loop.kernel` and `tile.kernel`,
verified, and carried unchanged from the text form to the IR, the tuner's cache and back."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr, StringAttr
from xdsl.utils.exceptions import VerifyException

from deplodock.dialects import loop, make_context, tile
from deplodock.dialects.common.schedule import Schedule, ScheduleError
from deplodock.passes.convert_loop_to_tile import ConvertLoopToTilePass
from deplodock.tune.cache import CacheKey, TuneRecord, _decode_row, _row_from_record
from tests.helpers import parse

KERNEL = """builtin.module {
  loop.kernel @k(%x: memref<4xf32>, %y: memref<4xf32>) attributes {schedule = SCHEDULE} {
    loop.for %i = 0 to 4 {
      %v = loop.load %x[%i] : memref<4xf32>
      loop.store %v, %y[%i] : memref<4xf32>
    }
    loop.return
  }
}
"""


def test_text_round_trips_in_order() -> None:
    schedule = Schedule.parse("  threads=128  vector=4 bm=-1 ")
    assert list(schedule.items()) == [("threads", 128), ("vector", 4), ("bm", -1)]
    assert Schedule.parse(schedule.format()) == schedule
    assert Schedule.parse("bm=1 bm=2") == {"bm": 2}
    assert Schedule.parse("") == Schedule() == {}


@pytest.mark.parametrize("text", ["bm=", "bm=x", "=3", "bm", "bm=1.5"])
def test_malformed_text_names_the_pair(text: str) -> None:
    with pytest.raises(ScheduleError, match=f"malformed knob '{text}'"):
        Schedule.parse(text)


@pytest.mark.parametrize("value", [True, 1.5, "4"])
def test_only_integers_are_knobs(value: object) -> None:
    with pytest.raises(ScheduleError, match="knobs map names to integers"):
        Schedule({"bm": value})  # type: ignore[dict-item]


def test_with_knobs_keeps_places_and_is_a_new_value() -> None:
    first = Schedule({"bm": 64, "bn": 32})
    second = first.with_knobs({"group": 8, "bm": 128})
    assert list(second.items()) == [("bm", 128), ("bn", 32), ("group", 8)]
    assert first == {"bm": 64, "bn": 32}  # unchanged
    assert hash(Schedule({"a": 1, "b": 2})) == hash(Schedule({"b": 2, "a": 1}))


@pytest.mark.parametrize("op", [loop.KernelOp, tile.KernelOp])
def test_declared_on_both_kernels(op: type) -> None:
    assert "schedule" in op.get_irdl_definition().attributes


def test_parsed_on_a_loop_kernel_and_carried_to_the_tile_kernel() -> None:
    module = parse(KERNEL.replace("SCHEDULE", "{threads = 64 : i64, vector = 2 : i64}"))
    (kernel,) = module.ops
    assert isinstance(kernel, loop.KernelOp)
    assert Schedule.of(kernel) == Schedule.parse("threads=64 vector=2")
    ConvertLoopToTilePass().apply(make_context(), module)
    (converted,) = module.ops
    assert isinstance(converted, tile.KernelOp)
    assert list(Schedule.of(converted).items()) == [("threads", 64), ("vector", 2)]


def test_a_knob_that_is_not_an_integer_does_not_verify() -> None:
    with pytest.raises(VerifyException, match=r"loop.kernel @k: schedule knob 'bm' must be an"):
        parse(KERNEL.replace("SCHEDULE", '{bm = "wide"}'))


def test_attr_round_trip_and_write_on() -> None:
    schedule = Schedule({"bm": 128, "group": 8})
    attr = schedule.to_attr()
    assert attr == DictionaryAttr({"bm": IntegerAttr(128, 64), "group": IntegerAttr(8, 64)})
    assert Schedule.from_attr(attr) == schedule and Schedule.from_attr(None) == {}
    with pytest.raises(ScheduleError):
        Schedule.from_attr(DictionaryAttr({"bm": StringAttr("x")}))


def test_the_cache_stores_and_returns_the_same_schedule() -> None:
    knobs = Schedule.parse("bm=64 bn=32 group=4 splits=2")
    record = TuneRecord(
        CacheKey("hash", "model:h100", "nvcc", "model"), "k", knobs, 1.0, 2.0, 3, 0.5, 0
    )
    assert isinstance(record.knobs, Schedule)
    back = _decode_row(_row_from_record(record))
    assert isinstance(back.knobs, Schedule)
    assert list(back.knobs.items()) == list(knobs.items())
