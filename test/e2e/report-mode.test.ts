import { writeFile, rename } from 'node:fs/promises'
import { join } from 'node:path'
import t from 'tap'
import { createMetrics } from '../../lib/metrics.js'
import { boundPorts, spawnCli } from '../helpers/cli.js'
import {
  AUTH,
  basic,
  BODY_LIMIT,
  OTHER_PATH,
  policyJson,
  RECURRING_PATH,
  REQUEST_TYPE,
  SALE_PATH,
  saleBody,
  TEST_PAN,
  USERNAME,
  writeCredentials,
} from '../helpers/fixtures.js'
import { paymentHeaders, raw, send, until } from '../helpers/http.js'
import { loggedRequests, scanLogsForCards, watchCrashes } from '../helpers/logs.js'
import { startRedis } from '../helpers/redis.js'
import { freePort, startBackend } from '../helpers/servers.js'
import { startGateway } from '../helpers/surfaces.js'

// Report mode (docs/rollout.md), end to end: real backends on loopback, the proxy in this process and the real CLI.
const crashCheck = watchCrashes(t)
const metrics = createMetrics({ defaultMetrics: false })
const { url, port, backend } = await startGateway(t, {
  metrics,
  idempotency: 'memory',
  gate: { mode: 'report', bodyLimit: BODY_LIMIT },
})

/** The log line of the request sent to `path`. */
const lineOf = (path: string) => loggedRequests().find((line) => line.path === path)

const rewritten = saleBody({ transactionReference: 'report-rewrite' })
rewritten.instruction.narrative = { line1: 'Shop 1 – order 1234567890', line2: 'thanks!' }
const luhn = saleBody({ transactionReference: 'report-luhn' })
luhn.instruction.paymentInstrument.cardNumber = `${TEST_PAN.slice(0, -1)}2`
const yen = saleBody({ transactionReference: 'report-yen' })
yen.instruction.value.currency = 'JPY'

interface Case {
  readonly name: string
  readonly body: string | Buffer
  readonly headers?: Record<string, string>
  readonly chunked?: boolean
  readonly entity?: string
  readonly wouldRefuse?: string
  readonly wouldRewrite?: string[]
}

const cases: Case[] = [
  {
    name: 'a sale enforce would rewrite (narrative, mcc, white space)',
    body: `  ${JSON.stringify(rewritten)}\n`,
    entity: 'default',
    wouldRewrite: ['line1Characters', 'line1Truncated', 'line2Characters', 'mccFilledIn', 'reserialized'],
  },
  {
    name: 'a card number that fails the Luhn check',
    body: JSON.stringify(luhn),
    entity: 'default',
    wouldRefuse: 'bodyDoesNotMatchSchema',
  },
  {
    name: 'a currency the policy refuses',
    body: JSON.stringify(yen),
    entity: 'default',
    wouldRefuse: 'currencyIsNotSupported',
  },
  {
    name: 'an entity without a policy',
    body: JSON.stringify(saleBody({ entity: 'ghost' })),
    entity: 'ghost',
    wouldRefuse: 'entityIsNotConfigured',
  },
  {
    name: 'an Accept enforce would refuse',
    headers: { accept: 'text/html' },
    body: JSON.stringify(saleBody({ transactionReference: 'report-type' })),
    entity: 'default',
    wouldRefuse: 'headerHasInvalidValue',
  },
  {
    name: 'plain JSON, which a backend parsing application/json reads as the checks read it',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(saleBody({ transactionReference: 'report-json' })),
    entity: 'default',
    wouldRefuse: 'headerHasInvalidValue',
  },
  {
    name: 'a +json type (RFC 6839) in UTF-8, chunked',
    headers: { 'content-type': 'application/merchant+json; charset=utf-8' },
    chunked: true,
    body: JSON.stringify(saleBody({ transactionReference: 'report-plus-json' })),
    entity: 'default',
    wouldRefuse: 'headerHasInvalidValue',
  },
  {
    name: 'a chunked body',
    chunked: true,
    body: JSON.stringify(saleBody({ transactionReference: 'report-chunked' })),
    entity: 'default',
    wouldRewrite: ['mccFilledIn'],
  },
]

