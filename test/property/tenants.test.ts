import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { isDeepStrictEqual } from 'node:util'
import { parse as parseContentType } from 'content-type'
import express from 'express'
import Fastify from 'fastify'
import fc from 'fast-check'
import { Hono } from 'hono'
import t from 'tap'
import type { Principal } from '../../lib/checks/auth.js'
import type { Mode } from '../../lib/policy/policy.js'
import {
  AUTH,
  BODY_LIMIT,
  ENTITIES,
  RECURRING_PATH,
  recurringBody,
  REQUEST_TYPE,
  SALE_PATH,
  saleBody,
  USERNAME,
} from '../helpers/fixtures.js'
import { serveHono } from '../helpers/hono-app.js'
import { runs } from '../helpers/fuzz.js'
import { paymentHeaders, send } from '../helpers/http.js'
import { asLenient, READINGS, readAt, readLeniently, respell, type Lenient } from '../helpers/lenient.js'
import { scanLogsForCards, watchCrashes } from '../helpers/logs.js'
import { closeServer, listenOnLoopback } from '../helpers/servers.js'
import { startGateway, testGate } from '../helpers/surfaces.js'

/**
 * Payments with members renamed in letter case, compatibility forms and Unicode folding, repeated, given another type, a
 * byte order mark or a comment, another method, Content-Type, charset, content coding or Connection,
 * or padded past the body limit, in both modes, through the core checks and every surface (the
 * proxy, node, Express, Fastify, Hono). The
 * oracle is a model of lenient backends (test/helpers/lenient.ts) behind a reader of the headers
 * (body-parser's `content-type`): whatever reaches the backend or the application's handler is
 * declared as the checks read it, and none of them reads an entity the user may not act for, nor a
 * value of a checked member other than the one the checks read (docs/checks.md, one spelling;
 * docs/rollout.md, report mode).
 */
const noCrashes = watchCrashes(t)
/** Has a policy, and is not among the test user's entities. */
const OTHER = 'eu-tokens'
const principal: Principal = { username: USERNAME, entities: new Set(ENTITIES) }

type Op = 'sale' | 'recurring'
const PATHS: Record<Op, string> = { sale: SALE_PATH, recurring: RECURRING_PATH }

/** The members the checks read, whose values a backend books. */
const CHECKED: readonly (readonly string[])[] = [
  ['merchant', 'entity'],
  ['merchant', 'paymentFacilitator'],
  ['transactionReference'],
  ['channel'],
  ['instruction', 'value', 'currency'],
  ['instruction', 'value', 'amount'],
  ['instruction', 'paymentInstrument', 'type'],
  ['instruction', 'paymentInstrument', 'cardNumber'],
  ['instruction', 'debtRepayment'],
  ['instruction', 'intent'],
]
const TARGETS = [
  ...CHECKED,
  ['merchant'],
  ['instruction'],
  ['instruction', 'value'],
  ['instruction', 'paymentInstrument'],
]
/** What a hostile client puts in a member's place, as JSON. */
const HOSTILE: Record<string, readonly string[]> = {
  entity: [`"${OTHER}"`, `["${OTHER}"]`, '7', 'null'],
  merchant: [`{"entity":"${OTHER}"}`, '"default"'],
  currency: ['"JPY"', '1'],
  amount: ['-1', '"5"', '1e3'],
  channel: ['"moto"', '"MOTO"'],
  type: ['"card/token"', '"other/x"'],
  cardNumber: ['"4111111111111112"', '4444333322221111'],
  transactionReference: ['"x y"', '"other"'],
  value: ['{"amount":1,"currency":"JPY"}'],
  instruction: ['{}'],
  paymentInstrument: ['{"type":"card/token","href":"x"}'],
  debtRepayment: ['true', '"yes"'],
  intent: ['"instalment"', '"x"'],
  paymentFacilitator: ['{"pfId":"x"}'],
}

