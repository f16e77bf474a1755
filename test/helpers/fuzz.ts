import fc from 'fast-check'

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

/** Values at the edges of what JSON carries: long strings, long digit runs, extreme and imprecise numbers. */
export const HUGE_VALUES = fc.constantFrom<unknown>(
  'x'.repeat(60_000),
  '9'.repeat(5000),
  1e308,
  -1e308,
  Number.MAX_SAFE_INTEGER + 2,
  5e-324,
)
/** Where to put them: named fields of each type, and an unnamed one. */
export const HUGE_FIELDS = fc.constantFrom(
  'transactionReference',
  'merchant.entity',
  'instruction.value.amount',
  'instruction.narrative.line1',
  'instruction.narrative.line2',
  'extra',
)

/**
 * Sets (or with `remove`, deletes) the member at a dotted path of a body;
 * nothing happens where the path runs through a value that is not an object.
 */
export function setPath(body: Record<string, unknown>, path: string, value: unknown, remove = false): void {
  const keys = path.split('.')
  const last = keys.pop() as string
  let node: unknown = body
  for (const key of keys) {
    if (node === null || typeof node !== 'object') return
    node = (node as Record<string, unknown>)[key]
  }
  if (node === null || typeof node !== 'object') return
  if (remove) delete (node as Record<string, unknown>)[last]
  else (node as Record<string, unknown>)[last] = value
}