t.test(
  'the backend receives every request byte for byte as it came, and the log says what enforce would have done',
  async (t) => {
    backend.received.length = 0
    for (const [i, c] of cases.entries()) {
      const path = `${SALE_PATH}?case=${i}`
      const headers = paymentHeaders({ 'x-trace': `case-${i}`, ...c.headers })
      const reply = await send(url, { path, headers, body: c.body, chunked: c.chunked })
      t.equal(reply.status, 201, `${c.name}: the backend's answer`)
      t.same(reply.headers['set-cookie'], ['a=1', 'b=2'], `${c.name}: as it came`)
      const got = backend.received.at(-1)
      t.equal(got?.url, path, `${c.name}: forwarded`)
      t.equal(got?.body.toString('hex'), Buffer.from(c.body).toString('hex'), `${c.name}: byte for byte`)
      t.equal(got?.headers['content-type'], headers['content-type'], `${c.name}: its own Content-Type`)
      t.equal(got?.headers['x-trace'], `case-${i}`)
      t.equal(got?.headers.authorization, AUTH)
      t.equal(got?.headers['content-length'], String(Buffer.byteLength(c.body)), `${c.name}: framed by its length`)
      t.equal(got?.headers['x-forwarded-for'], '127.0.0.1')
      await until(() => lineOf(path) !== undefined)
      t.match(
        lineOf(path),
        {
          mode: 'report',
          status: 201,
          user: USERNAME,
          entity: c.entity,
          wouldRefuse: c.wouldRefuse,
          errorName: undefined,
        },
        `${c.name}: the log line`,
      )
      t.same(lineOf(path)?.wouldRewrite, c.wouldRewrite, `${c.name}: the rewrites`)
    }
    t.equal(backend.received.length, cases.length, 'each forwarded once')
    t.equal(
      lineOf(`${SALE_PATH}?case=0`)?.wouldRetryProtection,
      'claimed',
      'retry protection would have claimed the key',
    )
  },
)

