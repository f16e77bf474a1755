import fc from 'fast-check'
import t from 'tap'
import { buildRouter } from '../../lib/checks/route.js'
import { AUTH, RECURRING_PATH, REQUEST_TYPE, RESPONSE_TYPE, SALE_PATH, saleBody } from '../helpers/fixtures.js'
import { runs } from '../helpers/fuzz.js'
import { raw } from '../helpers/http.js'
import { scanLogsForCards, watchCrashes } from '../helpers/logs.js'
import { readersTaking } from '../helpers/readers.js'
import { startGateway } from '../helpers/surfaces.js'

/**
 * Differential testing of request targets (docs/checks.md, routes): whatever the gateway lets through
 * unchecked must be a target that no reader takes for an operation's path. The readers are independent
 * of lib/ (test/helpers/readers.ts): WHATWG `URL` given a base (node's documented way to read
 * `req.url`) and joined to one, node's legacy `url.parse` with and without `slashesDenoteHost`, RFC 3986
 * reference resolution, each alone, behind another, or behind a hop that decodes, then read by routers
 * that decode once or twice, cut at a decoded NUL, `?` or `#` before or after removing dot segments,
 * merge slashes and ignore case. The targets put segments in front of an operation's path (`//evil/`,
 * `/a/..//b/`, `/v5/`), encoded cuts before dot segments (`%00`, `%3F`, `%23`, escaped twice),
 * repeated slashes, backslashes, escaped separators and dots, and respell the operation's own letters.
 */
const noCrashes = watchCrashes(t)

/** A segment that may come before an operation's path. */
const SEGMENT = fc.constantFrom(
  'evil',
  'v5',
  'admin',
  'A',
  'x%00',
  'x%3F',
  'x%3f',
  'x%23',
  'x%2500',
  'x%253F',
  'u@h',
  'h:80',
  'x;p=1',
  'evil\\x',
  '%2F',
  '%5C',
  'x%2Fy',
  '%2e',
  '%2E%2E',
  '..',
  '.',
  '.%2e',
  '%252e%252e',
  '..;',
  '%09',
  'x%0A',
  '',
)
/** What goes between segments. */
const SEPARATOR = fc.constantFrom('/', '/', '/', '//', '\\', '%2F', '%2f', '%5C', '%252F', '/./')
/** How a target starts. */
const LEAD = fc.constantFrom('', '', '/', '//', '/\\', '\\', '/%2F', 'http://h', 'http://h/')

/** One character of an operation's path as some router reads it as that character. */
function spellingsOf(char: string): fc.Arbitrary<string> {
  const escaped = `%${char.charCodeAt(0).toString(16).padStart(2, '0')}`
  const folds: Record<string, string> = { s: '%C5%BF', i: '%C4%B1', k: '%E2%84%AA' }
  const fold = folds[char.toLowerCase()]
  return fc.constantFrom(
    char,
    char,
    char,
    char.toUpperCase(),
    escaped,
    `%25${escaped.slice(1)}`,
    ...(fold ? [fold] : []),
  )
}

/** An operation's path, its letters respelt now and then, its slashes as SEPARATOR makes them. */
function operationPath(path: string): fc.Arbitrary<string> {
  const segments = path.slice(1).split('/')
  return fc
    .tuple(
      fc.array(SEPARATOR, { minLength: segments.length, maxLength: segments.length }),
      fc.tuple(...segments.map((segment) => fc.tuple(...[...segment].map(spellingsOf)).map((chars) => chars.join('')))),
    )
    .map(([separators, spelt]) => spelt.map((segment, at) => `${separators[at]}${segment}`).join(''))
}

/** A request target: a start, segments in front, an operation's path, a suffix and a query. */
const TARGET = fc
  .record({
    lead: LEAD,
    front: fc.array(fc.tuple(SEGMENT, SEPARATOR), { maxLength: 4 }),
    operation: fc.oneof(operationPath(SALE_PATH), operationPath(RECURRING_PATH)),
    suffix: fc.constantFrom('', '', '/', '%00', '%3Fx', '/..', '/x/..', '%2F..%2F..', '%20', '%09', '.json', ';a=1'),
    query: fc.constantFrom('', '', '?a=1', '?/../x'),
  })
  .map(({ lead, front, operation, suffix, query }) => {
    const segments = front.map(([segment, separator]) => `${segment}${separator}`).join('')
    const path = `${segments}${operation.replace(/^\//, '')}`
    return `${lead}${lead.endsWith('/') || path.startsWith('/') ? '' : '/'}${path}${suffix}${query}`
  })

const PAYMENT_PATHS = [SALE_PATH, RECURRING_PATH]

t.test('a target the router passes through is one no reader takes for an operation', async (t) => {
  const targetOf = buildRouter('')
  const seen = { checked: 0, refused: 0, passed: 0 }
  fc.assert(
    fc.property(TARGET, (target) => {
      const routed = targetOf(target)
      if (!routed.ok) seen.refused++
      else if (routed.operation !== undefined) seen.checked++
      else {
        seen.passed++
        const readers = readersTaking(routed.path, PAYMENT_PATHS)
        if (readers.length > 0)
          throw new Error(`${target} forwarded as ${routed.path}, read as a payment by ${readers[0]}`)
      }
      return true
    }),
    runs(5),
  )
  t.ok(
    seen.checked > 0 && seen.refused > 0 && seen.passed > 0,
    `checked, refused and passed through: ${JSON.stringify(seen)}`,
  )
})

