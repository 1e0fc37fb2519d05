"""The bug catalogue (kvpool.mutants) against the lockstep machine: every mutant must die.

One test hunts all the catalogued mutants in two fresh interpreters, half the catalogue
each, side by side: the verdicts must not depend on what earlier tests in a pytest worker
left behind (in one worker, ``count-accepts-bool`` survived in-process and died alone).
Each mutant gets the ``mutant`` profile (the deterministic ``ci`` profile with shorter
runs: 300 examples of up to 20 steps, small pools, shrinking capped at 30 improvements),
and the test asserts that every one is killed. Per mutant it records what caught it and
the shortest failing sequence Hypothesis found, in ``mutant_kills.json`` under pytest's
temporary directory (the path is printed; ``kvpool.oracle.machine.minimal_trace(name)``
recomputes one). A second test shows the same machine passes the real pool with the same
settings, so the kills are the bugs' doing, not the machine's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvpool import mutants
from kvpool.impl import BlockPool
from kvpool.oracle.machine import MUTANT_FOCUS, hunt, impl_config, profile

RULES = {
    "error kind differs",
    "result differs: ids",
    "result differs: events",
    "result differs: value",
    "fired differs",
    "state differs",
    "ERR-ATOMIC",
    "unraisable differs",
    "target crashed",
    "INV-REF",
    "INV-FREE",
    "INV-NULL",
    "INV-WATCH",
    "INV-CACHE",
    "INV-EVENTS",
    "INV-CONSERVE",
    "INV-LIST",
}


def test_the_catalogue_is_large_and_well_formed() -> None:
    assert len(mutants.MUTANTS) >= 25
    for m in mutants.MUTANTS:
        assert m.story and m.breaks and set(m.breaks) <= RULES, m.name
        assert m.pool_patches or m.queue_patches, m.name
        cls = m.pool_class()  # every patch applies exactly once to today's source
        assert cls is not BlockPool and issubclass(cls, object)
        assert cls(4, True, enable_kv_cache_events=False).get_num_free_blocks() in (2, 3, 4)


def test_a_patch_that_no_longer_applies_is_refused() -> None:
    stale = mutants.Mutant(
        "stale",
        "text that is not in the source",
        ("state differs",),
        pool_patches=(("this text is nowhere", ""),),
    )
    with pytest.raises(mutants.MutantDoesNotApply):
        stale.pool_class()


def test_the_real_pool_survives_the_catalogue_settings() -> None:
    found = hunt(BlockPool, impl_config(**MUTANT_FOCUS), profile("mutant"))
    assert not found.killed, found.message


_KILL_HALF = """
import json, sys
from kvpool import mutants
from kvpool.oracle.machine import kill
records = []
for m in mutants.MUTANTS[int(sys.argv[1]) :: 2]:
    record = kill(m).summary()
    record["story"] = m.story
    record["expected"] = list(m.breaks)
    records.append(record)
print(json.dumps(records))
"""


def test_every_catalogued_mutant_is_killed(tmp_path_factory: pytest.TempPathFactory) -> None:
    halves = [
        subprocess.Popen(
            [sys.executable, "-c", _KILL_HALF, str(i)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in (0, 1)
    ]
    records = []
    for proc in halves:
        out_text, _ = proc.communicate(timeout=1200)
        assert proc.returncode == 0, "a catalogue half crashed"
        records.extend(json.loads(out_text))
    assert sorted(r["target"] for r in records) == sorted(m.name for m in mutants.MUTANTS)
    out: Path = tmp_path_factory.mktemp("catalogue") / "mutant_kills.json"
    out.write_text(json.dumps(records, indent=2))
    print(f"\nper-mutant minimal traces: {out}")
    for r in records:
        print(
            f"  {r['target']:28s} caught by {r['caught_by']!s:24s} "
            f"in {r['steps_in_minimal_trace']} call(s)"
        )
    survivors = [r["target"] for r in records if not r["killed"]]
    assert not survivors, f"mutants the ci profile did not kill: {survivors}"
    for r in records:
        assert r["caught_by"] in RULES, r