t.test('what report mode still refuses, and the answer enforce gives to what it cannot attribute', async (t) => {
  backend.received.length = 0
  const wrongPassword = await send(url, {
    path: `${SALE_PATH}?case=auth`,
    headers: paymentHeaders({ authorization: basic(USERNAME, 'wrong') }),
    body: saleBody(),
  })
  t.match(wrongPassword, { status: 401, json: { errorName: 'accessDenied' } }, 'BasicAuth')
  const notTheirs = await send(url, {
    path: `${SALE_PATH}?case=entity`,
    headers: paymentHeaders(),
    body: saleBody({ entity: 'eu-tokens' }),
  })
  t.match(notTheirs, { status: 401, json: { errorName: 'accessDenied' } }, "an entity not the user's (check 9)")
  const sale = JSON.stringify(saleBody({ entity: 'eu-tokens' }))
  const unattributable: [string, Parameters<typeof send>[1], number, string][] = [
    ['not JSON', { headers: paymentHeaders(), body: '{"merchant": {"entity": "default"' }, 400, 'bodyIsNotJson'],
    ['not UTF-8', { headers: paymentHeaders(), body: Buffer.from('{"a":"\xff"}', 'latin1') }, 400, 'bodyIsNotJson'],
    ['a byte order mark', { headers: paymentHeaders(), body: `\ufeff${sale}` }, 400, 'bodyIsNotJson'],
    ['a comment', { headers: paymentHeaders(), body: `/* c */${sale}` }, 400, 'bodyIsNotJson'],
    [
      'the entity not a string',
      { headers: paymentHeaders(), body: { ...saleBody(), merchant: { entity: ['eu-tokens'] } } },
      400,
      'bodyDoesNotMatchSchema',
    ],
    [
      'the entity in another letter case',
      { headers: paymentHeaders(), body: { ...saleBody(), merchant: { entity: 'default', Entity: 'eu-tokens' } } },
      400,
      'bodyDoesNotMatchSchema',
    ],
    [
      'the entity repeated',
      {
        headers: paymentHeaders(),
        body: JSON.stringify(saleBody()).replace('"entity":"default"', '"entity":"eu-tokens","entity":"default"'),
      },
      400,
      'bodyDoesNotMatchSchema',
    ],
    [
      'a form, which a backend parsing by declared type reads as another merchant',
      {
        headers: paymentHeaders({ 'content-type': 'application/x-www-form-urlencoded' }),
        body: JSON.stringify({ ...saleBody(), note: '&merchant[entity]=eu-tokens&x=' }),
      },
      415,
      'headerHasInvalidValue',
    ],
    [
      'charset=utf-7',
      {
        headers: paymentHeaders({ 'content-type': `${REQUEST_TYPE}; charset=utf-7` }),
        body: JSON.stringify(saleBody()).replace('{', '{"x":"+ACIALAAiAGUAbgB0AGkAdAB5ACIAOgAi-eu-tokens",'),
      },
      415,
      'headerHasInvalidValue',
    ],
    [
      'a Content-Type enforce refuses',
      { headers: paymentHeaders({ 'content-type': 'text/plain' }), body: JSON.stringify(saleBody()) },
      415,
      'headerHasInvalidValue',
    ],
    [
      'text/json',
      { headers: paymentHeaders({ 'content-type': 'text/json' }), body: JSON.stringify(saleBody()) },
      415,
      'headerHasInvalidValue',
    ],
    [
      'JSON in latin1',
      {
        headers: paymentHeaders({ 'content-type': 'application/json; charset=latin1' }),
        body: JSON.stringify(saleBody()),
      },
      415,
      'headerHasInvalidValue',
    ],
    [
      'gzipped JSON',
      {
        headers: paymentHeaders({ 'content-type': 'application/json', 'content-encoding': 'gzip' }),
        body: JSON.stringify(saleBody()),
      },
      415,
      'headerHasInvalidValue',
    ],
    [
      'JSON that names no entity',
      { headers: paymentHeaders({ 'content-type': 'application/json' }), body: '{"merchant":{}}' },
      415,
      'headerHasInvalidValue',
    ],
    [
      'Content-Encoding: gzip',
      { headers: paymentHeaders({ 'content-encoding': 'gzip' }), body: JSON.stringify(saleBody()) },
      415,
      'headerHasInvalidValue',
    ],
    [
      // Red before: passed on in report mode, its chunks undone and its gzip read as JSON.
      'Transfer-Encoding: gzip, chunked',
      { headers: paymentHeaders({ 'transfer-encoding': 'gzip, chunked' }), body: JSON.stringify(saleBody()) },
      415,
      'headerHasInvalidValue',
    ],
    [
      'Connection naming Authorization, which the gateway would strip',
      { headers: paymentHeaders({ connection: 'authorization' }), body: JSON.stringify(saleBody()) },
      400,
      'headerHasInvalidValue',
    ],
    ['a PUT', { method: 'PUT', headers: paymentHeaders(), body: sale }, 405, 'methodIsNotAllowed'],
    ['a GET', { method: 'GET', path: RECURRING_PATH, headers: { authorization: AUTH } }, 405, 'methodIsNotAllowed'],
    [
      'a declared length over the limit',
      { headers: paymentHeaders(), body: `{"pad":"${'x'.repeat(BODY_LIMIT)}",${sale.slice(1)}` },
      413,
      'bodyIsTooLarge',
    ],
  ]
  for (const [what, request, status, errorName] of unattributable) {
    t.match(await send(url, { path: SALE_PATH, ...request }), { status, json: { errorName } }, what)
  }
  t.equal(backend.received.length, 0, 'none reached the backend')
  await until(() => lineOf(`${SALE_PATH}?case=auth`) !== undefined)
  t.match(lineOf(`${SALE_PATH}?case=auth`), { status: 401, errorName: 'accessDenied', mode: undefined })
  const other = await send(url, { method: 'GET', path: `${OTHER_PATH}?case=other` })
  t.equal(other.status, 201)
  await until(() => lineOf(`${OTHER_PATH}?case=other`) !== undefined)
  t.match(
    lineOf(`${OTHER_PATH}?case=other`),
    { operation: 'other', mode: undefined },
    'other paths pass through as ever, unreported',
  )
})