/** A body as text is built from: members in order, repeats allowed; a value as its JSON. */
type Tree = { members: [string, Tree][] } | string

function treeOf(value: unknown): Tree {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
    ? { members: Object.entries(value).map(([key, member]): [string, Tree] => [key, treeOf(member)]) }
    : JSON.stringify(value)
}

function textOf(tree: Tree): string {
  return typeof tree === 'string'
    ? tree
    : `{${tree.members.map(([key, member]) => `${JSON.stringify(key)}:${textOf(member)}`).join(',')}}`
}

const KINDS = ['rename', 'siblingBefore', 'siblingAfter', 'repeatBefore', 'repeatAfter', 'retype', 'other'] as const
interface Mutation {
  readonly kind: (typeof KINDS)[number]
  readonly target: number
  readonly hostile: number
  /** Per character: 0 kept, 1 in the other case, 2 and up a character outside ASCII that folds to it (test/helpers/lenient.ts). */
  readonly spelling: readonly number[]
}

function mutate(tree: Tree, mutation: Mutation): void {
  const path = TARGETS[mutation.target % TARGETS.length] as readonly string[]
  let parent: Tree | undefined = tree
  for (const name of path.slice(0, -1)) {
    parent = typeof parent === 'string' ? undefined : parent?.members.find(([key]) => key === name)?.[1]
  }
  if (parent === undefined || typeof parent === 'string') return
  const name = path.at(-1) as string
  const pool = HOSTILE[name] as readonly string[]
  const hostile = pool[mutation.hostile % pool.length] as string
  const { members } = parent
  const at = members.findIndex(([key]) => key === name)
  const where = at === -1 ? members.length : at
  const other = respell(name, mutation.spelling)
  switch (mutation.kind) {
    case 'rename':
      if (at !== -1) (members[at] as [string, Tree])[0] = other
      break
    case 'siblingBefore':
      members.splice(where, 0, [other, hostile])
      break
    case 'siblingAfter':
      members.splice(where + 1, 0, [other, hostile])
      break
    case 'repeatBefore':
      members.splice(where, 0, [name, hostile])
      break
    case 'repeatAfter':
      members.splice(where + 1, 0, [name, hostile])
      break
    case 'retype':
      members.splice(where, at === -1 ? 0 : 1, [name, hostile])
      break
    case 'other': {
      const merchant = tree as { members: [string, Tree][] }
      const entity = merchant.members.find(([key]) => key === 'merchant')?.[1]
      if (entity !== undefined && typeof entity !== 'string') entity.members.splice(0, 1, ['entity', `"${OTHER}"`])
    }
  }
}

const WRAPS = ['none', 'none', 'none', 'none', 'none', 'none', 'bom', 'comment', 'innerComment', 'pad'] as const
interface Case {
  readonly op: Op
  readonly mutations: readonly Mutation[]
  readonly wrap: (typeof WRAPS)[number]
  readonly method: 'POST' | 'PUT'
  /** The headers beside a well-formed payment's, by their index in HEADS. */
  readonly head: number
}

/**
 * What a client declares of its body: each but the first five (the v6 type, or a JSON type in UTF-8, which
 * report mode passes on) has a backend that goes by it read another body.
 */
const HEADS: readonly Readonly<Record<string, string | undefined>>[] = [
  {},
  { 'content-type': `${REQUEST_TYPE}; charset=UTF-8` },
  { 'content-type': 'application/json' },
  { 'content-type': 'application/json; charset=utf-8' },
  { 'content-type': 'application/merchant+json' },
  { 'content-type': 'text/json' },
  { 'content-type': 'application/json; charset=utf-16' },
  { 'content-type': 'application/json', 'content-encoding': 'gzip' },
  { 'content-type': 'application/x-www-form-urlencoded' },
  { 'content-type': 'multipart/form-data; boundary=x' },
  { 'content-type': `${REQUEST_TYPE}; charset=utf-7` },
  { 'content-type': `${REQUEST_TYPE}; CHARSET=latin1` },
  { 'content-type': `${REQUEST_TYPE}; charset=utf-7; charset=utf-8` },
  { 'content-type': undefined },
  { 'content-encoding': 'gzip' },
  { connection: 'content-type' },
  { connection: 'keep-alive, Authorization, accept' },
]

