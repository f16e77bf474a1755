// `npm run soak [-- --quick]`: a bounded run of mixed requests against the built gateway in a child
// process, with its RSS and heap after a full GC at intervals, and the growth over the second half.
// Exits 1 when an answer was missing or unexpected, or when RSS grew by more than the target.
import { fork } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { cpus } from 'node:os'
import { parseArgs } from 'node:util'
import autocannon from 'autocannon'
import { hashPassword } from 'payments-gate'
import { start, stopAll } from './e2e/children.js'
import {
  ACCEPT,
  AUTHORIZATION,
  CONTENT_TYPE,
  PASSWORD,
  SALE_PATH,
  USER,
  bytesOf,
  invalidSale,
  validSale,
} from './lib/fixtures.js'
import { freshBodies } from './lib/references.js'

const { values } = parseArgs({ options: { quick: { type: 'boolean' } } })
// A third of the requests are forwarded payments, and the memory store holds about 90,000 of them:
// 600,000 requests fill it in the first half, so the second half measures a full store, and a leak.
const TOTAL = values.quick ? 30_000 : 600_000
const INTERVALS = 10
const CONNECTIONS = 16
const TARGET_GROWTH_MB = 50
const RECURRING_PATH = '/payments/authorizations/migrateRecurring'
const log = (message) => process.stderr.write(`${message}\n`)
const mb = (bytes) => bytes / 2 ** 20

/**
 * The mix, one autocannon request list that every connection cycles through: 4 valid of 10, the
 * rest refused for different reasons (each exercising another path through the gateway), plus one
 * path that is passed through untouched. Every JSON body carries a transactionReference of its own
 * (bench/lib/references.js), so that no valid payment is a retry of an earlier one.
 */
const json = { 'content-type': CONTENT_TYPE, accept: ACCEPT, authorization: AUTHORIZATION }
const recurring = validSale()
delete recurring.channel
delete recurring.customer
delete recurring.instruction.scheme
recurring.instruction.intent = 'subscription'
/** autocannon builds a request anew on each send only when it has a setupRequest of its own. */
const fresh = (value) => {
  const next = freshBodies(bytesOf(value))
  return { setupRequest: (req) => ({ ...req, body: next() }) }
}
const MIX = [
  { name: 'valid sale', expect: 201, method: 'POST', path: SALE_PATH, headers: json, ...fresh(validSale()) },
  { name: 'valid recurring', expect: 201, method: 'POST', path: RECURRING_PATH, headers: json, ...fresh(recurring) },
  {
    name: 'invalid sale (schema)',
    expect: 400,
    method: 'POST',
    path: SALE_PATH,
    headers: json,
    ...fresh(invalidSale()),
  },
  {
    name: 'not JSON',
    expect: 400,
    method: 'POST',
    path: SALE_PATH,
    headers: json,
    body: '{"transactionReference": "x",',
  },
  { name: 'valid sale', expect: 201, method: 'POST', path: SALE_PATH, headers: json, ...fresh(validSale()) },
  // Refusals before the body is read close the connection (its body is not read); most here have no body, to keep connections alive.
  { name: 'no credentials', expect: 401, method: 'POST', path: SALE_PATH, headers: { 'content-type': CONTENT_TYPE } },
  {
    name: 'wrong password (locked out after 10)',
    expect: 401,
    method: 'POST',
    path: SALE_PATH,
    headers: { ...json, authorization: `Basic ${Buffer.from(`${USER}-other:nope`).toString('base64')}` },
  },
  { name: 'other path, passed through', expect: 201, method: 'GET', path: '/payments/events/1', headers: {} },
  { name: 'wrong method (405)', expect: 405, method: 'GET', path: SALE_PATH, headers: {} },
  {
    name: 'wrong content type (415, connection closed)',
    expect: 415,
    method: 'POST',
    path: SALE_PATH,
    headers: { ...json, 'content-type': 'text/plain' },
    body: '{}',
  },
]
const EXPECTED = new Set(MIX.map((request) => String(request.expect)))

