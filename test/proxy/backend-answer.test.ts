import t from 'tap'
import { compileBackendErrors, NO_RULES, type BackendErrorRules } from '../../lib/backend-errors/rules.js'
import { ERRORS, serializeError } from '../../lib/errors.js'
import { clientAnswer, inspected, reasonOf } from '../../lib/proxy/backend-answer.js'

const RULES = compileBackendErrors({
  rules: [
    { status: 400, match: { '$.code': 'E_CURRENCY' }, errorName: 'currencyIsNotSupported' },
    {
      status: '4xx',
      match: { '$.code': 'E_LIMIT' },
      errorName: 'cardLimitIsReached',
      message: 'The card limit is reached.',
      messageFrom: '$.detail',
    },
    { status: 402, errorName: 'paymentIsDeclined', message: 'The payment was declined.' },
  ],
}) as BackendErrorRules

const json = (value: unknown) => Buffer.from(JSON.stringify(value))
const headersOf = (list: readonly string[]) =>
  Object.fromEntries(list.flatMap((item, i) => (i % 2 === 0 ? [[item.toLowerCase(), list[i + 1]]] : [])))

t.test('which answers are read before they go out: every error on the two operations, a 5xx elsewhere', async (t) => {
  for (const status of [200, 201, 204, 301, 304, 399]) t.notOk(inspected(status, true), `${status} streams`)
  for (const status of [400, 404, 499, 500, 503]) t.ok(inspected(status, true), `${status} on an operation is read`)
  t.notOk(inspected(404, false), 'a 4xx on another path streams')
  t.ok(inspected(502, false), 'a 5xx on another path is read')
})

t.test('a body in the error format passes with its status and headers, card numbers masked', async (t) => {
  const own = json({ errorName: 'cardIsBlocked', message: 'Card blocked', extra: [1] })
  const passed = clientAnswer(
    402,
    ['Content-Type', 'application/json', 'X-Trace', 'abc', 'Connection', 'keep-alive', 'Content-Length', '99'],
    own,
    RULES,
  )
  t.equal(passed.body, own, 'the same bytes, not a copy')
  t.same(
    passed.headers,
    ['Content-Type', 'application/json', 'X-Trace', 'abc', 'content-length', String(own.length)],
    'hop-by-hop dropped, the length what is sent',
  )
  t.equal(passed.errorName, undefined)
  const carded = clientAnswer(
    400,
    [],
    json({
      errorName: 'x',
      message: 'card 4444333322221111 refused',
      pan: '4444 3333 2222 1111',
      query: 'pan=4444+3333+2222+1111&ref=99994444333322221111',
    }),
    RULES,
  )
  t.equal(
    carded.body.toString(),
    JSON.stringify({
      errorName: 'x',
      message: 'card 444433******1111 refused',
      pan: '4444 33** **** 1111',
      query: 'pan=4444+33**+****+1111&ref=999944**********1111',
    }),
  )
  const escaped = clientAnswer(
    400,
    [],
    Buffer.from(String.raw`{"errorName":"x","message":"\u00344443333222211 11"}`),
    RULES,
  )
  t.equal(
    JSON.parse(escaped.body.toString()).message,
    '444*********11 11',
    'a JSON escape of a digit read decoded and as written, the body still JSON',
  )
  t.same(carded.headers, ['content-length', String(carded.body.length)])
})

t.test('any other body: the standard body with the backend status, named by status without a rule', async (t) => {
  const cases: [number, Buffer | undefined, string][] = [
    [400, json({ code: 'E_OTHER' }), 'requestIsInvalid'],
    [404, Buffer.from('<h1>Not found</h1>'), 'resourceIsNotFound'],
    [409, Buffer.alloc(0), 'requestIsInConflict'],
    [422, Buffer.alloc(0), 'requestIsNotProcessable'],
    [418, json({ errorName: 5, message: 'x' }), 'requestIsRefused'],
    [403, json('denied'), 'accessDenied'],
    [502, json(null), 'internalErrorOccurred'],
    [503, undefined, 'serviceUnavailable'],
  ]
  for (const [status, body, name] of cases) {
    const answer = clientAnswer(status, ['Content-Type', 'text/html', 'Set-Cookie', 'a=1'], body, NO_RULES)
    t.equal(answer.status, status, `${name}: the backend's status`)
    t.equal(answer.errorName, name)
    t.equal(
      answer.body.toString(),
      serializeError({ errorName: name, message: ERRORS[name as keyof typeof ERRORS].message }),
    )
    t.same(
      answer.headers,
      ['content-type', 'application/json', 'content-length', String(answer.body.length)],
      `${name}: nothing of the backend's headers`,
    )
  }
})