t.test('a second Content-Type never reaches the backend: it gets the one the checks read', async (t) => {
  backend.received.length = 0
  const body = JSON.stringify({ ...saleBody({ transactionReference: 'report-twice' }), note: '&merchant[entity]=x' })
  const head = [
    `POST ${SALE_PATH}?case=twice HTTP/1.1`,
    'Host: gateway',
    `Authorization: ${AUTH}`,
    `Content-Type: ${REQUEST_TYPE}`,
    'Content-Type: application/x-www-form-urlencoded',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
  ]
  const answer = await raw(port, `${head.join('\r\n')}\r\n\r\n${body}`, { keepOpen: true })
  t.match(answer, /^HTTP\/1\.1 201 /)
  const got = backend.received.at(-1)
  const types = (got?.rawHeaders ?? []).filter(
    (_, i, all) => i % 2 === 1 && all[i - 1]?.toLowerCase() === 'content-type',
  )
  t.same(types, [REQUEST_TYPE], 'node keeps the first, the one checked, and only it is forwarded')
})

t.test(
  "the backend's answers pass as they came, 5xx included, on both engines; a backend that is gone is still the gateway's 503",
  async (t) => {
    backend.answer = (_req, res) => res.writeHead(502, { 'content-type': 'text/plain' }).end('upstream exploded')
    t.teardown(() => {
      backend.answer = (_req, res) => res.writeHead(201, { 'set-cookie': ['a=1', 'b=2'] }).end('{}')
    })
    const payment = await send(url, {
      path: `${SALE_PATH}?case=502`,
      headers: paymentHeaders(),
      body: saleBody({ transactionReference: 'report-502' }),
    })
    t.match(payment, { status: 502, text: 'upstream exploded', headers: { 'content-type': 'text/plain' } }, 'a payment')
    const gone = await startGateway(t, { target: 'http://127.0.0.1:1', gate: { mode: 'report' } })
    t.match(await send(gone.url, { headers: paymentHeaders(), body: saleBody() }), {
      status: 503,
      json: { errorName: 'serviceUnavailable' },
    })
  },
)

