import { test } from "node:test";
import assert from "node:assert/strict";
import { floorSlopePerSecond, seededRandom, shuffledFloorSlopeBand, type Point } from "../harness/floor-slope.ts";

/** Issue 47: the soak's leak fit follows the floor of readings whose noise (requests in flight) is on one side only. */

const mb = 1024 * 1024;
/** Five stretches of 12 readings 30 s apart, each at its own level: floor + slope, plus 0–30 MB on a third of them. */
function readings(mbPerTenMinutes: number, seed: number): Point[][] {
  // Seeded, so the test reads the same on every run.
  const next = seededRandom(seed);
  return Array.from({ length: 5 }, (_, g) =>
    Array.from({ length: 12 }, (_, i) => {
      const t = g * 480_000 + i * 30_000;
      const inFlight = next() < 1 / 3 ? next() * 30 * mb : 0;
      return { t, y: 300 * mb + g * 5 * mb + (mbPerTenMinutes * mb * t) / 600_000 + inFlight };
    }),
  );
}

const perTen = (groups: Point[][]) => (floorSlopePerSecond(groups) * 600) / mb;

test("issue 47 floor slope: a flat floor under 30 MB of one-sided noise reads flat, a rise of 2 MB per 10 min reads 2", () => {
  for (const seed of [1, 2, 3, 4, 5]) {
    assert.ok(Math.abs(perTen(readings(0, seed))) < 0.3, `flat, seed ${seed}: ${perTen(readings(0, seed)).toFixed(2)}`);
    assert.ok(Math.abs(perTen(readings(2, seed)) - 2) < 0.3, `2 MB per 10 min, seed ${seed}: ${perTen(readings(2, seed)).toFixed(2)}`);
  }
});

test("issue 47 floor slope: each stretch has its own level (a step at a fault is not a slope); under 3 readings, no slope", () => {
  const steps = [0, 1, 2].map((g) => [0, 1, 2, 3].map((i) => ({ t: g * 600_000 + i * 60_000, y: (100 + 50 * g) * mb })));
  assert.equal(perTen(steps), 0);
  assert.ok(Number.isNaN(floorSlopePerSecond([[{ t: 0, y: 1 }, { t: 1, y: 2 }]])));
});

test("issue 47 floor slope: the shuffled band holds a flat series' slope, and not a rise of 2 MB per 10 min", () => {
  const toPerTen = (perSecond: number) => (perSecond * 600) / mb;
  for (const seed of [1, 2, 3]) {
    const flat = readings(0, seed).flat();
    const band = shuffledFloorSlopeBand(flat, 100);
    assert.ok(toPerTen(band.low) < 0 && toPerTen(band.high) > 0, `seed ${seed}: ${toPerTen(band.low).toFixed(2)} to ${toPerTen(band.high).toFixed(2)}`);
    const rising = readings(2, seed).flat();
    const slope = toPerTen(floorSlopePerSecond([rising]));
    assert.ok(slope > toPerTen(shuffledFloorSlopeBand(rising, 100).high), `seed ${seed}: ${slope.toFixed(2)} is above what the shuffled readings give`);
  }
});