t.test(
  "a payment's 5xx but 503 keeps no Retry-After: it may have been charged, and a client obeying it pays twice",
  async (t) => {
    const UNKNOWN = 'the outcome is unknown'
    const retry = ['Retry-After', '5', 'X-Other', 'kept']
    for (const status of [500, 502, 504, 599]) {
      // Red before: replaced by the unknown outcome, it still told the client when to send the payment again.
      const replaced = clientAnswer(status, retry, Buffer.from('boom'), NO_RULES, UNKNOWN)
      t.notOk('retry-after' in headersOf(replaced.headers), `${status} replaced`)
      const passed = clientAnswer(status, retry, json({ errorName: 'x', message: 'y' }), NO_RULES, UNKNOWN)
      t.notOk('retry-after' in headersOf(passed.headers), `${status} in the error format`)
      t.equal(headersOf(passed.headers)['x-other'], 'kept')
    }
    for (const status of [503, 429]) {
      const certain = clientAnswer(status, retry, Buffer.from('later'), NO_RULES, UNKNOWN)
      t.equal(headersOf(certain.headers)['retry-after'], '5', `${status}: it certainly did not happen`)
    }
    const other = clientAnswer(502, retry, Buffer.from('boom'), NO_RULES)
    t.equal(headersOf(other.headers)['retry-after'], '5', 'not a payment: kept')
  },
)

t.test('a payment redirected with its method and body kept (307, 308) is a 500 whose outcome is unknown', async (t) => {
  for (const status of [307, 308]) {
    t.ok(inspected(status, true), `${status} read on an operation`)
    t.notOk(inspected(status, false), `${status} streamed elsewhere`)
    for (const body of [Buffer.from(''), json({ errorName: 'moved', message: 'there' })]) {
      const answer = clientAnswer(
        status,
        ['Location', 'https://elsewhere.example/', 'Retry-After', '1'],
        body,
        NO_RULES,
        'unknown',
      )
      t.equal(answer.status, 500)
      t.same(JSON.parse(answer.body.toString()), { errorName: 'internalErrorOccurred', message: 'unknown' })
      t.notOk('location' in headersOf(answer.headers))
      t.notOk('retry-after' in headersOf(answer.headers))
    }
  }
  t.notOk(inspected(303, true), 'a 303 is followed with GET, without the body')
})

t.test('a status past 599 is none (RFC 9110 15): a 500, on a payment and elsewhere, whatever its body', async (t) => {
  for (const status of [600, 742, 999]) {
    t.ok(inspected(status, true) && inspected(status, false), `${status} read whole everywhere`)
    for (const body of [Buffer.from('odd'), json({ errorName: 'odd', message: 'in the error format' })]) {
      const payment = clientAnswer(status, ['Retry-After', '1'], body, NO_RULES, 'unknown')
      t.equal(payment.status, 500)
      t.same(JSON.parse(payment.body.toString()), { errorName: 'internalErrorOccurred', message: 'unknown' })
      t.notOk('retry-after' in headersOf(payment.headers), 'it may have been charged: no Retry-After')
      const other = clientAnswer(status, [], body, NO_RULES)
      t.equal(other.status, 500)
      t.equal(JSON.parse(other.body.toString()).errorName, 'internalErrorOccurred')
    }
  }
})

t.test("the reason phrase: the backend's while its status is kept, node's own for a status changed", async (t) => {
  const kept = clientAnswer(502, [], Buffer.from('x'), NO_RULES)
  t.equal(reasonOf(kept, 502, 'Bad Gateway Here'), 'Bad Gateway Here')
  const changed = clientAnswer(600, [], Buffer.from('x'), NO_RULES)
  t.equal(reasonOf(changed, 600, 'Weird'), undefined)
})

t.test('the headers the status needs are kept', async (t) => {
  const limited = clientAnswer(429, ['Retry-After', '30', 'X-Rate', '0'], Buffer.from('slow down'), NO_RULES)
  t.match(headersOf(limited.headers), { 'retry-after': '30' })
  t.notOk('x-rate' in headersOf(limited.headers))
  const challenge = clientAnswer(
    401,
    ['WWW-Authenticate', 'Bearer realm="api"', 'www-authenticate', 'Basic realm="api"'],
    undefined,
    NO_RULES,
  )
  t.equal(
    headersOf(challenge.headers)['www-authenticate'],
    'Bearer realm="api", Basic realm="api"',
    "the backend's challenges",
  )
  t.equal(challenge.errorName, 'accessDenied')
  const bare = clientAnswer(401, [], undefined, NO_RULES)
  t.equal(
    headersOf(bare.headers)['www-authenticate'],
    'Basic realm="payments", charset="UTF-8"',
    'RFC 9110: a 401 always has one',
  )
  const denied = clientAnswer(403, ['WWW-Authenticate', 'Basic'], undefined, NO_RULES)
  t.notOk('www-authenticate' in headersOf(denied.headers), 'only on a 401')
  const method = clientAnswer(405, ['Allow', 'GET, HEAD'], undefined, NO_RULES)
  t.equal(headersOf(method.headers).allow, 'GET, HEAD')
  t.equal(method.errorName, 'methodIsNotAllowed')
  t.notOk('allow' in headersOf(clientAnswer(404, ['Allow', 'GET'], undefined, NO_RULES).headers), 'only on a 405')
})