/** Segments that every reader reads alike: no escape, backslash, parameter or dot segment. */
const PLAIN = fc.constantFrom('v5', 'admin', 'x', 'API', 'payments', 'sales', 'authorizations', 'migrateCardOnFile')

t.test('an operation path below plain segments is passed through by the proxy: no suffix rule', async (t) => {
  const targetOf = buildRouter('')
  fc.assert(
    fc.property(
      fc.array(PLAIN, { minLength: 1, maxLength: 3 }),
      fc.constantFrom(SALE_PATH, RECURRING_PATH),
      (front, path) => {
        const target = `/${front.join('/')}${path}`
        const routed = targetOf(target)
        // Unless the segments in front spell the operation's path themselves.
        const named = readersTaking(target, PAYMENT_PATHS).length > 0
        return routed.ok && routed.path === target && (routed.operation !== undefined) === named
      },
    ),
    runs(1),
  )
})

t.test('fixed examples: segments in front, cuts before dot segments', async (t) => {
  const targetOf = buildRouter('')
  for (const target of [
    '//evil/payments/sales/migrateCardOnFile',
    'http://x//evil/payments/sales/migrateCardOnFile',
    '/\\evil/payments/sales/migrateCardOnFile',
    '/x%00/../payments/sales/migrateCardOnFile',
    '/x%3F/../payments/sales/migrateCardOnFile',
    '/x%23/../payments/sales/migrateCardOnFile',
    '/x%2500/%252e%252e/payments/sales/migrateCardOnFile',
    '/a/..//b/payments/sales/migrateCardOnFile',
    '/%2F%2Fevil/payments/sales/migrateCardOnFile',
  ]) {
    t.ok(readersTaking(target, PAYMENT_PATHS).length > 0, `${target}: a reader takes it for the sale`)
    t.match(targetOf(target), { ok: true, operation: 'sale' }, `${target}: checked as the sale`)
  }
})

/** One raw request on its own connection: the status, and the targets the backend received meanwhile. */
async function sent(port: number, received: { url: string }[], target: string, body: string, headers = '') {
  const before = received.length
  const answer = await raw(
    port,
    `POST ${target} HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n${headers}Content-Type: ${REQUEST_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    { keepOpen: true },
  )
  return { status: Number(answer.split(' ')[1]), urls: received.slice(before).map((got) => got.url) }
}

t.test('through the gateway: what is checked, what is forwarded, and with which path', async (t) => {
  // Retry protection on: a path passed through must stay out of its keys.
  const { port, backend } = await startGateway(t, { idempotency: 'memory' })
  const payment = JSON.stringify(saleBody())
  const authorized = `Authorization: ${AUTH}\r\nAccept: ${RESPONSE_TYPE}\r\n`
  t.same(await sent(port, backend.received, '//evil/payments/sales/migrateCardOnFile', payment), {
    status: 401,
    urls: [],
  })
  t.same(await sent(port, backend.received, '/x%00/../payments/sales/migrateCardOnFile', payment), {
    status: 401,
    urls: [],
  })
  t.same(
    await sent(port, backend.received, '//payments/sales/migrateCardOnFile?x=1', payment, authorized),
    { status: 201, urls: ['/payments/sales/migrateCardOnFile?x=1'] },
    'checked, then sent with one leading slash (undici)',
  )
  t.same(
    await sent(port, backend.received, '//evil/elsewhere', 'not a payment'),
    { status: 201, urls: ['/evil/elsewhere'] },
    'passed through with one leading slash (http-proxy-3)',
  )
  for (const target of ['/v5/payments/sales/migrateCardOnFile', '/admin/x/payments/sales/migrateCardOnFile']) {
    // The same payment twice: passed through both times, never replayed.
    for (const time of [1, 2])
      t.same(await sent(port, backend.received, target, payment), { status: 201, urls: [target] }, `${target}, ${time}`)
  }
})

t.test('through the gateway: nothing a reader takes for a payment reaches the backend unauthenticated', async (t) => {
  const { port, backend } = await startGateway(t)
  let refused = 0
  await fc.assert(
    fc.asyncProperty(TARGET, fc.boolean(), async (target, credentials) => {
      const before = backend.received.length
      const body = '{"not":"checked"}'
      const authorization = credentials ? `Authorization: ${AUTH}\r\n` : ''
      const answer = await raw(
        port,
        `POST ${target} HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n${authorization}Content-Type: ${REQUEST_TYPE}\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
        { keepOpen: true },
      )
      const received = backend.received.slice(before)
      if (received.length === 0) {
        refused++
        return /^HTTP\/1\.1 4\d\d /.test(answer)
      }
      // Passed through: an answer from the backend, to a target no reader takes for a payment.
      const readers = received.flatMap((got) => readersTaking(got.url, PAYMENT_PATHS))
      if (readers.length > 0) throw new Error(`${target} reached the backend, read as a payment by ${readers[0]}`)
      return received.length === 1 && answer.startsWith('HTTP/1.1 201 ')
    }),
    runs(0.5),
  )
  t.ok(refused > 0, `some were refused (${refused})`)
})

noCrashes()
scanLogsForCards(t)
