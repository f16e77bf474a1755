// How many payments the memory store of retry protection holds within its default bounds, each with the
// demo backend's answer (lib/demo/backend.ts) to the bench's sale, and what an entry really takes in memory.
// `node --expose-gc bench/entries.js [DIST]`: DIST is another build directory (dist/ by default), to
// measure a build before a change next to this one.
import { request } from 'node:http'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { ACCEPT, AUTHORIZATION, CONTENT_TYPE, SALE_PATH, bytesOf, validSale } from './lib/fixtures.js'

const dist = resolve(process.argv[2] ?? new URL('../dist', import.meta.url).pathname)
const load = (path) => import(pathToFileURL(resolve(dist, path)).href)
const { startDemoBackend } = await load('demo/backend.js')
const { relayedHeaders } = await load('proxy/hop-by-hop.js')
const { MemoryIdempotencyStore } = await load('idempotency/memory.js')
const { createFingerprinter, processFingerprintKeys } = await load('idempotency/fingerprint.js')
const { idempotencyKey } = await load('idempotency/key.js')
const { IDEMPOTENCY_DEFAULTS } = await load('defaults.js')
if (typeof globalThis.gc !== 'function') throw new Error('run with node --expose-gc')

/** The demo backend's answer to one sale, as the gateway records it: status, headers without hop-by-hop ones, body. */
async function demoAnswer(body) {
  const backend = await startDemoBackend()
  try {
    return await new Promise((done, fail) => {
      const req = request(
        `${backend.url}${SALE_PATH}`,
        { method: 'POST', headers: { 'content-type': CONTENT_TYPE, accept: ACCEPT, authorization: AUTHORIZATION } },
        (res) => {
          const chunks = []
          res.on('data', (chunk) => chunks.push(chunk))
          res.on('end', () =>
            done({ status: res.statusCode, headers: relayedHeaders(res.rawHeaders), body: Buffer.concat(chunks) }),
          )
        },
      )
      req.on('error', fail)
      req.end(body)
    })
  } finally {
    await backend.close()
  }
}

const sale = validSale()
const answer = await demoAnswer(bytesOf(sale))
const placeholder = { status: 500, headers: [], body: Buffer.alloc(0) }
const store = new MemoryIdempotencyStore({
  ttlMs: 86_400_000,
  inFlightMs: 65_000,
  oversizedAnswer: placeholder,
  unknownAnswer: placeholder,
})
let sequence = 0

const fingerprinter = createFingerprinter(processFingerprintKeys())

/** One payment as the gateway keeps it: claimed with its key and fingerprint, then recorded with the demo's answer. */
function pay() {
  sale.transactionReference = `order-${String(++sequence).padStart(12, '0')}`
  const forwarded = bytesOf(sale)
  const key = idempotencyKey(sale.merchant.entity, sale.transactionReference)
  const claim = store.claim(key, fingerprinter.of('sale', forwarded, () => []).value)
  if (claim.state !== 'claimed') throw new Error(`a fresh reference was ${claim.state}`)
  store.record(key, claim.token, answer)
}

/** Bytes in use by the process's JavaScript heap and its off-heap buffers, after a full collection. */
function used() {
  globalThis.gc()
  const m = process.memoryUsage()
  return m.heapUsed + m.external
}

// The first entries also grow the store's fixed structures: what an entry takes is measured after them.
for (let i = 0; i < 10_000; i++) pay()
const before = { used: used(), size: store.size }
let paid = 10_000
for (let last = -1; store.size > last; paid++) {
  last = store.size
  pay()
}
const after = { used: used(), size: store.size }
const perEntry = (after.used - before.used) / (after.size - before.size)
const answerBytes = answer.body.length + answer.headers.reduce((n, h) => n + Buffer.byteLength(h), 0)

process.stdout.write(
  [
    `build: ${dist}`,
    `bounds: ${IDEMPOTENCY_DEFAULTS.maxEntries} entries, ${IDEMPOTENCY_DEFAULTS.maxBytes} bytes`,
    `the demo's answer: ${answer.status}, ${answer.headers.length / 2} headers, ${answer.body.length} bytes of body (${answerBytes} with the headers)`,
    `payments held when the first was evicted: ${store.size} (after ${paid} payments)`,
    `${store.size >= IDEMPOTENCY_DEFAULTS.maxEntries ? 'the entry bound binds' : 'the byte bound binds'}`,
    `memory an entry takes (heap and off-heap growth after a full GC, from ${before.size} to ${after.size} entries): ${perEntry.toFixed(0)} bytes`,
    `counted against maxBytes: ${(store.bytes / store.size).toFixed(0)} bytes an entry`,
    '',
  ].join('\n'),
)
