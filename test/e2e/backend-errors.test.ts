import { writeFile } from 'node:fs/promises'
import { request, type ServerResponse } from 'node:http'
import { join } from 'node:path'
import t from 'tap'
import { compileBackendErrors, type BackendErrorRules } from '../../lib/backend-errors/rules.js'
import { ERRORS, serializeError } from '../../lib/errors.js'
import { serverErrorMessage } from '../../lib/proxy/faults.js'
import type { ReloadOutcome } from '../../lib/watch.js'
import { boundPorts, spawnCli } from '../helpers/cli.js'
import { RESPONSE_TYPE, SALE_PATH, saleBody, TEST_PAN, writeCredentials } from '../helpers/fixtures.js'
import { paymentHeaders, send, until, type Reply } from '../helpers/http.js'
import { loggedRequests, scanLogsForCards } from '../helpers/logs.js'
import { startBackend, type Answer } from '../helpers/servers.js'
import { startGateway } from '../helpers/surfaces.js'

/**
 * docs/backend-faults.md, "The backend's error answers": a legacy backend
 * that answers every kind of error in its own way, behind the real proxy,
 * and what the client gets of each.
 */

const json = { 'content-type': 'application/json' }
const ownFormat = (message: string) => JSON.stringify({ errorName: 'cardIsBlocked', message, card: TEST_PAN })

/** The legacy backend's answers, chosen by the part of the payment's transactionReference before `.`. */
const LEGACY: Readonly<Record<string, (res: ServerResponse) => void>> = {
  html404: (res) =>
    res.writeHead(404, { 'content-type': 'text/html', 'x-backend': 'legacy' }).end('<h1>Not Found</h1>'),
  empty422: (res) => res.writeHead(422).end(),
  currency400: (res) => res.writeHead(400, json).end('{"code":"E_CURRENCY","detail":"EUR is not enabled"}'),
  other400: (res) => res.writeHead(400, json).end(`{"code":"E_OTHER","detail":"card ${TEST_PAN} was refused"}`),
  limit402: (res) => res.writeHead(402, json).end(`{"code":"E_LIMIT","detail":"card ${TEST_PAN} is over its limit"}`),
  bearer401: (res) => res.writeHead(401, { 'www-authenticate': 'Bearer realm="legacy"' }).end('no'),
  bare401: (res) => res.writeHead(401).end('no'),
  forbidden403: (res) => res.writeHead(403, { 'www-authenticate': 'Bearer' }).end('<html>forbidden</html>'),
  method405: (res) => res.writeHead(405, { allow: 'PUT' }).end(),
  busy429: (res) => res.writeHead(429, { 'retry-after': '30' }).end('slow down'),
  teapot418: (res) => res.writeHead(418).end('short and stout'),
  own409: (res) => res.writeHead(409, { ...json, 'x-backend': 'legacy' }).end(ownFormat(`card ${TEST_PAN} is blocked`)),
  html502: (res) => res.writeHead(502, { 'content-type': 'text/html' }).end('<h1>Bad gateway</h1>'),
  busy503: (res) => res.writeHead(503, { 'retry-after': '7' }).end('busy'),
  own500: (res) => res.writeHead(500, json).end(ownFormat(`card ${TEST_PAN} is blocked`)),
  created201: (res) => res.writeHead(201, { 'content-type': RESPONSE_TYPE }).end('{"outcome":"authorized"}'),
  redirect303: (res) => res.writeHead(303, { location: '/payments/1' }).end(),
}

const legacy: Answer = (req, res, body) => {
  const reference = req.url === SALE_PATH ? String(JSON.parse(body.toString()).transactionReference) : 'html404'
  ;(LEGACY[reference.split('.')[0] as string] as (res: ServerResponse) => void)(res)
}

const RULES = {
  rules: [
    { status: 400, match: { '$.code': 'E_CURRENCY' }, errorName: 'currencyIsNotSupported' },
    {
      status: '4xx',
      match: { '$.code': 'E_LIMIT' },
      errorName: 'cardLimitIsReached',
      message: 'The card limit is reached.',
      messageFrom: '$.detail',
    },
  ],
}

let references = 0
function pay(url: string, kind: string, reference = `${kind}.${++references}`): Promise<Reply> {
  return send(url, { headers: paymentHeaders(), body: { ...saleBody(), transactionReference: reference } })
}

const standard = (errorName: keyof typeof ERRORS) => serializeError({ errorName, message: ERRORS[errorName].message })

const dir = t.testdir({ 'rules.json': JSON.stringify(RULES) })
const rulesFile = join(dir, 'rules.json')
/** What each reload of the rules file did. */
const reloads: ReloadOutcome[] = []
const { url, backend } = await startGateway(t, {
  answer: legacy,
  idempotency: 'memory',
  gate: { backendErrors: rulesFile, onBackendErrorsReload: (outcome) => void reloads.push(outcome) },
})

