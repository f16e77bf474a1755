// The one pairing routine of the bench. Every ratio it states is the median of per-pair ratios: the two
// servers of a ratio measured one right after the other, the order swapped every pair. On a shared
// machine a minute moves the figures by more than a change costs, while a pair's two halves are seconds
// apart. Everything here but `measurePasses` is a pure function (test/bench.test.ts checks them).

/** Rounds shorter than this many seconds make a smoke test: figures, and no verdict (issue 43). */
export const MIN_SECONDS = 3

/** Fewer pairs than this make a smoke test too: a median of two or three pairs decides nothing. */
export const MIN_PAIRS = 4

/** The middle value, or the mean of the two middle values; NaN for none. */
export function median(values) {
  const sorted = values.filter(Number.isFinite).sort((x, y) => x - y)
  const middle = sorted.length >> 1
  if (sorted.length === 0) return Number.NaN
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

/** Whether runs of these settings only show that the bench works: too short or too few to decide. */
export const isSmoke = ({ seconds, pairs }) => seconds < MIN_SECONDS || pairs < MIN_PAIRS

/** The warning a run prints, writes into its results and its chart's title when the machine was busy at its start. */
export function loadWarning(load1) {
  return load1 > 1
    ? `the 1-minute load average was ${load1.toFixed(2)} at the start (above 1): other work shared the machine, so its figures are noisy and its verdicts doubtful`
    : undefined
}

/**
 * Chains that measure every pair in `edges` (`[numerator, denominator]` side ids): the two sides of each
 * edge are neighbours in exactly one chain, and no side is twice in one chain. A chain is measured
 * forwards, then backwards on the next pass (`passOrder`), so every edge's two rounds are one right after
 * the other with their order swapped every pass; a side in several ratios (the gateway against the
 * forwarder, the pass-through and the store turned off) is measured once a chain instead of once a ratio.
 */
export function chainsOf(edges) {
  const left = []
  for (const [a, b] of edges) {
    if (a === b)
      throw new Error(`a ratio pairs ${a} with itself: an A/A arm pairs two processes of one build (${a}' and ${a}'')`)
    if (!left.some((e) => e.includes(a) && e.includes(b))) left.push([a, b])
  }
  const chains = []
  while (left.length > 0) {
    const chain = left.shift()
    for (;;) {
      const next = (end) => left.findIndex((e) => e.includes(end) && !chain.includes(other(e, end)))
      const atEnd = next(chain.at(-1))
      if (atEnd >= 0) {
        chain.push(other(left.splice(atEnd, 1)[0], chain.at(-1)))
        continue
      }
      const atStart = next(chain[0])
      if (atStart < 0) break
      chain.unshift(other(left.splice(atStart, 1)[0], chain[0]))
    }
    chains.push(chain)
  }
  return chains
}

const other = ([a, b], side) => (a === side ? b : a)

/** The order of a chain on pass `pass` (from 0): as given on even passes, reversed on odd ones. */
export const passOrder = (chain, pass) => (pass % 2 === 0 ? chain : [...chain].reverse())

/**
 * The paired rounds: `pairs` passes, each measuring every chain in its pass's order, `measure(id, seconds,
 * pass)` resolving to one round of side `id` (`{ cpuUs, ... }`) in pass `pass` (from 0). Resolves to each
 * chain with its rounds, one `{ [id]: round }` per pass.
 */
export async function measurePasses(chains, { pairs, seconds }, measure, log = () => {}) {
  const measured = chains.map((chain) => ({ chain, rounds: [] }))
  for (let pass = 0; pass < pairs; pass++) {
    log(`pair ${pass + 1}/${pairs}: ${chains.map((c) => passOrder(c, pass).join(' ')).join(', ')}; ${seconds} s each`)
    for (const { chain, rounds } of measured) {
      const round = {}
      for (const id of passOrder(chain, pass)) round[id] = await measure(id, seconds, pass)
      rounds.push(round)
    }
  }
  return measured
}

/**
 * `combine(round of x, round of y)` for each pass of the chain in which x and y are neighbours (empty when
 * no chain pairs them): by default CPU(x)/CPU(y) per request.
 */
export function perPair(measured, x, y, combine = (rx, ry) => rx.cpuUs / ry.cpuUs) {
  const found = measured.find(
    ({ chain }) => chain.includes(x) && chain.includes(y) && Math.abs(chain.indexOf(x) - chain.indexOf(y)) === 1,
  )
  return found === undefined ? [] : found.rounds.map((round) => combine(round[x], round[y]))
}

/** Every round of side `id`, in whichever chains it was measured. */
export const roundsOf = (measured, id) => measured.flatMap(({ rounds }) => rounds.map((r) => r[id]).filter(Boolean))

/**
 * What a ratio's pairs say: their median, their range, and how many pairs fell on each side of `pivot`
 * (the ratio's target, or 1: which of the two was the cheaper).
 */
export function pairStats(values, pivot = 1) {
  const finite = values.filter(Number.isFinite)
  return {
    median: median(finite),
    min: finite.length === 0 ? Number.NaN : Math.min(...finite),
    max: finite.length === 0 ? Number.NaN : Math.max(...finite),
    above: finite.filter((v) => v > pivot).length,
    below: finite.filter((v) => v < pivot).length,
    count: finite.length,
    pivot,
  }
}

/** A ratio's pairs: their median, range and how many fell each side of its target (or 1), and each side's median CPU in them. */
export function ratioFigures(ratio, measured) {
  const pairs = (combine) => perPair(measured, ratio.numerator, ratio.denominator, combine)
  const values = pairs()
  return {
    ...ratio,
    ...pairStats(values, ratio.pivot ?? ratio.target ?? 1),
    values,
    numeratorCpuUs: median(pairs((n) => n.cpuUs)),
    denominatorCpuUs: median(pairs((_, d) => d.cpuUs)),
  }
}

/** p99 (c) against p99 (b) in the pairs of c/b, when c/b was paired: the difference in each pair (ms). */
export function p99Pairs(measured) {
  const differences = perPair(measured, 'c', 'b', (c, b) => c.p99 - b.p99)
  return differences.length === 0 ? undefined : { ...pairStats(differences, 0), values: differences }
}

/**
 * The verdict on a ratio's median: `met`, `missed`, `no target`, `n/a` (no figure), or `no verdict` in a
 * smoke test. `atMost` ratios are held to a ceiling, the others to a floor.
 */
export function judge({ target, atMost }, value, smoke) {
  if (!Number.isFinite(value)) return 'n/a'
  if (target === undefined) return 'no target'
  if (smoke) return 'no verdict'
  return (atMost ? value <= target : value >= target) ? 'met' : 'missed'
}

/**
 * A ratio's median as printed, to three places and rounded away from its target's side: 1.297 held to a
 * floor of 1.3 reads 1.297, never 1.30 next to a miss; 1.0805 held to a ceiling of 1.08 reads 1.081.
 */
export function shown(value, atMost = false) {
  if (!Number.isFinite(value)) return 'n/a'
  const rounded = atMost ? Math.ceil(value * 1000 - 1e-9) : Math.floor(value * 1000 + 1e-9)
  return (rounded / 1000).toFixed(3)
}
