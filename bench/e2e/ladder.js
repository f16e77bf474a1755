// `--ladder`: two ladders, each a server per step, each step the one above it plus one thing the gateway
// does. A ladder is one chain of the pairing routine (lib/pairing.js): measured top to bottom, then bottom
// to top, so each step and the one above it are measured one right after the other, the order swapped
// every pass, and what a step adds is the median of its paired differences.
import { bytesOf, invalidSale, SALE_PATH, validSale } from '../lib/fixtures.js'
import { measurePasses, roundsOf } from '../lib/pairing.js'
import { start, stopAll } from './children.js'
import { round } from './load.js'
import { credentials, measureRound, sanity, summarize } from './run.js'

/**
 * `--ladder`, valid sales: from the bare undici forwarder (u) to the gateway (c), one thing the gateway does
 * added at each step (servers/steps.js), with the http-proxy-3 pass-through (b) as the reference row.
 * `env` is each step's own environment on top of the backend's URL and the users.
 */
export const STEPS = [
  {
    key: 'b',
    name: '(b) http-proxy-3 pass-through, body streamed (reference)',
    server: 'passthrough',
    reference: true,
  },
  { key: 'u', name: '(u) undici forwarder: body read whole, forwarded as it came', server: 'undici' },
  { key: 'parsed', name: '+ parsed, forwarded re-serialized', server: 'steps', env: { BENCH_STEP: 'parsed' } },
  {
    key: 'checked',
    name: '+ every check of the core (auth, headers, body, schema, policy, rewrites)',
    server: 'steps',
    env: { BENCH_STEP: 'checked' },
  },
  {
    key: 'quiet0',
    name: 'payments-gate without logs and metrics, retry protection off',
    server: 'steps',
    env: { BENCH_STEP: 'gateway', BENCH_IDEMPOTENCY: 'off' },
  },
  {
    key: 'quiet',
    name: '+ retry protection (memory store)',
    server: 'steps',
    env: { BENCH_STEP: 'gateway', BENCH_IDEMPOTENCY: 'memory' },
  },
  {
    key: 'c',
    name: '(c) payments-gate (+ JSON logs, Prometheus metrics)',
    server: 'gateway',
    env: { BENCH_IDEMPOTENCY: 'memory' },
  },
]

/**
 * `--ladder`, refusals: from node's own floor (a bare server reading the body and sending the gateway's 400
 * answer as fixed bytes) to the gateway refusing (d), one thing added at each step (servers/refusal-steps.js).
 */
export const REFUSAL_STEPS = [
  {
    key: 'floor',
    name: 'node:http: body read whole, a fixed 400 answer',
    server: 'refusal-steps',
    env: { BENCH_STEP: 'floor' },
  },
  { key: 'parsed', name: '+ parsed', server: 'refusal-steps', env: { BENCH_STEP: 'parsed' } },
  {
    key: 'checked',
    name: '+ every check of the core instead (auth, headers, parse, schema check, error walk)',
    server: 'refusal-steps',
    env: { BENCH_STEP: 'checked' },
  },
  {
    key: 'answered',
    name: '+ the answer built from the refusal (error body serialized)',
    server: 'refusal-steps',
    env: { BENCH_STEP: 'answered' },
  },
  {
    key: 'quiet',
    name: 'payments-gate without logs and metrics',
    server: 'refusal-steps',
    env: { BENCH_STEP: 'gateway' },
  },
  {
    key: 'd',
    name: '(d) payments-gate (+ JSON logs, Prometheus metrics)',
    server: 'gateway',
    env: { BENCH_IDEMPOTENCY: 'memory' },
  },
]

export const LADDERS = [
  { key: 'valid', steps: STEPS, body: 'valid', expect: 201 },
  { key: 'refused', steps: REFUSAL_STEPS, body: 'invalid', expect: 400 },
]

/** Each ladder under the same load, its steps one chain of paired rounds; `s` as e2e/plan.js's `settings`. */
export async function runLadder({ s, log }) {
  const bodies = { valid: bytesOf(validSale()), invalid: bytesOf(invalidSale()) }
  const { headers, users } = await credentials()
  const ladders = []
  for (const ladder of LADDERS) {
    try {
      const backend = await start('backend')
      if (backend.error) throw new Error(backend.error)
      const body = bodies[ladder.body]
      const targets = []
      for (const step of ladder.steps) {
        const env = { BENCH_TARGET: backend.url, BENCH_USERS: users, BENCH_STEP: '', BENCH_DIST: '', ...step.env }
        const server = await start(`ladder ${ladder.key} ${step.key}`, env, [], step.server)
        const t = {
          ...step,
          id: step.key,
          expect: ladder.expect,
          child: server.child,
          url: server.url && `${server.url}${SALE_PATH}`,
          error: server.error,
        }
        if (t.error === undefined) t.error = await sanity(t, body, headers)
        targets.push(t)
      }
      const live = targets.filter((t) => t.error === undefined)
      const load = (t, seconds) => round(t.url, { body, headers, connections: s.connections, seconds })
      log(`ladder ${ladder.key}: warm-up ${s.warmupSeconds} s per step`)
      for (const t of live) await load(t, s.warmupSeconds)
      const byKey = Object.fromEntries(live.map((t) => [t.key, t]))
      const measured = await measurePasses(
        [live.map((t) => t.key)],
        s,
        (key, seconds) => measureRound(byKey[key], seconds, load),
        (text) => log(`ladder ${ladder.key}: ${text}`),
      )
      ladders.push({
        key: ladder.key,
        steps: targets.map((t) => ({ ...summarize(t, roundsOf(measured, t.key)), reference: t.reference })),
      })
    } finally {
      await stopAll()
    }
  }
  return { settings: s, ladders }
}