function bodyOf(c: Case): string {
  const tree = treeOf(c.op === 'sale' ? saleBody() : recurringBody())
  for (const mutation of c.mutations) mutate(tree, mutation)
  const text = textOf(tree)
  switch (c.wrap) {
    case 'bom':
      return `\ufeff${text}`
    case 'comment':
      return `/* c */${text}`
    case 'innerComment':
      return text.replace('{', '{/* c */')
    case 'pad':
      return text.replace('{', `{"pad":"${'z'.repeat(BODY_LIMIT)}",`)
    default:
      return text
  }
}

const cases = fc.record<Case>({
  op: fc.constantFrom('sale', 'recurring'),
  mutations: fc.array(
    fc.record<Mutation>({
      kind: fc.constantFrom(...KINDS),
      target: fc.nat(),
      hostile: fc.nat(),
      spelling: fc.array(fc.oneof(fc.constant(0), fc.constant(1), fc.integer({ min: 2, max: 10_000 })), {
        minLength: 1,
        maxLength: 24,
      }),
    }),
    { maxLength: 2 },
  ),
  wrap: fc.constantFrom(...WRAPS),
  method: fc.constantFrom('POST', 'POST', 'POST', 'POST', 'PUT'),
  head: fc.oneof({ arbitrary: fc.constant(0), weight: 3 }, { arbitrary: fc.nat(HEADS.length - 1), weight: 2 }),
})

/** The headers as an intermediary that follows RFC 9110 7.6.1 passes them on: without those `Connection` names. */
function hopped(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const named = String(headers.connection ?? '')
    .split(',')
    .map((name) => name.trim().toLowerCase())
  return Object.fromEntries(Object.entries(headers).filter(([name]) => name === 'connection' || !named.includes(name)))
}

/**
 * The types a backend reads as JSON, in the charset declared: `application/json` and the `+json` suffix, as
 * body-parser's `json()` given `['application/json', '+json']` takes them (the v6 type is one).
 */
function readAsJson(type: string): boolean {
  const [top, sub = ''] = type.split('/')
  return top === 'application' && (sub === 'json' || sub.endsWith('+json'))
}

/**
 * The headers' half of the oracle: the body is declared as the checks read it, to body-parser's reader
 * of `Content-Type` (a JSON type, its charset UTF-8 when given) and to a reader that takes any of the
 * `charset` parameters; no content coding; the credentials the checks saw still there after a hop.
 */
function declaredAsChecked(headers: IncomingHttpHeaders): boolean {
  const after = hopped(headers)
  const value = after['content-type'] ?? ''
  let media: ReturnType<typeof parseContentType>
  try {
    media = parseContentType(value)
  } catch {
    return false
  }
  const charsets = [...value.matchAll(/;\s*charset\s*=\s*"?([^";\s]*)/gi)].map((match) => match[1]?.toLowerCase())
  return (
    readAsJson(media.type) &&
    charsets.every((charset) => charset === 'utf-8') &&
    (after['content-encoding'] ?? 'identity') === 'identity' &&
    after.authorization === AUTH
  )
}

/** What one backend or handler was handed: its document, read leniently, and the headers beside it. */
interface Booked {
  readonly body: Lenient | undefined
  readonly headers: IncomingHttpHeaders
}

/**
 * The oracle, on what one backend or handler was handed: every reading of it names an entity the
 * user may act for, and reads each checked member as the checks read the body that was sent.
 */
