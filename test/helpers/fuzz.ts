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

/** The code points a string holds once UTF-16 is well formed: all but the surrogates (U+D800 to U+DFFF). */
const SURROGATES = 0x800
const CODE_POINTS = 0x110000 - SURROGATES
/**
 * fast-check's `'binary'` string unit, any one code point but a lone surrogate, drawn and shrunk alike (the same
 * index, drawn by `nat`, for the same seed), without the table of all 1,112,064 characters that fast-check builds
 * to read a string back into units (a second of CPU in each process that draws one).
 */
export const CODE_POINT = fc.nat({ max: CODE_POINTS - 1 }).map(
  (index) => String.fromCodePoint(index < 0xd800 ? index : index + SURROGATES),
  (unit) => {
    const point = typeof unit === 'string' ? unit.codePointAt(0) : undefined
    if (point === undefined || String.fromCodePoint(point) !== unit || (point >= 0xd800 && point < 0xe000))
      throw new Error('not one code point')
    return point < 0xd800 ? point : point - SURROGATES
  },
)
