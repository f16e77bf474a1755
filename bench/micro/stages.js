// One tinybench run over every stage of the hot path. Cheap operations are
// repeated `batch` times per sample, so that the timer's own cost (about
// 50-100 ns a call) does not flatten the ratios between them.
import { Bench } from 'tinybench'
import { serializeError } from '../../dist/errors.js'
import { replaceUnsupported } from '../../dist/narrative.js'
import { hashPassword } from '../../dist/credentials/hash.js'
import { CredentialStore } from '../../dist/credentials/store.js'
import { AUTHORIZATION, PASSWORD, USER } from '../lib/fixtures.js'
import { setup } from './setup.js'

/** `--quick`'s sampling time per task, in ms: BENCH_MICRO_MS shortens it where only the printed report counts (test/bench.test.ts). */
const QUICK_MS = Number(process.env.BENCH_MICRO_MS) || 80

let sink = 0
const keep = (value) => {
  sink ^= value === undefined ? 1 : value === true ? 2 : 3
}

/** name -> function; `batch` calls per sample. */
function rows(s) {
  const { checks, typebox, ajv, ajvAll, bytes, text, docs, headers } = s
  const invalidRejection = checks.checkBody('sale', bytes.invalid)
  const worstRejection = checks.checkBody('sale', bytes.worst)
  const line1 = 'Mind Palace Ltd, London'
  const line1Odd = 'Café Ünïcode ☕ & Co. #42'
  return [
    ['headers', 'Content-Type + Accept (exact values)', () => keep(checks.checkHead(headers.exact)), 1000],
    ['headers', 'Content-Type + Accept (parameters, q-list)', () => keep(checks.checkHead(headers.parsed)), 200],
    ['parse', `JSON.parse (${bytes.valid.length} B sale)`, () => keep(JSON.parse(text.valid) !== null), 200],
    ['schema', 'valid body: TypeBox compiled', () => keep(typebox.check(docs.valid)), 1000],
    ['schema', 'valid body: Ajv compiled', () => keep(ajv(docs.valid)), 1000],
    ['schema', 'invalid body: TypeBox compiled', () => keep(typebox.check(docs.invalid)), 1000],
    ['schema', 'invalid body: Ajv compiled', () => keep(ajv(docs.invalid)), 1000],
    ['errors', 'every error, mapped: TypeBox errors()', () => keep(typebox.errors(docs.invalid).length > 0), 50],
    ['errors', 'every error, raw: Ajv allErrors', () => keep(ajvAll(docs.invalid)), 200],
    ['body', 'checkBody, valid sale', () => keep(checks.checkBody('sale', bytes.valid).ok), 100],
    ['body', 'checkBody, invalid sale (3 field errors)', () => keep(checks.checkBody('sale', bytes.invalid).ok), 50],
    [
      'body',
      `checkBody, valid sale padded to ${(bytes.padded.length / 1024).toFixed(1)} KiB`,
      () => keep(checks.checkBody('sale', bytes.padded).ok),
      1,
    ],
    [
      'body',
      `checkBody, worst case (${(bytes.worst.length / 1024).toFixed(1)} KiB)`,
      () => keep(checks.checkBody('sale', bytes.worst).ok),
      1,
    ],
    ['serialize', 'error body: fast-json-stringify', () => keep(serializeError(invalidRejection.body).length > 0), 500],
    ['serialize', 'error body: JSON.stringify', () => keep(JSON.stringify(invalidRejection.body).length > 0), 500],
    [
      'serialize',
      'worst-case error body: fast-json-stringify',
      () => keep(serializeError(worstRejection.body).length > 0),
      20,
    ],
    ['narrative', 'replaceUnsupported, all supported', () => keep(replaceUnsupported(line1).length > 0), 1000],
    ['narrative', 'replaceUnsupported, accents + emoji', () => keep(replaceUnsupported(line1Odd).length > 0), 500],
  ]
}

/** The median sample: on a noisy 2-core machine it moves less than the mean. */
function row(stage, name, result, batch) {
  const usPerOp = (result.latency.p50 * 1000) / batch
  return { stage, name, usPerOp, opsPerSec: 1e6 / usPerOp }
}

export async function runMicro({ quick }) {
  const s = setup()
  const bench = new Bench({ time: quick ? QUICK_MS : 300, warmupTime: quick ? QUICK_MS / 4 : 60, iterations: 10 })
  const list = rows(s)
  for (const [, name, fn, batch] of list) {
    bench.add(name, () => {
      for (let i = 0; i < batch; i++) fn()
    })
  }
  await bench.run()
  const results = list.map(([stage, name, , batch], i) => {
    const r = bench.tasks[i].result
    return row(stage, name, r, batch)
  })
  results.push(...(await credentialRows(quick)))
  const worst = s.checks.checkBody('sale', s.bytes.worst)
  return {
    results,
    worst: {
      bytes: s.bytes.worst.length,
      errors: worst.ok ? 0 : (worst.body.validationErrors?.length ?? 0),
      status: worst.status,
    },
    sink,
  }
}

/** Check 1: a header seen before (SHA-256 + LRU look-up) against one that must be verified (scrypt). */
async function credentialRows(quick) {
  const users = [{ username: USER, password: await hashPassword(PASSWORD), entities: ['default'] }]
  const cached = new CredentialStore(users)
  await cached.authenticate(AUTHORIZATION)
  // A clock that jumps past the TTL on every read: each call misses the cache and runs scrypt.
  let clock = 0
  const uncached = new CredentialStore(users, { cacheTtlMs: 1, now: () => (clock += 1000) })
  const fast = new Bench({ time: quick ? QUICK_MS : 300, warmupTime: 50, iterations: 10 })
  fast.add('cached', () => {
    for (let i = 0; i < 200; i++) keep(cached.authenticate(AUTHORIZATION).username === USER)
  })
  await fast.run()
  const slow = new Bench({ time: quick ? 100 : 500, warmupTime: 0, warmupIterations: 1, iterations: quick ? 3 : 10 })
  slow.add('uncached', async () => keep((await uncached.authenticate(AUTHORIZATION)).username === USER))
  await slow.run()
  return [
    row('credentials', 'BasicAuth, cached (SHA-256 + LRU)', fast.tasks[0].result, 200),
    row('credentials', 'BasicAuth, uncached (scrypt N=16384)', slow.tasks[0].result, 1),
  ]
}
