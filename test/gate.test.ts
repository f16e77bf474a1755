import t from 'tap'
import { createGate, type Gate } from '../lib/gate.js'
import { MemoryIdempotencyStore } from '../lib/idempotency/memory.js'
import { OVERSIZED_ANSWER, UNKNOWN_OUTCOME } from '../lib/idempotency/protection.js'
import { serializeError } from '../lib/errors.js'
import { CASES } from './helpers/cases.js'
import { TEST_PAN } from './helpers/fixtures.js'
import { type Reply, send } from './helpers/http.js'
import { scanLogsForCards } from './helpers/logs.js'
import { type Echo, everyEmbedding } from './helpers/surfaces.js'

/** The answer's parts that must not differ between embeddings (Express adds X-Powered-By, Fastify its own headers). */
function comparable(answer: Reply) {
  const { headers } = answer
  return {
    status: answer.status,
    contentType: headers['content-type'],
    contentLength: headers['content-length'],
    wwwAuthenticate: headers['www-authenticate'],
    allow: headers.allow,
    connection: headers.connection,
    body: answer.body.toString('latin1'),
  }
}

t.test('the shared table gives the same answers from the node handler, Express, Fastify and the proxy', async (t) => {
  const { embeddings, agent } = await everyEmbedding(t)

  for (const c of CASES) {
    await t.test(c.name, async (t) => {
      const answers: Reply[] = []
      for (const embedding of embeddings) {
        const before = embedding.handled()
        const answer = await send(embedding.port, c, agent)
        answers.push(answer)
        t.equal(answer.status, c.status, `${embedding.name}: status`)
        for (const [name, value] of Object.entries(c.responseHeaders ?? {})) t.equal(answer.headers[name], value, `${embedding.name}: ${name}`)
        const passed = c.errorName === undefined
        t.equal(embedding.handled() - before, passed ? 1 : 0, `${embedding.name}: ${passed ? 'handed to the application once' : 'never handed to the application'}`)
        if (c.errorName !== undefined) {
          t.equal(answer.headers['content-type'], 'application/json', `${embedding.name}: content-type`)
          const body = JSON.parse(answer.body.toString())
          t.equal(body.errorName, c.errorName, `${embedding.name}: errorName`)
          t.type(body.message, 'string', `${embedding.name}: a message`)
          if (c.match !== undefined) t.match(body, c.match, `${embedding.name}: the answer's fields`)
          if (c.rejection !== undefined) t.equal(answer.body.toString(), serializeError(c.rejection.body), `${embedding.name}: the serializer's bytes`)
          t.notOk(answer.text.includes(TEST_PAN), `${embedding.name}: the answer does not hold the card number`)
        } else if (c.status === 201) {
          const echo = JSON.parse(answer.body.toString()) as Echo
          t.equal(echo.username, 'shop-1', `${embedding.name}: principal`)
          t.equal(echo.entity, (echo.document as { merchant: { entity: string } }).merchant.entity, `${embedding.name}: entity`)
        } else {
          t.equal(answer.body.toString(), 'other', `${embedding.name}: untouched`)
        }
      }
      if (c.errorName !== undefined) {
        const [first, ...rest] = answers.map(comparable)
        for (const [i, other] of rest.entries()) t.same(other, first, `${embeddings[i + 1]!.name} answers byte for byte as node`)
      }
    })
  }
})

t.test('the application receives the rewritten document', async (t) => {
  const { gate, embeddings, agent } = await everyEmbedding(t)
  const clean = CASES[0]!
  const expected = gate.checks.checkBody('sale', Buffer.from(clean.body as string))
  t.ok(expected.ok)
  for (const embedding of embeddings) {
    const echo = JSON.parse((await send(embedding.port, clean, agent)).body.toString()) as Echo
    t.same(echo.document, expected.ok && expected.document, `${embedding.name}: the document the checks produced`)
    const { merchant, instruction } = echo.document as { merchant: { mcc: string }; instruction: { narrative: { line1: string } } }
    t.equal(merchant.mcc, '5734', `${embedding.name}: mcc filled in from the policy`)
    t.equal(instruction.narrative.line1, 'Mind Palace Ltd   Caf   ', `${embedding.name}: line1 replaced and truncated`)
    t.same([echo.operation, echo.entity, echo.username], ['sale', 'default', 'shop-1'])
  }
})

t.test('own policy source and authenticator; close is a no-op without a watched folder', async (t) => {
  const gate: Gate = await createGate({
    policies: new Map(),
    credentials: { authenticate: () => ({ username: 'u', entities: new Set(['default']) }) },
  })
  const verdict = gate.checks.checkBody('recurring', Buffer.from(JSON.stringify({})))
  t.equal(verdict.ok, false)
  t.equal(gate.checks.bodyLimit, 65536)
  t.equal(gate.checks.mediaTypes.request, 'application/vnd.example.payments-v6+json')
  gate.close()
})

t.test('retry protection: a store of your own is used and closed with the gate; off leaves none', async (t) => {
  const store = new MemoryIdempotencyStore({ ttlMs: 1000, inFlightMs: 1000, oversizedAnswer: OVERSIZED_ANSWER, unknownAnswer: UNKNOWN_OUTCOME })
  let closed = false
  const own = Object.assign(store, { close: async () => void (closed = true) })
  const options = { policies: new Map(), credentials: { authenticate: () => ({ username: 'u', entities: new Set<string>() }) } }
  const gate = await createGate({ ...options, idempotency: own })
  t.ok(gate.retryProtection)
  await gate.close()
  t.ok(closed, 'closed with the gate')
  const off = await createGate({ ...options, idempotency: 'off' })
  t.equal(off.retryProtection, undefined)
  await off.close()
})

t.test('without policies, the folder ./policies is loaded and watched', async (t) => {
  const gate = await createGate({ credentials: { authenticate: () => ({ username: 'u', entities: new Set<string>() }) } })
  t.teardown(() => gate.close())
  t.ok(gate.policies.get('default'), 'the sample policy of the working folder')
})

t.test('a gate that cannot start releases its store, and a bad store spec stops it', async (t) => {
  const dir = t.testdir({ 'bad.json': '{"users": 1}' })
  let closed = false
  const store = Object.assign(new MemoryIdempotencyStore({ ttlMs: 1000, inFlightMs: 1000, oversizedAnswer: OVERSIZED_ANSWER, unknownAnswer: UNKNOWN_OUTCOME }), {
    close: async () => void (closed = true),
  })
  await t.rejects(createGate({ credentials: `${dir}/bad.json`, idempotency: store }), { code: 'ECREDENTIALS' })
  t.ok(closed, 'the store is closed when start-up fails')
  await t.rejects(createGate({ credentials: `${dir}/bad.json`, idempotency: 'off' }), { code: 'ECREDENTIALS' })
  await t.rejects(createGate({ credentials: `${dir}/bad.json`, idempotency: 'mongodb://x' }), { code: 'EIDEMPOTENCY' })
})

scanLogsForCards(t)