t.test('without a matching rule: the standard body, named by status, with the backend status', async (t) => {
  const cases: [string, number, keyof typeof ERRORS][] = [
    ['html404', 404, 'resourceIsNotFound'],
    ['empty422', 422, 'requestIsNotProcessable'],
    ['other400', 400, 'requestIsInvalid'],
    ['forbidden403', 403, 'accessDenied'],
    ['teapot418', 418, 'requestIsRefused'],
    ['html502', 502, 'internalErrorOccurred'],
  ]
  for (const [kind, status, name] of cases) {
    const reply = await pay(url, kind)
    t.equal(reply.status, status, `${kind}: the backend's status`)
    // A payment's 5xx has an unknown outcome, and its message says so (docs/backend-faults.md).
    const expected =
      status >= 500 ? serializeError({ errorName: name, message: serverErrorMessage('replayed') }) : standard(name)
    t.equal(reply.text, expected, `${kind}: ${name}, nothing of the backend's body`)
    t.equal(reply.headers['content-type'], 'application/json')
    t.equal(reply.headers['content-length'], String(reply.body.length))
    t.equal(reply.headers['x-backend'], undefined, `${kind}: nothing of the backend's other headers`)
    t.equal(reply.headers['www-authenticate'], undefined)
  }
})

t.test('the headers the status needs are kept', async (t) => {
  const bearer = await pay(url, 'bearer401')
  t.match(bearer, {
    status: 401,
    json: { errorName: 'accessDenied' },
    headers: { 'www-authenticate': 'Bearer realm="legacy"' },
  })
  const bare = await pay(url, 'bare401')
  t.match(
    bare,
    {
      status: 401,
      json: { errorName: 'accessDenied' },
      headers: { 'www-authenticate': 'Basic realm="payments", charset="UTF-8"' },
    },
    "RFC 9110: the gateway's own challenge",
  )
  t.match(await pay(url, 'method405'), {
    status: 405,
    json: { errorName: 'methodIsNotAllowed' },
    headers: { allow: 'PUT' },
  })
  t.match(await pay(url, 'busy429'), {
    status: 429,
    json: { errorName: 'requestRateIsTooHigh' },
    headers: { 'retry-after': '30' },
  })
  t.match(await pay(url, 'busy503'), {
    status: 503,
    json: { errorName: 'serviceUnavailable' },
    headers: { 'retry-after': '7' },
  })
})

t.test(
  'rules: a matching rule names the answer; its message may come from the body, card numbers masked',
  async (t) => {
    const currency = await pay(url, 'currency400')
    t.equal(currency.status, 400)
    t.equal(currency.text, standard('currencyIsNotSupported'))
    const limit = await pay(url, 'limit402')
    t.equal(limit.status, 402, "the backend's status wins")
    t.same(limit.json, { errorName: 'cardLimitIsReached', message: 'card 444433******1111 is over its limit' })
    t.notOk(limit.text.includes(TEST_PAN))
    const line = loggedRequests().find((entry) => entry.status === 402)
    t.match(line, { errorName: 'cardLimitIsReached', operation: 'sale' }, 'the log line names it')
  },
)

t.test('answers in the error format pass as they are, card numbers masked', async (t) => {
  const conflict = await pay(url, 'own409')
  t.equal(conflict.status, 409)
  t.same(conflict.json, {
    errorName: 'cardIsBlocked',
    message: 'card 444433******1111 is blocked',
    card: '444433******1111',
  })
  t.equal(conflict.headers['x-backend'], 'legacy', 'with its own headers')
  t.equal(conflict.headers['content-length'], String(conflict.body.length))
})

t.test('2xx and 3xx pass unchanged, and a 2xx streams before the backend has finished', async (t) => {
  t.match(await pay(url, 'created201'), {
    status: 201,
    text: '{"outcome":"authorized"}',
    headers: { 'content-type': RESPONSE_TYPE },
  })
  t.match(await pay(url, 'redirect303'), { status: 303, text: '', headers: { location: '/payments/1' } })
  const streamer = await startGateway(t, { gate: { backendErrors: rulesFile } })
  let finish: () => void = () => {}
  streamer.backend.answer = (_req, res) => {
    res.writeHead(200, { 'content-type': RESPONSE_TYPE })
    res.write('{"outcome":')
    finish = () => res.end('"authorized"}')
  }
  const first = await new Promise<string>((resolve, reject) => {
    const req = request(`${streamer.url}${SALE_PATH}`, { method: 'POST', headers: paymentHeaders() })
    req.on('response', (res) =>
      res.once('data', (chunk: Buffer) => resolve(chunk.toString())).on('end', () => undefined),
    )
    req.on('error', reject)
    req.end(JSON.stringify(saleBody()))
  })
  t.equal(first, '{"outcome":', 'the first chunk reached the client while the backend still held the rest')
  finish()
})

