"""Stopping background tasks ends them even when a cancellation is lost (Python 3.11's ``wait_for`` race)."""

from __future__ import annotations

import asyncio

import pytest

from agent_runtime.infra.tasks import cancel_and_wait


async def _loses_one_cancellation(ran: list[str]) -> None:
    """A loop that, like one around 3.11's ``wait_for`` at the wrong moment, carries on after its first cancel."""
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        ran.append("lost the first cancel")
    while True:
        await asyncio.sleep(0.01)


async def test_a_task_that_lost_its_cancellation_is_cancelled_again_until_it_ends() -> None:
    ran: list[str] = []
    task = asyncio.create_task(_loses_one_cancellation(ran))
    await asyncio.sleep(0.01)
    await asyncio.wait_for(cancel_and_wait([task], every=0.05), 5)
    assert task.cancelled()
    assert ran == ["lost the first cancel"]


async def test_none_entries_finished_tasks_and_failures_are_all_fine() -> None:
    async def fails() -> None:
        raise RuntimeError("boom")

    failed = asyncio.create_task(fails())
    await asyncio.sleep(0)
    sleeping = asyncio.create_task(asyncio.sleep(3600))
    await cancel_and_wait([None, failed, sleeping])
    assert sleeping.cancelled()
    with pytest.raises(RuntimeError, match="boom"):
        failed.result()