t.test("an error answer's header names, and values in UTF-8 digits, are masked too", async (t) => {
  // node gives a header's bytes as latin1 text, one character a byte: the client may read them as UTF-8.
  const latin1 = (text: string) => Buffer.from(text, 'utf8').toString('latin1')
  const relayed = clientAnswer(
    502,
    [
      'X-Declined-4444333322221111',
      'yes',
      'X-Card',
      latin1('４４４４３３３３２２２２１１１１ café'),
      'X-Plain',
      latin1('café 1'),
    ],
    json({ errorName: 'x', message: 'y' }),
    RULES,
  )
  // Red before: the name and the full-width digits went out whole, and were recorded and replayed.
  t.same(relayed.headers.slice(0, 6), [
    'X-Declined-444433******1111',
    'yes',
    'X-Card',
    latin1('４４４４３３******１１１１ café'),
    'X-Plain',
    latin1('café 1'),
  ])
})

t.test("a card number in the headers of an error answer is masked as the body's are, in both forms", async (t) => {
  // Red before: relayed whole, then recorded and replayed for the TTL.
  const relayed = clientAnswer(
    502,
    ['X-Card', '4444333322221111', 'Retry-After', '4444333322221111'],
    json({ errorName: 'x', message: 'y' }),
    RULES,
  )
  t.same(relayed.headers.slice(0, 4), ['X-Card', '444433******1111', 'Retry-After', '444433******1111'])
  const replaced = clientAnswer(503, ['Retry-After', '4444333322221111'], Buffer.from('<html>'), NO_RULES)
  t.same(replaced.headers.slice(replaced.headers.indexOf('Retry-After'), replaced.headers.indexOf('Retry-After') + 2), [
    'Retry-After',
    '444433******1111',
  ])
})

t.test('rules: the first match wins, by status and by values in the JSON body', async (t) => {
  const currency = clientAnswer(400, [], json({ code: 'E_CURRENCY', detail: 'EUR' }), RULES)
  t.same(JSON.parse(currency.body.toString()), {
    errorName: 'currencyIsNotSupported',
    message: ERRORS.currencyIsNotSupported.message,
  })
  t.equal(currency.status, 400)
  t.equal(
    clientAnswer(409, [], json({ code: 'E_CURRENCY' }), RULES).errorName,
    'requestIsInConflict',
    'its status only',
  )
  const limit = clientAnswer(
    422,
    ['Retry-After', '5'],
    json({ code: 'E_LIMIT', detail: 'card 4444333322221111 over its limit' }),
    RULES,
  )
  t.same(
    JSON.parse(limit.body.toString()),
    { errorName: 'cardLimitIsReached', message: 'card 444433******1111 over its limit' },
    'messageFrom, masked',
  )
  t.equal(limit.status, 422, "the backend's status wins")
  t.equal(headersOf(limit.headers)['retry-after'], '5')
  const noDetail = clientAnswer(422, [], json({ code: 'E_LIMIT', detail: 7 }), RULES)
  t.equal(
    JSON.parse(noDetail.body.toString()).message,
    'The card limit is reached.',
    "the rule's message when the path holds no string",
  )
  t.equal(clientAnswer(422, [], json({ code: 'E_LIMIT', detail: '' }), RULES).errorName, 'cardLimitIsReached')
  t.equal(
    clientAnswer(402, [], Buffer.from('<html>'), RULES).errorName,
    'paymentIsDeclined',
    'a rule without match takes any body',
  )
  t.equal(
    clientAnswer(400, [], Buffer.from('E_CURRENCY'), RULES).errorName,
    'requestIsInvalid',
    'a match needs a JSON body',
  )
  t.equal(clientAnswer(400, [], undefined, RULES).errorName, 'requestIsInvalid', 'nor a body past the read limit')
})

t.test(
  "a payment's 5xx named internalErrorOccurred by status takes the message given; a rule's, a 503's, a 4xx's and a backend's own never",
  async (t) => {
    const unknown = 'The outcome of this payment is unknown.'
    const named = compileBackendErrors({
      rules: [{ status: 504, errorName: 'ledgerIsSlow', message: 'The ledger is slow.' }],
    }) as BackendErrorRules
    const message = (status: number, body: Buffer = Buffer.from('<h1>oops</h1>')) =>
      JSON.parse(clientAnswer(status, [], body, named, unknown).body.toString()).message
    t.equal(message(500), unknown)
    t.equal(message(502), unknown)
    t.equal(message(504), 'The ledger is slow.', "a rule's message")
    t.equal(message(503), ERRORS.serviceUnavailable.message, 'a 503: the payment did not happen')
    t.equal(message(400), ERRORS.requestIsInvalid.message)
    t.equal(message(500, json({ errorName: 'ledgerFailed', message: 'the ledger said so' })), 'the ledger said so')
    t.equal(
      JSON.parse(clientAnswer(500, [], undefined, NO_RULES).body.toString()).message,
      ERRORS.internalErrorOccurred.message,
      'none given: the table',
    )
  },
)