t.test("createGateway's own backendErrors wins over the gate's", async (t) => {
  const own = compileBackendErrors({
    rules: [{ status: 400, errorName: 'currencyIsNotSupported', message: 'Named by the gateway.' }],
  }) as BackendErrorRules
  const started = await startGateway(t, {
    answer: legacy,
    backendErrors: { rules: own },
    gate: { backendErrors: rulesFile },
  })
  t.same((await pay(started.url, 'other400')).json, {
    errorName: 'currencyIsNotSupported',
    message: 'Named by the gateway.',
  })
})

t.test('a path passed through keeps the 5xx-only rule: its 4xx streams unchanged', async (t) => {
  const reply = await send(url, { method: 'GET', path: '/status' })
  t.equal(reply.status, 404)
  t.equal(reply.text, '<h1>Not Found</h1>')
  t.equal(reply.headers['x-backend'], 'legacy')
})

t.test('retry protection replays what the client first got; a 4xx frees the key', async (t) => {
  for (const kind of ['html502', 'own500']) {
    const reference = `${kind}.replayed`
    const first = await pay(url, kind, reference)
    const before = backend.received.length
    const retry = await pay(url, kind, reference)
    t.equal(backend.received.length, before, `${kind}: the retry is not forwarded`)
    t.equal(retry.headers['idempotent-replayed'], 'true')
    t.equal(retry.status, first.status)
    t.equal(retry.text, first.text, `${kind}: the replay is the body the client got`)
    t.notOk(retry.text.includes(TEST_PAN))
    for (const name of ['content-type', 'content-length', 'retry-after'])
      t.equal(retry.headers[name], first.headers[name], `${kind}: ${name}`)
  }
  const reference = 'currency400.released'
  t.equal((await pay(url, 'currency400', reference)).status, 400)
  const before = backend.received.length
  const again = await pay(url, 'currency400', reference)
  t.equal(backend.received.length, before + 1, 'forwarded again: the client may fix a refused payment and retry')
  t.equal(again.text, standard('currencyIsNotSupported'))
})

t.test('the rules file is hot reloaded; an invalid version keeps the last good rules', async (t) => {
  const rules = {
    rules: [
      {
        status: 400,
        match: { '$.code': 'E_CURRENCY' },
        errorName: 'currencyIsNotConfigured',
        message: 'Ask us to enable this currency.',
      },
    ],
  }
  await writeFile(rulesFile, JSON.stringify(rules))
  t.ok(
    await until(async () => (await pay(url, 'currency400')).json.errorName === 'currencyIsNotConfigured'),
    'the new rule answers',
  )
  const before = reloads.length
  await writeFile(rulesFile, '{"rules": [{"status": 999}]}')
  t.ok(
    await until(() =>
      reloads.slice(before).some((outcome) => outcome.refused.some(({ reason }) => reason.includes('.status: '))),
    ),
    'the invalid version was read, and refused',
  )
  t.same((await pay(url, 'currency400')).json, {
    errorName: 'currencyIsNotConfigured',
    message: 'Ask us to enable this currency.',
  })
  await writeFile(rulesFile, JSON.stringify(RULES))
  t.ok(await until(async () => (await pay(url, 'currency400')).json.errorName === 'currencyIsNotSupported'), 'and back')
})

t.test('the real process: an invalid rules file stops serve with the file and the reason, exit 2', async (t) => {
  const bad = join(dir, 'bad.json')
  await writeFile(bad, '{"rules": [{"status": 400, "errorName": "brandNewName"}]}')
  const credentials = await writeCredentials(t.testdir())
  const run = spawnCli([
    'serve',
    '--target',
    'http://127.0.0.1:1',
    '--credentials',
    credentials,
    '--policies',
    'policies',
    '--backend-errors',
    bad,
  ])
  t.equal(await run.exited, 2)
  t.equal(
    run.output().stderr,
    `payments-gate serve: --backend-errors: ${bad}: $.rules[0].message: "brandNewName" is not in the error table, so the rule must give its message; fix it (payments-gate check-backend-errors FILE lists every problem)\n`,
  )
})

t.test('the real process: serve --backend-errors names a legacy answer', async (t) => {
  const credentials = await writeCredentials(t.testdir())
  const legacyBackend = await startBackend(legacy)
  t.teardown(() => legacyBackend.close())
  const run = spawnCli(
    [
      'serve',
      '--listen',
      '127.0.0.1:0',
      '--target',
      legacyBackend.url,
      '--credentials',
      credentials,
      '--policies',
      'policies',
      '--shutdown-delay',
      '0',
    ],
    { PAYMENTS_GATE_BACKEND_ERRORS: rulesFile },
  )
  t.teardown(() => run.child.kill('SIGTERM'))
  const { listen: port } = await boundPorts(run)
  const reply = await pay(`http://127.0.0.1:${port}`, 'limit402')
  t.same(reply.json, { errorName: 'cardLimitIsReached', message: 'card 444433******1111 is over its limit' })
  run.child.kill('SIGTERM')
  t.equal(await run.exited, 0)
  t.notOk(run.output().stdout.includes(TEST_PAN), 'no whole card number in its log')
})

scanLogsForCards(t)
