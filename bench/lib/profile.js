// Reads the CPU profiles `--profile` took during the measured rounds and says
// where each server's CPU went, in microseconds per request, by what the
// sampled function belongs to.
import { readFileSync } from 'node:fs'

/**
 * The category of a sampled frame (the function running, not its callers).
 * V8 charges a builtin such as JSON.stringify to the function that called
 * it, so "payments-gate" includes re-serializing the document.
 */
const CATEGORIES = [
  [
    'writev (socket writes, and native time V8 samples there)',
    (f) => f.url === '' && /^write(v|Buffer|Utf8String|Latin1String)$/.test(f.functionName),
  ],
  ['native parse (JSON.parse; URL parsing in http-proxy-3)', (f) => f.url === '' && f.functionName === 'parse'],
  ['garbage collection', (f) => f.functionName === '(garbage collector)'],
  [
    'schema check (TypeBox)',
    (f) => f.url.includes('/@sinclair/typebox/') || (f.url === '' && f.functionName === 'check'),
  ],
  ['logs (pino)', (f) => /\/(pino|sonic-boom|pino-std-serializers)\//.test(f.url) || f.url.endsWith('/dist/log.js')],
  ['metrics (prom-client)', (f) => f.url.includes('/prom-client/') || f.url.endsWith('/dist/metrics.js')],
  [
    'credential cache (SHA-256, lru-cache)',
    (f) => f.url.includes('/lru-cache/') || f.url.startsWith('node:internal/crypto'),
  ],
  ['http-proxy-3', (f) => f.url.includes('/http-proxy-3/')],
  ['payments-gate (checks, proxy, re-serializing)', (f) => f.url.includes('/dist/')],
  ["node's HTTP, streams, events", (f) => f.url.startsWith('node:')],
  ['V8 and other native code', () => true],
]

export const CATEGORY_NAMES = CATEGORIES.map(([name]) => name)

/** Microseconds per request by category, for the profile in `file`; idle time is left out. */
export function cpuBreakdown(file, requests) {
  if (!(requests > 0)) return undefined
  const profile = JSON.parse(readFileSync(file, 'utf8'))
  const frames = new Map(profile.nodes.map((node) => [node.id, node.callFrame]))
  const totals = new Map(CATEGORY_NAMES.map((name) => [name, 0]))
  for (let i = 0; i < profile.samples.length; i++) {
    const frame = frames.get(profile.samples[i])
    if (frame.functionName === '(idle)') continue
    const [name] = CATEGORIES.find(([, matches]) => matches(frame))
    totals.set(name, totals.get(name) + (profile.timeDeltas[i] ?? 0))
  }
  const perRequest = new Map([...totals].map(([name, us]) => [name, us / requests]))
  perRequest.set(
    'total',
    [...perRequest.values()].reduce((sum, us) => sum + us, 0),
  )
  return perRequest
}