function faithful({ body: booked, headers }: Booked, sent: string): boolean {
  if (!declaredAsChecked(headers)) return false
  if (booked === undefined) return true
  const seen = asLenient(JSON.parse(sent))
  const strict = { fold: 'none', wins: 'last' } as const
  return READINGS.every(
    (reading) =>
      principal.entities.has(readAt(booked, ['merchant', 'entity'], reading) as string) &&
      CHECKED.every((path) => isDeepStrictEqual(readAt(booked, path, reading), readAt(seen, path, strict))),
  )
}

function headersOf(c: Case): Record<string, string> {
  const headers = paymentHeaders(HEADS[c.head]) as Record<string, string | undefined>
  return Object.fromEntries(Object.entries(headers).filter(([, value]) => value !== undefined)) as Record<
    string,
    string
  >
}

for (const mode of ['enforce', 'report'] as const satisfies readonly Mode[]) {
  t.test(`${mode}: the core checks hand on nothing a lenient backend reads otherwise`, async (t) => {
    const { checks } = await testGate(t, { mode })
    let handed = 0
    fc.assert(
      fc.property(cases, (c) => {
        const sent = bodyOf(c)
        if (typeof checks.route(c.method, PATHS[c.op]) !== 'string') return true
        const headers = headersOf(c)
        const verdict = checks.check(c.op, headers, Buffer.from(sent), principal)
        if (!verdict.ok) return true
        handed++
        const body = verdict.ok === true ? asLenient(verdict.document) : readLeniently(verdict.body)
        return faithful({ body, headers }, sent)
      }),
      runs(),
    )
    t.ok(handed > 0, 'some payments were handed on')
  })

  t.test(`${mode}: no surface lets a lenient backend or handler book what the checks did not see`, async (t) => {
    const gate = await testGate(t, { mode })
    const { url, backend } = await startGateway(t, { gate: { mode, bodyLimit: BODY_LIMIT } })
    const booked: Booked[] = []
    const node = createServer(
      gate.handler((req, res, passed, _id, report) => {
        booked.push({ body: asLenient(report?.received ?? passed?.document), headers: req.headers })
        res.end()
      }),
    )
    t.teardown(() => closeServer(node))
    const app = express()
    app.use(gate.express())
    app.all([SALE_PATH, RECURRING_PATH], (req, res) => {
      booked.push({ body: asLenient(req.body), headers: req.headers })
      res.end()
    })
    const server = createServer(app)
    t.teardown(() => closeServer(server))
    const fastify = Fastify()
    await fastify.register(gate.fastify)
    fastify.route({
      method: ['POST', 'PUT'],
      url: '/payments/*',
      handler: async (request) => (booked.push({ body: asLenient(request.body), headers: request.headers }), ''),
    })
    await fastify.listen({ port: 0, host: '127.0.0.1' })
    t.teardown(() => fastify.close())
    const hono = new Hono()
    hono.use('/payments/*', gate.hono())
    hono.on(['POST', 'PUT'], [SALE_PATH, RECURRING_PATH], (c) => {
      const headers = Object.fromEntries(c.req.raw.headers)
      booked.push({ body: asLenient(c.req.valid('json' as never)), headers })
      return c.body(null)
    })
    const ports = [
      await listenOnLoopback(node),
      await listenOnLoopback(server),
      (fastify.server.address() as AddressInfo).port,
      await serveHono(t, hono),
    ]
    let handed = 0
    await fc.assert(
      fc.asyncProperty(cases, async (c) => {
        const sent = bodyOf(c)
        const request = { method: c.method, path: PATHS[c.op], headers: headersOf(c), body: sent }
        const before = backend.received.length
        await send(url, request)
        for (const got of backend.received.slice(before))
          booked.push({ body: readLeniently(got.body), headers: got.headers })
        for (const port of ports) await send(port, request)
        const all = booked.splice(0)
        handed += all.length
        return all.every((one) => faithful(one, sent))
      }),
      runs(0.1),
    )
    t.ok(handed > 0, 'some payments were handed on')
  })
}

scanLogsForCards(t)
noCrashes()