t.test(
  'the metrics count what enforce would have refused and rewritten, by operation, error_name or rewrite, and entity',
  async (t) => {
    const text = await metrics.registry.metrics()
    t.match(
      text,
      /payments_gate_would_refuse_total\{operation="sale",error_name="bodyDoesNotMatchSchema",entity="default"\} 1\n/,
    )
    t.match(
      text,
      /payments_gate_would_refuse_total\{operation="sale",error_name="entityIsNotConfigured",entity="ghost"\} 1\n/,
    )
    t.match(text, /payments_gate_would_rewrite_total\{operation="sale",rewrite="mccFilledIn",entity="default"\} \d+\n/)
    t.match(text, /payments_gate_would_rewrite_total\{operation="sale",rewrite="line1Truncated",entity="default"\} 1\n/)
    t.notMatch(text, /accessDenied",entity/, 'a refusal report mode answers is not a would-be refusal')
    t.notMatch(text, /entity="unknown"/, 'report mode reports only what it attributed to an entity')
  },
)

t.test(
  'retry protection does not replay in report mode: a retry is forwarded again, and the log says what enforce would have done',
  async (t) => {
    const dir = t.testdir({ policies: { 'default.json': policyJson('default', { mode: 'enforce' }) } })
    const { url, backend, gate } = await startGateway(t, {
      idempotency: 'memory',
      gate: { mode: 'report', policies: join(dir, 'policies') },
    })
    const body = saleBody({ transactionReference: 'retried' })
    t.equal(
      (await send(url, { path: `${SALE_PATH}?retry=1`, headers: paymentHeaders(), body })).status,
      201,
      'forwarded and recorded while default enforces',
    )
    await writeFile(join(dir, 'next.tmp'), policyJson('default', { mode: 'report' }))
    await rename(join(dir, 'next.tmp'), join(dir, 'policies', 'default.json'))
    t.ok(await until(() => gate.policies.get('default')?.mode === 'report', 10_000), 'default switched to report')
    const retry = await send(url, { path: `${SALE_PATH}?retry=2`, headers: paymentHeaders(), body })
    t.equal(retry.headers['idempotent-replayed'], undefined, 'not a replay')
    const another = structuredClone(body)
    another.instruction.value.amount = 999
    const reused = await send(url, { path: `${SALE_PATH}?retry=3`, headers: paymentHeaders(), body: another })
    t.equal(reused.status, 201, 'nor a 422 for the reference used for another payment')
    t.equal(
      backend.received.length,
      3,
      "every one forwarded: no charge is prevented twice, that is the backend's business now",
    )
    await until(() => lineOf(`${SALE_PATH}?retry=3`) !== undefined)
    t.match(lineOf(`${SALE_PATH}?retry=1`), { retryProtection: 'claimed', mode: undefined })
    t.match(lineOf(`${SALE_PATH}?retry=2`), {
      mode: 'report',
      retryProtection: undefined,
      wouldRetryProtection: 'replayed',
    })
    t.match(lineOf(`${SALE_PATH}?retry=3`), { mode: 'report', wouldRetryProtection: 'alreadyUsed' })
  },
)

t.test(
  'serve --mode report, one entity switched to enforce by a hot-reloaded policy while another stays in report',
  async (t) => {
    const dir = t.testdir({
      policies: { 'default.json': policyJson('default'), 'collections.json': policyJson('collections') },
    })
    const credentials = await writeCredentials(dir)
    const echo = await startBackend()
    t.teardown(() => echo.close())
    const admin = await freePort()
    const run = spawnCli(
      [
        'serve',
        '--listen',
        '127.0.0.1:0',
        '--target',
        echo.url,
        '--credentials',
        credentials,
        '--policies',
        join(dir, 'policies'),
        '--admin',
        `127.0.0.1:${admin}`,
        '--shutdown-delay',
        '0',
      ],
      {
        PAYMENTS_GATE_MODE: 'report',
      },
    )
    t.teardown(() => {
      run.child.kill('SIGTERM')
      return run.exited
    })
    const base = `http://127.0.0.1:${(await boundPorts(run)).listen}`
    const euros = (entity: string, reference: string) => {
      const body = saleBody({ entity, transactionReference: reference })
      body.instruction.value.currency = 'EUR'
      return JSON.stringify(body)
    }
    const before = await send(base, { headers: paymentHeaders(), body: euros('default', 'before') })
    t.equal(before.status, 201, 'report mode: a currency enforce would refuse is passed on')
    // Written then renamed, as an editor or a ConfigMap swap does: the reload never reads half a file.
    await writeFile(join(dir, 'next.tmp'), policyJson('default', { mode: 'enforce' }))
    await rename(join(dir, 'next.tmp'), join(dir, 'policies', 'default.json'))
    t.ok(
      await until(
        async () => (await send(base, { headers: paymentHeaders(), body: euros('default', 'probe') })).status === 400,
        10_000,
      ),
      'default switched to enforce, without a restart',
    )
    const refused = await send(base, { headers: paymentHeaders(), body: euros('default', 'after') })
    t.match(refused, { status: 400, json: { errorName: 'currencyIsNotSupported' } }, 'default: refused')
    const other = await send(base, { headers: paymentHeaders(), body: euros('collections', 'after') })
    t.equal(other.status, 201, 'collections: still in report mode')
    const notJson = await send(base, { headers: paymentHeaders(), body: '{' })
    t.equal(notJson.status, 400, 'a body without a readable entity gets the answer enforce gives')
    t.equal(
      echo.received.filter((got) => got.body.toString().includes('"after"')).length,
      1,
      'only the collections payment reached the backend',
    )
    await run.waitFor(/"entity":"collections".*"wouldRefuse":"currencyIsNotSupported"/)
    const metricsText = await (await fetch(`http://127.0.0.1:${admin}/metrics`)).text()
    t.match(
      metricsText,
      /payments_gate_would_refuse_total\{operation="sale",error_name="currencyIsNotSupported",entity="collections"\} 1\n/,
    )
    t.match(
      metricsText,
      /payments_gate_would_refuse_total\{operation="sale",error_name="currencyIsNotSupported",entity="default"\} [1-9]\d*\n/,
      'default, before the switch (probes included)',
    )
  },
)

t.test(
  "createGateway's mode overrides its gate's, and report mode peeks at a shared Redis store without claiming",
  async (t) => {
    const redis = await startRedis(t)
    if (redis === undefined) return
    const { url, backend } = await startGateway(t, { mode: 'report', idempotency: redis.url })
    const body = saleBody({ transactionReference: 'report-redis' })
    body.instruction.paymentInstrument.cardNumber = `${TEST_PAN.slice(0, -1)}2`
    t.equal(
      (await send(url, { path: `${SALE_PATH}?redis=refused`, headers: paymentHeaders(), body })).status,
      201,
      'the gate enforces, this proxy reports',
    )
    for (const i of [1, 2]) {
      const reply = await send(url, {
        path: `${SALE_PATH}?redis=${i}`,
        headers: paymentHeaders(),
        body: saleBody({ transactionReference: 'report-redis' }),
      })
      t.equal(reply.status, 201)
    }
    t.equal(backend.received.length, 3)
    await until(() => lineOf(`${SALE_PATH}?redis=2`) !== undefined)
    t.match(lineOf(`${SALE_PATH}?redis=refused`), {
      mode: 'report',
      wouldRefuse: 'bodyDoesNotMatchSchema',
      wouldRetryProtection: undefined,
    })
    t.match(
      lineOf(`${SALE_PATH}?redis=2`),
      { mode: 'report', wouldRetryProtection: 'claimed' },
      'the first claimed nothing, so the retry would be claimed too',
    )
  },
)

t.test(
  'Expect: 100-continue over the limit, and a chunked body that grows past it, get the 413 enforce gives',
  async (t) => {
    backend.received.length = 0
    const large = `{"pad":"${'y'.repeat(BODY_LIMIT)}"}`
    const reply = await send(url, {
      path: `${SALE_PATH}?case=continue`,
      headers: paymentHeaders({ expect: '100-continue', 'content-length': String(large.length) }),
      body: large,
    })
    t.match(reply, { status: 413, json: { errorName: 'bodyIsTooLarge' } })
    for (const expect of [{}, { expect: '100-continue' }]) {
      const path = `${SALE_PATH}?case=chunked-large-${Object.keys(expect).length}`
      t.match(
        await send(url, { path, headers: paymentHeaders(expect), body: large, chunked: true }),
        { status: 413, json: { errorName: 'bodyIsTooLarge' } },
        `chunked ${JSON.stringify(expect)}`,
      )
    }
    t.equal(backend.received.length, 0, 'none reached the backend')
  },
)

scanLogsForCards(t)
crashCheck()
