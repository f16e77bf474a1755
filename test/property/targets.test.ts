import fc from 'fast-check'
import t from 'tap'
import {
  AUTH,
  RECURRING_PATH,
  recurringBody,
  REQUEST_TYPE,
  RESPONSE_TYPE,
  SALE_PATH,
  saleBody,
} from '../helpers/fixtures.js'
import { runs, setPath } from '../helpers/fuzz.js'
import { raw } from '../helpers/http.js'
import { scanLogsForCards, watchCrashes } from '../helpers/logs.js'
import { startGateway } from '../helpers/surfaces.js'

/**
 * Request targets (docs/checks.md, routes) as raw requests through the
 * gateway to a backend that records what it gets. Every target generated is a
 * spelling of an operation's path that some backend reads as that path: the
 * absolute form, a fragment, dot segments, percent-escapes (once or twice),
 * letter case and the letters that fold to ASCII ones (`ſ`, `ı`, `İ`, the
 * Kelvin sign), repeated slashes, backslashes, path parameters, suffixes. The
 * oracle: nothing reaches the backend that was not authenticated and checked,
 * that is, a request the backend receives carries the test user's credentials
 * and the body as the gateway rewrote it (its narrative's `!` made a space);
 * a request sent without credentials, or with another method, never reaches it.
 */
const noCrashes = watchCrashes(t)
const { port, backend } = await startGateway(t)

/** One character of a path as some backend reads it as that character. */
function spellingsOf(char: string): fc.Arbitrary<string> {
  const escaped = `%${char.charCodeAt(0).toString(16).padStart(2, '0')}`
  const folds: Record<string, string[]> = {
    s: ['%C5%BF'],
    i: ['%C4%B1', '%C4%B0'],
    k: ['%E2%84%AA'],
    f: ['%EF%BD%86'],
  }
  return fc.constantFrom(
    char,
    char.toUpperCase(),
    escaped,
    escaped.toUpperCase(),
    `%25${escaped.slice(1)}`,
    ...(folds[char.toLowerCase()] ?? []),
  )
}

/** A slash between segments, as some backend reads it. */
const SLASH = fc.constantFrom('/', '//', '\\', '%2F', '%5c', '/./', '/x/../', '/%2e/', '/x/%2E%2E/', ';p=1/')

/** A spelling of `path`: each character and each slash respelt, with a form, a suffix and a query. */
function spelt(path: string): fc.Arbitrary<string> {
  const parts = path
    .slice(1)
    .split('/')
    .map((segment) => fc.tuple(...[...segment].map(spellingsOf)).map((chars) => chars.join('')))
  return fc
    .record({
      form: fc.constantFrom('', '', 'http://any-host', 'HTTPS://h:8443', 'http://h'),
      slashes: fc.array(SLASH, { minLength: parts.length, maxLength: parts.length }),
      segments: fc.tuple(...parts),
      suffix: fc.constantFrom('', '/', ';jsessionid=1', '.json', '.', '#x', '%00', '%3Fx', '/x/..'),
      query: fc.constantFrom('', '?a=1', '?'),
    })
    .map(({ form, slashes, segments, suffix, query }) => {
      const joined = segments.map((segment, at) => `${slashes[at]}${segment}`).join('')
      return `${form}${joined.startsWith('/') ? '' : '/'}${joined}${suffix}${query}`
    })
}

/** A body whose narrative the gateway rewrites (`!` is no supported character): the mark of a checked body. */
function marked(body: Record<string, unknown>): string {
  setPath(body, 'instruction.narrative.line1', 'Marked!')
  return JSON.stringify(body)
}
const BODIES = { sale: marked(saleBody()), recurring: marked(recurringBody()) }

const request = fc.oneof(
  fc.record({ op: fc.constant('sale' as const), target: spelt(SALE_PATH) }),
  fc.record({ op: fc.constant('recurring' as const), target: spelt(RECURRING_PATH) }),
)

/** One raw request on its own connection; what the backend received meanwhile. */
async function through(method: string, target: string, credentials: boolean, body: string) {
  const before = backend.received.length
  const authorization = credentials ? `Authorization: ${AUTH}\r\n` : ''
  const head = `${method} ${target} HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n${authorization}Content-Type: ${REQUEST_TYPE}\r\nAccept: ${RESPONSE_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`
  const answer = await raw(port, head + body, { keepOpen: true })
  return { status: Number(answer.split(' ')[1]), received: backend.received.slice(before) }
}

t.test('no spelling of an operation path reaches the backend unauthenticated or unchecked', async (t) => {
  let forwarded = 0
  await fc.assert(
    fc.asyncProperty(
      request,
      fc.boolean(),
      fc.constantFrom('POST', 'POST', 'PUT'),
      async ({ op, target }, credentials, method) => {
        const { status, received } = await through(method, target, credentials, BODIES[op])
        forwarded += received.length
        if (!credentials || method !== 'POST') return received.length === 0 && status >= 400 && status < 500
        return (
          received.length <= 1 &&
          received.every(
            (got) =>
              got.method === 'POST' &&
              got.headers.authorization === AUTH &&
              !got.body.includes('!') &&
              got.body.includes('Marked '),
          )
        )
      },
    ),
    runs(0.5),
  )
  t.ok(forwarded > 0, `some were checked and forwarded (${forwarded})`)
})

noCrashes()
scanLogsForCards(t)
