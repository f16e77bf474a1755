/**
 * Bounded, seeded, replayable property runs: `npm test` runs few cases,
 * `npm run fuzz` many (FUZZ_RUNS). A failure prints fast-check's seed and
 * path; FUZZ_SEED replays it.
 */
export const FUZZ_RUNS = Number(process.env.FUZZ_RUNS ?? 300)
export const FUZZ_SEED = process.env.FUZZ_SEED === undefined ? 20261121 : Number(process.env.FUZZ_SEED)

export function runs(scale = 1): { numRuns: number; seed: number } {
  return { numRuns: Math.max(1, Math.round(FUZZ_RUNS * scale)), seed: FUZZ_SEED }
}