function startGateway(env) {
  const child = fork(new URL('./soak/gateway.js', import.meta.url), [], {
    env: { ...process.env, ...env },
    execArgv: ['--expose-gc'],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  })
  process.on('exit', () => child.kill('SIGKILL'))
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`the gateway child exited with ${code}`)))
    child.on('message', function ready(message) {
      if (message?.port === undefined) return
      child.off('message', ready)
      resolve({ child, url: `http://127.0.0.1:${message.port}` })
    })
  })
}

function memoryAfterGc(child) {
  return new Promise((resolve) => {
    child.on('message', function answer(message) {
      if (message?.afterGc === undefined) return
      child.off('message', answer)
      resolve(message.afterGc)
    })
    child.send('memory-after-gc')
  })
}

function load(url, amount) {
  return new Promise((resolve, reject) => {
    const requests = MIX.map(({ name, expect, ...request }) => request)
    autocannon({ url, connections: CONNECTIONS, amount, timeout: 10, requests }, (error, result) =>
      error ? reject(error) : resolve(result),
    )
  })
}

const users = JSON.stringify([{ username: USER, password: await hashPassword(PASSWORD), entities: ['default'] }])
const startedAt = performance.now()
let gateway
try {
  const backend = await start('backend')
  if (backend.error) throw new Error(backend.error)
  gateway = await startGateway({ BENCH_TARGET: backend.url, BENCH_USERS: users })
  const samples = [{ requests: 0, ...(await memoryAfterGc(gateway.child)) }]
  const statuses = {}
  let problems = 0
  let sent = 0
  for (let interval = 1; interval <= INTERVALS; interval++) {
    // autocannon can stop short of `amount`: run again until the interval's share is sent.
    for (const quota = (TOTAL / INTERVALS) * interval; sent < quota;) {
      const result = await load(gateway.url, quota - sent)
      sent += result.requests.total
      problems += result.errors + result.timeouts
      for (const [status, { count }] of Object.entries(result.statusCodeStats)) {
        statuses[status] = (statuses[status] ?? 0) + count
        if (!EXPECTED.has(status)) problems += count
      }
    }
    samples.push({ requests: sent, ...(await memoryAfterGc(gateway.child)) })
    const last = samples.at(-1)
    log(`${sent} requests: RSS ${mb(last.rss).toFixed(1)} MB, heap used ${mb(last.heapUsed).toFixed(1)} MB`)
  }
  // Growth is measured over the second half of the run: in the first, the gateway's retry-protection
  // store fills up to its bound with every payment, by design (docs/idempotency.md); a leak goes on
  // growing after that, a bounded cache does not.
  const warm = samples[Math.floor((samples.length - 1) / 2)]
  const last = samples.at(-1)
  const growth = { rss: mb(last.rss - warm.rss), heap: mb(last.heapUsed - warm.heapUsed) }
  const seconds = (performance.now() - startedAt) / 1000
  const report = [
    `# payments-gate soak${values.quick ? ' (--quick)' : ''}`,
    '',
    `node ${process.version}, ${cpus().length} cores; ${sent} requests in ${seconds.toFixed(0)} s over ${CONNECTIONS} connections; ${new Date().toISOString()}`,
    `Requests each connection cycles through: ${MIX.map((request) => request.name).join(', ')}.`,
    `Answers: ${Object.entries(statuses)
      .map(([status, count]) => `${status} x ${count}`)
      .join(', ')}; connection errors and timeouts: ${problems}.`,
    '',
    '| requests | RSS after GC (MB) | heap used after GC (MB) |',
    '| ---: | ---: | ---: |',
    ...samples.map((s) => `| ${s.requests} | ${mb(s.rss).toFixed(1)} | ${mb(s.heapUsed).toFixed(1)} |`),
    '',
    `Growth over the second half (from ${warm.requests} to ${last.requests} requests): RSS ${growth.rss.toFixed(1)} MB, heap used ${growth.heap.toFixed(1)} MB (target: RSS < ${TARGET_GROWTH_MB} MB).`,
    '',
  ].join('\n')
  process.stdout.write(report)
  mkdirSync(new URL('./results/', import.meta.url), { recursive: true })
  writeFileSync(new URL('./results/soak.md', import.meta.url), report)
  process.exitCode = problems > 0 || growth.rss >= TARGET_GROWTH_MB ? 1 : 0
} finally {
  gateway?.child.kill('SIGKILL')
  await stopAll()
}
